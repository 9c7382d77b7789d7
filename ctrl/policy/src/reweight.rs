//! Re-weighting toward one destination leaf.
//!
//! Every switch's weights are proportional to the capacity each member
//! leads to, as in the baseline routing, but each port counts its
//! bandwidth times its factor (a derate level, or a warm-queue discount):
//!
//! `cap(s) = Σ over peers p of min(Σ eff_bw(links s→p), cap(p))`,
//! `cap(leaf) = ∞`,
//!
//! parallel links to one peer sharing that peer's capacity in proportion to
//! their own. Capacities flow upstream through the baseline's
//! destination-based groups, so every switch whose paths cross a hot port
//! shifts weight away from it, not only the port's own switch. At factor 1
//! this is exactly the baseline's computation, so an undisturbed switch
//! keeps exactly its baseline weights.
//!
//! Only switches upstream of a perturbed port are recomputed, and the
//! walk stops wherever a switch's capacity comes out as the baseline's (a
//! bottleneck further up absorbs the change): its upstream sees nothing
//! new. Every other switch keeps the baseline's capacity and weights.

use std::collections::{BTreeMap, BTreeSet};

use metaroce_telemetry::PortKey;
use metaroce_topo::{Group, Member, NextHop, Routing, SwitchId, Topology};
use serde::{Deserialize, Serialize};

use crate::decision::{shift, ChangeKind};
use crate::index::{Factors, Perturb, PortIndex};
use crate::state::{Override, PortWeight};

/// What a decision reads, shared by every destination.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub topo: &'a Topology,
    pub routing: &'a Routing,
    pub index: &'a PortIndex,
    pub factors: &'a Factors,
    pub max_weight: u32,
    /// See [`crate::PolicyConfig::max_share_growth_permille`].
    pub max_growth_permille: u32,
}

/// A group whose desired weights changed. Lean: a decision may weigh
/// millions of them and apply only a few hundred; the rest wait in the
/// state for the next decisions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Proposal {
    pub switch: SwitchId,
    pub leaf: SwitchId,
    /// The new override's weights (None: back to the baseline).
    pub new: Option<Vec<PortWeight>>,
    pub cause: Option<PortKey>,
    /// Derate or restore: restore when the new weights are closer to the
    /// baseline's than the old ones.
    pub kind: ChangeKind,
    /// Share of the group's traffic that moves, per mille.
    pub shift: u32,
    /// Fingerprint of the baseline weights it was computed against: a
    /// held-back proposal is only reused while they are the same.
    pub base_hash: u64,
}

impl Proposal {
    fn new(
        (switch, leaf): (SwitchId, SwitchId),
        old: Option<&[PortWeight]>,
        base: &[PortWeight],
        new: Option<Vec<PortWeight>>,
        cause: Option<PortKey>,
    ) -> Self {
        let (old_w, new_w) = (old.unwrap_or(base), new.as_deref().unwrap_or(base));
        let kind =
            if shift(new_w, base) < shift(old_w, base) { ChangeKind::Restore } else { ChangeKind::Derate };
        let shift = shift(old_w, new_w);
        let base_hash = fingerprint(base.iter().map(|w| (w.port, w.weight)));
        Proposal { switch, leaf, new, cause, kind, shift, base_hash }
    }

    /// True while the baseline group is the one it was computed against
    /// (and so it cannot name a port that went down since).
    pub(crate) fn still_fits(&self, routing: &Routing) -> bool {
        let Some((_, g)) = routing.group_toward(self.switch, self.leaf) else { return false };
        let ports_match = self.new.as_ref().is_none_or(|w| {
            w.len() == g.members.len() && w.iter().zip(&g.members).all(|(w, m)| w.port == m.port)
        });
        ports_match && fingerprint(g.members.iter().map(|m| (m.port, m.weight))) == self.base_hash
    }
}

