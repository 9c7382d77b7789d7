//! Exact placement of a batch of equal flows on a uniform Clos of two or
//! three tiers, by recursive equitable colouring (`colour.rs`).
//!
//! - *Leaves to planes.* The flows are the edges of a bipartite
//!   multigraph, source leaf → destination leaf; the colours are a
//!   leaf's uplinks, named by the plane of the spine they reach and their
//!   rank among the parallel links to it (a spine without super-spines is
//!   a plane of its own, [`crate::cut`]). Every leaf then sends at most
//!   ⌈out/k⌉ flows on each uplink and receives at most ⌈in/k⌉ on each
//!   downlink (the colour fixes the spine and the link down to the
//!   destination leaf too).
//! - *Pods to super-spines.* The flows that leave their pod climb from
//!   the spine the first colouring gave them; they are the edges of a
//!   second multigraph, source spine → destination spine (a pod within a
//!   plane), coloured with a spine's uplinks, named by super-spine and
//!   rank. Every spine then sends at most ⌈out/k⌉ on each uplink and
//!   receives at most ⌈in/k⌉ on each link down from a super-spine.
//!
//! The batch qualifies when its flows are equal (within 0.1%), every
//! link they may take has one capacity and one load and is in service,
//! every source leaf toward every destination has the same colours, the
//! spines of each plane the same super-spines, and each spine as many
//! links down to a destination leaf (or each super-spine to a spine) as
//! the colours say. Otherwise the batch is placed by search.
//!
//! The result is checked against the cut bound counted in whole flows
//! (`bound.rs`): when a spine has fewer uplinks than links down to its
//! leaves, the first colouring can leave one pod's flows unevenly over
//! the planes, and the placement is then valid but not proven optimal.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use crate::colour::{equitable, equitable_spread, Spread};
use crate::flow::FlowId;
use crate::net::{DirLink, NONE};
use crate::planner::Planner;
use crate::search::Route;

/// Colourings from other edge orders tried when the plane spreading
/// stops short of the bound.
const RESTARTS: usize = 8;

/// A colour: the plane (at a leaf) or the super-spine (at a spine) the
/// link leads to, and its rank among the parallel links there.
type Key = (u32, u32);

/// What the colourings have read of the route index, checked once per
/// (switch, destination).
struct Reader<'a> {
    p: &'a Planner,
    cap: u64,
    util: f64,
    /// (switch, destination) → a range of `links`: the switch's members
    /// in colour order (up) or port order (down).
    seen: HashMap<(u32, u32), (u32, u32)>,
    links: Vec<DirLink>,
}

impl<'a> Reader<'a> {
    fn same(&self, dl: DirLink) -> bool {
        let net = &self.p.net;
        net.cap[dl as usize] == self.cap && self.p.loads().util(net, dl, 0) == self.util && net.dl_up(dl)
    }

    fn slice(&self, r: (u32, u32)) -> &[DirLink] {
        &self.links[r.0 as usize..(r.0 + r.1) as usize]
    }

    /// `x`'s members toward `d` in colour order, with their colours; None
    /// unless all are alike and, at a leaf, no two spines share a plane.
    fn up(&mut self, x: u32, d: u32) -> Option<((u32, u32), Vec<Key>)> {
        let net = &self.p.net;
        let leaf = net.tier[x as usize] == 0;
        let mut ms: Vec<(u32, u16, u32, DirLink)> = Vec::new();
        for m in net.members(d, x) {
            if !self.same(m.dl) {
                return None;
            }
            let key = if leaf { net.cuts.plane[m.peer as usize] } else { m.peer };
            if key == NONE {
                return None;
            }
            ms.push((key, net.port(m.dl), m.peer, m.dl));
        }
        ms.sort_unstable();
        let mut keys: Vec<Key> = Vec::with_capacity(ms.len());
        for (i, m) in ms.iter().enumerate() {
            let rank = if i > 0 && ms[i - 1].0 == m.0 {
                if ms[i - 1].2 != m.2 {
                    // Two spines of one plane under one leaf: not a Clos we colour.
                    return None;
                }
                keys[i - 1].1 + 1
            } else {
                0
            };
            keys.push((m.0, rank));
        }
        let start = self.links.len() as u32;
        self.links.extend(ms.iter().map(|m| m.3));
        Some(((start, ms.len() as u32), keys))
    }

