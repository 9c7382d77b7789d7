//! The planner's flat index of the fabric: directed links with their
//! capacities, and, per (destination leaf, switch), the members of the
//! route's group as directed links. Built once from the routing; a routing
//! change updates only the cells it names.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::Ipv4Addr;

use crate::cells::Cells;
use crate::cut::Cuts;
use metaroce_topo::{GroupId, HostId, LinkId, NextHop, RouteChange, Routing, SwitchId, Topology};

/// Marks "none" in u32 indices.
pub(crate) const NONE: u32 = u32::MAX;
/// Most switch-to-switch links on a valley-free path: up two tiers and
/// down two (leaf, spine, super-spine, spine, leaf).
pub const MAX_HOPS: usize = 4;

/// A directed link: `2 * link` runs from the link's `a` end to its `b`
/// end, `2 * link + 1` back.
pub(crate) type DirLink = u32;

/// One member of a group: the directed link it sends on and where it leads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mem {
    pub dl: DirLink,
    pub peer: u32,
}

/// A group: `(start, len)` into `Net::members`, and its member kept here
/// too when it has only one. The chains of single-member groups a
/// search follows (down from a super-spine, on the bench's Clos two
/// hops for each of 16 members a flow) then cost one dependent read a
/// hop fewer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupRec {
    start: u32,
    len: u32,
    one: Mem,
}

const NO_GROUP: GroupRec = GroupRec { start: 0, len: 0, one: Mem { dl: NONE, peer: NONE } };

/// A directed link's ends: see `Net::ends`.
#[derive(Debug, Clone, Copy, Default)]
struct Ends {
    tail: u32,
    head: u32,
    port: u16,
}

/// What [`Net::apply`] changed.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// Per changed cell: the destination index, the old and the new group.
    pub cells: Vec<(u32, u32, u32)>,
    /// Directed links that went out of service.
    pub down: Vec<DirLink>,
    /// Directed links whose state changed (either way).
    pub changed: Vec<DirLink>,
}

#[derive(Debug, Clone)]
pub(crate) struct Net {
    pub n: usize,
    /// Per switch, its index among the destination leaves, or NONE.
    pub dest_of: Vec<u32>,
    pub dests: Vec<SwitchId>,
    /// `(d, s)`: index into `groups` of `s`'s group toward destination
    /// `d`; 0 (an empty group) for none (no route, or `s` is the leaf
    /// itself). On the 2,048-switch Clos there are 3.1 million, in shared
    /// blocks (`cells.rs`).
    cells: Cells,
    /// Each group's members: small enough to stay in cache.
    pub groups: Spare<GroupRec>,
    pub members: Spare<Mem>,
    intern: HashMap<(SwitchId, GroupId), u32, BuildHasherDefault<Mix>>,
    /// Per directed link: the switch it leaves, the switch it enters and
    /// its egress port there, in one record (rendering a path's hop reads
    /// all three: one cache miss instead of three).
    ends: Vec<Ends>,
    /// Per directed link, its capacity.
    pub cap: Vec<u64>,
    /// Capacity as a float: utilisation divides by it (a division, not a
    /// multiplication by the inverse, so a full link is exactly 1.0).
    pub capf: Vec<f64>,
    /// Every directed link has the same capacity, below 2^53: searches
    /// may compare raw loads instead of utilisations (`search::Raw`).
    pub uniform: bool,
    /// The smallest capacity of a fabric link: the most a receiver-bound
    /// group may send to be kept on one path ([`crate::group`]).
    pub narrowest: u64,
    pub link_up: Vec<bool>,
    pub switch_up: Vec<bool>,
    /// Per directed link: it and both its switches are in service.
    pub dl_ok: Vec<bool>,
    /// The cuts of the lower bound (leaves, pods) with their live
    /// capacities, and the pods and planes ([`crate::cut`]).
    pub cuts: Cuts,
    /// Per switch, its tier (0 = leaf).
    pub tier: Vec<u8>,
    pub host_by_ip: HashMap<Ipv4Addr, HostId>,
    pub host_leaf: Vec<u32>,
    pub host_nic: Vec<u64>,
    /// Per switch, `(port, directed link)` of its fabric ports, by port.
    ports: Vec<Vec<(u16, DirLink)>>,
}

