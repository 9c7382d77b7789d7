//! Updating routes after a failure without recomputing the fabric.
//!
//! A failed link matters only to the destinations whose routing uses it.
//! For each of those, the repair walks outward from the link:
//!
//! 1. down-distances, upward in tier order (a switch's down-distance
//!    depends only on switches below it);
//! 2. valley-free distances, downward in tier order;
//! 3. capacities, outward in distance order, stopping wherever a
//!    neighbor's bottleneck absorbs the change;
//!
//! and regroups only the switches whose next hops or weights changed. The
//! result is identical to [`Routing::compute`] on the failed fabric (a
//! property test checks this), at a fraction of the cost.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

use serde::Serialize;

use super::{GroupId, Routing, Scratch, INF};
use crate::model::{LinkId, SwitchId, Topology};

/// One route whose group changed: switch `switch`'s route toward the
/// prefixes of `leaf` moved from `old` to `new` (`None`: no route).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RouteChange {
    pub switch: SwitchId,
    pub leaf: SwitchId,
    pub old: Option<GroupId>,
    pub new: Option<GroupId>,
}

/// A link or switch id that the topology does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoutingError {
    #[error("link {0} does not exist")]
    UnknownLink(LinkId),
    #[error("switch {0} does not exist")]
    UnknownSwitch(SwitchId),
}

impl Routing {
    /// Takes `link` out of service and repairs every route that used it.
    /// A link already down changes nothing.
    pub fn fail_link(&mut self, topo: &Topology, link: LinkId) -> Result<Vec<RouteChange>, RoutingError> {
        let l = topo.links.get(link).ok_or(RoutingError::UnknownLink(link))?;
        if !self.link_up[link] {
            return Ok(Vec::new());
        }
        let (hi, lo) = if self.tier[l.a.switch] > self.tier[l.b.switch] {
            (l.a.switch, l.b.switch)
        } else {
            (l.b.switch, l.a.switch)
        };
        // Which destinations route over this link, judged before it goes.
        let affected: Vec<(usize, bool, bool)> = (0..self.dests.len())
            .filter_map(|d| {
                let down = self.uses(d, hi, lo, link);
                let up = self.uses(d, lo, hi, link);
                (down || up).then_some((d, down, up))
            })
            .collect();
        self.link_up[link] = false;
        let mut scratch = Scratch::default();
        let mut changes = Vec::new();
        for (d, down, up) in affected {
            self.repair(topo, d, (hi, down), (lo, up), &mut scratch, &mut changes);
        }
        Ok(changes)
    }

    /// Takes a switch and all its links out of service.
    pub fn fail_switch(&mut self, topo: &Topology, s: SwitchId) -> Result<Vec<RouteChange>, RoutingError> {
        if s >= self.n {
            return Err(RoutingError::UnknownSwitch(s));
        }
        let mut changes = Vec::new();
        for a in topo.adjacency(s) {
            changes.extend(self.fail_link(topo, a.link)?);
        }
        self.switch_up[s] = false;
        Ok(changes)
    }

    /// Puts a link back in service. Distances can only shrink, which the
    /// repair above does not handle, so this recomputes every destination.
    pub fn restore_link(&mut self, topo: &Topology, link: LinkId) -> Result<Vec<RouteChange>, RoutingError> {
        if link >= self.link_up.len() {
            return Err(RoutingError::UnknownLink(link));
        }
        if self.link_up[link] {
            return Ok(Vec::new());
        }
        self.link_up[link] = true;
        Ok(self.resolve_all(topo))
    }

    /// Puts a switch back in service (its links stay as they were marked).
    pub fn restore_switch(&mut self, topo: &Topology, s: SwitchId) -> Result<Vec<RouteChange>, RoutingError> {
        if s >= self.n {
            return Err(RoutingError::UnknownSwitch(s));
        }
        if self.switch_up[s] {
            return Ok(Vec::new());
        }
        self.switch_up[s] = true;
        Ok(self.resolve_all(topo))
    }

