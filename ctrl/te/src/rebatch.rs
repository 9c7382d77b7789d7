//! Learned flows re-placed as a batch. Flows the switches report arrive
//! a few at a time, and each decision places its new ones against those
//! already placed: a permutation learned flow by flow can end at twice the
//! load its equal flows need on a Clos, where the same flows announced as
//! one batch are coloured at the cut bound (`exact.rs`). So the first
//! decision that places no new flow, once the flows changed, tries the
//! colouring on every placed flow together; it takes the result only when
//! that meets the lower bound the current placement misses, and then
//! moves every flow whose path changes (reason `batch`). A collective's
//! flows are idle between its iterations, and a move lands only when a
//! flow is drained, so the new plan takes effect without reordering.
//!
//! The colouring needs equal flows and knows nothing of incasts: with an
//! incast among the flows, or flows of unequal rates, nothing is tried.

use crate::decide::Log;
use crate::planner::{Planner, Status};
use crate::report::Reason;
use crate::FlowId;

/// Most flows one re-placement colours (its cost grows with the flows;
/// the local search and the next announced batch cover larger sets).
pub(crate) const MAX_REBATCH: usize = 8192;

impl Planner {
    /// Flows came or went since the last try, and the colouring could
    /// take them (no incast among them): the next decision with no new
    /// flow tries them as one batch. The caller schedules that decision.
    pub fn rebatch_pending(&self) -> bool {
        self.inbox.batch_dirty && self.config.exact_jobs && self.groups.is_empty()
    }

    /// Re-places every placed flow by the colouring if that reaches the
    /// lower bound the placement misses; true when it did.
    pub(crate) fn rebatch(&mut self, now_ns: u64, log: &mut Log) -> bool {
        let pending = self.rebatch_pending();
        self.inbox.batch_dirty = false;
        if !pending {
            return false;
        }
        let Some(hot) = self.hottest() else { return false };
        if hot.utilisation <= self.bound_below(hot.utilisation) + 1e-9 {
            return false;
        }
        let batch: Vec<FlowId> = (0..self.flows.key.len() as FlowId)
            .filter(|&f| {
                self.flows.status[f as usize] == Status::Placed && self.flows.route[f as usize].len > 0
            })
            .collect();
        if batch.len() < 2 || batch.len() > MAX_REBATCH || !self.inbox.stuck.is_empty() {
            return false;
        }
        let olds: Vec<_> = batch.iter().map(|&f| self.flows.route[f as usize]).collect();
        // Each flow's bottleneck before (its path is rendered only if it
        // moves: `unload` leaves the route in place until `settle`).
        let before: Vec<f64> = olds.iter().map(|r| self.loads().bottleneck(&self.net, r, 0)).collect();
        for &f in &batch {
            self.unload(f);
        }
        let found = self.exact_routes(&batch).filter(|&(_, at_bound)| at_bound).map(|(routes, _)| routes);
        let Some(routes) = found else {
            for (&f, &r) in batch.iter().zip(&olds) {
                self.load_on(f, r);
            }
            return false;
        };
        let mut moved = 0usize;
        for ((&f, r), (old, from)) in batch.iter().zip(routes).zip(olds.iter().zip(before)) {
            if r.links() == old.links() {
                self.load_on(f, *old);
                continue;
            }
            let path = self.render(f, self.flows.mask[f as usize]);
            self.touch(log, f, Reason::Batch, (Some(path), from));
            self.settle(f, r, Some(now_ns));
            moved += 1;
        }
        moved > 0
    }
}
