//! Observability: what the controller shows and who may steer it.
//!
//! - [`Metrics`]: Prometheus/OpenMetrics families for queues, ECN, digests,
//!   INT reports, reroutes, group weights, path shares, decision and write
//!   latency, switch sessions and the mode, served at `GET /metrics`.
//! - [`EventLog`]: every change with its reason, as JSON lines and a
//!   bounded ring served at `GET /api/v1/events`.
//! - [`Tokens`]: bearer tokens with least-privilege [`Role`]s.
//! - The job API (`POST`/`GET /api/v1/jobs`, `DELETE /api/v1/jobs/NAME`)
//!   and the placement (`GET /api/v1/flows`).
//! - `GET /` and `GET /api/v1/stream`: the live fabric page (`page/`).
//! - [`serve`] / [`router`]: the HTTP status API. The core publishes a
//!   [`Snapshot`] on a `watch` channel and receives [`Command`]s on an
//!   `mpsc` channel, so the state task stays the only owner of the state.
//!
//! The Grafana dashboard for these metrics is `ctrl/controller/grafana/`.

mod api;
mod events;
mod metrics;
mod openmetrics;
mod page;
#[cfg(test)]
mod testutil;
mod tokens;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use serde::Serialize;
use serde_json::Value;
use thiserror::Error;
use tokio::sync::oneshot;

pub use api::{
    job_problems_body, metrics_router, router, serve, serve_metrics, ApiState, MAX_BODY_BYTES,
    OPENMETRICS_CONTENT_TYPE,
};
pub use events::{Event, EventLog, Recent};
pub use metrics::{Metrics, MOVE_REASONS, REROUTE_REASONS};
pub use tokens::{Role, TokenError, Tokens, MIN_TOKEN_LEN};

use crate::mode::Mode;

/// The read-only view the core publishes after each change; each field is
/// served as is by its `GET /api/v1/<field>` endpoint.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// `GET /api/v1/status`: shared by the publications that did not change it.
    pub status: Arc<Value>,
    pub topology: Document,
    pub congestion: LazyJson,
    pub groups: LazyJson,
    pub recommendations: LazyJson,
    /// `GET /api/v1/jobs`.
    pub jobs: LazyJson,
    /// `GET /api/v1/flows`: the placement.
    pub flows: LazyJson,
}

/// A JSON document serialized once, for what does not change while the
/// controller runs (the topology): kept as text, not as a `Value` tree
/// (a 1,280-switch fat-tree's topology took 37 MB as a `Value`, 1.5 MB
/// as text).
#[derive(Debug, Clone)]
pub struct Document(Arc<serde_json::value::RawValue>);

impl Document {
    pub fn of(value: &impl Serialize) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(|raw| Document(Arc::from(raw)))
    }
}

impl Default for Document {
    /// `null`.
    fn default() -> Self {
        Document(Arc::from(serde_json::value::RawValue::NULL.to_owned()))
    }
}

impl Serialize for Document {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

type Build = Box<dyn FnOnce() -> Value + Send>;

/// A JSON document built when it is first asked for. The state task hands
/// over cheap copies of what the document needs; a fabric-wide document
/// that nobody reads before the next publication costs nothing.
pub struct LazyJson {
    value: OnceLock<Value>,
    build: Mutex<Option<Build>>,
}

impl LazyJson {
    /// A document that is already built.
    pub fn ready(value: Value) -> Self {
        LazyJson { value: OnceLock::from(value), build: Mutex::new(None) }
    }

    /// A document `build` makes on first use.
    pub fn later(build: impl FnOnce() -> Value + Send + 'static) -> Self {
        LazyJson { value: OnceLock::new(), build: Mutex::new(Some(Box::new(build))) }
    }

    /// The document, built now if it was not yet.
    pub fn get(&self) -> &Value {
        self.value.get_or_init(|| {
            let build = self.build.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
            build.map_or(Value::Null, |b| b())
        })
    }
}

impl Default for LazyJson {
    fn default() -> Self {
        LazyJson::ready(Value::Null)
    }
}

impl std::fmt::Debug for LazyJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.value.get() {
            Some(v) => f.debug_tuple("LazyJson").field(v).finish(),
            None => f.write_str("LazyJson(<not built>)"),
        }
    }
}

