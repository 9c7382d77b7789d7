//! The "ideal" reference: an analytic lower bound on a job's completion
//! time, the time the busiest cut of the fabric needs to carry the job's
//! bytes if traffic were spread perfectly over every path.
//!
//! Cuts considered: each host NIC (both directions), each leaf's uplinks
//! (both directions) and, in three-tier fabrics, each pod's links to the
//! super-spines. Each cut needs its bytes over its capacity, after the
//! first byte could reach it: the least path latency of the pairs that
//! cross it (not of any pair of the job: an All-to-All's leaf uplinks wait
//! for the inter-leaf pairs' latency, not the intra-leaf pairs'). Each
//! pair needs at least its own bytes at its slowest link plus its own
//! latency. The bound is the largest of these. (The largest over pairs of
//! their bottleneck cut plus their own latency would not be a bound: an
//! incast's receiver NIC may carry a near sender's bytes while a far
//! sender's first byte is still on its way.) A ring AllReduce's cuts carry
//! every step's bytes; and since every step waits for the one before into
//! the same rank, its bound is also the longest chain of 2(n-1) pairs back
//! around the ring, each pair alone. A Poisson job also
//! ends no earlier than its last flow could, alone.

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
    /// The least path latency of the pairs that cross it.
    latency_ps: u64,
    name: String,
}

/// A cut: tier (0 NIC, 1 leaf uplinks, 2 pod uplinks), which one, outbound.
type CutKey = (u8, usize, bool);

/// Picoseconds `bytes` take at `bps`.
fn ser_ps(bytes: u64, bps: u64) -> u64 {
    (u128::from(bytes) * 8_000_000_000_000 / u128::from(bps.max(1))) as u64
}

/// Lower bound of one job alone on the fabric.
pub fn job_bound(topo: &Topology, routing: &Routing, net: &NetConfig, job: &Job) -> Bound {
    let (demand, phases) = demand(job);
    let wire = |bytes: u64| bytes + bytes.div_ceil(u64::from(net.mtu)) * u64::from(ROCE_HEADER_BYTES);
    let pods = pods(topo);
    let mut cuts: HashMap<CutKey, Cut> = HashMap::new();
    let mut worst = Bound { ps: 0, bottleneck: String::new() };
    let ring = matches!(job.pattern, Pattern::RingAllReduce);
    let mut alone_ps = Vec::with_capacity(demand.len());
    for &(s, d, bytes) in &demand {
        let latency = path_latency(topo, routing, net, s, d);
        for (key, cap) in pair_cuts(topo, &pods, s, d) {
            let c = cuts.entry(key).or_insert_with(|| Cut {
                bytes: 0,
                capacity_bps: cap,
                latency_ps: latency,
                name: cut_name(topo, key, s, d),
            });
            c.bytes += wire(bytes);
            c.latency_ps = c.latency_ps.min(latency);
        }
        // The pair alone: its own bytes at its slowest link, its own latency.
        let alone = flow_ideal_ps(topo, routing, net, s, d, bytes);
        alone_ps.push(alone);
        if !ring && alone > worst.ps {
            let (hs, hd) = (&topo.hosts[s], &topo.hosts[d]);
            worst = Bound { ps: alone, bottleneck: format!("{} to {} alone", hs.name, hd.name) };
        }
    }
    // A ring's step waits for the one before it, into the same rank from
    // its predecessor: the last step's data ends a chain of 2(n-1) pairs
    // going back around the ring, each its bytes at its slowest link plus
    // its own latency. (Not the worst pair's time every step: the chain
    // passes near and far pairs alike.)
    if ring && !alone_ps.is_empty() {
        let (n, p) = (alone_ps.len(), phases as usize);
        for e in 0..n {
            let chain: u64 = (0..p).map(|k| alone_ps[(e + n * p - k) % n]).sum();
            if chain > worst.ps {
                let into = &topo.hosts[demand[e].1].name;
                worst = Bound { ps: chain, bottleneck: format!("the ring's {p} steps into {into}") };
            }
        }
    }
    // Each cut: all its bytes (of every phase) at its capacity, after the
    // first byte of the pairs that cross it could reach it.
    let busiest = cuts
        .values()
        .filter(|c| c.capacity_bps > 0)
        .map(|c| (ser_ps(c.bytes.saturating_mul(phases), c.capacity_bps) + c.latency_ps, c))
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.name.cmp(&a.1.name)));
    if let Some((t, c)) = busiest.filter(|&(t, _)| t >= worst.ps) {
        worst = Bound { ps: t, bottleneck: c.name.clone() };
    }
    let mut bound = worst;
    if let Pattern::Poisson { flows, .. } = &job.pattern {
        let r = &job.ranks;
        let last = flows.iter().map(|f| {
            let (s, d) = (r[f.src as usize], r[f.dst as usize]);
            f.at_ps.saturating_sub(job.start_ps) + flow_ideal_ps(topo, routing, net, s, d, f.bytes)
        });
        if let Some(t) = last.max().filter(|&t| t > bound.ps) {
            bound = Bound { ps: t, bottleneck: "the last flow's arrival".into() };
        }
    }
    bound
}

