//! Scripted event sequences on the shipped fabrics, checked for their
//! meaning here and pinned as golden files under `tests/golden/`
//! (`UPDATE_GOLDEN=1 cargo test -p metaroce-policy` rewrites them).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{cool, fail, golden, hot, topology, Event, Golden, Run, MS};
use metaroce_policy::{ChangeKind, Decision, PolicyConfig};
use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;

fn record(name: &str, topo: &str, run: &Run, script: &[(u64, Event)]) {
    let g = Golden { topology: topo, config: run.policy.config(), script: script.to_vec(), steps: &run.log };
    golden(name, &g);
}

/// Every group back at exactly its baseline weights, nothing remembered.
fn assert_baseline(run: &Run) {
    assert_eq!(run.state.override_count(), 0);
    assert_eq!(run.state.ports().count(), 0, "no port state left");
    for s in 0..run.topo.switches.len() {
        for &l in run.routing.destinations() {
            let name = |i: usize| run.topo.switches[i].name.clone();
            assert_eq!(run.weights(&name(s), &name(l)), run.baseline(s, l));
        }
    }
}

#[test]
fn hot_spine_downlink_shifts_every_other_leaf_then_restores_exactly() {
    let mut run = Run::new(topology("leaf-spine-4x4.yaml"), PolicyConfig::default());
    let script = vec![(0, hot("spine1>leaf4")), (40, cool("spine1>leaf4"))];
    run.script(1, 2, &script);
    for leaf in ["leaf1", "leaf2", "leaf3"] {
        let on = |spine: &str| run.weight_on(&format!("{leaf}>{spine}"), "leaf4");
        assert_eq!((on("spine1"), on("spine2"), on("spine3"), on("spine4")), (1, 2, 2, 2), "{leaf}");
        assert_eq!(
            run.weights(leaf, "leaf2"),
            run.baseline(run.id(leaf), run.id("leaf2")),
            "other leaves untouched"
        );
    }
    assert_eq!(run.weights("spine1", "leaf4").len(), 1, "the spine's own group has no alternative");
    run.script(1, 39, &script);
    assert_eq!(run.weight_on("leaf1>spine1", "leaf4"), 1);
    assert_eq!(run.weight_on("leaf1>spine2", "leaf4"), 8, "three steps: 1/8 of the capacity");
    let rest = run.script(1, 200, &script);
    // Restore waits for the hold-down (50 ms cool), then one level per 10 ms.
    let restores: Vec<u64> = rest.iter().filter(|d| !d.changes.is_empty()).map(|d| d.now_ns / MS).collect();
    assert_eq!(restores, vec![90, 100, 110]);
    assert!(rest.iter().flat_map(|d| &d.changes).all(|c| c.kind == ChangeKind::Restore));
    assert_baseline(&run);
    record("spine_downlink_4x4", "leaf-spine-4x4.yaml", &run, &script);
}

#[test]
fn parallel_links_let_the_local_spine_shift_too() {
    let topo = gen::leaf_spine(&Common::new("par", Bandwidth::gbps(100)), 4, 4, 1, 2).unwrap();
    let mut run = Run::new(topo, PolicyConfig::default());
    let script = vec![(0, hot("spine1>leaf4")), (30, cool("spine1>leaf4"))];
    run.script(1, 2, &script);
    assert_eq!(run.weight_on("spine1>leaf4", "leaf4"), 1);
    assert_eq!(run.weight_on("spine1>leaf4#2", "leaf4"), 2, "the parallel link takes the load");
    for leaf in ["leaf1", "leaf2", "leaf3"] {
        let on = |spine: &str| run.weight_on(&format!("{leaf}>{spine}"), "leaf4");
        assert_eq!((on("spine1"), on("spine1#2"), on("spine2")), (3, 3, 4), "{leaf}: 150 of 200 Gbit/s left");
    }
    run.script(1, 200, &script);
    assert_baseline(&run);
    record("parallel_spine_downlink", "generated leaf_spine 4x4, 2 parallel links", &run, &script);
}

#[test]
fn hot_leaf_uplink_shifts_only_that_leaf() {
    let mut run = Run::new(topology("leaf-spine-4x4.yaml"), PolicyConfig::default());
    let script = vec![(0, hot("leaf1>spine1")), (20, cool("leaf1>spine1"))];
    let ds = run.script(1, 19, &script);
    let changed: Vec<_> = ds.iter().flat_map(|d| &d.changes).collect();
    assert!(!changed.is_empty());
    assert!(changed.iter().all(|c| c.switch == run.id("leaf1")), "only leaf1 has paths through its uplink");
    for dest in ["leaf2", "leaf3", "leaf4"] {
        assert!(run.weight_on("leaf1>spine1", dest) < run.weight_on("leaf1>spine2", dest));
    }
    run.script(1, 200, &script);
    assert_baseline(&run);
    record("leaf_uplink_4x4", "leaf-spine-4x4.yaml", &run, &script);
}

