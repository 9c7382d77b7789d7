//! The best path of one flow: over the members of the route groups from
//! its source leaf to its destination leaf (valley-free shortest paths
//! only, never a failed link), the one whose most utilised link, counting
//! the flow, is least utilised. A depth-first search that prunes any
//! branch already as hot as the best path found; ties go to the first
//! path found, and each flow starts its member order at its own offset so
//! equal flows spread over equal paths.
//!
//! With a beam, a switch with more members than the beam looks at a few
//! of them (each with the chain of single-member groups it leads into)
//! and follows only the coolest: on the 2,048-switch Clos a cross-pod flow
//! has 256 paths, and new flows in bulk cannot afford to look at all of
//! them. Rebalancing and repairs search exactly.

use crate::net::{DirLink, Mem, Net, MAX_HOPS};

mod meter;
pub(crate) use meter::{Grouped, GroupedRaw, Loads, Meter, Raw, RAW_LIMIT};

/// A path as directed links, with its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Route {
    pub dl: [DirLink; MAX_HOPS],
    pub len: u8,
    /// Bit i: the group at hop i had more than one member when the route
    /// was chosen (or last checked), so the hop needs a steer entry.
    pub mask: u8,
}

impl Route {
    pub fn links(&self) -> &[DirLink] {
        &self.dl[..usize::from(self.len)]
    }
}

struct Dfs<'a, M: Meter> {
    net: &'a Net,
    loads: M,
    d: u32,
    dst: u32,
    rate: u64,
    spread: u64,
    beam: usize,
    width: usize,
    cur: Route,
    best: Option<(M::U, Route)>,
    /// The source leaf's group: read by the caller ahead of the search.
    first: u32,
    /// What a path must beat: the caller's bar (only paths whose
    /// bottleneck is below it are wanted), then the best found. Kept
    /// beside `best`, as the search reads it at every step.
    bar: M::U,
    /// The chain below the last switch [`Dfs::below`] read.
    memo: Memo<M::U>,
}

/// What [`Dfs::below`] keeps of the last chain it read: the switch it
/// starts at (NONE: none yet), the chain's bottleneck, and the switch's
/// member where its group has one (the first link of the chain).
#[derive(Clone, Copy)]
struct Memo<U> {
    at: u32,
    worst: U,
    one: Option<Mem>,
}

/// Widest beam kept on the stack.
const MAX_BEAM: usize = 16;
/// The array of a beam of at most this many (the default's 2).
const SHORT_BEAM: usize = 4;

impl<'a, M: Meter> Dfs<'a, M> {
    /// What a path must beat: the best found, or the caller's bar.
    #[inline]
    fn limit(&self) -> M::U {
        self.bar
    }

    /// Goes on from switch `s` at `depth` with `prefix`: the bottleneck
    /// so far. `known`: `s`'s group toward the destination, where the
    /// caller has read it already.
    fn walk(&mut self, s: u32, depth: usize, prefix: M::U, known: Option<&'a [Mem]>) {
        if s == self.dst {
            if prefix < self.limit() {
                self.cur.len = depth as u8;
                self.cur.mask &= (1u8 << depth) - 1;
                (self.best, self.bar) = (Some((prefix, self.cur)), prefix);
            }
            return;
        }
        if depth == MAX_HOPS {
            return;
        }
        let members = match known {
            Some(members) => members,
            None if depth == 0 => self.net.group(self.first),
            None => self.net.members(self.d, s),
        };
        let k = members.len();
        if k > self.beam {
            // The beam's array as long as it needs (it is filled for
            // every beam walked: 16 entries were 32 stores).
            return if self.beam <= SHORT_BEAM {
                self.walk_beam::<SHORT_BEAM>(members, depth, prefix)
            } else {
                self.walk_beam::<MAX_BEAM>(members, depth, prefix)
            };
        }
        let start = if k > 1 { (self.spread.rotate_left(7 * depth as u32) % k as u64) as usize } else { 0 };
        for i in 0..k {
            let m = members[(start + i) % k];
            self.step(m.dl, m.peer, (depth, k > 1), prefix);
        }
    }

