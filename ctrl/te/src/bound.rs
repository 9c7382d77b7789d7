//! A lower bound on the highest utilisation of any placement of the
//! current demands, to judge the planner by.
//!
//! Two kinds of cut, each valid for every routing, fractional or not:
//! - single flows: a flow's rate over the fastest link it can leave its
//!   leaf by;
//! - leaves: everything a leaf sends to other leaves (plus the background
//!   on its uplinks) over its live uplink capacity, and the same for what
//!   it receives.
//!
//! On a healthy, uniform leaf-spine the leaf cut is what an even
//! fractional split over all spines reaches, so there the bound is the
//! fractional optimum itself.

use crate::planner::Planner;

impl Planner {
    /// See the module documentation.
    pub fn lower_bound(&self) -> f64 {
        let net = &self.net;
        let ratio = |x: u64, c: u64| if c == 0 { 0.0 } else { x as f64 / c as f64 };
        (0..net.n)
            .filter(|&s| net.tier[s] == 0)
            .map(|s| {
                let out = ratio(self.leaf_out[s] + self.bg_up[s], net.leaf_up_cap[s]);
                let inn = ratio(self.leaf_in[s] + self.bg_in[s], net.leaf_in_cap[s]);
                out.max(inn).max(ratio(self.leaf_max[s], net.leaf_up_max[s]))
            })
            .fold(0.0, f64::max)
    }
}