/// The controller's answer to a command: `Err` says why it refused, and
/// the HTTP status the API serves that with ([`CommandError::status`]).
pub type Reply = oneshot::Sender<Result<(), CommandError>>;

/// Like [`Reply`], with what the change did (merged into the API's answer).
pub type ValueReply = oneshot::Sender<Result<Value, CommandError>>;

/// Why the state task (or a standby's gate) refused a mode, rollback or
/// link command. Every variant is a conflict with the controller's state
/// (409): the request itself was well formed (the API checks that first,
/// with 400).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CommandError {
    /// This controller is a standby: changes go to the leader.
    #[error("{}", standby_text(.leader.as_deref(), .leader_url.as_deref()))]
    Standby { leader: Option<String>, leader_url: Option<String> },
    /// An unforced link-down would leave leaf pairs without a path.
    #[error(
        "taking link {link} down would cut off {}: {which}; nothing was changed. \
         Send \"force\": true to take it down anyway (a link monitor reporting a failure it saw should)",
        crate::reach::count_text(*.pairs)
    )]
    WouldPartition {
        link: String,
        /// How many leaf pairs it would cut off.
        pairs: usize,
        /// Which ones, named.
        which: String,
    },
    /// The snapshot does not fit this fabric (any more).
    #[error(transparent)]
    Snapshot(#[from] crate::snapshot::SnapshotError),
}

impl CommandError {
    /// The HTTP status the API answers this refusal with.
    pub fn status(&self) -> u16 {
        match self {
            CommandError::Standby { .. }
            | CommandError::WouldPartition { .. }
            | CommandError::Snapshot(_) => 409,
        }
    }
}

fn standby_text(leader: Option<&str>, url: Option<&str>) -> String {
    match (leader, url) {
        (Some(l), Some(u)) => {
            format!("this controller is a standby; the leader is {l} at {u}: send changes there")
        }
        (Some(l), None) => format!(
            "this controller is a standby; the leader is {l} (it advertises no URL: give it --ha-advertise): \
             send changes there"
        ),
        (None, _) => {
            "this controller is a standby and no leader is elected yet: try again shortly".to_string()
        }
    }
}

/// A refusal with its HTTP status and JSON body (a job with problems: 400
/// and every problem; an unknown job: 404).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: u16,
    pub body: Value,
}

/// The state task's answer to a job command: the JSON to serve, or a refusal.
pub type JobReply = oneshot::Sender<Result<Value, Refusal>>;

/// The state task takes a command on with this before it changes
/// anything; if the API has given up waiting (the send fails), the command
/// is dropped unapplied. So a request that timed out either changed
/// nothing (503) or is known to be under way (a job: 202; the others are
/// answered in the step that takes them on, and the API waits for that).
pub type Claim = oneshot::Sender<()>;

/// What the API asks the state task to do, on behalf of an operator.
#[derive(Debug)]
pub enum Command {
    SetMode {
        mode: Mode,
        claim: Claim,
        reply: Reply,
    },
    /// Reinstall a snapshot document (JSON object) previously served.
    Rollback {
        snapshot: Value,
        claim: Claim,
        reply: Reply,
    },
    /// A fabric link went down (`up` false) or came back, as an outside
    /// monitor (BFD, LLDP, the switch OS, an operator) reports it: P4Runtime
    /// has no port status of its own.
    ///
    /// A link-down that would leave some leaf pair without a path is
    /// refused unless `force` is set (a monitor reporting a failure it saw
    /// sets it: the link is gone whatever the controller does).
    SetLink {
        link: metaroce_topo::LinkId,
        up: bool,
        force: bool,
        claim: Claim,
        reply: ValueReply,
    },
    /// Register a job (the body of `POST /api/v1/jobs`, parsed as JSON) and
    /// place it before answering.
    RegisterJob {
        body: Value,
        /// When the API received the request (reaction time starts here).
        received: tokio::time::Instant,
        claim: Claim,
        reply: JobReply,
    },
    /// Remove a job and its steer entries.
    RemoveJob {
        name: String,
        received: tokio::time::Instant,
        claim: Claim,
        reply: JobReply,
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
