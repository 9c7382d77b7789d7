//! Canonical bytestring encoding of P4Runtime values (spec §8.4).
//!
//! A `bit<W>` value travels as a big-endian bytestring. The canonical form
//! is the shortest string that holds the value, at least one byte, so zero
//! is `[0x00]`. Servers may also send the padded form, `ceil(W/8)` bytes;
//! both decode, and a value needing more than `W` bits is refused.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Why a value does not fit its field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("value needs {needed} bits, more than the field's {bitwidth}")]
    TooWide { bitwidth: u32, needed: u32 },
    #[error("empty bytestring; even zero is one byte")]
    Empty,
    #[error("bitwidth {bitwidth} is not usable")]
    BadBitwidth { bitwidth: i32 },
    #[error("decoded value needs {needed} bits, more than the {limit} of the requested integer type")]
    Overflow { needed: u32, limit: u32 },
    #[error("prefix length {prefix_len} is outside 0..={bitwidth}")]
    PrefixLen { prefix_len: i32, bitwidth: u32 },
    #[error("value has bits set outside its mask")]
    OutsideMask,
}

/// A value given by the caller, as big-endian bytes of any length.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bits(pub Vec<u8>);

macro_rules! bits_from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Bits {
            fn from(v: $t) -> Self {
                Bits(v.to_be_bytes().to_vec())
            }
        }
    )*};
}
bits_from_int!(u8, u16, u32, u64, u128);

impl From<Ipv4Addr> for Bits {
    fn from(v: Ipv4Addr) -> Self {
        Bits(v.octets().to_vec())
    }
}
impl From<Ipv6Addr> for Bits {
    fn from(v: Ipv6Addr) -> Self {
        Bits(v.octets().to_vec())
    }
}
impl From<[u8; 6]> for Bits {
    fn from(v: [u8; 6]) -> Self {
        Bits(v.to_vec())
    }
}
impl From<&[u8]> for Bits {
    fn from(v: &[u8]) -> Self {
        Bits(v.to_vec())
    }
}
impl From<Vec<u8>> for Bits {
    fn from(v: Vec<u8>) -> Self {
        Bits(v)
    }
}

/// Number of significant bits in a big-endian bytestring.
pub fn significant_bits(bytes: &[u8]) -> u32 {
    match bytes.iter().position(|b| *b != 0) {
        None => 0,
        Some(i) => {
            let rest = u32::try_from(bytes.len() - i - 1).unwrap_or(u32::MAX / 16);
            rest * 8 + (8 - bytes[i].leading_zeros())
        }
    }
}

fn width(bitwidth: i32) -> Result<u32, ValueError> {
    u32::try_from(bitwidth).ok().filter(|w| *w > 0).ok_or(ValueError::BadBitwidth { bitwidth })
}

/// The canonical form of `bytes` for a `bit<bitwidth>` field: leading zero
/// bytes stripped, at least one byte. Accepts padded and canonical input.
pub fn canonical(bytes: &[u8], bitwidth: i32) -> Result<Vec<u8>, ValueError> {
    let bitwidth = width(bitwidth)?;
    if bytes.is_empty() {
        return Err(ValueError::Empty);
    }
    let needed = significant_bits(bytes);
    if needed > bitwidth {
        return Err(ValueError::TooWide { bitwidth, needed });
    }
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len() - 1);
    Ok(bytes[first..].to_vec())
}

/// Encodes a caller value for a `bit<bitwidth>` field.
pub fn encode(value: impl Into<Bits>, bitwidth: i32) -> Result<Vec<u8>, ValueError> {
    let Bits(bytes) = value.into();
    if bytes.is_empty() {
        return canonical(&[0], bitwidth);
    }
    canonical(&bytes, bitwidth)
}

/// Decodes a bytestring of a `bit<bitwidth>` field into an integer.
pub fn decode_u128(bytes: &[u8], bitwidth: i32) -> Result<u128, ValueError> {
    let c = canonical(bytes, bitwidth)?;
    let needed = significant_bits(&c);
    if needed > 128 {
        return Err(ValueError::Overflow { needed, limit: 128 });
    }
    Ok(c.iter().fold(0u128, |acc, b| (acc << 8) | u128::from(*b)))
}

/// Decodes a bytestring into a `u64`, refusing values that do not fit.
pub fn decode_u64(bytes: &[u8], bitwidth: i32) -> Result<u64, ValueError> {
    let v = decode_u128(bytes, bitwidth)?;
    u64::try_from(v).map_err(|_| ValueError::Overflow { needed: 128 - v.leading_zeros(), limit: 64 })
}

