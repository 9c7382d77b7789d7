//! Properties of the routing over random 2- and 3-tier fabrics with random
//! link rates, parallel links and failures:
//!
//! - no routing loop, and every route is valley-free;
//! - every host pair that is connected (checked by an independent search)
//!   has a route, and no route exists where there is no valley-free path;
//! - after any failures no next hop points into a dead link or switch, and
//!   the incremental repair equals a recompute from scratch;
//! - weights are positive and proportional to member capacity.

// Tests may panic on what they set up themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashSet, VecDeque};
use std::fmt::Write;

use metaroce_topo::{load_str, NextHop, Routing, RoutingOptions, SwitchId, Topology};
use proptest::prelude::*;

const RATES: [u64; 5] = [10, 25, 40, 100, 400];

#[derive(Debug, Clone)]
struct Shape {
    leaves: usize,
    spines: usize,
    supers: usize,
    /// Per possible (lower, upper) pair: how many parallel links (0 = none), and the rate index.
    leaf_spine: Vec<(u8, usize)>,
    spine_super: Vec<(u8, usize)>,
    hosts: Vec<u8>,
}

fn shape() -> impl Strategy<Value = Shape> {
    (2usize..6, 1usize..5, 0usize..4).prop_flat_map(|(leaves, spines, supers)| {
        let links = |n| proptest::collection::vec((0u8..3, 0usize..RATES.len()), n);
        (links(leaves * spines), links(spines * supers), proptest::collection::vec(1u8..3, leaves)).prop_map(
            move |(leaf_spine, spine_super, hosts)| Shape {
                leaves,
                spines,
                supers,
                leaf_spine,
                spine_super,
                hosts,
            },
        )
    })
}

/// Writes the shape as topology YAML. Every leaf links to spine 1 (and, in
/// three tiers, every spine to super-spine 1), so the healthy fabric is
/// connected and passes validation; the rest is random.
fn yaml(s: &Shape) -> String {
    let mut y = String::from("name: prop\nswitches:\n");
    let mut id = 0;
    let mut sw = |y: &mut String, name: String, role: &str| {
        id += 1;
        let _ = writeln!(
            y,
            "  - {{name: {name}, role: {role}, device_id: {id}, p4rt: \"127.0.0.1:{}\"}}",
            50000 + id
        );
    };
    (1..=s.leaves).for_each(|i| sw(&mut y, format!("l{i}"), "leaf"));
    (1..=s.spines).for_each(|i| sw(&mut y, format!("s{i}"), "spine"));
    (1..=s.supers).for_each(|i| sw(&mut y, format!("t{i}"), "super-spine"));
    y.push_str("hosts:\n");
    let mut next_port = std::collections::HashMap::<String, u16>::new();
    let mut port = |name: &str| {
        let p = next_port.entry(name.to_string()).or_insert(1);
        *p += 1;
        *p - 1
    };
    for (l, &n) in s.hosts.iter().enumerate() {
        for h in 0..n {
            let leaf = format!("l{}", l + 1);
            let _ = writeln!(
                y,
                "  - {{name: h{l}-{h}, ip: 10.{l}.0.{}, mac: \"02:00:00:00:{l:02x}:{:02x}\", leaf: {leaf}, port: {}}}",
                h + 1,
                h + 1,
                port(&leaf)
            );
        }
    }
    y.push_str("links:\n");
    let mut link = |y: &mut String, lo: String, hi: String, count: u8, rate: usize| {
        for _ in 0..count {
            let (pa, pb) = (port(&lo), port(&hi));
            let _ = writeln!(y, "  - {{a: \"{lo}:{pa}\", b: \"{hi}:{pb}\", bandwidth: {}Gbps}}", RATES[rate]);
        }
    };
    for l in 0..s.leaves {
        for sp in 0..s.spines {
            let (mut count, rate) = s.leaf_spine[l * s.spines + sp];
            if sp == 0 {
                count = count.max(1);
            }
            link(&mut y, format!("l{}", l + 1), format!("s{}", sp + 1), count, rate);
        }
    }
    for sp in 0..s.spines {
        for t in 0..s.supers {
            let (mut count, rate) = s.spine_super[sp * s.supers + t];
            if t == 0 {
                count = count.max(1);
            }
            link(&mut y, format!("s{}", sp + 1), format!("t{}", t + 1), count, rate);
        }
    }
    y
}

