//! Exact placement of a batch of equal flows on a uniform two-tier
//! leaf-spine: an equitable edge colouring of the bipartite multigraph
//! whose edges are the flows (source leaf → destination leaf) and whose
//! colours are the spines.
//!
//! De Werra: a bipartite multigraph has a k-edge-colouring in which every
//! vertex sees each colour ⌈deg/k⌉ or ⌊deg/k⌋ times. Built here by
//! splitting each vertex into pieces of at most k edges and colouring the
//! result properly (König: bipartite, max degree ≤ k, so k colours do),
//! one edge at a time, flipping an alternating two-colour path where the
//! free colours of the two ends differ. Every piece sees a colour at most
//! once, so a leaf sends at most ⌈out/k⌉ flows up any one spine and
//! receives at most ⌈in/k⌉ from it: the lower bound, exactly.

use crate::net::NONE;

/// Colours `edges` (`(u, v)`, `u < nu`, `v < nv`) with `k` colours so
/// that every `u` and every `v` uses each colour at most ⌈deg/k⌉ times.
pub(crate) fn equitable(edges: &[(u32, u32)], nu: usize, nv: usize, k: usize) -> Vec<u32> {
    if k == 0 || edges.is_empty() {
        return vec![0; edges.len()];
    }
    Colouring::new(edges, nu, nv, k).colour
}

/// Groups of vertices (pods) whose edges should spread over classes of
/// colours (planes): per edge, its group on each side or NONE (an edge
/// that stays in its pod); per colour, its class; and the most edges of
/// a group a class may take, on each side.
pub(crate) struct Spread<'a> {
    pub gu: &'a [u32],
    pub gv: &'a [u32],
    pub groups: usize,
    pub class: &'a [u32],
    pub classes: usize,
    pub limit: u32,
}

/// [`equitable`], then swaps of two-colour components (which keep every
/// piece proper, so every vertex as equitable) while they lower how far
/// the groups exceed `spread.limit` in a class, within a budget of edge
/// visits. Returns the colours and whether no group exceeds it.
pub(crate) fn equitable_spread(
    edges: &[(u32, u32)],
    (nu, nv, k): (usize, usize, usize),
    spread: &Spread<'_>,
) -> (Vec<u32>, bool) {
    if k == 0 || edges.is_empty() {
        return (vec![0; edges.len()], true);
    }
    let mut c = Colouring::new(edges, nu, nv, k);
    let ok = c.spread(spread);
    (c.colour, ok)
}

struct Colouring {
    k: usize,
    /// `[piece * k + colour]`: the edge of that colour at the piece, or NONE.
    at: Vec<u32>,
    ends: Vec<(u32, u32)>,
    colour: Vec<u32>,
    chain: Vec<u32>,
}

impl Colouring {
    /// Splits every vertex into pieces of at most k edges and colours
    /// the pieces' graph properly.
    fn new(edges: &[(u32, u32)], nu: usize, nv: usize, k: usize) -> Self {
        // Split every vertex into pieces of k edges, in edge order.
        let mut seen_u = vec![0u32; nu];
        let mut seen_v = vec![0u32; nv];
        for &(u, v) in edges {
            seen_u[u as usize] += 1;
            seen_v[v as usize] += 1;
        }
        let pieces = |deg: &[u32]| -> (Vec<u32>, u32) {
            let mut base = Vec::with_capacity(deg.len());
            let mut at = 0u32;
            for &d in deg {
                base.push(at);
                at += d.div_ceil(k as u32);
            }
            (base, at)
        };
        let (base_u, nsub_u) = pieces(&seen_u);
        let (base_v, nsub_v) = pieces(&seen_v);
        seen_u.iter_mut().for_each(|x| *x = 0);
        seen_v.iter_mut().for_each(|x| *x = 0);
        let mut ends = Vec::with_capacity(edges.len());
        for &(u, v) in edges {
            let a = base_u[u as usize] + seen_u[u as usize] / k as u32;
            let b = nsub_u + base_v[v as usize] + seen_v[v as usize] / k as u32;
            seen_u[u as usize] += 1;
            seen_v[v as usize] += 1;
            ends.push((a, b));
        }
        let mut c = Colouring {
            k,
            at: vec![NONE; (nsub_u + nsub_v) as usize * k],
            ends,
            colour: vec![NONE; edges.len()],
            chain: Vec::new(),
        };
        for e in 0..edges.len() {
            c.add(e as u32);
        }
        c
    }

