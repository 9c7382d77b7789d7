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
//! Only the upstream closure of the perturbed ports is recomputed; every
//! other switch's capacity is the baseline's.

use std::collections::{BTreeMap, BTreeSet};

use metaroce_telemetry::PortKey;
use metaroce_topo::{Group, NextHop, Routing, SwitchId, Topology};

use crate::index::{Factors, Perturb, PortIndex};
use crate::state::{key_of, Override, PortWeight};

/// What a decision reads, shared by every destination.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub topo: &'a Topology,
    pub routing: &'a Routing,
    pub index: &'a PortIndex,
    pub factors: &'a Factors,
    pub max_weight: u32,
}

/// A group whose desired weights changed.
#[derive(Debug, Clone)]
pub(crate) struct Proposal {
    pub switch: SwitchId,
    pub leaf: SwitchId,
    /// The override in force before (None: the baseline's weights).
    pub old: Option<Vec<PortWeight>>,
    /// The baseline's weights now (empty: no route).
    pub base: Vec<PortWeight>,
    /// The new override (None: back to the baseline).
    pub new: Option<Override>,
    pub cause: Option<PortKey>,
}

/// Buffers reused across destinations: a decision touches thousands.
#[derive(Debug, Default)]
pub(crate) struct Work {
    stamp: Vec<u32>,
    generation: u32,
    label: Vec<usize>,
    cap: Vec<u64>,
    stack: Vec<SwitchId>,
    members: Vec<SwitchId>,
    entries: Vec<(SwitchId, u16, u64)>,
    pairs: Vec<(u16, u64)>,
    caps: Vec<u64>,
    weights: Vec<u32>,
    seeds: Vec<(u8, PortKey)>,
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
        closure(ctx, leaf, work);
        let mut order = std::mem::take(&mut work.members);
        order.sort_unstable_by_key(|&s| (ctx.routing.distance(s, leaf), s));
        for &s in &order {
            if let Some(p) = reweigh(ctx, leaf, s, old.and_then(|m| m.get(&s)), work) {
                out.push(p);
            }
        }
        work.members = order;
    }
    // Overrides outside the closure have nothing left to route around.
    let fallback = causes.iter().next().copied();
    for (&s, o) in old.into_iter().flatten() {
        if active && work.marked(s) {
            continue;
        }
        let base = ctx.routing.group_toward(s, leaf).map(|(_, g)| key_of(&g.members)).unwrap_or_default();
        out.push(Proposal {
            switch: s,
            leaf,
            old: Some(o.weights.clone()),
            base,
            new: None,
            cause: fallback,
        });
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

/// Marks every switch whose paths toward `leaf` cross a seed port,
/// labelled with the first seed that reaches it.
fn closure(ctx: &Ctx<'_>, leaf: SwitchId, work: &mut Work) {
    let seeds = std::mem::take(&mut work.seeds);
    for (i, &(_, key)) in seeds.iter().enumerate() {
        if work.marked(key.switch) {
            continue;
        }
        work.mark(key.switch, i);
        work.stack.push(key.switch);
        while let Some(x) = work.stack.pop() {
            let Some(dx) = ctx.routing.distance(x, leaf) else { continue };
            for a in ctx.topo.adjacency(x) {
                let y = a.peer;
                // Distance first: it is cheap and rules out most neighbors.
                if work.marked(y)
                    || ctx.routing.distance(y, leaf) != Some(dx.saturating_add(1))
                    || !uses(ctx.routing, y, leaf, a.peer_port)
                {
                    continue;
                }
                work.mark(y, i);
                work.stack.push(y);
            }
        }
    }
    work.seeds = seeds;
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
    let (_, group) = ctx.routing.group_toward(s, leaf)?;
    work.cap[s] = capacities(ctx, leaf, s, group, work);
    work.caps.clear();
    work.caps.extend(work.pairs.iter().map(|p| p.1));
    weights(&work.caps, ctx.max_weight, &mut work.weights);
    let base = key_of(&group.members);
    let differs =
        base.len() != work.weights.len() || base.iter().zip(&work.weights).any(|(b, w)| b.weight != *w);
    let new = differs.then(|| Override {
        base: base.clone(),
        weights: work
            .pairs
            .iter()
            .zip(&work.weights)
            .map(|(p, &weight)| PortWeight { port: p.0, weight })
            .collect(),
    });
    if old.map(|o| &o.weights) == new.as_ref().map(|o| &o.weights) {
        return None;
    }
    let (_, key) = work.seeds[work.label[s]];
    Some(Proposal {
        switch: s,
        leaf,
        old: old.map(|o| o.weights.clone()),
        base,
        new,
        cause: Some(key).filter(|_| work.seeds[work.label[s]].0 < 2),
    })
}

/// Fills `work.pairs` with `(port, capacity)` of `s`'s members in port
/// order, and returns `s`'s total capacity toward `leaf`.
fn capacities(ctx: &Ctx<'_>, leaf: SwitchId, s: SwitchId, group: &Group, work: &mut Work) -> u64 {
    work.entries.clear();
    for m in &group.members {
        let NextHop::Switch(peer) = m.next else { continue };
        let bw = ctx.index.get(s, m.port).map_or(0, |(link, _)| ctx.topo.links[link].bandwidth.bps());
        let eff = u128::from(bw) * u128::from(ctx.factors.factor(s, m.port)) / 1000;
        work.entries.push((peer, m.port, u64::try_from(eff).unwrap_or(u64::MAX)));
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

/// Integer weights proportional to `caps`: divided by their gcd, scaled
/// down (never to zero) when the largest would exceed `max_weight`. The
/// same rule as the baseline routing's, so equal capacities give equal
/// weights.
pub(crate) fn weights(caps: &[u64], max_weight: u32, out: &mut Vec<u32>) {
    out.clear();
    if caps.windows(2).all(|w| w[0] == w[1]) {
        out.resize(caps.len(), 1);
        return;
    }
    let g = caps.iter().copied().fold(0u64, gcd).max(1);
    let top = caps.iter().copied().max().unwrap_or(1).max(1);
    let max_weight = u64::from(max_weight.max(1));
    if top / g <= max_weight {
        out.extend(caps.iter().map(|c| u32::try_from(c / g).unwrap_or(u32::MAX)));
    } else {
        out.extend(caps.iter().map(|&c| {
            let w = (u128::from(c) * u128::from(max_weight) + u128::from(top) / 2) / u128::from(top);
            u32::try_from(w.max(1)).unwrap_or(u32::MAX)
        }));
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(caps: &[u64], max: u32) -> Vec<u32> {
        let mut out = Vec::new();
        weights(caps, max, &mut out);
        out
    }

    #[test]
    fn weights_match_the_baseline_rule() {
        assert_eq!(w(&[400, 400, 200], 64), vec![2, 2, 1]);
        assert_eq!(w(&[1000, 1], 16), vec![16, 1]);
        assert_eq!(w(&[97, 89], 16), vec![16, 15]);
        assert_eq!(w(&[5], 16), vec![1]);
    }

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
                let index = PortIndex::new(topo);
                // Every port "derated" at factor 1000: everything is recomputed.
                let all = (0..topo.switches.len())
                    .flat_map(|s| topo.adjacency(s).iter().map(move |a| PortKey { switch: s, port: a.port }))
                    .map(|k| (k, 1000, Perturb::Derated))
                    .collect();
                let factors = Factors::new(topo.switches.len(), all);
                let ctx = Ctx { topo, routing: &routing, index: &index, factors: &factors, max_weight: 64 };
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
