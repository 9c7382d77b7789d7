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
use crate::flow::{FlowId, FlowKey};
use crate::net::{DirLink, NONE};
use crate::planner::{Planner, Status};
use crate::report::{Reason, Unplaced};
use crate::search::{self, Breadth, Raw, Route, RAW_LIMIT};

/// Fewest new flows for which the searches compare raw loads.
const RAW_BATCH: usize = 64;

/// One new flow between two leaves, as the searches and the report need
/// it.
///
/// 48 bytes: a bulk placement streams 100,000 of them through the
/// ordering and the searches several times, so the order is worked out
/// from the fields ([`Work::order`]) rather than kept beside them, and
/// the spread from the key. The key rides along for the report, which
/// would otherwise read it from the flow table at random.
#[derive(Debug, Clone, Copy)]
struct Work {
    f: FlowId,
    src: u32,
    d: u32,
    /// What the flow weighs in the order: its rate, or for a member of a
    /// receiver-bound group the group's (a member is placed as its group,
    /// see `group.rs`). A member's own rate is read from the flow table.
    rate: u64,
    key: FlowKey,
    /// Position in flow-id order.
    at: u32,
    /// The flow's receiver-bound group, or NONE: read here, in flow-id
    /// order, rather than by each search in placement order, where
    /// every flow's entry is a cache miss of its own.
    group: u32,
}

impl Work {
    /// Largest first by powers of two, then destination by destination
    /// (the search then reads one row of the route index for many flows
    /// in a row), then by rate; the flow id breaks ties. ([`in_order`]
    /// sorts by it without building it.)
    #[cfg(test)]
    fn order(&self) -> (Reverse<u32>, u32, Reverse<u64>, FlowId) {
        (Reverse(self.class()), self.d, Reverse(self.rate), self.f)
    }

    /// The rate's power of two.
    #[inline]
    fn class(&self) -> u32 {
        64 - self.rate.leading_zeros()
    }
}

/// The buffers of a bulk placement, kept by the planner between
/// decisions (`scratch.rs`); each use clears them first.
#[derive(Debug, Default)]
pub(crate) struct Bufs {
    /// The new flows in flow-id order, then in placement order.
    work: Vec<Work>,
    sorted: Vec<Work>,
    /// The counting sort's bucket starts and fill points.
    start: Vec<u32>,
    fill: Vec<u32>,
    /// The greedy's: first groups read ahead and routes found, in
    /// placement order; routes, flows added per link and the new flows
    /// link by link, and whether each is logged, by position in flow-id
    /// order.
    first: Vec<u32>,
    found: Vec<Option<Route>>,
    routes: Vec<Option<Route>>,
    more: Vec<u32>,
    slot: Vec<FlowId>,
    logged: Vec<bool>,
}

impl Planner {
    /// Places every flow that has no route yet: by the exact colouring if
    /// the batch allows it, else greedily, largest first. True if the
    /// colouring placed them at the bound in whole flows.
    pub(crate) fn place_new(&mut self, log: &mut Log, unplaced: &mut Vec<Unplaced>) -> bool {
        let mut batch = std::mem::take(&mut self.inbox.pending);
        let mut b = std::mem::take(&mut self.scratch.bulk);
        let at_bound = self.place_batch(&mut batch, &mut b, log, unplaced);
        // Nothing adds to the pending flows while a decision runs: keep
        // the batch's room for the next one.
        if self.inbox.pending.is_empty() {
            batch.clear();
            self.inbox.pending = batch;
        }
        self.scratch.bulk = b;
        at_bound
    }

