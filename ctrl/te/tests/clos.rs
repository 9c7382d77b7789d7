//! Property tests of the exact placement on multi-tier Clos and on
//! leaf-spines with parallel links: for random shapes (the topology
//! crate's generators, as `metaroce topo gen` builds them), random host
//! subsets and random jobs (one or two, All-to-All, ring, permutation),
//! the most flows on a link equals the cut bound in whole flows, counted
//! here from the shape, and the planned highest utilisation equals the
//! planner's lower bound.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;

use common::*;
use metaroce_te::job::Pattern;
use metaroce_te::{FlowKey, Planner, TeConfig};
use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;
use metaroce_topo::{Routing, Topology};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Shape {
    FatTree(usize),
    Clos3 { pods: usize, leaves: usize, spines: usize, supers: usize, hosts: usize },
    LeafSpine { leaves: usize, spines: usize, hosts: usize, parallel: usize },
}

impl Shape {
    fn build(&self) -> Topology {
        let c = Common::new("t", Bandwidth::gbps(100));
        match *self {
            Shape::FatTree(k) => gen::fat_tree(&c, k),
            Shape::Clos3 { pods, leaves, spines, supers, hosts } => {
                gen::clos3(&c, pods, leaves, spines, supers, hosts)
            }
            Shape::LeafSpine { leaves, spines, hosts, parallel } => {
                gen::leaf_spine(&c, leaves, spines, hosts, parallel)
            }
        }
        .unwrap()
    }

    /// Per leaf (by switch id: the generators number leaves first, pod by
    /// pod) its pod; the uplinks of a leaf; the uplinks of a pod.
    fn cuts(&self) -> (Vec<usize>, usize, usize) {
        match *self {
            Shape::FatTree(k) => ((0..k * k / 2).map(|l| l / (k / 2)).collect(), k / 2, k * k / 4),
            Shape::Clos3 { pods, leaves, spines, supers, .. } => {
                ((0..pods * leaves).map(|l| l / leaves).collect(), spines, spines * supers)
            }
            Shape::LeafSpine { leaves, spines, parallel, .. } => (vec![0; leaves], spines * parallel, 0),
        }
    }

    /// Spines have at least as many uplinks as leaves below them: then
    /// the colouring meets the bound (see `src/exact.rs`). Below that it
    /// spreads each pod's flows over the planes by search.
    fn full_bisection(&self) -> bool {
        match *self {
            Shape::Clos3 { leaves, supers, .. } => supers >= leaves,
            _ => true,
        }
    }
}

fn shapes() -> impl Strategy<Value = Shape> {
    prop_oneof![
        prop_oneof![Just(4usize), Just(6), Just(8)].prop_map(Shape::FatTree),
        (2usize..5, 1usize..5, 1usize..5, 1usize..5, 1usize..5).prop_map(
            |(pods, leaves, spines, supers, hosts)| { Shape::Clos3 { pods, leaves, spines, supers, hosts } }
        ),
        (2usize..6, 1usize..5, 1usize..5, 1usize..4).prop_map(|(leaves, spines, hosts, parallel)| {
            Shape::LeafSpine { leaves, spines, hosts, parallel }
        }),
    ]
}

#[derive(Debug, Clone, Copy)]
enum Job {
    AllToAll,
    Ring,
    Shuffle(u64),
}

fn jobs() -> impl Strategy<Value = Job> {
    prop_oneof![Just(Job::AllToAll), Just(Job::Ring), any::<u64>().prop_map(Job::Shuffle)]
}

/// A random permutation of `n` (xorshift from `seed`), as a pattern.
fn shuffled(n: usize, seed: u64) -> Pattern {
    let mut x = seed | 1;
    let mut perm: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        perm.swap(i, (x % (i as u64 + 1)) as usize);
    }
    Pattern::Permutation { perm }
}

fn keys_of(t: &Topology, job: Job, ranks: &[usize]) -> Vec<FlowKey> {
    let pattern = match job {
        Job::AllToAll => Pattern::AllToAll,
        Job::Ring => Pattern::RingAllReduce,
        Job::Shuffle(seed) => shuffled(ranks.len(), seed),
    };
    pattern_keys(t, &pattern, ranks)
}

