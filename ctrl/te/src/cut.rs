//! The cuts of the lower bound, and the pods and planes of a multi-tier
//! Clos that the exact placement colours by.
//!
//! A *pod* is a set of leaves and spines joined by links between them (a
//! connected component of tiers 0 and 1); a two-tier leaf-spine is one
//! pod with no uplinks. The links leaving a pod all go up to super-spines,
//! so every flow from a leaf of one pod to a leaf of another crosses one
//! of them on the way out and one on the way in. A *plane* is a set of
//! spines that reach the same super-spines; a spine with no super-spine
//! is a plane of its own (two tiers: a colour per spine).
//!
//! Cuts are numbered: leaf cuts by the leaf's switch id, pod `p` as
//! `n + p`. Each directed link leaves at most one cut and enters at most
//! one. The live capacities are kept as links go out of and back into
//! service.

use crate::net::{DirLink, NONE};

/// The cuts' links and their live capacities (static structure, live
/// figures).
#[derive(Debug, Clone, Default)]
pub(crate) struct Cuts {
    /// Per switch: its pod, or NONE (super-spines).
    pub pod: Vec<u32>,
    /// Per switch: its plane (spines only), or NONE.
    pub plane: Vec<u32>,
    /// Per directed link: the cut it leaves and the cut it enters, or NONE.
    pub leaves: Vec<u32>,
    pub enters: Vec<u32>,
    /// Per cut: the directed links out of it and into it.
    out_links: Vec<Vec<DirLink>>,
    in_links: Vec<Vec<DirLink>>,
    /// Per cut, over links in service: capacity, link count and fastest
    /// link, out and in.
    pub out_cap: Vec<u64>,
    pub in_cap: Vec<u64>,
    pub out_n: Vec<u32>,
    pub in_n: Vec<u32>,
    pub out_max: Vec<u64>,
    pub in_max: Vec<u64>,
    /// Per cut, the inverses of `out_cap`, `in_cap`, `out_max` and
    /// `in_max` (0 for none): the bound multiplies, as it reads every cut
    /// every decision.
    pub inv: Vec<[f64; 4]>,
}

impl Cuts {
    /// The cuts of a fabric given per directed link its tail, head and
    /// capacity, and per switch its tier.
    pub fn new(tail: &[u32], head: &[u32], tier: &[u8], cap: &[u64]) -> Self {
        let n = tier.len();
        let pod = pods(tail, head, tier);
        let pods = pod.iter().filter(|&&p| p != NONE).max().map_or(0, |&p| p as usize + 1);
        let cuts = n + pods;
        let (mut leaves, mut enters) = (vec![NONE; tail.len()], vec![NONE; tail.len()]);
        let (mut out_links, mut in_links) = (vec![Vec::new(); cuts], vec![Vec::new(); cuts]);
        for dl in 0..tail.len() {
            let (t, h) = (tail[dl] as usize, head[dl] as usize);
            let out = match (tier[t], tier[h]) {
                (0, _) => t as u32,
                (1, 2) => (n as u32).saturating_add(pod[t]),
                _ => NONE,
            };
            let into = match (tier[t], tier[h]) {
                (_, 0) => h as u32,
                (2, 1) => (n as u32).saturating_add(pod[h]),
                _ => NONE,
            };
            if out != NONE && (out as usize) < cuts {
                leaves[dl] = out;
                out_links[out as usize].push(dl as DirLink);
            }
            if into != NONE && (into as usize) < cuts {
                enters[dl] = into;
                in_links[into as usize].push(dl as DirLink);
            }
        }
        let plane = planes(tail, head, tier);
        let mut c = Cuts {
            pod,
            plane,
            leaves,
            enters,
            out_links,
            in_links,
            out_cap: vec![0; cuts],
            in_cap: vec![0; cuts],
            out_n: vec![0; cuts],
            in_n: vec![0; cuts],
            out_max: vec![0; cuts],
            in_max: vec![0; cuts],
            inv: vec![[0.0; 4]; cuts],
        };
        for cut in 0..cuts {
            c.recount(cut as u32, &|_| true, cap);
        }
        c
    }

