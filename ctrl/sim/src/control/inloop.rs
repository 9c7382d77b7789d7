//! The controller in the loop (mode `metaroce`), as a [`Control`]: the
//! controller's own libraries, the telemetry crate's congestion view and
//! the policy, driven in virtual time the way `ctrl/controller`'s core
//! drives them in real time (crossing → view → decide → desired groups →
//! write the difference).
//!
//! Time model (all from the scenario's `control:` section):
//! - a threshold crossing at a switch reaches the view `digest_latency`
//!   later, and so does every `poll_interval` a snapshot of every port's
//!   registers (the deepest queue since the last read, the congested
//!   flag), as the controller's agents poll them; a link going down reaches the controller as a port-status
//!   notification after the same latency, and the routing fails the link;
//! - the controller decides when an input changed the heat or the fabric,
//!   and at the next instant a policy timer (hold-up, hold-down, step
//!   interval) can fire; a decision keeps it busy for `decision_time`,
//!   inputs meanwhile wait for the next one;
//! - the groups that differ from what the switches hold land
//!   `write_latency` after the decision ended, all switches in parallel.

use std::collections::{BTreeMap, BTreeSet};

use metaroce_policy::{ChangeKind, Decision, Input, Policy, PolicyState};
use metaroce_telemetry::view::{
    CongestionView, PortRegisters, RegisterSnapshot, ThresholdCrossing, ViewConfig,
};
use metaroce_telemetry::PortKey;
use metaroce_topo::units::QueueDepth;
use metaroce_topo::{LinkId, Routing, SwitchId, Topology};

use crate::control::converge::{self, Groups, Weights};
use crate::control::placement::{Announced, Placement, SteerWrite};
use crate::control::{
    Control, ControlSummary, Crossing, Ctx, Detector, Dist, LargeFlow, PlacementSummary, Thresholds,
};
use crate::scenario::config::{ControlConfig, ROCE_HEADER_BYTES};