    fn free(&self, x: u32) -> u32 {
        let row = &self.at[x as usize * self.k..(x as usize + 1) * self.k];
        row.iter().position(|&e| e == NONE).map_or(NONE, |c| c as u32)
    }

    fn slot(&mut self, x: u32, c: u32) -> &mut u32 {
        &mut self.at[x as usize * self.k + c as usize]
    }

    fn set(&mut self, e: u32, c: u32) {
        let (a, b) = self.ends[e as usize];
        *self.slot(a, c) = e;
        *self.slot(b, c) = e;
        self.colour[e as usize] = c;
    }

    fn add(&mut self, e: u32) {
        let (a, b) = self.ends[e as usize];
        let (alpha, beta) = (self.free(a), self.free(b));
        if alpha == NONE || beta == NONE {
            // Cannot happen: every piece has at most k edges.
            return;
        }
        if *self.slot(b, alpha) == NONE {
            return self.set(e, alpha);
        }
        if *self.slot(a, beta) == NONE {
            return self.set(e, beta);
        }
        // b has alpha taken and beta free: the alpha/beta path from b is a
        // path (not a cycle), and it never reaches a (a has alpha free, and
        // the path enters a's side only over alpha edges). Swap it.
        self.chain.clear();
        self.walk((b, alpha), (alpha, beta), NONE);
        let chain = std::mem::take(&mut self.chain);
        self.swap(&chain, alpha, beta);
        self.chain = chain;
        self.set(e, alpha);
    }

    /// Swaps colours `alpha` and `beta` on the edges of `chain`.
    fn swap(&mut self, chain: &[u32], alpha: u32, beta: u32) {
        for &f in chain {
            let (p, q) = self.ends[f as usize];
            let old = self.colour[f as usize];
            *self.slot(p, old) = NONE;
            *self.slot(q, old) = NONE;
        }
        for &f in chain {
            let old = self.colour[f as usize];
            self.set(f, if old == alpha { beta } else { alpha });
        }
    }

    /// The `alpha`/`beta` component through edge `e` (coloured one of
    /// them): a path or a cycle of the pieces' graph, into `self.chain`.
    fn component(&mut self, e: u32, alpha: u32, beta: u32) {
        self.chain.clear();
        self.chain.push(e);
        let (a, b) = self.ends[e as usize];
        let other = if self.colour[e as usize] == alpha { beta } else { alpha };
        // A cycle is walked whole from one end.
        if !self.walk((a, other), (alpha, beta), e) {
            self.walk((b, other), (alpha, beta), e);
        }
    }

    /// Pushes onto `self.chain` the edges of the `alpha`/`beta` path from
    /// piece `x`, leaving it by colour `c`, up to its end or to edge
    /// `stop`; true if it met `stop`.
    fn walk(&mut self, (mut x, mut c): (u32, u32), (alpha, beta): (u32, u32), stop: u32) -> bool {
        loop {
            let f = self.at[x as usize * self.k + c as usize];
            if f == NONE {
                return false;
            }
            if f == stop {
                return true;
            }
            self.chain.push(f);
            let (p, q) = self.ends[f as usize];
            x = if p == x { q } else { p };
            c = if c == alpha { beta } else { alpha };
        }
    }

