//! What a decision says (the change records the controller logs and counts,
//! the derate levels), and the rate limit that picks which proposed
//! changes go out now.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BTreeMap;

use metaroce_telemetry::PortKey;
use metaroce_topo::{LinkId, Routing, SwitchId};
use serde::{Deserialize, Serialize};

use crate::index::PortIndex;
use crate::reweight::Proposal;
use crate::state::{key_of, Override, PolicyState, PortWeight};

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
/// (half the L1 distance of the normalized weights). Both are in port
/// order, as groups and overrides always are.
pub(crate) fn shift(a: &[PortWeight], b: &[PortWeight]) -> u32 {
    let total = |v: &[PortWeight]| v.iter().map(|w| u128::from(w.weight)).sum::<u128>().max(1);
    let (ta, tb) = (total(a), total(b));
    let (mut i, mut j, mut diff) = (0, 0, 0u128);
    loop {
        let (x, y) = match (a.get(i), b.get(j)) {
            (None, None) => break,
            (Some(p), Some(q)) if p.port == q.port => {
                i += 1;
                j += 1;
                (p.weight, q.weight)
            }
            (Some(p), Some(q)) if p.port < q.port => {
                i += 1;
                (p.weight, 0)
            }
            (Some(p), None) => {
                i += 1;
                (p.weight, 0)
            }
            (_, Some(q)) => {
                j += 1;
                (0, q.weight)
            }
        };
        diff += (u128::from(x) * tb).abs_diff(u128::from(y) * ta);
    }
    let (num, den) = (diff * 500, ta * tb);
    // Weights are small: stay off the slow 128-bit division when they fit.
    match (u64::try_from(num), u64::try_from(den)) {
        (Ok(n), Ok(d)) => u32::try_from(n / d).unwrap_or(u32::MAX),
        _ => u32::try_from(num / den).unwrap_or(u32::MAX),
    }
}

/// Stale overrides that must go now: (leaf, switch) → the failed member.
pub(crate) type Forced = BTreeMap<(SwitchId, SwitchId), Option<PortKey>>;

/// Applies all failovers and the most urgent other proposals up to
/// `budget` groups; returns the applied changes and the proposals held
/// back.
///
/// The budget counts groups as the switch holds them: the controller
/// dedups by `(switch, weights)`, so routes of one switch that move to the
/// same weights are one group write and count once.
///
/// Only the most urgent proposals need an order: they are taken in sorted
/// chunks until the failovers and the budget are spent. Of the rest (on a
/// fabric with many hot ports, nearly all of the millions proposed), only
/// those whose weights a switch already takes go out, after the others,
/// in order; the rest wait unsorted (the next decision sorts again).
pub(crate) fn apply(
    proposals: Vec<Proposal>,
    forced: &Forced,
    budget: usize,
    (routing, index): (&Routing, &PortIndex),
    state: &mut PolicyState,
) -> (Vec<Change>, Vec<Proposal>) {
    let kind = |p: &Proposal| {
        if forced.contains_key(&(p.leaf, p.switch)) {
            ChangeKind::Failover
        } else {
            p.kind
        }
    };
    // Sort keys, not the proposals: there may be millions.
    let mut order: Vec<_> =
        proposals.iter().enumerate().map(|(i, p)| (kind(p), Reverse(p.shift), p.leaf, p.switch, i)).collect();
    let failovers = order.iter().filter(|o| o.0 == ChangeKind::Failover).count();
    let mut proposals: Vec<Option<Proposal>> = proposals.into_iter().map(Some).collect();
    let mut gate = Gate { budget, groups: 0, admitted: BTreeMap::new() };
    let mut changes = Vec::new();
    let mut held = Vec::new();
    let mut done = 0;
    // Chunks grow: many urgent proposals may share weights already taken
    // (they cost no budget), and each partition walks all that is left.
    let mut least = 1024;
    while done < order.len() && (done < failovers || gate.groups < gate.budget) {
        let chunk = failovers.saturating_sub(done).max(4 * (gate.budget - gate.groups)).max(least);
        least = least.saturating_mul(4);
        let rest = &mut order[done..];
        if chunk < rest.len() {
            rest.select_nth_unstable(chunk - 1);
        }
        let chunk = chunk.min(rest.len());
        rest[..chunk].sort_unstable();
        for &(kind, _, leaf, switch, i) in &rest[..chunk] {
            let Some(p) = proposals[i].take() else { continue };
            if kind != ChangeKind::Failover && !gate.admit(&p, routing) {
                held.push(p);
                continue;
            }
            let failed = forced.get(&(leaf, switch)).copied().flatten();
            changes.push(commit(p, kind, failed, (routing, index), state));
        }
        done += chunk;
    }
    // The budget is spent: only weights a switch already takes still go.
    let mut late = Vec::new();
    held.reserve(order.len() - done);
    for &key in &order[done..] {
        let Some(p) = proposals[key.4].take() else { continue };
        if gate.known(&p, routing) {
            late.push(key);
            proposals[key.4] = Some(p);
        } else {
            held.push(p);
        }
    }
    late.sort_unstable();
    for (kind, _, _, _, i) in late {
        if let Some(p) = proposals[i].take() {
            changes.push(commit(p, kind, None, (routing, index), state));
        }
    }
    (changes, held)
}

