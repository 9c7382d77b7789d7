//! The view's inputs (what the controller decodes and passes in, and can
//! record and replay) and its serializable outputs (what the status API
//! shows). Plain data, serde both ways.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::heat::{PortHeat, PortKey};
use crate::report::TelemetryReport;
use crate::seq::SeqStats;

/// One threshold digest (`queue_digest_t`), decoded by the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThresholdCrossing {
    /// Topology switch index.
    pub switch: usize,
    pub port: u16,
    /// Queue depth at the crossing, target units.
    pub depth: u32,
    /// The switch's own timestamp (µs on BMv2); orders crossings of a port.
    pub switch_ts: u64,
    /// Per-switch digest sequence number.
    pub seq: u32,
    /// True: up through `queue_high`; false: down through `queue_low`.
    pub congested: bool,
}

/// One port's `port_max_depth` and `port_congested` registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRegisters {
    pub port: u16,
    /// Maximum depth since the controller last reset the register.
    pub max_depth: u32,
    pub congested: bool,
}

/// The queue-sensing registers of one switch, read together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterSnapshot {
    pub switch: usize,
    pub ports: Vec<PortRegisters>,
}

/// Anything the view learns from; with the time it was received this is
/// what a recording holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ViewInput {
    Crossing(ThresholdCrossing),
    Snapshot(RegisterSnapshot),
    Report(Box<TelemetryReport>),
    /// The controller saw this switch's pipeline restart
    /// ([`crate::CongestionView::switch_restarted`]).
    SwitchRestarted(usize),
}

/// Where a depth sample came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SampleSource {
    /// Depth at a threshold crossing.
    Digest,
    /// `port_max_depth` of a register snapshot: the window's maximum.
    Snapshot,
    /// Queue occupancy a report's hop (or sink) recorded.
    Report,
}

/// One queue-depth sample, stamped with the controller's receive time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    pub t_ns: u64,
    pub depth: u32,
    pub source: SampleSource,
}

/// Everything the view holds about one port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PortState {
    pub(crate) heat: PortHeat,
    /// Oldest first, at most `samples_per_port`.
    pub(crate) samples: VecDeque<Sample>,
    /// Switch timestamp of the last crossing applied, so a late digest
    /// cannot undo a newer one.
    pub(crate) last_crossing_ts: Option<u64>,
}

/// Latency of one hop of a path, target units.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HopLatency {
    pub port: PortKey,
    pub last: u32,
    pub ewma: f64,
}

/// Latency of one path, target units (µs on BMv2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathLatency {
    /// (switch, egress port) from the source leaf to the sink.
    pub path: Vec<PortKey>,
    pub hops: Vec<HopLatency>,
    pub last_total: u64,
    pub ewma_total: f64,
    pub reports: u64,
    pub last_update_ns: u64,
}

/// A congested port and the congested ports that feed it, transitively.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CongestionTree {
    pub root: PortKey,
    /// Every member but the root, sorted.
    pub members: Vec<PortKey>,
    /// Levels of feeders below the root: 0 for a root alone.
    pub depth: u32,
}

/// One port on the congestion map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortSummary {
    pub port: PortKey,
    pub heat: PortHeat,
    /// The most recent samples, oldest first.
    pub samples: Vec<Sample>,
}

/// The view's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewCounters {
    /// Report sequence numbers summed over sinks (lost = lost reports).
    pub reports: SeqStats,
    /// Reports from sinks beyond `max_sources`.
    pub reports_untracked: u64,
    /// Digest sequence numbers summed over switches (lost = lost digests).
    pub digests: SeqStats,
    pub digests_untracked: u64,
    /// Report hops whose node id is not in the node table.
    pub unknown_node_ids: u64,
    /// Updates for new ports refused because `max_ports` were known.
    pub ports_over_cap: u64,
    /// Paths evicted, least recently updated first, at `max_paths`.
    pub paths_evicted: u64,
    /// Snapshot ports whose congested flag disagreed with the view.
    pub reconciled: u64,
    /// Crossings not applied: duplicates, or older than the last applied.
    pub stale_crossings: u64,
    pub ports: usize,
    pub paths: usize,
}

/// The whole view, for the status API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViewSummary {
    pub ports: Vec<PortSummary>,
    pub hot_ports: Vec<PortKey>,
    pub trees: Vec<CongestionTree>,
    pub paths: Vec<PathLatency>,
    pub counters: ViewCounters,
    /// Switches whose digests showed a gap or restart since their last
    /// snapshot: read their registers soon.
    pub needs_snapshot: Vec<usize>,
}
