//! One decision: refresh the demands, re-place flows whose paths broke,
//! place new flows, then rebalance by local search on the hottest link,
//! within the margin, the hold-down and the move budget.

use std::cmp::Reverse;
use std::collections::HashMap;

use crate::config::EPS;
use crate::demand::max_min_into;
use crate::flow::{FlowId, FlowKey};
use crate::group::{self, Member};
use crate::net::{DirLink, NONE};
use crate::planner::{Planner, Status};
use crate::report::{LinkUse, Move, Path, Plan, Reason, Unplaced};
use crate::search::{self, Breadth, Route};

/// Two-flow move attempts per decision, at most (`eject.rs`): each
/// looks at every path of every flow on the hottest link.
const MAX_EJECTS: usize = 32;
/// Most new flows in a decision that tries two-flow moves. On the
/// bench's 100,000 flows they took the highest utilisation from 0.717 to
/// 0.715 (the bound 0.700) for some 25 ms CPU, and the single moves more
/// they allowed: not worth it in bulk, where many flows average out.
const CHAIN_BATCH: usize = 10_000;

/// The first reason and placement of every flow a decision touches.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub(crate) first: Vec<(FlowId, Reason, Option<Path>, f64)>,
    /// Flows the greedy placement placed for the first time, logged after
    /// `first[..new_at]`: a bulk decision logs 100,000 of them, and as
    /// ids they take 4 bytes each instead of 40.
    pub(crate) new: Vec<FlowId>,
    /// Beside each of `new`, its key and the route it was placed on (in
    /// placement order, as the placement had them at hand).
    pub(crate) placed: Vec<(FlowKey, Route)>,
    pub(crate) new_at: usize,
}

impl Log {
    fn len(&self) -> usize {
        self.first.len() + self.new.len()
    }
}

impl Planner {
    pub(crate) fn touch(&mut self, log: &mut Log, f: FlowId, reason: Reason, from: (Option<Path>, f64)) {
        let i = f as usize;
        if self.flows.touched_in[i] != self.decision {
            self.flows.touched_in[i] = self.decision;
            log.first.push((f, reason, from.0, from.1));
        }
    }

    /// The path and bottleneck to log for `f` before it moves.
    fn before(&self, f: FlowId) -> (Option<Path>, f64) {
        self.from(f)
    }
}

/// A flow removed and added again since the last decision shows as one
/// move from its old path to its new one (none if they are the same), not
/// as an ended flow and a new one. The first `ended` moves are the ended
/// flows (a decision reports them first).
fn merge_replaced(moves: &mut Vec<Move>, ended: usize) {
    if ended == 0 {
        return;
    }
    let ended: HashMap<FlowKey, usize> =
        moves[..ended].iter().enumerate().map(|(i, m)| (m.flow, i)).collect();
    let mut gone = vec![false; moves.len()];
    for i in 0..moves.len() {
        if moves[i].reason != Reason::New {
            continue;
        }
        let Some(&e) = ended.get(&moves[i].flow) else { continue };
        gone[e] = true;
        let (from, before) = (moves[e].from.take(), moves[e].bottleneck_before);
        if from == moves[i].to {
            gone[i] = true;
            continue;
        }
        let m = &mut moves[i];
        (m.reason, m.from, m.bottleneck_before) = (Reason::Replaced, from, before);
    }
    let mut k = 0;
    moves.retain(|_| {
        k += 1;
        !gone[k - 1]
    });
}

