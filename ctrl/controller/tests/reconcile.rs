//! L0: desired state from the topology, and the reconciler's write order.
//! After every batch the switch must be consistent as a packet sees it: a
//! route points only at complete groups, groups only at existing members,
//! members only at existing next hops.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use metaroce_controller::plan::{self, nhop_id, Overrides, Settings};
use metaroce_controller::reconcile::{self, Change};
use metaroce_pipeline::{Entry, Key, RouteTarget};
use metaroce_topo::{Routing, Topology};

fn topo(name: &str) -> Topology {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../topologies").join(name);
    metaroce_topo::load_file(&p).unwrap()
}

fn desired(
    t: &Topology,
    r: &Routing,
    o: &Overrides,
    s: usize,
    installed: &BTreeMap<Key, Entry>,
) -> BTreeMap<Key, Entry> {
    plan::assign(&plan::switch_plan(t, r, o, &Settings::default(), s), installed).unwrap()
}

/// Panics if a packet could meet a dangling reference.
fn consistent(state: &BTreeMap<Key, Entry>) {
    for e in state.values() {
        match e {
            Entry::Route { target: RouteTarget::Group(g), .. } => {
                assert!(
                    state.contains_key(&Key::GroupEntry(*g)),
                    "route into missing group entry {g}: {e:?}"
                );
                let Some(Entry::Group { members, .. }) = state.get(&Key::Group(u32::from(*g))) else {
                    panic!("route into missing selector group {g}")
                };
                assert!(!members.is_empty(), "empty group {g}");
            }
            Entry::Route { target: RouteTarget::Nhop(h), .. } => {
                assert!(state.contains_key(&Key::Nhop(*h)), "{e:?}")
            }
            Entry::GroupEntry { id } => assert!(state.contains_key(&Key::Group(u32::from(*id)))),
            Entry::Group { members, .. } => {
                for (m, w) in members {
                    assert!(*w >= 1);
                    let Some(Entry::Member { nhop, .. }) = state.get(&Key::Member(*m)) else {
                        panic!("missing member {m}")
                    };
                    assert!(state.contains_key(&Key::Nhop(*nhop)));
                }
            }
            _ => {}
        }
    }
}

/// Applies the diff batch by batch, checking consistency after each.
fn converge(installed: &mut BTreeMap<Key, Entry>, want: &BTreeMap<Key, Entry>) -> Vec<Vec<Change>> {
    let batches = reconcile::diff(want, installed);
    for b in &batches {
        reconcile::apply(installed, b);
        consistent(installed);
    }
    assert_eq!(installed, want);
    assert!(reconcile::diff(want, installed).is_empty(), "a second pass must change nothing");
    batches
}

#[test]
fn baseline_installs_in_order_and_is_idempotent() {
    for name in ["mininet-2x2.yaml", "fat-tree-k4.yaml", "leaf-spine-4x4.yaml"] {
        let t = topo(name);
        let r = Routing::compute(&t);
        for s in 0..t.switches.len() {
            let mut installed = BTreeMap::new();
            let want = desired(&t, &r, &Overrides::new(), s, &installed);
            let batches = converge(&mut installed, &want);
            assert!(batches.iter().flatten().all(|c| matches!(c, Change::Insert(_) | Change::Modify(_))));
            // Recomputing against what is installed keeps every id.
            assert_eq!(desired(&t, &r, &Overrides::new(), s, &installed), want, "{name} switch {s}");
        }
    }
}

#[test]
fn every_host_is_routed_on_every_switch() {
    let t = topo("fat-tree-k4.yaml");
    let r = Routing::compute(&t);
    for s in 0..t.switches.len() {
        let want = desired(&t, &r, &Overrides::new(), s, &BTreeMap::new());
        for h in &t.hosts {
            let routed = want.values().any(|e| match e {
                Entry::Route { prefix, len, .. } => {
                    let mask = if *len == 0 { 0 } else { u32::MAX << (32 - u32::from(*len)) };
                    u32::from(h.ip) & mask == u32::from(*prefix)
                }
                _ => false,
            });
            assert!(routed, "{} has no route to {}", t.switches[s].name, h.name);
        }
    }
}