    /// `x`'s members toward `d` by port, if all lead to `to` and are alike
    /// and there are `count`.
    fn down(&mut self, x: u32, d: u32, to: u32, count: u32) -> Option<(u32, u32)> {
        if let Some(&r) = self.seen.get(&(x, d)) {
            return (r.1 == count).then_some(r);
        }
        let net = &self.p.net;
        let ms = net.members(d, x);
        if ms.len() != count as usize || ms.iter().any(|m| m.peer != to || !self.same(m.dl)) {
            return None;
        }
        let mut dls: Vec<(u16, DirLink)> = ms.iter().map(|m| (net.port(m.dl), m.dl)).collect();
        dls.sort_unstable();
        let r = (self.links.len() as u32, count);
        self.links.extend(dls.iter().map(|x| x.1));
        self.seen.insert((x, d), r);
        Some(r)
    }
}

/// How many colours of `keys` share `keys[c]`'s first part: parallel links.
fn parallel(keys: &[Key], c: usize) -> u32 {
    keys.iter().filter(|k| k.0 == keys[c].0).count() as u32
}

/// Dense indices for the vertices of a colouring.
struct Index(Vec<u32>, u32);

impl Index {
    fn of(&mut self, x: u32) -> u32 {
        let slot = &mut self.0[x as usize];
        if *slot == NONE {
            *slot = self.1;
            self.1 += 1;
        }
        *slot
    }
}

/// A flow that climbs: its index in the batch, its spine up and down.
type Climb = (u32, u32, u32);

/// What the two colourings share: the route index read so far, and the
/// colours of the leaves (one list for all) and of each plane's spines.
struct Colours<'a> {
    rd: Reader<'a>,
    keys1: Vec<Key>,
    leaf_up: HashMap<(u32, u32), (u32, u32)>,
    keys2: HashMap<u32, Vec<Key>>,
    spine_up: HashMap<(u32, u32), (u32, u32)>,
}

impl Colours<'_> {
    /// The first colouring's edges (source leaf → destination leaf) and
    /// vertex count; None unless every source leaf has the same colours.
    fn leaf_edges(&mut self, batch: &[FlowId]) -> Option<(Vec<(u32, u32)>, usize)> {
        let p = self.rd.p;
        let mut leaves = Index(vec![NONE; p.net.n], 0);
        let mut edges = Vec::with_capacity(batch.len());
        for &f in batch {
            let (a, d) = (p.src_leaf(f), p.dest(f));
            let b = *p.net.dests.get(d as usize)? as u32;
            if let Entry::Vacant(e) = self.leaf_up.entry((a, d)) {
                let (r, keys) = self.rd.up(a, d)?;
                if keys != self.keys1 {
                    return None;
                }
                e.insert(r);
            }
            edges.push((leaves.of(a), leaves.of(b)));
        }
        Some((edges, leaves.1 as usize))
    }

    /// Routes the flow of colour `c` to its spine; down to its leaf if the
    /// spine leads there (Ok(None)), else the spines up and down it climbs
    /// between.
    fn first_hops(&mut self, f: FlowId, c: usize, route: &mut Route) -> Option<Option<(u32, u32)>> {
        let p = self.rd.p;
        let net = &p.net;
        let (a, d) = (p.src_leaf(f), p.dest(f));
        let b = net.dests[d as usize] as u32;
        let dl_a = *self.rd.slice(*self.leaf_up.get(&(a, d))?).get(c)?;
        let s = net.head(dl_a);
        (route.dl[0], route.len) = (dl_a, 1);
        if net.members(d, s).first().is_some_and(|m| m.peer == b) {
            let down = self.rd.down(s, d, b, parallel(&self.keys1, c))?;
            (route.dl[1], route.len) = (self.rd.slice(down)[self.keys1[c].1 as usize], 2);
            return Some(None);
        }
        if let Entry::Vacant(e) = self.spine_up.entry((s, d)) {
            let (r, keys) = self.rd.up(s, d)?;
            match self.keys2.entry(net.cuts.plane[s as usize]) {
                Entry::Occupied(o) if *o.get() != keys => return None,
                Entry::Occupied(_) => {}
                Entry::Vacant(v) => {
                    v.insert(keys);
                }
            }
            e.insert(r);
        }
        let t0 = self.rd.slice(*self.spine_up.get(&(s, d))?).first().copied()?;
        let s2 = net.members(d, net.head(t0)).first()?.peer;
        let plane = net.cuts.plane[s as usize];
        (net.tier[s2 as usize] == 1 && net.cuts.plane[s2 as usize] == plane).then_some(Some((s, s2)))
    }

    /// The last three hops of a climbing flow: up colour `c2` from `s`,
    /// down to `s2`, down to the leaf on the rank of colour `c1`.
    fn last_hops(
        &mut self,
        f: FlowId,
        (s, s2): (u32, u32),
        (c1, c2): (usize, usize),
        r: &mut Route,
    ) -> Option<()> {
        let p = self.rd.p;
        let net = &p.net;
        let d = p.dest(f);
        let b = net.dests[d as usize] as u32;
        let keys = self.keys2.get(&net.cuts.plane[s as usize])?;
        let (rank2, par2) = (keys.get(c2)?.1 as usize, parallel(keys, c2));
        let dl_s = *self.rd.slice(*self.spine_up.get(&(s, d))?).get(c2)?;
        let down_t = self.rd.down(net.head(dl_s), d, s2, par2)?;
        let down_s2 = self.rd.down(s2, d, b, parallel(&self.keys1, c1))?;
        r.dl[1] = dl_s;
        r.dl[2] = self.rd.slice(down_t)[rank2];
        r.dl[3] = self.rd.slice(down_s2)[self.keys1[c1].1 as usize];
        r.len = 4;
        Some(())
    }
}

