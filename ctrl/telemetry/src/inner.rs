//! The reported packet inside a Telemetry Report: its IPv4 header, UDP
//! header, INT shim, INT-MD header and stack (INT v2.1, as pushed by
//! `p4src/v1model/int_egress.p4`), and the RoCEv2 BTH. The sink cuts the
//! payload and keeps IPv4 and UDP lengths as received, so those lengths are
//! reported, not used to bound anything.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::cursor::{be16, be32, header, Cursor};
use crate::report::{ReportError, IP_PROTO_UDP};

/// INT shim type of INT-MD.
pub const INT_TYPE_MD: u8 = 1;
/// INT-MD header version (INT v2.1).
pub const INT_VERSION: u8 = 2;
/// Instructions every metaroce hop executes: node id, L1 ports, hop
/// latency, queue id + occupancy, egress timestamp.
pub const INT_INSTRUCTIONS: u16 = 0xF400;
/// Words per hop those instructions push.
pub const INT_HOP_WORDS: u8 = 6;
/// DSCP bit that signals INT (`INT_DSCP_BIT`).
pub const INT_DSCP_BIT: u8 = 0x01;
/// UDP destination port of RoCEv2, after which a BTH follows.
pub const ROCEV2_PORT: u16 = 4791;

/// One hop's INT metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopRecord {
    pub node_id: u32,
    pub ingress_port: u16,
    pub egress_port: u16,
    /// Target units (µs on BMv2).
    pub hop_latency: u32,
    pub queue_id: u8,
    /// 24 bits, target units (packets on BMv2).
    pub queue_occupancy: u32,
    pub egress_ts: u64,
}

/// The INT-MD header and its stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntMd {
    /// DSCP of the packet before the source set the INT bit.
    pub original_dscp: u8,
    pub version: u8,
    /// D bit.
    pub discard: bool,
    /// E bit: a hop could not push (hop limit or stack full).
    pub hop_limit_exceeded: bool,
    /// M bit: a hop could not push without exceeding the MTU.
    pub mtu_exceeded: bool,
    pub hop_ml: u8,
    pub remaining_hops: u8,
    pub instructions: u16,
    pub domain_id: u16,
    /// Path order: the source first. (On the wire the last hop is on top.)
    pub hops: Vec<HopRecord>,
}

/// The reported packet as the sink received it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InnerPacket {
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
    /// DSCP as received (INT bit set).
    pub dscp: u8,
    pub ecn: u8,
    pub ttl: u8,
    /// RoCEv2 BTH destination QP (24 bits), when the packet is RoCEv2.
    pub dest_qp: Option<u32>,
    pub int: IntMd,
}

