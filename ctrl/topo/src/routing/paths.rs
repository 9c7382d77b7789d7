//! Enumerating the equal-cost paths between two hosts, for people to read.

use serde::Serialize;

use super::Routing;
use crate::model::{HostId, LinkId, SwitchId, Topology};

/// One switch on a path: where the packet enters and leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PathHop {
    pub switch: SwitchId,
    pub in_port: u16,
    pub out_port: u16,
    /// The switch-to-switch link taken on leaving, if any.
    pub link: Option<LinkId>,
}

/// A path between two hosts and its slowest link, NICs included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Path {
    pub hops: Vec<PathHop>,
    pub bottleneck_bps: u64,
}

impl Routing {
    /// Every path the routes allow from host `src` to host `dst`, at most
    /// `limit` of them; the flag says whether more exist.
    pub fn host_paths(&self, topo: &Topology, src: HostId, dst: HostId, limit: usize) -> (Vec<Path>, bool) {
        let (hs, hd) = (&topo.hosts[src], &topo.hosts[dst]);
        let nic = hs.nic_rate.bps().min(hd.nic_rate.bps());
        let mut out = Vec::new();
        let mut more = false;
        if !self.switch_up[hs.leaf] || !self.switch_up[hd.leaf] {
            return (out, false);
        }
        if hs.leaf == hd.leaf {
            out.push(Path {
                hops: vec![PathHop { switch: hs.leaf, in_port: hs.port, out_port: hd.port, link: None }],
                bottleneck_bps: nic,
            });
            return (out, false);
        }
        let Some(d) = self.dest_of[hd.leaf] else { return (out, false) };
        let mut stack: Vec<PathHop> = Vec::new();
        self.walk(topo, d, (hs.leaf, hs.port), hd.port, nic, &mut stack, &mut out, limit, &mut more);
        (out, more)
    }

    /// How many paths [`Routing::host_paths`] would list without a limit,
    /// counted without listing them (a large Clos has millions).
    pub fn count_host_paths(&self, topo: &Topology, src: HostId, dst: HostId) -> u128 {
        let (hs, hd) = (&topo.hosts[src], &topo.hosts[dst]);
        if !self.switch_up[hs.leaf] || !self.switch_up[hd.leaf] {
            return 0;
        }
        if hs.leaf == hd.leaf {
            return 1;
        }
        let Some(d) = self.dest_of[hd.leaf] else { return 0 };
        let mut memo: Vec<Option<u128>> = vec![None; topo.switches.len()];
        self.count_from(topo, d, hs.leaf, &mut memo)
    }

    /// Paths from `s` toward destination `d` over the next-hop graph (a DAG:
    /// every next hop is one step closer).
    fn count_from(&self, topo: &Topology, d: usize, s: SwitchId, memo: &mut Vec<Option<u128>>) -> u128 {
        if s == self.dests[d] {
            return 1;
        }
        if let Some(n) = memo[s] {
            return n;
        }
        let mut n = 0u128;
        for a in topo.adjacency(s) {
            if self.is_next_hop(d, s, a) {
                n = n.saturating_add(self.count_from(topo, d, a.peer, memo));
            }
        }
        memo[s] = Some(n);
        n
    }

    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        topo: &Topology,
        d: usize,
        (s, in_port): (SwitchId, u16),
        last_port: u16,
        bottleneck: u64,
        stack: &mut Vec<PathHop>,
        out: &mut Vec<Path>,
        limit: usize,
        more: &mut bool,
    ) {
        if s == self.dests[d] {
            let mut hops = stack.clone();
            hops.push(PathHop { switch: s, in_port, out_port: last_port, link: None });
            if out.len() >= limit {
                *more = true;
            } else {
                out.push(Path { hops, bottleneck_bps: bottleneck });
            }
            return;
        }
        for a in topo.adjacency(s) {
            if *more {
                return;
            }
            if !self.is_next_hop(d, s, a) {
                continue;
            }
            let bw = topo.links[a.link].bandwidth.bps();
            stack.push(PathHop { switch: s, in_port, out_port: a.port, link: Some(a.link) });
            self.walk(topo, d, (a.peer, a.peer_port), last_port, bottleneck.min(bw), stack, out, limit, more);
            stack.pop();
        }
    }
}
