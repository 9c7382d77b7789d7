//! Lookups the decision needs many times: which link and peer an egress
//! port of a switch leads to, and how much each port counts this decision.

use metaroce_telemetry::PortKey;
use metaroce_topo::{LinkId, Routing, SwitchId, Topology};

/// Per switch, its switch-to-switch ports by port number, and the
/// bandwidth of its live links to each neighbor. Every switch's entries
/// lie in one shared array (built again for every decision: a few
/// allocations, not two per switch).
#[derive(Debug)]
pub(crate) struct PortIndex {
    /// Switch `s`'s ports are `ports[port_start[s]..port_start[s + 1]]`,
    /// indexed by port number: `(link, peer, bandwidth)`, `link == NONE`
    /// for a port that faces no switch. Dense, because the re-weighting
    /// looks up every member of every group it touches.
    port_start: Vec<usize>,
    ports: Vec<(u32, u32, u64)>,
    /// Switch `s`'s neighbors are `peers[peer_start[s]..peer_start[s + 1]]`:
    /// `(peer, total bandwidth of live links to it)`, sorted by peer.
    peer_start: Vec<usize>,
    peers: Vec<(SwitchId, u64)>,
}

const NONE: u32 = u32::MAX;

impl PortIndex {
    pub(crate) fn new(topo: &Topology, routing: &Routing) -> Self {
        let n = topo.switches.len();
        let mut index = PortIndex {
            port_start: Vec::with_capacity(n + 1),
            ports: Vec::new(),
            peer_start: Vec::with_capacity(n + 1),
            peers: Vec::new(),
        };
        let mut bw: Vec<(SwitchId, u64)> = Vec::new();
        for s in 0..n {
            let adj = topo.adjacency(s);
            let top = adj.iter().map(|a| usize::from(a.port)).max().map_or(0, |p| p + 1);
            let base = index.ports.len();
            index.port_start.push(base);
            index.ports.resize(base + top, (NONE, NONE, 0));
            for a in adj {
                if let (Ok(link), Ok(peer)) = (u32::try_from(a.link), u32::try_from(a.peer)) {
                    index.ports[base + usize::from(a.port)] =
                        (link, peer, topo.links[a.link].bandwidth.bps());
                }
            }
            index.peer_start.push(index.peers.len());
            bw.clear();
            bw.extend(
                adj.iter()
                    .filter(|a| routing.link_is_up(a.link))
                    .map(|a| (a.peer, topo.links[a.link].bandwidth.bps())),
            );
            bw.sort_unstable();
            bw.dedup_by(|later, first| {
                let same = later.0 == first.0;
                if same {
                    first.1 = first.1.saturating_add(later.1);
                }
                same
            });
            index.peers.extend_from_slice(&bw);
        }
        index.port_start.push(index.ports.len());
        index.peer_start.push(index.peers.len());
        index
    }

    fn entry(&self, switch: SwitchId, port: u16) -> Option<(u32, u32, u64)> {
        let (from, to) = (*self.port_start.get(switch)?, *self.port_start.get(switch + 1)?);
        let e = *self.ports.get(from..to)?.get(usize::from(port))?;
        (e.0 != NONE).then_some(e)
    }

    /// Link and peer of `switch`'s egress `port`, if it faces a switch.
    pub(crate) fn get(&self, switch: SwitchId, port: u16) -> Option<(LinkId, SwitchId)> {
        self.entry(switch, port).map(|(link, peer, _)| (link as LinkId, peer as SwitchId))
    }

    /// Bandwidth of the link on `switch`'s `port` (0 if none).
    pub(crate) fn bandwidth(&self, switch: SwitchId, port: u16) -> u64 {
        self.entry(switch, port).map_or(0, |e| e.2)
    }

    /// Total bandwidth of `switch`'s live links to `peer`.
    pub(crate) fn bandwidth_to(&self, switch: SwitchId, peer: SwitchId) -> u64 {
        let (Some(&from), Some(&to)) = (self.peer_start.get(switch), self.peer_start.get(switch + 1)) else {
            return 0;
        };
        let Some(v) = self.peers.get(from..to) else { return 0 };
        v.binary_search_by_key(&peer, |e| e.0).map_or(0, |i| v[i].1)
    }

    /// The link of a port, when both its switches and the link are up.
    pub(crate) fn live(&self, routing: &Routing, key: PortKey) -> Option<LinkId> {
        let (link, peer) = self.get(key.switch, key.port)?;
        (routing.link_is_up(link) && routing.switch_is_up(key.switch) && routing.switch_is_up(peer))
            .then_some(link)
    }
}

/// Why a port counts for less than its bandwidth this decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Perturb {
    /// Derated by the policy (level > 0).
    Derated,
    /// Its queue is warm: an alternative worth less than an idle one.
    Warm,
}

/// Per switch, `(port, factor per mille, why)` of every port that does not
/// count at full bandwidth, sorted by port.
#[derive(Debug, Default)]
pub(crate) struct Factors {
    by_switch: Vec<Vec<(u16, u32, Perturb)>>,
    /// Switches with at least one entry, ascending.
    switches: Vec<SwitchId>,
}

impl Factors {
    pub(crate) fn new(n: usize, mut entries: Vec<(PortKey, u32, Perturb)>) -> Self {
        entries.sort_unstable_by_key(|e| e.0);
        let mut by_switch = vec![Vec::new(); n];
        let mut switches = Vec::new();
        for (k, f, why) in entries {
            let Some(v) = by_switch.get_mut(k.switch) else { continue };
            if v.is_empty() {
                switches.push(k.switch);
            }
            v.push((k.port, f, why));
        }
        Factors { by_switch, switches }
    }

    pub(crate) fn get(&self, switch: SwitchId, port: u16) -> Option<(u32, Perturb)> {
        let v = self.by_switch.get(switch)?;
        let i = v.binary_search_by_key(&port, |e| e.0).ok()?;
        Some((v[i].1, v[i].2))
    }

    pub(crate) fn factor(&self, switch: SwitchId, port: u16) -> u32 {
        self.get(switch, port).map_or(1000, |e| e.0)
    }

    pub(crate) fn switches(&self) -> &[SwitchId] {
        &self.switches
    }
}
