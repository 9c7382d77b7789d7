//! Receiver-bound groups: the flows of an incast.
//!
//! A flow is receiver-bound when the receiver's NIC is full and the
//! sender's is not: it sends what the receiver's share lets it, not what
//! its sender could. Two or more such flows into one host, between
//! leaves, are a group. They cannot send more together than that host
//! receives; and when they offer more (as every incast does when it
//! starts, each sender at line rate), the receiver's switch port backs
//! up and PFC pauses every link that carries any of them, back to the
//! senders: the congestion tree. The fewer links the members share, the
//! smaller the tree, and the fewer other flows it pauses.
//!
//! So a member does not search as a flow of its own rate
//! (`search::Grouped`): every link of its path is counted as carrying its
//! group's whole rate, on top of the load of the flows outside the group
//! there, and among the paths with the least bottleneck it takes the one
//! that adds the fewest links to those its group already runs over. The
//! members then share as few links as their senders allow. The loads
//! themselves stay what the links carry, so other flows, the local
//! search and the reported utilisation see the members as they are; a
//! link that carries group members alone, within its capacity, is left
//! out of the local search (`Planner::sync_hot`), which would only spread
//! them again. Confining never overloads a link: where no path carries
//! the whole group within capacity (other load on all of them), a member
//! is placed as a flow of its own rate (`search::confines`).
//!
//! A group is formed only when its rate fits on the narrowest fabric
//! link; a larger one would not fit on one path, and its members are
//! placed one by one like any other flow.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::flow::FlowId;
use crate::net::{DirLink, Mix, NONE};

/// A map keyed by group (a receiving host's index: our own small
/// integers), hashed by [`Mix`]: a member's search looks its group's rate
/// up once a flow, and SipHash was most of that.
pub(crate) type ByGroup<V> = HashMap<u32, V, BuildHasherDefault<Mix>>;

/// The groups of the planner's flows and where their members run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Groups {
    /// Per flow id: its group (the receiving host's index), or `NONE`;
    /// ids past the end (flows added since the groups were found) are in
    /// none.
    pub member: Vec<u32>,
    /// How many flows are members.
    pub members: usize,
    /// Per group (indexed by its receiving host): the sum of its
    /// members' rates (bits per second), 0 for none. Vectors, not maps:
    /// a bulk placement looks a group up several times a member.
    pub total: Vec<u64>,
    /// Per group, by directed link: how many members run over the link,
    /// and the sum of their rates. A member's search reads its group's
    /// list alone (a few dozen links at most), by binary search.
    pub on: Vec<Vec<OnLink>>,
}

/// Members of one group on one directed link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OnLink {
    pub dl: DirLink,
    pub members: u32,
    /// The sum of their rates.
    pub rate: u64,
}

impl Groups {
    pub fn is_empty(&self) -> bool {
        self.members == 0
    }

    /// The group of `f`, with its rate.
    #[inline]
    pub fn of(&self, f: FlowId) -> Option<(u32, u64)> {
        match self.member.get(f as usize) {
            Some(&g) if g != NONE => Some((g, self.total_of(g))),
            _ => None,
        }
    }

    /// The rate of group `g` (0 for no group).
    #[inline]
    pub fn total_of(&self, g: u32) -> u64 {
        self.total.get(g as usize).copied().unwrap_or(0)
    }

    /// True when `f` is in a group.
    #[inline]
    pub fn has(&self, f: FlowId) -> bool {
        self.member.get(f as usize).is_some_and(|&g| g != NONE)
    }

    /// `f` leaves its group (it was removed); the group's rate is
    /// recomputed with the rates.
    pub fn drop_flow(&mut self, f: FlowId) {
        if let Some(g) = self.member.get_mut(f as usize) {
            if *g != NONE {
                *g = NONE;
                self.members -= 1;
            }
        }
    }

    /// A member of `g` sending `rate` now runs over `dl`.
    pub fn enter(&mut self, g: u32, dl: DirLink, rate: u64) {
        self.enter_all(g, &[dl], rate);
    }

    /// [`Groups::enter`] for each of `dls` (one look-up of the group).
    pub fn enter_all(&mut self, g: u32, dls: &[DirLink], rate: u64) {
        if dls.is_empty() {
            return;
        }
        let g = g as usize;
        if self.on.len() <= g {
            self.on.resize_with(g + 1, Vec::new);
        }
        let list = &mut self.on[g];
        for &dl in dls {
            match list.binary_search_by_key(&dl, |x| x.dl) {
                Ok(i) => {
                    list[i].members += 1;
                    list[i].rate += rate;
                }
                Err(i) => list.insert(i, OnLink { dl, members: 1, rate }),
            }
        }
    }

