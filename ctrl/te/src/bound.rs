//! A lower bound on the highest utilisation of any placement of the
//! current demands, to judge the planner by.
//!
//! Cuts, each valid for every placement of whole flows (one path a
//! flow, as the planner places them):
//! - single flows: a flow's rate over the fastest link it can leave its
//!   leaf by;
//! - leaves and pods ([`crate::cut`]): everything a leaf sends to other
//!   leaves, or a pod to other pods (plus the background on the cut's
//!   links), over the cut's live capacity, and the same for what it
//!   receives. This part holds even for flows split over paths;
//! - the same cuts counted in whole flows: `n` flows over `k` live links
//!   put at least ⌈n/k⌉ of them on one link, each at least the least
//!   rate among them, on a link at most the fastest of the cut;
//! - and by their sizes (`Planner::whole_flows`): of a cut's `jk + 1` largest
//!   flows, some link carries `j + 1`, so at least the `j + 1` smallest
//!   of them (for `j` up to [`DEPTH`]). Four elephants leaving a pod by
//!   four uplinks beside one more flow put an elephant and that flow on
//!   one link, where the cuts above read one elephant's worth.
//!
//! On a healthy, uniform leaf-spine the leaf cut is what an even
//! fractional split over all spines reaches, and for a batch of equal
//! flows the count in whole flows is what the equitable colouring
//! reaches (`exact.rs`). On a three-tier Clos the pod cuts add what
//! leaves the pod over its super-spine uplinks.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::planner::{Planner, Status};

/// How many pigeonhole steps a cut's flows are read to: `j` = 1..=DEPTH,
/// so the `DEPTH·k + 1` largest flows of a cut of `k` links.
pub(crate) const DEPTH: usize = 3;

/// Flows the pigeonhole may read in one decision (summed over the cut
/// sides it would read); beyond that the bound is the counted one. A
/// decision over a large fabric's many flows (the bench's 100,000: a
/// failure, a hot link) would spend more reading them than deciding.
pub(crate) const MAX_READS: usize = 16_384;

impl Planner {
    /// See the module documentation.
    pub fn lower_bound(&self) -> f64 {
        self.bound_below(f64::INFINITY)
    }

    /// The lower bound, for a placement whose highest utilisation is
    /// `max`: where the cuts' sums and counts reach `max` already, the
    /// flows' sizes cannot raise it further and are not read.
    pub(crate) fn bound_below(&self, max: f64) -> f64 {
        self.raise_by_sizes(self.counted_bound(), max)
    }

    /// [`Self::bound_below`] from the counted bound already worked out.
    pub(crate) fn raise_by_sizes(&self, counted: f64, max: f64) -> f64 {
        if max <= counted + 1e-9 {
            return counted;
        }
        counted.max(self.whole_flows(counted))
    }

    /// The cuts' rates and counts, split and in whole flows (all but
    /// [`Self::whole_flows`]).
    pub(crate) fn counted_bound(&self) -> f64 {
        let (cuts, t) = (&self.net.cuts, &self.tally);
        // ⌈n/k⌉ flows of at least `min` on one of k links.
        let whole = |n: u32, k: u32, min: u64| {
            if n == 0 || k == 0 {
                return 0.0;
            }
            u64::from(n.div_ceil(k)).saturating_mul(min) as f64
        };
        t.0.iter()
            .zip(&cuts.inv)
            .enumerate()
            .filter(|(_, (t, _))| t.out_n > 0 || t.in_n > 0 || t.bg_out > 0 || t.bg_in > 0)
            .map(|(c, (t, inv))| {
                let out = (t.out_rate + t.bg_out) as f64 * inv[0];
                let inn = (t.in_rate + t.bg_in) as f64 * inv[1];
                // The largest flow out alone, or ⌈n/k⌉ of the least, on the fastest link.
                let out_whole = whole(t.out_n, cuts.out_n[c], t.out_min).max(t.out_max as f64) * inv[2];
                let in_whole = whole(t.in_n, cuts.in_n[c], t.in_min) * inv[3];
                out.max(inn).max(out_whole).max(in_whole)
            })
            .fold(0.0, f64::max)
    }

    /// The pigeonhole over a cut's largest flows (module documentation),
    /// for every cut side that could raise `floor`: of `jk + 1` flows on
    /// `k` links one link takes `j + 1`, so its load is at least the sum
    /// of the `j + 1` smallest of them; over the cut's fastest link.
    /// Background is left out (it only adds). Reads the flows on the
    /// live links of those sides only (each such flow crosses exactly one
    /// of them), and none where that is more than [`MAX_READS`].
    fn whole_flows(&self, floor: f64) -> f64 {
        let (cuts, t) = (&self.net.cuts, &self.tally);
        // The smallest j + 1 of the jk + 1 largest are at most
        // (j + 1)/(jk + 1) of their sum, so at most 2/(k + 1) of
        // everything across the side: a side that cannot pass `floor`
        // that way is not read.
        let mut sides: Vec<(usize, bool, usize, f64)> = Vec::new();
        let mut reads = 0usize;
        for (c, s) in t.0.iter().enumerate() {
            let both = [
                (false, s.out_rate, s.out_n, cuts.out_n[c], cuts.inv[c][2]),
                (true, s.in_rate, s.in_n, cuts.in_n[c], cuts.inv[c][3]),
            ];
            for (into, rate, n, k, inv) in both {
                if k > 0 && n > k && 2.0 * rate as f64 / f64::from(k + 1) * inv > floor {
                    sides.push((c, into, k as usize, inv));
                    reads += n as usize;
                }
            }
        }
        if reads > MAX_READS {
            return 0.0;
        }
        let mut best = 0.0f64;
        let mut rates: Vec<u64> = Vec::new();
        for (c, into, k, inv) in sides {
            // The side's largest DEPTH·k + 1 rates, in a min-heap.
            let keep = DEPTH * k + 1;
            let mut heap: BinaryHeap<Reverse<u64>> = BinaryHeap::with_capacity(keep + 1);
            for &dl in cuts.links(c, into).iter().filter(|&&dl| self.net.dl_ok[dl as usize]) {
                for &f in &self.links.on[dl as usize] {
                    if self.flows.status[f as usize] != Status::Placed {
                        continue;
                    }
                    let r = self.flows.rate[f as usize];
                    if heap.len() < keep {
                        heap.push(Reverse(r));
                    } else if heap.peek().is_some_and(|m| m.0 < r) {
                        heap.pop();
                        heap.push(Reverse(r));
                    }
                }
            }
            rates.clear();
            rates.extend(heap.into_iter().map(|r| r.0));
            rates.sort_unstable_by(|a, b| b.cmp(a));
            for j in 1..=DEPTH {
                // The (jk + 1)-th largest and the j before it.
                let Some(window) = rates.get(j * k - j..=j * k) else { break };
                best = best.max(window.iter().sum::<u64>() as f64 * inv);
            }
        }
        best
    }
}
