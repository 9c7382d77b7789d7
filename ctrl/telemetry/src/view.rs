//! The fabric-wide congestion view: per-port heat and queue depth over
//! time, path latencies, lost reports and digests, and congestion trees,
//! built from threshold crossings, register snapshots and Telemetry
//! Reports. The controller owns one and feeds it events with their
//! receive time; the view never reads a clock, so a recording replays to
//! the same state.
//!
//! Memory is bounded by [`ViewConfig`], whatever the input:
//! - ports: at most `max_ports`, each with at most `samples_per_port`
//!   samples (16 bytes each) and a fixed-size state; updates for new ports
//!   beyond the cap are counted in `ports_over_cap` and dropped (known
//!   ports, hot ones included, are never evicted). Default: 4096 × 128
//!   samples = 8 MiB at most;
//! - paths: at most `max_paths`, each at most 43 hops (the longest INT
//!   stack a report can carry, plus the sink; ~80 bytes per hop), least
//!   recently updated evicted first. Default 4096 paths: ~1.5 MiB for
//!   5-hop Clos paths, 14 MiB if every path had 43 hops;
//! - sequence trackers: at most `max_sources` report sinks and as many
//!   digest sources, ~100 bytes each;
//! - switches awaiting a snapshot: only switches with a digest tracker.
//!
//! A digest storm only updates existing state and pushes samples into the
//! bounded rings. Congestion trees are computed on demand from the
//! congested ports and the links given at construction.

mod paths;
mod trees;
mod types;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::heat::{Heat, PortHeat, PortKey};
use crate::report::TelemetryReport;
use crate::seq::{SeqConfig, SeqEvent, SeqTable};
use paths::PathTable;
use trees::Links;
use types::PortState;
pub use types::{
    CongestionTree, HopLatency, PathLatency, PortRegisters, PortSummary, RegisterSnapshot, Sample,
    SampleSource, ThresholdCrossing, ViewCounters, ViewInput, ViewSummary,
};

/// Bounds and smoothing of the view.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ViewConfig {
    /// Depth samples kept per port (a ring: the oldest goes first).
    pub samples_per_port: usize,
    /// Ports the view tracks at most.
    pub max_ports: usize,
    /// Paths whose latency the view tracks at most.
    pub max_paths: usize,
    /// Report sinks, and digest switches, tracked for sequence gaps.
    pub max_sources: usize,
    /// Weight of the newest value in latency EWMAs (0..=1).
    pub ewma_weight: f64,
}

impl Default for ViewConfig {
    /// Sized for a few hundred switches: ~8 MiB of samples at most.
    fn default() -> Self {
        ViewConfig {
            samples_per_port: 128,
            max_ports: 4096,
            max_paths: 4096,
            max_sources: 1024,
            ewma_weight: 0.125,
        }
    }
}

/// The congestion view. See the module doc for what it owns and its bounds.
#[derive(Debug, Clone)]
pub struct CongestionView {
    cfg: ViewConfig,
    node_to_switch: BTreeMap<u32, usize>,
    links: Links,
    ports: BTreeMap<PortKey, PortState>,
    paths: PathTable,
    report_seq: SeqTable<(u32, u8)>,
    digest_seq: SeqTable<usize>,
    needs_snapshot: BTreeSet<usize>,
    counters: ViewCounters,
    /// Ports congested now: [`CongestionView::any_hot`] is asked every
    /// tick, and scanning every port of a large fabric for it was most of
    /// an idle controller's state task.
    hot: usize,
}

impl CongestionView {
    /// `node_ids` maps INT / report node ids (`config.switch_id`) to
    /// topology switch indices; `links` are the fabric's links as
    /// ((switch, port), (peer switch, peer port)).
    pub fn new(cfg: ViewConfig, node_ids: BTreeMap<u32, usize>, links: &[(PortKey, PortKey)]) -> Self {
        CongestionView {
            cfg,
            node_to_switch: node_ids,
            links: Links::new(links),
            ports: BTreeMap::new(),
            paths: PathTable::new(cfg.max_paths, cfg.ewma_weight),
            report_seq: SeqTable::new(SeqConfig::REPORTS, cfg.max_sources),
            digest_seq: SeqTable::new(SeqConfig::DIGESTS, cfg.max_sources),
            needs_snapshot: BTreeSet::new(),
            counters: ViewCounters::default(),
            hot: 0,
        }
    }

    pub fn config(&self) -> &ViewConfig {
        &self.cfg
    }

    /// Applies any input; what a replay calls.
    pub fn apply(&mut self, now_ns: u64, input: &ViewInput) {
        match input {
            ViewInput::Crossing(c) => self.on_crossing(now_ns, c),
            ViewInput::Snapshot(s) => self.on_snapshot(now_ns, s),
            ViewInput::Report(r) => self.on_report(now_ns, r),
            ViewInput::SwitchRestarted(s) => self.switch_restarted(*s),
        }
    }

