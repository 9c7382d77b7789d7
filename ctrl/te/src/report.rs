//! What a decision says: paths, moves with their reasons, flows that could
//! not be placed, and the planned utilisation.

use metaroce_topo::{LinkId, SwitchId};
use serde::Serialize;

use crate::flow::FlowKey;

/// One switch-to-switch hop of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Hop {
    /// The switch that forwards.
    pub switch: SwitchId,
    /// Its egress port: a member of the switch's route group toward the
    /// flow's destination leaf.
    pub port: u16,
    pub link: LinkId,
    /// The neighbour the port leads to (the member's next hop).
    pub next: SwitchId,
    /// The group has more than one member here, so the flow needs a steer
    /// entry at this switch to stay on this path. Where it is false the
    /// route has no choice and no entry is needed.
    pub choice: bool,
}

/// A flow's path from its source leaf to its destination leaf. Empty for
/// a flow between two hosts of one leaf (nothing to steer).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Path {
    pub hops: Vec<Hop>,
}

impl Path {
    /// The steer entries this path needs, in the order to write them:
    /// downstream first, so that no packet meets half a path. Each pins
    /// the flow (or host pair) to `hop.port` at `hop.switch`.
    pub fn steer_hops(&self) -> impl Iterator<Item = &Hop> {
        self.hops.iter().rev().filter(|h| h.choice)
    }

    /// The egress port this path takes at `switch`, if it crosses it with a choice.
    pub fn port_at(&self, switch: SwitchId) -> Option<u16> {
        self.hops.iter().find(|h| h.switch == switch && h.choice).map(|h| h.port)
    }
}

/// Why a flow's placement changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// A flow seen or announced for the first time.
    New,
    /// Moved to lower the bottleneck (the hottest link on its path) by at
    /// least the configured margin.
    Rebalance,
    /// Its path crossed a failed link or switch.
    LinkFailed,
    /// Its route changed without a failure on its path (a group lost or
    /// gained members): the path or where it needs entries changed.
    RouteChanged,
    /// The flow ended or its job was removed: remove its entries.
    Ended,
    /// The flow had not moved onto its planned path (no flowlet gap yet):
    /// it is counted where it was seen, and its entries follow it there
    /// ([`crate::stay`]).
    Stayed,
    /// The flow was removed and added again between two decisions (one
    /// counted where it was seen that then paused, or one that ended and
    /// came back): placed afresh, its entries move from its old path.
    Replaced,
    /// Re-placed with every placed flow as one batch at the lower bound
    /// (`rebatch.rs`): learned one by one, they had missed it.
    Batch,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::New => "new",
            Reason::Rebalance => "rebalance",
            Reason::LinkFailed => "link_failed",
            Reason::RouteChanged => "route_changed",
            Reason::Ended => "ended",
            Reason::Stayed => "stayed",
            Reason::Replaced => "replaced",
            Reason::Batch => "batch",
        }
    }
}

/// One flow whose placement changed in a decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Move {
    pub flow: FlowKey,
    pub reason: Reason,
    /// The placement before (None for a new flow).
    pub from: Option<Path>,
    /// The placement after (None for an ended flow).
    pub to: Option<Path>,
    /// The highest utilisation on the old and new path, the flow included
    /// (1.0 = a full link); 0 where there is no such path.
    pub bottleneck_before: f64,
    pub bottleneck_after: f64,
}

/// A flow the decision could not place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unplaced {
    pub flow: FlowKey,
    /// What is missing, for the event log.
    pub why: String,
    /// The previous placement, kept as it was (never removed without a
    /// replacement); None if the flow never had one.
    pub kept: Option<Path>,
    /// The kept path crosses a failed link or switch.
    pub broken: bool,
}

/// The most utilised directed link.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkUse {
    pub switch: SwitchId,
    pub port: u16,
    pub link: LinkId,
    /// Planned load (placed flows plus background) over capacity.
    pub utilisation: f64,
}

/// The outcome of one decision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub now_ns: u64,
    /// In the order: ended, failed and re-routed, new, rebalanced.
    pub moves: Vec<Move>,
    pub unplaced: Vec<Unplaced>,
    /// The highest planned link utilisation after the decision.
    pub max_utilisation: f64,
    pub hottest: Option<LinkUse>,
    /// A lower bound on the highest utilisation any placement of these
    /// demands could reach (cut bounds and single flows); see `README.md`.
    /// (It counts the demand of unplaced flows too, so with flows that no
    /// path can carry it may exceed `max_utilisation`.)
    pub lower_bound: f64,
    /// Flows known to the planner after the decision.
    pub flows: usize,
    /// Rebalancing stopped at `max_moves`: more moves would have helped.
    pub budget_hit: bool,
    /// Local-search steps taken.
    pub search_steps: usize,
    /// The new flows were placed by the exact equitable colouring, or
    /// every placed flow was re-placed by it as one batch (`rebatch.rs`).
    pub exact: bool,
}
