//! Controller high availability: leader election through etcd, and the
//! P4Runtime election ids derived from it.
//!
//! One task ([`task::run`]) owns the election. It holds an etcd lease and
//! campaigns with etcd's election API (the `v3election` service: campaign,
//! leader, resign) under one key per fabric, and publishes an [`HaState`] on
//! a `watch` channel. The switch agents follow its [`Term`]: the election id
//! to arbitrate with and whether to write. The state task follows the role
//! for status, metrics, events and the API's refusals ([`follow`]).
//!
//! Why the election API rather than a lease and a transaction on a key of
//! our own: etcd implements the queue (standbys wait in order of their
//! keys' creation revisions, and are woken by the deletion of the key
//! ahead of them, with no polling), and the leader's key revision is a
//! fencing token that only grows: a newer leader's key was created after
//! every older leader's. The leader's P4Runtime election id is that
//! revision shifted above every standby's id, so the switches themselves
//! refuse the writes of a former leader that has not noticed yet.

use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

pub mod elector;
pub mod follow;
pub mod jobs;
pub mod task;

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;

pub use elector::{Elector, EtcdElector, Leadership, Lease};
pub use follow::Follower;

/// Where the election runs and who we are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaConfig {
    /// etcd client URLs (`http://host:port`).
    pub endpoints: Vec<String>,
    /// This controller's name in the election (shown to the others).
    pub name: String,
    /// The lease's time to live: how long after this controller stops
    /// renewing it a standby takes over. etcd rounds it up to whole
    /// seconds and to its own minimum (1.5 election timeouts).
    pub lease_ttl: Duration,
    /// Run alone when etcd cannot be reached at start-up.
    pub optional: bool,
    /// The URL of this controller's API as clients reach it: campaigned
    /// with the name, so a standby's refusals can send clients there
    /// (`None`: the daemon advertises where its API listens, if it can).
    pub url: Option<String>,
}

impl HaConfig {
    pub fn new(endpoints: Vec<String>, name: impl Into<String>) -> Self {
        HaConfig {
            endpoints,
            name: name.into(),
            lease_ttl: Duration::from_secs(1),
            optional: false,
            url: None,
        }
    }
}

/// The value a controller campaigns with: its name, then its API's URL
/// after a space when it has one (a name has no whitespace).
pub fn campaign_value(name: &str, url: Option<&str>) -> String {
    match url {
        Some(u) => format!("{name} {u}"),
        None => name.to_string(),
    }
}

/// The API URL to advertise when none is given: the `--listen` address,
/// when it is one a client can reach (not 0.0.0.0 or [::]).
pub fn listen_url(listen: Option<std::net::SocketAddr>) -> Option<String> {
    listen.filter(|a| !a.ip().is_unspecified()).map(|a| format!("http://{a}"))
}

/// The leader's name and URL from its campaign value ([`campaign_value`]).
pub fn parse_campaign_value(value: &str) -> (String, Option<String>) {
    match value.trim().split_once(char::is_whitespace) {
        Some((name, url)) if !url.trim().is_empty() => (name.to_string(), Some(url.trim().to_string())),
        _ => (value.trim().to_string(), None),
    }
}

/// Why the election could not run.
#[derive(Debug, thiserror::Error)]
pub enum HaError {
    #[error("--ha {url:?}: {why}")]
    Url { url: String, why: &'static str },
    #[error("etcd at {endpoints} cannot be reached")]
    Unreachable {
        endpoints: String,
        #[source]
        source: etcd_client::Error,
    },
    #[error("etcd at {endpoints} did not answer within {after:?}")]
    Silent { endpoints: String, after: Duration },
    #[error("etcd {op} failed")]
    Etcd {
        op: &'static str,
        #[source]
        source: etcd_client::Error,
    },
    #[error("etcd {op} got no answer within {after:?}")]
    Timeout { op: &'static str, after: Duration },
    #[error("etcd {op}: {what}")]
    Answer { op: &'static str, what: String },
}

/// Parses `etcd://HOST:PORT[,HOST:PORT...]` into client URLs.
pub fn parse_url(url: &str) -> Result<Vec<String>, HaError> {
    let bad = |why| HaError::Url { url: url.to_string(), why };
    let rest = url.strip_prefix("etcd://").ok_or_else(|| bad("must start with etcd://"))?;
    let rest = rest.trim_end_matches('/');
    let mut out = Vec::new();
    for hp in rest.split(',') {
        let (host, port) = hp.rsplit_once(':').ok_or_else(|| bad("each endpoint is HOST:PORT"))?;
        if host.is_empty() || host.contains('/') || port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(bad("each endpoint is HOST:PORT with a port from 1 to 65535"));
        }
        out.push(format!("http://{hp}"));
    }
    Ok(out)
}

/// The etcd election key of a fabric: one leader per fabric.
pub fn election_key(fabric: &str) -> String {
    format!("metaroce/{fabric}/controller-leader")
}

/// What this controller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// No election (no `--ha`, or `--ha-optional` without etcd).
    Alone,
    Leader,
    Standby,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Alone => "alone",
            Role::Leader => "leader",
            Role::Standby => "standby",
        }
    }

    /// True when this controller writes to the switches.
    pub fn writes(self) -> bool {
        self != Role::Standby
    }
}

