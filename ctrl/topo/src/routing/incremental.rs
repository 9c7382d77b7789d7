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
use std::collections::{BinaryHeap, HashMap};

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
        let mut work = Work::new(self.n);
        let mut changes = Vec::new();
        for (d, down, up) in affected {
            self.repair(topo, d, (hi, down), (lo, up), &mut work, &mut changes);
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
        w: &mut Work,
        changes: &mut Vec<RouteChange>,
    ) {
        let base = d * self.n;
        w.moved.clear();

        // 1. Down-distances rise, and only ever upward from `hi`.
        w.queued.reset();
        if hi_used {
            w.up.push(Reverse((self.tier[hi], hi)));
            w.queued.insert(hi);
        }
        while let Some(Reverse((_, s))) = w.up.pop() {
            let nd = self.best_down(topo, d, s);
            if nd == self.down[base + s] {
                continue;
            }
            self.down[base + s] = nd;
            w.moved.push(s);
            for a in topo.adjacency(s) {
                if self.link_up[a.link] && self.tier[a.peer] > self.tier[s] && w.queued.insert(a.peer) {
                    w.up.push(Reverse((self.tier[a.peer], a.peer)));
                }
            }
        }

        // 2. Valley-free distances, downward from every switch that moved.
        w.queued.reset();
        for i in 0..w.moved.len() {
            let s = w.moved[i];
            if w.queued.insert(s) {
                w.down.push((self.tier[s], s));
            }
        }
        if lo_used && w.queued.insert(lo) {
            w.down.push((self.tier[lo], lo));
        }
        while let Some((_, s)) = w.down.pop() {
            let nv = self.best_vf(topo, d, s);
            if nv == self.vf[base + s] {
                continue;
            }
            self.vf[base + s] = nv;
            w.moved.push(s);
            for a in topo.adjacency(s) {
                if self.link_up[a.link] && self.tier[a.peer] < self.tier[s] && w.queued.insert(a.peer) {
                    w.down.push((self.tier[a.peer], a.peer));
                }
            }
        }

        // 3. Capacities and groups. A switch that used the link, or sits next
        //    to one whose distance moved, may have a new next-hop set, so it
        //    is regrouped whatever happens; elsewhere only capacity changes
        //    travel, and only as far as they change someone's weights.
        w.structural.reset();
        w.queued.reset();
        let seeds = [(hi, hi_used), (lo, lo_used)];
        for s in seeds.iter().filter(|x| x.1).map(|x| x.0).chain(w.moved.iter().copied()) {
            w.structural.insert(s);
        }
        for i in 0..w.moved.len() {
            for a in topo.adjacency(w.moved[i]) {
                if self.link_up[a.link] {
                    w.structural.insert(a.peer);
                }
            }
        }
        for &s in &w.structural.members {
            if w.queued.insert(s) {
                w.cap.push(Reverse((self.vf[base + s], s)));
            }
        }
        w.old_cap.clear();
        while let Some(Reverse((_, s))) = w.cap.pop() {
            if s == self.dests[d] {
                continue;
            }
            let cap = if self.vf[base + s] == INF {
                w.scratch.links.clear();
                0
            } else {
                self.capacity(topo, d, s, &mut w.scratch)
            };
            let regroup = w.structural.contains(s) || self.terms_changed(d, &w.scratch.links, &w.old_cap);
            let old = self.cap[base + s];
            if cap != old {
                w.old_cap.entry(s).or_insert(old);
                self.cap[base + s] = cap;
                for (i, a) in topo.adjacency(s).iter().enumerate() {
                    // A user's weight for `s` is min(bandwidth to s, cap of s):
                    // above that bandwidth a change is invisible to it.
                    let bw = self.peer_bw[s][i];
                    if (old.min(bw) != cap.min(bw))
                        && self.uses(d, a.peer, s, a.link)
                        && w.queued.insert(a.peer)
                    {
                        w.cap.push(Reverse((self.vf[base + a.peer], a.peer)));
                    }
                }
            }
            if regroup {
                changes.extend(self.regroup(topo, d, s, &mut w.scratch));
            }
        }
    }

    /// True when a next hop's capacity changed enough to move a weight.
    fn terms_changed(
        &self,
        d: usize,
        links: &[(SwitchId, u16, u64)],
        old_cap: &HashMap<SwitchId, u64>,
    ) -> bool {
        links.chunk_by(|x, y| x.0 == y.0).any(|run| {
            old_cap.get(&run[0].0).is_some_and(|&old| {
                let bw = run.iter().map(|l| l.2).fold(0u64, u64::saturating_add);
                bw.min(old) != bw.min(self.cap[d * self.n + run[0].0])
            })
        })
    }
}

/// A set of switches that empties in O(1), reused across destinations.
#[derive(Debug)]
struct Marks {
    stamp: Vec<u32>,
    gen: u32,
    members: Vec<SwitchId>,
}

impl Marks {
    fn new(n: usize) -> Self {
        Marks { stamp: vec![0; n], gen: 1, members: Vec::new() }
    }
    fn reset(&mut self) {
        self.gen = self.gen.wrapping_add(1);
        if self.gen == 0 {
            self.stamp.fill(0);
            self.gen = 1;
        }
        self.members.clear();
    }
    /// Adds `s`; false if it was already there.
    fn insert(&mut self, s: SwitchId) -> bool {
        if self.stamp[s] == self.gen {
            return false;
        }
        self.stamp[s] = self.gen;
        self.members.push(s);
        true
    }
    fn contains(&self, s: SwitchId) -> bool {
        self.stamp[s] == self.gen
    }
}

/// Buffers for [`Routing::repair`], allocated once per failure.
#[derive(Debug)]
pub(crate) struct Work {
    queued: Marks,
    structural: Marks,
    moved: Vec<SwitchId>,
    up: BinaryHeap<Reverse<(u8, SwitchId)>>,
    down: BinaryHeap<(u8, SwitchId)>,
    cap: BinaryHeap<Reverse<(u8, SwitchId)>>,
    old_cap: HashMap<SwitchId, u64>,
    scratch: Scratch,
}

impl Work {
    fn new(n: usize) -> Self {
        Work {
            queued: Marks::new(n),
            structural: Marks::new(n),
            moved: Vec::new(),
            up: BinaryHeap::new(),
            down: BinaryHeap::new(),
            cap: BinaryHeap::new(),
            old_cap: HashMap::new(),
            scratch: Scratch::default(),
        }
    }
}
