//! Valley-free shortest paths and capacity-weighted next-hop groups.
//!
//! For each destination leaf, every switch gets the set of next hops that
//! lie on its shortest *valley-free* paths (up some tiers, then down; never
//! down and up again, which could close a cyclic buffer dependency and let
//! PFC deadlock the fabric):
//!
//! - a switch that can reach the leaf by going only down uses its lowest
//!   such down-links;
//! - otherwise it goes up, to the neighbors closest (valley-free) to it.
//!
//! Up-links strictly raise the tier and down-links strictly lower the
//! down-distance, so no route can loop. Each next hop is weighted by the
//! capacity it leads to: `min(link bandwidth, capacity of the neighbor)`,
//! summed over the neighbor's own next hops, so an asymmetric fabric is
//! balanced by capacity rather than by link count (WCMP).
//!
//! Everything is a pure function of the topology and the set of failed
//! links and switches; see [`Routing::fail_link`] for the incremental path.

mod groups;
mod incremental;
mod paths;

use crate::model::{Adjacency, Ipv4Net, SwitchId, Topology};

pub use groups::{weights, Group, GroupId, GroupTable, Member, NextHop};
pub use incremental::RouteChange;
pub use paths::{Path, PathHop};

/// Distance meaning "cannot reach".
pub(crate) const INF: u8 = u8::MAX;
/// Marks "no group" in the per-destination group table.
pub(crate) const NO_GROUP: GroupId = GroupId::MAX;

/// Tunables of the group computation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutingOptions {
    /// Largest member weight. Switches expand weights into selector slots,
    /// so this bounds group size in hardware.
    pub max_weight: u32,
}

impl Default for RoutingOptions {
    fn default() -> Self {
        RoutingOptions { max_weight: 64 }
    }
}

/// One route of a switch: a destination prefix and its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub prefix: Ipv4Net,
    pub group: GroupId,
    /// The leaf that owns the prefix.
    pub leaf: SwitchId,
}

/// Routes and groups of every switch, with the per-destination distances
/// and capacities that the incremental update needs.
#[derive(Debug, Clone)]
pub struct Routing {
    pub(crate) opts: RoutingOptions,
    /// Switch count.
    pub(crate) n: usize,
    pub(crate) tier: Vec<u8>,
    pub(crate) link_up: Vec<bool>,
    pub(crate) switch_up: Vec<bool>,
    /// Destination leaves (leaves with hosts), and each switch's index among them.
    pub(crate) dests: Vec<SwitchId>,
    pub(crate) dest_of: Vec<Option<usize>>,
    /// Switches sorted by tier, lowest first.
    pub(crate) by_tier: Vec<SwitchId>,
    /// Indexed `[dest * n + switch]`: hops going only down, `INF` if none.
    pub(crate) down: Vec<u8>,
    /// Valley-free distance.
    pub(crate) vf: Vec<u8>,
    /// Capacity toward the destination, bits per second (`u64::MAX` at the leaf itself).
    pub(crate) cap: Vec<u64>,
    pub(crate) group_of: Vec<GroupId>,
    /// Groups delivering to each leaf's own hosts, per host index.
    pub(crate) local: Vec<Vec<(Ipv4Net, GroupId)>>,
    pub(crate) tables: Vec<GroupTable>,
    /// Prefixes of each destination leaf.
    pub(crate) prefixes: Vec<Vec<Ipv4Net>>,
    /// Aligned with each switch's adjacency: the total bandwidth of all
    /// links (parallel ones included) between the switch and that peer.
    pub(crate) peer_bw: Vec<Vec<u64>>,
}

impl Routing {
    /// Computes all routes and groups of a healthy fabric.
    pub fn compute(topo: &Topology) -> Self {
        Self::with_options(topo, RoutingOptions::default())
    }

    pub fn with_options(topo: &Topology, opts: RoutingOptions) -> Self {
        Self::with_failures(topo, opts, &[], &[])
    }

