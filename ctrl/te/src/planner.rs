//! The planner's state: the flow table, per-link loads and per-link flow
//! lists (flat arrays indexed by flow id and directed link), and the calls
//! that change its inputs between decisions.

use std::collections::HashMap;

use metaroce_topo::{RouteChange, Routing, SwitchId, Topology};

use crate::config::{ConfigError, TeConfig};
use crate::cut::Tally;
use crate::flow::{Demand, FlowId, FlowKey};
use crate::group::Groups;
use crate::hot::{Hot, Keys};
use crate::net::{DirLink, Net, NONE};
use crate::report::{Hop, Path};
use crate::scratch::Scratch;
use crate::search::{Loads, Route};

/// A flow the planner refuses; the variant says which part is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    #[error("flow {key}: no host of the topology has address {ip}")]
    UnknownHost { key: FlowKey, ip: std::net::Ipv4Addr },
    #[error("flow {key}: source and destination are the same host")]
    SameHost { key: FlowKey },
    #[error("switch {switch} has no fabric port {port}")]
    UnknownPort { switch: SwitchId, port: u16 },
    #[error("flow {key} is not known to the planner; upsert it first")]
    UnknownFlow { key: FlowKey },
    #[error("flow {key}: the pinned ports do not make a path in service at switch {switch}")]
    NotAPath { key: FlowKey, switch: SwitchId },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Free,
    /// Known, never placed.
    New,
    Placed,
    /// No path at the last decision; keeps the route it had, if any.
    Stuck,
}

/// Per-flow columns, indexed by [`FlowId`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Flows {
    pub key: Vec<FlowKey>,
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub demand: Vec<Demand>,
    /// What the flow can send (max-min over NICs), bits per second.
    pub rate: Vec<u64>,
    pub route: Vec<Route>,
    /// Bit i: hop i had a choice when the route was last reported.
    pub mask: Vec<u8>,
    pub status: Vec<Status>,
    /// When the flow last moved (hold-down); `None`: never.
    pub moved_at: Vec<Option<u64>>,
    /// The decision that last placed it.
    pub placed_in: Vec<u64>,
    /// The decision that last logged it.
    pub touched_in: Vec<u64>,
    pub by_key: HashMap<FlowKey, FlowId>,
    pub free: Vec<FlowId>,
    /// Position in its destination's list (`Planner::to_dest`), or NONE.
    pub dest_pos: Vec<u32>,
}

/// The placement planner: its state, and the decision (`plan`).
///
/// See the crate documentation for the calling sequence. A clone is
/// the same state without the decision's buffers (`scratch.rs`);
/// `clone_from` keeps the target's.
#[derive(Debug)]
pub struct Planner {
    pub(crate) config: TeConfig,
    pub(crate) net: Net,
    pub(crate) flows: Flows,
    /// What each directed link carries.
    pub(crate) links: LinkLoads,
    /// Inputs waiting for the next decision, and what it must look at.
    pub(crate) inbox: Inbox,
    pub(crate) decision: u64,
    /// Per cut of the lower bound (leaves, pods): the placed flows and
    /// the background across it.
    pub(crate) tally: Tally,
    /// Per destination index, the flows toward it: a routing change that
    /// touches many cells toward one destination checks these instead of
    /// every flow on every link it touched.
    pub(crate) to_dest: Vec<Vec<FlowId>>,
    /// The incasts among the flows, and where their members run.
    pub(crate) groups: Groups,
    /// Buffers a decision fills and empties, kept between decisions.
    pub(crate) scratch: Scratch,
}

/// Per directed link: its load, its flows, and the hottest link.
#[derive(Debug, Clone)]
pub(crate) struct LinkLoads {
    /// The placed flows' rates plus the background (one array, so the
    /// search reads one number per link), and the background alone.
    pub load: Vec<u64>,
    pub bg: Vec<u64>,
    /// The flows placed on it.
    pub on: Vec<Vec<FlowId>>,
    /// The hottest link, kept as loads change.
    pub hot: Hot,
    /// Touched by a move of the running local search, so it may be
    /// relieved even with no flow left on it.
    pub forced: Vec<bool>,
}

/// What the next decision has to take in.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inbox {
    /// Flows known but not placed yet, and flows stuck without a path.
    pub pending: Vec<FlowId>,
    pub stuck: Vec<FlowId>,
    /// Flows whose route must be checked against the routing.
    pub suspects: Vec<FlowId>,
    /// Removed flows not yet reported, with the path they had.
    pub ended: Vec<(FlowKey, Option<Path>, f64)>,
    /// Demands changed: rates are shared out again.
    pub demand_dirty: bool,
    /// Flows came or went since the last re-placement as a batch.
    pub batch_dirty: bool,
}