impl Planner {
    /// Routes for `batch` (in its order) from the recursive colouring, and
    /// whether they meet the bound in whole flows; None if the batch does
    /// not qualify.
    pub(crate) fn exact_routes(&self, batch: &[FlowId]) -> Option<(Vec<Route>, bool)> {
        let &first = batch.first()?;
        let rate = self.flows.rate[first as usize];
        // Equal within 0.1%: integer max-min shares differ by a few bits per second.
        if batch.iter().any(|&f| self.flows.rate[f as usize].abs_diff(rate) > rate / 1000) {
            return None;
        }
        let net = &self.net;
        let (a0, d0) = (self.src_leaf(first), self.dest(first));
        if d0 == NONE {
            return None;
        }
        let dl0 = net.members(d0, a0).first()?.dl;
        let (cap, util) = (net.cap[dl0 as usize], self.loads().util(net, dl0, 0));
        let mut rd = Reader { p: self, cap, util, seen: HashMap::new(), links: Vec::new() };
        let keys1 = rd.up(a0, d0)?.1;
        let mut cs =
            Colours { rd, keys1, leaf_up: HashMap::new(), keys2: HashMap::new(), spine_up: HashMap::new() };
        // Leaves to planes.
        let (mut edges, nl) = cs.leaf_edges(batch)?;
        let bound = self.whole_flow_bound(batch);
        let col1 = self.planes(batch, &edges, nl, &cs.keys1, bound);
        // Pods to super-spines: the flows whose spine climbs.
        let mut routes = vec![Route::default(); batch.len()];
        let (mut climb, mut spines): (Vec<Climb>, _) = (Vec::new(), Index(vec![NONE; net.n], 0));
        edges.clear();
        for (j, (&f, &c)) in batch.iter().zip(&col1).enumerate() {
            if let Some((s, s2)) = cs.first_hops(f, c as usize, &mut routes[j])? {
                climb.push((j as u32, s, s2));
                edges.push((spines.of(s), spines.of(s2)));
            }
        }
        let k2 = cs.keys2.values().next().map_or(0, Vec::len);
        if cs.keys2.values().any(|k| k.len() != k2) {
            return None;
        }
        let col2 = equitable(&edges, spines.1 as usize, spines.1 as usize, k2);
        for (&(j, s, s2), &c2) in climb.iter().zip(&col2) {
            let (f, j) = (batch[j as usize], j as usize);
            cs.last_hops(f, (s, s2), (col1[j] as usize, c2 as usize), &mut routes[j])?;
        }
        for (r, &f) in routes.iter_mut().zip(batch) {
            let d = self.dest(f);
            for h in 0..r.len as usize {
                r.mask |= u8::from(net.members(d, net.tail(r.dl[h])).len() > 1) << h;
            }
        }
        let at_bound = self.most_on_a_link(&routes) == bound;
        Some((routes, at_bound))
    }

