//! Property tests: the exact job placement meets the de Werra bound on
//! random leaf-spines; random sequences of flows, failures, background
//! and time keep every placement valid, bounded and deterministic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use metaroce_te::job::Pattern;
use metaroce_te::{Demand, FlowKey, Plan, Planner, Reason, TeConfig};
use metaroce_topo::{Routing, Topology};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Job {
    AllToAll,
    Shift(usize),
    Ring,
}

fn jobs() -> impl Strategy<Value = Job> {
    prop_oneof![Just(Job::AllToAll), (1usize..64).prop_map(Job::Shift), Just(Job::Ring)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Equal flows, one link per spine: the highest link load is the
    /// largest over leaves of ⌈inter-leaf flows one way / spines⌉.
    #[test]
    fn jobs_on_a_leaf_spine_meet_the_de_werra_bound(
        leaves in 2usize..7, spines in 2usize..6, hosts in 1usize..5,
        job in jobs(), pick in prop::collection::vec(any::<bool>(), 28),
    ) {
        let t = leaf_spine(leaves, spines, hosts, 1);
        let r = Routing::compute(&t);
        let ranks: Vec<usize> = (0..t.hosts.len()).filter(|&h| pick[h % pick.len()] || h < 2).collect();
        prop_assume!(ranks.len() >= 2);
        let n = ranks.len();
        let pattern = match job {
            Job::AllToAll => Pattern::AllToAll,
            Job::Ring => Pattern::RingAllReduce,
            Job::Shift(s) if s % n == 0 => Pattern::shift(n, 1),
            Job::Shift(s) => Pattern::shift(n, s),
        };
        let keys = pattern_keys(&t, &pattern, &ranks);
        let mut p = planner(&t, &r, TeConfig::default());
        announce(&mut p, &keys);
        let plan = p.plan(0);
        check_paths(&t, &r, &p);
        let bound = de_werra_bound(&t, &keys, spines);
        if bound > 0 {
            prop_assert!(plan.exact, "an equal two-tier batch is coloured");
        }
        prop_assert_eq!(max_flows_per_link(&p), bound);
        prop_assert!(plan.max_utilisation + 1e-9 >= plan.lower_bound);
    }
}

/// One step of a random run.
#[derive(Debug, Clone)]
enum Op {
    Add { src: usize, dst: usize, port: Option<u16>, gbps: u64 },
    Remove(usize),
    Fail(usize),
    Heat { link: usize, dir: bool, gbps: u64 },
    Plan { dt_ms: u64 },
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => (any::<usize>(), any::<usize>(), prop::option::of(1u16..4), 1u64..120)
            .prop_map(|(src, dst, port, gbps)| Op::Add { src, dst, port, gbps }),
        1 => any::<usize>().prop_map(Op::Remove),
        1 => any::<usize>().prop_map(Op::Fail),
        1 => (any::<usize>(), any::<bool>(), 0u64..120).prop_map(|(link, dir, gbps)| Op::Heat { link, dir, gbps }),
        3 => (0u64..40).prop_map(|dt_ms| Op::Plan { dt_ms }),
    ];
    prop::collection::vec(op, 1..60)
}

#[derive(Debug, Clone)]
enum Shape {
    LeafSpine { leaves: usize, spines: usize, parallel: usize },
    Clos3 { pods: usize, leaves: usize, spines: usize, supers: usize },
}

fn shapes() -> impl Strategy<Value = Shape> {
    prop_oneof![
        (2usize..5, 1usize..4, 1usize..3).prop_map(|(leaves, spines, parallel)| Shape::LeafSpine {
            leaves,
            spines,
            parallel
        }),
        (2usize..4, 1usize..3, 1usize..3, 1usize..3)
            .prop_map(|(pods, leaves, spines, supers)| Shape::Clos3 { pods, leaves, spines, supers }),
    ]
}

fn configs() -> impl Strategy<Value = TeConfig> {
    (0u32..200, 1usize..6, 0u64..60, 1usize..4, 2usize..6, any::<bool>(), any::<bool>()).prop_map(
        |(gain, moves, hold, beam, width, exact, rearrange)| TeConfig {
            min_gain_permille: gain,
            max_moves: moves,
            hold_down_ns: hold * MS,
            search_beam: beam,
            search_width: width.max(beam),
            exact_jobs: exact,
            rearrange_jobs: rearrange,
            ..Default::default()
        },
    )
}

struct World {
    topo: Topology,
    routing: Routing,
    planner: Planner,
    keys: Vec<FlowKey>,
    now: u64,
    /// When each flow last moved.
    moved_at: std::collections::HashMap<FlowKey, u64>,
}

impl World {
    fn new(shape: &Shape, config: TeConfig) -> Self {
        let topo = match *shape {
            Shape::LeafSpine { leaves, spines, parallel } => leaf_spine(leaves, spines, 2, parallel),
            Shape::Clos3 { pods, leaves, spines, supers } => clos3(pods, leaves, spines, supers, 2),
        };
        let routing = Routing::compute(&topo);
        let planner = planner(&topo, &routing, config);
        World { topo, routing, planner, keys: Vec::new(), now: 0, moved_at: Default::default() }
    }

