//! The two hashes of the program: the flow hash (`crc32` over the flow
//! key: slot and signature) and the selector hash (`crc16` over the
//! selector fields and the flowlet number). Both are the common reflected
//! CRCs (CRC-32/ISO-HDLC, CRC-16/ARC), computed bitwise: which member a
//! selector draws is the target's own (the vectors never name it), but the
//! fields that enter each hash are the contract's.

use super::headers::Headers;

fn crc32(bytes: &[u8]) -> u32 {
    let mut c = 0xffff_ffffu32;
    for b in bytes {
        c ^= u32::from(*b);
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xedb8_8320 } else { c >> 1 };
        }
    }
    !c
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut c = 0u16;
    for b in bytes {
        c ^= u16::from(*b);
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xa001 } else { c >> 1 };
        }
    }
    c
}

/// The flow key: IPv4 source, destination, protocol, L4 ports (0 when
/// neither TCP nor UDP) and the BTH destination QP (0 when not RoCEv2).
fn flow_key(h: &Headers) -> [u8; 16] {
    let mut k = [0u8; 16];
    if let Some(ip) = &h.ipv4 {
        k[0..4].copy_from_slice(&ip.src.to_be_bytes());
        k[4..8].copy_from_slice(&ip.dst.to_be_bytes());
        k[8] = ip.protocol;
    }
    let (sport, dport) = h.l4_ports();
    k[9..11].copy_from_slice(&sport.to_be_bytes());
    k[11..13].copy_from_slice(&dport.to_be_bytes());
    let qp = h.bth.map(|b| b.dest_qp).unwrap_or(0);
    k[13..16].copy_from_slice(&qp.to_be_bytes()[1..]);
    k
}

/// `crc32(flow key)`: its low 13 bits are the flow slot, its high 16 the
/// slot's signature.
pub fn flow_hash(h: &Headers) -> u32 {
    crc32(&flow_key(h))
}

/// The drain rule's hash (`drain.p4`'s `locate`): `crc32` over the data's
/// IPv4 source, destination and protocol and its destination QP (the
/// flow key without its ports, which an ACK does not share). Its low bits
/// index the slot; bits 31:2 followed by a 1 are the 31-bit signature.
pub fn drain_hash(src: u32, dst: u32, protocol: u8, qp: u32) -> u32 {
    let mut k = [0u8; 12];
    k[0..4].copy_from_slice(&src.to_be_bytes());
    k[4..8].copy_from_slice(&dst.to_be_bytes());
    k[8] = protocol;
    k[9..12].copy_from_slice(&qp.to_be_bytes()[1..]);
    crc32(&k)
}

/// The selector hash of `nhop_group`: the flow key's fields and the
/// flowlet number.
pub fn selector_hash(h: &Headers, flowlet_id: u16) -> u16 {
    let k = flow_key(h);
    let mut b = [0u8; 18];
    b[..16].copy_from_slice(&k);
    b[16..].copy_from_slice(&flowlet_id.to_be_bytes());
    crc16(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crcs_match_their_check_values() {
        // The catalogue's check value: the CRC of "123456789".
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc16(b"123456789"), 0xbb3d);
    }
}