    /// Follows `dl` to `peer` unless it is out of service or no better
    /// than the best path found.
    #[inline]
    fn step(&mut self, dl: DirLink, peer: u32, (depth, choice): (usize, bool), prefix: M::U) {
        // Group members are never on a link out of service (the routing
        // leaves them out, and the index follows the routing), so the
        // hot loop does not check.
        let u = M::max(prefix, self.loads.util(self.net, dl, self.rate));
        if u >= self.limit() {
            return;
        }
        self.cur.dl[depth] = dl;
        if choice {
            self.cur.mask |= 1 << depth;
        } else {
            self.cur.mask &= !(1 << depth);
        }
        self.walk(peer, depth + 1, u, None);
    }

    /// Utilisation along the chain of single-member groups from `s`
    /// toward the destination (0 where the chain forks): what every path
    /// through `s` must cross anyway. Stops early, with what it has,
    /// once that is `stop` or more.
    ///
    /// Past its first link the chain is read through [`Dfs::below`],
    /// which keeps the last switch's: the members of one group often
    /// lead to one switch next (on the bench's Clos every super-spine a
    /// spine samples reaches the destination through the same spine),
    /// and a search reads no load twice for it. A chain read whole where
    /// it could have stopped early is `stop` or more all the same (each
    /// link only raises it), so the caller drops it either way.
    #[inline(always)]
    fn tail(&mut self, s: u32, stop: M::U) -> (M::U, u32) {
        // The destination has no group toward itself.
        if s == self.dst {
            return (M::ZERO, 0);
        }
        let g = self.net.cell_of(self.d, s);
        let Some(m) = self.net.only_in(g) else { return (M::ZERO, g) };
        let first = self.loads.util(self.net, m.dl, self.rate);
        if first >= stop {
            return (first, g);
        }
        let rest = if m.peer == self.memo.at { self.memo.worst } else { self.below(m.peer) };
        (M::max(first, rest), g)
    }

    /// The whole chain of single-member groups from `t` toward the
    /// destination, as [`Dfs::tail`] reads it (at most `MAX_HOPS - 1`
    /// links: `t` is a hop into a chain), kept for the last `t` asked:
    /// the loads do not change during a search. (The caller looks in
    /// the memo first.)
    #[inline(never)]
    fn below(&mut self, t: u32) -> M::U {
        let (mut worst, mut s) = (M::ZERO, t);
        let mut one = None;
        for i in 0..MAX_HOPS - 1 {
            if s == self.dst {
                break;
            }
            match self.net.only(self.d, s) {
                Some(m) => {
                    if i == 0 {
                        one = Some(m);
                    }
                    worst = M::max(worst, self.loads.util(self.net, m.dl, self.rate));
                    s = m.peer;
                }
                None => break,
            }
        }
        self.memo = Memo { at: t, worst, one };
        worst
    }

    /// At a switch with more members than the beam: looks at `width` of
    /// them (all if there are no more; else one from each of `width`
    /// equal runs, from the flow's own offset and at the flow's own place
    /// in each run), each with the chain it leads into, and follows the
    /// `beam` coolest (ties in the flow's rotation, so equal flows spread).
    ///
    /// The place in each run varies with the flow: at the same place in
    /// every run (evenly spaced), a width that divides the group (8 of
    /// 32 super-spines) splits the flows into a few classes that each see
    /// only their own quarter of the members, and the greedy placement
    /// then piles up on some of them (on the bench's Clos it ended at
    /// 0.769 before 2,519 local-search steps brought it down to 0.721).
    fn walk_beam<const N: usize>(&mut self, members: &'a [Mem], depth: usize, prefix: M::U) {
        let k = members.len();
        let beam = self.beam.min(N);
        let sample = Sample::new(k, self.width, self.spread, depth);
        // Kept members: their utilisation with their chain, their index
        // and their switch's group (read for the chain: `finish` goes on
        // from it).
        let mut keep: [(M::U, u32, u32); N] = [(M::INF, 0, 0); N];
        let mut kept = 0;
        // A member no cooler than the best path found, counting the
        // prefix, leads to nothing better; one no cooler than the last
        // kept is not kept. Either way its tail need not be read.
        let bar = self.limit();
        // What a member must be below: `bar`, and once the beam is full
        // its last kept member. (`prefix` is below `bar`, or this switch
        // would not be walked.)
        let mut cut = bar;
        for idx in sample.iter() {
            let m = members[idx];
            let first = self.loads.util(self.net, m.dl, self.rate);
            if first >= cut {
                continue;
            }
            let (tail, g) = self.tail(m.peer, cut);
            let u = M::max(first, tail);
            if u >= cut {
                continue;
            }
            // Insert in order; equal utilisations keep rotation order.
            let mut at = kept.min(beam - 1);
            while at > 0 && keep[at - 1].0 > u {
                keep[at] = keep[at - 1];
                at -= 1;
            }
            keep[at] = (u, idx as u32, g);
            kept = (kept + 1).min(beam);
            if kept == beam {
                cut = M::min(keep[beam - 1].0, bar);
            }
        }
        for &(u, idx, g) in &keep[..kept] {
            // Every path through the member crosses its link and its
            // chain (read whole, or it would not have been kept): none
            // through it can beat the best found once `u` does not, and
            // finishing or walking it would record nothing. (The members
            // come coolest first, so after the first has set the best the
            // rest mostly stop here.)
            let u = M::max(prefix, u);
            if u >= self.limit() {
                continue;
            }
            let m = members[idx as usize];
            match self.finish(m, g, depth, u) {
                Finish::Done => {}
                // The member's own switch forks: its tail was nothing
                // (`u` is the member's utilisation alone), so this is
                // what `step` would do, without reading its load and the
                // switch's group again.
                Finish::Forks(next) => {
                    self.cur.dl[depth] = m.dl;
                    self.cur.mask |= 1 << depth;
                    self.walk(m.peer, depth + 1, u, Some(next));
                }
                Finish::Walk => self.step(m.dl, m.peer, (depth, true), prefix),
            }
        }
    }