/// FNV-1a over `(port, weight)` pairs: the same on every machine.
fn fingerprint(pairs: impl Iterator<Item = (u16, u32)>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (port, weight) in pairs {
        for b in port.to_le_bytes().into_iter().chain(weight.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Buffers reused across destinations: a decision touches thousands.
#[derive(Debug, Default)]
pub(crate) struct Work {
    stamp: Vec<u32>,
    generation: u32,
    label: Vec<usize>,
    cap: Vec<u64>,
    members: Vec<SwitchId>,
    entries: Vec<(SwitchId, u16, u64)>,
    pairs: Vec<(u16, u64)>,
    caps: Vec<u64>,
    weights: Vec<u32>,
    seeds: Vec<(u8, PortKey)>,
    buckets: Vec<Vec<SwitchId>>,
    base: Vec<PortWeight>,
}

impl Work {
    fn reset(&mut self, n: usize) {
        if self.stamp.len() != n {
            *self = Work { stamp: vec![0; n], label: vec![0; n], cap: vec![0; n], ..Work::default() };
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.fill(0);
            self.generation = 1;
        }
        self.members.clear();
    }

    fn marked(&self, s: SwitchId) -> bool {
        self.stamp[s] == self.generation
    }

    fn mark(&mut self, s: SwitchId, label: usize) {
        self.stamp[s] = self.generation;
        self.label[s] = label;
        self.members.push(s);
    }
}

/// True when `s`'s baseline group toward `leaf` has a member on `port`.
fn uses(routing: &Routing, s: SwitchId, leaf: SwitchId, port: u16) -> bool {
    routing.group_toward(s, leaf).is_some_and(|(_, g)| g.members.iter().any(|m| m.port == port))
}

/// Desired weights toward `leaf` compared with the overrides in force;
/// `causes` are ports whose level changed (they may be back at 0).
pub(crate) fn destination(
    ctx: &Ctx<'_>,
    leaf: SwitchId,
    causes: &BTreeSet<PortKey>,
    old: Option<&BTreeMap<SwitchId, Override>>,
    work: &mut Work,
) -> Vec<Proposal> {
    work.reset(ctx.topo.switches.len());
    let active = seeds(ctx, leaf, causes, work);
    let mut out = Vec::new();
    if active {
        propagate(ctx, leaf, old, work, &mut out);
    }
    // Overrides the walk did not reach have nothing left to route around.
    let fallback = causes.iter().next().copied();
    for (&s, o) in old.into_iter().flatten() {
        if active && work.marked(s) {
            continue;
        }
        work.base.clear();
        if let Some((_, g)) = ctx.routing.group_toward(s, leaf) {
            work.base.extend(g.members.iter().map(|m| PortWeight { port: m.port, weight: m.weight }));
        }
        out.push(Proposal::new((s, leaf), Some(&o.weights), &work.base, None, fallback));
    }
    out
}

/// Ports toward `leaf` that the closure grows from, most telling first:
/// ports that just changed level, then derated ones, then warm ones.
/// Returns true when some derated port lies on the way to `leaf`.
fn seeds(ctx: &Ctx<'_>, leaf: SwitchId, causes: &BTreeSet<PortKey>, work: &mut Work) -> bool {
    work.seeds.clear();
    for &key in causes {
        if uses(ctx.routing, key.switch, leaf, key.port) {
            work.seeds.push((0, key));
        }
    }
    let mut active = false;
    for &s in ctx.factors.switches() {
        let Some((_, g)) = ctx.routing.group_toward(s, leaf) else { continue };
        for m in &g.members {
            let Some((_, why)) = ctx.factors.get(s, m.port) else { continue };
            active |= why == Perturb::Derated;
            let rank = if why == Perturb::Derated { 1 } else { 2 };
            work.seeds.push((rank, PortKey { switch: s, port: m.port }));
        }
    }
    work.seeds.sort_unstable();
    active
}

/// Recomputes switches in order of distance to `leaf`, from the seeds'
/// switches upstream, so every next hop is final before it is used. A
/// switch whose capacity changed passes the walk on to the switches that
/// forward through it; each is labelled with the seed that reached it.
fn propagate(
    ctx: &Ctx<'_>,
    leaf: SwitchId,
    old: Option<&BTreeMap<SwitchId, Override>>,
    work: &mut Work,
    out: &mut Vec<Proposal>,
) {
    let mut buckets = std::mem::take(&mut work.buckets);
    buckets.iter_mut().for_each(Vec::clear);
    let put = |buckets: &mut Vec<Vec<SwitchId>>, dist: u8, s: SwitchId| {
        let d = usize::from(dist);
        if buckets.len() <= d {
            buckets.resize_with(d + 1, Vec::new);
        }
        buckets[d].push(s);
    };
    for i in 0..work.seeds.len() {
        let s = work.seeds[i].1.switch;
        if let (false, Some(dist)) = (work.marked(s), ctx.routing.distance(s, leaf)) {
            work.mark(s, i);
            put(&mut buckets, dist, s);
        }
    }
    let mut dist = 0;
    while dist < buckets.len() {
        let here = std::mem::take(&mut buckets[dist]);
        for &x in &here {
            if let Some(p) = reweigh(ctx, leaf, x, old.and_then(|m| m.get(&x)), work) {
                out.push(p);
            }
            let (now, before) = (work.cap[x], ctx.routing.capacity_toward(x, leaf).unwrap_or(0));
            if now == before {
                continue;
            }
            let next = u8::try_from(dist + 1).unwrap_or(u8::MAX);
            for a in ctx.topo.adjacency(x) {
                let y = a.peer;
                // Cheap tests first. A switch that is not a seed counts its
                // links to x at full bandwidth: when they are the bottleneck
                // both before and now, x's change does not reach it.
                if work.marked(y) || ctx.routing.distance(y, leaf) != Some(next) {
                    continue;
                }
                let links = ctx.index.bandwidth_to(y, x);
                if links.min(now) == links.min(before) || !uses(ctx.routing, y, leaf, a.peer_port) {
                    continue;
                }
                let label = work.label[x];
                work.mark(y, label);
                put(&mut buckets, next, y);
            }
        }
        buckets[dist] = here;
        dist += 1;
    }
    work.buckets = buckets;
}

/// Recomputes `s`'s capacity and weights; a proposal when the desired
/// weights differ from those in force.
fn reweigh(
    ctx: &Ctx<'_>,
    leaf: SwitchId,
    s: SwitchId,
    old: Option<&Override>,
    work: &mut Work,
) -> Option<Proposal> {
    let Some((_, group)) = ctx.routing.group_toward(s, leaf) else {
        // Not reached through a group (cannot happen for a walked switch),
        // so count the baseline's capacity rather than a stale one.
        work.cap[s] = ctx.routing.capacity_toward(s, leaf).unwrap_or(0);
        return None;
    };
    work.cap[s] = capacities(ctx, leaf, s, group, work);
    work.caps.clear();
    work.caps.extend(work.pairs.iter().map(|p| p.1));
    let limited = limit_growth(&mut work.caps, &group.members, ctx.max_growth_permille);
    weights(&work.caps, ctx.max_weight, &mut work.weights);
    if limited {
        // Limited shares are rounded to the weight scale: 32:64 is 1:2.
        let g = work.weights.iter().copied().fold(0, gcd).max(1);
        work.weights.iter_mut().for_each(|w| *w /= g);
    }
    // Weights that split traffic as the baseline's do (64:64 against 1:1,
    // after rounding) are the baseline: no group write for nothing.
    let (base_sum, new_sum) = (
        group.members.iter().map(|m| u128::from(m.weight)).sum::<u128>(),
        work.weights.iter().map(|&w| u128::from(w)).sum::<u128>(),
    );
    let differs = group.members.len() != work.weights.len()
        || group
            .members
            .iter()
            .zip(&work.weights)
            .any(|(m, &w)| u128::from(m.weight) * new_sum != u128::from(w) * base_sum);
    let same_as_old = match old {
        Some(o) => {
            differs
                && o.weights.len() == work.weights.len()
                && o.weights
                    .iter()
                    .zip(work.pairs.iter().zip(&work.weights))
                    .all(|(o, (p, w))| o.port == p.0 && o.weight == *w)
        }
        None => !differs,
    };
    if same_as_old {
        return None;
    }
    work.base.clear();
    work.base.extend(group.members.iter().map(|m| PortWeight { port: m.port, weight: m.weight }));
    let new = differs.then(|| {
        work.pairs.iter().zip(&work.weights).map(|(p, &weight)| PortWeight { port: p.0, weight }).collect()
    });
    let (rank, key) = work.seeds[work.label[s]];
    let old = old.map(|o| o.weights.as_slice());
    Some(Proposal::new((s, leaf), old, &work.base, new, (rank < 2).then_some(key)))
}

/// Fills `work.pairs` with `(port, capacity)` of `s`'s members in port
/// order, and returns `s`'s total capacity toward `leaf`.
fn capacities(ctx: &Ctx<'_>, leaf: SwitchId, s: SwitchId, group: &Group, work: &mut Work) -> u64 {
    work.entries.clear();
    for m in &group.members {
        let NextHop::Switch(peer) = m.next else { continue };
        let bw = ctx.index.bandwidth(s, m.port);
        // Bandwidths are at most 100 Tbit/s, so this cannot overflow.
        let eff = bw.saturating_mul(u64::from(ctx.factors.factor(s, m.port))) / 1000;
        work.entries.push((peer, m.port, eff));
    }
    work.entries.sort_unstable();
    work.pairs.clear();
    let mut total = 0u64;
    for run in work.entries.chunk_by(|x, y| x.0 == y.0) {
        let peer = run[0].0;
        let peer_cap = if work.marked(peer) {
            work.cap[peer]
        } else {
            ctx.routing.capacity_toward(peer, leaf).unwrap_or(0)
        };
        let sum = run.iter().map(|e| e.2).fold(0u64, u64::saturating_add);
        let agg = sum.min(peer_cap);
        total = total.saturating_add(agg);
        if let [(_, port, _)] = run {
            work.pairs.push((*port, agg.max(1)));
            continue;
        }
        let sum = sum.max(1);
        for &(_, port, eff) in run {
            let share = u128::from(agg) * u128::from(eff) / u128::from(sum);
            work.pairs.push((port, u64::try_from(share).unwrap_or(u64::MAX).max(1)));
        }
    }
    work.pairs.sort_unstable();
    total
}

/// Moves `caps` (a group's members' new capacities, in member order) back
/// toward the baseline weights, along the same direction, just far enough
/// that no member's share grows past `max_growth_permille` of its
/// baseline share: displaced traffic spreads, it does not herd onto the
/// few alternatives a small group has. Exact integer arithmetic.
/// Returns true when it moved them.
pub(crate) fn limit_growth(caps: &mut [u64], base: &[Member], max_growth_permille: u32) -> bool {
    if caps.len() != base.len() || caps.is_empty() {
        return false;
    }
    // Keep proportions, in at most 32 bits each, so products fit in u128.
    let top = caps.iter().copied().max().unwrap_or(0);
    let drop = (64 - top.leading_zeros()).saturating_sub(32);
    let c: Vec<u128> = caps.iter().map(|&x| u128::from((x >> drop).max(1))).collect();
    let b: Vec<u128> = base.iter().map(|m| u128::from(m.weight.max(1))).collect();
    let (cs, bs): (u128, u128) = (c.iter().sum(), b.iter().sum());
    let g = u128::from(max_growth_permille);
    // The largest step t = tn/td from the baseline shares toward the new
    // ones that keeps every share c/C within g/1000 of b/B.
    let (mut tn, mut td) = (1u128, 1u128);
    for (&ci, &bi) in c.iter().zip(&b) {
        if 1000 * ci * bs > g * bi * cs {
            let num = (g - 1000) * bi * cs;
            let den = 1000 * (ci * bs - bi * cs);
            if num.saturating_mul(td) < tn.saturating_mul(den) {
                (tn, td) = (num, den);
            }
        }
    }
    if tn >= td {
        return false;
    }
    // Shares (1 - t)·b/B + t·c/C, over the common denominator td·B·C.
    let mixed: Vec<u128> = c.iter().zip(&b).map(|(&ci, &bi)| (td - tn) * bi * cs + tn * ci * bs).collect();
    let top = mixed.iter().copied().max().unwrap_or(1);
    let shift = (128 - top.leading_zeros()).saturating_sub(48);
    for (cap, m) in caps.iter_mut().zip(mixed) {
        *cap = u64::try_from(m >> shift).unwrap_or(u64::MAX).max(1);
    }
    true
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Integer weights proportional to capacities: the baseline routing's own
/// rule, so that equal capacities give exactly the baseline's weights.
pub(crate) use metaroce_topo::routing::weights;

#[cfg(test)]
mod tests {
    use super::*;

    /// Mixed bandwidths and unequal parallel links: the baseline weighs
    /// them by capacity, and so must the policy's recomputation.
    const UNEVEN: &str = r#"
name: uneven
fabric: {queue_high: 48pkt, queue_low: 16pkt, ecn_threshold: 32pkt}
defaults:
  link: {bandwidth: 100Gbps}
switches:
  - {name: leaf1, role: leaf, device_id: 1, p4rt: "127.0.0.1:50001", subnet: 10.0.1.0/24}
  - {name: leaf2, role: leaf, device_id: 2, p4rt: "127.0.0.1:50002", subnet: 10.0.2.0/24}
  - {name: leaf3, role: leaf, device_id: 3, p4rt: "127.0.0.1:50003", subnet: 10.0.3.0/24}
  - {name: spine1, role: spine, device_id: 4, p4rt: "127.0.0.1:50004"}
  - {name: spine2, role: spine, device_id: 5, p4rt: "127.0.0.1:50005"}
hosts:
  - {name: h1, ip: 10.0.1.1, mac: "02:00:00:00:01:01", leaf: leaf1, port: 1}
  - {name: h2, ip: 10.0.2.1, mac: "02:00:00:00:02:01", leaf: leaf2, port: 1}
  - {name: h3, ip: 10.0.3.1, mac: "02:00:00:00:03:01", leaf: leaf3, port: 1}
links:
  - {a: "leaf1:2", b: "spine1:1"}
  - {a: "leaf1:3", b: "spine1:2", bandwidth: 40Gbps}
  - {a: "leaf1:4", b: "spine2:1"}
  - {a: "leaf2:2", b: "spine1:3", bandwidth: 400Gbps}
  - {a: "leaf2:3", b: "spine2:2"}
  - {a: "leaf3:2", b: "spine1:4"}
  - {a: "leaf3:3", b: "spine2:3", bandwidth: 25Gbps}
"#;

    /// The walk stops where capacities come out as the baseline's; it must
    /// find exactly what recomputing every switch finds.
    #[test]
    fn the_pruned_walk_equals_a_full_recomputation() {
        use metaroce_topo::gen::{self, Common};
        use metaroce_topo::units::Bandwidth;
        let c = Common::new("t", Bandwidth::gbps(100));
        let fabrics = [
            metaroce_topo::load_str(UNEVEN, "uneven").unwrap(),
            gen::leaf_spine(&c, 5, 3, 1, 2).unwrap(),
            gen::clos3(&c, 3, 3, 2, 3, 1).unwrap(),
            gen::fat_tree(&c, 4).unwrap(),
        ];
        let mut x: u64 = 7;
        let mut rand = move |n: usize| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            usize::try_from(x >> 33).unwrap() % n
        };
        for topo in &fabrics {
            let routing = Routing::compute(topo);
            let index = PortIndex::new(topo, &routing);
            let all: Vec<PortKey> = (0..topo.switches.len())
                .flat_map(|s| topo.adjacency(s).iter().map(move |a| PortKey { switch: s, port: a.port }))
                .collect();
            for _ in 0..40 {
                let hot: BTreeMap<PortKey, u32> =
                    (0..1 + rand(4)).map(|_| (all[rand(all.len())], [500, 250, 125, 900][rand(4)])).collect();
                let hot: Vec<_> = hot.into_iter().map(|(k, f)| (k, f, Perturb::Derated)).collect();
                let pruned = Factors::new(topo.switches.len(), hot.clone());
                // Every other port a full-factor seed: every switch recomputed.
                let mut every = hot.clone();
                every.extend(
                    all.iter().filter(|k| !hot.iter().any(|h| h.0 == **k)).map(|&k| (k, 1000, Perturb::Warm)),
                );
                let full = Factors::new(topo.switches.len(), every);
                for &leaf in routing.destinations() {
                    let run = |factors: &Factors| {
                        let ctx = Ctx {
                            topo,
                            routing: &routing,
                            index: &index,
                            factors,
                            max_weight: 64,
                            max_growth_permille: 1334,
                        };
                        let mut v: Vec<_> =
                            destination(&ctx, leaf, &BTreeSet::new(), None, &mut Work::default())
                                .into_iter()
                                .map(|p| (p.switch, p.new))
                                .collect();
                        v.sort();
                        v
                    };
                    assert_eq!(run(&pruned), run(&full), "{} toward {leaf}, hot {hot:?}", topo.name);
                }
            }
        }
    }

    #[test]
    fn at_full_factor_the_recomputation_is_the_baseline() {
        use metaroce_topo::gen::{self, Common};
        use metaroce_topo::units::Bandwidth;
        let c = Common::new("t", Bandwidth::gbps(100));
        let fabrics = [
            metaroce_topo::load_str(UNEVEN, "uneven").unwrap(),
            gen::leaf_spine(&c, 4, 3, 1, 3).unwrap(),
            gen::clos3(&c, 3, 2, 2, 2, 1).unwrap(),
            gen::fat_tree(&c, 4).unwrap(),
        ];
        for topo in &fabrics {
            let mut routing = Routing::compute(topo);
            for pass in 0..2 {
                if pass == 1 {
                    // And on a degraded fabric, whose capacities are uneven.
                    routing.fail_link(topo, 0).unwrap();
                }
                let index = PortIndex::new(topo, &routing);
                // Every port "derated" at factor 1000: everything is recomputed.
                let all = (0..topo.switches.len())
                    .flat_map(|s| topo.adjacency(s).iter().map(move |a| PortKey { switch: s, port: a.port }))
                    .map(|k| (k, 1000, Perturb::Derated))
                    .collect();
                let factors = Factors::new(topo.switches.len(), all);
                let ctx = Ctx {
                    topo,
                    routing: &routing,
                    index: &index,
                    factors: &factors,
                    max_weight: 64,
                    max_growth_permille: 1334,
                };
                let mut work = Work::default();
                for &leaf in routing.destinations() {
                    let p = destination(&ctx, leaf, &BTreeSet::new(), None, &mut work);
                    assert!(p.is_empty(), "{}: {:?}", topo.name, p.first());
                    assert!(work.members.len() > 1, "the closure was computed");
                }
            }
        }
    }
}
