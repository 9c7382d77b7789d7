//! The parsed packet of the P4 program (`p4src/shared/headers.p4`) and its
//! parser and deparser (`p4src/v1model/parser.p4`), including the checksum
//! check and update. A parse error is the drop reason the program gives it.

use super::DropReason;

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_ARP: u16 = 0x0806;
pub const IP_PROTO_TCP: u8 = 6;
pub const IP_PROTO_UDP: u8 = 17;
pub const UDP_PORT_ROCEV2: u16 = 4791;
/// INT is signalled by this DSCP bit.
pub const INT_DSCP_BIT: u8 = 0x01;
pub const INT_TYPE_MD: u8 = 1;
pub const INT_VERSION: u8 = 2;
pub const INT_INSTRUCTIONS: u16 = 0xF400;
pub const INT_HOP_ML: u8 = 6;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ethernet {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub ether_type: u16,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ipv4 {
    pub version: u8,
    pub ihl: u8,
    pub dscp: u8,
    pub ecn: u8,
    pub total_len: u16,
    pub identification: u16,
    pub flags: u8,
    pub frag_offset: u16,
    pub ttl: u8,
    pub protocol: u8,
    /// As received; [`Headers::deparse`] writes the computed one.
    pub checksum: u16,
    pub src: u32,
    pub dst: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Udp {
    pub src_port: u16,
    pub dst_port: u16,
    pub len: u16,
    pub checksum: u16,
}

/// TCP: only the ports are read; the other 16 bytes travel as they came.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tcp {
    pub src_port: u16,
    pub dst_port: u16,
    pub rest: [u8; 16],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    Udp(Udp),
    Tcp(Tcp),
}

/// RoCEv2 Base Transport Header; only the destination QP is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bth {
    pub head: u32,
    pub reserved0: u8,
    /// 24 bits.
    pub dest_qp: u32,
    pub psn_word: u32,
}

/// ACK Extended Transport Header, after the BTH of an RC Acknowledge
/// (opcode 0x11). Syndrome bits 6:5: 00 ACK, 01 RNR NAK, 11 NAK.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Aeth {
    pub syndrome: u8,
    /// 24 bits.
    pub msn: u32,
}

/// INT shim for TCP/UDP (INT v2.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntShim {
    pub int_type: u8,
    pub npt: u8,
    pub reserved0: u8,
    /// Words of INT-MD header and stack.
    pub len: u8,
    pub reserved1: u8,
    pub original_dscp: u8,
    pub reserved2: u8,
}

/// INT-MD metadata header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntMd {
    pub version: u8,
    pub discard: bool,
    pub hop_exceeded: bool,
    pub mtu_exceeded: bool,
    /// 12 bits.
    pub reserved: u16,
    pub hop_ml: u8,
    pub remaining_hops: u8,
    pub instructions: u16,
    pub domain_id: u16,
    pub ds_instructions: u16,
    pub ds_flags: u16,
}

/// One hop's six words.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IntHop {
    pub node_id: u32,
    pub ingress_port: u16,
    pub egress_port: u16,
    pub hop_latency: u32,
    pub queue_id: u8,
    /// 24 bits.
    pub occupancy: u32,
    pub egress_ts: u64,
}

/// INT-MD on the packet: the stack top first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Int {
    pub shim: IntShim,
    pub md: IntMd,
    pub hops: Vec<IntHop>,
}

/// What ingress hands to egress with the packet (v1model metadata): a
/// caller that queues [`Headers`] between the two keeps it with them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bridged {
    pub ingress_port: u32,
    /// Ingress timestamp (µs, 48 bits).
    pub ingress_ts: u64,
    /// From `config`.
    pub switch_id: u32,
    /// Flow slot (`flow_hash mod 8192`), where it was computed.
    pub flow_slot: u32,
    /// The flow hash itself (its high 16 bits: the slot's signature),
    /// where it was computed.
    pub flow_hash: u32,
    /// `int_source(max_hops)` matched at this switch.
    pub int_source: Option<u8>,
}

