//! Telemetry Report v2.0 decoding, exactly as the metaroce sink builds it
//! (`p4src/v1model/report.p4`, `p4src/README.md`): one INT report per
//! group (RepType INT), the inner packet from its IPv4 header (InType
//! IPv4), the sink's metadata selected by RepMdBits `0x7400`, and the inner
//! packet through the BTH with its INT-MD stack (decoded in `inner.rs`).
//!
//! Input is untrusted: every malformed input is a [`ReportError`] naming the
//! header and the byte offset (from the start of what the caller passed),
//! never a panic.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::cursor::{be16, be32, header, Cursor};
pub use crate::inner::{HopRecord, InnerPacket, IntMd};

/// Report group header version this decoder reads.
pub const REPORT_VERSION: u8 = 2;
/// RepType of an INT report.
pub const REP_TYPE_INT: u8 = 1;
/// InType of an inner packet starting at its IPv4 header.
pub const IN_TYPE_IPV4: u8 = 4;
/// RepMdBits of the sink's own metadata: L1 ports, hop latency, queue id +
/// occupancy, egress timestamp.
pub const SINK_MD_BITS: u16 = 0x7400;
/// Words of sink metadata those bits select.
pub const SINK_MD_WORDS: u8 = 5;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_VLAN: u16 = 0x8100;
pub(crate) const IP_PROTO_UDP: u8 = 17;

/// What is wrong with a report, and where: `offset` counts bytes from the
/// start of the input given to [`decode_frame`] or [`decode_udp_payload`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("{what} is truncated at byte {offset}: needs {needed} bytes, {available} left")]
    Truncated { what: &'static str, offset: usize, needed: usize, available: usize },
    #[error("{what} at byte {offset} is {found:#x}, expected {expected}")]
    Unexpected { what: &'static str, offset: usize, found: u64, expected: &'static str },
    #[error("{what} at byte {offset} is {found}, which does not fit {bound}")]
    Length { what: &'static str, offset: usize, found: usize, bound: &'static str },
    #[error("{count} bytes follow the report at byte {offset}; the sink sends one report per packet")]
    TrailingBytes { offset: usize, count: usize },
}

/// Where the report was sent from and to (present when decoded from a frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportEncap {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
}

/// Telemetry Report group header (8 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupHeader {
    pub version: u8,
    /// 6 bits.
    pub hw_id: u8,
    /// 22 bits, per sink; gaps mean lost reports ([`crate::seq`]).
    pub seq: u32,
    /// The sink's switch id (`config.switch_id`).
    pub node_id: u32,
}

/// Individual report header and its fixed main contents (12 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndividualHeader {
    pub rep_type: u8,
    pub in_type: u8,
    /// Words after the 4-byte header: main contents, metadata, inner packet.
    pub report_len_words: u8,
    pub md_len_words: u8,
    /// D: the packet was dropped.
    pub dropped: bool,
    /// Q: the sink's queue was above its high threshold.
    pub congested_queue: bool,
    /// F: a tracked flow.
    pub tracked_flow: bool,
    /// I: sent by an intermediate hop.
    pub intermediate: bool,
    pub rep_md_bits: u16,
    pub domain_id: u16,
    pub ds_md_bits: u16,
    pub ds_md_status: u16,
}

/// The sink's own metadata, in RepMdBits order. The sink does not push it
/// on the INT stack, so the report is the only place it appears.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkMetadata {
    pub ingress_port: u16,
    pub egress_port: u16,
    /// Target units (µs on BMv2).
    pub hop_latency: u32,
    pub queue_id: u8,
    /// 24 bits, target units (packets on BMv2).
    pub queue_occupancy: u32,
    pub egress_ts: u64,
}

/// A decoded Telemetry Report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TelemetryReport {
    /// `None` when decoded from a UDP payload.
    pub encap: Option<ReportEncap>,
    pub group: GroupHeader,
    pub individual: IndividualHeader,
    pub sink: SinkMetadata,
    pub inner: InnerPacket,
}

/// One hop of a report's path, the sink included: what the congestion view
/// keys paths and queue samples by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathHop {
    pub node_id: u32,
    pub egress_port: u16,
    pub hop_latency: u32,
    pub queue_occupancy: u32,
}

