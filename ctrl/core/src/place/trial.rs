//! A job's trial: what the switches would be asked to hold if it were
//! registered, computed on a copy of the placement, so that the daemon
//! can check it against their tables before it registers the job.

use std::sync::Arc;

use metaroce_te::job::JobError;
use metaroce_te::FlowKey;
use metaroce_topo::{Routing, Topology};
use serde_json::Value;

use super::{Placement, Steer};

/// What the next decision would ask of the switches with a job
/// registered ([`Placement::trial`]).
#[derive(Debug, Clone)]
pub struct Trial {
    /// The job's flow keys.
    pub keys: Vec<FlowKey>,
    /// Every switch's steer entries after that decision (the job's and
    /// everything else placed).
    pub steer: Vec<Arc<Steer>>,
}

impl Placement {
    /// Registers `body` on a copy and runs the decision that would follow:
    /// the steer entries every switch would then be asked to hold. Nothing
    /// here changes; the caller admits the job (checks those entries
    /// against the switches' tables) before registering it for real. The
    /// body's problems, if it has any.
    pub fn trial(
        &self,
        now_ns: u64,
        topo: &Topology,
        routing: &Routing,
        body: &Value,
    ) -> Result<Trial, JobError> {
        let mut copy = self.clone();
        let summary = copy.register(now_ns, topo, body)?;
        let name = summary["name"].as_str().unwrap_or_default();
        let keys = copy.jobs.get(name).map(|j| j.flows.iter().map(|f| f.key).collect()).unwrap_or_default();
        copy.decide(now_ns, topo, routing);
        Ok(Trial { keys, steer: copy.steer })
    }
}
