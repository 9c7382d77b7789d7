//! The control-plane state of one switch as typed entries: what the
//! controller writes, reads back and diffs. Every entry knows its key (what
//! identifies it on the switch) and its phase (the order in which it can be
//! written without a packet ever meeting a dangling reference).

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// A 48-bit MAC address as six bytes.
pub type Mac = [u8; 6];

/// Where a route sends packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteTarget {
    /// A weighted next-hop group (`nhop_group` key).
    Group(u16),
    /// A single next hop.
    Nhop(u16),
}

/// A RoCEv2 flow as `steer_flow` keys it (and as a large-flow digest
/// names it): IPv4 source and destination, UDP source port, BTH
/// destination QP (24 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FlowKey {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub sport: u16,
    /// Destination QP; only the low 24 bits exist on the wire.
    pub qp: u32,
}

impl std::fmt::Display for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{} -> {} qp {:#08x}", self.src, self.sport, self.dst, self.qp)
    }
}

/// One piece of control-plane state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    /// Default action of the keyless `config` table.
    Config { switch_id: u32, flowlet_timeout_us: u64 },
    /// Default action of the keyless `egress_config` table.
    EgressConfig { digest_interval_us: u64, report_period_us: u64, latency_shift: u8 },
    /// Default action of the keyless `report_config` table; `dst_ip` 0 disables reports.
    ReportConfig { src_mac: Mac, dst_mac: Mac, src_ip: Ipv4Addr, dst_ip: Ipv4Addr, dst_port: u16 },
    /// A host-facing ingress port (INT source).
    EdgePort { port: u16 },
    /// An INT watchlist rule: `(value, mask)` per field.
    Watch { src: (Ipv4Addr, u32), dst: (Ipv4Addr, u32), l4_dst_port: (u16, u16), priority: i32, max_hops: u8 },
    /// An LPM route.
    Route { prefix: Ipv4Addr, len: u8, target: RouteTarget },
    /// A next hop: egress port and MAC rewrite.
    Nhop { id: u16, port: u16, src_mac: Mac, dst_mac: Mac },
    /// An action-selector member selecting one next hop.
    Member { id: u32, nhop: u16 },
    /// An action-selector group: `(member, weight)`, sorted by member.
    Group { id: u32, members: Vec<(u32, u32)> },
    /// The `nhop_group` entry `id` (what routes point at) and the selector
    /// group it uses. Re-weighting a route's members points its entry at a
    /// new selector group in one write; the route itself never changes.
    /// Snapshots written before the two were decoupled leave `group` out
    /// (it reads as 0, an id no selector group has); [`Entry::normalize`]
    /// turns that into the `id` those snapshots meant.
    GroupEntry {
        id: u16,
        #[serde(default)]
        group: u32,
    },
    /// A port taken out of service.
    PortDown { port: u16 },
    /// Pins the new flowlets of one flow to next hop `nhop_id`, whose
    /// egress port is `port` (checked against `port_down` first). Must be
    /// a member of the route's group: see [`crate::check_steer`].
    SteerFlow { flow: FlowKey, nhop_id: u16, port: u16 },
    /// The same for every flow of a host pair without an entry of its own.
    SteerPair { src: Ipv4Addr, dst: Ipv4Addr, nhop_id: u16, port: u16 },
    /// Default action of the keyless large-flow `config` table: window
    /// length (µs on BMv2) and the bytes per window that make a flow
    /// large; `threshold_bytes` 0 turns the detector off.
    LargeFlowConfig { window_us: u32, threshold_bytes: u32 },
    /// Default action of the keyless drain-rule `config` table: the rule
    /// on or off, and the least time between two pairing digests of one
    /// slot (µs on BMv2, ns on Tofino).
    DrainConfig { enabled: bool, pair_interval_us: u32 },
    /// `qp_pair`: an ACK from `src` to `dst` naming the requester QP
    /// `ack_qp` belongs to the data of responder QP `data_qp` (which flows
    /// from `dst` to `src`). Written on the sender's leaf.
    QpPair { src: Ipv4Addr, dst: Ipv4Addr, ack_qp: u32, data_qp: u32 },
    /// Egress thresholds and MTU of a port.
    EgressPort { port: u16, edge: bool, mtu: u16, queue_high: u32, queue_low: u32, ecn_threshold: u32 },
    /// A clone session to one port.
    CloneSession { id: u32, port: u32 },
}

/// What identifies an entry on the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Key {
    Config,
    EgressConfig,
    ReportConfig,
    EdgePort(u16),
    Watch {
        src: (u32, u32),
        dst: (u32, u32),
        l4: (u16, u16),
        priority: i32,
    },
    Route(u32, u8),
    Nhop(u16),
    Member(u32),
    Group(u32),
    GroupEntry(u16),
    PortDown(u16),
    SteerFlow(FlowKey),
    /// Source and destination addresses.
    SteerPair(u32, u32),
    LargeFlowConfig,
    DrainConfig,
    /// The ACK's source and destination addresses and its QP.
    QpPair(u32, u32, u32),
    EgressPort(u16),
    CloneSession(u32),
}

/// Write order. Inserts and modifications go in ascending phase, deletes
/// in descending phase: a route is only pointed at a group that exists,
/// and a group is only deleted when no route points at it any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    Settings = 0,
    Nhops = 1,
    Members = 2,
    Groups = 3,
    GroupEntries = 4,
    Routes = 5,
}

impl Phase {
    pub const ALL: [Phase; 6] =
        [Phase::Settings, Phase::Nhops, Phase::Members, Phase::Groups, Phase::GroupEntries, Phase::Routes];
}

