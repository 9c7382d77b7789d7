//! Flow placement in the state task: the traffic-engineering planner
//! (`metaroce-te`), the registered jobs, the large flows the data plane
//! reported, and what the planner's placement asks of each switch (its
//! desired steer entries, target-neutral: a flow key and the egress port
//! with its next-hop id). Pure like the rest of [`crate::core`]: time is an
//! argument, so a recording replays exactly.
//!
//! Inputs: jobs registered and removed (the job API), large-flow reports,
//! route changes. One decision ([`Placement::decide`]) removes the
//! unannounced flows no report refreshed for `flow_idle_ns`, runs the
//! planner, and turns its moves into per-switch steer changes. An entry
//! is only ever built for a port that is a member of the switch's route
//! group toward the flow's destination leaf; anything else is refused and
//! named in a note.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;

use metaroce_te::job::{self, JobError, JobLimits, JobRegistry};
use metaroce_te::stay::Stays;
use metaroce_te::{Demand, FlowKey, Move, Path, Planner, Reason, TeConfig};
use metaroce_topo::{Routing, SwitchId, Topology};
use serde::Serialize;
use serde_json::Value;

use crate::plan::nhop_id;

mod docs;
mod keys;
mod phase;
mod report;
mod trial;
use docs::job_summary;
pub use docs::{move_json, path_json, FlowsView};
pub use report::{LargeFlowError, LargeFlowReport};
pub use trial::Trial;

/// The placement's tunables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceConfig {
    pub te: TeConfig,
    pub limits: JobLimits,
    /// An unannounced flow that no large-flow report refreshed for this
    /// long has ended: it leaves the planner and its entries are removed.
    pub flow_idle_ns: u64,
    /// While flows are placed, decide at least this often (rebalancing,
    /// hold-downs running out).
    pub replan_interval_ns: u64,
    /// Move notes logged per decision; the rest are counted in one note.
    pub max_move_notes: usize,
    /// The data plane's large-flow report window: a flow reported off its
    /// steer entries two windows after they were sent has not moved (no
    /// flowlet gap yet); one not reported for two windows has paused
    /// ([`metaroce_te::stay`]).
    pub report_window_ns: u64,
}

impl Default for PlaceConfig {
    fn default() -> Self {
        PlaceConfig {
            te: TeConfig::default(),
            limits: JobLimits::default(),
            flow_idle_ns: 1_000_000_000,
            replan_interval_ns: 100_000_000,
            max_move_notes: 256,
            report_window_ns: 1_000_000,
        }
    }
}

/// One steer entry a switch should hold, target-neutral: pin the flow to
/// `port` (next hop `nhop_id`). `downstream` lists the choice hops after
/// this one on the flow's path, `(switch, port)`: the entries that must be
/// in place before this one is written (downstream first).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct SteerHop {
    pub port: u16,
    pub nhop_id: u16,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub downstream: Vec<(SwitchId, u16)>,
}

/// A switch's desired steer entries by flow.
pub type Steer = BTreeMap<FlowKey, SteerHop>;

/// A flow the data plane reported: when last, where, at what rate.
#[derive(Debug, Clone, Copy)]
struct Seen {
    last_ns: u64,
    switch: usize,
    port: u16,
    bps: u64,
    /// Unannounced: the placement owns it and ages it out.
    own: bool,
}

/// A registered job and when it was registered.
#[derive(Debug, Clone)]
struct JobMeta {
    registered_ns: u64,
}

/// What one decision did, for the event log, metrics and the API.
#[derive(Debug, Default)]
pub struct PlaceStep {
    /// Switches whose desired steer entries changed.
    pub touched: BTreeSet<SwitchId>,
    pub moves: Vec<Move>,
    pub unplaced: Vec<metaroce_te::Unplaced>,
    /// Entries refused because their port is not a member of the route group.
    pub refused: Vec<String>,
    pub max_utilisation: f64,
    pub lower_bound: f64,
    /// Highest utilisation the large-flow reports show (their rates on the
    /// ports they left by), 0 without reports.
    pub observed_max_utilisation: f64,
    pub flows: usize,
    /// Flows holding an entry on some switch; like the observed
    /// utilisation, filled in by [`Placement::conclude`].
    pub steered: usize,
    /// Wall time of the planner's decision (not part of any replay output).
    pub plan_seconds: f64,
    /// When the decision ran, and the rest of the planner's answer that
    /// the API shows (see [`Placement::conclude`]).
    pub t_ns: u64,
    pub hottest: Option<metaroce_te::LinkUse>,
    pub budget_hit: bool,
    pub exact: bool,
    /// The phase plan made again in this decision (a periodic job came
    /// or went, or a phase drifted), as its event-log line.
    pub phase: Option<crate::note::Note>,
}