    fn resolve_all(&mut self, topo: &Topology) -> Vec<RouteChange> {
        let mut scratch = Scratch::default();
        let mut changes = Vec::new();
        for d in 0..self.dests.len() {
            changes.extend(self.solve_dest(topo, d, &mut scratch));
        }
        changes
    }

    /// Repairs destination `d` after the link between `hi` (upper) and `lo`
    /// went down; the flags say which of them forwarded over it.
    fn repair(
        &mut self,
        topo: &Topology,
        d: usize,
        (hi, hi_used): (SwitchId, bool),
        (lo, lo_used): (SwitchId, bool),
        scratch: &mut Scratch,
        changes: &mut Vec<RouteChange>,
    ) {
        let base = d * self.n;
        let mut moved: Vec<SwitchId> = Vec::new();

        // 1. Down-distances rise, and only ever upward from `hi`.
        let mut heap = BinaryHeap::new();
        let mut queued = HashSet::new();
        if hi_used {
            heap.push(Reverse((self.tier[hi], hi)));
            queued.insert(hi);
        }
        while let Some(Reverse((_, s))) = heap.pop() {
            let nd = self.best_down(topo, d, s);
            if nd == self.down[base + s] {
                continue;
            }
            self.down[base + s] = nd;
            moved.push(s);
            for a in topo.adjacency(s) {
                if self.link_up[a.link] && self.tier[a.peer] > self.tier[s] && queued.insert(a.peer) {
                    heap.push(Reverse((self.tier[a.peer], a.peer)));
                }
            }
        }

        // 2. Valley-free distances, downward from every switch that moved.
        let mut heap = BinaryHeap::new();
        let mut queued = HashSet::new();
        for &s in moved.iter().chain(lo_used.then_some(&lo)) {
            if queued.insert(s) {
                heap.push((self.tier[s], s));
            }
        }
        while let Some((_, s)) = heap.pop() {
            let nv = self.best_vf(topo, d, s);
            if nv == self.vf[base + s] {
                continue;
            }
            self.vf[base + s] = nv;
            moved.push(s);
            for a in topo.adjacency(s) {
                if self.link_up[a.link] && self.tier[a.peer] < self.tier[s] && queued.insert(a.peer) {
                    heap.push((self.tier[a.peer], a.peer));
                }
            }
        }

        // 3. Capacities and groups. Switches next to a moved one may have a
        //    different next-hop set, so they are regrouped whatever happens.
        let mut structural: HashSet<SwitchId> = [hi, lo].into_iter().collect();
        for &s in &moved {
            structural.insert(s);
            structural.extend(topo.adjacency(s).iter().filter(|a| self.link_up[a.link]).map(|a| a.peer));
        }
        let mut heap = BinaryHeap::new();
        for &s in &structural {
            heap.push(Reverse((self.vf[base + s], s)));
        }
        let mut queued = structural.clone();
        let mut old_cap: HashMap<SwitchId, u64> = HashMap::new();
        while let Some(Reverse((_, s))) = heap.pop() {
            if s == self.dests[d] {
                continue;
            }
            let cap = if self.vf[base + s] == INF {
                scratch.links.clear();
                0
            } else {
                self.capacity(topo, d, s, scratch)
            };
            let mut regroup = structural.contains(&s);
            if !regroup {
                // `capacity` left the next-hop links in scratch, by peer.
                regroup = scratch.links.chunk_by(|x, y| x.0 == y.0).any(|run| {
                    old_cap.get(&run[0].0).is_some_and(|&old| {
                        let bw = run.iter().map(|l| l.2).fold(0u64, u64::saturating_add);
                        bw.min(old) != bw.min(self.cap[base + run[0].0])
                    })
                });
            }
            if cap != self.cap[base + s] {
                old_cap.entry(s).or_insert(self.cap[base + s]);
                self.cap[base + s] = cap;
                for a in topo.adjacency(s) {
                    if self.uses(d, a.peer, s, a.link) && queued.insert(a.peer) {
                        heap.push(Reverse((self.vf[base + a.peer], a.peer)));
                    }
                }
            }
            if regroup {
                changes.extend(self.regroup(topo, d, s, scratch));
            }
        }
    }
}
