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
//!   rate among them, on a link at most the fastest of the cut.
//!
//! On a healthy, uniform leaf-spine the leaf cut is what an even
//! fractional split over all spines reaches, and for a batch of equal
//! flows the count in whole flows is what the equitable colouring
//! reaches (`exact.rs`). On a three-tier Clos the pod cuts add what
//! leaves the pod over its super-spine uplinks.

use crate::planner::Planner;

impl Planner {
    /// See the module documentation.
    pub fn lower_bound(&self) -> f64 {
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
}
