//! Property tests: random heat and failures on generated fabrics, checking
//! after every decision that overrides stay inside the baseline's
//! valley-free groups, never empty a group, never use a failed link, move
//! at a bounded rate, are deterministic, and all go once the fabric cools.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use metaroce_policy::{ChangeKind, Decision, Input, Policy, PolicyConfig, PolicyState};
use metaroce_telemetry::{Heat, PortHeat, PortKey};
use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;
use metaroce_topo::{Routing, Topology};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

#[derive(Debug, Clone)]
enum Shape {
    LeafSpine { leaves: usize, spines: usize, parallel: usize },
    Clos3 { pods: usize, leaves: usize, spines: usize, supers: usize },
    FatTree4,
}

fn fabric(shape: &Shape) -> Topology {
    let c = Common::new("prop", Bandwidth::gbps(100));
    match *shape {
        Shape::LeafSpine { leaves, spines, parallel } => gen::leaf_spine(&c, leaves, spines, 1, parallel),
        Shape::Clos3 { pods, leaves, spines, supers } => gen::clos3(&c, pods, leaves, spines, supers, 1),
        Shape::FatTree4 => gen::fat_tree(&c, 4),
    }
    .unwrap()
}

fn shapes() -> impl Strategy<Value = Shape> {
    prop_oneof![
        (2usize..6, 1usize..5, 1usize..3).prop_map(|(leaves, spines, parallel)| Shape::LeafSpine {
            leaves,
            spines,
            parallel
        }),
        (2usize..4, 1usize..3, 1usize..3, 1usize..3)
            .prop_map(|(pods, leaves, spines, supers)| Shape::Clos3 { pods, leaves, spines, supers }),
        Just(Shape::FatTree4),
    ]
}

fn configs() -> impl Strategy<Value = PolicyConfig> {
    (0u64..5, 0u64..60, 1u64..20, 1usize..12, 200u32..800, 50u32..500, 0u32..900, 1001u32..10_000).prop_map(
        |(up, down, step, max, derate, min, warm, growth)| PolicyConfig {
            hold_up_ns: up * MS,
            hold_down_ns: (up + down) * MS,
            step_interval_ns: step * MS,
            max_changed_groups: max,
            derate_step_permille: derate,
            min_factor_permille: min,
            warm_discount_permille: warm,
            max_share_growth_permille: growth,
        },
    )
}

/// One tick: time passes, some ports change (index into all ports,
/// 0 = cool, 1 = warm, 2 = hot), maybe a link fails.
#[derive(Debug, Clone)]
struct Tick {
    dt_ms: u64,
    flips: Vec<(usize, u8, u32)>,
    fail: Option<usize>,
}

fn ticks() -> impl Strategy<Value = Vec<Tick>> {
    let tick = (
        1u64..12,
        prop::collection::vec((any::<usize>(), 0u8..3, 0u32..64), 0..6),
        prop::option::weighted(0.1, any::<usize>()),
    )
        .prop_map(|(dt_ms, flips, fail)| Tick { dt_ms, flips, fail });
    prop::collection::vec(tick, 1..40)
}

struct World {
    topo: Topology,
    routing: Routing,
    policy: Policy,
    state: PolicyState,
    heat: Heat,
    ports: Vec<PortKey>,
    now: u64,
    /// Per port, its level and when it last changed.
    seen: BTreeMap<PortKey, (u8, u64)>,
}

impl World {
    fn new(shape: &Shape, config: PolicyConfig) -> Self {
        let topo = fabric(shape);
        let routing = Routing::compute(&topo);
        let ports = (0..topo.switches.len())
            .flat_map(|s| topo.adjacency(s).iter().map(move |a| PortKey { switch: s, port: a.port }))
            .collect();
        let policy = Policy::new(config).unwrap();
        World {
            topo,
            routing,
            policy,
            state: PolicyState::default(),
            heat: Heat::new(),
            ports,
            now: 0,
            seen: BTreeMap::new(),
        }
    }