impl Net {
    pub fn new(topo: &Topology, routing: &Routing) -> Self {
        let n = topo.switches.len();
        let nl = topo.links.len();
        let (mut tail, mut port, mut head) = (vec![0; 2 * nl], vec![0; 2 * nl], vec![0; 2 * nl]);
        let mut cap = vec![0; 2 * nl];
        for (l, link) in topo.links.iter().enumerate() {
            for (dir, (from, to)) in [(link.a, link.b), (link.b, link.a)].into_iter().enumerate() {
                let dl = 2 * l + dir;
                tail[dl] = from.switch as u32;
                port[dl] = from.port;
                head[dl] = to.switch as u32;
                cap[dl] = link.bandwidth.bps().max(1);
            }
        }
        let capf = cap.iter().map(|&c| c as f64).collect();
        let uniform = cap.iter().all(|&c| c == cap[0] && c < 1 << 53);
        let narrowest = cap.iter().copied().min().unwrap_or(0);
        let mut ports: Vec<Vec<(u16, DirLink)>> = vec![Vec::new(); n];
        for dl in 0..2 * nl {
            ports[tail[dl] as usize].push((port[dl], dl as DirLink));
        }
        for p in &mut ports {
            p.sort_unstable();
        }
        let dests = routing.destinations().to_vec();
        let mut dest_of = vec![NONE; n];
        for (i, &d) in dests.iter().enumerate() {
            dest_of[d] = i as u32;
        }
        let tier: Vec<u8> = topo.switches.iter().map(|s| s.role.tier()).collect();
        let cuts = Cuts::new(&tail, &head, &tier, &cap);
        let mut net = Net {
            n,
            dest_of,
            cells: Cells::default(),
            groups: Spare(vec![NO_GROUP]),
            dests,
            members: Spare(Vec::new()),
            intern: HashMap::default(),
            ends: (0..2 * nl).map(|dl| Ends { tail: tail[dl], head: head[dl], port: port[dl] }).collect(),
            cap,
            capf,
            uniform,
            narrowest,
            link_up: vec![true; nl],
            switch_up: vec![true; n],
            dl_ok: vec![true; 2 * nl],
            cuts,
            tier,
            host_by_ip: topo.hosts.iter().enumerate().map(|(i, h)| (h.ip, i)).collect(),
            host_leaf: topo.hosts.iter().map(|h| h.leaf as u32).collect(),
            host_nic: topo.hosts.iter().map(|h| h.nic_rate.bps().max(1)).collect(),
            ports,
        };
        net.refill(routing);
        net
    }

    /// Re-reads every cell and the up/down state from `routing`.
    pub fn refill(&mut self, routing: &Routing) {
        self.refresh_state(routing);
        self.recount_all();
        let (rows, n) = (self.dests.len(), self.n);
        self.cells = Cells::build(rows, n, |d, s| {
            let leaf = self.dests[d];
            self.lookup(routing, s, leaf)
        });
    }

    /// Applies the changes `fail_link`/`fail_switch` reported.
    pub fn apply(&mut self, routing: &Routing, changes: &[RouteChange]) -> Applied {
        let (down, changed) = self.refresh_state(routing);
        let mut out = Vec::with_capacity(changes.len());
        for c in changes {
            let Some(&d) = self.dest_of.get(c.leaf).filter(|&&d| d != NONE) else { continue };
            if c.switch >= self.n {
                continue;
            }
            let g = match c.new {
                // Groups are per switch and their ids never reused: one
                // already seen needs no look-up in the routing.
                Some(id) => match self.intern.get(&(c.switch, id)) {
                    Some(&g) => g,
                    None => self.lookup(routing, c.switch, c.leaf),
                },
                None => 0,
            };
            let old = self.cells.set(d, c.switch as u32, g);
            out.push((d, old, g));
        }
        Applied { cells: out, down, changed }
    }

    /// Re-reads which links and switches are up; returns the directed
    /// links that went out of service, and all whose state changed. Only
    /// the links whose state changed are recomputed.
    fn refresh_state(&mut self, routing: &Routing) -> (Vec<DirLink>, Vec<DirLink>) {
        let mut touched: Vec<DirLink> = Vec::new();
        for (l, up) in self.link_up.iter_mut().enumerate() {
            let now = routing.link_is_up(l);
            if *up != now {
                *up = now;
                touched.extend([2 * l as DirLink, 2 * l as DirLink + 1]);
            }
        }
        for s in 0..self.n {
            let now = routing.switch_is_up(s);
            if self.switch_up[s] != now {
                self.switch_up[s] = now;
                for dl in 0..self.ends.len() as DirLink {
                    if self.tail(dl) as usize == s || self.head(dl) as usize == s {
                        touched.push(dl);
                    }
                }
            }
        }
        let (mut down, mut changed) = (Vec::new(), Vec::new());
        for &dl in &touched {
            let i = dl as usize;
            let ok = self.link_up[i / 2]
                && self.switch_up[self.tail(dl) as usize]
                && self.switch_up[self.head(dl) as usize];
            if ok != self.dl_ok[i] {
                self.dl_ok[i] = ok;
                if !ok {
                    down.push(dl);
                }
                changed.push(dl);
                self.recount(dl);
            }
        }
        (down, changed)
    }

    /// Recomputes the live capacities of the cuts `dl` leaves and enters.
    fn recount(&mut self, dl: DirLink) {
        let (ok, cap) = (&self.dl_ok, &self.cap);
        let live = |d: DirLink| ok[d as usize];
        for c in [self.cuts.leaves[dl as usize], self.cuts.enters[dl as usize]] {
            if c != NONE {
                self.cuts.recount(c, &live, cap);
            }
        }
    }

