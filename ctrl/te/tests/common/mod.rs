//! Helpers shared by the planner's integration tests: fabrics, jobs as
//! flows, and checks every placement must pass.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path as FsPath;

use metaroce_te::job::Pattern;
use metaroce_te::{Demand, FlowKey, Path, Plan, Planner, TeConfig};
use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;
use metaroce_topo::{HostId, NextHop, Routing, Topology};

pub const MS: u64 = 1_000_000;
pub const G: u64 = 1_000_000_000;

pub fn topology(file: &str) -> Topology {
    let path = FsPath::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies").join(file);
    metaroce_topo::load_file(&path).unwrap_or_else(|e| panic!("{file}: {e}"))
}

pub fn leaf_spine(leaves: usize, spines: usize, hosts: usize, parallel: usize) -> Topology {
    gen::leaf_spine(&Common::new("t", Bandwidth::gbps(100)), leaves, spines, hosts, parallel).unwrap()
}

pub fn fat_tree(k: usize) -> Topology {
    gen::fat_tree(&Common::new("t", Bandwidth::gbps(100)), k).unwrap()
}

pub fn clos3(pods: usize, leaves: usize, spines: usize, supers: usize, hosts: usize) -> Topology {
    gen::clos3(&Common::new("t", Bandwidth::gbps(100)), pods, leaves, spines, supers, hosts).unwrap()
}

/// Host-pair keys of a pattern over `ranks`.
pub fn pattern_keys(t: &Topology, p: &Pattern, ranks: &[HostId]) -> Vec<FlowKey> {
    p.pairs(ranks).into_iter().map(|(a, b)| FlowKey::pair(t.hosts[a].ip, t.hosts[b].ip)).collect()
}

/// Announces `keys` as one job (line rate, no period).
pub fn announce(p: &mut Planner, keys: &[FlowKey]) {
    for &k in keys {
        p.upsert(k, Demand::announced(1 << 20, None)).unwrap();
    }
}

/// Every placed path follows the routing's groups from the source leaf
/// to the destination leaf over links in service, and flags its choices
/// where the group has more than one member.
pub fn check_paths(t: &Topology, r: &Routing, p: &Planner) {
    check_paths_but(t, r, p, &[]);
}

/// `check_paths`, except for the flows in `skip` (kept on a broken path).
pub fn check_paths_but(t: &Topology, r: &Routing, p: &Planner, skip: &[FlowKey]) {
    let by_ip: HashMap<_, _> = t.hosts.iter().enumerate().map(|(i, h)| (h.ip, i)).collect();
    for (key, path) in p.placement() {
        if skip.contains(&key) {
            continue;
        }
        let (src, dst) = (by_ip[&key.src()], by_ip[&key.dst()]);
        let (a, b) = (t.hosts[src].leaf, t.hosts[dst].leaf);
        let mut at = a;
        for hop in &path.hops {
            assert_eq!(hop.switch, at, "{key}: path is not contiguous");
            assert!(r.link_is_up(hop.link), "{key}: path crosses failed link {}", hop.link);
            let (_, g) = r.group_toward(at, b).unwrap_or_else(|| panic!("{key}: no route at {at}"));
            let m = g.members.iter().find(|m| m.port == hop.port);
            let m = m.unwrap_or_else(|| panic!("{key}: port {} at {at} is not in the group", hop.port));
            assert_eq!(m.next, NextHop::Switch(hop.next));
            assert_eq!(hop.choice, g.members.len() > 1, "{key}: choice flag at {at}");
            at = hop.next;
        }
        assert_eq!(at, b, "{key}: path ends at {at}, not at the destination leaf {b}");
    }
}

/// The highest utilisation recomputed from the placement and the rates,
/// over links in service.
pub fn recomputed_max(t: &Topology, r: &Routing, p: &Planner) -> f64 {
    let mut load: HashMap<(usize, u16), u64> = HashMap::new();
    for (key, path) in p.placement() {
        let rate = p.rate(&key).unwrap();
        for h in path.hops.iter().filter(|h| r.link_is_up(h.link)) {
            *load.entry((h.switch, h.port)).or_default() += rate;
        }
    }
    load.iter()
        .map(|(&(s, port), &l)| {
            let a = t.adjacency(s).iter().find(|a| a.port == port).unwrap();
            l as f64 / t.links[a.link].bandwidth.bps() as f64
        })
        .fold(0.0, f64::max)
}

/// Lower bound of the issue: the largest, over leaves, of ⌈inter-leaf
/// flows in one direction / spine links⌉, in flows per link.
pub fn de_werra_bound(t: &Topology, keys: &[FlowKey], spines: usize) -> u64 {
    let leaf: HashMap<_, _> = t.hosts.iter().map(|h| (h.ip, h.leaf)).collect();
    let (mut out, mut inn) = (HashMap::new(), HashMap::new());
    for k in keys {
        let (a, b) = (leaf[&k.src()], leaf[&k.dst()]);
        if a != b {
            *out.entry(a).or_insert(0u64) += 1;
            *inn.entry(b).or_insert(0u64) += 1;
        }
    }
    out.values().chain(inn.values()).map(|&c| c.div_ceil(spines as u64)).max().unwrap_or(0)
}

/// Highest number of flows on one directed link.
pub fn max_flows_per_link(p: &Planner) -> u64 {
    let mut count: HashMap<(usize, u16), u64> = HashMap::new();
    for (_, path) in p.placement() {
        for h in &path.hops {
            *count.entry((h.switch, h.port)).or_default() += 1;
        }
    }
    count.values().copied().max().unwrap_or(0)
}

pub fn planner(t: &Topology, r: &Routing, config: TeConfig) -> Planner {
    Planner::new(t, r, config).unwrap()
}

/// The ports a path pins, by switch.
pub fn pins(path: &Path) -> Vec<(usize, u16)> {
    path.steer_hops().map(|h| (h.switch, h.port)).collect()
}

pub fn moved(plan: &Plan, reason: metaroce_te::Reason) -> usize {
    plan.moves.iter().filter(|m| m.reason == reason).count()
}
