//! Checks the overrides in force against the baseline routing, which the
//! caller has already repaired for failed links and switches. An override
//! whose ports are no longer the baseline group's points into a failure
//! (or misses a restored link) and must be replaced in this decision,
//! whatever the rate limit says; one whose baseline weights merely moved is
//! recomputed through the normal path.

use std::collections::BTreeMap;

use metaroce_telemetry::PortKey;
use metaroce_topo::{Routing, SwitchId};

use crate::decision::Forced;
use crate::state::Override;

/// What the check found.
#[derive(Debug, Default)]
pub(crate) struct Stale {
    pub forced: Forced,
    /// Leaves with a stale or outdated override: they are recomputed.
    pub leaves: Vec<SwitchId>,
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
