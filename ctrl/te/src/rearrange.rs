//! Rearranging a batch of new flows together, for decisions whose batch
//! the colouring could not place at the bound (unequal rates, jobs of
//! different sizes placed together, links already carrying flows) and
//! where one- and two-flow moves stop short of it.
//!
//! Greedy placement and single moves stop at a plateau: the hottest link
//! carries flows each of whose other paths crosses a link as hot, and
//! getting below it takes several flows moving at once, along chains no
//! single step sees. An All-to-All announced beside a permutation of
//! elephants on a k=4 fat-tree ended above the integer optimum in 8 of
//! 23 generated instances (up to 1.33x), up to 10 unequal flows on a
//! small three-tier Clos in 1 of 40 (1.15x); rearranged, none does
//! (`tests/lp.rs`).
//!
//! The method is negotiated congestion, as FPGA routers do it
//! (PathFinder): for a target utilisation, every movable flow on a link
//! over the target is ripped up and re-routed in turn on the route of
//! least cost, where a link costs more if the flow would take it over
//! the target (the present term, which grows each pass) and the more
//! often it was over in earlier passes (its history). Flows that fight
//! for a link learn to leave it to the one that has no other way, and a
//! flow that moves onto a full link rips up the flows there in the next
//! pass: the chains. A target is met when no link is over it after a
//! pass; then a few passes bring each flow to its coolest route within
//! the target. Targets are tried from the lower bound up, by bisection
//! towards the placement's own highest utilisation; the best placement
//! found is kept only if the highest utilisation the local search
//! minimises falls and the highest overall does not rise, and otherwise
//! every flow goes back.
//!
//! Only flows placed for the first time in this decision move (as the
//! two-flow moves: nothing has been written for them yet), announced
//! ones (a job's flows come whole through the job API; learned flows
//! come a few per report window, and a batch packed to its target leaves
//! no room for those not reported yet: in a generated leaf-spine case,
//! learned elephants beside a learned All-to-All, placing each window's
//! flows at the bound instead of 150% left the All-to-All's third and
//! fourth iterations 16% and 4% slower), outside receiver-bound groups,
//! each on the routes today's routing gives it over links in service.
//! Where the bound itself is over capacity it keeps the greedy placement
//! (see [`FULL`]). The work is bounded ([`WORK`] link evaluations a
//! decision, a quarter of it a target, [`MAX_FLOWS`] flows): some 70 ms
//! of CPU for 2,000 flows above their bound (`benches/plan.rs`). It is
//! deterministic (no hashing; ties go to the lower route index, and a
//! flow's present route is its first).

use crate::config::EPS;
use crate::flow::FlowId;
use crate::net::{DirLink, MAX_HOPS};
use crate::planner::{Planner, Status};
use crate::search::Route;

/// Largest batch of movable flows rearranged (larger batches average
/// out, and their decision must stay fast).
pub(crate) const MAX_FLOWS: usize = 2_048;
/// Routes of one flow looked at, at most.
const MAX_ROUTES: usize = 256;
/// Link evaluations a decision may spend on rearranging.
const WORK: u64 = 6_000_000;
/// Re-routing passes per target.
const PASSES: usize = 200;
/// A link at its capacity, with rounding: rearranging is for batches
/// that fit. Where the lower bound is above it, links must be shared
/// over capacity whatever the placement, and their flows share them as
/// the network shares them (per flow, not by rate), so a lower highest
/// utilisation need not finish any job sooner: in a three-tier Clos whose
/// cut carries 221% of it, placing learned elephants beside an
/// All-to-All at 225% instead of 229% finished the elephants 4-35%
/// later. There the greedy placement stays. (The bound compared is the
/// cuts' sums and flow counts, without the pigeonhole over the flows'
/// sizes, which only stops the search earlier where it reached that.)
const FULL: f64 = 1.0 + EPS;
/// Passes that bring links below the target down once it is met.
const POLISH: usize = 4;
/// Targets tried after the lower bound (bisection steps).
const PROBES: usize = 6;

/// A rearrangement problem in local indices.
struct Problem {
    /// Per local link: capacity (bits per second) and the load of every
    /// flow that stays where it is.
    cap: Vec<f64>,
    base: Vec<u64>,
    rate: Vec<u64>,
    /// Per flow, its routes as local link indices (`len` valid of each).
    routes: Vec<Vec<([u32; MAX_HOPS], u8)>>,
}

impl Problem {
    /// Highest utilisation of the links the movable flows may use, with
    /// `choice`.
    fn peak(&self, choice: &[usize]) -> f64 {
        let load = self.loads(choice);
        let used = (0..load.len()).filter(|&l| load[l] > self.base[l]);
        used.map(|l| load[l] as f64 / self.cap[l]).fold(0.0, f64::max)
    }

    fn loads(&self, choice: &[usize]) -> Vec<u64> {
        let mut load = self.base.clone();
        for (f, &c) in choice.iter().enumerate() {
            let (links, len) = &self.routes[f][c];
            for &l in &links[..usize::from(*len)] {
                load[l as usize] += self.rate[f];
            }
        }
        load
    }