/// What a wake-up token stands for.
#[derive(Debug, Clone)]
enum Action {
    Digest { c: Crossing, at_ps: u64 },
    PortStatus { link: LinkId, up: bool },
    Poll,
    Snapshots(Vec<RegisterSnapshot>),
    Decide,
    Land(Vec<Write>),
    LargeFlow { f: LargeFlow, at_ps: u64 },
    Steer(Vec<SteerWrite>),
    Quiet,
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

#[derive(Debug, Clone)]
struct Write {
    switch: SwitchId,
    leaf: SwitchId,
    weights: Weights,
    cause: Option<Cause>,
}

/// Why the controller in the loop cannot be built from the scenario.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    #[error("control.policy: {0}")]
    Policy(#[from] metaroce_policy::ConfigError),
    #[error("control.te: {0}")]
    Te(#[from] metaroce_te::ConfigError),
}

/// The controller in the loop. See the module doc.
#[derive(Debug)]
pub(crate) struct PolicyLoop<'a> {
    topo: &'a Topology,
    cfg: ControlConfig,
    routing: Routing,
    view: CongestionView,
    policy: Policy,
    state: PolicyState,
    held: Groups,
    /// Bytes per queue unit of the topology's thresholds (what the policy
    /// compares depths with).
    unit: u64,
    seq: Vec<u32>,
    actions: BTreeMap<u64, Action>,
    next_token: u64,
    busy_until: u64,
    /// The decision scheduled next: (when, its token).
    decide_at: Option<(u64, u64)>,
    /// Per port: the switch time of the up crossing that made it hot.
    hot_since: BTreeMap<PortKey, u64>,
    /// Links down, by when they failed.
    failed_at: BTreeMap<LinkId, u64>,
    /// Per rewrite tag, its cause; causes whose traffic has moved.
    tags: BTreeMap<u64, Cause>,
    moved_causes: BTreeSet<Cause>,
    sum: ControlSummary,
    reaction: Vec<u64>,
    moved: Vec<u64>,
    failover: Vec<u64>,
    /// Flow placement (traffic engineering) and the detector it listens to.
    place: Placement,
    detector: Detector,
    announced: Vec<Announced>,
    /// Per steer-write tag, when its flow was first reported large.
    steer_tags: BTreeMap<u64, u64>,
    /// From a flow's first large-flow report to its first flowlet on the
    /// path the planner chose.
    placed: Vec<u64>,
    /// A quiet check is scheduled.
    quiet_tick: bool,
}

impl<'a> PolicyLoop<'a> {
    pub fn new(
        topo: &'a Topology,
        routing: &Routing,
        cfg: &ControlConfig,
        mtu: u32,
        announced: Vec<Announced>,
    ) -> Result<Self, LoopError> {
        let nodes = topo.switches.iter().enumerate().map(|(i, s)| (s.int_node_id, i)).collect();
        let links: Vec<(PortKey, PortKey)> = topo
            .links
            .iter()
            .map(|l| {
                (
                    PortKey { switch: l.a.switch, port: l.a.port },
                    PortKey { switch: l.b.switch, port: l.b.port },
                )
            })
            .collect();
        let unit = match topo.fabric.queue_high {
            QueueDepth::Packets(_) => u64::from(mtu + ROCE_HEADER_BYTES),
            QueueDepth::Bytes(_) => 1,
        };
        let policy = Policy::new(cfg.policy.clone())?;
        // Forgotten after the policy's hold-down (the longest memory it
        // keeps), and never before 16 detector windows without a report.
        let windows = cfg.large_flow_window_ps.saturating_mul(16);
        let forget = (cfg.policy.hold_down_ns * 1_000).max(windows);
        let place = Placement::new(topo, routing, cfg.te.clone(), forget, cfg.large_flow_window_ps)?;
        Ok(PolicyLoop {
            topo,
            cfg: cfg.clone(),
            routing: routing.clone(),
            view: CongestionView::new(ViewConfig::default(), nodes, &links),
            policy,
            state: PolicyState::default(),
            held: Groups::of(topo, routing),
            unit,
            seq: vec![0; topo.switches.len()],
            actions: BTreeMap::new(),
            next_token: 0,
            busy_until: 0,
            decide_at: None,
            hot_since: BTreeMap::new(),
            failed_at: BTreeMap::new(),
            tags: BTreeMap::new(),
            moved_causes: BTreeSet::new(),
            sum: ControlSummary { kind: "controller in the loop".into(), ..Default::default() },
            reaction: Vec::new(),
            moved: Vec::new(),
            failover: Vec::new(),
            place,
            detector: Detector { window_ps: cfg.large_flow_window_ps, threshold_bytes: cfg.large_flow_bytes },
            announced,
            steer_tags: BTreeMap::new(),
            placed: Vec::new(),
            quiet_tick: false,
        })
    }

    fn schedule(&mut self, ctx: &mut Ctx<'_>, at_ps: u64, a: Action) -> u64 {
        let token = self.next_token;
        self.next_token += 1;
        self.actions.insert(token, a);
        ctx.wake_at(at_ps, token);
        token
    }

    /// A decision as soon as the controller is free, unless one is due.
    fn request_decision(&mut self, ctx: &mut Ctx<'_>, at_ps: u64) {
        let at = at_ps.max(self.busy_until).max(ctx.now_ps());
        match self.decide_at {
            Some((t, _)) if t <= at => return,
            // An earlier decision replaces a later one: its wake-up finds nothing.
            Some((_, token)) => _ = self.actions.remove(&token),
            None => {}
        }
        let token = self.schedule(ctx, at, Action::Decide);
        self.decide_at = Some((at, token));
    }