    /// Computes routes from scratch with some links and switches already
    /// out of service (a controller starting on a degraded fabric). Unknown
    /// ids are ignored.
    ///
    /// Large fabrics are computed in two halves of the destinations on two
    /// threads, merged afterwards. The split does not depend on the machine,
    /// so group ids are the same everywhere.
    pub fn with_failures(
        topo: &Topology,
        opts: RoutingOptions,
        links_down: &[crate::model::LinkId],
        switches_down: &[SwitchId],
    ) -> Self {
        Self::compute_in(topo, opts, links_down, switches_down, 64)
    }

    /// `with_failures`, split over two threads from `parallel_from` destinations.
    fn compute_in(
        topo: &Topology,
        opts: RoutingOptions,
        links_down: &[crate::model::LinkId],
        switches_down: &[SwitchId],
        parallel_from: usize,
    ) -> Self {
        let n = topo.switches.len();
        let dests: Vec<SwitchId> = (0..n).filter(|&s| !topo.hosts_of(s).is_empty()).collect();
        let peer_bw = peer_bandwidth(topo);
        let build = |dests: &[SwitchId], local: bool| {
            let mut r = Self::skeleton(topo, opts, dests.to_vec(), peer_bw.clone());
            r.mark_down(links_down, switches_down);
            if local {
                r.install_local(topo);
            }
            let mut scratch = Scratch::default();
            for d in 0..r.dests.len() {
                r.solve_dest(topo, d, &mut scratch);
            }
            r
        };
        if dests.len() < parallel_from {
            return build(&dests, true);
        }
        let (first, second) = dests.split_at(dests.len() / 2);
        let (mut a, b) = std::thread::scope(|scope| {
            let worker = scope.spawn(|| build(second, false));
            let a = build(first, true);
            (a, worker.join())
        });
        match b {
            Ok(b) => a.absorb(b),
            Err(panic) => std::panic::resume_unwind(panic),
        }
        a
    }

    /// Empty state for the given destination leaves.
    fn skeleton(topo: &Topology, opts: RoutingOptions, dests: Vec<SwitchId>, peer_bw: Vec<Vec<u64>>) -> Self {
        let n = topo.switches.len();
        let tier: Vec<u8> = topo.switches.iter().map(|s| s.role.tier()).collect();
        let mut by_tier: Vec<SwitchId> = (0..n).collect();
        by_tier.sort_by_key(|&s| (tier[s], s));
        let mut dest_of = vec![None; n];
        for (i, &d) in dests.iter().enumerate() {
            dest_of[d] = Some(i);
        }
        let prefixes = dests
            .iter()
            .map(|&leaf| match topo.switches[leaf].subnet {
                Some(net) => vec![net],
                None => topo.hosts_of(leaf).iter().map(|&h| Ipv4Net::host(topo.hosts[h].ip)).collect(),
            })
            .collect();
        let cells = dests.len() * n;
        Routing {
            opts,
            n,
            tier,
            link_up: vec![true; topo.links.len()],
            switch_up: vec![true; n],
            dests,
            dest_of,
            by_tier,
            down: vec![INF; cells],
            vf: vec![INF; cells],
            cap: vec![0; cells],
            group_of: vec![NO_GROUP; cells],
            local: vec![Vec::new(); n],
            tables: vec![GroupTable::default(); n],
            prefixes,
            peer_bw,
        }
    }

    fn mark_down(&mut self, links_down: &[crate::model::LinkId], switches_down: &[SwitchId]) {
        for &l in links_down {
            if let Some(up) = self.link_up.get_mut(l) {
                *up = false;
            }
        }
        for &sw in switches_down {
            if let Some(up) = self.switch_up.get_mut(sw) {
                *up = false;
            }
        }
    }

    /// Appends the destinations computed in `other`, re-numbering its
    /// groups into this routing's tables.
    fn absorb(&mut self, other: Routing) {
        let maps: Vec<_> =
            self.tables.iter_mut().zip(other.tables).map(|(mine, theirs)| mine.absorb(theirs)).collect();
        let n = self.n;
        self.group_of.extend(other.group_of.iter().enumerate().map(|(cell, &g)| {
            if g == NO_GROUP {
                NO_GROUP
            } else {
                maps[cell % n].get(&g).copied().unwrap_or(NO_GROUP)
            }
        }));
        self.down.extend(other.down);
        self.vf.extend(other.vf);
        self.cap.extend(other.cap);
        self.dests.extend(other.dests);
        self.prefixes.extend(other.prefixes);
        for (i, &d) in self.dests.iter().enumerate() {
            self.dest_of[d] = Some(i);
        }
    }

