//! The route index's cells: per (destination leaf, switch), our index of
//! the switch's group toward the leaf. Stored as blocks of [`BLOCK`]
//! switches shared by every destination whose cells there are equal.
//!
//! A full table is 3.1 million cells (12 MB) on the bench's 2,048-switch
//! Clos, far more than the L2 cache, and the beam search's top stall was
//! reading it. Yet most of a destination's row repeats another's: a
//! super-spine reaches every leaf of a pod through the same spine, a
//! spine outside the pod uses the same group toward all of them. Shared
//! blocks bring the table to some 3,200 blocks (0.8 MB) plus an index of
//! 196 KB, and a cell costs one more read, of the destination's block
//! index (a few lines, hot while its flows are placed).
//!
//! A write to a shared block copies it first (copy on write): a routing
//! change rewrites a few blocks of a few destinations. Blocks are not
//! shared again until the next [`Cells::build`] (a routing reset).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::net::{Mix, Spare};

/// Switches per block (a power of two).
pub(crate) const BLOCK: usize = 64;
const SHIFT: u32 = BLOCK.trailing_zeros();

#[derive(Debug, Clone, Default)]
pub(crate) struct Cells {
    /// Switches per row.
    n: usize,
    /// Blocks per row.
    nb: usize,
    /// Per (destination, block of switches): where the block starts in
    /// `data` (a multiple of `BLOCK`).
    at: Vec<u32>,
    /// The blocks' cells.
    data: Spare<u32>,
    /// Per block of `data`: how many entries of `at` point to it.
    refs: Spare<u32>,
}

impl Cells {
    /// The cells of `rows` destinations over `n` switches, `cell(d, s)`
    /// each, with equal blocks shared.
    pub fn build(rows: usize, n: usize, mut cell: impl FnMut(usize, usize) -> u32) -> Self {
        let nb = n.div_ceil(BLOCK);
        let mut out = Cells { n, nb, at: vec![0; rows * nb], data: Spare::default(), refs: Spare::default() };
        let mut seen: HashMap<[u32; BLOCK], u32, BuildHasherDefault<Mix>> = HashMap::default();
        let mut block = [0u32; BLOCK];
        for d in 0..rows {
            for b in 0..nb {
                for (j, c) in block.iter_mut().enumerate() {
                    let s = b * BLOCK + j;
                    *c = if s < n { cell(d, s) } else { 0 };
                }
                let start = *seen.entry(block).or_insert_with(|| {
                    let start = out.data.len() as u32;
                    out.data.extend_from_slice(&block);
                    out.refs.push(0);
                    start
                });
                out.refs[start as usize >> SHIFT] += 1;
                out.at[d * nb + b] = start;
            }
        }
        // Room for the copies a few routing changes make, so that the
        // first of them does not move the whole table (a clone keeps it):
        // a failed leaf uplink changes the leaf's cell in every row, and
        // so copies a block per destination.
        let room = (out.data.len() / 4).max(rows * BLOCK);
        out.data.reserve(room);
        out.refs.reserve(room / BLOCK);
        out
    }

    /// The cell of switch `s` toward destination `d`.
    #[inline]
    pub fn get(&self, d: u32, s: u32) -> u32 {
        let (d, s) = (d as usize, s as usize);
        let start = self.at[d * self.nb + (s >> SHIFT)] as usize;
        self.data[start + (s & (BLOCK - 1))]
    }

    /// Sets the cell of switch `s` toward destination `d`; returns the old one.
    pub fn set(&mut self, d: u32, s: u32, g: u32) -> u32 {
        let (d, s) = (d as usize, s as usize);
        if s >= self.n {
            return 0;
        }
        let slot = d * self.nb + (s >> SHIFT);
        let mut start = self.at[slot] as usize;
        let old = self.data[start + (s & (BLOCK - 1))];
        if old == g {
            return old;
        }
        if self.refs[start >> SHIFT] > 1 {
            // Shared: this destination gets its own copy.
            self.refs[start >> SHIFT] -= 1;
            let copy = self.data.len();
            self.data.extend_from_within(start..start + BLOCK);
            self.refs.push(1);
            self.at[slot] = copy as u32;
            start = copy;
        }
        self.data[start + (s & (BLOCK - 1))] = g;
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_read_back_what_was_built_and_set() {
        let (rows, n) = (7, 150);
        // Rows 0-3 equal, the rest differ; a partial last block.
        let f = |d: usize, s: usize| if d < 4 { (s % 5) as u32 } else { (d * 1000 + s) as u32 };
        let mut c = Cells::build(rows, n, f);
        let mut want: Vec<Vec<u32>> = (0..rows).map(|d| (0..n).map(|s| f(d, s)).collect()).collect();
        assert!(c.data.len() < rows * c.nb * BLOCK, "equal blocks are shared");
        for (d, s, g) in [(1, 3, 77), (1, 4, 78), (2, 3, 79), (5, 149, 1), (0, 64, 9), (1, 3, 80)] {
            let old = c.set(d, s, g);
            assert_eq!(old, want[d as usize][s as usize]);
            want[d as usize][s as usize] = g;
            for (dd, row) in want.iter().enumerate() {
                for (ss, &x) in row.iter().enumerate() {
                    assert_eq!(c.get(dd as u32, ss as u32), x, "d {dd} s {ss}");
                }
            }
        }
        assert_eq!(c.set(0, 999, 5), 0, "beyond the switches: nothing");
        let clone = c.clone();
        assert_eq!(clone.get(1, 3), 80);
    }
}
