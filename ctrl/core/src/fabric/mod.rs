//! The state task's brain, without I/O: it turns controller inputs (digests,
//! register snapshots, reports, switch and link failures, timer ticks) into
//! the congestion view, policy decisions and each switch's desired state.
//! Time is an argument, so a recorded run replays exactly (tests/replay.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use metaroce_pipeline::Entry;

use metaroce_policy::{Decision, Input as PolicyInput, Policy, PolicyConfig, PolicyState};
use metaroce_telemetry::view::{CongestionView, RegisterSnapshot, ThresholdCrossing, ViewConfig};
use metaroce_telemetry::{Heat, PortHeat, PortKey, TelemetryReport};
use metaroce_topo::{Routing, SwitchId, Topology};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::mode::Mode;
pub use crate::note::{Note, NoteKind};
use crate::pair::{Announced, PairConfig, PairReport, Pairing};
use crate::place::{LargeFlowReport, PlaceConfig, PlaceStep, Placement};
use crate::plan::{Overrides, Settings, SwitchPlan};

use crate::reach;

mod failures;
mod replan;
mod rule;
pub use rule::Due;

/// One controller input: what a recording holds, with its time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Input {
    Crossing(ThresholdCrossing),
    Snapshot(RegisterSnapshot),
    Report(Box<TelemetryReport>),
    /// The controller reaches the switch again.
    SwitchUp {
        switch: usize,
    },
    /// The controller lost the switch; it is routed around if it stays
    /// lost for `switch_down_after_ns`.
    SwitchDown {
        switch: usize,
    },
    LinkDown {
        link: usize,
    },
    LinkUp {
        link: usize,
    },
    /// The data plane found a flow large.
    LargeFlow(LargeFlowReport),
    /// A drain-rule pairing digest: a data queue pair, or an ACK no
    /// `qp_pair` entry pairs (see [`crate::pair`]).
    DrainPair(PairReport),
    /// A job registered through the job API: its body as received (the
    /// core validates it again on replay, against the jobs of the run).
    JobRegister {
        body: Value,
    },
    /// A job removed through the job API.
    JobRemove {
        name: String,
    },
    Tick,
}