    fn install_local(&mut self, topo: &Topology) {
        for leaf in 0..self.n {
            for &h in topo.hosts_of(leaf) {
                let host = &topo.hosts[h];
                let member = Member { port: host.port, next: NextHop::Host(h), weight: 1 };
                let (id, _) = self.tables[leaf].acquire(&[(host.port, 1)], || vec![member]);
                self.local[leaf].push((Ipv4Net::host(host.ip), id));
            }
        }
    }

    /// Recomputes distances, capacities and groups toward destination `d`
    /// from scratch. Returns the routes that changed.
    pub(crate) fn solve_dest(
        &mut self,
        topo: &Topology,
        d: usize,
        scratch: &mut Scratch,
    ) -> Vec<RouteChange> {
        let base = d * self.n;
        let leaf = self.dests[d];
        for s in 0..self.n {
            self.down[base + s] = INF;
            self.vf[base + s] = INF;
            self.cap[base + s] = 0;
        }
        if self.switch_up[leaf] {
            self.down[base + leaf] = 0;
            self.cap[base + leaf] = u64::MAX;
        }
        for i in 0..self.n {
            let s = self.by_tier[i];
            if s != leaf {
                self.down[base + s] = self.best_down(topo, d, s);
            }
        }
        for i in (0..self.n).rev() {
            let s = self.by_tier[i];
            self.vf[base + s] = self.best_vf(topo, d, s);
        }
        // Capacities and groups in order of distance, so that every next
        // hop's capacity is final before it is used (a counting sort: the
        // distances are small).
        scratch.count.clear();
        scratch.count.resize(usize::from(INF) + 1, 0);
        for s in 0..self.n {
            scratch.count[usize::from(self.vf[base + s])] += 1;
        }
        let mut at = 0;
        for c in scratch.count.iter_mut() {
            let here = *c;
            *c = at;
            at += here;
        }
        scratch.order.clear();
        scratch.order.resize(self.n, 0);
        for s in 0..self.n {
            let slot = &mut scratch.count[usize::from(self.vf[base + s])];
            scratch.order[*slot] = s;
            *slot += 1;
        }
        let mut changed = Vec::new();
        for i in 0..self.n {
            let s = scratch.order[i];
            if s == leaf {
                continue;
            }
            if self.vf[base + s] == INF && self.group_of[base + s] == NO_GROUP {
                continue;
            }
            changed.extend(self.regroup(topo, d, s, scratch));
            self.cap[base + s] = scratch.total;
        }
        changed
    }

    pub(crate) fn alive(&self, a: &Adjacency) -> bool {
        self.link_up[a.link] && self.switch_up[a.peer]
    }

    /// Fewest down-only hops from `s` to destination `d`.
    pub(crate) fn best_down(&self, topo: &Topology, d: usize, s: SwitchId) -> u8 {
        let base = d * self.n;
        if !self.switch_up[s] {
            return INF;
        }
        if self.dests[d] == s {
            return 0;
        }
        topo.adjacency(s)
            .iter()
            .filter(|a| self.alive(a) && self.tier[a.peer] < self.tier[s])
            .map(|a| self.down[base + a.peer])
            .min()
            .map_or(INF, |m| m.saturating_add(1))
    }

    /// Valley-free distance: down if possible, else up then down.
    pub(crate) fn best_vf(&self, topo: &Topology, d: usize, s: SwitchId) -> u8 {
        let base = d * self.n;
        if self.down[base + s] != INF || !self.switch_up[s] {
            return self.down[base + s];
        }
        topo.adjacency(s)
            .iter()
            .filter(|a| self.alive(a) && self.tier[a.peer] > self.tier[s])
            .map(|a| self.vf[base + a.peer])
            .min()
            .map_or(INF, |m| m.saturating_add(1))
    }

    /// True when `s` forwards over adjacency `a` toward destination `d`.
    pub(crate) fn is_next_hop(&self, d: usize, s: SwitchId, a: &Adjacency) -> bool {
        self.uses(d, s, a.peer, a.link)
    }