impl Planner {
    /// A planner for `topo` routed by `routing` (with every known failure
    /// applied), with no flows yet.
    pub fn new(topo: &Topology, routing: &Routing, config: TeConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let net = Net::new(topo, routing);
        let dls = net.dirlinks();
        Ok(Planner {
            config,
            // A few slots per link up front: placing many flows then grows
            // few lists one element at a time.
            links: LinkLoads {
                load: vec![0; dls],
                bg: vec![0; dls],
                on: (0..dls).map(|_| Vec::with_capacity(4)).collect(),
                hot: Hot::new(dls),
                forced: vec![false; dls],
            },
            inbox: Inbox::default(),
            tally: Tally::new(net.cuts.len()),
            to_dest: vec![Vec::new(); net.dests.len()],
            groups: Groups::default(),
            net,
            flows: Flows::default(),
            decision: 0,
            scratch: Scratch::default(),
        })
    }

    pub fn config(&self) -> &TeConfig {
        &self.config
    }

    /// Adds a flow, or updates the demand of a known one. A new flow is
    /// placed by the next decision.
    pub fn upsert(&mut self, key: FlowKey, demand: Demand) -> Result<FlowId, FlowError> {
        if let Some(&id) = self.flows.by_key.get(&key) {
            if self.flows.demand[id as usize] != demand {
                self.flows.demand[id as usize] = demand;
                self.inbox.demand_dirty = true;
            }
            return Ok(id);
        }
        let host = |ip| self.net.host_by_ip.get(&ip).copied().ok_or(FlowError::UnknownHost { key, ip });
        let (src, dst) = (host(key.src())?, host(key.dst())?);
        if src == dst {
            return Err(FlowError::SameHost { key });
        }
        let f = &mut self.flows;
        let id = match f.free.pop() {
            Some(id) => id,
            None => {
                f.key.push(key);
                f.src.push(0);
                f.dst.push(0);
                f.demand.push(demand);
                f.rate.push(0);
                f.route.push(Route::default());
                f.mask.push(0);
                f.status.push(Status::Free);
                f.moved_at.push(None);
                f.placed_in.push(0);
                f.touched_in.push(0);
                f.dest_pos.push(NONE);
                (f.key.len() - 1) as FlowId
            }
        };
        let i = id as usize;
        (f.key[i], f.src[i], f.dst[i], f.demand[i]) = (key, src as u32, dst as u32, demand);
        (f.rate[i], f.route[i], f.mask[i]) = (0, Route::default(), 0);
        (f.status[i], f.moved_at[i], f.placed_in[i], f.touched_in[i]) = (Status::New, None, 0, 0);
        f.by_key.insert(key, id);
        let d = self.dest(id);
        if d != NONE {
            let list = &mut self.to_dest[d as usize];
            self.flows.dest_pos[i] = list.len() as u32;
            list.push(id);
        }
        self.inbox.pending.push(id);
        self.inbox.demand_dirty = true;
        Ok(id)
    }

    /// Forgets a flow; the next decision reports it as ended (with the
    /// path whose entries to remove). False if it was not known.
    pub fn remove(&mut self, key: &FlowKey) -> bool {
        let Some(id) = self.flows.by_key.remove(key) else { return false };
        self.inbox.batch_dirty = true;
        let i = id as usize;
        let had = self.flows.route[i].len > 0;
        let path = had.then(|| self.render(id, self.flows.mask[i]));
        let before = self.loads().bottleneck(&self.net, &self.flows.route[i], 0);
        self.unload(id);
        // Its group's rate is recomputed with the rates (`demand_dirty`).
        self.groups.drop_flow(id);
        let d = self.dest(id);
        if let Some(list) = self.to_dest.get_mut(d as usize) {
            let p = std::mem::replace(&mut self.flows.dest_pos[i], NONE) as usize;
            if list.get(p) == Some(&id) {
                list.swap_remove(p);
                if let Some(&moved) = list.get(p) {
                    self.flows.dest_pos[moved as usize] = p as u32;
                }
            }
        }
        self.flows.status[i] = Status::Free;
        self.flows.free.push(id);
        if had {
            self.inbox.ended.push((*key, path, before));
        }
        self.flows.route[i] = Route::default();
        self.inbox.demand_dirty = true;
        true
    }