    /// A kept member whose chain reaches the destination is one path,
    /// and its bottleneck is known already (`total`: the prefix, the
    /// member and its chain, all read for the beam): records it if it
    /// beats the best, as walking it would, without reading its loads
    /// again. Else the chain forks: at the member's own switch (whose
    /// group it gives), or further on (walk it then).
    /// `g`: the group of `m`'s switch toward the destination (as read
    /// for its chain).
    fn finish(&mut self, m: Mem, g: u32, depth: usize, total: M::U) -> Finish<'a> {
        let mut r = self.cur;
        r.dl[depth] = m.dl;
        r.mask |= 1 << depth;
        let (mut s, mut at) = (m.peer, depth + 1);
        while s != self.dst {
            // The switch `below` read last: its member, without the look-up.
            let known = if s == self.memo.at && s != m.peer { self.memo.one } else { None };
            let next = match known {
                Some(next) => next,
                None => {
                    let group = if s == m.peer { self.net.group(g) } else { self.net.members(self.d, s) };
                    match group {
                        [next] => *next,
                        forks if s == m.peer => return Finish::Forks(forks),
                        _ => return Finish::Walk,
                    }
                }
            };
            if at == MAX_HOPS {
                return Finish::Walk;
            }
            r.dl[at] = next.dl;
            r.mask &= !(1 << at);
            (s, at) = (next.peer, at + 1);
        }
        if total < self.limit() {
            r.len = at as u8;
            r.mask &= (1u8 << at) - 1;
            (self.best, self.bar) = (Some((total, r)), total);
        }
        Finish::Done
    }
}

/// What [`Dfs::finish`] did with a kept member.
enum Finish<'a> {
    /// Its chain reached the destination: recorded if it was the best.
    Done,
    /// The switch it leads to forks, into these members.
    Forks(&'a [Mem]),
    /// Its chain forks further on.
    Walk,
}

/// Which `look` of a group's `k` members the beam looks at: one from
/// each of `look` equal runs, the first run starting at the flow's own
/// offset, and within each run at a place drawn from the flow's hash
/// (see `Dfs::walk_beam`). All of them, in rotation, when `k <= width`.
#[derive(Debug, Clone, Copy)]
struct Sample {
    k: usize,
    look: usize,
    start: usize,
    /// Members per run (1 when all are looked at: no jitter).
    run: u64,
    jitter: u64,
}

impl Sample {
    fn new(k: usize, width: usize, spread: u64, depth: usize) -> Self {
        let look = width.min(k).max(1);
        // A beam's divisions wait on each other and the first member's
        // index waits on them; where the divisor is a power of two (the
        // group of every Clos of the benches, and a width of 8) a mask or
        // a shift gives the same quotient and remainder.
        let (x, k1) = (spread.rotate_left(7 * depth as u32), k.max(1) as u64);
        let start = if k1.is_power_of_two() { x & (k1 - 1) } else { x % k1 };
        let run = if look.is_power_of_two() { k >> look.trailing_zeros() } else { k / look };
        Sample {
            k,
            look,
            start: start as usize,
            run: run as u64,
            jitter: spread.rotate_left(29 + 7 * depth as u32),
        }
    }