    /// The first colouring (leaves to planes), its flows that leave their
    /// pod spread over the planes so that no pod sends or receives more
    /// over one plane than that plane's uplinks carry at `bound` flows a
    /// link (it matters where a spine has fewer uplinks than leaves).
    fn planes(
        &self,
        batch: &[FlowId],
        edges: &[(u32, u32)],
        nl: usize,
        keys: &[Key],
        bound: u32,
    ) -> Vec<u32> {
        let cuts = &self.net.cuts;
        let (mut gu, mut gv) = (Vec::with_capacity(batch.len()), Vec::with_capacity(batch.len()));
        for &f in batch {
            let b = self.net.host_leaf[self.flows.dst[f as usize] as usize];
            let (out, into) = cuts.of_flow(self.src_leaf(f), b);
            let pod = |c: u32| if c == NONE { NONE } else { c - self.net.n as u32 };
            gu.push(pod(out[1]));
            gv.push(pod(into[1]));
        }
        let mut planes: Vec<u32> = keys.iter().map(|k| k.0).collect();
        planes.dedup();
        let class: Vec<u32> =
            keys.iter().map(|k| planes.iter().position(|&p| p == k.0).unwrap_or(0) as u32).collect();
        let groups = cuts.len() - self.net.n;
        let per_plane = (self.net.n..cuts.len())
            .map(|c| cuts.out_n[c].min(cuts.in_n[c]))
            .min()
            .map_or(0, |links| links / planes.len().max(1) as u32);
        if gu.iter().all(|&g| g == NONE) || per_plane == 0 {
            return equitable(edges, nl, nl, keys.len());
        }
        let limit = per_plane.saturating_mul(bound);
        let spread = Spread { gu: &gu, gv: &gv, groups, class: &class, classes: planes.len(), limit };
        let (first, ok) = equitable_spread(edges, (nl, nl, keys.len()), &spread);
        if ok {
            return first;
        }
        // The swaps stopped short: colour again from other edge orders
        // (other pieces, another start), a few times, deterministically.
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..RESTARTS {
            let mut order: Vec<usize> = (0..edges.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, (next() % (i as u64 + 1)) as usize);
            }
            let e: Vec<(u32, u32)> = order.iter().map(|&i| edges[i]).collect();
            let (gu2, gv2): (Vec<u32>, Vec<u32>) = order.iter().map(|&i| (gu[i], gv[i])).unzip();
            let sp = Spread { gu: &gu2, gv: &gv2, ..spread };
            let (cols, ok) = equitable_spread(&e, (nl, nl, keys.len()), &sp);
            if ok {
                let mut back = vec![0; edges.len()];
                for (&i, c) in order.iter().zip(cols) {
                    back[i] = c;
                }
                return back;
            }
        }
        first
    }

    /// The most routes that share one directed link.
    fn most_on_a_link(&self, routes: &[Route]) -> u32 {
        let mut on = vec![0u32; self.net.dirlinks()];
        let mut most = 0;
        for &dl in routes.iter().flat_map(|r| r.links()) {
            on[dl as usize] += 1;
            most = most.max(on[dl as usize]);
        }
        most
    }

    /// The batch's cut bound in flows a link: the largest ⌈n/k⌉ over the
    /// cuts (`crate::cut`) of `n` flows across `k` live links.
    fn whole_flow_bound(&self, batch: &[FlowId]) -> u32 {
        let cuts = &self.net.cuts;
        let (mut out, mut into) = (vec![0u32; cuts.len()], vec![0u32; cuts.len()]);
        for &f in batch {
            let b = self.net.host_leaf[self.flows.dst[f as usize] as usize];
            let (o, i) = cuts.of_flow(self.src_leaf(f), b);
            for c in o.into_iter().filter(|&c| c != NONE) {
                out[c as usize] += 1;
            }
            for c in i.into_iter().filter(|&c| c != NONE) {
                into[c as usize] += 1;
            }
        }
        let ceil = |n: u32, k: u32| if k == 0 { 0 } else { n.div_ceil(k) };
        (0..cuts.len())
            .map(|c| ceil(out[c], cuts.out_n[c]).max(ceil(into[c], cuts.in_n[c])))
            .max()
            .unwrap_or(0)
    }
}