impl Planner {
    /// One decision at `now_ns` (the controller's clock, the same as the
    /// hold-down's): applies everything that changed since the last one
    /// and returns the moves. The state is updated to the new placement.
    pub fn plan(&mut self, now_ns: u64) -> Plan {
        self.decision += 1;
        let mut moves: Vec<Move> = std::mem::take(&mut self.inbox.ended)
            .into_iter()
            .map(|(flow, from, before)| Move {
                flow,
                reason: Reason::Ended,
                from,
                to: None,
                bottleneck_before: before,
                bottleneck_after: 0.0,
            })
            .collect();
        if self.inbox.demand_dirty {
            self.refresh_rates();
        }
        // The new flows' ids go into a buffer kept from the last decision.
        let mut log = Log {
            new: std::mem::take(&mut self.scratch.new),
            placed: std::mem::take(&mut self.scratch.placed),
            ..Log::default()
        };
        log.new.clear();
        log.placed.clear();
        // Which flows this decision puts on a route (`listed_on`).
        self.scratch.moved.reset(self.flows.key.len());
        let mut unplaced = Vec::new();
        self.repair(now_ns, &mut log, &mut unplaced);
        let logged = log.len();
        let exact = self.place_new(&mut log, &mut unplaced);
        // Two-flow moves only where new flows were placed, not at the bound
        // already and not in bulk (`eject.rs`).
        let placed = log.len() - logged;
        self.inbox.batch_dirty |= placed > 0;
        // Once the flows stop coming (a decision with none new), those
        // learned one by one are tried as one batch (`rebatch.rs`); at the
        // bound then, nothing is left for the search to do.
        let rebatched = placed == 0 && unplaced.is_empty() && self.rebatch(now_ns, &mut log);
        let chains = placed > 0 && placed <= CHAIN_BATCH && !exact;
        let (mut search_steps, mut budget_hit) =
            if rebatched { (0, false) } else { self.search(now_ns, &mut log, chains) };
        // Where single and two-flow moves stop above the bound, the new
        // flows may still get below it moving together (`rearrange.rs`).
        if chains && !rebatched && self.config.rearrange_jobs && self.rearrange(&log.new) {
            // The moves it made are of new flows; a last search pass sees
            // whether any placed flow can now go cooler still.
            let (steps, hit) = self.search(now_ns, &mut log, false);
            search_steps += steps;
            budget_hit |= hit;
        }
        let ended = moves.len();
        self.report(log, &mut moves);
        merge_replaced(&mut moves, ended);
        let hottest = self.hottest();
        let max_utilisation = hottest.map_or(0.0, |h| h.utilisation);
        Plan {
            now_ns,
            moves,
            unplaced,
            max_utilisation,
            hottest,
            lower_bound: self.bound_below(max_utilisation),
            flows: self.flow_count(),
            budget_hit,
            search_steps,
            exact: exact || rebatched,
        }
    }

    /// Caps every flow by its NICs (max-min), finds the receiver-bound
    /// groups among them ([`crate::group`]) and moves the loads to match.
    pub(crate) fn refresh_rates(&mut self) {
        let mut live = std::mem::take(&mut self.scratch.live);
        live.clear();
        live.extend(
            (0..self.flows.key.len() as FlowId).filter(|&f| self.flows.status[f as usize] != Status::Free),
        );
        let mut input = std::mem::take(&mut self.scratch.input);
        input.clear();
        input.extend(live.iter().map(|&f| {
            let i = f as usize;
            (self.flows.src[i], self.flows.dst[i], self.flows.demand[i].offered_bps())
        }));
        let mut rates = std::mem::take(&mut self.scratch.rates);
        max_min_into(&input, &self.net.host_nic, &mut self.scratch.max_min, &mut rates);
        self.scratch.input = input;
        for (&f, &r) in live.iter().zip(&rates) {
            let i = f as usize;
            let old = self.flows.rate[i];
            if old != r {
                for &dl in self.flows.route[i].links() {
                    self.links.load[dl as usize] = self.links.load[dl as usize].saturating_sub(old) + r;
                    self.links.hot.mark(dl);
                }
                self.flows.rate[i] = r;
            }
        }
        // The groups, and where their members run, from scratch (one pass
        // over the members' routes): a rate that changed changes its
        // group's, and membership follows the rates.
        let mut of = std::mem::take(&mut self.scratch.group_of);
        let total = self.find_groups(&live, &rates, &mut of);
        self.scratch.rates = rates;
        let mut groups = crate::group::Groups::default();
        if !total.is_empty() {
            groups.member = vec![NONE; self.flows.key.len()];
        }
        for (&f, g) in live.iter().zip(&of) {
            let Some(g) = *g else { continue };
            groups.member[f as usize] = g;
            groups.members += 1;
            for &dl in self.flows.route[f as usize].links() {
                groups.enter(g, dl, self.flows.rate[f as usize]);
                // Whether the link is for the local search may have changed.
                self.links.hot.mark(dl);
            }
        }
        self.scratch.group_of = of;
        // ... and the links of the members before.
        if !self.groups.is_empty() {
            for (f, &g) in self.groups.member.iter().enumerate() {
                if g == NONE {
                    continue;
                }
                for &dl in self.flows.route[f].links() {
                    self.links.hot.mark(dl);
                }
            }
        }
        groups.total = vec![0; if total.is_empty() { 0 } else { self.net.host_nic.len() }];
        for (g, t) in total {
            groups.total[g as usize] = t;
        }
        self.groups = groups;
        self.tally.clear_flows();
        for &f in &live {
            self.count(f, true);
        }
        self.scratch.live = live;
        self.inbox.demand_dirty = false;
    }