    /// [`Planner::place_new`] of `batch`, with the buffers `b`.
    fn place_batch(
        &mut self,
        batch: &mut Vec<FlowId>,
        b: &mut Bufs,
        log: &mut Log,
        unplaced: &mut Vec<Unplaced>,
    ) -> bool {
        batch.sort_unstable();
        batch.dedup();
        batch.retain(|&f| {
            let i = f as usize;
            self.flows.route[i].len == 0 && matches!(self.flows.status[i], Status::New | Status::Stuck)
        });
        let work = &mut b.work;
        work.clear();
        for &f in batch.iter() {
            let i = f as usize;
            let (src, dst_leaf) = (self.src_leaf(f), self.net.host_leaf[self.flows.dst[i] as usize]);
            if src == dst_leaf {
                // Nothing to steer, nothing to load.
                self.settle(f, Route::default(), None);
                continue;
            }
            let rate = self.flows.rate[i];
            let d = self.net.dest_of[dst_leaf as usize];
            let group = self.groups.of(f);
            work.push(Work {
                f,
                src,
                d,
                // A member is placed as its group: it goes where flows of
                // its group's rate go in the order, not after every flow
                // larger than itself. Placed last, the flows of an
                // announced incast found every path a bystander had
                // already taken a link of, and one was placed at its own
                // rate beside a bystander (120% against a bound of 100%
                // on a k=4 fat-tree, and the bystander at 1.92x).
                rate: group.map_or(rate, |g| g.1.max(rate)),
                key: self.flows.key[i],
                at: work.len() as u32,
                group: group.map_or(NONE, |g| g.0),
            });
        }
        let (input, mut work) = (std::mem::take(&mut b.work), std::mem::take(&mut b.sorted));
        in_order(&input, self.net.dests.len(), b, &mut work);
        b.work = input;
        // The colouring knows nothing of groups: a batch with an incast
        // in it is placed greedily.
        let grouped = work.iter().any(|w| w.group != NONE);
        if self.config.exact_jobs && !grouped {
            let inter: Vec<FlowId> = work.iter().map(|w| w.f).collect();
            if let Some((routes, at_bound)) = self.exact_routes(&inter) {
                for (&f, r) in inter.iter().zip(routes) {
                    self.touch(log, f, Reason::New, (None, 0.0));
                    self.settle(f, r, None);
                }
                b.sorted = work;
                return at_bound;
            }
        }
        self.greedy(&work, b, log, unplaced);
        b.sorted = work;
        false
    }