    fn digest(&mut self, ctx: &mut Ctx<'_>, c: Crossing, at_ps: u64) {
        let seq = &mut self.seq[c.switch];
        *seq = seq.wrapping_add(1);
        let tc = ThresholdCrossing {
            switch: c.switch,
            port: c.port,
            depth: u32::try_from(c.depth_bytes / self.unit).unwrap_or(u32::MAX),
            switch_ts: at_ps / 1_000,
            seq: *seq,
            congested: c.congested,
        };
        let key = PortKey { switch: c.switch, port: c.port };
        let before = self.view.port_heat(key).map(|h| h.congested);
        self.view.on_crossing(ctx.now_ps() / 1_000, &tc);
        if self.view.port_heat(key).map(|h| h.congested) != before {
            self.request_decision(ctx, ctx.now_ps());
        }
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
            snaps.push(RegisterSnapshot { switch: s, ports });
        }
        let now = ctx.now_ps();
        if self.place.age(now) {
            self.request_decision(ctx, now);
        }
        self.schedule(ctx, now + self.cfg.digest_latency_ps, Action::Snapshots(snaps));
        self.schedule(ctx, now + self.cfg.poll_interval_ps, Action::Poll);
    }

    fn snapshots(&mut self, ctx: &mut Ctx<'_>, snaps: &[RegisterSnapshot]) {
        let mut changed = false;
        for snap in snaps {
            let flag = |v: &CongestionView, p: u16| {
                v.port_heat(PortKey { switch: snap.switch, port: p }).map(|h| h.congested)
            };
            let before: Vec<Option<bool>> = snap.ports.iter().map(|p| flag(&self.view, p.port)).collect();
            self.view.on_snapshot(ctx.now_ps() / 1_000, snap);
            changed |= snap.ports.iter().zip(before).any(|(p, b)| flag(&self.view, p.port) != b);
        }
        if changed {
            self.request_decision(ctx, ctx.now_ps());
        }
    }

    /// Ports with queue sensing: every fabric and host port of switch `s`.
    fn sensed_ports(&self, s: SwitchId) -> Vec<u16> {
        let ports = self.topo.adjacency(s).iter().map(|a| a.port);
        let hosts = self.topo.hosts_of(s).iter().map(|&h| self.topo.hosts[h].port);
        ports.chain(hosts).collect()
    }

    fn decide(&mut self, ctx: &mut Ctx<'_>) {
        self.decide_at = None;
        let now = ctx.now_ps();
        let heat = self.view.heat();
        let input = Input { topo: self.topo, routing: &self.routing, heat: &heat, now_ns: now / 1_000 };
        let d = self.policy.decide(input, &mut self.state);
        self.sum.decisions += 1;
        self.busy_until = now + self.cfg.decision_ps;
        let writes = self.writes(&d);
        let steer = self.place.decide(now);
        if writes.is_empty() && steer.is_empty() {
            self.sum.no_change += 1;
        }
        let land = self.busy_until + self.cfg.write_latency_ps;
        if !writes.is_empty() {
            self.schedule(ctx, land, Action::Land(writes));
        }
        if !steer.is_empty() {
            self.schedule(ctx, land, Action::Steer(steer));
        }
        let pending = self.state.pending().next().is_some();
        let next =
            if pending { Some(self.busy_until) } else { self.next_timer(now / 1_000).map(|ns| ns * 1_000) };
        if let Some(t) = next {
            self.request_decision(ctx, t);
        }
    }

    /// The groups that differ from what the switches hold, with causes.
    fn writes(&mut self, d: &Decision) -> Vec<Write> {
        let mut desired = Groups::default();
        for s in 0..self.topo.switches.len() {
            for &leaf in self.routing.destinations() {
                let Some(base) = converge::baseline(&self.routing, s, leaf) else { continue };
                let w = match self.state.desired(s, leaf) {
                    Some(o) if o.len() == base.len() => o.iter().map(|pw| (pw.port, pw.weight)).collect(),
                    _ => base,
                };
                desired.0.insert((s, leaf), w);
            }
        }
        let latest_failure = self.failed_at.iter().map(|(&l, &t)| (t, l)).max();
        self.held
            .update(desired)
            .into_iter()
            .map(|((switch, leaf), weights)| {
                let change = d.changes.iter().find(|c| c.switch == switch && c.leaf == leaf);
                let cause = match change {
                    Some(c) if c.kind == ChangeKind::Derate => c.cause.and_then(|h| {
                        let key = PortKey { switch: h.switch, port: h.port };
                        let at_ps = *self.hot_since.get(&key)?;
                        Some(Cause { at_ps, failure: false, switch: h.switch, port: h.port })
                    }),
                    Some(c) if c.kind == ChangeKind::Restore => None,
                    _ => latest_failure.map(|(at_ps, l)| Cause {
                        at_ps,
                        failure: true,
                        switch: self.topo.links[l].a.switch,
                        port: self.topo.links[l].a.port,
                    }),
                };
                Write { switch, leaf, weights, cause }
            })
            .collect()
    }

