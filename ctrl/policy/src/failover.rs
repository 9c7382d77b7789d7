//! Checks the overrides in force against the baseline routing, which the
//! caller has already repaired for failed links and switches. An override
//! whose ports are no longer the baseline group's points into a failure
//! (or misses a restored link) and must be replaced in this decision,
//! whatever the rate limit says; one whose baseline weights merely moved is
//! recomputed through the normal path.

use std::collections::BTreeMap;

use metaroce_telemetry::PortKey;
use metaroce_topo::{Routing, SwitchId, Topology};

use crate::decision::Forced;
use crate::state::Override;

/// What the check found.
#[derive(Debug, Default)]
pub(crate) struct Stale {
    pub forced: Forced,
    /// Leaves with a stale or outdated override: they are recomputed.
    pub leaves: Vec<SwitchId>,
}

/// What the baseline routing is a function of, besides the topology: its
/// options and which links and switches are down (the incremental repair
/// gives the same groups as a fresh computation). While it stays the same,
/// no override can have gone stale, and checking them all is skipped:
/// there may be hundreds of thousands.
pub(crate) fn baseline_fingerprint(topo: &Topology, routing: &Routing) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |v: u64| {
        for b in v.to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(topo.switches.len() as u64);
    eat(topo.links.len() as u64);
    eat(u64::from(routing.options().max_weight));
    for l in (0..topo.links.len()).filter(|&l| !routing.link_is_up(l)) {
        eat(l as u64);
    }
    eat(u64::MAX);
    for s in (0..topo.switches.len()).filter(|&s| !routing.switch_is_up(s)) {
        eat(s as u64);
    }
    h
}

pub(crate) fn check(
    routing: &Routing,
    overrides: &BTreeMap<SwitchId, BTreeMap<SwitchId, Override>>,
) -> Stale {
    let mut out = Stale::default();
    for (&leaf, by_switch) in overrides {
        let mut touched = false;
        for (&s, o) in by_switch {
            let Some((_, group)) = routing.group_toward(s, leaf) else {
                let gone = o.weights.first().map(|w| PortKey { switch: s, port: w.port });
                out.forced.insert((leaf, s), gone);
                touched = true;
                continue;
            };
            let same_ports = group.members.len() == o.weights.len()
                && group.members.iter().zip(&o.weights).all(|(m, w)| m.port == w.port);
            if !same_ports {
                let gone = o
                    .weights
                    .iter()
                    .find(|w| !group.members.iter().any(|m| m.port == w.port))
                    .map(|w| PortKey { switch: s, port: w.port });
                out.forced.insert((leaf, s), gone);
                touched = true;
            } else if group.members.iter().zip(&o.base).any(|(m, b)| m.weight != b.weight) {
                touched = true;
            }
        }
        if touched {
            out.leaves.push(leaf);
        }
    }
    out
}