/// Decodes the inner packet; `c` holds exactly the report's inner bytes.
pub(crate) fn decode(c: &mut Cursor<'_>) -> Result<InnerPacket, ReportError> {
    let at = c.offset();
    let ip = header::<20>(c, "inner IPv4 header")?;
    if ip[0] >> 4 != 4 {
        let found = u64::from(ip[0] >> 4);
        return Err(ReportError::Unexpected { what: "inner IPv4 version", offset: at, found, expected: "4" });
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ihl < 20 {
        return Err(ReportError::Length {
            what: "inner IPv4 IHL",
            offset: at,
            found: ihl,
            bound: "20 bytes",
        });
    }
    c.take(ihl - 20, "inner IPv4 options")?;
    if ip[9] != IP_PROTO_UDP {
        let found = u64::from(ip[9]);
        return Err(ReportError::Unexpected {
            what: "inner IPv4 protocol",
            offset: at + 9,
            found,
            expected: "17 (UDP)",
        });
    }
    let dscp = ip[1] >> 2;
    if dscp & INT_DSCP_BIT == 0 {
        let found = u64::from(dscp);
        return Err(ReportError::Unexpected {
            what: "inner IPv4 DSCP",
            offset: at + 1,
            found,
            expected: "the INT bit (0x1) set",
        });
    }
    let udp = header::<8>(c, "inner UDP header")?;
    let dst_port = be16(&udp, 2);
    let int = int_md(c)?;
    let dest_qp = bth(c, dst_port)?;
    if c.remaining() > 0 {
        return Err(ReportError::TrailingBytes { offset: c.offset(), count: c.remaining() });
    }
    Ok(InnerPacket {
        src_ip: Ipv4Addr::from(be32(&ip, 12)),
        dst_ip: Ipv4Addr::from(be32(&ip, 16)),
        protocol: ip[9],
        src_port: be16(&udp, 0),
        dst_port,
        dscp,
        ecn: ip[1] & 0x03,
        ttl: ip[8],
        dest_qp,
        int,
    })
}

/// The BTH after the stack: present when the sink saw one (RoCEv2 port and
/// bytes left); a partial BTH is an error.
fn bth(c: &mut Cursor<'_>, dst_port: u16) -> Result<Option<u32>, ReportError> {
    if dst_port != ROCEV2_PORT || c.remaining() == 0 {
        return Ok(None);
    }
    let b = header::<12>(c, "inner RoCEv2 BTH")?;
    Ok(Some(be32(&b, 4) & 0x00ff_ffff))
}

fn int_md(c: &mut Cursor<'_>) -> Result<IntMd, ReportError> {
    let at = c.offset();
    let shim = header::<4>(c, "INT shim")?;
    let unexpected =
        |what, offset, found: u64, expected| ReportError::Unexpected { what, offset, found, expected };
    if shim[0] >> 4 != INT_TYPE_MD {
        return Err(unexpected("INT shim type", at, (shim[0] >> 4).into(), "1 (INT-MD)"));
    }
    // The shim length counts the INT-MD header (3 words) and the stack.
    let words = usize::from(shim[1]);
    if words < 3 {
        return Err(ReportError::Length {
            what: "INT shim length",
            offset: at + 1,
            found: words,
            bound: "3 words",
        });
    }
    let md_at = c.offset();
    let md = header::<12>(c, "INT-MD header")?;
    let version = md[0] >> 4;
    if version != INT_VERSION {
        return Err(unexpected("INT-MD version", md_at, version.into(), "2"));
    }
    let hop_ml = md[2] & 0x1f;
    if hop_ml != INT_HOP_WORDS {
        return Err(unexpected("INT-MD hop ML", md_at + 2, hop_ml.into(), "6 words"));
    }
    let instructions = be16(&md, 4);
    if instructions != INT_INSTRUCTIONS {
        return Err(unexpected("INT-MD instructions", md_at + 4, instructions.into(), "0xf400"));
    }
    let hops = stack(c, words - 3, at + 1)?;
    Ok(IntMd {
        original_dscp: shim[3] >> 2,
        version,
        discard: md[0] & 0x08 != 0,
        hop_limit_exceeded: md[0] & 0x04 != 0,
        mtu_exceeded: md[0] & 0x02 != 0,
        hop_ml,
        remaining_hops: md[3],
        instructions,
        domain_id: be16(&md, 6),
        hops,
    })
}

/// The stack of `words` words, in path order (the source first).
fn stack(c: &mut Cursor<'_>, words: usize, len_at: usize) -> Result<Vec<HopRecord>, ReportError> {
    if !words.is_multiple_of(usize::from(INT_HOP_WORDS)) {
        return Err(ReportError::Length {
            what: "INT stack (words)",
            offset: len_at,
            found: words,
            bound: "a whole number of 6-word hops",
        });
    }
    let mut stack = c.sub(words * 4, "INT stack")?;
    let mut hops = Vec::with_capacity(words / usize::from(INT_HOP_WORDS));
    while stack.remaining() > 0 {
        hops.push(hop(&mut stack)?);
    }
    // Each hop pushes on top, so the wire order is the last hop first.
    hops.reverse();
    Ok(hops)
}

fn hop(c: &mut Cursor<'_>) -> Result<HopRecord, ReportError> {
    let h = header::<24>(c, "INT hop metadata")?;
    let queue = be32(&h, 12);
    Ok(HopRecord {
        node_id: be32(&h, 0),
        ingress_port: be16(&h, 4),
        egress_port: be16(&h, 6),
        hop_latency: be32(&h, 8),
        queue_id: (queue >> 24) as u8,
        queue_occupancy: queue & 0x00ff_ffff,
        egress_ts: (u64::from(be32(&h, 16)) << 32) | u64::from(be32(&h, 20)),
    })
}
