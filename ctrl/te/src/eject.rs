//! Two-flow moves for the local search: where no single flow on the
//! hottest link has a cooler path, one of them may still have a path
//! blocked by a single link, and a flow there may have somewhere else to
//! go. Moving both (an alternating chain of length two: the flow off the
//! hottest link onto the blocked link, the blocking flow off it) lowers
//! the hottest link and leaves every link it touches cooler than the
//! hottest was, by the margin.
//!
//! Run only in decisions that placed new flows (a batch of unequal
//! flows, or mixed jobs, not placed at the bound by the colouring and at
//! most 10,000 of them: in bulk many flows average out), whose quality
//! it is for, and only on flows placed for the first time in it; a decision after a hot link or a
//! failure keeps to single moves and its latency. A decision makes at
//! most [`TRIES`] searches for blocking flows.

use std::cmp::Reverse;

use crate::config::EPS;
use crate::flow::FlowId;
use crate::net::{DirLink, MAX_HOPS, NONE};
use crate::planner::Planner;
use crate::search::{Breadth, Route};

/// Searches for a blocking flow's new path, at most, per decision: on
/// the bench's Clos an exact search looks at 256 paths, and a decision
/// after a bulk placement must stay within its time.
pub(crate) const TRIES: usize = 256;
/// Paths of the moving flow looked at, at most.
const MAX_ROUTES: usize = 1024;

impl Planner {
    /// Every route of `f` under today's routing, at most [`MAX_ROUTES`].
    pub(crate) fn routes_of(&self, f: FlowId) -> Vec<Route> {
        let (src, d) = (self.src_leaf(f), self.dest(f));
        let mut out = Vec::new();
        if d == NONE {
            return out;
        }
        let dst = self.net.dests[d as usize] as u32;
        let mut cur = Route::default();
        self.walk_routes(src, dst, d, 0, &mut cur, &mut out);
        out
    }

    fn walk_routes(&self, s: u32, dst: u32, d: u32, depth: usize, cur: &mut Route, out: &mut Vec<Route>) {
        if s == dst {
            cur.len = depth as u8;
            out.push(*cur);
            return;
        }
        if depth == MAX_HOPS || out.len() >= MAX_ROUTES {
            return;
        }
        let members = self.net.members(d, s);
        for m in members.iter().filter(|m| self.net.dl_up(m.dl)) {
            cur.dl[depth] = m.dl;
            let bit = 1u8 << depth;
            cur.mask = if members.len() > 1 { cur.mask | bit } else { cur.mask & !bit };
            self.walk_routes(m.peer, dst, d, depth + 1, cur, out);
        }
    }

    /// May `f` take part in a two-flow move (or a rearrangement,
    /// `rearrange.rs`): placed for the first time in
    /// this decision (logged as new, so it keeps no margin, hold-down or
    /// budget: a rebalance must lower the moved flow's own bottleneck by
    /// the margin, and the blocking flow's need not go down at all), and
    /// not an incast's member.
    pub(crate) fn free_to_move(&self, f: FlowId) -> bool {
        let i = f as usize;
        !self.groups.has(f) && self.flows.placed_in[i] == self.decision && self.flows.moved_at[i].is_none()
    }

    /// Tries a two-flow move that lowers the hottest link `dl`; true if
    /// one was made.
    pub(crate) fn eject(&mut self, dl: DirLink, forced: &mut Vec<DirLink>, tries: &mut usize) -> bool {
        let mut cands = self.links.on[dl as usize].clone();
        cands.sort_unstable_by_key(|&f| (Reverse(self.flows.rate[f as usize]), f));
        for f in cands {
            if *tries == 0 {
                break;
            }
            if !self.free_to_move(f) {
                continue;
            }
            let old = self.flows.route[f as usize];
            let before = self.loads().bottleneck(&self.net, &old, 0);
            // Every link the move touches must end below this.
            let bar = before - EPS + (before.abs() + 1.0) * 1e-12;
            self.unload(f);
            let routes = self.routes_of(f);
            let rate = self.flows.rate[f as usize];
            for r in routes.into_iter().filter(|r| *r != old) {
                let mut over = r.links().iter().filter(|&&x| self.loads().util(&self.net, x, rate) > bar);
                let (Some(&block), None) = (over.next(), over.next()) else { continue };
                if block == dl {
                    continue;
                }
                if let Some(g) = self.unblock(f, r, (block, bar), tries) {
                    self.commit(f, old, g, forced);
                    return true;
                }
                if *tries == 0 {
                    break;
                }
            }
            self.load_on(f, old);
        }
        false
    }

    /// With `f` (unloaded) going onto `r`, whose only link over `bar` is
    /// `block`: moves a flow off `block` to a path below `bar` and leaves
    /// `f` loaded on `r`. Returns the flow moved and its old route, or
    /// None with the loads as they were.
    fn unblock(
        &mut self,
        f: FlowId,
        r: Route,
        (block, bar): (DirLink, f64),
        tries: &mut usize,
    ) -> Option<(FlowId, Route)> {
        let rate = self.flows.rate[f as usize];
        let mut gs = self.links.on[block as usize].clone();
        gs.sort_unstable_by_key(|&g| (self.flows.rate[g as usize], g));
        for g in gs {
            let (gi, excess) = (g as usize, self.loads().util(&self.net, block, rate) - bar);
            // Only a flow whose leaving brings `block` under the bar will do.
            if g == f || (self.flows.rate[gi] as f64) < excess * self.net.capf[block as usize] {
                continue;
            }
            if !self.free_to_move(g) {
                continue;
            }
            if *tries == 0 {
                return None;
            }
            *tries -= 1;
            let old_g = self.flows.route[gi];
            self.unload(g);
            if self.loads().util(&self.net, block, rate) > bar {
                self.load_on(g, old_g);
                continue;
            }
            self.load_on(f, r);
            match self.best_for(g, Breadth::Below(bar)) {
                Some((_, rg)) if rg != old_g => {
                    self.load_on(g, rg);
                    return Some((g, old_g));
                }
                _ => {
                    self.unload(f);
                    self.load_on(g, old_g);
                }
            }
        }
        None
    }

    /// Marks the links both flows of a two-flow move left and took as
    /// candidates for the local search (both are loaded on their new
    /// routes already, and were logged as new).
    fn commit(&mut self, f: FlowId, old: Route, g: (FlowId, Route), forced: &mut Vec<DirLink>) {
        for (x, from) in [(f, old), g] {
            for &y in from.links().iter().chain(self.flows.route[x as usize].links()) {
                if !self.links.forced[y as usize] {
                    self.links.forced[y as usize] = true;
                    forced.push(y);
                    self.links.hot.mark(y);
                }
            }
        }
    }
}
