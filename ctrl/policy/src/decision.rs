//! What a decision says (the change records the controller logs and counts,
//! the derate levels), and the rate limit that picks which proposed
//! changes go out now.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use metaroce_telemetry::PortKey;
use metaroce_topo::{LinkId, SwitchId};
use serde::{Deserialize, Serialize};

use crate::index::PortIndex;
use crate::reweight::Proposal;
use crate::state::{PolicyState, PortWeight};

/// Why a group's weights changed. The order is the priority under the
/// rate limit: failover first (and never held back), then relief of
/// congestion, then restoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// A member of an override went down: the override is replaced at once.
    Failover,
    /// Weight moved away from a hot link.
    Derate,
    /// Weight moved back toward the baseline as a link cooled.
    Restore,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Failover => "failover",
            ChangeKind::Derate => "derate",
            ChangeKind::Restore => "restore",
        }
    }
}

/// One direction of a link: the egress port of `switch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct HotLink {
    pub switch: SwitchId,
    pub port: u16,
    pub link: LinkId,
}

/// One group's new weights, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub switch: SwitchId,
    /// The destination leaf the group serves.
    pub leaf: SwitchId,
    pub kind: ChangeKind,
    /// Weights in force before (the baseline's when there was no override).
    pub old: Vec<PortWeight>,
    /// Weights wanted now. Empty when the baseline has no route any more.
    pub new: Vec<PortWeight>,
    /// True when `new` is the baseline's: the override is dropped.
    pub baseline: bool,
    /// The link whose level change (or failure) led here, when known.
    pub cause: Option<HotLink>,
    /// Share of the group's traffic that moves, per mille.
    pub shift_permille: u32,
}

/// A port running below full capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortLevel {
    pub switch: SwitchId,
    pub port: u16,
    pub link: LinkId,
    pub level: u8,
    pub factor_permille: u32,
}

/// The outcome of one decision. The full set of desired weights that
/// differ from the baseline is [`PolicyState::overrides`] afterwards;
/// `changes` is the difference from before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub now_ns: u64,
    /// Applied changes, most urgent first.
    pub changes: Vec<Change>,
    /// Every derated port, by port.
    pub levels: Vec<PortLevel>,
    /// Changes held back by `max_changed_groups`; they come next time.
    pub deferred: usize,
    /// Overrides in force after this decision.
    pub overrides: usize,
}

/// Share of traffic that differs between two weightings, per mille
/// (half the L1 distance of the normalized weights).
pub(crate) fn shift(a: &[PortWeight], b: &[PortWeight]) -> u32 {
    let total = |v: &[PortWeight]| v.iter().map(|w| u128::from(w.weight)).sum::<u128>().max(1);
    let (ta, tb) = (total(a), total(b));
    let mut ports: BTreeMap<u16, (u128, u128)> = BTreeMap::new();
    for w in a {
        ports.entry(w.port).or_default().0 += u128::from(w.weight);
    }
    for w in b {
        ports.entry(w.port).or_default().1 += u128::from(w.weight);
    }
    let diff: u128 = ports.values().map(|&(x, y)| (x * tb).abs_diff(y * ta)).sum();
    u32::try_from(diff * 500 / (ta * tb)).unwrap_or(u32::MAX)
}

/// Stale overrides that must go now: (leaf, switch) → the failed member.
pub(crate) type Forced = BTreeMap<(SwitchId, SwitchId), Option<PortKey>>;

/// Classifies the proposals, applies all failovers and the most urgent
/// `budget` others to `state`, and returns the applied changes and the
/// leaves with changes held back.
pub(crate) fn apply(
    proposals: Vec<Proposal>,
    forced: &Forced,
    budget: usize,
    index: &PortIndex,
    state: &mut PolicyState,
) -> (Vec<Change>, BTreeSet<SwitchId>, usize) {
    let mut ranked: Vec<(Change, Proposal)> =
        proposals.into_iter().map(|p| (classify(&p, forced, index), p)).collect();
    ranked.sort_by_key(|(c, _)| (c.kind, Reverse(c.shift_permille), c.leaf, c.switch));
    let mut changes = Vec::new();
    let mut held = BTreeSet::new();
    let mut deferred = 0;
    let mut left = budget;
    for (change, p) in ranked {
        if change.kind != ChangeKind::Failover {
            if left == 0 {
                held.insert(p.leaf);
                deferred += 1;
                continue;
            }
            left -= 1;
        }
        let by_leaf = state.overrides.entry(p.leaf).or_default();
        match p.new {
            Some(o) => by_leaf.insert(p.switch, o),
            None => by_leaf.remove(&p.switch),
        };
        if by_leaf.is_empty() {
            state.overrides.remove(&p.leaf);
        }
        changes.push(change);
    }
    (changes, held, deferred)
}

fn classify(p: &Proposal, forced: &Forced, index: &PortIndex) -> Change {
    let old = p.old.clone().unwrap_or_else(|| p.base.clone());
    let new = p.new.as_ref().map_or_else(|| p.base.clone(), |o| o.weights.clone());
    let stale = forced.get(&(p.leaf, p.switch));
    let kind = if stale.is_some() {
        ChangeKind::Failover
    } else if shift(&new, &p.base) < shift(&old, &p.base) {
        ChangeKind::Restore
    } else {
        ChangeKind::Derate
    };
    let cause = match stale {
        Some(failed) => *failed,
        None => p.cause,
    };
    let cause = cause.and_then(|k| {
        index.get(k.switch, k.port).map(|(link, _)| HotLink { switch: k.switch, port: k.port, link })
    });
    Change {
        switch: p.switch,
        leaf: p.leaf,
        kind,
        shift_permille: shift(&old, &new),
        old,
        new,
        baseline: p.new.is_none(),
        cause,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pw(v: &[(u16, u32)]) -> Vec<PortWeight> {
        v.iter().map(|&(port, weight)| PortWeight { port, weight }).collect()
    }

    #[test]
    fn shift_is_the_share_of_traffic_that_moves() {
        assert_eq!(shift(&pw(&[(1, 1), (2, 1)]), &pw(&[(1, 1), (2, 1)])), 0);
        assert_eq!(shift(&pw(&[(1, 1), (2, 1)]), &pw(&[(1, 2), (2, 2)])), 0);
        assert_eq!(shift(&pw(&[(1, 1), (2, 1)]), &pw(&[(1, 1), (2, 3)])), 250);
        assert_eq!(shift(&pw(&[(1, 1), (2, 1)]), &pw(&[(2, 1)])), 500);
        assert_eq!(shift(&pw(&[(1, 1)]), &[]), 500, "all traffic loses its way: half of the L1 sum");
    }
}