/// A parsed packet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    pub eth: Ethernet,
    pub ipv4: Option<Ipv4>,
    pub l4: Option<L4>,
    pub int: Option<Int>,
    pub bth: Option<Bth>,
    pub aeth: Option<Aeth>,
    /// Everything after the parsed headers.
    pub payload: Vec<u8>,
    pub meta: Bridged,
}

/// A cursor over the received bytes.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DropReason> {
        let s = self.b.get(self.at..self.at + n).ok_or(DropReason::ParserError)?;
        self.at += n;
        Ok(s)
    }
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([b[i], b[i + 1]])
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

fn u24_at(b: &[u8], i: usize) -> u32 {
    u32::from_be_bytes([0, b[i], b[i + 1], b[i + 2]])
}

/// The Internet checksum (ones' complement of the ones' complement sum).
pub fn csum16(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in bytes.chunks(2) {
        let w = u32::from(c[0]) << 8 | u32::from(c.get(1).copied().unwrap_or(0));
        sum += w;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Ipv4 {
    fn parse(b: &[u8]) -> Self {
        Ipv4 {
            version: b[0] >> 4,
            ihl: b[0] & 0xf,
            dscp: b[1] >> 2,
            ecn: b[1] & 3,
            total_len: u16_at(b, 2),
            identification: u16_at(b, 4),
            flags: b[6] >> 5,
            frag_offset: u16_at(b, 6) & 0x1fff,
            ttl: b[8],
            protocol: b[9],
            checksum: u16_at(b, 10),
            src: u32_at(b, 12),
            dst: u32_at(b, 16),
        }
    }

    /// The 20 bytes with the given checksum.
    pub fn bytes(&self, checksum: u16) -> [u8; 20] {
        let mut o = [0u8; 20];
        o[0] = (self.version & 0xf) << 4 | (self.ihl & 0xf);
        o[1] = (self.dscp & 0x3f) << 2 | (self.ecn & 3);
        o[2..4].copy_from_slice(&self.total_len.to_be_bytes());
        o[4..6].copy_from_slice(&self.identification.to_be_bytes());
        let ff = u16::from(self.flags & 7) << 13 | (self.frag_offset & 0x1fff);
        o[6..8].copy_from_slice(&ff.to_be_bytes());
        o[8] = self.ttl;
        o[9] = self.protocol;
        o[10..12].copy_from_slice(&checksum.to_be_bytes());
        o[12..16].copy_from_slice(&self.src.to_be_bytes());
        o[16..20].copy_from_slice(&self.dst.to_be_bytes());
        o
    }

    /// The header checksum over every field but the checksum.
    pub fn computed_checksum(&self) -> u16 {
        csum16(&self.bytes(0))
    }
}

impl IntHop {
    fn parse(b: &[u8]) -> Self {
        IntHop {
            node_id: u32_at(b, 0),
            ingress_port: u16_at(b, 4),
            egress_port: u16_at(b, 6),
            hop_latency: u32_at(b, 8),
            queue_id: b[12],
            occupancy: u24_at(b, 13),
            egress_ts: u64::from(u32_at(b, 16)) << 32 | u64::from(u32_at(b, 20)),
        }
    }

    pub fn write(&self, o: &mut Vec<u8>) {
        o.extend_from_slice(&self.node_id.to_be_bytes());
        o.extend_from_slice(&self.ingress_port.to_be_bytes());
        o.extend_from_slice(&self.egress_port.to_be_bytes());
        o.extend_from_slice(&self.hop_latency.to_be_bytes());
        o.push(self.queue_id);
        o.extend_from_slice(&self.occupancy.to_be_bytes()[1..]);
        o.extend_from_slice(&self.egress_ts.to_be_bytes());
    }
}

impl IntShim {
    fn parse(b: &[u8]) -> Self {
        IntShim {
            int_type: b[0] >> 4,
            npt: (b[0] >> 2) & 3,
            reserved0: b[0] & 3,
            len: b[1],
            reserved1: b[2],
            original_dscp: b[3] >> 2,
            reserved2: b[3] & 3,
        }
    }

    pub fn write(&self, o: &mut Vec<u8>) {
        o.push((self.int_type & 0xf) << 4 | (self.npt & 3) << 2 | (self.reserved0 & 3));
        o.push(self.len);
        o.push(self.reserved1);
        o.push((self.original_dscp & 0x3f) << 2 | (self.reserved2 & 3));
    }
}

impl IntMd {
    fn parse(b: &[u8]) -> Self {
        let w = u32_at(b, 0);
        IntMd {
            version: (w >> 28) as u8,
            discard: w >> 27 & 1 == 1,
            hop_exceeded: w >> 26 & 1 == 1,
            mtu_exceeded: w >> 25 & 1 == 1,
            reserved: (w >> 13 & 0xfff) as u16,
            hop_ml: (w >> 8 & 0x1f) as u8,
            remaining_hops: w as u8,
            instructions: u16_at(b, 4),
            domain_id: u16_at(b, 6),
            ds_instructions: u16_at(b, 8),
            ds_flags: u16_at(b, 10),
        }
    }

    pub fn write(&self, o: &mut Vec<u8>) {
        let w = u32::from(self.version & 0xf) << 28
            | u32::from(self.discard) << 27
            | u32::from(self.hop_exceeded) << 26
            | u32::from(self.mtu_exceeded) << 25
            | u32::from(self.reserved & 0xfff) << 13
            | u32::from(self.hop_ml & 0x1f) << 8
            | u32::from(self.remaining_hops);
        o.extend_from_slice(&w.to_be_bytes());
        for v in [self.instructions, self.domain_id, self.ds_instructions, self.ds_flags] {
            o.extend_from_slice(&v.to_be_bytes());
        }
    }
}

impl Bth {
    fn parse(b: &[u8]) -> Self {
        Bth { head: u32_at(b, 0), reserved0: b[4], dest_qp: u24_at(b, 5), psn_word: u32_at(b, 8) }
    }

    fn write(&self, o: &mut Vec<u8>) {
        o.extend_from_slice(&self.head.to_be_bytes());
        o.push(self.reserved0);
        o.extend_from_slice(&self.dest_qp.to_be_bytes()[1..]);
        o.extend_from_slice(&self.psn_word.to_be_bytes());
    }
}

impl Headers {
    /// Parses a frame from a data port the way `MetaroceParser` and
    /// `MetaroceVerifyChecksum` do; `Err` is the drop reason ingress gives
    /// the packet (a parser error before a checksum error).
    pub fn parse(bytes: &[u8]) -> Result<Headers, DropReason> {
        let h = Self::parse_unverified(bytes)?;
        if let Some(ip) = &h.ipv4 {
            if ip.computed_checksum() != ip.checksum {
                return Err(DropReason::Ipv4Invalid);
            }
        }
        Ok(h)
    }

    /// [`Headers::parse`] without the IPv4 checksum check: what ingress
    /// sees of a packet-out, which it does not check.
    pub fn parse_unverified(bytes: &[u8]) -> Result<Headers, DropReason> {
        let mut r = Reader { b: bytes, at: 0 };
        let e = r.take(14)?;
        let mut h = Headers {
            eth: Ethernet {
                dst: e[0..6].try_into().map_err(|_| DropReason::ParserError)?,
                src: e[6..12].try_into().map_err(|_| DropReason::ParserError)?,
                ether_type: u16_at(e, 12),
            },
            ..Default::default()
        };
        if h.eth.ether_type == ETHERTYPE_IPV4 {
            h.parse_ipv4(&mut r)?;
        }
        h.payload = bytes[r.at..].to_vec();
        Ok(h)
    }

    fn parse_ipv4(&mut self, r: &mut Reader<'_>) -> Result<(), DropReason> {
        let ip = Ipv4::parse(r.take(20)?);
        self.ipv4 = Some(ip);
        match (ip.version, ip.ihl, ip.protocol) {
            (4, 5, IP_PROTO_UDP) => self.parse_udp(r, ip.dscp),
            (4, 5, IP_PROTO_TCP) => {
                let b = r.take(20)?;
                let rest = b[4..20].try_into().map_err(|_| DropReason::ParserError)?;
                self.l4 = Some(L4::Tcp(Tcp { src_port: u16_at(b, 0), dst_port: u16_at(b, 2), rest }));
                Ok(())
            }
            (4, 5, _) => Ok(()),
            (4, _, _) => Err(DropReason::Ipv4Invalid), // options
            _ => Err(DropReason::Ipv4Invalid),         // version
        }
    }

    fn parse_udp(&mut self, r: &mut Reader<'_>, dscp: u8) -> Result<(), DropReason> {
        let b = r.take(8)?;
        let udp =
            Udp { src_port: u16_at(b, 0), dst_port: u16_at(b, 2), len: u16_at(b, 4), checksum: u16_at(b, 6) };
        self.l4 = Some(L4::Udp(udp));
        if dscp & INT_DSCP_BIT != 0 {
            let b = r.take(16)?;
            let shim = IntShim::parse(&b[0..4]);
            let md = IntMd::parse(&b[4..16]);
            if shim.int_type != INT_TYPE_MD || md.version != INT_VERSION {
                return Err(DropReason::IntMalformed);
            }
            let hops = match shim.len {
                3 => 0,
                9 => 1,
                15 => 2,
                21 => 3,
                27 => 4,
                _ => return Err(DropReason::IntMalformed),
            };
            let mut stack = Vec::with_capacity(hops + 1);
            for _ in 0..hops {
                stack.push(IntHop::parse(r.take(24)?));
            }
            self.int = Some(Int { shim, md, hops: stack });
        }
        if udp.dst_port == UDP_PORT_ROCEV2 {
            let bth = Bth::parse(r.take(12)?);
            self.bth = Some(bth);
            if bth.head >> 24 == u32::from(super::drain_step::OPCODE_RC_ACK) {
                let b = r.take(4)?;
                self.aeth = Some(Aeth { syndrome: b[0], msn: u24_at(b, 1) });
            }
        }
        Ok(())
    }

    pub fn udp(&self) -> Option<&Udp> {
        match &self.l4 {
            Some(L4::Udp(u)) => Some(u),
            _ => None,
        }
    }

    pub fn udp_mut(&mut self) -> Option<&mut Udp> {
        match &mut self.l4 {
            Some(L4::Udp(u)) => Some(u),
            _ => None,
        }
    }

    /// L4 source and destination port, 0 when neither TCP nor UDP.
    pub fn l4_ports(&self) -> (u16, u16) {
        match &self.l4 {
            Some(L4::Udp(u)) => (u.src_port, u.dst_port),
            Some(L4::Tcp(t)) => (t.src_port, t.dst_port),
            None => (0, 0),
        }
    }

    /// The headers from IPv4 on (no Ethernet, no payload), as the deparser
    /// emits them, with the IPv4 checksum computed.
    pub fn write_from_ipv4(&self, o: &mut Vec<u8>) {
        let Some(ip) = &self.ipv4 else { return };
        o.extend_from_slice(&ip.bytes(ip.computed_checksum()));
        match &self.l4 {
            Some(L4::Udp(u)) => {
                for v in [u.src_port, u.dst_port, u.len, u.checksum] {
                    o.extend_from_slice(&v.to_be_bytes());
                }
            }
            Some(L4::Tcp(t)) => {
                o.extend_from_slice(&t.src_port.to_be_bytes());
                o.extend_from_slice(&t.dst_port.to_be_bytes());
                o.extend_from_slice(&t.rest);
            }
            None => {}
        }
        if let Some(int) = &self.int {
            int.shim.write(o);
            int.md.write(o);
            for hop in &int.hops {
                hop.write(o);
            }
        }
        if let Some(b) = &self.bth {
            b.write(o);
        }
        if let Some(a) = &self.aeth {
            o.push(a.syndrome);
            o.extend_from_slice(&a.msn.to_be_bytes()[1..]);
        }
    }

    /// The frame as `MetaroceDeparser` emits it after
    /// `MetaroceComputeChecksum`: the IPv4 checksum is recomputed.
    pub fn deparse(&self) -> Vec<u8> {
        let mut o = Vec::with_capacity(64 + self.payload.len());
        o.extend_from_slice(&self.eth.dst);
        o.extend_from_slice(&self.eth.src);
        o.extend_from_slice(&self.eth.ether_type.to_be_bytes());
        self.write_from_ipv4(&mut o);
        o.extend_from_slice(&self.payload);
        o
    }
}
