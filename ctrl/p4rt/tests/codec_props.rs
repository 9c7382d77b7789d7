//! L0 properties of the canonical bytestring codec.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use metaroce_p4rt::codec::{canonical, decode_u128, encode, padded, ValueError};
use proptest::prelude::*;

proptest! {
    #[test]
    fn encode_decode_round_trip(v in any::<u128>(), w in 1i32..=128) {
        let needed = 128 - v.leading_zeros();
        match encode(v, w) {
            Ok(b) => {
                prop_assert!(needed <= w as u32);
                prop_assert!(!b.is_empty());
                prop_assert!(b.len() == 1 || b[0] != 0, "canonical: no leading zero byte");
                prop_assert_eq!(decode_u128(&b, w).unwrap(), v);
                let p = padded(&b, w).unwrap();
                prop_assert_eq!(p.len(), (w as usize).div_ceil(8));
                prop_assert_eq!(canonical(&p, w).unwrap(), b);
            }
            Err(ValueError::TooWide { needed: n, bitwidth }) => {
                prop_assert_eq!(n, needed);
                prop_assert_eq!(bitwidth, w as u32);
                prop_assert!(needed > w as u32);
            }
            Err(e) => prop_assert!(false, "unexpected {e}"),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40), w in -4i32..300) {
        let _ = canonical(&b, w);
        let _ = decode_u128(&b, w);
        let _ = padded(&b, w);
    }
}