    /// The `j`-th member looked at.
    #[cfg(test)]
    fn at(&self, j: usize) -> usize {
        let off =
            if self.run > 1 { (self.jitter.wrapping_mul(2 * j as u64 + 1) >> 40) % self.run } else { 0 };
        (self.start + j * self.k / self.look + off as usize) % self.k
    }

    /// The members looked at, in order: `at(0..look)` without its three
    /// divisions a member (the member's index waits on them, and the
    /// beam looks at 24 members a flow on the bench's Clos). The run's
    /// start advances by `k / look` with the remainder carried, and is
    /// kept below `k`; the place in the run is a multiply-shift modulo,
    /// exact for 32-bit operands (Lemire, Kaser and Kurz, "Faster
    /// remainder by direct computation", 2019), below `run`, at most
    /// `k`: so every sum is below twice `k`, and one conditional
    /// subtraction wraps it (no loop, no branch).
    #[inline]
    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        let (k, look) = (self.k, self.look);
        // `run` is `k / look`: the remainder without dividing again.
        let (q, r) = (self.run as usize, k - self.run as usize * look);
        // `run` is at most k, far below 2^32; `(x >> 40)` has 24 bits.
        let run = self.run.max(1);
        // (For `run` a power of two 2^s, `u64::MAX / run + 1` is 2^(64 - s).)
        let magic = match run {
            0 | 1 => 0,
            _ if run.is_power_of_two() => 1 << (64 - run.trailing_zeros()),
            _ => (u64::MAX / run).wrapping_add(1),
        };
        let wrap = move |x: usize| if x >= k { x - k } else { x };
        let (mut base, mut carry) = (self.start, 0);
        (0..look).map(move |j| {
            let off = if run > 1 {
                let x = self.jitter.wrapping_mul(2 * j as u64 + 1) >> 40;
                ((u128::from(magic.wrapping_mul(x)) * u128::from(run)) >> 64) as usize
            } else {
                0
            };
            let idx = wrap(base + off);
            // (Where `look` divides `k`, as on the bench's Clos, there is
            // no remainder to carry.)
            let over = if r == 0 {
                0
            } else {
                carry += r;
                let over = usize::from(carry >= look);
                carry -= over * look;
                over
            };
            base = wrap(base + q + over);
            idx
        })
    }
}

/// How widely the search looks: `Exact` follows every path; `Beam` at a
/// switch with more than `beam` members looks at `width` of them and
/// follows the `beam` coolest.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Breadth {
    Exact,
    /// Exact, but only paths whose bottleneck is below the bar: the
    /// search prunes with it from the start (a rebalance wants nothing
    /// else). The best such path is the one `Exact` would find, if
    /// that one is below the bar.
    Below(f64),
    Beam {
        beam: usize,
        width: usize,
    },
}

impl Breadth {
    /// The beam and the width the search runs with (unbounded for an
    /// exact search).
    fn beam_width(&self) -> (usize, usize) {
        match *self {
            Breadth::Exact | Breadth::Below(_) => (usize::MAX, usize::MAX),
            Breadth::Beam { beam, width } => (beam.clamp(1, MAX_BEAM), width.max(beam)),
        }
    }

    fn below(&self) -> f64 {
        match *self {
            Breadth::Below(bar) => bar,
            _ => f64::INFINITY,
        }
    }
}

/// The best route from leaf `src` to destination index `d` for a flow of
/// `rate` (not counted in `loads`), as widely as `breadth` says; and its
/// bottleneck. None if there is no path.
pub(crate) fn best(
    net: &Net,
    loads: Loads<'_>,
    (src, d): (u32, u32),
    rate: u64,
    spread: u64,
    breadth: Breadth,
) -> Option<(f64, Route)> {
    best_from(net, loads, (src, d, net.cell_of(d, src)), rate, spread, breadth)
}

/// [`best`] with the source leaf's group toward `d` (`Net::cell_of`)
/// already read: placing many flows, the caller reads them all ahead,
/// where their cache misses overlap.
pub(crate) fn best_from(
    net: &Net,
    loads: Loads<'_>,
    (src, d, first): (u32, u32, u32),
    rate: u64,
    spread: u64,
    breadth: Breadth,
) -> Option<(f64, Route)> {
    let (beam, width) = breadth.beam_width();
    run(net, loads, (src, d, first), (rate, spread), (beam, width), breadth.below())
}