impl TelemetryReport {
    /// Every hop in path order: the INT stack (source first), then the sink.
    pub fn path(&self) -> Vec<PathHop> {
        let hops = self.inner.int.hops.iter().map(|h| PathHop {
            node_id: h.node_id,
            egress_port: h.egress_port,
            hop_latency: h.hop_latency,
            queue_occupancy: h.queue_occupancy,
        });
        let sink = PathHop {
            node_id: self.group.node_id,
            egress_port: self.sink.egress_port,
            hop_latency: self.sink.hop_latency,
            queue_occupancy: self.sink.queue_occupancy,
        };
        hops.chain(std::iter::once(sink)).collect()
    }

    /// Sum of the hop latencies, the sink's included: what the sink buckets.
    pub fn path_latency(&self) -> u64 {
        self.path().iter().map(|h| u64::from(h.hop_latency)).sum()
    }
}

/// Decodes a whole Ethernet frame: a packet-in payload or a frame captured
/// on a collector port. Bytes after the outer UDP length (Ethernet padding,
/// FCS) are ignored.
pub fn decode_frame(frame: &[u8]) -> Result<TelemetryReport, ReportError> {
    let mut c = Cursor::new(frame, 0);
    let eth = header::<14>(&mut c, "Ethernet header")?;
    let mut ether_type = be16(&eth, 12);
    if ether_type == ETHERTYPE_VLAN {
        let tag = header::<4>(&mut c, "VLAN tag")?;
        ether_type = be16(&tag, 2);
    }
    if ether_type != ETHERTYPE_IPV4 {
        return Err(ReportError::Unexpected {
            what: "EtherType",
            offset: c.offset() - 2,
            found: ether_type.into(),
            expected: "0x800 (IPv4)",
        });
    }
    let (src_ip, dst_ip, mut ip_payload) = outer_ipv4(&mut c)?;
    let udp_at = ip_payload.offset();
    let udp = header::<8>(&mut ip_payload, "outer UDP header")?;
    let udp_len = usize::from(be16(&udp, 4));
    if udp_len < 8 || udp_len - 8 > ip_payload.remaining() {
        return Err(ReportError::Length {
            what: "outer UDP length",
            offset: udp_at + 4,
            found: udp_len,
            bound: "the IPv4 payload",
        });
    }
    let mut payload = ip_payload.sub(udp_len - 8, "outer UDP payload")?;
    let mut report = decode_payload(&mut payload)?;
    let mac = |at: usize| {
        let mut m = [0u8; 6];
        m.copy_from_slice(&eth[at..at + 6]);
        m
    };
    report.encap = Some(ReportEncap {
        dst_mac: mac(0),
        src_mac: mac(6),
        src_ip,
        dst_ip,
        src_port: be16(&udp, 0),
        dst_port: be16(&udp, 2),
    });
    Ok(report)
}

/// Decodes what a UDP collector socket receives: the group header onwards.
pub fn decode_udp_payload(payload: &[u8]) -> Result<TelemetryReport, ReportError> {
    decode_payload(&mut Cursor::new(payload, 0))
}

