//! The controller in the loop (mode `metaroce`), as a [`Control`]: the
//! controller's own core ([`metaroce_core::Core`], the one the daemon and
//! the replay drive) in virtual time. This module adds only the time
//! model and the translation of the core's plans into the engine's
//! writes ([`super::apply`]); every decision — when to decide, the
//! policy's weights, the placement of large flows and announced jobs, the
//! steer entries — is the core's.
//!
//! Time model (all from the scenario's `control:` section):
//! - a threshold crossing, a large-flow report or a port going down
//!   reaches the controller `digest_latency` after it happened at the
//!   switch, and so does, every `poll_interval`, a snapshot of every
//!   port's queue-sensing registers (the deepest queue since the last
//!   read, the congested flag), as the controller's agents poll them;
//! - the controller handles what reached it as soon as it is free
//!   ([`Core::handle_all`]: inputs that arrived meanwhile are one burst);
//!   a decision keeps it busy for `decision_time`; it ticks at the
//!   instants [`Core::next_timer`] names (policy hold-downs, re-plans);
//! - the writes that differ from what the switches hold land
//!   `write_latency` after the decision ended, all switches in parallel.
//!   Announced jobs are registered before the run starts, so their
//!   entries are in place at the first packet.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use metaroce_core::place::{LargeFlowReport, PlaceConfig, PlaceStep};
use metaroce_core::plan::Settings;
use metaroce_core::{Core, CoreConfig, Input, Step};
use metaroce_policy::ChangeKind;
use metaroce_te::{FlowKey, Reason};
use metaroce_telemetry::view::{PortRegisters, RegisterSnapshot, ThresholdCrossing, ViewConfig};
use metaroce_telemetry::PortKey;
use metaroce_topo::units::QueueDepth;
use metaroce_topo::{LinkId, Routing, SwitchId, Topology};

use crate::control::apply::{Applier, GroupWrite, SteerWrite, Writes};
use crate::control::converge::Groups;
use crate::control::{
    Control, ControlSummary, Crossing, Ctx, Detector, Dist, LargeFlow, PlacementSummary, Thresholds,
};
use crate::scenario::config::{ControlConfig, ROCE_HEADER_BYTES};

use super::announce::register_announced;
pub use super::announce::Announced;

/// What a wake-up token stands for.
#[derive(Debug, Clone)]
enum Action {
    /// Inputs reach the controller.
    Arrive(Vec<Input>),
    Poll,
    Decide,
    /// A timer the core asked for.
    Tick,
    Land {
        writes: Writes,
        causes: Vec<Option<Cause>>,
    },
}

/// The wake-ups of which at most one is pending.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Decide,
    Tick,
}

/// Why a group was rewritten, for the reaction times: the time of the
/// crossing or failure, and what it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Cause {
    at_ps: u64,
    failure: bool,
    switch: SwitchId,
    port: u16,
}

/// Why the controller in the loop cannot be built from the scenario.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    #[error("control: {0}")]
    Core(#[from] metaroce_core::CoreError),
    #[error("announced job {job}: {message}")]
    Job { job: String, message: String },
}

/// Reaction figures for the report, kept beside the core.
#[derive(Debug, Default)]
struct Figures {
    sum: ControlSummary,
    /// Per port: the switch time of the up crossing that made it hot.
    hot_since: BTreeMap<PortKey, u64>,
    /// Links down, by when they failed.
    failed_at: BTreeMap<LinkId, u64>,
    /// Per rewrite tag, its cause; causes whose traffic has moved.
    tags: BTreeMap<u64, Cause>,
    moved_causes: BTreeSet<Cause>,
    reaction: Vec<u64>,
    moved: Vec<u64>,
    failover: Vec<u64>,
    /// Per steer-write tag, when its flow was first reported large.
    steer_tags: BTreeMap<u64, u64>,
    /// From a flow's first large-flow report to its first flowlet on the
    /// path the planner chose.
    placed: Vec<u64>,
    /// First report of each flow, physical time.
    detected: HashMap<FlowKey, u64>,
    place: PlacementSummary,
}