    /// Sets the load on the egress port `port` of `switch` that the planner
    /// does not place (unsteered traffic, measured), in bits per second. A
    /// hot port makes the next decision move placed flows off it. A link
    /// out of service carries nothing: its background is ignored (set it
    /// again once the link is back).
    pub fn set_background(&mut self, switch: SwitchId, port: u16, bps: u64) -> Result<(), FlowError> {
        let dl = self
            .net
            .out_of(switch as u32)
            .find(|&dl| self.net.port(dl) == port)
            .ok_or(FlowError::UnknownPort { switch, port })?;
        if self.net.dl_up(dl) {
            self.put_background(dl, bps);
        }
        Ok(())
    }

    /// Sets the background of `dl`, keeping the per-cut sums.
    fn put_background(&mut self, dl: DirLink, bps: u64) {
        let i = dl as usize;
        let (out, into) = (self.net.cuts.leaves[i] as usize, self.net.cuts.enters[i] as usize);
        let old = std::mem::replace(&mut self.links.bg[i], bps);
        self.links.load[i] = self.links.load[i].saturating_sub(old) + bps;
        self.links.hot.mark(dl);
        if let Some(c) = self.tally.0.get_mut(out) {
            c.bg_out = c.bg_out.saturating_sub(old) + bps;
        }
        if let Some(c) = self.tally.0.get_mut(into) {
            c.bg_in = c.bg_in.saturating_sub(old) + bps;
        }
    }

    /// A link out of service carries nothing: forget its background.
    fn clear_dead_background(&mut self) {
        for dl in 0..self.net.dirlinks() as DirLink {
            if !self.net.dl_up(dl) && self.links.bg[dl as usize] > 0 {
                self.put_background(dl, 0);
            }
        }
    }

