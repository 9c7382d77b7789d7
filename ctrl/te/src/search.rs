//! The best path of one flow: over the members of the route groups from
//! its source leaf to its destination leaf (valley-free shortest paths
//! only, never a failed link), the one whose most utilised link, counting
//! the flow, is least utilised. A depth-first search that prunes any
//! branch already as hot as the best path found; ties go to the first
//! path found, and each flow starts its member order at its own offset so
//! equal flows spread over equal paths.

use crate::net::{DirLink, Net, MAX_HOPS};

/// A path as directed links, with its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Route {
    pub dl: [DirLink; MAX_HOPS],
    pub len: u8,
}

impl Route {
    pub fn links(&self) -> &[DirLink] {
        &self.dl[..usize::from(self.len)]
    }
}

/// Loads the search reads: per directed link, bits per second.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Loads<'a> {
    pub load: &'a [u64],
    pub bg: &'a [u64],
}

impl Loads<'_> {
    /// Utilisation of `dl` with `extra` more bits per second on it.
    #[inline]
    pub fn util(&self, net: &Net, dl: DirLink, extra: u64) -> f64 {
        let i = dl as usize;
        (self.load[i] as f64 + self.bg[i] as f64 + extra as f64) / net.capf[i]
    }

    /// Highest utilisation along `route` with `extra` added on each link.
    pub fn bottleneck(&self, net: &Net, route: &Route, extra: u64) -> f64 {
        route.links().iter().map(|&dl| self.util(net, dl, extra)).fold(0.0, f64::max)
    }
}

struct Dfs<'a> {
    net: &'a Net,
    loads: Loads<'a>,
    d: u32,
    dst: u32,
    rate: u64,
    spread: u64,
    cur: Route,
    best: Option<(f64, Route)>,
}

impl Dfs<'_> {
    fn walk(&mut self, s: u32, depth: usize, prefix: f64) {
        if s == self.dst {
            if self.best.as_ref().is_none_or(|b| prefix < b.0) {
                self.cur.len = depth as u8;
                self.best = Some((prefix, self.cur));
            }
            return;
        }
        if depth == MAX_HOPS {
            return;
        }
        let members = self.net.members(self.d, s);
        let k = members.len();
        if k == 0 {
            return;
        }
        let start = (self.spread.rotate_left(7 * depth as u32) % k as u64) as usize;
        for i in 0..k {
            let m = members[(start + i) % k];
            if !self.net.dl_up(m.dl) {
                continue;
            }
            let u = prefix.max(self.loads.util(self.net, m.dl, self.rate));
            if self.best.as_ref().is_some_and(|b| u >= b.0) {
                continue;
            }
            self.cur.dl[depth] = m.dl;
            self.walk(m.peer, depth + 1, u);
        }
    }
}

/// The best route from leaf `src` to destination index `d` for a flow of
/// `rate` (not counted in `loads`), and its bottleneck; None if no path.
pub(crate) fn best(
    net: &Net,
    loads: Loads<'_>,
    src: u32,
    d: u32,
    rate: u64,
    spread: u64,
) -> Option<(f64, Route)> {
    let dst = net.dests[d as usize] as u32;
    if src == dst {
        return Some((0.0, Route::default()));
    }
    let mut dfs = Dfs { net, loads, d, dst, rate, spread, cur: Route::default(), best: None };
    dfs.walk(src, 0, 0.0);
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
        s = net.head[dl as usize];
    }
    s == dst
}
