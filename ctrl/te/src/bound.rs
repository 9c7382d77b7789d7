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

use crate::net::DirLink;
use crate::planner::Planner;

impl Planner {
    /// See the module documentation.
    pub fn lower_bound(&self) -> f64 {
        let n = self.net.n;
        let (mut up_cap, mut up_bg, mut up_max) = (vec![0u64; n], vec![0u64; n], vec![0u64; n]);
        let (mut in_cap, mut in_bg) = (vec![0u64; n], vec![0u64; n]);
        for dl in 0..self.net.dirlinks() {
            if !self.net.dl_up(dl as DirLink) {
                continue;
            }
            let (t, h) = (self.net.tail[dl] as usize, self.net.head[dl] as usize);
            if self.net.tier[t] == 0 {
                up_cap[t] += self.net.cap[dl];
                up_bg[t] += self.bg[dl];
                up_max[t] = up_max[t].max(self.net.cap[dl]);
            }
            if self.net.tier[h] == 0 {
                in_cap[h] += self.net.cap[dl];
                in_bg[h] += self.bg[dl];
            }
        }
        let ratio = |x: u64, c: u64| if c == 0 { 0.0 } else { x as f64 / c as f64 };
        (0..n)
            .map(|s| {
                let out = ratio(self.leaf_out[s] + up_bg[s], up_cap[s]);
                let inn = ratio(self.leaf_in[s] + in_bg[s], in_cap[s]);
                out.max(inn).max(ratio(self.leaf_max[s], up_max[s]))
            })
            .fold(0.0, f64::max)
    }
}