    fn land(&mut self, ctx: &mut Ctx<'_>, writes: Vec<Write>) {
        let mut causes = BTreeSet::new();
        for w in writes {
            let tag = self.next_token;
            self.next_token += 1;
            match ctx.set_group(w.switch, w.leaf, &w.weights, tag) {
                Ok(()) => {
                    tracing::debug!(t_us = ctx.now_ps() / 1_000_000, switch = w.switch, leaf = w.leaf, weights = ?w.weights, "weights in place");
                    self.sum.group_writes += 1
                }
                Err(e) => {
                    tracing::warn!(switch = w.switch, leaf = w.leaf, error = %e, "group write refused");
                    self.sum.refused += 1;
                    continue;
                }
            }
            if let Some(c) = w.cause {
                self.tags.insert(tag, c);
                causes.insert(c);
            }
        }
        for c in causes {
            let dt = ctx.now_ps() - c.at_ps;
            if c.failure {
                self.failover.push(dt);
            } else {
                self.reaction.push(dt);
            }
        }
    }

    /// Steer writes land: the switches' new flowlets take them from now on.
    fn land_steer(&mut self, ctx: &mut Ctx<'_>, writes: &[SteerWrite]) {
        for w in writes {
            let tag = self.next_token;
            self.next_token += 1;
            tracing::debug!(t_us = ctx.now_ps() / 1_000_000, tag, switch = w.switch, key = ?w.key, port = ?w.port, "steer write lands");
            if self.place.land(ctx, w, tag) && w.port.is_some() {
                if let Some(t) = w.detected_ps {
                    self.steer_tags.insert(tag, t);
                }
            }
        }
    }

    /// While flows are placed where they were seen, checks every detector
    /// window whether they went quiet.
    fn watch_quiet(&mut self, ctx: &mut Ctx<'_>) {
        if !self.quiet_tick && self.place.has_stays() {
            self.quiet_tick = true;
            let at = ctx.now_ps() + self.detector.window_ps;
            self.schedule(ctx, at, Action::Quiet);
        }
    }