    /// A threshold digest: up sets congested (since = `now_ns`), down
    /// clears it. A duplicate, or a crossing older (by switch time) than
    /// the last one applied to the port, only counts as stale.
    pub fn on_crossing(&mut self, now_ns: u64, c: &ThresholdCrossing) {
        let ev = self.digest_seq.observe(&c.switch, u64::from(c.seq));
        if matches!(ev, Some(SeqEvent::Gap { .. } | SeqEvent::Restart)) {
            // A digest was lost (or the switch restarted): the registers know.
            self.needs_snapshot.insert(c.switch);
        }
        if ev == Some(SeqEvent::Duplicate) {
            self.counters.stale_crossings += 1;
            return;
        }
        let restart = ev == Some(SeqEvent::Restart);
        if restart {
            // The switch's clock started again with its sequence.
            self.forget_crossing_order(c.switch);
        }
        let cap = self.cfg.samples_per_port;
        let key = PortKey { switch: c.switch, port: c.port };
        let Some(st) = self.port_mut(key, now_ns) else { return };
        push_sample(st, Sample { t_ns: now_ns, depth: c.depth, source: SampleSource::Digest }, cap);
        if !restart && st.last_crossing_ts.is_some_and(|t| c.switch_ts < t) {
            self.counters.stale_crossings += 1;
            return;
        }
        st.last_crossing_ts = Some(c.switch_ts);
        let changed = set_congested(&mut st.heat, c.congested, now_ns);
        self.count_hot(changed);
    }

    /// A register snapshot: `max_depth` becomes the port's window maximum,
    /// and where the congested flag disagrees with the view (a digest was
    /// lost) the snapshot wins, with since = `now_ns`.
    pub fn on_snapshot(&mut self, now_ns: u64, s: &RegisterSnapshot) {
        self.needs_snapshot.remove(&s.switch);
        let cap = self.cfg.samples_per_port;
        for p in &s.ports {
            let key = PortKey { switch: s.switch, port: p.port };
            let Some(st) = self.port_mut(key, now_ns) else { continue };
            push_sample(st, Sample { t_ns: now_ns, depth: p.max_depth, source: SampleSource::Snapshot }, cap);
            st.heat.max_depth = p.max_depth;
            if st.heat.congested != p.congested {
                let changed = set_congested(&mut st.heat, p.congested, now_ns);
                self.count_hot(changed);
                self.counters.reconciled += 1;
            }
        }
    }

    /// A Telemetry Report: sequence accounting per sink, a depth sample
    /// for every hop's (switch, egress port), and the path's latencies.
    /// Hops with an unknown node id are counted and skipped, and then the
    /// path cannot be named, so its latency is not recorded.
    pub fn on_report(&mut self, now_ns: u64, r: &TelemetryReport) {
        let source = (r.group.node_id, r.group.hw_id);
        if self.report_seq.observe(&source, u64::from(r.group.seq)) == Some(SeqEvent::Duplicate) {
            return;
        }
        let hops = r.path();
        let cap = self.cfg.samples_per_port;
        let mut path = Vec::with_capacity(hops.len());
        let mut latencies = Vec::with_capacity(hops.len());
        for h in &hops {
            let Some(&switch) = self.node_to_switch.get(&h.node_id) else {
                self.counters.unknown_node_ids += 1;
                continue;
            };
            let key = PortKey { switch, port: h.egress_port };
            path.push(key);
            latencies.push(h.hop_latency);
            let Some(st) = self.port_mut(key, now_ns) else { continue };
            push_sample(
                st,
                Sample { t_ns: now_ns, depth: h.queue_occupancy, source: SampleSource::Report },
                cap,
            );
        }
        if path.len() == hops.len() {
            self.paths.update(now_ns, path, &latencies);
        }
    }

    /// The controller saw `switch` restart (its pipeline was reloaded):
    /// forget its digest and report sequence state and the switch times
    /// of its crossings, which all start again from 0. The view detects a
    /// restart by itself only when the sequence jumps back further than
    /// the reorder window (64); a switch that had sent fewer digests
    /// would otherwise have its new ones taken for duplicates. Heat is
    /// kept: the next register snapshot reconciles it.
    pub fn switch_restarted(&mut self, switch: usize) {
        self.digest_seq.forget(&switch);
        let nodes: Vec<u32> =
            self.node_to_switch.iter().filter(|(_, &s)| s == switch).map(|(&n, _)| n).collect();
        let sources: Vec<(u32, u8)> =
            self.report_seq.iter().map(|(k, _)| *k).filter(|(n, _)| nodes.contains(n)).collect();
        for s in &sources {
            self.report_seq.forget(s);
        }
        self.forget_crossing_order(switch);
    }

    fn forget_crossing_order(&mut self, switch: usize) {
        let ports = PortKey { switch, port: 0 }..=PortKey { switch, port: u16::MAX };
        for (_, st) in self.ports.range_mut(ports) {
            st.last_crossing_ts = None;
        }
    }

    /// The port's state, created if there is room.
    fn port_mut(&mut self, key: PortKey, now_ns: u64) -> Option<&mut PortState> {
        if !self.ports.contains_key(&key) {
            if self.ports.len() >= self.cfg.max_ports {
                self.counters.ports_over_cap += 1;
                return None;
            }
            let heat = PortHeat { congested: false, since_ns: now_ns, depth: 0, max_depth: 0 };
            let st = PortState { heat, samples: VecDeque::new(), last_crossing_ts: None };
            self.ports.insert(key, st);
        }
        self.ports.get_mut(&key)
    }

