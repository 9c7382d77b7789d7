//! Observability: what the controller shows and who may steer it.
//!
//! - [`Metrics`]: Prometheus/OpenMetrics families for queues, ECN, digests,
//!   INT reports, reroutes, group weights, path shares, decision and write
//!   latency, switch sessions and the mode, served at `GET /metrics`.
//! - [`EventLog`]: every change with its reason, as JSON lines and a
//!   bounded ring served at `GET /api/v1/events`.
//! - [`Tokens`]: bearer tokens with least-privilege [`Role`]s.
//! - [`serve`] / [`router`]: the HTTP status API. The core publishes a
//!   [`Snapshot`] on a `watch` channel and receives [`Command`]s on an
//!   `mpsc` channel, so the state task stays the only owner of the state.
//!
//! The Grafana dashboard for these metrics is `ctrl/controller/grafana/`.

mod api;
mod events;
mod metrics;
mod openmetrics;
#[cfg(test)]
mod testutil;
mod tokens;

use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;
use thiserror::Error;
use tokio::sync::oneshot;

pub use api::{router, serve, ApiState, MAX_BODY_BYTES, OPENMETRICS_CONTENT_TYPE};
pub use events::{Event, EventLog, Recent};
pub use metrics::{Metrics, REROUTE_REASONS};
pub use tokens::{Role, TokenError, Tokens, MIN_TOKEN_LEN};

use crate::mode::Mode;

/// The read-only view the core publishes after each change; each field is
/// served as is by its `GET /api/v1/<field>` endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Snapshot {
    pub status: Value,
    pub topology: Value,
    pub congestion: Value,
    pub groups: Value,
    pub recommendations: Value,
}

/// The controller's answer to a command: `Err` carries a message for the
/// API client (served with 409 Conflict).
pub type Reply = oneshot::Sender<Result<(), String>>;

/// What the API asks the state task to do, on behalf of an operator.
#[derive(Debug)]
pub enum Command {
    SetMode {
        mode: Mode,
        reply: Reply,
    },
    /// Reinstall a snapshot document (JSON object) previously served.
    Rollback {
        snapshot: Value,
        reply: Reply,
    },
}

/// Errors of this module; each names what it concerns.
#[derive(Debug, Error)]
pub enum ObsError {
    #[error("cannot open event log file {}", path.display())]
    EventFile { path: PathBuf, source: std::io::Error },
    #[error("status API server failed")]
    Serve { source: std::io::Error },
}
