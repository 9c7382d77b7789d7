//! L0: desired state from the topology, and the reconciler's write order.
//! After every batch the switch must be consistent as a packet sees it: a
//! route points only at an existing `nhop_group` entry, an entry only at a
//! complete selector group, groups only at existing members, members only
//! at existing next hops.

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
                let Some(Entry::GroupEntry { group, .. }) = state.get(&Key::GroupEntry(*g)) else {
                    panic!("route into missing group entry {g}: {e:?}")
                };
                let Some(Entry::Group { members, .. }) = state.get(&Key::Group(*group)) else {
                    panic!("group entry {g} into missing selector group {group}")
                };
                assert!(!members.is_empty(), "empty group {group}");
            }
            Entry::Route { target: RouteTarget::Nhop(h), .. } => {
                assert!(state.contains_key(&Key::Nhop(*h)), "{e:?}")
            }
            Entry::GroupEntry { group, .. } => assert!(state.contains_key(&Key::Group(*group))),
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

/// The selector group a route uses, through its `nhop_group` entry.
fn route_group(state: &BTreeMap<Key, Entry>, len: u8) -> (u16, u32) {
    state
        .values()
        .find_map(|e| match e {
            Entry::Route { len: l, target: RouteTarget::Group(g), .. } if *l == len => {
                match state.get(&Key::GroupEntry(*g)) {
                    Some(Entry::GroupEntry { group, .. }) => Some((*g, *group)),
                    _ => None,
                }
            }
            _ => None,
        })
        .unwrap()
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
    let (entry, old_group) = route_group(&base, 24);
    // Steer leaf1's traffic toward leaf2 mostly to port 4 (spine2).
    let mut o = Overrides::new();
    o.insert((leaf1, leaf2), vec![(3, 1), (4, 7)]);
    let want = desired(&t, &r, &o, leaf1, &installed);
    let batches = converge(&mut installed, &want);
    // Two ordered writes move new flowlets: the new selector group, then
    // the route's entry pointed at it. The route itself is not written;
    // the old group goes last.
    assert!(batches.iter().flatten().all(|c| !matches!(c.entry(), Entry::Route { .. })), "{batches:?}");
    let moved = batches.iter().take_while(|b| b.iter().all(|c| !matches!(c, Change::Delete(_)))).count();
    assert_eq!(moved, 2, "{batches:?}");
    let flat: Vec<&Change> = batches.iter().flatten().collect();
    let pos = |f: &dyn Fn(&Change) -> bool| flat.iter().position(|c| f(c)).unwrap();
    let new_group = pos(&|c| matches!(c, Change::Insert(Entry::Group { .. })));
    let repoint = pos(&|c| matches!(c, Change::Modify(Entry::GroupEntry { id, .. }) if *id == entry));
    let old_del = pos(&|c| matches!(c, Change::Delete(Entry::Group { id, .. }) if *id == old_group));
    assert!(new_group < repoint && repoint < old_del, "{flat:?}");
    let (same_entry, group) = route_group(&want, 24);
    assert_eq!(same_entry, entry, "the route keeps its entry");
    let Some(Entry::Group { members, .. }) = want.get(&Key::Group(group)) else { panic!() };
    assert_eq!(members, &vec![(u32::from(nhop_id(3)), 1), (u32::from(nhop_id(4)), 7)]);
    // And back: the baseline group is rebuilt under a fresh id, never modified in place.
    let back = desired(&t, &r, &Overrides::new(), leaf1, &installed);
    let batches = converge(&mut installed, &back);
    assert!(batches.iter().flatten().all(|c| !matches!(c, Change::Modify(Entry::Group { .. }))));
    assert_eq!(route_group(&back, 24).0, entry);
}

/// A switch programmed by a controller that shared one `nhop_group` entry
/// among routes of equal members: a re-weight of one destination leaves
/// the entry with the routes that keep their members, and gives the
/// re-weighted route an entry of its own, all without a dangling step.
#[test]
fn shared_entries_of_an_older_controller_are_split_safely() {
    let t = topo("fat-tree-k4.yaml");
    let r = Routing::compute(&t);
    let s = t.switch_id("p1-leaf1").unwrap();
    let base = desired(&t, &r, &Overrides::new(), s, &BTreeMap::new());
    // Rewrite the baseline the old way: every route of one content on one entry.
    let mut old: BTreeMap<Key, Entry> = BTreeMap::new();
    let mut entry_of_group: BTreeMap<u32, u16> = BTreeMap::new();
    for e in base.values() {
        if let Entry::GroupEntry { group, .. } = e {
            let id = u16::try_from(*group).unwrap();
            entry_of_group.entry(*group).or_insert(id);
        }
    }
    for e in base.values() {
        match e {
            Entry::GroupEntry { .. } => {}
            Entry::Route { prefix, len, target: RouteTarget::Group(g) } => {
                let Some(Entry::GroupEntry { group, .. }) = base.get(&Key::GroupEntry(*g)) else { panic!() };
                let shared = entry_of_group[group];
                let r = Entry::Route { prefix: *prefix, len: *len, target: RouteTarget::Group(shared) };
                old.insert(r.key(), r);
                let ge = Entry::GroupEntry { id: shared, group: *group };
                old.insert(ge.key(), ge);
            }
            e => {
                old.insert(e.key(), e.clone());
            }
        }
    }
    consistent(&old);
    let shared_routes =
        old.values().filter(|e| matches!(e, Entry::Route { target: RouteTarget::Group(_), .. })).count();
    assert!(shared_routes > 2, "the fixture shares an entry among several routes");
    // Nothing changes on a switch that already holds the baseline the old way.
    assert!(reconcile::diff(&desired(&t, &r, &Overrides::new(), s, &old), &old).is_empty());
    // Re-weight one destination leaf.
    let (leaf, ports) = r
        .routes(s)
        .into_iter()
        .find_map(|route| {
            let g = r.groups(s).get(route.group)?;
            (route.leaf != s && g.members.len() > 1)
                .then(|| (route.leaf, g.members.iter().map(|m| m.port).collect::<Vec<_>>()))
        })
        .unwrap();
    let mut o = Overrides::new();
    o.insert((s, leaf), ports.iter().enumerate().map(|(i, &p)| (p, 1 + 3 * i as u32)).collect());
    let mut installed = old.clone();
    let want = desired(&t, &r, &o, s, &installed);
    let batches = converge(&mut installed, &want);
    let (_, m, _) = reconcile::counts(&batches);
    assert!(m >= 1, "the re-weighted routes move: {batches:?}");
    // The routes that kept their members kept the shared entry; those
    // toward the re-weighted leaf have entries of their own.
    let shared: Vec<u16> = entry_of_group.values().copied().collect();
    let moved: Vec<&Entry> = want
        .values()
        .filter(|e| matches!(e, Entry::Route { target: RouteTarget::Group(g), .. } if !shared.contains(g)))
        .collect();
    let toward_leaf = r.routes(s).iter().filter(|route| route.leaf == leaf).count();
    assert_eq!(moved.len(), toward_leaf, "{moved:?}");
    let kept = want
        .values()
        .filter(|e| matches!(e, Entry::Route { target: RouteTarget::Group(g), .. } if shared.contains(g)))
        .count();
    assert_eq!(kept + toward_leaf, shared_routes);
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