    /// True when any port is congested (no allocation: a hot-path check).
    pub fn any_hot(&self) -> bool {
        self.hot > 0
    }

    /// Keeps the count of congested ports: `changed` is a port's new flag,
    /// when it changed.
    fn count_hot(&mut self, changed: Option<bool>) {
        match changed {
            Some(true) => self.hot += 1,
            Some(false) => self.hot = self.hot.saturating_sub(1),
            None => {}
        }
    }

    /// One port's heat, if the view knows the port.
    pub fn port_heat(&self, key: PortKey) -> Option<PortHeat> {
        self.ports.get(&key).map(|st| st.heat)
    }

    /// The snapshot the policy decides on.
    pub fn heat(&self) -> Heat {
        self.ports.iter().map(|(k, st)| (*k, st.heat)).collect()
    }

    /// Congested ports, deepest window maximum first.
    pub fn hot_ports(&self) -> Vec<PortKey> {
        let mut hot: Vec<_> = self.ports.iter().filter(|(_, st)| st.heat.congested).collect();
        hot.sort_by(|a, b| b.1.heat.max_depth.cmp(&a.1.heat.max_depth).then(a.0.cmp(b.0)));
        hot.into_iter().map(|(k, _)| *k).collect()
    }

    fn congested(&self) -> BTreeSet<PortKey> {
        self.ports.iter().filter(|(_, st)| st.heat.congested).map(|(k, _)| *k).collect()
    }

    /// The tree of `port`: `None` unless it is congested.
    pub fn congestion_tree(&self, port: PortKey) -> Option<CongestionTree> {
        let congested = self.congested();
        congested.contains(&port).then(|| self.links.tree(port, &congested))
    }

    /// Every congestion tree, one per root.
    pub fn congestion_trees(&self) -> Vec<CongestionTree> {
        self.links.trees(&self.congested())
    }

    /// The depth samples of a port, oldest first.
    pub fn samples(&self, port: PortKey) -> impl Iterator<Item = &Sample> {
        self.ports.get(&port).into_iter().flat_map(|st| st.samples.iter())
    }

    /// The latency of one path, if the view tracks it.
    pub fn path_latency(&self, path: &[PortKey]) -> Option<&PathLatency> {
        self.paths.get(path)
    }

    /// Every tracked path's latency.
    pub fn path_latencies(&self) -> Vec<PathLatency> {
        self.paths.all()
    }

    /// The congestion map: every port's heat and its `recent` newest samples.
    pub fn congestion_map(&self, recent: usize) -> Vec<PortSummary> {
        self.ports
            .iter()
            .map(|(k, st)| {
                let skip = st.samples.len().saturating_sub(recent);
                PortSummary {
                    port: *k,
                    heat: st.heat,
                    samples: st.samples.iter().skip(skip).copied().collect(),
                }
            })
            .collect()
    }

    /// Switches whose digests showed a gap or a restart since their last
    /// register snapshot.
    pub fn needs_snapshot(&self) -> Vec<usize> {
        self.needs_snapshot.iter().copied().collect()
    }

    pub fn counters(&self) -> ViewCounters {
        ViewCounters {
            reports: self.report_seq.totals(),
            reports_untracked: self.report_seq.untracked(),
            digests: self.digest_seq.totals(),
            digests_untracked: self.digest_seq.untracked(),
            paths_evicted: self.paths.evicted,
            ports: self.ports.len(),
            paths: self.paths.len(),
            ..self.counters
        }
    }

    /// Everything, for the status API.
    pub fn summary(&self, recent_samples: usize) -> ViewSummary {
        ViewSummary {
            ports: self.congestion_map(recent_samples),
            hot_ports: self.hot_ports(),
            trees: self.congestion_trees(),
            paths: self.path_latencies(),
            counters: self.counters(),
            needs_snapshot: self.needs_snapshot(),
        }
    }
}

/// Records a sample in the port's ring (at most `cap`, the oldest goes)
/// and what it says about the port's depth. A snapshot's window maximum is
/// not the current depth, so it only sets `max_depth` (in `on_snapshot`).
fn push_sample(st: &mut PortState, s: Sample, cap: usize) {
    if s.source != SampleSource::Snapshot {
        st.heat.depth = s.depth;
        st.heat.max_depth = st.heat.max_depth.max(s.depth);
    }
    while st.samples.len() >= cap.max(1) {
        st.samples.pop_front();
    }
    if cap > 0 {
        st.samples.push_back(s);
    }
}

/// `since_ns` moves only when the flag changes: a repeated up crossing
/// (its down was lost) keeps the time congestion began. Returns the new
/// flag when it changed.
fn set_congested(h: &mut PortHeat, congested: bool, now_ns: u64) -> Option<bool> {
    if h.congested == congested {
        return None;
    }
    h.congested = congested;
    h.since_ns = now_ns;
    Some(congested)
}