    /// Places `work` in its order, each flow on its best path as the beam
    /// sees it, then records the placements.
    fn greedy(&mut self, work: &[Work], b: &mut Bufs, log: &mut Log, unplaced: &mut Vec<Unplaced>) {
        if work.is_empty() {
            // Most decisions: nothing new (and the per-link counts below
            // would cost a pass over every link).
            return;
        }
        let (beam, width) = (self.config.search_beam, self.config.search_width);
        let breadth = Breadth::Beam { beam, width };
        // Every flow's first group, read ahead: these misses overlap.
        // `by_id`: the batch in flow-id order (`place_batch` keeps it).
        let Bufs { work: by_id, first, found, routes, more, slot, logged, .. } = b;
        first.clear();
        first.extend(work.iter().map(|w| if w.d == NONE { 0 } else { self.net.cell_of(w.d, w.src) }));
        found.clear();
        more.clear();
        more.resize(self.net.dirlinks(), 0);
        // On a fabric of one link speed the searches compare raw loads,
        // no division a link, while every load stays below `RAW_LIMIT`
        // (then the decisions are the same: see `search::Raw`). `top`
        // bounds every load; finding it costs a pass over the links,
        // paid back only by a batch of some size.
        let raw = self.net.uniform && work.len() >= RAW_BATCH;
        let mut top = if raw { self.links.load.iter().copied().max().unwrap_or(0) } else { RAW_LIMIT };
        for (w, &g) in work.iter().zip(first.iter()) {
            if w.d == NONE {
                found.push(None);
                continue;
            }
            let (q, spread) = ((w.src, w.d, g), w.key.spread());
            // A member's own rate (`w.rate` is its group's: the order's).
            let rate = if w.group == NONE { w.rate } else { self.flows.rate[w.f as usize] };
            // A member takes its grouped path where that carries the
            // whole group within capacity; else it is placed as a flow of
            // its own rate (still a member: the next ones may join it).
            let group = (w.group != NONE).then(|| (w.group, self.groups.total_of(w.group)));
            let grouped = group.and_then(|(id, total)| {
                let found = if top.saturating_add(total) < RAW_LIMIT {
                    let (load, links) = (&self.links.load[..], self.groups.links(id));
                    let loads = search::GroupedRaw::new(load, links, total);
                    search::best_grouped_raw(&self.net, loads, q, spread, breadth)
                } else {
                    let loads = search::Grouped::new(&self.links.load, &self.groups, (id, total));
                    search::best_grouped(&self.net, loads, (w.src, w.d), spread, breadth)
                };
                search::confines(found.as_ref()).then_some(found).flatten()
            });
            let found_route = if let Some((_, r)) = grouped {
                Some(r)
            } else if top.saturating_add(rate) < RAW_LIMIT {
                let loads = Raw { load: &self.links.load };
                search::best_raw(&self.net, loads, q, (rate, spread), (beam, width)).map(|(_, r)| r)
            } else {
                search::best_from(&self.net, self.loads(), q, rate, spread, breadth).map(|(_, r)| r)
            };
            if let Some(r) = found_route {
                if let Some((g, _)) = group {
                    // The next members of the batch join these links.
                    self.groups.enter_all(g, r.links(), rate);
                }
                for &dl in r.links() {
                    let load = &mut self.links.load[dl as usize];
                    *load += rate;
                    top = top.max(*load);
                    more[dl as usize] += 1;
                }
            }
            // Kept in placement order: written by position in flow-id
            // order (at random) only after the searches, whose reads it
            // would otherwise push out of the cache.
            found.push(found_route);
        }
        // Every position is written below: what the buffer held from the
        // last decision need not be cleared first.
        routes.resize(work.len(), None);
        for (w, r) in work.iter().zip(found.iter()) {
            routes[w.at as usize] = *r;
        }
        // Each link's new flows are gathered in one run of `slot` (a
        // counting sort on the link: `more` becomes each run's start,
        // then its end), and each list then takes its run at once:
        // pushed flow by flow, every push was a miss on the list's header
        // and one on its end, over 41,000 lists.
        let mut sum = 0;
        for k in more.iter_mut() {
            (*k, sum) = (sum, sum + *k);
        }
        logged.clear();
        logged.resize(work.len(), false);
        for (j, (w, r)) in by_id.iter().zip(routes.iter()).enumerate() {
            let Some(r) = *r else { continue };
            let i = w.f as usize;
            logged[j] = self.flows.touched_in[i] != self.decision;
            self.flows.touched_in[i] = self.decision;
            self.flows.status[i] = Status::Placed;
            self.flows.route[i] = r;
            // What the report would write, here in flow-id order (it
            // writes it again for a flow that moves before it).
            self.flows.mask[i] = r.mask;
            // What `count(f, true)` does for a placed flow between
            // leaves, with the leaves at hand.
            let (out, into) = self.net.cuts.of_flow(w.src, self.net.dests[w.d as usize] as u32);
            self.tally.flow(out, into, self.flows.rate[i], true);
            self.flows.moved_at[i] = None;
            self.flows.placed_in[i] = self.decision;
        }
        // The runs are filled in placement order, destination by
        // destination, so the links near each destination (half of a
        // path's) take their flows while their runs are in the cache.
        // Nothing reads a link's flows in their order (each reader sorts
        // them by a key that ends in the flow id, or sums over them), so
        // this order decides nothing. Every slot is written.
        slot.resize(sum as usize, 0);
        log.new_at = log.first.len();
        log.new.reserve(work.len());
        log.placed.reserve(work.len());
        for (w, r) in work.iter().zip(found.iter()) {
            let (j, f) = (w.at as usize, w.f);
            let Some(r) = r else {
                self.flows.status[f as usize] = Status::Stuck;
                self.inbox.stuck.push(f);
                unplaced.push(self.unplaced(f, false));
                continue;
            };
            for &dl in r.links() {
                let at = &mut more[dl as usize];
                slot[*at as usize] = f;
                *at += 1;
            }
            if logged[j] {
                log.new.push(f);
                log.placed.push((w.key, *r));
            }
        }
        // What `listed_on` does for each flow, link by link.
        let mut begin = 0;
        for (dl, &end) in more.iter().enumerate() {
            if end > begin {
                self.links.on[dl].extend_from_slice(&slot[begin as usize..end as usize]);
                self.links.hot.mark(dl as DirLink);
            }
            begin = end;
        }
    }
}