    /// See [`equitable_spread`].
    fn spread(&mut self, sp: &Spread<'_>) -> bool {
        let (k, w) = (self.k, sp.classes);
        // Per side, group and class: the edges there; and who is where.
        let mut count = vec![[0u32; 2]; sp.groups * w];
        let mut by_group: Vec<Vec<u32>> = vec![Vec::new(); 2 * sp.groups];
        for e in 0..self.colour.len() {
            let cl = sp.class[self.colour[e] as usize] as usize;
            for (side, g) in [sp.gu[e], sp.gv[e]].into_iter().enumerate() {
                if g != NONE {
                    count[g as usize * w + cl][side] += 1;
                    by_group[side * sp.groups + g as usize].push(e as u32);
                }
            }
        }
        let over = |x: u32| x.saturating_sub(sp.limit) as i64;
        let mut excess: i64 = count.iter().map(|c| over(c[0]) + over(c[1])).sum();
        let mut budget = 64 * self.colour.len() + 4096;
        'improve: while excess > 0 && budget > 0 {
            let overs: Vec<usize> =
                (0..2 * count.len()).filter(|&i| count[i / 2][i % 2] > sp.limit).collect();
            for at in overs {
                let (g, cl, side) = (at / 2 / w, at / 2 % w, at % 2);
                for &e in &by_group[side * sp.groups + g] {
                    let alpha = self.colour[e as usize];
                    if sp.class[alpha as usize] as usize != cl {
                        continue;
                    }
                    for beta in (0..k as u32).filter(|&b| sp.class[b as usize] as usize != cl) {
                        if count[g * w + sp.class[beta as usize] as usize][side] >= sp.limit {
                            continue;
                        }
                        self.component(e, alpha, beta);
                        budget = budget.saturating_sub(self.chain.len());
                        let delta = self.recount(sp, &mut count, alpha, beta, false);
                        if delta < 0 {
                            excess += delta;
                            let chain = std::mem::take(&mut self.chain);
                            self.swap(&chain, alpha, beta);
                            self.chain = chain;
                            continue 'improve;
                        }
                        self.recount(sp, &mut count, alpha, beta, true);
                        if budget == 0 {
                            break 'improve;
                        }
                    }
                }
            }
            break;
        }
        excess == 0
    }

    /// Moves the counts of `self.chain`'s edges as if their colours were
    /// swapped (`undo`: back); returns the change in excess.
    fn recount(&self, sp: &Spread<'_>, count: &mut [[u32; 2]], alpha: u32, beta: u32, undo: bool) -> i64 {
        let w = sp.classes;
        let mut delta = 0i64;
        for &f in &self.chain {
            let old = self.colour[f as usize];
            let new = if old == alpha { beta } else { alpha };
            let (from, to) = if undo { (new, old) } else { (old, new) };
            let (from, to) = (sp.class[from as usize] as usize, sp.class[to as usize] as usize);
            for (side, g) in [sp.gu[f as usize], sp.gv[f as usize]].into_iter().enumerate() {
                if g == NONE || from == to {
                    continue;
                }
                let (x, y) = (g as usize * w + from, g as usize * w + to);
                delta -= i64::from(count[x][side] > sp.limit);
                count[x][side] -= 1;
                count[y][side] += 1;
                delta += i64::from(count[y][side] > sp.limit);
            }
        }
        delta
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(edges: &[(u32, u32)], nu: usize, nv: usize, k: usize) {
        let col = equitable(edges, nu, nv, k);
        let mut cu = vec![0u32; nu * k];
        let mut cv = vec![0u32; nv * k];
        let (mut du, mut dv) = (vec![0u32; nu], vec![0u32; nv]);
        for (&(u, v), &c) in edges.iter().zip(&col) {
            assert!((c as usize) < k);
            cu[u as usize * k + c as usize] += 1;
            cv[v as usize * k + c as usize] += 1;
            du[u as usize] += 1;
            dv[v as usize] += 1;
        }
        for u in 0..nu {
            let top = du[u].div_ceil(k as u32);
            assert!(cu[u * k..(u + 1) * k].iter().all(|&x| x <= top), "u{u}");
        }
        for v in 0..nv {
            let top = dv[v].div_ceil(k as u32);
            assert!(cv[v * k..(v + 1) * k].iter().all(|&x| x <= top), "v{v}");
        }
    }

    #[test]
    fn all_to_all_between_leaves_is_equitable() {
        // 4 leaves x 3 hosts, all-to-all between hosts of different leaves.
        let mut edges = Vec::new();
        for a in 0..12u32 {
            for b in 0..12u32 {
                if a / 3 != b / 3 {
                    edges.push((a / 3, b / 3));
                }
            }
        }
        for k in 1..8 {
            check(&edges, 4, 4, k);
        }
    }

    #[test]
    fn skewed_multigraphs_are_equitable() {
        let mut x: u64 = 7;
        for round in 0..50 {
            let mut edges = Vec::new();
            for _ in 0..(round * 7 % 90 + 1) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                edges.push(((x >> 33) as u32 % 5, (x >> 45) as u32 % 3));
            }
            check(&edges, 5, 3, round % 6 + 1);
        }
    }
}