/// The controller in the loop. See the module doc.
#[derive(Debug)]
pub(crate) struct PolicyLoop<'a> {
    topo: &'a Topology,
    cfg: ControlConfig,
    core: Core,
    apply: Applier,
    /// Bytes per queue unit of the topology's thresholds.
    unit: u64,
    seq: Vec<u32>,
    actions: BTreeMap<u64, Action>,
    next_token: u64,
    busy_until: u64,
    /// The decision scheduled next: (when, its token).
    decide_at: Option<(u64, u64)>,
    /// The timer scheduled next: (when, its token).
    tick_at: Option<(u64, u64)>,
    /// Inputs that reached the controller and wait for it.
    inbox: Vec<Input>,
    detector: Detector,
    fig: Figures,
    /// The announced jobs' decisions, made before the run (see `new`).
    first: Vec<Step>,
}

/// The core's settings for a run of the scenario.
pub(super) fn core_config(cfg: &ControlConfig) -> CoreConfig {
    let window_ns = cfg.large_flow_window_ps / 1_000;
    // The flow idle time is the daemon's (`PlaceConfig::default`, 1 s):
    // a training job's queue pairs pause between iterations and come back
    // to the same paths, and forgotten in the pause (the simulator's own
    // glue forgot them after the policy's hold-down, 2 ms here) they were
    // placed afresh a report window into their next iteration, after
    // their first flowlet had picked a path.
    let place = PlaceConfig { te: cfg.te.clone(), report_window_ns: window_ns, ..PlaceConfig::default() };
    let settings = Settings { large_flow_window_ns: window_ns, ..Settings::default() };
    CoreConfig {
        policy: cfg.policy.clone(),
        view: ViewConfig::default(),
        settings,
        place,
        ..CoreConfig::default()
    }
}

impl<'a> PolicyLoop<'a> {
    pub fn new(
        topo: &'a Topology,
        routing: &Routing,
        cfg: &ControlConfig,
        mtu: u32,
        announced: Vec<Announced>,
    ) -> Result<Self, LoopError> {
        let unit = match topo.fabric.queue_high {
            QueueDepth::Packets(_) => u64::from(mtu + ROCE_HEADER_BYTES),
            QueueDepth::Bytes(_) => 1,
        };
        let (core, first) = register_announced(topo, cfg, &announced)?;
        for n in first.iter().flat_map(|s| &s.placement).flat_map(|p| &p.phase) {
            tracing::info!(reason = %n.reason, details = %n.details, "phase plan before the run");
        }
        let apply = Applier::new(topo, routing, Groups::of(topo, routing).0);
        let fig = Figures {
            sum: ControlSummary { kind: "controller in the loop".into(), ..Default::default() },
            ..Figures::default()
        };
        Ok(PolicyLoop {
            topo,
            cfg: cfg.clone(),
            core,
            apply,
            unit,
            seq: vec![0; topo.switches.len()],
            actions: BTreeMap::new(),
            next_token: 0,
            busy_until: 0,
            decide_at: None,
            tick_at: None,
            inbox: Vec::new(),
            detector: Detector { window_ps: cfg.large_flow_window_ps, threshold_bytes: cfg.large_flow_bytes },
            fig,
            first,
        })
    }

    /// The start offset the controller recommends for each announced
    /// periodic job (picoseconds), by name: a scheduler that takes the
    /// advice delays the job's start by it.
    pub fn recommended_offsets(&self) -> BTreeMap<String, u64> {
        let offsets = self.core.placement().recommended_offsets();
        offsets.into_iter().map(|(k, ns)| (k, ns.saturating_mul(1_000))).collect()
    }

    fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token - 1
    }

    fn schedule(&mut self, ctx: &mut Ctx<'_>, at_ps: u64, a: Action) -> u64 {
        let token = self.token();
        self.actions.insert(token, a);
        ctx.wake_at(at_ps, token);
        token
    }

    /// Inputs reach the controller `digest_latency` from now.
    fn send(&mut self, ctx: &mut Ctx<'_>, inputs: Vec<Input>) {
        let at = ctx.now_ps() + self.cfg.digest_latency_ps;
        self.schedule(ctx, at, Action::Arrive(inputs));
    }

    /// Sets the wake-up `slot` holds to `action` at `at_ps`, unless it is
    /// set for that instant or earlier already: an earlier one replaces a
    /// later one, whose wake-up then finds nothing.
    fn wake_once(&mut self, ctx: &mut Ctx<'_>, slot: Slot, at_ps: u64) {
        let (held, action) = match slot {
            Slot::Decide => (self.decide_at, Action::Decide),
            Slot::Tick => (self.tick_at, Action::Tick),
        };
        match held {
            Some((t, _)) if t <= at_ps => return,
            Some((_, token)) => _ = self.actions.remove(&token),
            None => {}
        }
        let token = self.schedule(ctx, at_ps, action);
        match slot {
            Slot::Decide => self.decide_at = Some((at_ps, token)),
            Slot::Tick => self.tick_at = Some((at_ps, token)),
        }
    }

    /// The controller looks at its inbox as soon as it is free.
    fn request_decision(&mut self, ctx: &mut Ctx<'_>, at_ps: u64) {
        let at = at_ps.max(self.busy_until).max(ctx.now_ps());
        self.wake_once(ctx, Slot::Decide, at);
    }

    /// A tick at the core's next timer.
    fn schedule_tick(&mut self, ctx: &mut Ctx<'_>) {
        let Some(t_ns) = self.core.next_timer(ctx.now_ps() / 1_000) else { return };
        let at = (t_ns * 1_000).max(self.busy_until).max(ctx.now_ps());
        self.wake_once(ctx, Slot::Tick, at);
    }

    /// Reads every switch port's registers; the snapshots arrive later.
    fn poll(&mut self, ctx: &mut Ctx<'_>) {
        let mut snaps = Vec::with_capacity(self.topo.switches.len());
        for s in 0..self.topo.switches.len() {
            let mut ports = Vec::new();
            for port in self.sensed_ports(s) {
                if let Ok((max, congested)) = ctx.read_registers(s, port) {
                    let max_depth = u32::try_from(max / self.unit).unwrap_or(u32::MAX);
                    ports.push(PortRegisters { port, max_depth, congested });
                }
            }
            snaps.push(Input::Snapshot(RegisterSnapshot { switch: s, ports }));
        }
        self.send(ctx, snaps);
        let next = ctx.now_ps() + self.cfg.poll_interval_ps;
        self.schedule(ctx, next, Action::Poll);
    }

    /// Ports with queue sensing: every fabric and host port of switch `s`.
    fn sensed_ports(&self, s: SwitchId) -> Vec<u16> {
        let ports = self.topo.adjacency(s).iter().map(|a| a.port);
        let hosts = self.topo.hosts_of(s).iter().map(|&h| self.topo.hosts[h].port);
        ports.chain(hosts).collect()
    }

    /// The controller takes its inbox (and a due tick) as one burst.
    fn decide(&mut self, ctx: &mut Ctx<'_>, tick: bool) {
        let now = ctx.now_ps();
        let mut inputs = std::mem::take(&mut self.inbox);
        if tick {
            inputs.push(Input::Tick);
        }
        self.fig.place.large_flow_reports +=
            inputs.iter().filter(|i| matches!(i, Input::LargeFlow(_))).count() as u64;
        let step = self.core.handle_all(now / 1_000, &inputs);
        if step.ran {
            self.fig.sum.decisions += 1;
            self.busy_until = now + self.cfg.decision_ps;
            let writes = self.apply.diff(&step.plans);
            self.count(&step);
            if writes.is_empty() {
                self.fig.sum.no_change += 1;
            } else {
                let causes = writes.groups.iter().map(|w| self.cause(&step, w)).collect();
                let land = self.busy_until + self.cfg.write_latency_ps;
                self.schedule(ctx, land, Action::Land { writes, causes });
            }
        }
        for n in &step.notes {
            tracing::debug!(t_us = now / 1_000_000, kind = %n.kind, switch = ?n.switch, reason = %n.reason, details = %n.details, "note");
        }
        self.schedule_tick(ctx);
    }

    /// The placement's figures of one step.
    fn count(&mut self, step: &Step) {
        let Some(p) = step.placement.as_ref() else { return };
        let PlaceStep { moves, unplaced, refused, max_utilisation, lower_bound, .. } = p;
        let place = &mut self.fig.place;
        for m in moves {
            *place.moves.entry(m.reason.as_str().to_owned()).or_insert(0) += 1;
            place.stayed += u64::from(m.reason == Reason::Stayed);
        }
        place.unplaced += unplaced.len() as u64;
        place.refused += refused.len() as u64;
        if !moves.is_empty() {
            place.planned_max_utilisation = Some(*max_utilisation);
            place.planned_lower_bound = Some(*lower_bound);
        }
    }

    /// What caused a group write: the policy's change toward its leaf.
    fn cause(&self, step: &Step, w: &GroupWrite) -> Option<Cause> {
        let change = step
            .decision
            .as_ref()
            .and_then(|d| d.changes.iter().find(|c| c.switch == w.switch && c.leaf == w.leaf));
        let latest_failure = self.fig.failed_at.iter().map(|(&l, &t)| (t, l)).max();
        match change {
            Some(c) if c.kind == ChangeKind::Derate => c.cause.and_then(|h| {
                let key = PortKey { switch: h.switch, port: h.port };
                let at_ps = *self.fig.hot_since.get(&key)?;
                Some(Cause { at_ps, failure: false, switch: h.switch, port: h.port })
            }),
            Some(c) if c.kind == ChangeKind::Restore => None,
            _ => latest_failure.map(|(at_ps, l)| Cause {
                at_ps,
                failure: true,
                switch: self.topo.links[l].a.switch,
                port: self.topo.links[l].a.port,
            }),
        }
    }

    fn land(&mut self, ctx: &mut Ctx<'_>, writes: Writes, causes: Vec<Option<Cause>>) {
        let mut landed = BTreeSet::new();
        for (w, cause) in writes.groups.into_iter().zip(causes) {
            let tag = self.token();
            if let Err(e) = ctx.set_group(w.switch, w.leaf, &w.weights, tag) {
                tracing::warn!(switch = w.switch, leaf = w.leaf, error = %e, "group write refused");
                self.fig.sum.refused += 1;
                continue;
            }
            self.fig.sum.group_writes += 1;
            if let Some(c) = cause {
                self.fig.tags.insert(tag, c);
                landed.insert(c);
            }
        }
        for c in landed {
            let dt = ctx.now_ps() - c.at_ps;
            if c.failure {
                self.fig.failover.push(dt);
            } else {
                self.fig.reaction.push(dt);
            }
        }
        for w in writes.steer {
            self.land_steer(ctx, w);
        }
    }

    fn land_steer(&mut self, ctx: &mut Ctx<'_>, w: SteerWrite) {
        let tag = self.token();
        match ctx.set_steer(w.switch, w.key, w.port, tag) {
            Ok(()) => {
                self.fig.place.steer_writes += 1;
                if let (Some(_), Some(&t)) = (w.port, self.fig.detected.get(&w.flow)) {
                    self.fig.steer_tags.insert(tag, t);
                }
            }
            Err(e) => {
                tracing::warn!(switch = w.switch, key = ?w.key, error = %e, "steer write refused");
                self.fig.place.refused += 1;
            }
        }
    }

    /// A large-flow report as the P4 program's digest carries it.
    fn report(&self, f: &LargeFlow) -> Option<LargeFlowReport> {
        let ip = |h: u32| self.topo.hosts.get(h as usize).map(|x| x.ip);
        Some(LargeFlowReport {
            switch: f.switch,
            src: ip(f.src)?,
            dst: ip(f.dst)?,
            sport: f.sport,
            qp: f.qp & 0xff_ffff,
            egress_port: f.port,
            bytes: f.bytes,
            window_ns: f.window_ps / 1_000,
            collision: f.collision,
        })
    }
}