/// What a switch agent needs: the election id to arbitrate with and
/// whether to write at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    pub election_id: u128,
    pub writes: bool,
}

/// The election as the rest of the daemon sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct HaState {
    pub role: Role,
    /// Our name in the election.
    pub name: String,
    /// The leader's name, as far as we know (ours when we lead).
    pub leader: Option<String>,
    /// The leader's API URL, when it campaigned with one.
    pub leader_url: Option<String>,
    /// The etcd revision of our leadership, while we lead.
    pub revision: Option<i64>,
    /// Our campaign key, while we lead: writes to etcd are fenced on it.
    pub leader_key: Option<Vec<u8>>,
    pub term: Term,
    /// Leadership changes seen by this controller (elected or demoted).
    pub changes: u64,
    /// When we were last elected: a takeover runs from here until every
    /// switch has us as its primary.
    pub elected_at: Option<Instant>,
    /// Why the role last changed.
    pub reason: String,
}

impl HaState {
    /// A standby that has not campaigned yet.
    pub fn standby(name: &str) -> Self {
        HaState {
            role: Role::Standby,
            name: name.to_string(),
            leader: None,
            leader_url: None,
            revision: None,
            leader_key: None,
            term: Term { election_id: standby_election_id(name), writes: false },
            changes: 0,
            elected_at: None,
            reason: "starting: campaigning".into(),
        }
    }
}

/// Every leader's election id is above this; every standby's below.
const LEADER_BASE_SHIFT: u32 = 64;

/// A leader's P4Runtime election id: its leadership revision above every
/// standby's id, so a newer leader (a larger revision) outranks an older.
pub fn leader_election_id(revision: i64) -> u128 {
    u128::from(revision.max(1).unsigned_abs()) << LEADER_BASE_SHIFT
}

/// A standby's election id: low (below every leader's, above the ids 1–4
/// that `controller snapshot` reads with) and distinct per name, because a
/// switch refuses two clients with one id.
pub fn standby_election_id(name: &str) -> u128 {
    let h = name.bytes().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    (1u128 << 32) + u128::from(h)
}

/// A running election, and the store its leader keeps jobs in.
#[derive(Debug)]
pub struct Started {
    pub state: watch::Receiver<HaState>,
    pub task: tokio::task::JoinHandle<()>,
    pub jobs: jobs::EtcdJobs,
}

/// Connects to etcd and starts the election task. `Ok(None)` when etcd
/// cannot be reached and the configuration says to run alone anyway.
pub async fn start(
    cfg: &HaConfig,
    fabric: &str,
    stop: watch::Receiver<bool>,
) -> Result<Option<Started>, HaError> {
    let elector = match EtcdElector::connect(&cfg.endpoints, &election_key(fabric)).await {
        Ok(e) => e,
        Err(e) if cfg.optional => {
            tracing::warn!(error = %e, "etcd unreachable; running alone without high availability (--ha-optional)");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    tracing::info!(endpoints = ?cfg.endpoints, key = %election_key(fabric), name = %cfg.name, "campaigning for leadership in etcd");
    let jobs = jobs::EtcdJobs::new(elector.client(), fabric);
    let (tx, rx) = watch::channel(HaState::standby(&cfg.name));
    let mut tc = task::TaskConfig::new(&cfg.name, cfg.lease_ttl);
    tc.url = cfg.url.clone();
    let task = tokio::spawn(task::run(elector, tc, tx, stop));
    Ok(Some(Started { state: rx, task, jobs }))
}