    /// True when `s` forwards to `peer` over `link` toward destination `d`.
    pub(crate) fn uses(&self, d: usize, s: SwitchId, peer: SwitchId, link: usize) -> bool {
        let base = d * self.n;
        if !self.link_up[link] || !self.switch_up[peer] || !self.switch_up[s] || self.dests[d] == s {
            return false;
        }
        let (down, vf) = (self.down[base + s], self.vf[base + s]);
        if down != INF {
            self.tier[peer] < self.tier[s] && self.down[base + peer] == down - 1
        } else if vf != INF {
            self.tier[peer] > self.tier[s] && self.vf[base + peer] == vf - 1
        } else {
            false
        }
    }

    /// Capacity of `s` toward `d`: per neighbor, the smaller of the summed
    /// link bandwidth to it and its own capacity; summed over neighbors.
    pub(crate) fn capacity(&self, topo: &Topology, d: usize, s: SwitchId, scratch: &mut Scratch) -> u64 {
        self.next_hop_links(topo, d, s, scratch);
        let mut total = 0u64;
        for run in scratch.links.chunk_by(|x, y| x.0 == y.0) {
            total = total.saturating_add(self.aggregate(d, run));
        }
        total
    }

    /// Collects `(peer, port, bandwidth)` of `s`'s next-hop links toward
    /// `d`, sorted by peer so parallel links to one neighbor are adjacent.
    fn next_hop_links(&self, topo: &Topology, d: usize, s: SwitchId, scratch: &mut Scratch) {
        scratch.links.clear();
        let base = d * self.n;
        if !self.switch_up[s] || self.dests[d] == s {
            return;
        }
        // The hot loop of the whole computation: decide the mode once, then
        // test the cheapest, most selective condition first.
        let (down, vf, tier) = (self.down[base + s], self.vf[base + s], self.tier[s]);
        let (dist, want, going_down) = if down != INF {
            (&self.down, down.wrapping_sub(1), true)
        } else if vf != INF {
            (&self.vf, vf.wrapping_sub(1), false)
        } else {
            return;
        };
        for a in topo.adjacency(s) {
            if dist[base + a.peer] == want
                && (self.tier[a.peer] < tier) == going_down
                && self.tier[a.peer] != tier
                && self.link_up[a.link]
                && self.switch_up[a.peer]
            {
                scratch.links.push((a.peer, a.port, topo.links[a.link].bandwidth.bps()));
            }
        }
        if !scratch.links.is_sorted() {
            scratch.links.sort_unstable();
        }
    }

    /// Capacity through one neighbor: parallel links share what it can carry.
    fn aggregate(&self, d: usize, run: &[(SwitchId, u16, u64)]) -> u64 {
        let bw = run.iter().map(|l| l.2).fold(0u64, u64::saturating_add);
        bw.min(self.cap[d * self.n + run[0].0])
    }

    /// Writes the `(port, weight)` key and members of `s`'s group toward `d`.
    fn members(&self, topo: &Topology, d: usize, s: SwitchId, scratch: &mut Scratch) {
        self.next_hop_links(topo, d, s, scratch);
        scratch.entries.clear();
        scratch.total = 0;
        for run in scratch.links.chunk_by(|x, y| x.0 == y.0) {
            let agg = self.aggregate(d, run);
            scratch.total = scratch.total.saturating_add(agg);
            if let [(peer, port, _)] = run {
                scratch.entries.push((*port, *peer, agg.max(1)));
                continue;
            }
            let bw = run.iter().map(|l| l.2).fold(0u64, u64::saturating_add).max(1);
            for &(peer, port, link_bw) in run {
                let share = u128::from(agg) * u128::from(link_bw) / u128::from(bw);
                scratch.entries.push((port, peer, u64::try_from(share).unwrap_or(u64::MAX).max(1)));
            }
        }
        // Members in port order: the group's identity on the switch.
        if !scratch.entries.is_sorted() {
            scratch.entries.sort_unstable();
        }
        scratch.caps.clear();
        scratch.caps.extend(scratch.entries.iter().map(|e| e.2));
        groups::weights(&scratch.caps, self.opts.max_weight, &mut scratch.weights);
        scratch.key.clear();
        scratch.members.clear();
        for (&(port, peer, _), &weight) in scratch.entries.iter().zip(&scratch.weights) {
            scratch.members.push(Member { port, next: NextHop::Switch(peer), weight });
            scratch.key.push((port, weight));
        }
    }

