//! What the search compares links by: [`Loads`] (utilisation), [`Raw`]
//! (raw loads on a fabric of one link speed), and their variants for a
//! member of a receiver-bound group, [`Grouped`] and [`GroupedRaw`].

use crate::group::{Groups, LinkFilter, OnLink};
use crate::net::{DirLink, Net};

use super::Route;

/// Loads the search reads: per directed link, bits per second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loads<'a> {
    /// Placed flows plus background.
    pub load: &'a [u64],
}

impl Loads<'_> {
    /// Utilisation of `dl` with `extra` more bits per second on it.
    #[inline]
    pub fn util(&self, net: &Net, dl: DirLink, extra: u64) -> f64 {
        let i = dl as usize;
        (self.load[i] + extra) as f64 / net.capf[i]
    }

    /// Highest utilisation along `route` with `extra` added on each link.
    pub fn bottleneck(&self, net: &Net, route: &Route, extra: u64) -> f64 {
        let links = route.links();
        if net.uniform {
            // One division: with one capacity, `util` is the load
            // converted and divided, each step rounding monotonically,
            // so the largest load gives the largest utilisation.
            let top = links.iter().map(|&dl| self.load[dl as usize] + extra).max();
            return top.map_or(0.0, |a| a as f64 / net.capf[links[0] as usize]);
        }
        links.iter().map(|&dl| self.util(net, dl, extra)).fold(0.0, f64::max)
    }
}

/// What the search compares links by: their utilisation ([`Loads`]), or,
/// where every link has the same capacity, their raw load ([`Raw`]),
/// which orders them the same without a division a link.
pub(crate) trait Meter: Copy {
    type U: Copy + PartialOrd;
    /// An empty prefix.
    const ZERO: Self::U;
    /// Above every value `util` returns.
    const INF: Self::U;
    fn util(&self, net: &Net, dl: DirLink, extra: u64) -> Self::U;
    fn max(a: Self::U, b: Self::U) -> Self::U;
    fn min(a: Self::U, b: Self::U) -> Self::U;
}

impl Meter for Loads<'_> {
    type U = f64;
    const ZERO: f64 = 0.0;
    const INF: f64 = f64::INFINITY;
    #[inline]
    fn util(&self, net: &Net, dl: DirLink, extra: u64) -> f64 {
        Loads::util(self, net, dl, extra)
    }
    #[inline]
    fn max(a: f64, b: f64) -> f64 {
        a.max(b)
    }
    #[inline]
    fn min(a: f64, b: f64) -> f64 {
        a.min(b)
    }
}

/// Loads compared raw, for a fabric whose links all have one capacity
/// `c`, while every load the search reads (with the flow's rate added)
/// is below [`RAW_LIMIT`]; the caller makes sure of both.
///
/// The search then takes the same decisions as with [`Loads`], bit for
/// bit. It only compares utilisations, takes their maximum and keeps the
/// minimum found, and `Loads::util` is `fl(fl(a) / fl(c))`, with `a` and
/// `c` below 2^53 so both convert exactly: that is `a / c` correctly
/// rounded. Rounding is monotonic, so `a <= b` gives `util(a) <=
/// util(b)`; and `a < b` gives `util(a) < util(b)`: `b / c - a / c >=
/// 1 / c`, while the spacing of doubles near `b / c` is at most `(b / c)
/// 2^-52 < 1 / c` for `b < 2^52`, and two reals further apart than that
/// spacing never round to the same double. So `a` and `b` compare as
/// their utilisations do, and every maximum, minimum and ordering (ties
/// included) is the same. The sentinel `u64::MAX` stands where `Loads`
/// has infinity, above every load as infinity is above every utilisation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Raw<'a> {
    pub load: &'a [u64],
}

/// Loads (with the rate added) below this compare raw as their
/// utilisations do (see [`Raw`]).
pub(crate) const RAW_LIMIT: u64 = 1 << 52;

impl Meter for Raw<'_> {
    type U = u64;
    const ZERO: u64 = 0;
    const INF: u64 = u64::MAX;
    #[inline]
    fn util(&self, _: &Net, dl: DirLink, extra: u64) -> u64 {
        self.load[dl as usize] + extra
    }
    #[inline]
    fn max(a: u64, b: u64) -> u64 {
        a.max(b)
    }
    #[inline]
    fn min(a: u64, b: u64) -> u64 {
        a.min(b)
    }
}