    /// Every cut's live capacities from scratch.
    fn recount_all(&mut self) {
        let (ok, cap) = (&self.dl_ok, &self.cap);
        let live = |d: DirLink| ok[d as usize];
        for c in 0..self.cuts.len() as u32 {
            self.cuts.recount(c, &live, cap);
        }
    }

    /// Our index of `s`'s group toward `leaf`, interning it on first sight.
    fn lookup(&mut self, routing: &Routing, s: SwitchId, leaf: SwitchId) -> u32 {
        let Some((id, group)) = routing.group_toward(s, leaf) else { return 0 };
        if let Some(&g) = self.intern.get(&(s, id)) {
            return g;
        }
        let start = self.members.len() as u32;
        for m in &group.members {
            let NextHop::Switch(peer) = m.next else { continue };
            let ports = &self.ports[s];
            if let Ok(i) = ports.binary_search_by_key(&m.port, |p| p.0) {
                self.members.push(Mem { dl: ports[i].1, peer: peer as u32 });
            }
        }
        let g = self.groups.len() as u32;
        let len = self.members.len() as u32 - start;
        let one = if len == 1 { self.members[start as usize] } else { NO_GROUP.one };
        self.groups.push(GroupRec { start, len, one });
        self.intern.insert((s, id), g);
        g
    }

    /// Members of group `g` (an index from `cell`).
    #[inline]
    pub fn group(&self, g: u32) -> &[Mem] {
        let Some(r) = self.groups.get(g as usize) else { return &[] };
        if r.len == 1 {
            return std::slice::from_ref(&r.one);
        }
        &self.members[r.start as usize..(r.start + r.len) as usize]
    }

    /// The member of `s`'s group toward destination `d` if it has just
    /// one ([`Net::members`] without making the slice, whose bounds
    /// checks a search following a chain would pay at every fork).
    #[inline]
    pub fn only(&self, d: u32, s: u32) -> Option<Mem> {
        self.only_in(self.cell_of(d, s))
    }

    /// The member of group `g` if it has just one ([`Net::only`] of a
    /// cell already read).
    #[inline]
    pub fn only_in(&self, g: u32) -> Option<Mem> {
        self.groups.get(g as usize).filter(|r| r.len == 1).map(|r| r.one)
    }

    /// Members of `s`'s group toward destination `d` (empty if none).
    #[inline]
    pub fn members(&self, d: u32, s: u32) -> &[Mem] {
        self.group(self.cell_of(d, s))
    }

    /// Index of `s`'s group toward destination `d` (0: none).
    #[inline]
    pub fn cell_of(&self, d: u32, s: u32) -> u32 {
        self.cells.get(d, s)
    }

    /// True when the directed link and both its switches are in service.
    #[inline]
    pub fn dl_up(&self, dl: DirLink) -> bool {
        self.dl_ok[dl as usize]
    }

    pub fn link_of(dl: DirLink) -> LinkId {
        dl as usize / 2
    }

    /// The directed links leaving switch `s`, by port.
    pub fn out_of(&self, s: u32) -> impl Iterator<Item = DirLink> + '_ {
        self.ports.get(s as usize).into_iter().flatten().map(|p| p.1)
    }

    pub fn dirlinks(&self) -> usize {
        self.ends.len()
    }

    /// The switch `dl` leaves.
    #[inline]
    pub fn tail(&self, dl: DirLink) -> u32 {
        self.ends[dl as usize].tail
    }

    /// The switch `dl` enters.
    #[inline]
    pub fn head(&self, dl: DirLink) -> u32 {
        self.ends[dl as usize].head
    }

    /// `dl`'s egress port at the switch it leaves.
    #[inline]
    pub fn port(&self, dl: DirLink) -> u16 {
        self.ends[dl as usize].port
    }
}

/// A vector whose clone keeps its spare room. The groups grow by a few
/// thousand on a failure (every switch that reached a leaf through the
/// failed link gets a new group): a clone with no room (what `Vec`'s is)
/// would copy the whole table, into fresh pages, on the first of them.
#[derive(Debug, Default)]
pub(crate) struct Spare<T>(pub Vec<T>);

impl<T: Clone> Clone for Spare<T> {
    fn clone(&self) -> Self {
        let mut v = Vec::with_capacity(self.0.capacity());
        v.extend_from_slice(&self.0);
        Spare(v)
    }
}

impl<T> std::ops::Deref for Spare<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Spare<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        &mut self.0
    }
}

/// A fast hasher for our own small integer keys (switch and group ids,
/// not chosen by an adversary).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Mix(u64);

impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Eight bytes at a time: the route index hashes blocks of cells.
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        for &b in chunks.remainder() {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}