/// The cuts a pair's bytes cross, with their capacities.
fn pair_cuts(
    topo: &Topology,
    pods: &HashMap<SwitchId, (usize, u64)>,
    s: HostId,
    d: HostId,
) -> Vec<(CutKey, u64)> {
    let (hs, hd) = (&topo.hosts[s], &topo.hosts[d]);
    let mut out = vec![((0, s, true), hs.nic_rate.bps()), ((0, d, false), hd.nic_rate.bps())];
    if hs.leaf != hd.leaf {
        out.push(((1, hs.leaf, true), uplinks(topo, hs.leaf, Role::Spine)));
        out.push(((1, hd.leaf, false), uplinks(topo, hd.leaf, Role::Spine)));
    }
    if let (Some(&ps), Some(&pd)) = (pods.get(&hs.leaf), pods.get(&hd.leaf)) {
        if ps.0 != pd.0 {
            out.push(((2, ps.0, true), ps.1));
            out.push(((2, pd.0, false), pd.1));
        }
    }
    out
}

/// A cut's name for people; `s` and `d` are a pair that crosses it.
fn cut_name(topo: &Topology, key: CutKey, s: HostId, d: HostId) -> String {
    let (hs, hd) = (&topo.hosts[s], &topo.hosts[d]);
    match key {
        (0, _, true) => format!("{} NIC out", hs.name),
        (0, _, false) => format!("{} NIC in", hd.name),
        (1, _, true) => format!("{} uplinks", topo.switches[hs.leaf].name),
        (1, _, false) => format!("{} downlinks", topo.switches[hd.leaf].name),
        (_, _, true) => format!("pod of {} to super-spines", topo.switches[hs.leaf].name),
        _ => format!("super-spines to pod of {}", topo.switches[hd.leaf].name),
    }
}

/// The least completion time of one flow of `bytes` from `s` to `d` on an
/// idle fabric: its first packet through every hop (store and forward),
/// the rest at the slowest rate on its path. FCT slowdowns divide by it.
pub fn flow_ideal_ps(
    topo: &Topology,
    routing: &Routing,
    net: &NetConfig,
    s: HostId,
    d: HostId,
    bytes: u64,
) -> u64 {
    let (hs, hd) = (&topo.hosts[s], &topo.hosts[d]);
    let hdr = u64::from(ROCE_HEADER_BYTES);
    let mtu = u64::from(net.mtu);
    let wire = bytes + bytes.div_ceil(mtu).max(1) * hdr;
    let first = bytes.clamp(1, mtu) + hdr;
    let links = u64::from(routing.distance(hs.leaf, hd.leaf).unwrap_or(0));
    let fast = topo.defaults.link_bandwidth.bps().max(hs.nic_rate.bps()).max(1);
    let mut slow = hs.nic_rate.bps().min(hd.nic_rate.bps());
    if links > 0 {
        slow = slow.min(topo.defaults.link_bandwidth.bps());
    }
    let delay = topo.defaults.link_delay.ns() * 1_000;
    (hs.delay.ns() + hd.delay.ns()) * 1_000
        + links * delay
        + (links + 1) * ser_ps(first, fast)
        + ser_ps(wire - first, slow)
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
        Pattern::Poisson { flows, .. } => {
            let mut pairs: std::collections::BTreeMap<(HostId, HostId), u64> = Default::default();
            for f in flows {
                *pairs.entry((r[f.src as usize], r[f.dst as usize])).or_default() += f.bytes;
            }
            (pairs.into_iter().map(|((s, d), b)| (s, d, b)).collect(), 1)
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