    /// Takes in the route changes that `Routing::fail_link` or
    /// `fail_switch` returned (the routing passed is the one after them):
    /// flows whose paths they touch are checked by the next decision, and
    /// re-placed at once if their path broke.
    pub fn routing_changed(&mut self, routing: &Routing, changes: &[RouteChange]) {
        // Only flows on a member that left the group, or on any member of
        // a group that gained or lost its choice, can be affected.
        let crate::net::Applied { cells, down, changed } = self.net.apply(routing, changes);
        for dl in changed {
            self.links.hot.mark(dl);
        }
        // Per destination: the flows on the affected members, or all the
        // flows toward it if those are fewer (a failure next to a leaf
        // changes a cell toward it at every switch that reached it
        // through the failure).
        let mut cells = cells;
        cells.sort_by_key(|c| c.0);
        let mut links = Vec::new();
        for run in cells.chunk_by(|a, b| a.0 == b.0) {
            let d = run[0].0;
            let all = self.to_dest.get(d as usize).map_or(0, Vec::len);
            let (mut cost, mut over) = (0, false);
            links.clear();
            'cells: for &(_, old, new) in run {
                let (was, now) = (self.net.group(old), self.net.group(new));
                let flip = (was.len() > 1) != (now.len() > 1);
                for m in was {
                    // A member out of service is covered below (all its flows),
                    // and one that stays needs no check unless the choice flipped.
                    if !self.net.dl_up(m.dl) || (!flip && now.iter().any(|n| n.dl == m.dl)) {
                        continue;
                    }
                    cost += self.links.on[m.dl as usize].len();
                    if cost > all {
                        over = true;
                        break 'cells;
                    }
                    links.push(m.dl);
                }
            }
            if over {
                self.inbox.suspects.extend_from_slice(&self.to_dest[d as usize]);
                continue;
            }
            let leaf = self.net.dests[d as usize] as u32;
            for &dl in &links {
                for &f in &self.links.on[dl as usize] {
                    if self.net.host_leaf[self.flows.dst[f as usize] as usize] == leaf {
                        self.inbox.suspects.push(f);
                    }
                }
            }
        }
        for dl in down {
            self.inbox.suspects.extend_from_slice(&self.links.on[dl as usize]);
            self.put_background(dl, 0);
        }
    }

    /// Re-reads the whole routing (after a repair, or whenever the caller
    /// cannot say what changed): every flow is checked by the next decision.
    pub fn reset_routing(&mut self, routing: &Routing) {
        self.net.refill(routing);
        self.links.hot.mark_all();
        self.clear_dead_background();
        self.inbox.suspects.extend(
            (0..self.flows.key.len() as FlowId).filter(|&f| self.flows.status[f as usize] != Status::Free),
        );
    }

    /// Takes over a placement made elsewhere (the steer entries read back
    /// after a restart, or a snapshot being rolled back to): the flow's
    /// path becomes the one that `pins` (switch, egress port) select at
    /// every switch with a choice, if that path follows today's groups over
    /// links in service. No move is reported for it; the flow is held
    /// down from `now_ns` like a flow that just moved.
    pub fn adopt(&mut self, key: &FlowKey, pins: &[(SwitchId, u16)], now_ns: u64) -> Result<Path, FlowError> {
        let &f = self.flows.by_key.get(key).ok_or(FlowError::UnknownFlow { key: *key })?;
        let i = f as usize;
        if self.flows.status[i] == Status::New && self.inbox.demand_dirty {
            // Its rate is needed to load the path.
            self.refresh_rates();
        }
        let (d, mut s) = (self.dest(f), self.src_leaf(f));
        let dst = self.net.dests.get(d as usize).map_or(NONE, |&x| x as u32);
        let mut route = Route::default();
        while s != dst {
            let members = self.net.members(d, s);
            let pick = match members {
                [m] => Some(*m),
                _ => pins
                    .iter()
                    .find(|p| p.0 == s as usize)
                    .and_then(|p| members.iter().find(|m| self.net.port(m.dl) == p.1).copied()),
            };
            let bad = FlowError::NotAPath { key: *key, switch: s as usize };
            let m = pick.filter(|m| self.net.dl_up(m.dl)).ok_or(bad.clone())?;
            if usize::from(route.len) == crate::net::MAX_HOPS {
                return Err(bad);
            }
            route.dl[usize::from(route.len)] = m.dl;
            route.mask |= u8::from(members.len() > 1) << route.len;
            route.len += 1;
            s = m.peer;
        }
        self.unload(f);
        if self.flows.status[i] == Status::Stuck {
            self.inbox.stuck.retain(|&x| x != f);
        }
        self.flows.status[i] = Status::Placed;
        self.load_on(f, route);
        self.flows.mask[i] = route.mask;
        self.flows.moved_at[i] = Some(now_ns);
        Ok(self.render(f, route.mask))
    }

    /// The flow's current path, if it has one, with its choices as last
    /// reported (the entries the caller was told to write).
    pub fn path(&self, key: &FlowKey) -> Option<Path> {
        let &id = self.flows.by_key.get(key)?;
        let i = id as usize;
        (self.flows.status[i] != Status::New).then(|| self.render(id, self.flows.mask[i]))
    }

    /// Every placed flow and its path, in flow-id order.
    pub fn placement(&self) -> Vec<(FlowKey, Path)> {
        (0..self.flows.key.len() as FlowId)
            .filter(|&f| matches!(self.flows.status[f as usize], Status::Placed | Status::Stuck))
            .map(|f| (self.flows.key[f as usize], self.render(f, self.flows.mask[f as usize])))
            .collect()
    }

    /// The rate the planner counts for a flow (its demand capped by the
    /// NICs) as of the last decision.
    pub fn rate(&self, key: &FlowKey) -> Option<u64> {
        self.flows.by_key.get(key).map(|&f| self.flows.rate[f as usize])
    }

    /// The host an incast's flows go to, if `key` is one of them: a
    /// receiver-bound group the planner confines (`confine_incasts`), as
    /// of the last decision.
    pub fn incast(&self, key: &FlowKey) -> Option<std::net::Ipv4Addr> {
        let &f = self.flows.by_key.get(key)?;
        self.groups.has(f).then(|| key.dst())
    }

    pub fn flow_count(&self) -> usize {
        self.flows.by_key.len()
    }

    /// Planned utilisation of the egress port `port` of `switch`.
    pub fn utilisation(&self, switch: SwitchId, port: u16) -> Option<f64> {
        let dl = self.net.out_of(switch as u32).find(|&dl| self.net.port(dl) == port)?;
        Some(self.loads().util(&self.net, dl, 0))
    }

    // ---- internals shared with the decision ----

    pub(crate) fn loads(&self) -> Loads<'_> {
        Loads { load: &self.links.load }
    }

    /// Brings the hottest-link trees up to date with the loads. A link
    /// that carries group members alone, within its capacity, is not for
    /// the local search to relieve: it carries what the group's receiver
    /// takes and nobody else, and moving a member would only spread the
    /// group (see [`crate::group`]). Over capacity (background came) it
    /// is, like any other.
    pub(crate) fn sync_hot(&mut self) {
        let (net, load, on, forced, groups) =
            (&self.net, &self.links.load, &self.links.on, &self.links.forced, &self.groups);
        self.links.hot.sync(|dl| {
            let i = dl as usize;
            let up = net.dl_up(dl);
            let u = load[i] as f64 / net.capf[i];
            let bits = u.to_bits();
            let confined = || u <= 1.0 && on[i].iter().all(|&f| groups.has(f));
            let flows = !on[i].is_empty() && (groups.is_empty() || !confined());
            Keys {
                all: if up && u > 0.0 { bits } else { 0 },
                movable: if forced[i] || (up && flows) { bits + 1 } else { 0 },
            }
        });
    }

    /// Destination index of a flow.
    pub(crate) fn dest(&self, f: FlowId) -> u32 {
        let leaf = self.net.host_leaf[self.flows.dst[f as usize] as usize];
        self.net.dest_of[leaf as usize]
    }

    pub(crate) fn src_leaf(&self, f: FlowId) -> u32 {
        self.net.host_leaf[self.flows.src[f as usize] as usize]
    }

    /// Adds (or takes away) a placed flow to the per-cut sums of the
    /// lower bound: only placed flows count, so the bound is about what
    /// can be placed.
    pub(crate) fn count(&mut self, f: FlowId, add: bool) {
        let i = f as usize;
        if self.flows.status[i] != Status::Placed || self.flows.route[i].len == 0 {
            return;
        }
        let (a, b) = (self.src_leaf(f), self.net.host_leaf[self.flows.dst[i] as usize]);
        let (out, into) = self.net.cuts.of_flow(a, b);
        self.tally.flow(out, into, self.flows.rate[i], add);
    }

    /// Takes the flow's rate off the links of its route.
    pub(crate) fn unload(&mut self, f: FlowId) {
        self.count(f, false);
        let i = f as usize;
        let (route, rate) = (self.flows.route[i], self.flows.rate[i]);
        let group = self.groups.of(f).map(|g| g.0);
        for &dl in route.links() {
            self.links.load[dl as usize] = self.links.load[dl as usize].saturating_sub(rate);
            if let Some(g) = group {
                self.groups.leave(g, dl, rate);
            }
            self.links.hot.mark(dl);
            let list = &mut self.links.on[dl as usize];
            if let Some(p) = list.iter().position(|&x| x == f) {
                list.swap_remove(p);
            }
        }
    }

    /// Puts the flow on `route` and its rate on the route's links.
    pub(crate) fn load_on(&mut self, f: FlowId, route: Route) {
        let rate = self.flows.rate[f as usize];
        let group = self.groups.of(f).map(|g| g.0);
        for &dl in route.links() {
            self.links.load[dl as usize] += rate;
            if let Some(g) = group {
                self.groups.enter(g, dl, rate);
            }
        }
        self.listed_on(f, route);
    }

    /// Puts the flow on `route` whose links already carry its rate (and,
    /// for a group member, whose group bookkeeping has it).
    pub(crate) fn listed_on(&mut self, f: FlowId, route: Route) {
        self.flows.route[f as usize] = route;
        // The report reads this flow's route again (`Log::placed` may
        // have an older one).
        self.scratch.moved.set(f as usize);
        for &dl in route.links() {
            self.links.on[dl as usize].push(f);
            self.links.hot.mark(dl);
        }
        self.count(f, true);
    }

    /// Which hops of the flow's route have a choice under today's routing.
    pub(crate) fn mask_now(&self, f: FlowId) -> u8 {
        let d = self.dest(f);
        let mut mask = 0u8;
        for (i, &dl) in self.flows.route[f as usize].links().iter().enumerate() {
            if d != NONE && self.net.members(d, self.net.tail(dl)).len() > 1 {
                mask |= 1 << i;
            }
        }
        mask
    }

    /// The flow's route as a path, with choices as `mask` says.
    pub(crate) fn render(&self, f: FlowId, mask: u8) -> Path {
        self.render_route(&self.flows.route[f as usize], mask)
    }

    /// `route` as a path, with choices as `mask` says.
    pub(crate) fn render_route(&self, route: &Route, mask: u8) -> Path {
        // Rendered on the stack and copied once into a vector of the
        // right size: a report renders 100,000 of them.
        let blank = Hop { switch: 0, port: 0, link: 0, next: 0, choice: false };
        let mut hops = [blank; crate::net::MAX_HOPS];
        for (i, (&dl, hop)) in route.links().iter().zip(hops.iter_mut()).enumerate() {
            *hop = Hop {
                switch: self.net.tail(dl) as SwitchId,
                port: self.net.port(dl),
                link: Net::link_of(dl),
                next: self.net.head(dl) as SwitchId,
                choice: mask & (1 << i) != 0,
            };
        }
        Path { hops: hops[..route.links().len()].to_vec() }
    }
}