    /// [`group::find_into`] over the live flows and their new rates (none
    /// unless `confine_incasts`): each flow's group into `of`, and the
    /// groups' rates.
    fn find_groups(
        &mut self,
        live: &[FlowId],
        rates: &[u64],
        of: &mut Vec<Option<u32>>,
    ) -> group::ByGroup<u64> {
        if !self.config.confine_incasts {
            of.clear();
            of.resize(live.len(), None);
            return group::ByGroup::default();
        }
        let mut members = std::mem::take(&mut self.scratch.members);
        members.clear();
        members.extend(live.iter().zip(rates).map(|(&f, &rate)| {
            let i = f as usize;
            let (src, dst) = (self.flows.src[i], self.flows.dst[i]);
            let inter = self.src_leaf(f) != self.net.host_leaf[dst as usize];
            Member { src, dst, rate, inter }
        }));
        let total = group::find_into(&members, &self.net.host_nic, self.net.narrowest, of);
        self.scratch.members = members;
        total
    }

    /// Re-places the flows whose route broke, and notes where the route's
    /// choices moved under a flow that can stay.
    fn repair(&mut self, now: u64, log: &mut Log, unplaced: &mut Vec<Unplaced>) {
        let mut todo = std::mem::take(&mut self.inbox.suspects);
        let stuck = std::mem::take(&mut self.inbox.stuck);
        todo.extend(stuck.iter().copied().filter(|&f| self.flows.route[f as usize].len > 0));
        // Stuck flows that never had a route wait with the new ones.
        self.inbox.pending.extend(stuck.iter().copied().filter(|&f| self.flows.route[f as usize].len == 0));
        todo.sort_unstable();
        todo.dedup();
        for f in todo {
            let i = f as usize;
            if !matches!(self.flows.status[i], Status::Placed | Status::Stuck) {
                continue;
            }
            let (route, src, d) = (self.flows.route[i], self.src_leaf(f), self.dest(f));
            if d != NONE && search::valid(&self.net, &route, src, d) {
                if self.flows.status[i] == Status::Stuck {
                    self.flows.status[i] = Status::Placed;
                    self.count(f, true);
                }
                let mask = self.mask_now(f);
                if mask != self.flows.mask[i] {
                    let from = self.before(f);
                    self.touch(log, f, Reason::RouteChanged, from);
                }
                self.flows.route[i].mask = mask;
                continue;
            }
            let failed = route.links().iter().any(|&dl| !self.net.dl_up(dl));
            let reason = if failed { Reason::LinkFailed } else { Reason::RouteChanged };
            let from = self.before(f);
            self.unload(f);
            match self.best_for(f, Breadth::Exact) {
                Some((_, r)) => {
                    self.touch(log, f, reason, from);
                    self.settle(f, r, Some(now));
                }
                None => {
                    self.flows.status[i] = Status::Stuck;
                    self.load_on(f, route);
                    self.inbox.stuck.push(f);
                    unplaced.push(self.unplaced(f, failed));
                }
            }
        }
    }