/// The planner, the jobs, the reported flows and each switch's steer set.
/// Cloned for a trial ([`Placement::trial`]).
#[derive(Debug, Clone)]
pub struct Placement {
    cfg: PlaceConfig,
    planner: Planner,
    jobs: JobRegistry,
    meta: BTreeMap<String, JobMeta>,
    /// The announced demand of every job flow.
    announced: HashMap<FlowKey, Demand>,
    seen: HashMap<FlowKey, Seen>,
    steer: Vec<Arc<Steer>>,
    host_leaf: HashMap<Ipv4Addr, SwitchId>,
    /// Link capacity of each switch port, bits per second.
    capacity: HashMap<(usize, u16), u64>,
    /// An input the planner has not decided on yet.
    dirty: bool,
    last_plan_ns: Option<u64>,
    next_sweep_ns: u64,
    /// The last decision's figures and moves, for the API.
    last: Arc<Value>,
    /// The placement as of the last decision that moved a flow.
    placement: Arc<Vec<(FlowKey, Path)>>,
    placement_stale: bool,
    steered: usize,
    /// A decision moved flows since `steered` was counted.
    steered_stale: bool,
    /// `GET /api/v1/jobs`; `None` when a job came or went since it was
    /// built (it is built when published, after the job's entries are out).
    jobs_doc: Option<Arc<Value>>,
    /// Reported flows that have not moved onto their planned paths: they
    /// are counted where they are seen before new flows are placed, so the
    /// new ones go around them (the simulator runs the same rule).
    stays: Stays,
    /// An unannounced flow appeared since the last decision.
    new_flow: bool,
    /// Queue pairs seen under several source ports ([`keys`]).
    qp_keys: keys::QpKeys,
    /// Periodic jobs in time: the phase plan and the phases seen ([`phase`]).
    phases: phase::Phases,
}

/// Counts flows (keys) that hold an entry on at least one switch.
fn count_steered(steer: &[Arc<Steer>]) -> usize {
    let mut keys: BTreeSet<&FlowKey> = BTreeSet::new();
    for s in steer {
        keys.extend(s.keys());
    }
    keys.len()
}

impl Placement {
    pub fn new(
        topo: &Topology,
        routing: &Routing,
        cfg: PlaceConfig,
    ) -> Result<Self, metaroce_te::ConfigError> {
        let planner = Planner::new(topo, routing, cfg.te.clone())?;
        let mut capacity = HashMap::new();
        for l in &topo.links {
            capacity.insert((l.a.switch, l.a.port), l.bandwidth.bps());
            capacity.insert((l.b.switch, l.b.port), l.bandwidth.bps());
        }
        let stays = Stays::new(cfg.report_window_ns);
        Ok(Placement {
            cfg,
            planner,
            jobs: JobRegistry::default(),
            meta: BTreeMap::new(),
            announced: HashMap::new(),
            seen: HashMap::new(),
            steer: (0..topo.switches.len()).map(|_| Arc::new(Steer::new())).collect(),
            host_leaf: topo.hosts.iter().map(|h| (h.ip, h.leaf)).collect(),
            capacity,
            // A first decision with no flows: the planner's figures (and
            // its duration histogram) have samples from the start.
            dirty: true,
            last_plan_ns: None,
            next_sweep_ns: 0,
            last: Arc::new(Value::Null),
            placement: Arc::new(Vec::new()),
            placement_stale: false,
            steered: 0,
            steered_stale: false,
            jobs_doc: None,
            stays,
            new_flow: false,
            qp_keys: keys::QpKeys::default(),
            phases: phase::Phases::default(),
        })
    }

    /// The desired steer entries of switch `s`.
    pub fn steer(&self, s: SwitchId) -> Arc<Steer> {
        self.steer.get(s).cloned().unwrap_or_default()
    }

    pub fn jobs(&self) -> &JobRegistry {
        &self.jobs
    }

    pub fn flow_count(&self) -> usize {
        self.planner.flow_count()
    }

