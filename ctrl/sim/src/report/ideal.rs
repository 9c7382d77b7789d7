//! The "ideal" reference: an analytic lower bound on a job's completion
//! time, the time the busiest cut of the fabric needs to carry the job's
//! bytes if traffic were spread perfectly over every path.
//!
//! Cuts considered: each host NIC (both directions), each leaf's uplinks
//! (both directions) and, in three-tier fabrics, each pod's links to the
//! super-spines. A ring AllReduce pays its busiest cut once per step, since
//! every step waits for the one before. To the bandwidth term we add the
//! smallest path latency: the first byte must still cross the fabric.

use std::collections::HashMap;

use metaroce_topo::{HostId, Role, Routing, SwitchId, Topology};
use serde::Serialize;

use crate::scenario::config::{Job, NetConfig, Pattern, ROCE_HEADER_BYTES};

/// A lower bound and the cut that sets it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bound {
    pub ps: u64,
    pub bottleneck: String,
}

#[derive(Debug, Default)]
struct Cut {
    bytes: u64,
    capacity_bps: u64,
    name: String,
}

/// Lower bound of one job alone on the fabric.
pub fn job_bound(topo: &Topology, routing: &Routing, net: &NetConfig, job: &Job) -> Bound {
    let (demand, phases) = demand(job);
    let wire = |bytes: u64| bytes + bytes.div_ceil(u64::from(net.mtu)) * u64::from(ROCE_HEADER_BYTES);
    let pods = pods(topo);
    let mut cuts: HashMap<(u8, usize, bool), Cut> = HashMap::new();
    let mut add = |key: (u8, usize, bool), bytes: u64, cap: u64, name: &dyn Fn() -> String| {
        let c = cuts.entry(key).or_insert_with(|| Cut { bytes: 0, capacity_bps: cap, name: name() });
        c.bytes += bytes;
    };
    for &(s, d, bytes) in &demand {
        let b = wire(bytes);
        let (hs, hd) = (&topo.hosts[s], &topo.hosts[d]);
        add((0, s, true), b, hs.nic_rate.bps(), &|| format!("{} NIC out", hs.name));
        add((0, d, false), b, hd.nic_rate.bps(), &|| format!("{} NIC in", hd.name));
        if hs.leaf != hd.leaf {
            let (ls, ld) = (hs.leaf, hd.leaf);
            add((1, ls, true), b, uplinks(topo, ls, Role::Spine), &|| {
                format!("{} uplinks", topo.switches[ls].name)
            });
            add((1, ld, false), b, uplinks(topo, ld, Role::Spine), &|| {
                format!("{} downlinks", topo.switches[ld].name)
            });
        }
        if let (Some(&ps), Some(&pd)) = (pods.get(&hs.leaf), pods.get(&hd.leaf)) {
            if ps.0 != pd.0 {
                add((2, ps.0, true), b, ps.1, &|| {
                    format!("pod of {} to super-spines", topo.switches[hs.leaf].name)
                });
                add((2, pd.0, false), b, pd.1, &|| {
                    format!("super-spines to pod of {}", topo.switches[hd.leaf].name)
                });
            }
        }
    }
    let worst = cuts
        .values()
        .filter(|c| c.capacity_bps > 0)
        .map(|c| ((u128::from(c.bytes) * 8_000_000_000_000 / u128::from(c.capacity_bps)) as u64, c))
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.name.cmp(&a.1.name)));
    let latency = demand.iter().map(|&(s, d, _)| path_latency(topo, routing, net, s, d)).min().unwrap_or(0);
    match worst {
        Some((t, c)) => Bound { ps: phases * (t + latency), bottleneck: c.name.clone() },
        None => Bound { ps: 0, bottleneck: String::new() },
    }
}

/// Bytes per (src, dst) of one phase, and how many phases run back to back.
fn demand(job: &Job) -> (Vec<(HostId, HostId, u64)>, u64) {
    let r = &job.ranks;
    let n = r.len();
    match &job.pattern {
        Pattern::AllToAll => {
            let pairs = (0..n).flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)));
            (pairs.map(|(i, j)| (r[i], r[j], job.size)).collect(), 1)
        }
        Pattern::Incast { target } => (r.iter().map(|&h| (h, *target, job.size)).collect(), 1),
        Pattern::Permutation { perm } => {
            (perm.iter().enumerate().map(|(i, &p)| (r[i], r[p], job.size)).collect(), 1)
        }
        Pattern::RingAllReduce => {
            let chunk = job.size.div_ceil(n as u64);
            ((0..n).map(|i| (r[i], r[(i + 1) % n], chunk)).collect(), 2 * (n as u64 - 1))
        }
    }
}

/// Total bandwidth from `s` to neighbors of role `up`.
fn uplinks(topo: &Topology, s: SwitchId, up: Role) -> u64 {
    topo.adjacency(s)
        .iter()
        .filter(|a| topo.switches[a.peer].role == up)
        .map(|a| topo.links[a.link].bandwidth.bps())
        .sum()
}

/// In three-tier fabrics: each leaf's pod (leaves and spines joined without
/// super-spines) and the pod's bandwidth to the super-spines.
fn pods(topo: &Topology) -> HashMap<SwitchId, (usize, u64)> {
    let mut out = HashMap::new();
    if topo.count_role(Role::SuperSpine) == 0 {
        return out;
    }
    let n = topo.switches.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    for l in &topo.links {
        let (a, b) = (l.a.switch, l.b.switch);
        if topo.switches[a].role != Role::SuperSpine && topo.switches[b].role != Role::SuperSpine {
            let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
            parent[ra] = rb;
        }
    }
    let mut cap: HashMap<usize, u64> = HashMap::new();
    for s in (0..n).filter(|&s| topo.switches[s].role == Role::Spine) {
        let root = find(&mut parent, s);
        *cap.entry(root).or_default() += uplinks(topo, s, Role::SuperSpine);
    }
    for s in (0..n).filter(|&s| topo.switches[s].role == Role::Leaf) {
        let root = find(&mut parent, s);
        out.insert(s, (root, cap.get(&root).copied().unwrap_or(0)));
    }
    out
}

/// Propagation over the path plus store-and-forward of one full packet on
/// every hop: the least time any message needs to arrive.
fn path_latency(topo: &Topology, routing: &Routing, net: &NetConfig, s: HostId, d: HostId) -> u64 {
    let (hs, hd) = (&topo.hosts[s], &topo.hosts[d]);
    let links = u64::from(routing.distance(hs.leaf, hd.leaf).unwrap_or(0));
    let pkt = u64::from(net.mtu + ROCE_HEADER_BYTES) * 8_000_000_000_000;
    let bw = topo.defaults.link_bandwidth.bps().max(hs.nic_rate.bps()).max(1);
    let delay = topo.defaults.link_delay.ns() * 1_000;
    (hs.delay.ns() + hd.delay.ns()) * 1_000 + links * delay + (links + 1) * pkt.div_ceil(bw)
}