    pub fn len(&self) -> usize {
        self.out_cap.len()
    }

    /// The directed links out of cut `c` (`into` false) or into it.
    pub fn links(&self, c: usize, into: bool) -> &[DirLink] {
        let side = if into { &self.in_links } else { &self.out_links };
        side.get(c).map_or(&[], |l| &l[..])
    }

    /// Recomputes cut `c`'s live figures (`ok`: the link is in service).
    pub fn recount(&mut self, c: u32, ok: &dyn Fn(DirLink) -> bool, cap: &[u64]) {
        let c = c as usize;
        let live = |links: &[DirLink]| {
            let (mut sum, mut n, mut max) = (0u64, 0u32, 0u64);
            for &dl in links.iter().filter(|&&dl| ok(dl)) {
                let x = cap.get(dl as usize).copied().unwrap_or(0);
                (sum, n, max) = (sum + x, n + 1, max.max(x));
            }
            (sum, n, max)
        };
        (self.out_cap[c], self.out_n[c], self.out_max[c]) = live(&self.out_links[c]);
        (self.in_cap[c], self.in_n[c], self.in_max[c]) = live(&self.in_links[c]);
        let inv = |x: u64| if x == 0 { 0.0 } else { 1.0 / x as f64 };
        self.inv[c] = [inv(self.out_cap[c]), inv(self.in_cap[c]), inv(self.out_max[c]), inv(self.in_max[c])];
    }

    /// The cuts a flow from leaf `a` to leaf `b` leaves and enters: its
    /// leaves', and its pods' if they differ.
    pub fn of_flow(&self, a: u32, b: u32) -> ([u32; 2], [u32; 2]) {
        let n = self.pod.len() as u32;
        let (p, q) = (self.pod[a as usize], self.pod[b as usize]);
        if p != q && p != NONE && q != NONE {
            ([a, n + p], [b, n + q])
        } else {
            ([a, NONE], [b, NONE])
        }
    }
}

/// Connected components of tiers 0 and 1 over the links between them.
fn pods(tail: &[u32], head: &[u32], tier: &[u8]) -> Vec<u32> {
    let n = tier.len();
    let mut parent: Vec<u32> = (0..n as u32).collect();
    fn root(parent: &mut [u32], mut x: u32) -> u32 {
        while parent[x as usize] != x {
            let up = parent[parent[x as usize] as usize];
            parent[x as usize] = up;
            x = up;
        }
        x
    }
    for (&t, &h) in tail.iter().zip(head) {
        if tier[t as usize] <= 1 && tier[h as usize] <= 1 {
            let (a, b) = (root(&mut parent, t), root(&mut parent, h));
            if a != b {
                parent[a.max(b) as usize] = a.min(b);
            }
        }
    }
    let mut id = vec![NONE; n];
    let mut pod = vec![NONE; n];
    let mut next = 0;
    for s in 0..n {
        if tier[s] > 1 {
            continue;
        }
        let r = root(&mut parent, s as u32) as usize;
        if id[r] == NONE {
            id[r] = next;
            next += 1;
        }
        pod[s] = id[r];
    }
    pod
}

/// Per spine, its plane: spines that reach the same set of super-spines
/// share one; a spine with none is a plane of its own.
fn planes(tail: &[u32], head: &[u32], tier: &[u8]) -> Vec<u32> {
    let n = tier.len();
    let mut ups: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (&t, &h) in tail.iter().zip(head) {
        if tier[t as usize] == 1 && tier[h as usize] == 2 {
            ups[t as usize].push(h);
        }
    }
    let mut seen: std::collections::BTreeMap<Vec<u32>, u32> = std::collections::BTreeMap::new();
    let mut plane = vec![NONE; n];
    for s in (0..n).filter(|&s| tier[s] == 1) {
        let mut set = std::mem::take(&mut ups[s]);
        set.sort_unstable();
        set.dedup();
        if set.is_empty() {
            // A plane of its own, named after the spine (never a set).
            set = vec![NONE, s as u32];
        }
        let next = seen.len() as u32;
        plane[s] = *seen.entry(set).or_insert(next);
    }
    plane
}