/// The cut bound in whole flows, from the shape: the largest ⌈n/k⌉ over
/// leaves and pods of `n` flows out of (or into) it over its `k` links.
fn cut_bound(t: &Topology, shape: &Shape, keys: &[FlowKey]) -> u64 {
    let (pod, up, pod_up) = shape.cuts();
    let leaf: HashMap<_, _> = t.hosts.iter().map(|h| (h.ip, h.leaf)).collect();
    let mut count: HashMap<(bool, bool, usize), u64> = HashMap::new();
    for k in keys {
        let (a, b) = (leaf[&k.src()], leaf[&k.dst()]);
        if a == b {
            continue;
        }
        *count.entry((false, true, a)).or_default() += 1;
        *count.entry((false, false, b)).or_default() += 1;
        if pod[a] != pod[b] {
            *count.entry((true, true, pod[a])).or_default() += 1;
            *count.entry((true, false, pod[b])).or_default() += 1;
        }
    }
    count
        .iter()
        .map(|(&(is_pod, _, _), &n)| n.div_ceil(if is_pod { pod_up } else { up } as u64))
        .max()
        .unwrap_or(0)
}

/// Places `keys` announced as one batch; returns the planner and the plan.
fn place(t: &Topology, keys: &[FlowKey]) -> (Planner, metaroce_te::Plan) {
    let r = Routing::compute(t);
    let mut p = planner(t, &r, TeConfig::default());
    announce(&mut p, keys);
    let plan = p.plan(0);
    check_paths(t, &r, &p);
    (p, plan)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    /// One job, or two on disjoint hosts (equal flows: the same pattern,
    /// and for All-to-All the same number of ranks).
    #[test]
    fn equal_batches_on_a_clos_meet_the_cut_bound(
        shape in shapes(), job in jobs(), two in any::<bool>(), seed in any::<u64>(),
        pick in prop::collection::vec(any::<bool>(), 64),
    ) {
        let t = shape.build();
        let hosts: Vec<usize> = (0..t.hosts.len()).filter(|&h| pick[h % pick.len()]).collect();
        prop_assume!(hosts.len() >= 4 || (!two && hosts.len() >= 2));
        let keys = if two {
            let half = hosts.len() / 2;
            let (x, y) = hosts.split_at(half);
            let y = &y[..half];
            let second = if let Job::Shuffle(_) = job { Job::Shuffle(seed) } else { job };
            [keys_of(&t, job, x), keys_of(&t, second, y)].concat()
        } else {
            keys_of(&t, job, &hosts)
        };
        let (p, plan) = place(&t, &keys);
        let bound = cut_bound(&t, &shape, &keys);
        let most = max_flows_per_link(&p);
        prop_assert!(most >= bound, "below the cut bound: {most} < {bound}");
        // Below full bisection the colouring spreads pods over planes by
        // search (8,000 random cases met the bound, none proven): not
        // asserted, so that a case it misses is not a flaky failure.
        if shape.full_bisection() {
            prop_assert_eq!(most, bound, "{:?}: {} flows", shape, keys.len());
            if bound > 0 {
                prop_assert!(plan.exact, "an equal batch on a full-bisection Clos is coloured at the bound");
            }
        }
        if plan.exact {
            prop_assert_eq!(most, bound);
            let gap = (plan.max_utilisation - plan.lower_bound).abs();
            prop_assert!(gap < 1e-9, "planned {} against the bound {}", plan.max_utilisation, plan.lower_bound);
        }
        prop_assert!(plan.max_utilisation + 1e-9 >= plan.lower_bound);
    }
}