/// The search of a member of a receiver-bound group ([`crate::group`]):
/// every link counts its group's whole rate on top of the flows outside
/// the group there (the members share the receiver, so they do not
/// count against each other, and together they may fill that much of
/// any link they run over); a link its group does not run over yet is
/// one more link of the group's tree. Paths compare by bottleneck, then
/// by the links they add, so a member joins its group's links as soon as
/// its bottleneck allows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grouped<'a> {
    pub load: &'a [u64],
    /// Where the group's members run ([`Groups::links`]).
    pub links: &'a [OnLink],
    /// The group's rate.
    pub total: u64,
}

impl<'a> Grouped<'a> {
    /// The meter of a member of `group` (of rate `total`).
    pub fn new(load: &'a [u64], groups: &'a Groups, (group, total): (u32, u64)) -> Self {
        Grouped { load, links: groups.links(group), total }
    }
}

impl Meter for Grouped<'_> {
    type U = (f64, u32);
    const ZERO: (f64, u32) = (0.0, 0);
    const INF: (f64, u32) = (f64::INFINITY, u32::MAX);
    #[inline]
    fn util(&self, net: &Net, dl: DirLink, _: u64) -> (f64, u32) {
        let i = dl as usize;
        match crate::group::on(self.links, dl) {
            Some(members) => ((self.load[i].saturating_sub(members) + self.total) as f64 / net.capf[i], 0),
            None => ((self.load[i] + self.total) as f64 / net.capf[i], 1),
        }
    }
    /// The bottleneck of the two, and the links both add.
    #[inline]
    fn max(a: (f64, u32), b: (f64, u32)) -> (f64, u32) {
        (a.0.max(b.0), a.1.saturating_add(b.1))
    }
    #[inline]
    fn min(a: (f64, u32), b: (f64, u32)) -> (f64, u32) {
        if b < a {
            b
        } else {
            a
        }
    }
}

/// [`Grouped`] with raw loads, for a fabric of one link capacity while
/// every load the search reads (with the group's rate added) is below
/// [`RAW_LIMIT`]: loads order as their utilisations do, ties included
/// (see [`Raw`]), and the count of links added is the same, so the
/// search decides the same as with [`Grouped`].
///
/// The pair (load, links added) is one integer, the load shifted past
/// [`ADDED_BITS`] bits that count the links: below 2^52 the load leaves
/// room, and a path has at most `MAX_HOPS` (4) links, so the count never
/// carries into the load. The integers then order as the pairs do, and
/// `max` (the larger load, the counts summed) and `min` give what the
/// pair's did, in one comparison where the pair took two and a branch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GroupedRaw<'a> {
    load: &'a [u64],
    links: &'a [OnLink],
    total: u64,
    /// `links` as a filter that rules most other links out at once.
    filter: LinkFilter,
}

/// Low bits of a [`GroupedRaw`] value that count the links a path adds
/// to its group's.
pub(crate) const ADDED_BITS: u32 = 3;
const ADDED: u64 = (1 << ADDED_BITS) - 1;

impl<'a> GroupedRaw<'a> {
    /// The meter of a member of a group of rate `total` running over
    /// `links` ([`crate::group::Groups::links`]).
    pub fn new(load: &'a [u64], links: &'a [OnLink], total: u64) -> Self {
        GroupedRaw { load, links, total, filter: LinkFilter::of(links) }
    }
}

impl Meter for GroupedRaw<'_> {
    type U = u64;
    const ZERO: u64 = 0;
    const INF: u64 = u64::MAX;
    #[inline]
    fn util(&self, _: &Net, dl: DirLink, _: u64) -> u64 {
        let i = dl as usize;
        match self.filter.on(self.links, dl) {
            Some(members) => (self.load[i].saturating_sub(members) + self.total) << ADDED_BITS,
            None => (self.load[i] + self.total) << ADDED_BITS | 1,
        }
    }
    #[inline]
    fn max(a: u64, b: u64) -> u64 {
        a.max(b) & !ADDED | ((a & ADDED) + (b & ADDED))
    }
    #[inline]
    fn min(a: u64, b: u64) -> u64 {
        a.min(b)
    }
}