    /// Points `s`'s route toward `d` at the group its next hops call for,
    /// and says what changed, if anything.
    pub(crate) fn regroup(
        &mut self,
        topo: &Topology,
        d: usize,
        s: SwitchId,
        scratch: &mut Scratch,
    ) -> Option<RouteChange> {
        let cell = d * self.n + s;
        let old = self.group_of[cell];
        if self.dests[d] == s {
            return None;
        }
        self.members(topo, d, s, scratch);
        let new = if scratch.key.is_empty() {
            if old == NO_GROUP {
                return None;
            }
            NO_GROUP
        } else {
            if old != NO_GROUP && self.tables[s].has_key(old, &scratch.key) {
                return None;
            }
            let members = &scratch.members;
            self.tables[s].acquire(&scratch.key, || members.clone()).0
        };
        if old != NO_GROUP {
            self.tables[s].release(old);
        }
        self.group_of[cell] = new;
        let some = |g: GroupId| (g != NO_GROUP).then_some(g);
        Some(RouteChange { switch: s, leaf: self.dests[d], old: some(old), new: some(new) })
    }

    // ---- queries ----

    pub fn options(&self) -> RoutingOptions {
        self.opts
    }

    /// Leaves that own prefixes (leaves with hosts).
    pub fn destinations(&self) -> &[SwitchId] {
        &self.dests
    }

    /// True when `from` has a route toward leaf `to` (or is `to`).
    pub fn reaches(&self, from: SwitchId, to: SwitchId) -> bool {
        match self.dest_of.get(to).copied().flatten() {
            Some(d) => self.switch_up[from] && self.vf[d * self.n + from] != INF,
            None => false,
        }
    }

    /// The group `s` uses toward leaf `leaf`, if it has a route.
    pub fn group_toward(&self, s: SwitchId, leaf: SwitchId) -> Option<(GroupId, &Group)> {
        let d = self.dest_of.get(leaf).copied().flatten()?;
        let id = self.group_of[d * self.n + s];
        (id != NO_GROUP).then(|| self.tables[s].get(id).map(|g| (id, g))).flatten()
    }

    /// Valley-free hop count from `s` to `leaf`, if reachable.
    pub fn distance(&self, s: SwitchId, leaf: SwitchId) -> Option<u8> {
        let d = self.dest_of.get(leaf).copied().flatten()?;
        Some(self.vf[d * self.n + s]).filter(|&v| v != INF)
    }

    /// Capacity from `s` toward `leaf` over all its paths, bits per second.
    pub fn capacity_toward(&self, s: SwitchId, leaf: SwitchId) -> Option<u64> {
        let d = self.dest_of.get(leaf).copied().flatten()?;
        Some(self.cap[d * self.n + s]).filter(|_| self.vf[d * self.n + s] != INF)
    }

    /// `(port, capacity in bits per second)` of each member of `s`'s group
    /// toward `leaf`: what the weights are proportional to.
    pub fn member_capacities(&self, topo: &Topology, s: SwitchId, leaf: SwitchId) -> Vec<(u16, u64)> {
        let Some(d) = self.dest_of.get(leaf).copied().flatten() else { return Vec::new() };
        if s == leaf {
            return Vec::new();
        }
        let mut scratch = Scratch::default();
        self.members(topo, d, s, &mut scratch);
        scratch.members.iter().zip(&scratch.caps).map(|(m, &c)| (m.port, c)).collect()
    }

    /// The group table of switch `s`.
    pub fn groups(&self, s: SwitchId) -> &GroupTable {
        &self.tables[s]
    }