    /// Negotiates a placement whose every link is within `target` (or
    /// within the flows that stay, where those alone are above it),
    /// starting from `choice`. Returns it, or None if the passes (or the
    /// work) ran out first.
    fn negotiate(&self, target: f64, start: &[usize], order: &[usize], work: &mut u64) -> Option<Vec<usize>> {
        // A target gets a quarter of the budget at most, so that one out
        // of reach leaves room for the next.
        let stop = (*work + WORK / 4).min(WORK);
        let n = self.cap.len();
        let limit: Vec<f64> = (0..n).map(|l| (target * self.cap[l]).max(self.base[l] as f64)).collect();
        let mut load: Vec<f64> = self.loads(start).into_iter().map(|x| x as f64).collect();
        let mut choice = start.to_vec();
        let mut hist = vec![0.0f64; n];
        let mut present = 0.5;
        for _ in 0..PASSES {
            for &f in order {
                let rate = self.rate[f] as f64;
                let (links, len) = &self.routes[f][choice[f]];
                // Only a flow on a link over its limit is ripped up: the
                // others are where they may stay, and a chain reaches them
                // when a flow that moves takes one of their links over.
                *work += u64::from(*len);
                if links[..usize::from(*len)]
                    .iter()
                    .all(|&l| load[l as usize] <= limit[l as usize] + EPS * self.cap[l as usize])
                {
                    continue;
                }
                for &l in &links[..usize::from(*len)] {
                    load[l as usize] -= rate;
                }
                let mut best = (f64::INFINITY, f64::INFINITY, 0usize);
                for (i, (links, len)) in self.routes[f].iter().enumerate() {
                    let (mut cost, mut peak) = (0.0, 0.0f64);
                    for &l in &links[..usize::from(*len)] {
                        let l = l as usize;
                        let after = load[l] + rate;
                        let over = (after - limit[l]) / self.cap[l];
                        let press = if over > EPS { present * (1.0 + over) } else { 0.0 };
                        cost += (1.0 + hist[l]) * (1.0 + press);
                        peak = peak.max(after / self.cap[l]);
                    }
                    *work += u64::from(*len);
                    if cost < best.0 - EPS || (cost <= best.0 + EPS && peak < best.1 - EPS) {
                        best = (cost, peak, i);
                    }
                }
                choice[f] = best.2;
                let (links, len) = &self.routes[f][best.2];
                for &l in &links[..usize::from(*len)] {
                    load[l as usize] += rate;
                }
            }
            // Over the target anywhere? Those links' history grows.
            let mut over = false;
            for l in 0..n {
                let excess = (load[l] - limit[l]) / self.cap[l];
                if excess > EPS {
                    over = true;
                    hist[l] += 1.0;
                }
            }
            if !over {
                self.polish(&mut choice, &mut load, &limit, order, work);
                return Some(choice);
            }
            if *work > stop {
                return None;
            }
            present *= 1.6;
        }
        None
    }

    /// With every link within its limit: each flow in turn takes, among
    /// its routes that keep every link within it, the one whose most
    /// utilised link is least (its present one on a tie), for a few
    /// passes. Negotiation only asks for links within the target, and
    /// leaves many at it that need not be; this keeps the target and
    /// brings the rest down, as greedy placement would.
    fn polish(&self, choice: &mut [usize], load: &mut [f64], limit: &[f64], order: &[usize], work: &mut u64) {
        for _ in 0..POLISH {
            let mut changed = false;
            for &f in order {
                let rate = self.rate[f] as f64;
                let (links, len) = &self.routes[f][choice[f]];
                for &l in &links[..usize::from(*len)] {
                    load[l as usize] -= rate;
                }
                let peak_of = |i: usize| {
                    let (links, len) = &self.routes[f][i];
                    let mut peak = 0.0f64;
                    for &l in &links[..usize::from(*len)] {
                        let l = l as usize;
                        let after = load[l] + rate;
                        if after > limit[l] + EPS * self.cap[l] {
                            return None;
                        }
                        peak = peak.max(after / self.cap[l]);
                    }
                    Some(peak)
                };
                let mut best = (peak_of(choice[f]).unwrap_or(f64::INFINITY), choice[f]);
                for i in 0..self.routes[f].len() {
                    *work += u64::from(self.routes[f][i].1);
                    if let Some(p) = peak_of(i) {
                        if p < best.0 - EPS {
                            best = (p, i);
                        }
                    }
                }
                changed |= best.1 != choice[f];
                choice[f] = best.1;
                let (links, len) = &self.routes[f][best.1];
                for &l in &links[..usize::from(*len)] {
                    load[l as usize] += rate;
                }
            }
            if !changed {
                break;
            }
        }
    }
}