    /// A member of `g` sending `rate` left `dl`.
    pub fn leave(&mut self, g: u32, dl: DirLink, rate: u64) {
        let Some(list) = self.on.get_mut(g as usize) else { return };
        let Ok(i) = list.binary_search_by_key(&dl, |x| x.dl) else { return };
        if list[i].members > 1 {
            list[i].members -= 1;
            list[i].rate = list[i].rate.saturating_sub(rate);
        } else {
            list.remove(i);
        }
    }

    /// Where the members of `g` run.
    #[inline]
    pub fn links(&self, g: u32) -> &[OnLink] {
        self.on.get(g as usize).map_or(&[], Vec::as_slice)
    }
}

/// The rate of a group's members on `dl` (`links`: [`Groups::links`]), if any run there.
#[inline]
pub(crate) fn on(links: &[OnLink], dl: DirLink) -> Option<u64> {
    links.binary_search_by_key(&dl, |x| x.dl).ok().map(|i| links[i].rate)
}

/// A set of directed links that may give false positives, never false
/// negatives: 256 bits, one per hash of a link. A member's search asks
/// [`on`] for every link it reads, and most are not its group's (the
/// group runs near its receiver; the search looks at uplinks all over
/// the fabric): the filter answers those with one bit test instead of a
/// binary search whose branches the processor cannot predict.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LinkFilter([u64; 4]);

impl LinkFilter {
    /// The filter of a group's links (`links`: [`Groups::links`]).
    pub fn of(links: &[OnLink]) -> Self {
        let mut f = LinkFilter::default();
        for l in links {
            let b = Self::bit(l.dl);
            f.0[b >> 6] |= 1 << (b & 63);
        }
        f
    }

    /// The bit of `dl`: the top 8 bits of a multiplicative hash (links
    /// near each other in number land far apart).
    #[inline]
    fn bit(dl: DirLink) -> usize {
        (dl.wrapping_mul(0x9E37_79B1) >> 24) as usize
    }

    /// [`on`], answering None at once for most links not in `links`
    /// (the filter must be `LinkFilter::of(links)`).
    #[inline]
    pub fn on(&self, links: &[OnLink], dl: DirLink) -> Option<u64> {
        let b = Self::bit(dl);
        if self.0[b >> 6] & (1 << (b & 63)) == 0 {
            return None;
        }
        on(links, dl)
    }
}

/// One live flow as grouping needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Member {
    pub src: u32,
    pub dst: u32,
    /// Its rate after max-min.
    pub rate: u64,
    /// Between two leaves (a flow inside one leaf loads no fabric link).
    pub inter: bool,
}

/// A NIC counts as full within a thousandth (max-min shares round down).
fn full(sum: u64, cap: u64) -> bool {
    u128::from(sum) * 1000 >= u128::from(cap) * 999
}

/// The groups among `flows` (max-min rates over NICs of rate `nic[h]`):
/// per flow, its group (the receiving host) or None; and per group its
/// rate. Groups whose rate is above `fits` (the narrowest fabric link)
/// are not formed.
#[cfg(test)]
pub(crate) fn find(flows: &[Member], nic: &[u64], fits: u64) -> (Vec<Option<u32>>, ByGroup<u64>) {
    let mut of = Vec::new();
    let total = find_into(flows, nic, fits, &mut of);
    (of, total)
}