#[test]
fn fat_tree_derate_reaches_other_pods_once_the_bottleneck_moves() {
    let mut run = Run::new(topology("fat-tree-k4.yaml"), PolicyConfig::default());
    let script = vec![(0, hot("p1-spine1>p1-leaf1")), (30, cool("p1-spine1>p1-leaf1"))];
    run.script(1, 2, &script);
    // Level 1: the pod-mate leaf shifts; other pods are limited by their
    // own uplinks, not by the hot link, so they stay.
    assert_eq!(run.weight_on("p1-leaf2>p1-spine1", "p1-leaf1"), 1);
    assert_eq!(run.weight_on("p1-leaf2>p1-spine2", "p1-leaf1"), 2);
    assert_eq!(run.weight_on("p3-leaf1>p3-spine1", "p1-leaf1"), 1);
    assert_eq!(run.weight_on("p3-leaf1>p3-spine2", "p1-leaf1"), 1);
    run.script(1, 12, &script);
    // Level 2: the plane through the hot link now carries less than a leaf
    // uplink, so leaves in every pod move toward the other plane.
    for p in ["p2", "p3", "p4"] {
        let on = |spine: &str| run.weight_on(&format!("{p}-leaf1>{p}-{spine}"), "p1-leaf1");
        assert_eq!((on("spine1"), on("spine2")), (1, 2), "{p}");
    }
    run.script(1, 300, &script);
    assert_baseline(&run);
    record("fat_tree_agg_downlink", "fat-tree-k4.yaml", &run, &script);
}

#[test]
fn mininet_fabric_shifts_the_other_leaf() {
    let mut run = Run::new(topology("mininet-2x2.yaml"), PolicyConfig::default());
    let script = vec![(0, hot("spine1>leaf2")), (25, cool("spine1>leaf2"))];
    run.script(1, 14, &script);
    // Level 2 would be 1:4, but with two uplinks the other one may take at
    // most a third more than its half: 1:2 (`max_share_growth_permille`).
    assert_eq!((run.weight_on("leaf1>spine1", "leaf2"), run.weight_on("leaf1>spine2", "leaf2")), (1, 2));
    assert_eq!(run.weight_on("leaf2>spine1", "leaf1"), 1, "the other direction is not hot");
    run.script(1, 200, &script);
    assert_baseline(&run);
    record("mininet_2x2", "mininet-2x2.yaml", &run, &script);
}

#[test]
fn displaced_load_spreads_by_spare_capacity() {
    let mut run = Run::new(topology("leaf-spine-4x4.yaml"), PolicyConfig::default());
    let script = vec![
        (0, hot("spine1>leaf4")),
        (0, Event::Warm("spine2>leaf4".into(), 24)),
        (0, Event::Warm("spine3>leaf4".into(), 4)),
    ];
    run.script(1, 2, &script);
    // Capacities 50 (hot), 75 (half-way to the high mark), 100, 100: the
    // idle spines take most, the warm one less, none takes it all.
    for leaf in ["leaf1", "leaf2", "leaf3"] {
        let on = |spine: &str| run.weight_on(&format!("{leaf}>{spine}"), "leaf4");
        assert_eq!((on("spine1"), on("spine2"), on("spine3"), on("spine4")), (2, 3, 4, 4), "{leaf}");
    }
    record("warm_alternatives", "leaf-spine-4x4.yaml", &run, &script);
}

/// Per group, the kinds of its changes in order, compressed to runs.
fn kinds(ds: &[Decision]) -> std::collections::BTreeMap<(usize, usize), Vec<ChangeKind>> {
    let mut out: std::collections::BTreeMap<_, Vec<ChangeKind>> = Default::default();
    for c in ds.iter().flat_map(|d| &d.changes) {
        let v = out.entry((c.switch, c.leaf)).or_default();
        if v.last() != Some(&c.kind) {
            v.push(c.kind);
        }
    }
    out
}

#[test]
fn a_link_flapping_around_its_thresholds_does_not_make_weights_oscillate() {
    // Faster than the hold-up: nothing moves at all.
    let mut run = Run::new(topology("leaf-spine-4x4.yaml"), PolicyConfig::default());
    let fast: Vec<_> =
        (0..200).map(|t| (t, if t % 2 == 0 { hot("spine1>leaf4") } else { cool("spine1>leaf4") })).collect();
    let ds = run.script(1, 250, &fast);
    assert!(ds.iter().all(|d| d.changes.is_empty()));

    // Slower than the hold-up but faster than the hold-down: weights only
    // ever move away while it flaps, and only back once it stays cool.
    let mut run = Run::new(topology("leaf-spine-4x4.yaml"), PolicyConfig::default());
    let mut slow = Vec::new();
    for k in 0..20 {
        slow.push((k * 30, hot("spine1>leaf4")));
        slow.push((k * 30 + 5, cool("spine1>leaf4")));
    }
    let ds = run.script(1, 800, &slow);
    let flapping_until = 19 * 30 + 5;
    for (group, runs) in kinds(&ds) {
        assert_eq!(runs, vec![ChangeKind::Derate, ChangeKind::Restore], "{group:?}");
    }
    for d in &ds {
        for c in &d.changes {
            let during = d.now_ns / MS <= flapping_until;
            assert_eq!(c.kind == ChangeKind::Derate, during, "{c:?} at {} ms", d.now_ns / MS);
        }
    }
    let steps = ds.iter().filter(|d| !d.changes.is_empty()).count();
    assert_eq!(steps, 6, "three levels down, three back up, nothing else");
    assert_baseline(&run);
    record("flapping", "leaf-spine-4x4.yaml", &run, &slow);
}