    /// Validates a job body against the topology and the registered jobs,
    /// registers it and hands its flows to the planner (placed by the next
    /// decision, which the caller runs at once).
    pub fn register(&mut self, now_ns: u64, topo: &Topology, body: &Value) -> Result<Value, JobError> {
        let job = job::validate_job(body, topo, &self.jobs, &self.cfg.limits)?;
        let summary = job_summary(topo, &job, now_ns);
        let name = job.name.clone();
        self.phases.stale |= job.periodic();
        let demands: Vec<(FlowKey, Demand)> = job.demands().collect();
        self.jobs.register(job)?;
        for (key, demand) in demands {
            self.announced.insert(key, demand);
            // A flow the data plane reported first becomes the job's.
            let demand = match self.seen.get_mut(&key) {
                Some(s) => {
                    s.own = false;
                    Demand { rate_bps: Some(s.bps), ..demand }
                }
                None => demand,
            };
            if let Err(e) = self.planner.upsert(key, demand) {
                // validate_job checked the hosts; nothing else can fail.
                tracing::warn!(error = %e, "job flow refused by the planner");
            }
        }
        self.remove_unannounced_under_jobs();
        self.meta.insert(name, JobMeta { registered_ns: now_ns });
        self.dirty = true;
        self.jobs_doc = None;
        Ok(summary)
    }

    /// Unannounced flows that a job's host-pair flow now covers leave the
    /// planner: the pair's entry carries them.
    fn remove_unannounced_under_jobs(&mut self) {
        let covered: Vec<FlowKey> = self
            .seen
            .iter()
            .filter(|(k, s)| s.own && self.jobs.owner(k).is_some())
            .map(|(k, _)| *k)
            .collect();
        for k in covered {
            if let Some(s) = self.seen.get_mut(&k) {
                s.own = false;
            }
            self.planner.remove(&k);
        }
    }

    /// Removes a job and its flows; the next decision removes their entries.
    pub fn remove_job(&mut self, topo: &Topology, name: &str) -> Option<Value> {
        let job = self.jobs.remove(name)?;
        let registered = self.meta.remove(name).map_or(0, |m| m.registered_ns);
        self.phases.stale |= job.periodic();
        self.phases.seen.remove(name);
        for f in &job.flows {
            self.planner.remove(&f.key);
            self.seen.remove(&f.key);
            self.announced.remove(&f.key);
        }
        self.dirty = true;
        self.jobs_doc = None;
        Some(job_summary(topo, &job, registered))
    }

    /// A large-flow report: an unannounced flow joins the planner's input
    /// with its measured rate; a job's flow gets its measured rate.
    /// `Err` names why the report was not used.
    pub fn on_large_flow(&mut self, now_ns: u64, r: &LargeFlowReport) -> Result<(), LargeFlowError> {
        let key = r.key();
        let bps = r.bps();
        let owner_key = match self.jobs.owner(&key) {
            Some(_) if self.announced.contains_key(&key) => Some(key),
            Some(_) => None, // a host-pair flow of a job carries it
            None => {
                let pair_known = self.seen.contains_key(&FlowKey::pair(r.src, r.dst));
                if r.collision && !self.seen.contains_key(&key) && !pair_known {
                    return Err(LargeFlowError::SharedSlot(key));
                }
                let resolved = self.qp_keys.resolve(r);
                let key = resolved.key;
                if let Some(old) = resolved.replaces {
                    // Its entries go with the next decision.
                    self.planner.remove(&old);
                    self.seen.remove(&old);
                    self.stays.forget(&old);
                }
                let known = self.seen.contains_key(&key);
                if !known {
                    self.dirty = true;
                    self.new_flow = true;
                }
                // Elastic: a RoCE queue pair sends as fast as DCQCN and PFC
                // let it, so what it sent in a congested window understates
                // what it would send on a clean path; planned at its
                // measured rate, it would be packed onto links it then
                // fills. It offers its line rate, and the planner shares
                // the NICs max-min. The measured rate is kept for the
                // observed utilisation and the API.
                self.planner.upsert(key, Demand::default()).map_err(|e| LargeFlowError::Planner(key, e))?;
                if known {
                    self.stays.seen(&self.planner, key, (r.switch, r.egress_port), now_ns);
                }
                self.seen.insert(
                    key,
                    Seen { last_ns: now_ns, switch: r.switch, port: r.egress_port, bps, own: true },
                );
                return Ok(());
            }
        };
        if let Some(owner) = self.jobs.owner(&key).map(str::to_string) {
            if self.jobs.get(&owner).is_some_and(|j| j.periodic()) {
                self.job_flow_seen(&owner, now_ns);
            }
        }
        if let Some(k) = owner_key {
            let announced = self.announced.get(&k).copied().unwrap_or_default();
            let _ = self.planner.upsert(k, Demand { rate_bps: Some(bps), ..announced });
        }
        self.seen
            .insert(key, Seen { last_ns: now_ns, switch: r.switch, port: r.egress_port, bps, own: false });
        Ok(())
    }

    /// A link failed: `changes` as `Routing::fail_link` returned them.
    pub fn routing_changed(&mut self, routing: &Routing, changes: &[metaroce_topo::RouteChange]) {
        self.planner.routing_changed(routing, changes);
        self.dirty = true;
    }