impl Entry {
    pub fn key(&self) -> Key {
        match *self {
            Entry::Config { .. } => Key::Config,
            Entry::EgressConfig { .. } => Key::EgressConfig,
            Entry::ReportConfig { .. } => Key::ReportConfig,
            Entry::EdgePort { port } => Key::EdgePort(port),
            Entry::Watch { src, dst, l4_dst_port, priority, .. } => Key::Watch {
                src: (u32::from(src.0), src.1),
                dst: (u32::from(dst.0), dst.1),
                l4: l4_dst_port,
                priority,
            },
            Entry::Route { prefix, len, .. } => Key::Route(u32::from(prefix), len),
            Entry::Nhop { id, .. } => Key::Nhop(id),
            Entry::Member { id, .. } => Key::Member(id),
            Entry::Group { id, .. } => Key::Group(id),
            Entry::GroupEntry { id, .. } => Key::GroupEntry(id),
            Entry::PortDown { port } => Key::PortDown(port),
            Entry::SteerFlow { flow, .. } => Key::SteerFlow(flow),
            Entry::SteerPair { src, dst, .. } => Key::SteerPair(u32::from(src), u32::from(dst)),
            Entry::LargeFlowConfig { .. } => Key::LargeFlowConfig,
            Entry::DrainConfig { .. } => Key::DrainConfig,
            Entry::QpPair { src, dst, ack_qp, .. } => Key::QpPair(u32::from(src), u32::from(dst), ack_qp),
            Entry::EgressPort { port, .. } => Key::EgressPort(port),
            Entry::CloneSession { id, .. } => Key::CloneSession(id),
        }
    }

    pub fn phase(&self) -> Phase {
        match self {
            Entry::Nhop { .. } => Phase::Nhops,
            Entry::Member { .. } => Phase::Members,
            Entry::Group { .. } => Phase::Groups,
            Entry::GroupEntry { .. } => Phase::GroupEntries,
            // A steer entry points at a next hop like a route at a group:
            // written after it, deleted before it.
            Entry::Route { .. } | Entry::SteerFlow { .. } | Entry::SteerPair { .. } => Phase::Routes,
            _ => Phase::Settings,
        }
    }

    /// Fills in the defaults of older documents: a `GroupEntry` without a
    /// selector group uses the group of its own id.
    pub fn normalize(&mut self) {
        if let Entry::GroupEntry { id, group } = self {
            if *group == 0 {
                *group = u32::from(*id);
            }
        }
    }

    /// Keyless-table defaults can only be modified, never inserted or deleted.
    pub fn is_default(&self) -> bool {
        matches!(
            self,
            Entry::Config { .. }
                | Entry::EgressConfig { .. }
                | Entry::ReportConfig { .. }
                | Entry::LargeFlowConfig { .. }
                | Entry::DrainConfig { .. }
        )
    }
}

impl Key {
    /// The keys of the keyless tables' defaults (what [`Key::is_default`]
    /// answers true for).
    pub const DEFAULTS: [Key; 5] =
        [Key::Config, Key::EgressConfig, Key::ReportConfig, Key::LargeFlowConfig, Key::DrainConfig];

    pub fn is_default(&self) -> bool {
        Key::DEFAULTS.contains(self)
    }
}

/// The `(egress port, weight)` pairs a switch holding `state` spreads the
/// route `prefix/len` over, followed from the route through its
/// `nhop_group` entry, selector group, members and next hops; sorted by
/// port. `None` when the route is missing, goes straight to one next hop,
/// or a link of the chain is missing.
pub fn route_weights(
    state: &std::collections::BTreeMap<Key, Entry>,
    prefix: Ipv4Addr,
    len: u8,
) -> Option<Vec<(u16, u32)>> {
    let Some(Entry::Route { target: RouteTarget::Group(e), .. }) =
        state.get(&Key::Route(u32::from(prefix), len))
    else {
        return None;
    };
    let Some(Entry::GroupEntry { group, .. }) = state.get(&Key::GroupEntry(*e)) else { return None };
    let Some(Entry::Group { members, .. }) = state.get(&Key::Group(*group)) else { return None };
    let mut out = Vec::with_capacity(members.len());
    for &(m, w) in members {
        let Some(Entry::Member { nhop, .. }) = state.get(&Key::Member(m)) else { return None };
        let Some(Entry::Nhop { port, .. }) = state.get(&Key::Nhop(*nhop)) else { return None };
        out.push((*port, w));
    }
    out.sort_unstable();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_keys_are_those_of_the_keyless_defaults() {
        let defaults = [
            Entry::Config { switch_id: 1, flowlet_timeout_us: 100 },
            Entry::EgressConfig { digest_interval_us: 1, report_period_us: 1, latency_shift: 0 },
            Entry::ReportConfig {
                src_mac: [0; 6],
                dst_mac: [0; 6],
                src_ip: Ipv4Addr::UNSPECIFIED,
                dst_ip: Ipv4Addr::UNSPECIFIED,
                dst_port: 0,
            },
            Entry::LargeFlowConfig { window_us: 1, threshold_bytes: 1 },
            Entry::DrainConfig { enabled: true, pair_interval_us: 1 },
        ];
        let keys: Vec<Key> = defaults.iter().map(Entry::key).collect();
        assert!(defaults.iter().all(Entry::is_default));
        assert_eq!(keys, Key::DEFAULTS.to_vec());
        assert!(!Key::Nhop(1).is_default() && !Key::Route(0, 0).is_default());
    }
}