    fn apply(&mut self, t: &Tick) {
        self.now += t.dt_ms * MS;
        for &(i, what, depth) in &t.flips {
            let key = self.ports[i % self.ports.len()];
            let congested = what == 2;
            let depth = if what == 0 { 0 } else { depth };
            let now = self.now;
            let h = self.heat.entry(key).or_insert(PortHeat {
                congested,
                since_ns: now,
                depth,
                max_depth: depth,
            });
            if h.congested != congested {
                h.since_ns = now;
            }
            *h = PortHeat { congested, depth, max_depth: depth, ..*h };
        }
        if let Some(l) = t.fail {
            let l = l % self.topo.links.len();
            self.routing.fail_link(&self.topo, l).unwrap();
        }
    }

    /// Decides, checking determinism against a copy of the state that went
    /// through JSON.
    fn decide(&mut self) -> Decision {
        let input = Input { topo: &self.topo, routing: &self.routing, heat: &self.heat, now_ns: self.now };
        let mut copy: PolicyState =
            serde_json::from_str(&serde_json::to_string(&self.state).unwrap()).unwrap();
        assert_eq!(copy, self.state, "state survives JSON");
        let d = self.policy.decide(input, &mut self.state);
        let again = self.policy.decide(input, &mut copy);
        assert_eq!(d, again, "same inputs, same decision");
        assert_eq!(copy, self.state, "same inputs, same state");
        d
    }

