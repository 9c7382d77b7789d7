//! Writing chosen links' packets as a pcap file Wireshark reads: Ethernet,
//! IPv4 (with the ECN bits), UDP to port 4791 and the InfiniBand BTH, so
//! Wireshark decodes them as RoCEv2. Payloads are not stored: each record
//! keeps the headers and the original length.

use std::net::Ipv4Addr;

use metaroce_topo::MacAddr;

use crate::engine::flows::ROCE_PORT;

/// Most records kept per run, so a long run cannot fill the disk.
pub const MAX_RECORDS: u64 = 1_000_000;
/// Captured bytes per packet: Ethernet + IPv4 + UDP + BTH.
pub const SNAP_BYTES: usize = 14 + 20 + 8 + 12;

/// One packet as it starts onto a captured link.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub time_ps: u64,
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub sport: u16,
    pub dest_qp: u32,
    pub psn: u32,
    pub first: bool,
    pub last: bool,
    pub ce: bool,
    /// Bytes on the wire, FCS included.
    pub wire_bytes: u32,
}

/// A pcap file being built in memory.
#[derive(Debug, Clone)]
pub struct Pcap {
    bytes: Vec<u8>,
    records: u64,
    pub truncated: bool,
}

impl Default for Pcap {
    fn default() -> Self {
        Self::new()
    }
}

impl Pcap {
    pub fn new() -> Self {
        let mut bytes = Vec::with_capacity(1 << 16);
        bytes.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes()); // nanosecond timestamps
        bytes.extend_from_slice(&2u16.to_le_bytes());
        bytes.extend_from_slice(&4u16.to_le_bytes());
        bytes.extend_from_slice(&0i32.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&65_535u32.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
        Pcap { bytes, records: 0, truncated: false }
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    pub fn record(&mut self, f: &Frame) {
        if self.records >= MAX_RECORDS {
            self.truncated = true;
            return;
        }
        self.records += 1;
        let ns = f.time_ps / 1_000;
        let orig = f.wire_bytes.saturating_sub(4).max(SNAP_BYTES as u32);
        let b = &mut self.bytes;
        b.extend_from_slice(&u32::try_from(ns / 1_000_000_000).unwrap_or(u32::MAX).to_le_bytes());
        b.extend_from_slice(&((ns % 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&(SNAP_BYTES as u32).to_le_bytes());
        b.extend_from_slice(&orig.to_le_bytes());
        // Ethernet
        b.extend_from_slice(&f.dst_mac.0);
        b.extend_from_slice(&f.src_mac.0);
        b.extend_from_slice(&0x0800u16.to_be_bytes());
        // IPv4: DSCP 26 (a common RoCE class), ECT(0) or CE.
        let ip_len = (orig - 14) as u16;
        let tos = (26u8 << 2) | if f.ce { 0b11 } else { 0b10 };
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[1] = tos;
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        ip[4..6].copy_from_slice(&(f.psn as u16).to_be_bytes());
        ip[6] = 0x40; // don't fragment
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&f.src_ip.octets());
        ip[16..20].copy_from_slice(&f.dst_ip.octets());
        let sum = checksum(&ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        b.extend_from_slice(&ip);
        // UDP, checksum zero (allowed for RoCEv2).
        b.extend_from_slice(&f.sport.to_be_bytes());
        b.extend_from_slice(&ROCE_PORT.to_be_bytes());
        b.extend_from_slice(&(ip_len - 20).to_be_bytes());
        b.extend_from_slice(&0u16.to_be_bytes());
        // BTH: RC SEND first/middle/last/only.
        let opcode = match (f.first, f.last) {
            (true, true) => 0x04,
            (true, false) => 0x00,
            (false, false) => 0x01,
            (false, true) => 0x02,
        };
        b.push(opcode);
        b.push(if f.last { 0x80 } else { 0x00 }); // solicited event on the last packet
        b.extend_from_slice(&0xFFFFu16.to_be_bytes());
        b.extend_from_slice(&(f.dest_qp & 0x00FF_FFFF).to_be_bytes());
        b.extend_from_slice(&((u32::from(f.last) << 31) | (f.psn & 0x00FF_FFFF)).to_be_bytes());
    }
}

/// The IPv4 header checksum.
fn checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_have_valid_headers() {
        let mut p = Pcap::new();
        let f = Frame {
            time_ps: 1_500_000_000_123_000,
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 0, 1, 1),
            sport: 0xC123,
            dest_qp: 7,
            psn: 3,
            first: false,
            last: true,
            ce: true,
            wire_bytes: 4158,
        };
        p.record(&f);
        let b = p.into_bytes();
        assert_eq!(b.len(), 24 + 16 + SNAP_BYTES);
        assert_eq!(&b[0..4], &0xa1b2_3c4du32.to_le_bytes());
        let rec = &b[24..];
        assert_eq!(u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]), 1_500);
        assert_eq!(u32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]), 123);
        assert_eq!(u32::from_le_bytes([rec[12], rec[13], rec[14], rec[15]]), 4154);
        let ip = &rec[16 + 14..16 + 34];
        assert_eq!(checksum(ip), 0, "checksum over a valid header is zero");
        assert_eq!(ip[1] & 3, 3, "CE");
        let udp = &rec[16 + 34..16 + 42];
        assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 4791);
        let bth = &rec[16 + 42..];
        assert_eq!(bth[0], 0x02);
        assert_eq!(u32::from_be_bytes([bth[8], bth[9], bth[10], bth[11]]) & 0xFF_FFFF, 3);
    }
}