/// [`best_from`] with a beam of `(beam, width)`, comparing raw loads
/// (see [`Raw`]: the caller makes sure they compare as utilisations
/// do); the bottleneck comes as a load.
pub(crate) fn best_raw(
    net: &Net,
    loads: Raw<'_>,
    (src, d, first): (u32, u32, u32),
    (rate, spread): (u64, u64),
    (beam, width): (usize, usize),
) -> Option<(u64, Route)> {
    run(net, loads, (src, d, first), (rate, spread), (beam.clamp(1, MAX_BEAM), width.max(beam)), u64::MAX)
}

/// The best route of a group member (see [`Grouped`]) from leaf `src`
/// to destination index `d`, as widely as `breadth` says; and its
/// bottleneck, counting its group on every link of it.
pub(crate) fn best_grouped(
    net: &Net,
    loads: Grouped<'_>,
    (src, d): (u32, u32),
    spread: u64,
    breadth: Breadth,
) -> Option<(f64, Route)> {
    let (beam, width) = breadth.beam_width();
    let first = net.cell_of(d, src);
    run(net, loads, (src, d, first), (0, spread), (beam, width), (breadth.below(), 0)).map(|(u, r)| (u.0, r))
}

/// [`best_grouped`] comparing raw loads (see [`GroupedRaw`]: the caller
/// makes sure they compare as utilisations do, on a fabric of one
/// capacity); the bottleneck comes as a utilisation, as [`Grouped`]'s
/// would.
pub(crate) fn best_grouped_raw(
    net: &Net,
    loads: GroupedRaw<'_>,
    (src, d, first): (u32, u32, u32),
    spread: u64,
    breadth: Breadth,
) -> Option<(f64, Route)> {
    let (beam, width) = breadth.beam_width();
    let found = run(net, loads, (src, d, first), (0, spread), (beam, width), u64::MAX);
    // With one capacity, `fl(a) / fl(c)` of the largest load is the
    // utilisation `Grouped` takes the maximum of.
    found.map(|(a, r)| ((a >> meter::ADDED_BITS) as f64 / net.capf.first().copied().unwrap_or(1.0), r))
}

/// Whether a group member takes the path [`best_grouped`] found: only if
/// that path carries its whole group within capacity. Where no path can
/// (other load on all of them), confining would overload a link, so the
/// member is placed as a flow of its own rate instead.
pub(crate) fn confines(found: Option<&(f64, Route)>) -> bool {
    found.is_some_and(|(u, _)| *u <= 1.0 + crate::config::EPS)
}

fn run<M: Meter>(
    net: &Net,
    loads: M,
    (src, d, first): (u32, u32, u32),
    (rate, spread): (u64, u64),
    (beam, width): (usize, usize),
    below: M::U,
) -> Option<(M::U, Route)> {
    let dst = net.dests[d as usize] as u32;
    if src == dst {
        return Some((M::ZERO, Route::default()));
    }
    let mut dfs = Dfs {
        net,
        loads,
        d,
        dst,
        rate,
        spread,
        beam,
        width,
        cur: Route::default(),
        best: None,
        first,
        bar: below,
        memo: Memo { at: crate::net::NONE, worst: M::ZERO, one: None },
    };
    dfs.walk(src, 0, M::ZERO, None);
    dfs.best
}

