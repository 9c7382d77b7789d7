//! Lookups the decision needs many times: which link and peer an egress
//! port of a switch leads to, and how much each port counts this decision.

use metaroce_telemetry::PortKey;
use metaroce_topo::{LinkId, Routing, SwitchId, Topology};

/// Per switch, its switch-to-switch ports sorted by port number.
#[derive(Debug)]
pub(crate) struct PortIndex {
    ports: Vec<Vec<(u16, LinkId, SwitchId)>>,
}

impl PortIndex {
    pub(crate) fn new(topo: &Topology) -> Self {
        let ports = (0..topo.switches.len())
            .map(|s| {
                let mut v: Vec<_> = topo.adjacency(s).iter().map(|a| (a.port, a.link, a.peer)).collect();
                v.sort_unstable();
                v
            })
            .collect();
        PortIndex { ports }
    }

    /// Link and peer of `switch`'s egress `port`, if it faces a switch.
    pub(crate) fn get(&self, switch: SwitchId, port: u16) -> Option<(LinkId, SwitchId)> {
        let v = self.ports.get(switch)?;
        let i = v.binary_search_by_key(&port, |e| e.0).ok()?;
        Some((v[i].1, v[i].2))
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