impl Control for PolicyLoop<'_> {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let t = Thresholds {
            high_bytes: self.cfg.queue_high_bytes,
            low_bytes: self.cfg.queue_low_bytes,
            min_interval_ps: self.cfg.digest_interval_ps,
        };
        for s in 0..self.topo.switches.len() {
            for port in self.sensed_ports(s) {
                if ctx.set_thresholds(s, port, Some(t)).is_err() {
                    self.fig.sum.refused += 1;
                }
            }
        }
        let first = ctx.now_ps() + self.cfg.poll_interval_ps;
        self.schedule(ctx, first, Action::Poll);
        if self.detector.window_ps > 0 {
            ctx.set_large_flow_detector(Some(self.detector));
        }
        // The baseline, and the announced jobs' entries: in the switches
        // at the first packet.
        let step = self.core.decide(ctx.now_ps() / 1_000);
        // Each switch's latest plan, the jobs' decisions' first.
        let mut plans = BTreeMap::new();
        for s in std::mem::take(&mut self.first).iter().chain(std::iter::once(&step)) {
            self.count(s);
            plans.extend(s.plans.iter().cloned());
        }
        let plans: Vec<_> = plans.into_iter().collect();
        let writes = self.apply.diff(&plans);
        let causes = vec![None; writes.groups.len()];
        self.land(ctx, writes, causes);
        self.schedule_tick(ctx);
    }

    fn on_large_flow(&mut self, ctx: &mut Ctx<'_>, f: &LargeFlow) {
        let Some(r) = self.report(f) else {
            self.fig.sum.refused += 1;
            return;
        };
        self.fig.detected.entry(r.key()).or_insert(ctx.now_ps());
        self.send(ctx, vec![Input::LargeFlow(r)]);
    }

    fn on_crossing(&mut self, ctx: &mut Ctx<'_>, c: &Crossing) {
        self.fig.sum.crossings += 1;
        if c.congested {
            self.fig.hot_since.insert(PortKey { switch: c.switch, port: c.port }, ctx.now_ps());
        }
        let seq = &mut self.seq[c.switch];
        *seq = seq.wrapping_add(1);
        let tc = ThresholdCrossing {
            switch: c.switch,
            port: c.port,
            depth: u32::try_from(c.depth_bytes / self.unit).unwrap_or(u32::MAX),
            switch_ts: ctx.now_ps() / 1_000,
            seq: *seq,
            congested: c.congested,
        };
        self.send(ctx, vec![Input::Crossing(tc)]);
    }

    fn on_link(&mut self, ctx: &mut Ctx<'_>, link: LinkId, up: bool) {
        if up {
            self.fig.failed_at.remove(&link);
        } else {
            self.fig.failed_at.insert(link, ctx.now_ps());
        }
        let input = if up { Input::LinkUp { link } } else { Input::LinkDown { link } };
        self.send(ctx, vec![input]);
    }

    fn on_wake(&mut self, ctx: &mut Ctx<'_>, token: u64) {
        match self.actions.remove(&token) {
            Some(Action::Arrive(inputs)) => {
                self.inbox.extend(inputs);
                self.request_decision(ctx, ctx.now_ps());
            }
            Some(Action::Poll) => self.poll(ctx),
            Some(Action::Decide) => {
                self.decide_at = None;
                self.decide(ctx, false);
            }
            Some(Action::Tick) => {
                self.tick_at = None;
                if ctx.now_ps() < self.busy_until {
                    self.schedule_tick(ctx);
                } else {
                    self.decide(ctx, true);
                }
            }
            Some(Action::Land { writes, causes }) => self.land(ctx, writes, causes),
            None => {}
        }
    }

    fn on_moved(&mut self, ctx: &mut Ctx<'_>, tag: u64) {
        if let Some(at) = self.fig.steer_tags.remove(&tag) {
            tracing::debug!(t_us = ctx.now_ps() / 1_000_000, tag, "first flowlet on a steer entry");
            self.fig.placed.push(ctx.now_ps().saturating_sub(at));
            return;
        }
        let Some(&c) = self.fig.tags.get(&tag) else { return };
        if !c.failure && self.fig.moved_causes.insert(c) {
            self.fig.moved.push(ctx.now_ps() - c.at_ps);
        }
    }

    fn summary(&self) -> ControlSummary {
        ControlSummary {
            reaction: Dist::of(self.fig.reaction.clone()),
            moved: Dist::of(self.fig.moved.clone()),
            failover: Dist::of(self.fig.failover.clone()),
            placement: Some(PlacementSummary {
                flows: self.core.placement().flow_count(),
                placed: Dist::of(self.fig.placed.clone()),
                ..self.fig.place.clone()
            }),
            ..self.fig.sum.clone()
        }
    }
}
