//! The planner and its lower bound against the optimum of small
//! instances, solved as a mixed-integer program (one binary a flow and
//! path, minimise the highest utilisation) by `microlp`, and against its
//! linear relaxation (flows split over paths).
//!
//! Checked on every instance: the bound (which counts whole flows) is
//! never above the integer optimum, the planner never below it, the
//! relaxation never above it. The gaps are printed (`cargo test -p
//! metaroce-te --test lp -- --nocapture`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use metaroce_te::job::Pattern;
use metaroce_te::{Demand, FlowKey, Planner, TeConfig};
use metaroce_topo::{Routing, Topology};
use microlp::{ComparisonOp, OptimizationDirection, Problem, SolutionStatus};

/// The least highest utilisation over placements of `flows` (host pairs
/// with their rates) on the routes' paths: whole flows (`integer`) or
/// split. None if the solver stopped without proving it.
fn optimum(t: &Topology, r: &Routing, flows: &[(usize, usize, u64)], integer: bool) -> Option<f64> {
    let mut pb = Problem::new(OptimizationDirection::Minimize);
    pb.set_time_limit(Duration::from_secs(4));
    let top = pb.add_var(1.0, (0.0, f64::INFINITY));
    let mut on: HashMap<(usize, u16), Vec<(microlp::Variable, f64)>> = HashMap::new();
    for &(a, b, rate) in flows {
        let (paths, more) = r.host_paths(t, a, b, 10_000);
        assert!(!more && !paths.is_empty());
        let mut one = Vec::new();
        for path in &paths {
            let x = if integer { pb.add_binary_var(0.0) } else { pb.add_var(0.0, (0.0, 1.0)) };
            one.push((x, 1.0));
            for h in path.hops.iter().filter(|h| h.link.is_some()) {
                let cap = t.links[h.link.unwrap_or(0)].bandwidth.bps() as f64;
                on.entry((h.switch, h.out_port)).or_default().push((x, rate as f64 / cap));
            }
        }
        pb.add_constraint(one.as_slice(), ComparisonOp::Eq, 1.0);
    }
    for (_, mut terms) in on {
        terms.push((top, -1.0));
        pb.add_constraint(terms.as_slice(), ComparisonOp::Le, 0.0);
    }
    let sol = pb.solve().ok()?.into_solution().ok()?;
    (sol.status() == SolutionStatus::Optimal).then(|| sol.objective())
}

/// One instance: the planner's plan, its rates, and the two optima.
struct Case {
    planned: f64,
    /// The same flows planned without rearranging (`rearrange_jobs: false`).
    greedy: f64,
    bound: f64,
    whole: f64,
    split: f64,
}

fn solve(t: &Topology, keys: &[(FlowKey, Demand)]) -> Option<Case> {
    let r = Routing::compute(t);
    let config = TeConfig { confine_incasts: false, ..TeConfig::default() };
    let mut g: Planner = planner(t, &r, TeConfig { rearrange_jobs: false, ..config.clone() });
    let mut p: Planner = planner(t, &r, config);
    for &(k, d) in keys {
        p.upsert(k, d).unwrap();
        g.upsert(k, d).unwrap();
    }
    let plan = p.plan(0);
    let greedy = g.plan(0).max_utilisation;
    let host: HashMap<_, _> = t.hosts.iter().enumerate().map(|(i, h)| (h.ip, i)).collect();
    let flows: Vec<(usize, usize, u64)> = keys
        .iter()
        .map(|(k, _)| (host[&k.src()], host[&k.dst()], p.rate(k).unwrap()))
        .filter(|&(a, b, _)| t.hosts[a].leaf != t.hosts[b].leaf)
        .collect();
    if flows.is_empty() {
        return None;
    }
    let whole = optimum(t, &r, &flows, true)?;
    let split = optimum(t, &r, &flows, false)?;
    Some(Case { planned: plan.max_utilisation, greedy, bound: plan.lower_bound, whole, split })
}