/// The outer IPv4 header: addresses and a cursor bounded by its total length.
fn outer_ipv4<'a>(c: &mut Cursor<'a>) -> Result<(Ipv4Addr, Ipv4Addr, Cursor<'a>), ReportError> {
    let at = c.offset();
    let ip = header::<20>(c, "outer IPv4 header")?;
    if ip[0] >> 4 != 4 {
        let found = u64::from(ip[0] >> 4);
        return Err(ReportError::Unexpected { what: "outer IPv4 version", offset: at, found, expected: "4" });
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ihl < 20 {
        return Err(ReportError::Length {
            what: "outer IPv4 IHL",
            offset: at,
            found: ihl,
            bound: "20 bytes",
        });
    }
    if ip[9] != IP_PROTO_UDP {
        let found = u64::from(ip[9]);
        return Err(ReportError::Unexpected {
            what: "outer IPv4 protocol",
            offset: at + 9,
            found,
            expected: "17 (UDP)",
        });
    }
    c.take(ihl - 20, "outer IPv4 options")?;
    let total = usize::from(be16(&ip, 2));
    if total < ihl || total - ihl > c.remaining() {
        return Err(ReportError::Length {
            what: "outer IPv4 total length",
            offset: at + 2,
            found: total,
            bound: "the frame",
        });
    }
    let payload = c.sub(total - ihl, "outer IPv4 payload")?;
    Ok((Ipv4Addr::from(be32(&ip, 12)), Ipv4Addr::from(be32(&ip, 16)), payload))
}

fn decode_payload(c: &mut Cursor<'_>) -> Result<TelemetryReport, ReportError> {
    let group = group_header(c)?;
    let hdr_at = c.offset();
    let individual = individual_header(c)?;
    // Report length counts the words after the 4-byte individual header,
    // of which the main contents (RepMdBits .. DSMdStatus) are the first 2.
    let body_words = usize::from(individual.report_len_words);
    let fixed_words = 2 + usize::from(individual.md_len_words);
    if body_words < fixed_words {
        return Err(ReportError::Length {
            what: "individual report length (words)",
            offset: hdr_at + 1,
            found: body_words,
            bound: "2 + MD length",
        });
    }
    let body_left = (body_words - 2) * 4;
    if body_left > c.remaining() {
        return Err(ReportError::Truncated {
            what: "individual report",
            offset: c.offset(),
            needed: body_left,
            available: c.remaining(),
        });
    }
    let sink = sink_metadata(c)?;
    let mut inner_bytes = c.sub((body_words - fixed_words) * 4, "inner packet")?;
    let inner = crate::inner::decode(&mut inner_bytes)?;
    if c.remaining() > 0 {
        return Err(ReportError::TrailingBytes { offset: c.offset(), count: c.remaining() });
    }
    Ok(TelemetryReport { encap: None, group, individual, sink, inner })
}

fn group_header(c: &mut Cursor<'_>) -> Result<GroupHeader, ReportError> {
    let at = c.offset();
    let w0 = c.u32("report group header")?;
    let node_id = c.u32("report group header")?;
    let version = (w0 >> 28) as u8;
    if version != REPORT_VERSION {
        let found = version.into();
        return Err(ReportError::Unexpected {
            what: "report group version",
            offset: at,
            found,
            expected: "2",
        });
    }
    Ok(GroupHeader { version, hw_id: ((w0 >> 22) & 0x3f) as u8, seq: w0 & 0x3f_ffff, node_id })
}

fn individual_header(c: &mut Cursor<'_>) -> Result<IndividualHeader, ReportError> {
    let at = c.offset();
    let h = header::<12>(c, "individual report header")?;
    let flags = h[3];
    let ind = IndividualHeader {
        rep_type: h[0] >> 4,
        in_type: h[0] & 0x0f,
        report_len_words: h[1],
        md_len_words: h[2],
        dropped: flags & 0x80 != 0,
        congested_queue: flags & 0x40 != 0,
        tracked_flow: flags & 0x20 != 0,
        intermediate: flags & 0x10 != 0,
        rep_md_bits: be16(&h, 4),
        domain_id: be16(&h, 6),
        ds_md_bits: be16(&h, 8),
        ds_md_status: be16(&h, 10),
    };
    let unexpected =
        |what, offset, found: u64, expected| ReportError::Unexpected { what, offset, found, expected };
    if ind.rep_type != REP_TYPE_INT {
        return Err(unexpected("RepType", at, ind.rep_type.into(), "1 (INT)"));
    }
    if ind.in_type != IN_TYPE_IPV4 {
        return Err(unexpected("InType", at, ind.in_type.into(), "4 (IPv4)"));
    }
    if ind.rep_md_bits != SINK_MD_BITS {
        return Err(unexpected("RepMdBits", at + 4, ind.rep_md_bits.into(), "0x7400"));
    }
    if ind.md_len_words != SINK_MD_WORDS {
        return Err(unexpected("MD length", at + 2, ind.md_len_words.into(), "5 words (RepMdBits 0x7400)"));
    }
    Ok(ind)
}

fn sink_metadata(c: &mut Cursor<'_>) -> Result<SinkMetadata, ReportError> {
    let h = header::<20>(c, "sink metadata")?;
    let queue = be32(&h, 8);
    Ok(SinkMetadata {
        ingress_port: be16(&h, 0),
        egress_port: be16(&h, 2),
        hop_latency: be32(&h, 4),
        queue_id: (queue >> 24) as u8,
        queue_occupancy: queue & 0x00ff_ffff,
        egress_ts: (u64::from(be32(&h, 12)) << 32) | u64::from(be32(&h, 16)),
    })
}
