//! Placing the new flows of a decision: by the exact colouring when the
//! batch allows it, else greedily, largest first, each on the best path
//! the beam search sees.
//!
//! A bulk placement (100,000 flows on the bench's Clos) is bound by
//! memory, so the work is split by what it reads: one pass in flow-id
//! order gathers what the searches need; the searches run in placement
//! order reading only the route index and the loads; the flow table is
//! then written in flow-id order again, and the log in placement order.

use std::cmp::Reverse;

use crate::decide::Log;
use crate::flow::FlowId;
use crate::net::NONE;
use crate::planner::{Planner, Status};
use crate::report::{Reason, Unplaced};
use crate::search::{self, Breadth, Route};

/// One new flow between two leaves, as the searches need it.
#[derive(Debug, Clone, Copy)]
struct Work {
    /// Largest first by powers of two, then destination by destination
    /// (the search then reads one row of the route index for many flows
    /// in a row), then by rate; the flow id breaks ties.
    order: (Reverse<u32>, u32, Reverse<u64>, FlowId),
    src: u32,
    d: u32,
    rate: u64,
    spread: u64,
    /// Position in flow-id order.
    at: u32,
}

impl Planner {
    /// Places every flow that has no route yet: by the exact colouring if
    /// the batch allows it, else greedily, largest first. True if exact.
    pub(crate) fn place_new(&mut self, log: &mut Log, unplaced: &mut Vec<Unplaced>) -> bool {
        let mut batch = std::mem::take(&mut self.pending);
        batch.sort_unstable();
        batch.dedup();
        batch.retain(|&f| {
            let i = f as usize;
            self.flows.route[i].len == 0 && matches!(self.flows.status[i], Status::New | Status::Stuck)
        });
        let mut work = Vec::with_capacity(batch.len());
        for &f in &batch {
            let i = f as usize;
            let (src, dst_leaf) = (self.src_leaf(f), self.net.host_leaf[self.flows.dst[i] as usize]);
            if src == dst_leaf {
                // Nothing to steer, nothing to load.
                self.settle(f, Route::default(), None);
                continue;
            }
            let rate = self.flows.rate[i];
            let d = self.net.dest_of[dst_leaf as usize];
            work.push(Work {
                order: (Reverse(64 - rate.leading_zeros()), d, Reverse(rate), f),
                src,
                d,
                rate,
                spread: self.flows.key[i].spread(),
                at: work.len() as u32,
            });
        }
        work.sort_unstable_by_key(|w| w.order);
        if self.config.exact_jobs {
            let inter: Vec<FlowId> = work.iter().map(|w| w.order.3).collect();
            if let Some(routes) = self.exact_routes(&inter) {
                for (&f, r) in inter.iter().zip(routes) {
                    self.touch(log, f, Reason::New, (None, 0.0));
                    self.settle(f, r, None);
                }
                return true;
            }
        }
        self.greedy(&work, log, unplaced);
        false
    }

    /// Places `work` in its order, each flow on its best path as the beam
    /// sees it, then records the placements.
    fn greedy(&mut self, work: &[Work], log: &mut Log, unplaced: &mut Vec<Unplaced>) {
        if work.is_empty() {
            // Most decisions: nothing new (and the per-link counts below
            // would cost a pass over every link).
            return;
        }
        let breadth = Breadth::Beam { beam: self.config.search_beam, width: self.config.search_width };
        // Every flow's first group, read ahead: these misses overlap.
        let first: Vec<u32> =
            work.iter().map(|w| if w.d == NONE { 0 } else { self.net.cell_of(w.d, w.src) }).collect();
        // In placement order; by position in flow-id order.
        let mut routes: Vec<Option<Route>> = vec![None; work.len()];
        let mut more = vec![0u32; self.net.dirlinks()];
        for (w, &g) in work.iter().zip(&first) {
            if w.d == NONE {
                continue;
            }
            let q = (w.src, w.d, g);
            if let Some((_, r)) = search::best_from(&self.net, self.loads(), q, w.rate, w.spread, breadth) {
                for &dl in r.links() {
                    self.load[dl as usize] += w.rate;
                    more[dl as usize] += 1;
                }
                routes[w.at as usize] = Some(r);
            }
        }
        // Each link's flow list grows once, to its new length.
        for (list, &k) in self.on.iter_mut().zip(&more) {
            list.reserve(k as usize);
        }
        let mut ids: Vec<FlowId> = vec![0; work.len()];
        for w in work {
            ids[w.at as usize] = w.order.3;
        }
        let mut logged = vec![false; work.len()];
        for (j, (&f, r)) in ids.iter().zip(&routes).enumerate() {
            let Some(r) = *r else { continue };
            let i = f as usize;
            logged[j] = self.flows.touched_in[i] != self.decision;
            self.flows.touched_in[i] = self.decision;
            self.flows.status[i] = Status::Placed;
            self.listed_on(f, r);
            self.flows.moved_at[i] = None;
            self.flows.placed_in[i] = self.decision;
        }
        log.first.reserve(work.len());
        for w in work {
            let (j, f) = (w.at as usize, w.order.3);
            if routes[j].is_none() {
                self.flows.status[f as usize] = Status::Stuck;
                self.stuck.push(f);
                unplaced.push(self.unplaced(f, false));
            } else if logged[j] {
                log.first.push((f, Reason::New, None, 0.0));
            }
        }
    }
}