    /// Local search: while the hottest link can be relieved by moving one
    /// of its flows to a path whose bottleneck is lower by the margin, do
    /// it. Stops at the first hottest link none of whose flows can move:
    /// the highest utilisation cannot go down by single moves from there,
    /// and among placements with the same highest utilisation the one
    /// with fewer moves wins. Also stops after `max_search_steps`. The
    /// links it looks at leave out those a confined incast holds alone
    /// within their capacity ([`Planner::sync_hot`]): such a link carries
    /// what the group's receiver takes and nobody else, so the highest
    /// utilisation it minimises is that of the links the other flows use.
    fn search(&mut self, now: u64, log: &mut Log, chains: bool) -> (usize, bool) {
        let (mut steps, mut moved, mut budget_hit) = (0, 0, false);
        let (mut forced, mut attempts, mut tries) = (Vec::new(), 0, crate::eject::TRIES);
        loop {
            self.sync_hot();
            let Some((_, dl)) = self.links.hot.movable() else { break };
            if steps >= self.config.max_search_steps {
                break;
            }
            steps += 1;
            if !self.relieve(dl, now, log, (&mut moved, &mut budget_hit), &mut forced) {
                // The hottest link cannot be relieved by moving one flow;
                // in a decision that placed new flows, perhaps by moving
                // two. Otherwise the highest utilisation stays, and any
                // other move would move flows without lowering it.
                if chains && attempts < MAX_EJECTS {
                    attempts += 1;
                    if self.eject(dl, &mut forced, &mut tries) {
                        continue;
                    }
                }
                break;
            }
        }
        for dl in forced {
            self.links.forced[dl as usize] = false;
            self.links.hot.mark(dl);
        }
        (steps, budget_hit)
    }

    /// Moves one flow off `dl` if that lowers its bottleneck enough.
    fn relieve(
        &mut self,
        dl: DirLink,
        now: u64,
        log: &mut Log,
        (moved, hit): (&mut usize, &mut bool),
        forced: &mut Vec<DirLink>,
    ) -> bool {
        // Largest first, flows outside a group before members: moving a
        // bystander off an incast's link keeps the incast confined.
        let mut cands = self.links.on[dl as usize].clone();
        cands.sort_unstable_by_key(|&f| (self.groups.has(f), Reverse(self.flows.rate[f as usize]), f));
        for f in cands {
            let i = f as usize;
            let fresh = self.flows.placed_in[i] == self.decision;
            if !fresh {
                if *moved >= self.config.max_moves {
                    *hit = true;
                    continue;
                }
                let held =
                    self.flows.moved_at[i].is_some_and(|t| now < t.saturating_add(self.config.hold_down_ns));
                if held {
                    continue;
                }
            }
            let need = if fresh { EPS } else { self.config.min_gain() };
            let old = self.flows.route[i];
            let before = self.loads().bottleneck(&self.net, &old, 0);
            self.unload(f);
            // Only a path cooler by the margin will do, so the search need
            // not look at any other: pruning with that bar from the start
            // finds the same best path when there is one. (The bar is a
            // hair above `before - need`: `after + need <= before` in
            // floating point can hold for an `after` a rounding above it.)
            let bar = before - need + (before.abs() + 1.0) * 1e-12;
            match self.best_for(f, Breadth::Below(bar)) {
                Some((after, r)) if r != old && after + need <= before => {
                    // Only a flow's first move of the decision is logged
                    // (a fresh one was logged as new).
                    if self.flows.touched_in[i] != self.decision {
                        // `unload` leaves the route in place: this renders the old path.
                        let from = (Some(self.render(f, self.flows.mask[i])), before);
                        self.touch(log, f, Reason::Rebalance, from);
                    }
                    // A flow placed in this decision keeps its own hold-down state.
                    let held = if fresh { self.flows.moved_at[i] } else { Some(now) };
                    self.settle(f, r, held);
                    if !fresh {
                        *moved += 1;
                    }
                    // Links a move touched stay candidates, flows or not.
                    for &x in old.links().iter().chain(r.links()) {
                        if !self.links.forced[x as usize] {
                            self.links.forced[x as usize] = true;
                            forced.push(x);
                            self.links.hot.mark(x);
                        }
                    }
                    return true;
                }
                _ => self.load_on(f, old),
            }
        }
        false
    }

    /// Puts `f` on `r` as placed in this decision; `moved` starts its
    /// hold-down. A first placement starts none: it was made with what
    /// was known then (the first three senders of an incast at a third of
    /// the receiver each, say), and a rebalance of it, once the rest of
    /// its job shows up, keeps the margin and the budget. Rebalances and
    /// repairs hold it, so a flow still moves at most once per hold-down
    /// after it was first placed.
    pub(crate) fn settle(&mut self, f: FlowId, r: Route, moved: Option<u64>) {
        let i = f as usize;
        self.flows.status[i] = Status::Placed;
        self.load_on(f, r);
        self.flows.moved_at[i] = moved;
        self.flows.placed_in[i] = self.decision;
    }