/// `work` (in flow-id order) sorted by [`Work::order`]. Most of the order
/// is two small integers (the rate class and the destination), so a
/// counting sort by those, then a comparison sort inside each bucket (a
/// few flows each) instead of one of the whole batch, into `out` (each
/// entry written), with `b.start` and `b.fill` for the sort.
fn in_order(work: &[Work], dests: usize, b: &mut Bufs, out: &mut Vec<Work>) {
    // Dense ranks of the classes present, largest first.
    let mut present = [false; 65];
    for w in work {
        present[w.class() as usize] = true;
    }
    let (mut rank, mut classes) = ([0usize; 65], 0);
    for c in (0..65).rev().filter(|&c| present[c]) {
        rank[c] = classes;
        classes += 1;
    }
    // A destination index is below `dests`; NONE sorts after them all.
    let cols = dests + 1;
    let bucket = |w: &Work| rank[w.class() as usize] * cols + (w.d as usize).min(dests);
    let Bufs { start, fill, .. } = b;
    start.clear();
    start.resize(classes * cols + 1, 0);
    for w in work {
        start[bucket(w) + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    fill.clear();
    fill.extend_from_slice(start);
    // Each item straight to its place (writes at random, which need not
    // wait; gathering by a list of positions read the items at random).
    // Every position is written: what `out` held need not be cleared.
    match work.first() {
        Some(&any) => out.resize(work.len(), any),
        None => out.clear(),
    }
    for w in work {
        let k = bucket(w);
        out[fill[k] as usize] = *w;
        fill[k] += 1;
    }
    // In a bucket the class and the destination are equal: the rest of
    // the order decides.
    for r in start.windows(2).filter(|r| r[1] - r[0] > 1) {
        // The bucket's flows came in flow-id order (the scatter keeps it):
        // a stable sort by rate alone gives (rate, largest first, then
        // id), in the insertion sort it runs on a few items.
        out[r[0] as usize..r[1] as usize].sort_by_key(|w| Reverse(w.rate));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_sorts_as_the_order_says() {
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        let (mut bufs, mut out) = (Bufs::default(), Vec::new());
        for (n, dests) in [(0usize, 4usize), (1, 1), (50, 3), (3000, 40), (20, 7), (0, 2)] {
            let work: Vec<Work> = (0..n as u32)
                .map(|f| {
                    let rate = (next() % 100 + 1) << (next() % 40);
                    let d = if next().is_multiple_of(17) { NONE } else { (next() % dests as u64) as u32 };
                    Work { f, src: 0, d, rate, key: FlowKey::pair(0.into(), 0.into()), at: f, group: NONE }
                })
                .collect();
            let mut want: Vec<FlowId> = work.iter().map(|w| w.f).collect();
            want.sort_unstable_by_key(|&f| work[f as usize].order());
            // Buffers kept from the larger call before must not matter.
            in_order(&work, dests, &mut bufs, &mut out);
            let got: Vec<FlowId> = out.iter().map(|w| w.f).collect();
            assert_eq!(got, want, "n {n}");
        }
    }
}
