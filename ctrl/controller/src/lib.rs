//! The controller daemon: switch sessions, the state task that turns
//! events into decisions, the reconciler, metrics and the status API.

pub mod agent;
pub mod mode;
pub mod plan;
pub mod reconcile;
pub mod obs;