    /// The routing was rebuilt (a repair, a switch lost or back).
    pub fn reset_routing(&mut self, routing: &Routing) {
        self.planner.reset_routing(routing);
        self.dirty = true;
    }

    /// True when a decision should run now: a flow or job came or went.
    pub fn input_changed(&self) -> bool {
        self.dirty
    }

    /// True when a decision is due at `now_ns` (inputs, the re-plan
    /// interval while flows are placed, idle flows to sweep, or flows
    /// learned one by one to re-place as a batch once a report window
    /// passed with no new one).
    pub fn due(&self, now_ns: u64) -> bool {
        self.dirty
            || (self.planner.flow_count() > 0
                && self.last_plan_ns.is_none_or(|t| now_ns.saturating_sub(t) >= self.cfg.replan_interval_ns))
            || (!self.seen.is_empty() && now_ns >= self.next_sweep_ns)
            || self.stays.has_stays()
            || self.rebatch_at().is_some_and(|t| now_ns >= t)
    }

    /// When the planner would try the placed flows as one batch
    /// (`ctrl/te/src/rebatch.rs`): a report window after the last
    /// decision, so that a burst of reports is one batch.
    fn rebatch_at(&self) -> Option<u64> {
        self.planner
            .rebatch_pending()
            .then(|| self.last_plan_ns.unwrap_or(0).saturating_add(self.cfg.report_window_ns.max(1)))
    }

    /// The earliest instant after `now_ns` a decision may be due without
    /// a new input: the re-plan interval while flows are placed, the next
    /// sweep of idle flows, the next look at flows stuck off their planned
    /// paths (one report window on). `now_ns` itself when an input waits.
    pub fn next_due(&self, now_ns: u64) -> Option<u64> {
        if self.dirty {
            return Some(now_ns);
        }
        let replan = (self.planner.flow_count() > 0)
            .then(|| self.last_plan_ns.map_or(now_ns, |t| t.saturating_add(self.cfg.replan_interval_ns)));
        let sweep = (!self.seen.is_empty()).then_some(self.next_sweep_ns);
        let stays = self.stays.has_stays().then(|| now_ns.saturating_add(self.cfg.report_window_ns.max(1)));
        [replan, sweep, stays, self.rebatch_at()].into_iter().flatten().map(|t| t.max(now_ns)).min()
    }

    /// Removes the unannounced flows idle for `flow_idle_ns`.
    fn sweep(&mut self, now_ns: u64) {
        if self.seen.is_empty() || now_ns < self.next_sweep_ns {
            return;
        }
        self.next_sweep_ns = now_ns.saturating_add((self.cfg.flow_idle_ns / 4).max(1));
        let idle = self.cfg.flow_idle_ns;
        let gone: Vec<(FlowKey, bool)> = self
            .seen
            .iter()
            .filter(|(_, s)| now_ns.saturating_sub(s.last_ns) >= idle)
            .map(|(k, s)| (*k, s.own))
            .collect();
        for (k, own) in gone {
            self.seen.remove(&k);
            self.qp_keys.forget(&k);
            self.stays.forget(&k);
            if own && self.planner.remove(&k) {
                self.dirty = true;
            }
        }
    }

    /// One decision, if one is due: the moves and the switches whose steer
    /// entries they change. What only the event log, metrics and the API
    /// need waits for [`Placement::conclude`], after the entries are out.
    pub fn decide(&mut self, now_ns: u64, topo: &Topology, routing: &Routing) -> Option<PlaceStep> {
        self.sweep(now_ns);
        if !self.due(now_ns) {
            return None;
        }
        self.dirty = false;
        self.last_plan_ns = Some(now_ns);
        let started = std::time::Instant::now();
        let stayed = self.count_stays(now_ns);
        let mut plan = self.planner.plan(now_ns);
        let plan_seconds = started.elapsed().as_secs_f64();
        let mut step = PlaceStep { plan_seconds, ..PlaceStep::default() };
        for m in &plan.moves {
            self.stays.moved(&m.flow);
        }
        if !stayed.is_empty() {
            plan.moves.splice(0..0, stayed);
        }
        for m in &plan.moves {
            self.apply_move(topo, routing, m, &mut step);
            if m.to.is_some() && m.reason != Reason::Ended {
                self.stays.landed(m.flow, now_ns);
            }
        }
        if !plan.moves.is_empty() {
            self.placement_stale = true;
            self.steered_stale = true;
        }
        step.max_utilisation = plan.max_utilisation;
        step.lower_bound = plan.lower_bound;
        step.flows = plan.flows;
        step.t_ns = now_ns;
        step.hottest = plan.hottest;
        step.budget_hit = plan.budget_hit;
        step.exact = plan.exact;
        step.moves = plan.moves;
        step.unplaced = plan.unplaced;
        step.phase = self.replan_phases(topo);
        Some(step)
    }