    /// The next instant a policy timer may step a level, in ns.
    fn next_timer(&self, now: u64) -> Option<u64> {
        let cfg = self.policy.config();
        let heat = self.view.heat();
        let mut next: Option<u64> = None;
        let mut consider = |t: u64| {
            if t > now {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        for (key, h) in &heat {
            let st = self.state.ports().find(|(k, _)| k == key).map(|(_, s)| s);
            let step_ok = st.and_then(|s| s.last_step_ns).map_or(0, |t| t + cfg.step_interval_ns);
            let level = st.map_or(0, |s| s.level);
            if h.congested && level < self.policy.max_level() {
                consider((h.since_ns + cfg.hold_up_ns).max(step_ok));
            }
        }
        for (key, st) in self.state.ports() {
            let step_ok = st.last_step_ns.map_or(0, |t| t + cfg.step_interval_ns);
            let cool_since = match heat.get(&key) {
                Some(h) if h.congested => continue,
                Some(h) => h.since_ns,
                None => st.absent_since_ns.unwrap_or(now),
            };
            consider((cool_since + cfg.hold_down_ns).max(step_ok));
        }
        next
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
                    self.sum.refused += 1;
                }
            }
        }
        let first = ctx.now_ps() + self.cfg.poll_interval_ps;
        self.schedule(ctx, first, Action::Poll);
        if self.detector.window_ps > 0 {
            ctx.set_large_flow_detector(Some(self.detector));
        }
        // Announced jobs come through the job API before their traffic
        // starts: their placement is in the switches at the first packet.
        for job in std::mem::take(&mut self.announced) {
            if let Err(e) = self.place.announce(self.topo, &job) {
                tracing::warn!(job = %job.name, error = %e, "announced job refused");
                self.sum.refused += 1;
            }
        }
        let writes = self.place.decide(ctx.now_ps());
        self.land_steer(ctx, &writes);
    }

    fn on_large_flow(&mut self, ctx: &mut Ctx<'_>, f: &LargeFlow) {
        let at = ctx.now_ps() + self.cfg.digest_latency_ps;
        self.schedule(ctx, at, Action::LargeFlow { f: *f, at_ps: ctx.now_ps() });
    }

    fn on_crossing(&mut self, ctx: &mut Ctx<'_>, c: &Crossing) {
        self.sum.crossings += 1;
        if c.congested {
            self.hot_since.insert(PortKey { switch: c.switch, port: c.port }, ctx.now_ps());
        }
        let at = ctx.now_ps() + self.cfg.digest_latency_ps;
        self.schedule(ctx, at, Action::Digest { c: *c, at_ps: ctx.now_ps() });
    }

    fn on_link(&mut self, ctx: &mut Ctx<'_>, link: LinkId, up: bool) {
        if up {
            self.failed_at.remove(&link);
        } else {
            self.failed_at.insert(link, ctx.now_ps());
        }
        let at = ctx.now_ps() + self.cfg.digest_latency_ps;
        self.schedule(ctx, at, Action::PortStatus { link, up });
    }

    fn on_wake(&mut self, ctx: &mut Ctx<'_>, token: u64) {
        match self.actions.remove(&token) {
            Some(Action::Digest { c, at_ps }) => self.digest(ctx, c, at_ps),
            Some(Action::PortStatus { link, up }) => {
                converge::set_link(&mut self.routing, self.topo, link, up);
                self.place.routing(&self.routing);
                self.request_decision(ctx, ctx.now_ps());
            }
            Some(Action::Poll) => self.poll(ctx),
            Some(Action::Snapshots(snaps)) => self.snapshots(ctx, &snaps),
            Some(Action::Decide) => self.decide(ctx),
            Some(Action::Land(writes)) => self.land(ctx, writes),
            Some(Action::LargeFlow { f, at_ps }) if self.place.on_large_flow(&f, at_ps, ctx.now_ps()) => {
                self.request_decision(ctx, ctx.now_ps());
                self.watch_quiet(ctx);
            }
            Some(Action::Quiet) => {
                self.quiet_tick = false;
                if self.place.requeue_quiet(ctx.now_ps()) {
                    self.request_decision(ctx, ctx.now_ps());
                }
                self.watch_quiet(ctx);
            }
            Some(Action::LargeFlow { .. }) => {}
            Some(Action::Steer(writes)) => self.land_steer(ctx, &writes),
            None => {}
        }
    }

    fn on_moved(&mut self, ctx: &mut Ctx<'_>, tag: u64) {
        if let Some(at) = self.steer_tags.remove(&tag) {
            tracing::debug!(t_us = ctx.now_ps() / 1_000_000, tag, "first flowlet on a steer entry");
            self.placed.push(ctx.now_ps().saturating_sub(at));
            return;
        }
        let Some(&c) = self.tags.get(&tag) else { return };
        if !c.failure && self.moved_causes.insert(c) {
            self.moved.push(ctx.now_ps() - c.at_ps);
        }
    }

    fn summary(&self) -> ControlSummary {
        ControlSummary {
            reaction: Dist::of(self.reaction.clone()),
            moved: Dist::of(self.moved.clone()),
            failover: Dist::of(self.failover.clone()),
            placement: Some(PlacementSummary {
                large_flow_reports: self.place.stats.large_flow_reports,
                flows: self.place.flows(),
                steer_writes: self.place.stats.steer_writes,
                moves: self.place.stats.moves.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                unplaced: self.place.stats.unplaced,
                stayed: self.place.stats.stayed,
                refused: self.place.stats.refused,
                placed: Dist::of(self.placed.clone()),
                planned_max_utilisation: self.place.planned_max.last().copied(),
            }),
            ..self.sum.clone()
        }
    }
}
