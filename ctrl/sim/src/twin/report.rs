//! Telemetry Report v2.0 (`p4src/v1model/report.p4`): built from what the
//! sink saved before it stripped INT. The inner packet is the one the sink
//! received, from its IPv4 header through the BTH: INT restored, TTL before
//! the sink's decrement, ECN before a CE mark of the sink's own; the
//! payload is cut.

use super::egress::Encap;
use super::headers::{Headers, Int, IntHop, IntShim, Ipv4, INT_DSCP_BIT, INT_TYPE_MD, IP_PROTO_UDP};

const REPORT_SRC_PORT: u16 = 50000;
const REPORT_VERSION: u32 = 2;
/// RepType 1 (INT), InType 4 (IPv4).
const REPORT_TYPES: u8 = 0x14;
const REPORT_MD_WORDS: u8 = 5;
const REPORT_MD_BITS: u16 = 0x7400;

/// What the sink keeps for its report (v1model: the preserved field list).
#[derive(Debug, Clone)]
pub(super) struct SinkSave {
    /// The sink's own metadata.
    pub hop: IntHop,
    /// The sink queue is above `queue_high`.
    pub congested: bool,
    /// INT as received.
    pub int: Int,
    /// ECN as received.
    pub ecn: u8,
    pub encap: Encap,
}

impl SinkSave {
    /// The packet as the sink received it, from the stripped one.
    fn inner(&self, delivered: &Headers) -> Headers {
        let mut h = delivered.clone();
        let len = self.int.shim.len;
        let bytes = 4u16.wrapping_add(u16::from(len) << 2);
        let shim = IntShim {
            int_type: INT_TYPE_MD,
            len,
            original_dscp: self.int.shim.original_dscp,
            ..Default::default()
        };
        // Hops are restored where the received length held them.
        let hops = (0..4usize)
            .filter(|i| u16::from(len) >= 3 + 6 * (*i as u16 + 1))
            .map(|i| self.int.hops.get(i).copied().unwrap_or_default())
            .collect();
        h.int = Some(Int { shim, md: self.int.md, hops });
        if let Some(ip) = h.ipv4.as_mut() {
            ip.total_len = ip.total_len.wrapping_add(bytes);
            ip.dscp = self.int.shim.original_dscp | INT_DSCP_BIT;
            ip.ttl = ip.ttl.wrapping_add(1);
            ip.ecn = self.ecn;
        }
        if let Some(u) = h.udp_mut() {
            u.len = u.len.wrapping_add(bytes);
        }
        h.payload.clear();
        h
    }

    /// The report frame (without a packet-in header), report sequence `seq`.
    pub fn report(&self, delivered: &Headers, seq: u32) -> Vec<u8> {
        let inner = self.inner(delivered);
        // Words: group header, individual report, sink metadata, inner packet.
        let mut words: u32 = 2 + u32::from(REPORT_MD_WORDS) + 8 + u32::from(self.int.shim.len);
        if inner.bth.is_some() {
            words += 3;
        }
        let udp_len = (8 + 8 + 4 + (words << 2)) as u16;
        let e = &self.encap;
        let mut o = Vec::with_capacity(14 + 20 + usize::from(udp_len));
        o.extend_from_slice(&e.dst_mac.to_be_bytes()[2..]);
        o.extend_from_slice(&e.src_mac.to_be_bytes()[2..]);
        o.extend_from_slice(&super::headers::ETHERTYPE_IPV4.to_be_bytes());
        let ip = Ipv4 {
            version: 4,
            ihl: 5,
            total_len: 20u16.wrapping_add(udp_len),
            flags: 2, // don't fragment
            ttl: 64,
            protocol: IP_PROTO_UDP,
            src: e.src_ip,
            dst: e.dst_ip,
            ..Default::default()
        };
        o.extend_from_slice(&ip.bytes(ip.computed_checksum()));
        for v in [REPORT_SRC_PORT, e.dst_port, udp_len, 0] {
            o.extend_from_slice(&v.to_be_bytes());
        }
        o.extend_from_slice(&(REPORT_VERSION << 28 | (seq & 0x3f_ffff)).to_be_bytes());
        o.extend_from_slice(&self.hop.node_id.to_be_bytes());
        o.extend_from_slice(&[
            REPORT_TYPES,
            words as u8,
            REPORT_MD_WORDS,
            u8::from(self.congested) << 6 | 1 << 5,
        ]);
        for v in [REPORT_MD_BITS, 0, 0, 0] {
            o.extend_from_slice(&v.to_be_bytes());
        }
        let h = &self.hop;
        o.extend_from_slice(&h.ingress_port.to_be_bytes());
        o.extend_from_slice(&h.egress_port.to_be_bytes());
        o.extend_from_slice(&h.hop_latency.to_be_bytes());
        o.push(0);
        o.extend_from_slice(&h.occupancy.to_be_bytes()[1..]);
        o.extend_from_slice(&h.egress_ts.to_be_bytes());
        inner.write_from_ipv4(&mut o);
        o.truncate(14 + 20 + usize::from(udp_len));
        o
    }
}