/// [`find`] with each flow's group written into `of` (cleared first: a
/// buffer the planner keeps between decisions).
pub(crate) fn find_into(flows: &[Member], nic: &[u64], fits: u64, of: &mut Vec<Option<u32>>) -> ByGroup<u64> {
    let mut out = vec![0u64; nic.len()];
    let mut inn = vec![0u64; nic.len()];
    for m in flows {
        out[m.src as usize] += m.rate;
        inn[m.dst as usize] += m.rate;
    }
    let bound = |m: &Member| {
        m.inter
            && m.rate > 0
            && full(inn[m.dst as usize], nic[m.dst as usize])
            && !full(out[m.src as usize], nic[m.src as usize])
    };
    // Per receiving host (by index: hosts are few, flows many), its
    // receiver-bound flows and their rate; each flow's bound is worked
    // out once, then dropped where its receiver forms no group.
    let mut count = vec![(0u32, 0u64); nic.len()];
    of.clear();
    of.extend(flows.iter().map(|m| {
        let b = bound(m);
        if b {
            let e = &mut count[m.dst as usize];
            e.0 += 1;
            e.1 += m.rate;
        }
        b.then_some(m.dst)
    }));
    let forms = |&(n, total): &(u32, u64)| n >= 2 && total <= fits;
    for g in of.iter_mut() {
        if g.is_some_and(|h| !forms(&count[h as usize])) {
            *g = None;
        }
    }
    count.iter().enumerate().filter(|(_, c)| forms(c)).map(|(h, &(_, total))| (h as u32, total)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1_000_000_000;

    #[test]
    fn the_filter_answers_as_the_binary_search_does() {
        let mut next = crate::xorshift(0x2545_f491_4f6c_dd1d);
        for n in [0usize, 1, 3, 17, 64, 300] {
            let mut links: Vec<OnLink> = (0..n)
                .map(|_| OnLink { dl: (next() % 5000) as DirLink, members: 1, rate: next() % 1000 + 1 })
                .collect();
            links.sort_by_key(|l| l.dl);
            links.dedup_by_key(|l| l.dl);
            let f = LinkFilter::of(&links);
            let mut ruled_out = 0;
            for dl in 0..5000 {
                assert_eq!(f.on(&links, dl), on(&links, dl), "{n} links, dl {dl}");
                let b = LinkFilter::bit(dl);
                ruled_out += usize::from(f.0[b >> 6] & (1 << (b & 63)) == 0);
            }
            // A filter that rules nothing out would be no use: with a
            // few links in it, most others are ruled out at once.
            if (1..=17).contains(&n) {
                assert!(ruled_out > 4000, "{n} links: {ruled_out} of 5000 ruled out");
            }
        }
    }

    fn m(src: u32, dst: u32, rate: u64) -> Member {
        Member { src, dst, rate, inter: true }
    }

    #[test]
    fn an_incast_is_a_group_of_its_rate() {
        // Eight senders into host 0, an eighth of its 100G each.
        let flows: Vec<Member> = (1..=8).map(|s| m(s, 0, 100 * G / 8)).collect();
        let (of, total) = find(&flows, &[100 * G; 9], 100 * G);
        assert!(of.iter().all(|g| *g == Some(0)));
        assert_eq!(total, ByGroup::from_iter([(0, 100 * G)]));
    }

    #[test]
    fn an_all_to_all_has_no_group() {
        // Every sender is full too: nobody sends less than it could.
        let mut flows = Vec::new();
        for s in 0..4 {
            for d in (0..4).filter(|&d| d != s) {
                flows.push(m(s, d, 100 * G / 3));
            }
        }
        let (of, total) = find(&flows, &[100 * G; 4], 100 * G);
        assert!(of.iter().all(Option::is_none));
        assert!(total.is_empty());
    }

    #[test]
    fn no_group_below_a_full_receiver_for_one_member_or_over_a_link() {
        let nic = [100 * G; 4];
        // Two flows of 30G: the receiver has room.
        assert!(find(&[m(1, 0, 30 * G), m(2, 0, 30 * G)], &nic, 100 * G).1.is_empty());
        // One flow filling the receiver: nothing to confine it with.
        assert!(find(&[m(1, 0, 100 * G)], &nic, 100 * G).1.is_empty());
        // Two flows filling the receiver, but the fabric's links are 40G.
        assert!(find(&[m(1, 0, 50 * G), m(2, 0, 50 * G)], &nic, 40 * G).1.is_empty());
        // A flow inside a leaf is no member (and alone leaves no group).
        let inside = Member { inter: false, ..m(2, 0, 50 * G) };
        assert!(find(&[m(1, 0, 50 * G), inside], &nic, 100 * G).1.is_empty());
    }

    #[test]
    fn members_on_a_link_are_counted_until_the_last_leaves() {
        let mut g = Groups::default();
        g.enter(0, 7, 30);
        g.enter(0, 3, 5);
        g.enter(0, 7, 20);
        g.enter(1, 7, 1);
        assert_eq!(on(g.links(0), 7), Some(50));
        assert_eq!(on(g.links(0), 3), Some(5));
        g.leave(0, 7, 30);
        assert_eq!(on(g.links(0), 7), Some(20));
        g.leave(0, 7, 20);
        assert_eq!(on(g.links(0), 7), None);
        g.leave(0, 7, 20);
        assert_eq!(on(g.links(0), 7), None, "leaving twice changes nothing");
        assert_eq!(g.links(0).len(), 1);
        assert_eq!(on(g.links(1), 7), Some(1), "another group's members are its own");
    }
}