impl Planner {
    /// Rearranges `fresh` (flows this decision placed for the first
    /// time) together when that lowers the highest utilisation; true if
    /// it did. See the module documentation.
    pub(crate) fn rearrange(&mut self, fresh: &[FlowId]) -> bool {
        let Some((before_movable, _)) = self.top_movable() else { return false };
        // Over capacity by the cuts' sums and counts (see FULL); the
        // flows' sizes may raise the bound to where this batch already is.
        let counted = self.counted_bound();
        if counted > FULL {
            return false;
        }
        let bound = self.raise_by_sizes(counted, before_movable);
        if before_movable <= bound + EPS {
            return false;
        }
        let before_all = self.hottest().map_or(0.0, |h| h.utilisation);
        let movable: Vec<FlowId> = fresh
            .iter()
            .copied()
            .filter(|&f| {
                let i = f as usize;
                self.flows.status[i] == Status::Placed
                    && self.flows.route[i].len > 0
                    && self.flows.demand[i].bytes_per_iter.is_some()
                    && self.free_to_move(f)
            })
            .collect();
        if movable.len() < 2 || movable.len() > MAX_FLOWS {
            return false;
        }
        // Local links: every link of every route of a movable flow.
        let mut local: Vec<u32> = vec![u32::MAX; self.links.load.len()];
        let mut links: Vec<DirLink> = Vec::new();
        let mut routes = Vec::with_capacity(movable.len());
        let mut globals: Vec<Vec<Route>> = Vec::with_capacity(movable.len());
        for &f in &movable {
            let now = self.flows.route[f as usize];
            let mut all = self.routes_of(f);
            all.truncate(MAX_ROUTES);
            // The present route first, so ties keep it.
            match all.iter().position(|r| r.links() == now.links()) {
                Some(p) => {
                    all.swap(0, p);
                    all[0] = now;
                }
                None => all.insert(0, now),
            }
            let mut mine = Vec::with_capacity(all.len());
            for r in &all {
                let mut ids = [0u32; MAX_HOPS];
                for (k, &dl) in r.links().iter().enumerate() {
                    if local[dl as usize] == u32::MAX {
                        local[dl as usize] = links.len() as u32;
                        links.push(dl);
                    }
                    ids[k] = local[dl as usize];
                }
                mine.push((ids, r.len));
            }
            routes.push(mine);
            globals.push(all);
        }
        let rate: Vec<u64> = movable.iter().map(|&f| self.flows.rate[f as usize]).collect();
        let mut base: Vec<u64> = links.iter().map(|&dl| self.links.load[dl as usize]).collect();
        for (f, r) in routes.iter().enumerate() {
            let (ids, len) = &r[0];
            for &l in &ids[..usize::from(*len)] {
                base[l as usize] = base[l as usize].saturating_sub(rate[f]);
            }
        }
        let cap: Vec<f64> = links.iter().map(|&dl| self.net.capf[dl as usize]).collect();
        let pb = Problem { cap, base, rate, routes };
        let start = vec![0usize; movable.len()];
        // Largest first, then by id: the order greedy placement uses.
        let mut order: Vec<usize> = (0..movable.len()).collect();
        order.sort_by_key(|&f| (std::cmp::Reverse(pb.rate[f]), movable[f]));

        let now_peak = pb.peak(&start);
        let (mut best, mut best_peak) = (None, now_peak);
        let mut work = 0u64;
        // Targets: the bound, then bisection between the highest target
        // not met and the best placement's highest utilisation.
        let (mut lo, mut hi, mut target) = (bound, now_peak, bound);
        for _ in 0..=PROBES {
            if hi - target <= EPS || work > WORK {
                break;
            }
            let got = pb.negotiate(target, best.as_deref().unwrap_or(&start), &order, &mut work);
            match got {
                Some(c) => {
                    let p = pb.peak(&c);
                    if p < best_peak - EPS {
                        best_peak = p;
                        best = Some(c);
                    }
                    if p <= bound + EPS {
                        break;
                    }
                    hi = best_peak.min(target);
                }
                None => lo = target,
            }
            target = (lo + hi) / 2.0;
        }
        let Some(choice) = best else { return false };
        // Apply, then keep it only if the search's objective fell and the
        // highest utilisation did not rise; otherwise every flow goes back.
        let moved: Vec<usize> = (0..movable.len()).filter(|&k| choice[k] != 0).collect();
        let put = |pl: &mut Planner, new: bool| {
            for &k in &moved {
                let f = movable[k];
                pl.unload(f);
                pl.load_on(f, globals[k][if new { choice[k] } else { 0 }]);
            }
        };
        put(self, true);
        let after_movable = self.top_movable().map_or(0.0, |t| t.0);
        let after_all = self.hottest().map_or(0.0, |h| h.utilisation);
        if after_movable < before_movable - EPS && after_all <= before_all + EPS {
            return true;
        }
        put(self, false);
        false
    }

    /// The utilisation of the hottest link the local search may relieve.
    fn top_movable(&mut self) -> Option<(f64, DirLink)> {
        self.sync_hot();
        self.links.hot.movable().map(|(bits, dl)| (f64::from_bits(bits.saturating_sub(1)), dl))
    }
}
