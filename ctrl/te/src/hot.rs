//! The hottest directed link, kept up to date as loads change, so that a
//! decision after one hot link or one failure does not look at every
//! link of the fabric (about 82,000 directed links on the 2,048-switch
//! Clos) to find it.
//!
//! Two tournament trees over the directed links, one per question:
//! - `all`: the most utilised link in service (what a plan reports);
//! - `movable`: the most utilised link the local search may relieve: in
//!   service with flows on it (not a confined incast's alone within its
//!   capacity: `Planner::sync_hot`), or touched by a move of this search.
//!
//! Each leaf holds a key (the utilisation's bits, which order like the
//! utilisations since they are never negative; 0 for "not a candidate"),
//! each inner node the winner of its subtree; ties go to the lower link,
//! as a scan in link order or a max-heap on (bits, lower link) would.
//! Callers mark the links whose key may have changed; [`Hot::sync`] then
//! updates their paths, or rebuilds the trees when most links changed (a
//! bulk placement).

use crate::net::DirLink;

#[derive(Debug, Clone)]
pub(crate) struct Hot {
    /// Number of leaves: a power of two at least the number of links.
    size: usize,
    all: Tree,
    movable: Tree,
    /// Links whose keys are to be recomputed, each once.
    dirty: Vec<DirLink>,
    flagged: Vec<bool>,
    /// Everything is to be recomputed.
    stale: bool,
}

#[derive(Debug, Clone)]
struct Tree {
    key: Vec<u64>,
    /// `win[i]` for inner node `i` (1-based heap layout; leaves implicit).
    win: Vec<u32>,
}

impl Tree {
    fn new(size: usize, links: usize) -> Self {
        Tree { key: vec![0; links], win: vec![0; size] }
    }

    /// The key of leaf `i` (0 past the last link).
    #[inline]
    fn at(&self, i: u32) -> u64 {
        self.key.get(i as usize).copied().unwrap_or(0)
    }

    #[inline]
    fn better(&self, a: u32, b: u32) -> u32 {
        // Strictly greater wins; on a tie the lower link (a < b always).
        if self.at(b) > self.at(a) {
            b
        } else {
            a
        }
    }

    /// Winner of node `i`'s children; leaves are nodes `size..2 * size`.
    #[inline]
    fn child(&self, size: usize, c: usize) -> u32 {
        if c >= size {
            (c - size) as u32
        } else {
            self.win[c]
        }
    }

    fn fix(&mut self, size: usize, leaf: usize) {
        let mut i = (leaf + size) / 2;
        while i >= 1 {
            self.win[i] = self.better(self.child(size, 2 * i), self.child(size, 2 * i + 1));
            i /= 2;
        }
    }

    fn rebuild(&mut self, size: usize) {
        for i in (1..size).rev() {
            self.win[i] = self.better(self.child(size, 2 * i), self.child(size, 2 * i + 1));
        }
    }

    fn top(&self, size: usize) -> Option<(u64, DirLink)> {
        let w = if size > 1 { self.win[1] } else { 0 };
        let k = self.at(w);
        (k > 0).then_some((k, w))
    }
}

/// The two keys of one link.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keys {
    pub all: u64,
    pub movable: u64,
}

impl Hot {
    pub fn new(links: usize) -> Self {
        let size = links.next_power_of_two().max(2);
        Hot {
            size,
            all: Tree::new(size, links),
            movable: Tree::new(size, links),
            dirty: Vec::new(),
            flagged: vec![false; links],
            stale: true,
        }
    }

    /// The keys of `dl` may have changed.
    #[inline]
    pub fn mark(&mut self, dl: DirLink) {
        if self.stale {
            return;
        }
        let i = dl as usize;
        if !self.flagged[i] {
            self.flagged[i] = true;
            self.dirty.push(dl);
            // Past this many, one rebuild is cheaper than the paths.
            if self.dirty.len() > self.size / 16 {
                self.mark_all();
            }
        }
    }

    /// Every key may have changed.
    pub fn mark_all(&mut self) {
        self.stale = true;
        for dl in self.dirty.drain(..) {
            self.flagged[dl as usize] = false;
        }
    }

    /// Recomputes the marked keys with `keys` and updates the trees.
    pub fn sync(&mut self, keys: impl Fn(DirLink) -> Keys) {
        if self.stale {
            for dl in 0..self.all.key.len() {
                let k = keys(dl as DirLink);
                (self.all.key[dl], self.movable.key[dl]) = (k.all, k.movable);
            }
            self.all.rebuild(self.size);
            self.movable.rebuild(self.size);
            self.stale = false;
            return;
        }
        for dl in std::mem::take(&mut self.dirty) {
            let i = dl as usize;
            self.flagged[i] = false;
            let k = keys(dl);
            if self.all.key[i] != k.all {
                self.all.key[i] = k.all;
                self.all.fix(self.size, i);
            }
            if self.movable.key[i] != k.movable {
                self.movable.key[i] = k.movable;
                self.movable.fix(self.size, i);
            }
        }
    }

    /// The most utilised link in service with any load (as of the last
    /// sync): its key and the link.
    pub fn hottest(&self) -> Option<(u64, DirLink)> {
        self.all.top(self.size)
    }

    /// The most utilised link the local search may relieve.
    pub fn movable(&self) -> Option<(u64, DirLink)> {
        self.movable.top(self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(v: &[(u64, u64)]) -> impl Fn(DirLink) -> Keys + '_ {
        |dl| Keys { all: v[dl as usize].0, movable: v[dl as usize].1 }
    }

    #[test]
    fn finds_the_largest_key_and_the_lower_link_on_ties() {
        let mut v = vec![(0, 0); 13];
        let mut h = Hot::new(v.len());
        h.sync(keys(&v));
        assert_eq!(h.hottest(), None);
        v[5] = (7, 3);
        v[9] = (7, 4);
        v[12] = (2, 9);
        h.mark(5);
        h.mark(9);
        h.mark(12);
        h.sync(keys(&v));
        assert_eq!(h.hottest(), Some((7, 5)));
        assert_eq!(h.movable(), Some((9, 12)));
        v[5] = (1, 0);
        h.mark(5);
        h.sync(keys(&v));
        assert_eq!(h.hottest(), Some((7, 9)));
        h.mark_all();
        h.sync(keys(&v));
        assert_eq!(h.hottest(), Some((7, 9)));
    }

    #[test]
    fn matches_a_scan_after_random_updates() {
        let n = 300;
        let mut v = vec![(0u64, 0u64); n];
        let mut h = Hot::new(n);
        h.sync(keys(&v));
        let mut next = crate::xorshift(0x1234_5678_9abc_def1);
        for round in 0..2000 {
            let x = next();
            let dl = (x % n as u64) as usize;
            v[dl] = ((x >> 20) % 50, (x >> 40) % 50);
            h.mark(dl as DirLink);
            if round % 7 == 0 {
                h.sync(keys(&v));
                let scan = |f: fn(&(u64, u64)) -> u64| {
                    let mut best: Option<(u64, DirLink)> = None;
                    for (i, k) in v.iter().enumerate() {
                        if f(k) > 0 && best.is_none_or(|b| f(k) > b.0) {
                            best = Some((f(k), i as DirLink));
                        }
                    }
                    best
                };
                assert_eq!(h.hottest(), scan(|k| k.0));
                assert_eq!(h.movable(), scan(|k| k.1));
            }
        }
    }
}