/// The rate limit's count: groups admitted so far, per switch by weights.
struct Gate {
    budget: usize,
    groups: usize,
    /// Per switch, the weights admitted so far (a switch has few).
    admitted: BTreeMap<SwitchId, Vec<Vec<PortWeight>>>,
}

impl Gate {
    /// The weights the switch ends up with: the new override's, or the
    /// baseline group's it returns to.
    fn target<'a>(p: &'a Proposal, routing: &Routing) -> Cow<'a, [PortWeight]> {
        match &p.new {
            Some(w) => Cow::Borrowed(w),
            None => Cow::Owned(
                routing.group_toward(p.switch, p.leaf).map(|(_, g)| key_of(&g.members)).unwrap_or_default(),
            ),
        }
    }

    /// True when the switch already takes these weights (no new group).
    fn known(&self, p: &Proposal, routing: &Routing) -> bool {
        let to = Self::target(p, routing);
        self.admitted.get(&p.switch).is_some_and(|v| v.iter().any(|w| **w == *to))
    }

    /// Admits `p` if its weights are known or the budget allows one more group.
    fn admit(&mut self, p: &Proposal, routing: &Routing) -> bool {
        let to = Self::target(p, routing);
        let known = self.admitted.get(&p.switch).is_some_and(|v| v.iter().any(|w| **w == *to));
        if known {
            return true;
        }
        if self.groups == self.budget {
            return false;
        }
        self.groups += 1;
        self.admitted.entry(p.switch).or_default().push(to.into_owned());
        true
    }
}