/// One cut's sums, out of it and into it: the placed flows' rates, how
/// many, the least rate among them (kept low: a removal leaves it, which
/// only weakens the bound until the next refresh), the largest rate out
/// (it only grows between refreshes, and every flow that set it is still
/// known), and the background on its live links. One cache line a cut:
/// every placement updates two to four of them.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
pub(crate) struct Sums {
    pub out_rate: u64,
    pub in_rate: u64,
    pub out_min: u64,
    pub in_min: u64,
    pub out_max: u64,
    pub bg_out: u64,
    pub bg_in: u64,
    pub out_n: u32,
    pub in_n: u32,
}

const EMPTY: Sums = Sums {
    out_rate: 0,
    in_rate: 0,
    out_min: u64::MAX,
    in_min: u64::MAX,
    out_max: 0,
    bg_out: 0,
    bg_in: 0,
    out_n: 0,
    in_n: 0,
};

/// Per cut, what the placed flows and the background send across it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tally(pub Vec<Sums>);

impl Tally {
    pub fn new(cuts: usize) -> Self {
        Tally(vec![EMPTY; cuts])
    }

    /// Forgets every flow (the background stays).
    pub fn clear_flows(&mut self) {
        for c in &mut self.0 {
            *c = Sums { bg_out: c.bg_out, bg_in: c.bg_in, ..EMPTY };
        }
    }

    /// Counts (or takes away) a flow of rate `r` across the cuts `out` and `into`.
    #[inline]
    pub fn flow(&mut self, out: [u32; 2], into: [u32; 2], r: u64, add: bool) {
        for c in out {
            let Some(c) = self.0.get_mut(c as usize) else { continue };
            if add {
                c.out_rate += r;
                c.out_n += 1;
                c.out_min = c.out_min.min(r);
                c.out_max = c.out_max.max(r);
            } else {
                c.out_rate = c.out_rate.saturating_sub(r);
                c.out_n = c.out_n.saturating_sub(1);
            }
        }
        for c in into {
            let Some(c) = self.0.get_mut(c as usize) else { continue };
            if add {
                c.in_rate += r;
                c.in_n += 1;
                c.in_min = c.in_min.min(r);
            } else {
                c.in_rate = c.in_rate.saturating_sub(r);
                c.in_n = c.in_n.saturating_sub(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two pods (leaves 0, 1 under spine 2; leaf 3 under spine 4), one
    /// super-spine 5 over both spines; one link each way per pair.
    #[test]
    fn pods_planes_and_cut_links() {
        let pairs = [(0u32, 2u32), (1, 2), (3, 4), (2, 5), (4, 5)];
        let (mut tail, mut head) = (Vec::new(), Vec::new());
        for (a, b) in pairs {
            tail.extend([a, b]);
            head.extend([b, a]);
        }
        let tier = [0, 0, 1, 0, 1, 2];
        let c = Cuts::new(&tail, &head, &tier, &[5; 10]);
        assert_eq!(c.pod, vec![0, 0, 0, 1, 1, NONE]);
        assert_eq!(c.plane[2], c.plane[4], "both spines reach the same super-spine");
        assert_eq!(c.len(), 6 + 2);
        // Pod 0's only uplink is 2 -> 5 (directed link 6); it enters over 5 -> 2.
        assert_eq!((c.out_n[6], c.in_n[6], c.out_cap[6]), (1, 1, 5));
        assert_eq!(c.leaves[6], 6);
        assert_eq!(c.enters[7], 6);
        assert_eq!(c.of_flow(0, 3), ([0, 6], [3, 7]));
        assert_eq!(c.of_flow(0, 1), ([0, NONE], [1, NONE]));
    }
}