    /// The best route for `f`, which must not be loaded, searched as
    /// widely as `breadth` says.
    pub(crate) fn best_for(&self, f: FlowId, breadth: Breadth) -> Option<(f64, Route)> {
        let d = self.dest(f);
        if d == NONE {
            return None;
        }
        let i = f as usize;
        let (rate, spread) = (self.flows.rate[i], self.flows.key[i].spread());
        if let Some(group) = self.groups.of(f) {
            let loads = search::Grouped::new(&self.links.load, &self.groups, group);
            let found = search::best_grouped(&self.net, loads, (self.src_leaf(f), d), spread, breadth);
            if search::confines(found.as_ref()) {
                return found;
            }
        }
        search::best(&self.net, self.loads(), (self.src_leaf(f), d), rate, spread, breadth)
    }

    /// The flow's path as last reported, and its bottleneck now.
    fn from(&self, f: FlowId) -> (Option<Path>, f64) {
        let i = f as usize;
        let route = &self.flows.route[i];
        let path = (route.len > 0).then(|| self.render(f, self.flows.mask[i]));
        (path, self.loads().bottleneck(&self.net, route, 0))
    }

    pub(crate) fn unplaced(&self, f: FlowId, broken: bool) -> Unplaced {
        let i = f as usize;
        let (a, b) = (self.src_leaf(f), self.net.host_leaf[self.flows.dst[i] as usize]);
        let kept = (self.flows.route[i].len > 0).then(|| self.render(f, self.flows.mask[i]));
        Unplaced {
            flow: self.flows.key[i],
            why: format!("no path in service from switch {a} to switch {b}"),
            kept,
            broken,
        }
    }

    /// Turns the log into moves, skipping flows that ended where they began.
    fn report(&mut self, log: Log, moves: &mut Vec<Move>) {
        moves.reserve(log.len());
        // In the order logged: `first[..new_at]`, the new flows, the rest.
        let Log { mut first, new, placed, new_at } = log;
        let rest = first.split_off(new_at.min(first.len()));
        // Each flow's key and route first, all reads: after a bulk
        // placement the log is in placement order, not flow order, and
        // these cache misses overlap when nothing waits on them. The new
        // flows' come as the placement kept them, in the log's order,
        // unless a move since put the flow on a route again; their
        // choices were written with their routes (the flag: write them).
        let mut now = std::mem::take(&mut self.scratch.now);
        now.clear();
        let read = |f: FlowId| (self.flows.key[f as usize], self.flows.route[f as usize], true);
        now.extend(first.iter().map(|e| read(e.0)));
        let moved = &self.scratch.moved;
        let as_placed = |(&f, &(key, route)): (&FlowId, &(FlowKey, Route))| {
            if moved.get(f as usize) {
                read(f)
            } else {
                (key, route, false)
            }
        };
        now.extend(new.iter().zip(&placed).map(as_placed));
        now.extend(rest.iter().map(|e| read(e.0)));
        let entries = first.into_iter().chain(new.iter().map(|&f| (f, Reason::New, None, 0.0))).chain(rest);
        for ((f, reason, from, before), &(flow, route, mask)) in entries.zip(&now) {
            let to = self.render_route(&route, route.mask);
            if mask {
                self.flows.mask[f as usize] = route.mask;
            }
            if from.as_ref() == Some(&to) {
                continue;
            }
            moves.push(Move {
                flow,
                reason,
                from,
                bottleneck_before: before,
                bottleneck_after: self.loads().bottleneck(&self.net, &route, 0),
                to: Some(to),
            });
        }
        self.scratch.placed = placed;
        self.scratch.now = now;
        self.scratch.new = new;
    }

    /// The most utilised directed link in service (only kept, broken
    /// paths load a link out of service).
    pub(crate) fn hottest(&mut self) -> Option<LinkUse> {
        self.sync_hot();
        let (bits, dl) = self.links.hot.hottest()?;
        let utilisation = f64::from_bits(bits);
        Some(LinkUse {
            switch: self.net.tail(dl) as usize,
            port: self.net.port(dl),
            link: dl as usize / 2,
            utilisation,
        })
    }
}