    /// Every route of switch `s`: its own hosts first, then remote prefixes.
    pub fn routes(&self, s: SwitchId) -> Vec<Route> {
        let mut out: Vec<Route> = if self.switch_up[s] {
            self.local[s].iter().map(|&(prefix, group)| Route { prefix, group, leaf: s }).collect()
        } else {
            Vec::new()
        };
        for (d, &leaf) in self.dests.iter().enumerate() {
            let group = self.group_of[d * self.n + s];
            if group != NO_GROUP {
                out.extend(self.prefixes[d].iter().map(|&prefix| Route { prefix, group, leaf }));
            }
        }
        out
    }

    /// Total routes and groups over all switches.
    pub fn totals(&self) -> (usize, usize) {
        let routes = (0..self.n).map(|s| self.routes_len(s)).sum();
        let groups = self.tables.iter().map(GroupTable::len).sum();
        (routes, groups)
    }

    fn routes_len(&self, s: SwitchId) -> usize {
        let local = if self.switch_up[s] { self.local[s].len() } else { 0 };
        local
            + (0..self.dests.len())
                .filter(|d| self.group_of[d * self.n + s] != NO_GROUP)
                .map(|d| self.prefixes[d].len())
                .sum::<usize>()
    }

    pub fn link_is_up(&self, link: usize) -> bool {
        self.link_up.get(link).copied().unwrap_or(false)
    }

    pub fn switch_is_up(&self, s: SwitchId) -> bool {
        self.switch_up.get(s).copied().unwrap_or(false)
    }
}

/// Per switch, aligned with its adjacency: the total bandwidth of all links
/// (parallel ones included) between the switch and that peer.
fn peer_bandwidth(topo: &Topology) -> Vec<Vec<u64>> {
    (0..topo.switches.len())
        .map(|s| {
            let adj = topo.adjacency(s);
            adj.iter()
                .map(|a| {
                    adj.iter()
                        .filter(|b| b.peer == a.peer)
                        .map(|b| topo.links[b.link].bandwidth.bps())
                        .fold(0u64, u64::saturating_add)
                })
                .collect()
        })
        .collect()
}

/// Reused buffers, so that regrouping allocates only for new groups.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    key: Vec<(u16, u32)>,
    members: Vec<Member>,
    caps: Vec<u64>,
    weights: Vec<u32>,
    links: Vec<(SwitchId, u16, u64)>,
    /// `(port, peer, capacity)` of each member, before weighting.
    entries: Vec<(u16, SwitchId, u64)>,
    /// Capacity of the switch whose members were computed last.
    total: u64,
    /// Counting sort of switches by distance.
    count: Vec<usize>,
    order: Vec<SwitchId>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{self, Common};
    use crate::units::Bandwidth;

    type Content = Vec<Vec<(Ipv4Net, Vec<(u16, u32)>)>>;

    fn content(t: &Topology, r: &Routing) -> Content {
        (0..t.switches.len())
            .map(|s| {
                let mut v: Vec<_> = r
                    .routes(s)
                    .iter()
                    .map(|rt| (rt.prefix, r.groups(s).get(rt.group).map(Group::key).unwrap_or_default()))
                    .collect();
                v.sort();
                v
            })
            .collect()
    }

    #[test]
    fn two_halves_equal_one_pass_and_are_deterministic() {
        let t = gen::clos3(&Common::new("par", Bandwidth::gbps(100)), 4, 6, 2, 2, 1).unwrap();
        let opts = RoutingOptions::default();
        let seq = Routing::compute_in(&t, opts, &[], &[], usize::MAX);
        let par = Routing::compute_in(&t, opts, &[], &[], 2);
        assert_eq!(content(&t, &seq), content(&t, &par));
        assert_eq!(seq.totals(), par.totals());
        let again = Routing::compute_in(&t, opts, &[], &[], 2);
        for s in 0..t.switches.len() {
            assert_eq!(par.routes(s), again.routes(s), "group ids must not depend on thread timing");
        }
        // Repairs on a merged routing match a recompute.
        let mut par = par;
        let link = t.adjacency(t.switch_id("p1-spine1").unwrap())[0].link;
        par.fail_link(&t, link).unwrap();
        let fresh = Routing::compute_in(&t, opts, &[link], &[], usize::MAX);
        assert_eq!(content(&t, &par), content(&t, &fresh));
    }
}