/// Writes one proposal into the overrides and says what changed.
fn commit(
    p: Proposal,
    kind: ChangeKind,
    failed: Option<PortKey>,
    (routing, index): (&Routing, &PortIndex),
    state: &mut PolicyState,
) -> Change {
    let base = routing.group_toward(p.switch, p.leaf).map(|(_, g)| key_of(&g.members)).unwrap_or_default();
    let by_leaf = state.overrides.entry(p.leaf).or_default();
    let old = match &p.new {
        Some(w) => by_leaf.insert(p.switch, Override { base: base.clone(), weights: w.clone() }),
        None => by_leaf.remove(&p.switch),
    };
    if by_leaf.is_empty() {
        state.overrides.remove(&p.leaf);
    }
    let cause = if kind == ChangeKind::Failover { failed } else { p.cause };
    let cause = cause.and_then(|k| {
        index.get(k.switch, k.port).map(|(link, _)| HotLink { switch: k.switch, port: k.port, link })
    });
    Change {
        switch: p.switch,
        leaf: p.leaf,
        kind,
        old: old.map_or_else(|| base.clone(), |o| o.weights),
        baseline: p.new.is_none(),
        new: p.new.unwrap_or(base),
        cause,
        shift_permille: p.shift,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pw(v: &[(u16, u32)]) -> Vec<PortWeight> {
        v.iter().map(|&(port, weight)| PortWeight { port, weight }).collect()
    }

    /// The rate limit as it was: every key sorted, then one pass.
    fn apply_full_sort(
        proposals: Vec<Proposal>,
        forced: &Forced,
        budget: usize,
        (routing, index): (&Routing, &PortIndex),
        state: &mut PolicyState,
    ) -> (Vec<Change>, Vec<Proposal>) {
        let kind = |p: &Proposal| {
            if forced.contains_key(&(p.leaf, p.switch)) {
                ChangeKind::Failover
            } else {
                p.kind
            }
        };
        let mut order: Vec<_> = proposals
            .iter()
            .enumerate()
            .map(|(i, p)| (kind(p), Reverse(p.shift), p.leaf, p.switch, i))
            .collect();
        order.sort_unstable();
        let mut proposals: Vec<Option<Proposal>> = proposals.into_iter().map(Some).collect();
        let mut gate = Gate { budget, groups: 0, admitted: BTreeMap::new() };
        let (mut changes, mut held) = (Vec::new(), Vec::new());
        for (kind, _, leaf, switch, i) in order {
            let Some(p) = proposals[i].take() else { continue };
            if kind != ChangeKind::Failover && !gate.admit(&p, routing) {
                held.push(p);
                continue;
            }
            let failed = forced.get(&(leaf, switch)).copied().flatten();
            changes.push(commit(p, kind, failed, (routing, index), state));
        }
        (changes, held)
    }

    #[test]
    fn sorting_only_the_urgent_chunks_applies_what_a_full_sort_does() {
        use metaroce_topo::gen::{self, Common};
        use metaroce_topo::units::Bandwidth;
        let t = gen::leaf_spine(&Common::new("t", Bandwidth::gbps(100)), 2, 2, 1, 1).unwrap();
        let r = Routing::compute(&t);
        let index = PortIndex::new(&t, &r);
        let mut x: u64 = 99;
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for round in 0..60 {
            let n = [5, 70, 300, 2000][round % 4];
            let proposals: Vec<Proposal> = (0..n)
                .map(|i| Proposal {
                    // Unknown switches and leaves: no baseline group, as if stale.
                    switch: 100 + rand(12) as usize,
                    leaf: 200 + i,
                    new: (rand(5) > 0).then(|| pw(&[(1, 1 + rand(3) as u32), (2, 1 + rand(2) as u32)])),
                    cause: None,
                    kind: if rand(2) == 0 { ChangeKind::Derate } else { ChangeKind::Restore },
                    shift: rand(40) as u32,
                    base_hash: 0,
                })
                .collect();
            let forced: Forced =
                proposals.iter().filter(|_| rand(10) == 0).map(|p| ((p.leaf, p.switch), None)).collect();
            let budget = 1 + rand(80) as usize;
            let (mut a, mut b) = (PolicyState::default(), PolicyState::default());
            let (ca, mut ha) = apply(proposals.clone(), &forced, budget, (&r, &index), &mut a);
            let (cb, mut hb) = apply_full_sort(proposals, &forced, budget, (&r, &index), &mut b);
            assert_eq!(ca, cb, "round {round}: the same changes in the same order");
            let key = |p: &Proposal| (p.leaf, p.switch);
            ha.sort_by_key(key);
            hb.sort_by_key(key);
            assert_eq!(ha, hb, "round {round}: the same proposals held back");
            assert_eq!(a, b, "round {round}");
        }
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