#[test]
fn a_weight_change_is_make_before_break() {
    let t = topo("mininet-2x2.yaml");
    let r = Routing::compute(&t);
    let leaf1 = t.switch_id("leaf1").unwrap();
    let leaf2 = t.switch_id("leaf2").unwrap();
    let mut installed = BTreeMap::new();
    let base = desired(&t, &r, &Overrides::new(), leaf1, &installed);
    converge(&mut installed, &base);
    let old_group = base
        .values()
        .find_map(|e| match e {
            Entry::Route { len: 24, target: RouteTarget::Group(g), .. } => Some(*g),
            _ => None,
        })
        .unwrap();
    // Steer leaf1's traffic toward leaf2 mostly to port 4 (spine2).
    let mut o = Overrides::new();
    o.insert((leaf1, leaf2), vec![(3, 1), (4, 7)]);
    let want = desired(&t, &r, &o, leaf1, &installed);
    let batches = converge(&mut installed, &want);
    let flat: Vec<&Change> = batches.iter().flatten().collect();
    let pos = |f: &dyn Fn(&Change) -> bool| flat.iter().position(|c| f(c)).unwrap();
    let new_group = pos(&|c| matches!(c, Change::Insert(Entry::Group { .. })));
    let route = pos(&|c| matches!(c, Change::Modify(Entry::Route { .. })));
    let old_del =
        pos(&|c| matches!(c, Change::Delete(Entry::Group { id, .. }) if *id == u32::from(old_group)));
    assert!(new_group < route && route < old_del, "{flat:?}");
    let Some(Entry::Group { members, .. }) = want.values().find(|e| matches!(e, Entry::Group { .. })) else {
        panic!()
    };
    assert_eq!(members, &vec![(u32::from(nhop_id(3)), 1), (u32::from(nhop_id(4)), 7)]);
    // And back: the baseline group is rebuilt under a fresh id, never modified in place.
    let back = desired(&t, &r, &Overrides::new(), leaf1, &installed);
    let batches = converge(&mut installed, &back);
    assert!(batches.iter().flatten().all(|c| !matches!(c, Change::Modify(Entry::Group { .. }))));
}

#[test]
fn a_failed_link_is_marked_down_and_never_a_next_hop() {
    let t = topo("mininet-2x2.yaml");
    let mut r = Routing::compute(&t);
    let leaf1 = t.switch_id("leaf1").unwrap();
    let link = t.adjacency(leaf1).iter().find(|a| a.port == 3).unwrap().link;
    r.fail_link(&t, link).unwrap();
    let want = desired(&t, &r, &Overrides::new(), leaf1, &BTreeMap::new());
    assert!(want.contains_key(&Key::PortDown(3)));
    for e in want.values() {
        if let Entry::Group { members, .. } = e {
            assert!(members.iter().all(|(m, _)| *m != u32::from(nhop_id(3))), "{e:?}");
        }
        if let Entry::Route { target: RouteTarget::Nhop(h), .. } = e {
            assert_ne!(*h, nhop_id(3));
        }
    }
}

#[test]
fn thresholds_and_int_settings_come_from_the_yaml() {
    let t = topo("mininet-2x2.yaml");
    let r = Routing::compute(&t);
    let leaf1 = t.switch_id("leaf1").unwrap();
    let want = desired(&t, &r, &Overrides::new(), leaf1, &BTreeMap::new());
    assert!(matches!(want.get(&Key::Config), Some(Entry::Config { flowlet_timeout_us: 5000, .. })));
    assert!(matches!(
        want.get(&Key::EgressPort(3)),
        Some(Entry::EgressPort { edge: false, queue_high: 40, queue_low: 10, ecn_threshold: 20, .. })
    ));
    assert!(matches!(want.get(&Key::EgressPort(1)), Some(Entry::EgressPort { edge: true, .. })));
    assert!(want.contains_key(&Key::EdgePort(1)) && !want.contains_key(&Key::EdgePort(3)));
    assert!(want.values().any(|e| matches!(e, Entry::Watch { l4_dst_port: (4791, 0xffff), .. })));
    let spine = t.switch_id("spine1").unwrap();
    let want = desired(&t, &r, &Overrides::new(), spine, &BTreeMap::new());
    assert!(!want.values().any(|e| matches!(e, Entry::Watch { .. } | Entry::EdgePort { .. })));
}