/// Per family of shapes, over generated cases (several seeds, host
/// subsets and jobs): how often the planned highest load equals the cut
/// bound, with the colouring and without it (`exact_jobs: false`, the
/// search every batch got on these shapes before), and the worst ratio.
/// `cargo test -p metaroce-te --test clos -- --nocapture` prints them.
#[test]
fn figures_per_family() {
    let families: [(&str, Vec<Shape>); 5] = [
        ("fat-tree k=4,6,8", vec![Shape::FatTree(4), Shape::FatTree(6), Shape::FatTree(8)]),
        (
            "clos3, supers >= leaves",
            vec![
                Shape::Clos3 { pods: 4, leaves: 4, spines: 4, supers: 4, hosts: 4 },
                Shape::Clos3 { pods: 3, leaves: 2, spines: 3, supers: 3, hosts: 3 },
                Shape::Clos3 { pods: 5, leaves: 3, spines: 2, supers: 4, hosts: 2 },
            ],
        ),
        (
            "clos3, supers < leaves",
            vec![
                Shape::Clos3 { pods: 4, leaves: 4, spines: 2, supers: 2, hosts: 2 },
                Shape::Clos3 { pods: 3, leaves: 3, spines: 3, supers: 1, hosts: 3 },
                Shape::Clos3 { pods: 4, leaves: 4, spines: 4, supers: 3, hosts: 4 },
            ],
        ),
        (
            "leaf-spine, parallel links",
            vec![
                Shape::LeafSpine { leaves: 6, spines: 2, hosts: 4, parallel: 2 },
                Shape::LeafSpine { leaves: 4, spines: 3, hosts: 6, parallel: 3 },
            ],
        ),
        ("leaf-spine 4x4", vec![Shape::LeafSpine { leaves: 4, spines: 4, hosts: 4, parallel: 1 }]),
    ];
    for (name, shapes) in families {
        let (mut cases, mut exact, mut at, mut greedy_at, mut worst, mut greedy_worst) =
            (0, 0, 0, 0, 1.0f64, 1.0f64);
        for shape in &shapes {
            let t = shape.build();
            for seed in 1..=24u64 {
                let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let hosts: Vec<usize> = (0..t.hosts.len())
                    .filter(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x % 4 != 0
                    })
                    .collect();
                let job = [Job::AllToAll, Job::Ring, Job::Shuffle(seed)][seed as usize % 3];
                let keys = keys_of(&t, job, &hosts);
                let bound = cut_bound(&t, shape, &keys);
                if bound == 0 {
                    continue;
                }
                let (p, plan) = place(&t, &keys);
                let r = Routing::compute(&t);
                let mut g = planner(&t, &r, TeConfig { exact_jobs: false, ..TeConfig::default() });
                announce(&mut g, &keys);
                g.plan(0);
                let (most, greedy) = (max_flows_per_link(&p), max_flows_per_link(&g));
                assert!(most >= bound && greedy >= bound);
                cases += 1;
                exact += usize::from(plan.exact);
                at += usize::from(most == bound);
                greedy_at += usize::from(greedy == bound);
                worst = worst.max(most as f64 / bound as f64);
                greedy_worst = greedy_worst.max(greedy as f64 / bound as f64);
            }
        }
        println!(
            "{name}: {cases} cases; colouring at the bound in {at} (exact: {exact}), worst {worst:.2}x; \
             search alone at the bound in {greedy_at}, worst {greedy_worst:.2}x"
        );
    }
}

/// A permutation learned flow by flow (one new flow a decision, as the
/// switches report them) is placed greedily and misses the bound on most
/// of these fabrics; the first decision with no new flow re-places every
/// flow as one batch (`rebatch.rs`) at the bound, moving each flow at
/// most once, with reason `batch`; the decision after it moves nothing.
#[test]
fn learned_flows_are_re_placed_as_one_batch_at_the_bound() {
    let shapes = [
        Shape::FatTree(4),
        Shape::FatTree(6),
        Shape::Clos3 { pods: 4, leaves: 4, spines: 4, supers: 4, hosts: 4 },
        Shape::LeafSpine { leaves: 4, spines: 2, hosts: 4, parallel: 2 },
    ];
    let mut missed_before = 0;
    for shape in &shapes {
        let t = shape.build();
        let r = Routing::compute(&t);
        let hosts: Vec<usize> = (0..t.hosts.len()).collect();
        for seed in 1..=6u64 {
            let keys = keys_of(&t, Job::Shuffle(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)), &hosts);
            let mut p = planner(&t, &r, TeConfig::default());
            let mut now = 0;
            for &k in &keys {
                p.upsert(k, metaroce_te::Demand::default()).unwrap();
                now += 1_000_000;
                p.plan(now);
            }
            let greedy = p.plan(now + 1_000_000);
            // That decision had no new flow: it was the re-placement.
            let bound = cut_bound(&t, shape, &keys);
            let most = max_flows_per_link(&p);
            assert_eq!(most, bound, "{shape:?} seed {seed}: {most} flows on a link, bound {bound}");
            assert!(
                (greedy.max_utilisation - greedy.lower_bound).abs() < 1e-9,
                "{shape:?} seed {seed}: planned {} against {}",
                greedy.max_utilisation,
                greedy.lower_bound
            );
            let batch = greedy.moves.iter().filter(|m| m.reason == metaroce_te::Reason::Batch).count();
            if batch > 0 {
                missed_before += 1;
                assert!(greedy.exact);
            }
            assert!(
                greedy.moves.iter().all(|m| m.reason == metaroce_te::Reason::Batch),
                "{:?}",
                greedy.moves
            );
            check_paths(&t, &r, &p);
            let after = p.plan(now + 2_000_000);
            assert!(after.moves.is_empty(), "{shape:?} seed {seed}: {:?}", after.moves);
        }
    }
    eprintln!("learned permutations re-placed as a batch: {missed_before} of {}", shapes.len() * 6);
    assert!(missed_before > 0, "the greedy placement met the bound everywhere: the test shows nothing");
}
