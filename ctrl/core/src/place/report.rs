//! A large flow as the data plane reports it, and why a report was not used.

use std::net::Ipv4Addr;

use metaroce_te::FlowKey;
use serde::{Deserialize, Serialize};

/// A large flow as the data plane reported it, target-neutral (the agent
/// decodes the switch's digest and converts its time unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LargeFlowReport {
    /// The reporting switch (the flow's first switch).
    pub switch: usize,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub sport: u16,
    pub qp: u32,
    /// The port the flow left by.
    pub egress_port: u16,
    pub bytes: u64,
    pub window_ns: u64,
    /// The flow slot was shared during the window: the bytes may be more
    /// than this flow's. Such a report refreshes a known flow but never
    /// adds one.
    #[serde(default)]
    pub collision: bool,
}

impl LargeFlowReport {
    pub fn key(&self) -> FlowKey {
        FlowKey::flow(self.src, self.dst, self.sport, self.qp)
    }
    pub fn bps(&self) -> u64 {
        let bps = u128::from(self.bytes) * 8 * 1_000_000_000 / u128::from(self.window_ns.max(1));
        u64::try_from(bps).unwrap_or(u64::MAX)
    }
}

/// Why a large-flow report was not used.
#[derive(Debug, thiserror::Error)]
pub enum LargeFlowError {
    #[error("flow {0}: the report flags a shared detector slot and names no known flow")]
    SharedSlot(FlowKey),
    #[error("flow {0}: the planner refused it")]
    Planner(FlowKey, #[source] metaroce_te::FlowError),
}