    /// Before the planner places new flows: the flows that have not moved
    /// onto their planned paths and still report are counted where they
    /// are seen (their entries follow, as moves with reason `stayed`); the
    /// ones counted so that went quiet are placed afresh.
    fn count_stays(&mut self, now_ns: u64) -> Vec<Move> {
        let seen = &self.seen;
        let last = |k: &FlowKey| seen.get(k).map(|s| s.last_ns);
        // A paused flow comes back elastic, as it was first placed.
        let rate = |_: &FlowKey| Demand::default();
        for k in self.stays.requeue_quiet(&mut self.planner, last, rate, now_ns) {
            tracing::debug!(flow = %k, "paused: placed afresh");
        }
        if !std::mem::take(&mut self.new_flow) {
            return Vec::new();
        }
        let stays = self.stays.adopt(&mut self.planner, last, now_ns, now_ns);
        stays
            .into_iter()
            .map(|st| Move {
                flow: st.flow,
                reason: Reason::Stayed,
                from: st.from,
                to: Some(st.to),
                bottleneck_before: 0.0,
                bottleneck_after: 0.0,
            })
            .collect()
    }

    /// Completes a decision's figures (flows steered, the utilisation the
    /// reports show) and keeps it for the API (`GET /api/v1/flows`).
    pub fn conclude(&mut self, topo: &Topology, step: &mut PlaceStep) {
        step.steered = self.steered();
        step.observed_max_utilisation = self.observed_max();
        self.last = Arc::new(self.last_json(step, topo));
    }

    /// Flows that hold an entry on at least one switch.
    fn steered(&mut self) -> usize {
        if std::mem::take(&mut self.steered_stale) {
            self.steered = count_steered(&self.steer);
        }
        self.steered
    }

    /// Turns one move into steer changes: the new path's entries, then the
    /// removal of the old path's entries the new path does not pin.
    fn apply_move(&mut self, topo: &Topology, routing: &Routing, m: &Move, step: &mut PlaceStep) {
        let dst_leaf = self.host_leaf.get(&m.flow.dst()).copied();
        let mut pinned: BTreeSet<SwitchId> = BTreeSet::new();
        if let Some(to) = &m.to {
            let hops: Vec<_> = to.hops.iter().filter(|h| h.choice).collect();
            for (i, hop) in hops.iter().enumerate() {
                let member = dst_leaf
                    .and_then(|leaf| routing.group_toward(hop.switch, leaf))
                    .is_some_and(|(_, g)| g.members.iter().any(|mb| mb.port == hop.port));
                if !member {
                    let name = topo.switches.get(hop.switch).map_or("?", |s| s.name.as_str());
                    step.refused.push(format!(
                        "steer {} at {name} to port {}: the port is not a member of the route's group; entry not built",
                        m.flow, hop.port
                    ));
                    continue;
                }
                let downstream = hops[i + 1..].iter().map(|h| (h.switch, h.port)).collect();
                let want = SteerHop { port: hop.port, nhop_id: nhop_id(hop.port), downstream };
                if let Some(set) = self.steer.get_mut(hop.switch) {
                    if set.get(&m.flow) != Some(&want) {
                        Arc::make_mut(set).insert(m.flow, want);
                        step.touched.insert(hop.switch);
                    }
                    pinned.insert(hop.switch);
                }
            }
        }
        if let Some(from) = &m.from {
            for hop in from.hops.iter().filter(|h| h.choice && !pinned.contains(&h.switch)) {
                if let Some(set) = self.steer.get_mut(hop.switch) {
                    if set.contains_key(&m.flow) {
                        Arc::make_mut(set).remove(&m.flow);
                        step.touched.insert(hop.switch);
                    }
                }
            }
        }
    }

    /// Highest utilisation the large-flow reports show: per reporting port,
    /// the reported rates of its flows over the port's capacity.
    fn observed_max(&self) -> f64 {
        let mut per_port: HashMap<(usize, u16), u64> = HashMap::new();
        for s in self.seen.values() {
            *per_port.entry((s.switch, s.port)).or_default() += s.bps;
        }
        per_port
            .into_iter()
            .filter_map(|(k, bps)| self.capacity.get(&k).filter(|c| **c > 0).map(|c| bps as f64 / *c as f64))
            .fold(0.0, f64::max)
    }
}