#[test]
fn failover_is_immediate_and_never_rate_limited() {
    let config = PolicyConfig { max_changed_groups: 1, ..Default::default() };
    let mut run = Run::new(topology("leaf-spine-4x4.yaml"), config);
    let script = vec![(0, hot("spine1>leaf4")), (40, fail("leaf1>spine2")), (50, fail("spine1>leaf4"))];
    run.script(1, 39, &script);
    assert_eq!(run.state.override_count(), 3, "leaf1..3 toward leaf4");
    let ds = run.script(1, 40, &script);
    let d = ds.last().unwrap();
    let failover: Vec<_> = d.changes.iter().filter(|c| c.kind == ChangeKind::Failover).collect();
    assert_eq!(failover.len(), 1);
    assert_eq!(failover[0].switch, run.id("leaf1"));
    assert_eq!(failover[0].cause.map(|h| h.link), Some(run.link("leaf1>spine2")));
    let spine2 = run.port("leaf1>spine2").port;
    assert!(run.weights("leaf1", "leaf4").iter().all(|w| w.port != spine2));
    // The hot link itself fails: every override through it goes at once,
    // past a rate limit of one group per decision.
    let ds = run.script(1, 50, &script);
    let d = ds.last().unwrap();
    assert!(d.changes.len() > 1);
    assert!(d.changes.iter().all(|c| c.kind == ChangeKind::Failover && c.baseline));
    assert_eq!(run.state.override_count(), 0);
    assert!(d.levels.is_empty(), "a failed link has no derate level");
    record("failover", "leaf-spine-4x4.yaml", &run, &script);
}

#[test]
fn the_rate_limit_spreads_changes_over_decisions_most_urgent_first() {
    let topo = gen::leaf_spine(&Common::new("rate", Bandwidth::gbps(100)), 8, 4, 1, 1).unwrap();
    let config = PolicyConfig { max_changed_groups: 2, ..Default::default() };
    let mut run = Run::new(topo, config);
    let script = vec![(0, hot("spine1>leaf8"))];
    let ds = run.script(1, 8, &script);
    assert!(ds.iter().all(|d| d.changes.len() <= 2));
    let at = |t: usize| (ds[t].changes.len(), ds[t].deferred);
    assert_eq!((at(2), at(3), at(4), at(5)), ((2, 5), (2, 3), (2, 1), (1, 0)));
    assert_eq!(run.state.override_count(), 7);
    assert_eq!(run.state.pending().count(), 0);
}

#[test]
fn routes_moving_to_the_same_weights_count_as_one_group() {
    let config = PolicyConfig { max_changed_groups: 1, ..Default::default() };
    let mut run = Run::new(topology("leaf-spine-4x4.yaml"), config);
    let ds = run.script(1, 2, &[(0, hot("leaf1>spine1"))]);
    let d = &ds[2];
    assert_eq!((d.changes.len(), d.deferred), (3, 0), "leaf1 toward leaf2..4: one group of leaf1");
}

#[test]
fn changes_held_back_never_bring_back_a_failed_link() {
    let topo = gen::leaf_spine(&Common::new("held", Bandwidth::gbps(100)), 8, 4, 1, 1).unwrap();
    let config = PolicyConfig { max_changed_groups: 1, ..Default::default() };
    let mut run = Run::new(topo, config);
    // Seven leaves want new weights toward leaf8, one group per decision;
    // meanwhile leaf7 loses its link to spine2.
    let script = vec![(0, hot("spine1>leaf8")), (3, fail("leaf7>spine2"))];
    let dead = run.port("leaf7>spine2");
    for t in 0..=12 {
        run.script(1, t, &script);
        assert!(t < 3 || run.weights("leaf7", "leaf8").iter().all(|w| w.port != dead.port), "at {t} ms");
    }
    assert_ne!(
        run.weights("leaf7", "leaf8"),
        run.baseline(run.id("leaf7"), run.id("leaf8")),
        "still derated"
    );
    assert_eq!(run.state.override_count(), 7);
}