#[derive(Debug, Clone)]
pub struct CoreConfig {
    pub policy: PolicyConfig,
    pub view: ViewConfig,
    pub settings: Settings,
    pub switch_down_after_ns: u64,
    pub place: PlaceConfig,
    pub pair: PairConfig,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            policy: PolicyConfig::default(),
            view: ViewConfig::default(),
            settings: Settings::default(),
            switch_down_after_ns: 3_000_000_000,
            place: PlaceConfig::default(),
            pair: PairConfig::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error(transparent)]
    Policy(#[from] metaroce_policy::ConfigError),
    #[error(transparent)]
    Placement(#[from] metaroce_te::ConfigError),
}

/// What one decision produced.
#[derive(Debug, Default)]
pub struct Step {
    pub decision: Option<Decision>,
    /// Switches whose desired state changed, with the new plan.
    pub plans: Vec<(SwitchId, SwitchPlan)>,
    pub notes: Vec<Note>,
    /// The placement's decision, when one ran.
    pub placement: Option<PlaceStep>,
    /// A decision ran (the policy's, the placement's or both), whether or
    /// not it changed anything: a caller in virtual time charges its
    /// decision time.
    pub ran: bool,
}

/// The fabric state the controller decides on.
#[derive(Debug)]
pub struct Core {
    topo: Topology,
    routing: Routing,
    view: CongestionView,
    /// The view's heat, kept up to date by [`Core::observe`] port by port
    /// (a decision reads every port; the view knows over a thousand).
    heat: Heat,
    /// Rebuild `heat` from the view at the next decision.
    heat_stale: bool,
    policy: Policy,
    state: PolicyState,
    /// Flow placement: the planner, the jobs and the steer entries.
    place: Placement,
    /// The drain rule's learnt `qp_pair` entries.
    pairs: Pairing,
    settings: Settings,
    mode: Mode,
    switch_down_after_ns: u64,
    down_since: BTreeMap<SwitchId, u64>,
    failed_switches: BTreeSet<SwitchId>,
    failed_links: BTreeSet<usize>,
    plans: Vec<Option<SwitchPlan>>,
    /// Per switch, the part of its plan that only changes with the routing.
    fixed: Vec<Option<Arc<Vec<Entry>>>>,
    /// Everything must be re-planned (failure, mode change, start).
    replan_all: bool,
    /// A rollback pinned the switches to a snapshot: publish no plans
    /// until the mode is set again.
    pinned: bool,
    /// An input changed something a decision depends on.
    dirty: bool,
    /// Leaf pairs without a path now ([`reach::cut_pairs`]).
    unreachable: Vec<(SwitchId, SwitchId)>,
    /// Counts the inputs that changed the congestion view, so that a
    /// summary of it can be kept until the next one ([`Core::versions`]).
    view_version: u64,
    /// Counts the decisions that changed the policy's overrides.
    policy_version: u64,
}

fn links_of(topo: &Topology) -> Vec<(PortKey, PortKey)> {
    topo.links
        .iter()
        .map(|l| {
            (PortKey { switch: l.a.switch, port: l.a.port }, PortKey { switch: l.b.switch, port: l.b.port })
        })
        .collect()
}

impl Core {
    pub fn new(topo: Topology, cfg: CoreConfig, mode: Mode) -> Result<Self, CoreError> {
        let policy = Policy::new(cfg.policy)?;
        let routing = Routing::compute(&topo);
        let unreachable = reach::cut_pairs(&routing);
        let nodes = topo.switches.iter().enumerate().map(|(i, s)| (s.int_node_id, i)).collect();
        let view = CongestionView::new(cfg.view, nodes, &links_of(&topo));
        let n = topo.switches.len();
        let place = Placement::new(
            &topo,
            &routing,
            PlaceConfig { report_window_ns: cfg.settings.large_flow_window_ns, ..cfg.place },
        )?;
        Ok(Core {
            topo,
            routing,
            view,
            heat: Heat::new(),
            heat_stale: true,
            policy,
            state: PolicyState::default(),
            place,
            pairs: Pairing::new(cfg.pair),
            settings: cfg.settings,
            mode,
            switch_down_after_ns: cfg.switch_down_after_ns,
            down_since: BTreeMap::new(),
            failed_switches: BTreeSet::new(),
            failed_links: BTreeSet::new(),
            plans: vec![None; n],
            fixed: vec![None; n],
            replan_all: true,
            pinned: false,
            dirty: true,
            unreachable,
            view_version: 0,
            policy_version: 0,
        })
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }
    /// The drain rule's learnt pairs and what the learning counted.
    pub fn pairing(&self) -> &Pairing {
        &self.pairs
    }
    pub fn view(&self) -> &CongestionView {
        &self.view
    }
    pub fn policy_state(&self) -> &PolicyState {
        &self.state
    }
    pub fn mode(&self) -> Mode {
        self.mode
    }
    pub fn routing(&self) -> &Routing {
        &self.routing
    }
    pub fn settings(&self) -> &Settings {
        &self.settings
    }
    pub fn plan(&self, s: SwitchId) -> Option<&SwitchPlan> {
        self.plans.get(s).and_then(Option::as_ref)
    }
    pub fn failed_switches(&self) -> &BTreeSet<SwitchId> {
        &self.failed_switches
    }
    pub fn failed_links(&self) -> &BTreeSet<usize> {
        &self.failed_links
    }

    /// (view, policy): versions of the congestion view and of the policy's
    /// overrides. Equal versions mean an unchanged [`CongestionView`] and
    /// [`Core::recommended`], so what was built from them still holds.
    pub fn versions(&self) -> (u64, u64) {
        (self.view_version, self.policy_version)
    }

    /// True when `port` is a port of switch `s` in the topology (a link or a host).
    pub fn topology_has_port(&self, s: SwitchId, port: u16) -> bool {
        self.topo.adjacency(s).iter().any(|a| a.port == port)
            || self.topo.hosts_of(s).iter().any(|&h| self.topo.hosts[h].port == port)
    }

    fn name(&self, s: SwitchId) -> String {
        self.topo.switches.get(s).map_or_else(|| format!("#{s}"), |x| x.name.clone())
    }

    /// Applies one input; decisions wait for [`Core::decide`], so a burst of
    /// inputs (a digest storm) costs one decision.
    pub fn observe(&mut self, now_ns: u64, input: &Input) -> Vec<Note> {
        let n = self.topo.switches.len();
        let mut notes = Vec::new();
        match input {
            Input::Crossing(c) if c.switch < n => {
                let key = PortKey { switch: c.switch, port: c.port };
                let before = self.view.port_heat(key).map(|h| h.congested);
                self.view.on_crossing(now_ns, c);
                self.view_version += 1;
                let after = self.view.port_heat(key);
                self.dirty |= after.map(|h| h.congested) != before;
                self.keep_heat(key, after);
            }
            Input::Snapshot(s) if s.switch < n => {
                let keys: Vec<PortKey> =
                    s.ports.iter().map(|p| PortKey { switch: s.switch, port: p.port }).collect();
                let before: Vec<Option<bool>> =
                    keys.iter().map(|k| self.view.port_heat(*k).map(|h| h.congested)).collect();
                self.view.on_snapshot(now_ns, s);
                self.view_version += 1;
                for (k, b) in keys.into_iter().zip(before) {
                    let after = self.view.port_heat(k);
                    self.dirty |= after.map(|h| h.congested) != b;
                    self.keep_heat(k, after);
                }
            }
            Input::Report(r) => {
                // A report may touch any port on its path.
                self.view.on_report(now_ns, r);
                self.view_version += 1;
                self.heat_stale = true;
            }
            // Back before it was declared failed (or up for the first
            // time): nothing the policy or the placement reads changed, so
            // no decision is due; a fabric coming up is not one decision of
            // the whole fabric per switch.
            Input::SwitchUp { switch } if *switch < n => {
                let rerouted = self.on_switch_up(*switch);
                self.dirty |= rerouted.is_some();
                notes.extend(rerouted);
            }
            Input::SwitchDown { switch } if *switch < n => {
                self.down_since.entry(*switch).or_insert(now_ns);
            }
            Input::LinkDown { link } if *link < self.topo.links.len() => {
                notes.extend(self.on_link_down(*link))
            }
            Input::LinkUp { link } if *link < self.topo.links.len() => notes.extend(self.on_link_up(*link)),
            Input::LargeFlow(r) if r.switch < n => {
                if let Err(why) = self.place.on_large_flow(now_ns, r) {
                    let reason = match std::error::Error::source(&why) {
                        Some(cause) => format!("{why}: {cause}"),
                        None => why.to_string(),
                    };
                    notes.push(self.note(NoteKind::LargeFlowIgnored, Some(r.switch), &reason, json!(r)));
                }
            }
            Input::DrainPair(r) if r.switch < n => {
                // A new pair is written at the next decision.
                self.dirty |= self.pairs.on_report(now_ns, r);
            }
            Input::JobRegister { body } => {
                if let Err(e) = self.register_job(now_ns, body) {
                    notes.push(self.note(NoteKind::JobRefused, None, &e.to_string(), json!(e.problems)));
                }
            }
            Input::JobRemove { name } => {
                if self.remove_job(name).is_none() {
                    notes.push(self.note(
                        NoteKind::JobRefused,
                        None,
                        "no job of that name",
                        json!({"name": name}),
                    ));
                }
            }
            Input::Tick => {}
            other => notes.push(self.note(
                NoteKind::InputRejected,
                None,
                "input names an unknown switch or link",
                json!(format!("{other:?}")),
            )),
        }
        if !matches!(
            input,
            Input::Crossing(_)
                | Input::SwitchUp { .. }
                | Input::Snapshot(_)
                | Input::Report(_)
                | Input::Tick
                | Input::LargeFlow(_)
                | Input::DrainPair(_)
                | Input::JobRegister { .. }
                | Input::JobRemove { .. }
        ) {
            self.dirty = true;
        }
        self.expire_switches(now_ns, &mut notes);
        self.dirty |= self.pairs.expire(now_ns);
        notes
    }

    /// Copies a port's heat after the view took an input for it.
    fn keep_heat(&mut self, key: PortKey, heat: Option<PortHeat>) {
        if let Some(h) = heat {
            self.heat.insert(key, h);
        }
    }

    /// Registers a job (the job API, or its recording replayed): validated
    /// against the topology and the registered jobs; placed by the next
    /// decision, which the caller runs at once, before the job's traffic
    /// starts. The summary on success; every problem otherwise.
    pub fn register_job(&mut self, now_ns: u64, body: &Value) -> Result<Value, metaroce_te::job::JobError> {
        let summary = self.place.register(now_ns, &self.topo, body)?;
        self.announce_pairs();
        Ok(summary)
    }

    /// Removes a job; its entries go with the next decision.
    pub fn remove_job(&mut self, name: &str) -> Option<Value> {
        let gone = self.place.remove_job(&self.topo, name)?;
        self.announce_pairs();
        Some(gone)
    }

    /// The `qp_pair` entries the registered jobs announce (flows with
    /// `src_qp`), at each sender's leaf: the ACKs come from the receiver
    /// to the sender carrying the sender's QP and drain the data's.
    fn announce_pairs(&mut self) {
        let hosts = &self.topo.hosts;
        let all: Vec<Announced> = self
            .place
            .jobs()
            .list()
            .flat_map(|j| j.flows.iter())
            .filter_map(|f| {
                let ack_qp = f.src_qp?;
                let data_qp = match f.key {
                    metaroce_te::FlowKey::Flow { qp, .. } => qp,
                    metaroce_te::FlowKey::Pair { .. } => return None,
                };
                let (src, dst) = (hosts.get(f.src)?, hosts.get(f.dst)?);
                Some(Announced { switch: src.leaf, ack: (dst.ip, src.ip, ack_qp), data_qp })
            })
            .collect();
        self.dirty |= self.pairs.set_announced(all);
    }

    pub fn placement(&self) -> &Placement {
        &self.place
    }

    pub fn placement_mut(&mut self) -> &mut Placement {
        &mut self.place
    }

    /// `GET /api/v1/jobs` ([`Placement::jobs_doc`]).
    pub fn jobs_doc(&mut self) -> Arc<Value> {
        self.place.jobs_doc(&self.topo)
    }

    /// True when the placement wants a decision at `now_ns` (a flow or job
    /// came or went, the re-plan interval passed, idle flows to sweep).
    pub fn placement_due(&self, now_ns: u64) -> bool {
        self.place.due(now_ns)
    }

    fn name_str(&self, s: SwitchId) -> std::borrow::Cow<'_, str> {
        match self.topo.switches.get(s) {
            Some(x) => std::borrow::Cow::Borrowed(x.name.as_str()),
            None => std::borrow::Cow::Owned(format!("#{s}")),
        }
    }

    fn note(&self, kind: NoteKind, s: Option<SwitchId>, reason: &str, details: Value) -> Note {
        Note { kind, switch: s.map(|s| self.name(s)), reason: reason.to_owned(), details }
    }

    fn link_note(&self, kind: NoteKind, link: usize, reason: &str) -> Note {
        let l = &self.topo.links[link];
        let details = json!({"a": self.topo.endpoint_name(l.a), "b": self.topo.endpoint_name(l.b)});
        self.note(kind, Some(l.a.switch), reason, details)
    }

    /// True when an input changed the heat or the fabric since the last
    /// decision: a decision is due now. Policy timers alone
    /// ([`Core::wants_decision`]) can wait for the next tick, so a storm of
    /// digests that only repeat known state costs no decisions.
    pub fn input_changed(&self) -> bool {
        self.dirty || self.replan_all || self.place.input_changed()
    }

    /// True when a decision could change something: an input changed the
    /// heat or the fabric, or the policy has timers running (hot ports,
    /// derated ports, held-back changes).
    pub fn wants_decision(&self) -> bool {
        // The policy's own state first: asking the view scans every port.
        self.dirty
            || self.replan_all
            || self.state.ports().next().is_some()
            || self.state.pending().next().is_some()
            || self.view.any_hot()
    }

    /// Runs the policy and re-plans the switches whose state changed.
    pub fn decide(&mut self, now_ns: u64) -> Step {
        let mut step = self.decide_plans(now_ns);
        self.conclude(&mut step);
        step
    }

    /// The event-log lines of a decision's changes, one per change.
    pub fn notes(&self, decision: &Decision) -> Vec<Note> {
        let applied = self.mode.writes();
        let mut notes = Vec::with_capacity(decision.changes.len());
        for c in &decision.changes {
            let (kind, leaf) = (NoteKind::of_change(c.kind), self.name(c.leaf));
            let cause = c.cause.map(|h| format!("{}:{}", self.name_str(h.switch), h.port));
            let reason = format!("{kind} toward {leaf}");
            let details = json!({
                "leaf": leaf, "old": c.old, "new": c.new, "cause": cause,
                "shift_permille": c.shift_permille, "applied": applied,
            });
            notes.push(Note { kind, switch: Some(self.name(c.switch)), reason, details });
        }
        notes
    }

    /// The event-log lines of a placement decision: each move with its
    /// reason (up to `max_move_notes`, then one line counting the rest),
    /// each flow left where it was for want of a path, each refused entry.
    pub fn placement_notes(&self, p: &PlaceStep) -> Vec<Note> {
        let applied = self.mode.writes() && !self.pinned;
        self.place.notes(&self.topo, p, applied)
    }

    /// [`Core::decide`] without the notes, which only the event log needs:
    /// the daemon publishes the plans first and asks for [`Core::notes`]
    /// afterwards.
    pub fn decide_plans(&mut self, now_ns: u64) -> Step {
        self.dirty = false;
        if self.heat_stale {
            self.heat = self.view.heat();
            self.heat_stale = false;
        }
        #[cfg(debug_assertions)]
        debug_assert!(self.heat == self.view.heat(), "the cached heat is the view's");
        let input = PolicyInput { topo: &self.topo, routing: &self.routing, heat: &self.heat, now_ns };
        let decision = self.policy.decide(input, &mut self.state);
        // The policy changes its overrides only by the changes it returns.
        self.policy_version += u64::from(!decision.changes.is_empty());
        let mut touched: BTreeSet<SwitchId> = decision.changes.iter().map(|c| c.switch).collect();
        let placement = self.place.decide(now_ns, &self.topo, &self.routing);
        if let Some(p) = &placement {
            touched.extend(p.touched.iter().copied());
        }
        // Without a re-plan of everything, only the routes toward the
        // destinations whose weights changed on a switch are recomputed.
        let changed: BTreeSet<(SwitchId, SwitchId)> =
            decision.changes.iter().map(|c| (c.switch, c.leaf)).collect();
        let mut step =
            Step { decision: Some(decision), plans: Vec::new(), notes: Vec::new(), placement, ran: true };
        step.plans = self.replan(touched, &changed);
        step
    }

    /// True when only the placement's inputs changed since the last
    /// decision (a job registered or removed, a new large flow): the
    /// policy's inputs and the routing are as it last decided on them.
    pub fn only_placement_changed(&self) -> bool {
        !self.dirty && !self.replan_all && self.place.input_changed()
    }

    /// The placement's decision alone, for an input only the placement
    /// reads ([`Core::only_placement_changed`]): the steer entries of the
    /// switches it touched are re-planned and nothing else. The policy's
    /// inputs did not change, so its decision (timers running out) is
    /// left to the next tick, a few milliseconds later; a job's or a large
    /// flow's entries do not wait for it.
    pub fn decide_placement(&mut self, now_ns: u64) -> Step {
        if !self.only_placement_changed() {
            return self.decide_plans(now_ns);
        }
        let placement = self.place.decide(now_ns, &self.topo, &self.routing);
        let touched = placement.as_ref().map(|p| p.touched.clone()).unwrap_or_default();
        let mut step = Step { decision: None, plans: Vec::new(), notes: Vec::new(), placement, ran: true };
        step.plans = self.replan(touched, &BTreeSet::new());
        step
    }

    /// What the policy wants, whatever the mode (the `advise` output).
    pub fn recommended(&self) -> Overrides {
        self.state
            .overrides()
            .map(|(s, leaf, w)| ((s, leaf), w.iter().map(|pw| (pw.port, pw.weight)).collect()))
            .collect()
    }

    pub fn set_mode(&mut self, mode: Mode) {
        if mode != self.mode || self.pinned {
            self.mode = mode;
            self.pinned = false;
            self.replan_all = true;
        }
    }

    /// Stops publishing plans (a rollback holds the switches at a snapshot)
    /// and falls back to `observe`.
    pub fn pin(&mut self) {
        self.pinned = true;
        self.mode = Mode::Observe;
    }

    pub fn pinned(&self) -> bool {
        self.pinned
    }
}