/// Independent check: is there an up*-down* path from `from` to `to` over live links?
fn valley_free_reachable(t: &Topology, r: &Routing, from: SwitchId, to: SwitchId) -> bool {
    if !r.switch_is_up(from) || !r.switch_is_up(to) {
        return false;
    }
    let tier = |s: SwitchId| t.switches[s].role.tier();
    let mut seen = HashSet::new();
    let mut queue = VecDeque::from([(from, true)]);
    while let Some((s, going_up)) = queue.pop_front() {
        if s == to {
            return true;
        }
        if !seen.insert((s, going_up)) {
            continue;
        }
        for a in t.adjacency(s) {
            if !r.link_is_up(a.link) || !r.switch_is_up(a.peer) {
                continue;
            }
            if tier(a.peer) > tier(s) && going_up {
                queue.push_back((a.peer, true));
            } else if tier(a.peer) < tier(s) {
                queue.push_back((a.peer, false));
            }
        }
    }
    false
}

/// Follows every branch of the routes from `s` toward `leaf`: each must
/// arrive, without revisiting a switch, going up and then only down.
fn check_routes_from(t: &Topology, r: &Routing, s: SwitchId, leaf: SwitchId) -> Result<(), String> {
    let mut stack = vec![(s, vec![s], false)];
    while let Some((at, path, descended)) = stack.pop() {
        if at == leaf {
            continue;
        }
        let (_, group) =
            r.group_toward(at, leaf).ok_or_else(|| format!("route from {path:?} dead-ends at {at}"))?;
        for m in &group.members {
            let adj = t
                .adjacency(at)
                .iter()
                .find(|a| a.port == m.port)
                .ok_or_else(|| format!("switch {at} has a member on port {} with no link", m.port))?;
            if !r.link_is_up(adj.link) || !r.switch_is_up(adj.peer) {
                return Err(format!("switch {at} port {} points into a dead link or switch", m.port));
            }
            if m.next != NextHop::Switch(adj.peer) {
                return Err(format!("member next hop {:?} does not match link peer {}", m.next, adj.peer));
            }
            let up = t.switches[adj.peer].role.tier() > t.switches[at].role.tier();
            if up && descended {
                return Err(format!("valley: {path:?} goes down then up to {}", adj.peer));
            }
            if path.contains(&adj.peer) {
                return Err(format!("loop: {path:?} returns to {}", adj.peer));
            }
            let mut next = path.clone();
            next.push(adj.peer);
            stack.push((adj.peer, next, descended || !up));
        }
    }
    Ok(())
}

fn check_weights(t: &Topology, r: &Routing, s: SwitchId, leaf: SwitchId) -> Result<(), String> {
    let max = u64::from(r.options().max_weight);
    let Some((id, g)) = r.group_toward(s, leaf) else { return Ok(()) };
    if g.members.is_empty() {
        return Err(format!("switch {s} group {id} is empty"));
    }
    let caps = r.member_capacities(t, s, leaf);
    if caps.len() != g.members.len() {
        return Err(format!(
            "switch {s} group {id}: {} members but {} capacities",
            g.members.len(),
            caps.len()
        ));
    }
    let top = caps.iter().map(|c| c.1).max().unwrap_or(1);
    let wtop = g.members.iter().map(|m| u64::from(m.weight)).max().unwrap_or(1);
    let gcd = caps.iter().map(|c| c.1).fold(0, num_gcd);
    for (m, &(port, cap)) in g.members.iter().zip(&caps) {
        if m.port != port || m.weight == 0 || cap == 0 {
            return Err(format!(
                "switch {s} group {id}: bad member {m:?} with capacity {cap} on port {port}"
            ));
        }
        if top / gcd <= max {
            // Exact: w_i / w_top == c_i / c_top.
            if u128::from(m.weight) * u128::from(top) != u128::from(cap) * u128::from(wtop) {
                return Err(format!(
                    "switch {s} group {id}: weights {:?} not proportional to {caps:?}",
                    g.members
                ));
            }
        } else {
            let want = cap as f64 / top as f64;
            let got = f64::from(m.weight) / wtop as f64;
            if (want - got).abs() > 1.0 / max as f64 + 1e-9 && m.weight > 1 {
                return Err(format!("switch {s} group {id}: weight {got} vs capacity share {want}"));
            }
        }
    }
    Ok(())
}