    fn check(&mut self, d: &Decision) {
        let cfg = self.policy.config().clone();
        let max_weight = self.routing.options().max_weight;
        for (s, leaf, weights) in self.state.overrides() {
            let (_, g) = self.routing.group_toward(s, leaf).expect("an override has a baseline group");
            assert!(!weights.is_empty());
            let ports: Vec<u16> = weights.iter().map(|w| w.port).collect();
            let base: Vec<u16> = g.members.iter().map(|m| m.port).collect();
            assert_eq!(ports, base, "only the baseline's valley-free members, re-weighted");
            assert!(weights.iter().all(|w| (1..=max_weight).contains(&w.weight)), "{weights:?}");
            for w in weights {
                let a = self.topo.adjacency(s).iter().find(|a| a.port == w.port).unwrap();
                assert!(self.routing.link_is_up(a.link) && self.routing.switch_is_up(a.peer));
            }
        }
        // Groups as the switch holds them: (switch, weights).
        let limited: std::collections::BTreeSet<_> =
            d.changes.iter().filter(|c| c.kind != ChangeKind::Failover).map(|c| (c.switch, &c.new)).collect();
        assert!(limited.len() <= cfg.max_changed_groups, "{} groups changed", limited.len());
        for c in &d.changes {
            assert!(c.new.iter().all(|w| (1..=max_weight).contains(&w.weight)));
            assert!(!c.new.is_empty() || c.baseline);
        }
        let now_levels: BTreeMap<PortKey, u8> =
            d.levels.iter().map(|l| (PortKey { switch: l.switch, port: l.port }, l.level)).collect();
        for &key in &self.ports {
            let level = now_levels.get(&key).copied().unwrap_or(0);
            let (before, at) = self.seen.get(&key).copied().unwrap_or((0, 0));
            if level == before {
                continue;
            }
            let a = self.topo.adjacency(key.switch).iter().find(|a| a.port == key.port).unwrap();
            let live = self.routing.link_is_up(a.link)
                && self.routing.switch_is_up(key.switch)
                && self.routing.switch_is_up(a.peer);
            // A failed link's level is forgotten at once.
            let failed = !live && level == 0;
            assert!(level.abs_diff(before) == 1 || failed, "{key:?}: {before} -> {level}");
            if at > 0 && !failed {
                assert!(self.now - at >= cfg.step_interval_ns, "{key:?} stepped twice within the interval");
            }
            self.seen.insert(key, (level, self.now));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_under_random_heat_and_failures(shape in shapes(), config in configs(), script in ticks()) {
        let mut w = World::new(&shape, config);
        for t in &script {
            w.apply(t);
            let d = w.decide();
            w.check(&d);
        }
        // Everything cools: every override goes, every level returns to 0.
        for v in w.heat.values_mut() {
            if v.congested {
                v.since_ns = w.now;
            }
            *v = PortHeat { congested: false, depth: 0, max_depth: 0, ..*v };
        }
        for _ in 0..2000 {
            if w.state.override_count() == 0 && w.state.ports().count() == 0 {
                break;
            }
            w.now += 5 * MS;
            let d = w.decide();
            w.check(&d);
        }
        prop_assert_eq!(w.state.override_count(), 0);
        prop_assert_eq!(w.state.ports().count(), 0);
    }
}

/// Found by the property test: derated ports whose links fail while
/// changes are held back must not leave overrides behind.
#[test]
fn failures_of_derated_links_leave_no_override_behind() {
    let config = PolicyConfig {
        hold_up_ns: 0,
        hold_down_ns: 0,
        step_interval_ns: MS,
        derate_step_permille: 200,
        min_factor_permille: 50,
        max_changed_groups: 1,
        warm_discount_permille: 2,
        // Found before shares had a growth limit: the weakest one.
        max_share_growth_permille: 10_000,
    };
    let mut w = World::new(&Shape::FatTree4, config);
    let script = [
        Tick { dt_ms: 1, flips: vec![(16418361533912212678, 2, 0)], fail: None },
        Tick { dt_ms: 1, flips: vec![], fail: None },
        Tick { dt_ms: 1, flips: vec![(919547920155278536, 1, 24)], fail: None },
        Tick { dt_ms: 1, flips: vec![], fail: Some(8461898047943511015) },
        Tick { dt_ms: 1, flips: vec![], fail: Some(7993842394567558438) },
    ];
    play_then_cool(&mut w, &script);
}

/// Plays `script`, checking every decision, then lets every port cool for
/// 500 ms: every override must be gone.
fn play_then_cool(w: &mut World, script: &[Tick]) {
    for t in script {
        w.apply(t);
        let d = w.decide();
        w.check(&d);
    }
    for v in w.heat.values_mut() {
        *v = PortHeat { congested: false, depth: 0, max_depth: 0, since_ns: w.now };
    }
    for _ in 0..100 {
        w.now += 5 * MS;
        let d = w.decide();
        w.check(&d);
    }
    assert_eq!(w.state.override_count(), 0);
}

/// Found by the property test: after a failure elsewhere, the hot port no
/// longer lies on the paths toward the leaf whose override it shaped; its
/// restore must still remove that override.
#[test]
fn held_back_changes_after_a_failure_still_drain() {
    let config = PolicyConfig {
        hold_up_ns: 0,
        hold_down_ns: 0,
        step_interval_ns: MS,
        derate_step_permille: 352,
        min_factor_permille: 50,
        max_changed_groups: 1,
        warm_discount_permille: 1,
        // Found before shares had a growth limit: the weakest one.
        max_share_growth_permille: 10_000,
    };
    let mut w = World::new(&Shape::Clos3 { pods: 3, leaves: 1, spines: 2, supers: 1 }, config);
    let script = [
        Tick { dt_ms: 1, flips: vec![], fail: Some(17313559608447456322) },
        Tick { dt_ms: 1, flips: vec![(17144686673133041837, 2, 0)], fail: None },
        Tick { dt_ms: 1, flips: vec![], fail: None },
        Tick { dt_ms: 1, flips: vec![(537755957504614206, 1, 48)], fail: None },
        Tick { dt_ms: 1, flips: vec![], fail: Some(15012280631722834571) },
    ];
    play_then_cool(&mut w, &script);
}
