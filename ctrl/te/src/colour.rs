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
    c.colour
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
        let (mut x, mut c) = (b, alpha);
        loop {
            let f = *self.slot(x, c);
            if f == NONE {
                break;
            }
            self.chain.push(f);
            let (p, q) = self.ends[f as usize];
            x = if p == x { q } else { p };
            c = if c == alpha { beta } else { alpha };
        }
        let chain = std::mem::take(&mut self.chain);
        for &f in &chain {
            let (p, q) = self.ends[f as usize];
            let old = self.colour[f as usize];
            *self.slot(p, old) = NONE;
            *self.slot(q, old) = NONE;
        }
        for &f in &chain {
            let old = self.colour[f as usize];
            self.set(f, if old == alpha { beta } else { alpha });
        }
        self.chain = chain;
        self.set(e, alpha);
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
