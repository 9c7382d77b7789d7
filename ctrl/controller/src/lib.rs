//! The controller daemon: switch sessions, the state task that turns
//! events into decisions, the reconciler, metrics and the status API.

pub mod admission;
pub mod agent;
pub mod core;
pub use metaroce_core::{mode, place, plan, reach, replay};
pub mod daemon;
pub mod ha;
pub mod hosts;
pub mod obs;
pub mod reaction;
pub mod reconcile;
pub mod runtime;
pub mod shard;
pub mod snapshot;
pub mod stage;
pub mod status;
