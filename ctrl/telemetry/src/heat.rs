//! The congestion snapshot the policy decides on: per egress port, whether
//! it is congested, since when, and how deep its queue is.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// An egress port of a switch. `switch` is the topology's switch index
/// (`metaroce_topo::SwitchId`); this crate does not interpret it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PortKey {
    pub switch: usize,
    pub port: u16,
}

/// What the view knows about one egress port at the time of the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortHeat {
    /// True while the queue is above its high threshold (set by an up
    /// crossing, cleared by a down crossing through the low threshold).
    pub congested: bool,
    /// When `congested` last changed, nanoseconds on the controller's clock.
    pub since_ns: u64,
    /// Latest known queue depth, in the target's units (packets on BMv2).
    pub depth: u32,
    /// Largest depth seen in the last sensing window.
    pub max_depth: u32,
}

/// Every port the view knows about. Ports it has never heard of are absent
/// and count as cool.
pub type Heat = BTreeMap<PortKey, PortHeat>;