    /// Applies one op; returns the plan if it was a decision.
    fn apply(&mut self, op: &Op) -> Option<Plan> {
        let t = &self.topo;
        match *op {
            Op::Add { src, dst, port, gbps } => {
                let (a, b) = (t.hosts[src % t.hosts.len()].ip, t.hosts[dst % t.hosts.len()].ip);
                let key = match port {
                    Some(p) => FlowKey::flow(a, b, 49152 + p, u32::from(p)),
                    None => FlowKey::pair(a, b),
                };
                // Pairs as a job announces them (bytes a period, the same
                // rate), flows as the switches report them: so decisions
                // place both, and rearrange the announced ones.
                let demand = if port.is_none() {
                    Demand::announced(gbps * G / 8 / 1000, Some(1_000_000))
                } else {
                    Demand::rate(gbps * G)
                };
                if self.planner.upsert(key, demand).is_ok() && !self.keys.contains(&key) {
                    self.keys.push(key);
                }
            }
            Op::Remove(i) if !self.keys.is_empty() => {
                let key = self.keys.swap_remove(i % self.keys.len());
                assert!(self.planner.remove(&key));
                self.moved_at.remove(&key);
            }
            Op::Remove(_) => {}
            Op::Fail(i) => {
                let link = i % t.links.len();
                let changes = self.routing.fail_link(t, link).unwrap();
                self.planner.routing_changed(&self.routing, &changes);
            }
            Op::Heat { link, dir, gbps } => {
                let l = &t.links[link % t.links.len()];
                let end = if dir { l.a } else { l.b };
                self.planner.set_background(end.switch, end.port, gbps * G).unwrap();
            }
            Op::Plan { dt_ms } => {
                self.now += dt_ms * MS;
                return Some(self.planner.plan(self.now));
            }
        }
        None
    }

    fn check(&mut self, plan: &Plan) {
        let config = self.planner.config().clone();
        let kept: Vec<FlowKey> = plan.unplaced.iter().map(|u| u.flow).collect();
        check_paths_but(&self.topo, &self.routing, &self.planner, &kept);
        let recomputed = recomputed_max(&self.topo, &self.routing, &self.planner);
        // The reported maximum also counts background-only links.
        assert!(plan.max_utilisation + 1e-9 >= recomputed, "{} < {recomputed}", plan.max_utilisation);
        // The bound counts every demand, also a flow that no path can carry
        // any more (a partition: reported unplaced, carried by nothing);
        // it bounds the placement only when every flow has one.
        if plan.unplaced.is_empty() {
            assert!(plan.max_utilisation + 1e-9 >= plan.lower_bound);
        }
        let rebalanced = plan.moves.iter().filter(|m| m.reason == Reason::Rebalance).count();
        assert!(rebalanced <= config.max_moves, "move budget");
        for m in &plan.moves {
            if m.reason == Reason::Rebalance && m.from.is_some() {
                if let Some(&t) = self.moved_at.get(&m.flow) {
                    assert!(
                        self.now >= t + config.hold_down_ns,
                        "{} moved again within the hold-down",
                        m.flow
                    );
                }
                // The planner checks the gain when it moves the flow; the
                // report gives the path's bottleneck at the end of the
                // decision, which another flow moved onto the same links
                // later in it may have raised.
                let gain = f64::from(config.min_gain_permille) / 1000.0;
                let shared = |o: &metaroce_te::Move| {
                    let (Some(a), Some(b)) = (&m.to, &o.to) else { return false };
                    o.flow != m.flow && a.hops.iter().any(|h| b.hops.iter().any(|g| g.link == h.link))
                };
                assert!(
                    m.bottleneck_after + gain <= m.bottleneck_before + 1e-9 || plan.moves.iter().any(shared),
                    "{m:?}"
                );
            }
            let links = |p: &Option<metaroce_te::Path>| {
                p.as_ref().map(|p| p.hops.iter().map(|h| h.link).collect::<Vec<_>>())
            };
            // A first placement starts no hold-down (a later rebalance of it
            // still keeps the margin); nor does a flow removed and added
            // again within one decision (reported as one `Replaced` move):
            // the planner forgot it, and places it afresh.
            if m.to.is_some()
                && m.from.is_some()
                && m.reason != Reason::Replaced
                && links(&m.from) != links(&m.to)
            {
                self.moved_at.insert(m.flow, self.now);
            }
        }
        // Every known flow is placed, or reported as unplaced.
        for k in &self.keys {
            let placed = self.planner.path(k).is_some();
            assert!(placed || plan.unplaced.iter().any(|u| u.flow == *k), "{k} neither placed nor reported");
        }
        // A placed path crosses a failed link only if reported as kept broken.
        for (k, path) in self.planner.placement() {
            if path.hops.iter().any(|h| !self.routing.link_is_up(h.link)) {
                assert!(plan.unplaced.iter().any(|u| u.flow == k && u.broken), "{k} left on a failed link");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn random_runs_keep_placements_valid_bounded_and_deterministic(
        shape in shapes(), config in configs(), ops in ops(),
    ) {
        let mut w = World::new(&shape, config.clone());
        let mut twin = World::new(&shape, config);
        // Reset to the twin's state before each decision: its buffers
        // are those the decisions before left (`Clone::clone_from`).
        let mut reused = twin.planner.clone();
        for op in &ops {
            let before = matches!(op, Op::Plan { .. }).then(|| twin.planner.clone());
            let a = w.apply(op);
            let b = twin.apply(op);
            prop_assert_eq!(&a, &b, "two planners fed the same inputs decide the same");
            if let (Some(before), Some(plan)) = (before, &a) {
                // The buffers a planner keeps between decisions carry
                // nothing over: a copy without them and a planner whose
                // buffers other decisions used decide the same.
                reused.clone_from(&before);
                let mut fresh = before;
                prop_assert_eq!(&fresh.plan(twin.now), plan, "a copy decides as the planner did");
                prop_assert_eq!(&reused.plan(twin.now), plan, "clone_from keeps buffers, not decisions");
            }
            if let Some(plan) = a {
                w.check(&plan);
            }
        }
    }
}