/// True when `route` still follows the route groups from `src` to `d`
/// over links in service.
pub(crate) fn valid(net: &Net, route: &Route, src: u32, d: u32) -> bool {
    let dst = net.dests[d as usize] as u32;
    let mut s = src;
    for &dl in route.links() {
        if !net.dl_up(dl) || !net.members(d, s).iter().any(|m| m.dl == dl) {
            return false;
        }
        s = net.head(dl);
    }
    s == dst
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::OnLink;

    fn spreads() -> impl Iterator<Item = u64> {
        (1..2000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 17))
    }

    #[test]
    fn raw_loads_decide_as_utilisations_do() {
        use metaroce_topo::gen::{self, Common};
        use metaroce_topo::units::Bandwidth;
        use metaroce_topo::Routing;
        let t = gen::clos3(&Common::new("raw", Bandwidth::gbps(400)), 3, 3, 4, 4, 1).unwrap();
        let net = Net::new(&t, &Routing::compute(&t));
        assert!(net.uniform);
        let c = net.cap[0];
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        for round in 0..240 {
            // A few load levels (ties), with or without 1-bit nudges,
            // from light to near the bound where loads 1 apart give the
            // closest utilisations.
            let (base, step) = match round % 4 {
                0 => (0, c / 8),
                1 => (c / 2, c / 4),
                2 => (RAW_LIMIT / 64, c),
                _ => (RAW_LIMIT / 2, 1),
            };
            let nudge = round % 8 < 4;
            let load: Vec<u64> = (0..net.dirlinks())
                .map(|_| base + next() % 5 * step + if nudge { next() % 3 } else { 0 })
                .collect();
            for _ in 0..40 {
                let src = net.dests[(next() % net.dests.len() as u64) as usize] as u32;
                let d = (next() % net.dests.len() as u64) as u32;
                let (rate, spread) = (next() % 4, next());
                let q = (src, d, net.cell_of(d, src));
                for (beam, width) in [(1, 1), (1, 3), (2, 8), (3, 5), (16, 64)] {
                    let f = best_from(
                        &net,
                        Loads { load: &load },
                        q,
                        rate,
                        spread,
                        Breadth::Beam { beam, width },
                    );
                    let r = best_raw(&net, Raw { load: &load }, q, (rate, spread), (beam, width));
                    let r = r.map(|(a, route)| (a as f64 / net.capf[0], route));
                    assert_eq!(
                        f.map(|(u, route)| (u.to_bits(), route)),
                        r.map(|(u, route)| (u.to_bits(), route)),
                        "round {round} beam {beam} width {width}"
                    );
                    if let Some((u, route)) = f {
                        let loads = Loads { load: &load };
                        let each =
                            route.links().iter().map(|&dl| loads.util(&net, dl, rate)).fold(0.0, f64::max);
                        assert_eq!(loads.bottleneck(&net, &route, rate).to_bits(), each.to_bits());
                        assert_eq!(u.to_bits(), each.to_bits());
                    }
                }
                // A group member's search, on a group over a few links.
                let total = next() % c + 1;
                let mut links: Vec<OnLink> = (0..next() % 6)
                    .map(|_| {
                        let dl = (next() % net.dirlinks() as u64) as DirLink;
                        OnLink { dl, members: 1, rate: load[dl as usize].min(next() % total + 1) }
                    })
                    .collect();
                links.sort_by_key(|l| l.dl);
                links.dedup_by_key(|l| l.dl);
                for (beam, width) in [(1, 1), (2, 8), (16, 64)] {
                    let breadth = Breadth::Beam { beam, width };
                    let f = best_grouped(
                        &net,
                        Grouped { load: &load, links: &links, total },
                        (src, d),
                        spread,
                        breadth,
                    );
                    let raw = GroupedRaw::new(&load, &links, total);
                    let r = best_grouped_raw(&net, raw, q, spread, breadth);
                    assert_eq!(
                        f.map(|(u, route)| (u.to_bits(), route)),
                        r.map(|(u, route)| (u.to_bits(), route)),
                        "group: round {round} beam {beam} width {width}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_iterator_looks_where_at_says() {
        for spread in spreads().take(300) {
            for k in 1..70 {
                for width in [1, 2, 3, 5, 8, 16, 100] {
                    for depth in 0..4 {
                        let s = Sample::new(k, width, spread, depth);
                        let want: Vec<usize> = (0..s.look).map(|j| s.at(j)).collect();
                        assert_eq!(
                            s.iter().collect::<Vec<_>>(),
                            want,
                            "k {k} width {width} spread {spread:#x}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_small_group_is_looked_at_whole() {
        for spread in spreads() {
            let s = Sample::new(6, 8, spread, 1);
            let mut seen: Vec<usize> = (0..s.look).map(|j| s.at(j)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..6).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_wide_group_is_sampled_once_per_run_and_flows_see_different_members() {
        // 8 of 32: one member from each run of 4, and over many flows
        // every place in a run is used (evenly spaced samples saw only
        // `start mod 4`: a quarter of the members per flow class).
        let mut offsets = [false; 32];
        for spread in spreads() {
            let s = Sample::new(32, 8, spread, 1);
            let mut runs = [0; 8];
            for j in 0..s.look {
                let rel = (s.at(j) + 32 - s.start) % 32;
                runs[rel / 4] += 1;
                offsets[rel] = true;
            }
            assert_eq!(runs, [1; 8], "spread {spread:#x}");
        }
        assert!(offsets.iter().all(|&x| x), "{offsets:?}");
    }
}