fn num_gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        num_gcd(b, a % b)
    }
}

/// Per switch: each route's prefix and its group's `(port, weight)` pairs.
type Snapshot = Vec<Vec<(String, Vec<(u16, u32)>)>>;

/// Every route of every switch, to compare two routings.
fn snapshot(t: &Topology, r: &Routing) -> Snapshot {
    (0..t.switches.len())
        .map(|s| {
            let mut routes: Vec<_> = r
                .routes(s)
                .iter()
                .map(|rt| {
                    let g = r
                        .groups(s)
                        .get(rt.group)
                        .map(|g| g.members.iter().map(|m| (m.port, m.weight)).collect());
                    (rt.prefix.to_string(), g.unwrap_or_default())
                })
                .collect();
            routes.sort();
            routes
        })
        .collect()
}

fn check_all(t: &Topology, r: &Routing) -> Result<(), String> {
    let leaves: Vec<SwitchId> = r.destinations().to_vec();
    for s in 0..t.switches.len() {
        for &leaf in &leaves {
            check_weights(t, r, s, leaf)?;
            let reach = r.reaches(s, leaf);
            let truth = valley_free_reachable(t, r, s, leaf);
            if reach != truth {
                return Err(format!("switch {s} -> leaf {leaf}: routing says {reach}, search says {truth}"));
            }
            if reach {
                check_routes_from(t, r, s, leaf)?;
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn healthy_fabrics_route_everything(shape in shape()) {
        let text = yaml(&shape);
        let t = load_str(&text, "prop").map_err(|e| TestCaseError::fail(e.report()))?;
        let r = Routing::compute(&t);
        check_all(&t, &r).map_err(TestCaseError::fail)?;
        for &a in r.destinations() {
            for &b in r.destinations() {
                prop_assert!(r.reaches(a, b), "connected leaves {a} and {b} have no route");
            }
        }
    }

    /// The count `topo paths` prints is the number of paths there are.
    #[test]
    fn path_counts_match_the_listing(shape in shape(), fail in any::<prop::sample::Index>()) {
        let t = load_str(&yaml(&shape), "prop").map_err(|e| TestCaseError::fail(e.report()))?;
        let mut r = Routing::compute(&t);
        if !t.links.is_empty() {
            r.fail_link(&t, fail.index(t.links.len())).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        for src in 0..t.hosts.len() {
            for dst in 0..t.hosts.len() {
                let (all, more) = r.host_paths(&t, src, dst, usize::MAX);
                prop_assert!(!more);
                prop_assert_eq!(r.count_host_paths(&t, src, dst), all.len() as u128, "{} to {}", src, dst);
            }
        }
    }

    #[test]
    fn failures_repair_exactly(
        shape in shape(),
        failures in proptest::collection::vec((any::<bool>(), any::<prop::sample::Index>()), 1..6),
    ) {
        let text = yaml(&shape);
        let t = load_str(&text, "prop").map_err(|e| TestCaseError::fail(e.report()))?;
        let mut r = Routing::compute(&t);
        let (mut links_down, mut switches_down) = (Vec::new(), Vec::new());
        for (is_switch, index) in failures {
            if is_switch {
                let s = index.index(t.switches.len());
                r.fail_switch(&t, s).map_err(|e| TestCaseError::fail(e.to_string()))?;
                switches_down.push(s);
                links_down.extend(t.adjacency(s).iter().map(|a| a.link));
            } else {
                let l = index.index(t.links.len());
                r.fail_link(&t, l).map_err(|e| TestCaseError::fail(e.to_string()))?;
                links_down.push(l);
            }
            check_all(&t, &r).map_err(TestCaseError::fail)?;
            let fresh = Routing::with_failures(&t, RoutingOptions::default(), &links_down, &switches_down);
            prop_assert_eq!(snapshot(&t, &r), snapshot(&t, &fresh), "incremental repair differs from recompute");
        }
        // Restoring everything brings back the healthy routing.
        for &l in &links_down {
            r.restore_link(&t, l).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        for &s in &switches_down {
            r.restore_switch(&t, s).map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
        prop_assert_eq!(snapshot(&t, &r), snapshot(&t, &Routing::compute(&t)));
    }
}

#[test]
fn asymmetric_fabrics_are_balanced_by_capacity() {
    // leaf1 reaches leaf2 through spine1 (400G all the way) and spine2,
    // whose link down to leaf2 is only 100G: weights 4:1, not 1:1.
    let text = r#"name: asym
defaults: {host: {nic_rate: 400Gbps}}
switches:
  - {name: leaf1, role: leaf, device_id: 1, p4rt: "127.0.0.1:1"}
  - {name: leaf2, role: leaf, device_id: 2, p4rt: "127.0.0.1:2"}
  - {name: spine1, role: spine, device_id: 3, p4rt: "127.0.0.1:3"}
  - {name: spine2, role: spine, device_id: 4, p4rt: "127.0.0.1:4"}
hosts:
  - {name: h1, ip: 10.0.1.1, mac: "02:00:00:00:01:01", leaf: leaf1, port: 1}
  - {name: h2, ip: 10.0.2.1, mac: "02:00:00:00:02:01", leaf: leaf2, port: 1}
links:
  - {a: "leaf1:3", b: "spine1:1", bandwidth: 400Gbps}
  - {a: "leaf1:4", b: "spine2:1", bandwidth: 400Gbps}
  - {a: "leaf2:3", b: "spine1:2", bandwidth: 400Gbps}
  - {a: "leaf2:4", b: "spine2:2", bandwidth: 100Gbps}
"#;
    let t = load_str(text, "asym").unwrap();
    let r = Routing::compute(&t);
    let leaf1 = t.switch_id("leaf1").unwrap();
    let leaf2 = t.switch_id("leaf2").unwrap();
    let (_, g) = r.group_toward(leaf1, leaf2).unwrap();
    let w: Vec<(u16, u32)> = g.members.iter().map(|m| (m.port, m.weight)).collect();
    assert_eq!(w, vec![(3, 4), (4, 1)]);
    assert_eq!(r.capacity_toward(leaf1, leaf2), Some(500_000_000_000));
    // Parallel links to one spine share what the spine can carry onward.
    let (paths, _) = r.host_paths(&t, 0, 1, 10);
    assert_eq!(paths.len(), 2);
    assert_eq!(paths.iter().map(|p| p.bottleneck_bps).max(), Some(400_000_000_000));
}

#[test]
fn failing_a_spine_downlink_reroutes_upstream_leaves() {
    let t = load_str(
        &yaml(&Shape {
            leaves: 2,
            spines: 2,
            supers: 0,
            leaf_spine: vec![(1, 3); 4],
            spine_super: vec![],
            hosts: vec![1, 1],
        }),
        "two",
    )
    .unwrap();
    let mut r = Routing::compute(&t);
    let (l1, l2, s1) = (t.switch_id("l1").unwrap(), t.switch_id("l2").unwrap(), t.switch_id("s1").unwrap());
    assert_eq!(r.group_toward(l1, l2).unwrap().1.members.len(), 2);
    let link = t.adjacency(s1).iter().find(|a| a.peer == l2).unwrap().link;
    let changes = r.fail_link(&t, link).unwrap();
    // spine1 loses its route to leaf2, leaf2's route to leaf1 and leaf1's
    // route to leaf2 narrow to spine2: the upstream leaf is told, not only
    // the switch next to the failure.
    assert!(changes.iter().any(|c| c.switch == s1 && c.leaf == l2 && c.new.is_none()));
    assert!(changes.iter().any(|c| c.switch == l1 && c.leaf == l2 && c.new.is_some()));
    let (_, g) = r.group_toward(l1, l2).unwrap();
    assert_eq!(g.members.len(), 1);
    assert_eq!(g.members[0].next, NextHop::Switch(t.switch_id("s2").unwrap()));
    assert!(r.fail_link(&t, link).unwrap().is_empty(), "failing a dead link changes nothing");
    assert!(r.fail_link(&t, 999).is_err());
}
