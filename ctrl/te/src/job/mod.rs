//! The job API's body, pure: parsing, validation against the topology and
//! the registered jobs, and expansion into flows. The controller's HTTP
//! handler calls [`parse_job`] and answers 400 with every [`Problem`] of a
//! [`JobError`]; the simulator can expand its scenario jobs with
//! [`Pattern::pairs`] to agree with it.
//!
//! ```json
//! {"name": "moe-7", "pattern": "all-to-all", "hosts": ["h1-1", "h2-1"], "bytes": 1048576}
//! {"name": "ring-3", "flows": [{"src": "h1-1", "dst": "h2-1", "sport": 49152, "qp": 17, "src_qp": 33, "bytes": 8388608}]}
//! ```
//!
//! `bytes` is per flow per iteration; `period_ms` (optional) is the
//! iteration period. A periodic job may give `compute_ms` (its compute
//! phase) instead or beside, `offset` (`shiftable`, the default, or
//! `fixed`) and `start_ms` (see [`Timing`]): the controller then
//! recommends a start offset ([`crate::phase`]). `pattern` is `all-to-all`, `ring-allreduce`,
//! `permutation` (optional `shift`, default half the ranks) or `incast`
//! (with `target`). Flows without `sport`/`qp` are host-pair flows. A
//! flow keyed by `sport`/`qp` (the receiver's QP, which its data carries)
//! may give `src_qp`, the sender's own QP, which its ACKs carry: the drain
//! rule then knows which ACKs drain it without learning it.

mod expand;
mod parse;
mod registry;
mod timing;

use std::fmt;

use metaroce_topo::HostId;
use serde::Serialize;

use crate::flow::{Demand, FlowKey};

pub use expand::Pattern;
pub use parse::{parse_job, validate_job};
pub use registry::JobRegistry;
pub use timing::{comm_floor_ns, Offset, Timing};

/// Most problems listed for one body; past this the list says how many more.
pub const MAX_PROBLEMS: usize = 100;

/// Bounds on what one job may ask for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobLimits {
    /// Flows of one job (a 1,024-rank All-to-All has 1,047,552).
    pub max_flows: usize,
    /// Flows over all registered jobs.
    pub max_total_flows: usize,
    /// Bytes of one flow in one iteration.
    pub max_bytes: u64,
    /// Longest iteration period, milliseconds.
    pub max_period_ms: u64,
    /// Longest job name (it appears in URLs and metrics).
    pub max_name_len: usize,
}

impl Default for JobLimits {
    fn default() -> Self {
        JobLimits {
            max_flows: 1 << 20,
            max_total_flows: 4 << 20,
            max_bytes: 1 << 40,
            max_period_ms: 3_600_000,
            max_name_len: 64,
        }
    }
}

/// One problem of a job body: where (a JSON path like `flows[3].src`)
/// and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

impl Problem {
    pub fn new(path: &str, message: impl Into<String>) -> Self {
        Problem { path: path.to_string(), message: message.into() }
    }
}

/// Every problem found in a job body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
pub struct JobError {
    pub problems: Vec<Problem>,
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job refused: {} problem(s)", self.problems.len())?;
        for p in &self.problems {
            let at = if p.path.is_empty() { "body" } else { &p.path };
            write!(f, "; {at}: {}", p.message)?;
        }
        Ok(())
    }
}

/// One flow of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobFlow {
    pub key: FlowKey,
    pub src: HostId,
    pub dst: HostId,
    /// Bytes per iteration.
    pub bytes: u64,
    /// Index in the body's `flows`, or None if the pattern made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// The sender's own queue pair, if the body gave it (`src_qp`): the
    /// QP its ACKs carry, so the drain rule's `qp_pair` entry for this
    /// connection is known, not learnt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub src_qp: Option<u32>,
}

impl JobFlow {
    /// Where the flow came from in the body, for messages.
    pub(crate) fn origin(&self, i: usize) -> String {
        match self.index {
            Some(k) => format!("flows[{k}]"),
            None => format!("hosts (flow {i} of the pattern)"),
        }
    }
}

/// A validated job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Job {
    pub name: String,
    /// The pattern and its ranks, if the body gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Pattern>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<HostId>,
    pub period_ns: Option<u64>,
    /// Compute phase, offset and start (all defaults without a period).
    pub timing: Timing,
    pub flows: Vec<JobFlow>,
}

impl Job {
    /// The job declared a period or a compute phase: the phase planner
    /// takes it.
    pub fn periodic(&self) -> bool {
        self.period_ns.is_some() || self.timing.compute_ns.is_some()
    }

    /// The planner's input for each flow.
    pub fn demands(&self) -> impl Iterator<Item = (FlowKey, Demand)> + '_ {
        self.flows.iter().map(|f| (f.key, Demand::announced(f.bytes, self.period_ns)))
    }
}