/// The value padded to `ceil(bitwidth/8)` bytes, the form older servers
/// (and BMv2's Thrift API) expect.
pub fn padded(bytes: &[u8], bitwidth: i32) -> Result<Vec<u8>, ValueError> {
    let c = canonical(bytes, bitwidth)?;
    let len = width(bitwidth)?.div_ceil(8) as usize;
    let mut out = vec![0u8; len.saturating_sub(c.len())];
    out.extend_from_slice(&c);
    Ok(out)
}

/// A mask of `prefix_len` leading ones in a `bit<bitwidth>` field, padded.
pub fn prefix_mask(prefix_len: i32, bitwidth: i32) -> Result<Vec<u8>, ValueError> {
    let w = width(bitwidth)?;
    let p = u32::try_from(prefix_len)
        .ok()
        .filter(|p| *p <= w)
        .ok_or(ValueError::PrefixLen { prefix_len, bitwidth: w })?;
    let len = w.div_ceil(8) as usize;
    let mut out = vec![0u8; len];
    let lead = len as u32 * 8 - w; // unused high bits of the first byte
    for bit in lead..lead + p {
        out[(bit / 8) as usize] |= 0x80 >> (bit % 8);
    }
    Ok(out)
}

/// `a & mask` over padded operands of equal length.
pub fn and(a: &[u8], mask: &[u8]) -> Vec<u8> {
    a.iter().zip(mask).map(|(x, m)| x & m).collect()
}

/// Padded-width comparison of two canonical values.
pub fn cmp(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let strip = |x: &[u8]| {
        let i = x.iter().position(|b| *b != 0).unwrap_or(x.len());
        x[i..].to_vec()
    };
    let (a, b) = (strip(a), strip(b));
    a.len().cmp(&b.len()).then_with(|| a.cmp(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_one_byte() {
        assert_eq!(encode(0u32, 9).unwrap(), vec![0]);
        assert_eq!(encode(Vec::new(), 9).unwrap(), vec![0]);
        assert_eq!(decode_u64(&[0], 9).unwrap(), 0);
        assert_eq!(decode_u64(&[0, 0], 9).unwrap(), 0);
    }

    #[test]
    fn full_width_fits_and_one_more_bit_does_not() {
        assert_eq!(encode(0x1ffu32, 9).unwrap(), vec![0x01, 0xff]);
        assert_eq!(encode(0x200u32, 9), Err(ValueError::TooWide { bitwidth: 9, needed: 10 }));
        assert_eq!(encode(u64::MAX, 64).unwrap(), vec![0xff; 8]);
        assert_eq!(encode(u128::MAX, 128).unwrap(), vec![0xff; 16]);
        assert_eq!(encode(1u8, 1).unwrap(), vec![1]);
        assert!(encode(2u8, 1).is_err());
        assert_eq!(decode_u64(&[0xff; 8], 64).unwrap(), u64::MAX);
        assert!(decode_u64(&[1, 0, 0, 0, 0, 0, 0, 0, 0], 72).is_err());
    }

    #[test]
    fn leading_zero_bytes_are_stripped_both_ways() {
        assert_eq!(encode(0x0000_00abu32, 32).unwrap(), vec![0xab]);
        assert_eq!(canonical(&[0, 0, 0x0a, 0x01], 32).unwrap(), vec![0x0a, 0x01]);
        assert_eq!(decode_u64(&[0x00, 0x0a, 0x01], 24).unwrap(), 0x0a01);
        // Padded input wider than the field is fine if the value fits.
        assert_eq!(decode_u64(&[0x00, 0x00, 0x01], 9).unwrap(), 1);
        assert_eq!(padded(&[0x01], 12).unwrap(), vec![0x00, 0x01]);
    }

    #[test]
    fn bad_inputs_are_typed() {
        assert_eq!(canonical(&[], 8), Err(ValueError::Empty));
        assert_eq!(encode(1u8, 0), Err(ValueError::BadBitwidth { bitwidth: 0 }));
        assert_eq!(encode(1u8, -3), Err(ValueError::BadBitwidth { bitwidth: -3 }));
        assert!(matches!(prefix_mask(33, 32), Err(ValueError::PrefixLen { .. })));
    }

    #[test]
    fn masks_and_order() {
        assert_eq!(prefix_mask(24, 32).unwrap(), vec![0xff, 0xff, 0xff, 0x00]);
        assert_eq!(prefix_mask(3, 9).unwrap(), vec![0x01, 0xc0]);
        assert_eq!(prefix_mask(0, 9).unwrap(), vec![0, 0]);
        assert_eq!(cmp(&[0, 5], &[4]), std::cmp::Ordering::Greater);
        assert_eq!(cmp(&[1, 0], &[0xff]), std::cmp::Ordering::Greater);
    }
}
