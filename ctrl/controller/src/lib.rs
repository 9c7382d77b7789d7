//! The controller daemon: switch sessions, the state task that turns
//! events into decisions, the reconciler, metrics and the status API.

pub mod agent;
pub mod core;
pub mod daemon;
pub mod ha;
pub mod hosts;
pub mod mode;
pub mod obs;
pub mod place;
pub mod plan;
pub mod reach;
pub mod reaction;
pub mod reconcile;
pub mod replay;
pub mod runtime;
pub mod snapshot;
pub mod stage;
pub mod status;