/// A tiny xorshift for the generated cases.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// A family's name, a fabric and its flows.
type Instance = (&'static str, Topology, Vec<(FlowKey, Demand)>);

/// Equal-flow jobs (All-to-All, shuffled permutation) on small `clos3`
/// shapes whose spines have fewer uplinks than leaves, and unequal flows
/// (random pairs, 1-100 Gb/s) on small two- and three-tier shapes.
fn cases() -> Vec<Instance> {
    let mut out = Vec::new();
    for seed in 1..=12u64 {
        let mut next = rng(seed);
        let (leaves, spines) = (2 + (next() % 2) as usize, 2 + (next() % 2) as usize);
        let t = clos3(3, leaves, spines, 1, 1 + (next() % 2) as usize);
        let hosts: Vec<usize> = (0..t.hosts.len()).filter(|_| !next().is_multiple_of(3)).collect();
        if hosts.len() < 3 {
            continue;
        }
        let pattern = if seed % 2 == 0 {
            Pattern::AllToAll
        } else {
            let mut perm: Vec<usize> = (0..hosts.len()).collect();
            for i in (1..perm.len()).rev() {
                perm.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            Pattern::Permutation { perm }
        };
        let keys = pattern_keys(&t, &pattern, &hosts);
        let flows = keys.into_iter().map(|k| (k, Demand::announced(1 << 20, None))).collect();
        out.push(("equal, clos3 with supers < leaves", t, flows));
    }
    for seed in 1..=12u64 {
        let mut next = rng(seed + 100);
        let t =
            if seed % 2 == 0 { leaf_spine(4, 2, 2, 1 + (seed % 3) as usize) } else { clos3(2, 2, 2, 2, 2) };
        let n = t.hosts.len() as u64;
        let mut flows = Vec::new();
        while flows.len() < 6 {
            let (a, b) = ((next() % n) as usize, (next() % n) as usize);
            if a != b {
                let key = FlowKey::flow(t.hosts[a].ip, t.hosts[b].ip, 49152 + flows.len() as u16, 1);
                flows.push((key, Demand::rate((next() % 100 + 1) * G)));
            }
        }
        out.push(("unequal, leaf-spine and clos3", t, flows));
    }
    // Announced batches where greedy placement and one- and two-flow
    // moves stopped above the optimum before the batch was rearranged
    // together (`rearrange.rs`): up to 10 unequal flows (jobs with periods)
    // on a three-tier Clos, and an All-to-All announced with a
    // permutation of elephants (4 MiB against 1 MiB a flow, so the two
    // jobs' flows differ in rate) on a k=4 fat-tree.
    for seed in 1..=40u64 {
        let mut next = rng(seed + 777);
        let t = clos3(2, 2, 2, 2, 2);
        let n = t.hosts.len() as u64;
        let mut flows = Vec::new();
        for i in 0..10u16 {
            let (a, b) = ((next() % n) as usize, (next() % n) as usize);
            if a != b {
                let key = FlowKey::flow(t.hosts[a].ip, t.hosts[b].ip, 49152 + i, 1);
                // Announced with a period: 1-100 Gb/s.
                let bytes = (next() % 100 + 1) * G / 8 / 1000;
                flows.push((key, Demand::announced(bytes, Some(1_000_000))));
            }
        }
        out.push(("unequal, up to 10 flows, clos3", t, flows));
    }
    for seed in 1..=24u64 {
        let mut next = rng(seed + 777);
        let t = fat_tree(4);
        let n = t.hosts.len();
        let mut hosts: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            hosts.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let e = 4 + (next() % 5) as usize;
        let a = (e + 4 + (next() % 5) as usize).min(n);
        let perm = loop {
            let mut q: Vec<usize> = (0..e).collect();
            for i in (1..e).rev() {
                q.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            if q.iter().enumerate().all(|(i, &v)| i != v) {
                break q;
            }
        };
        let elephants = pattern_keys(&t, &Pattern::Permutation { perm }, &hosts[..e]);
        let all = pattern_keys(&t, &Pattern::AllToAll, &hosts[e..a]);
        let mut flows: Vec<_> =
            elephants.into_iter().map(|k| (k, Demand::announced(4 << 20, None))).collect();
        flows.extend(all.into_iter().map(|k| (k, Demand::announced(1 << 20, None))));
        out.push(("elephants beside an All-to-All, fat-tree k=4", t, flows));
    }
    out
}

/// Per family: what was solved and how far from the optimum.
#[derive(Default)]
struct Tally {
    solved: usize,
    optimal: usize,
    tight: usize,
    worst: f64,
    gap: f64,
    split: f64,
    unsolved: usize,
    greedy_optimal: usize,
    greedy_worst: f64,
}

#[test]
fn planner_and_bound_against_the_optimum() {
    let mut stats: HashMap<&str, Tally> = HashMap::new();
    for (family, t, flows) in cases() {
        let Some(c) = solve(&t, &flows) else {
            stats.entry(family).or_default().unsolved += 1;
            continue;
        };
        // Valid bound, valid placement, and the relaxation below both.
        assert!(c.bound <= c.whole + 1e-6, "{family}: bound {} above the optimum {}", c.bound, c.whole);
        assert!(c.planned + 1e-6 >= c.whole, "{family}: planned {} below the optimum {}", c.planned, c.whole);
        assert!(c.split <= c.whole + 1e-6);
        let s = stats.entry(family).or_default();
        s.solved += 1;
        s.optimal += usize::from(c.planned <= c.whole + 1e-6);
        s.greedy_optimal += usize::from(c.greedy <= c.whole + 1e-6);
        s.greedy_worst = s.greedy_worst.max(c.greedy / c.whole);
        s.tight += usize::from(c.bound + 1e-6 >= c.whole);
        s.worst = s.worst.max(c.planned / c.whole);
        s.gap = s.gap.max(c.whole / c.bound);
        s.split = s.split.max(c.whole / c.split);
    }
    let mut names: Vec<_> = stats.keys().copied().collect();
    names.sort_unstable();
    for name in names {
        let s = &stats[name];
        println!(
            "{name}: {} solved ({} not proven in time); planner optimal in {}, worst {:.3}x the optimum (without \
             rearranging: {}, {:.3}x); bound equal to the optimum in {}, optimum at most {:.3}x the bound; \
             whole-flow optimum at most {:.3}x the split one",
            s.solved, s.unsolved, s.optimal, s.worst, s.greedy_optimal, s.greedy_worst, s.tight, s.gap, s.split
        );
        assert!(s.solved > 0, "{name}: no instance solved");
        // Measured optimal in every instance of these (and in 40 of 40
        // each generated more widely); without rearranging, 9 of 12 and
        // 28 of 40 elephants beside an All-to-All, 37 of 40 unequal.
        if name.starts_with("elephants") || name.starts_with("unequal, up to 10") {
            assert_eq!(s.optimal, s.solved, "{name}: the planner missed the optimum");
        }
        // The bound reads the flows' sizes across a cut (`bound.rs`): it
        // meets the optimum in 37 of these 40 (25 by sums and counts alone).
        if name.starts_with("unequal, up to 10") {
            assert!(
                s.tight * 10 >= s.solved * 9,
                "{name}: the bound met the optimum in only {} of {}",
                s.tight,
                s.solved
            );
        }
    }
}
