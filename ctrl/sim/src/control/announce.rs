//! Announced jobs in the controller in the loop: the job API's body for
//! each, and their registration before the run (see
//! [`register_announced`]).

use metaroce_core::{Core, Mode, Step};
use metaroce_te::phase::Verdict;
use metaroce_topo::Topology;
use serde_json::json;

use super::inloop::{core_config, LoopError};
use crate::scenario::config::ControlConfig;

/// An announced job: its name and flows `(src host, dst host, bytes)`,
/// and for a periodic job (several iterations) its timing as the job API
/// takes it: the compute phase, whether its offset is fixed, its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announced {
    pub name: String,
    pub flows: Vec<(u32, u32, u64)>,
    /// `(compute_ps, fixed, start_ps)` of a periodic job.
    pub timing: Option<(u64, bool, u64)>,
}

/// The job API's body for an announced job (`POST /api/v1/jobs`).
fn job_body(topo: &Topology, job: &Announced) -> serde_json::Value {
    let name = |h: u32| topo.hosts.get(h as usize).map_or("?", |x| x.name.as_str());
    let flows: Vec<_> = job
        .flows
        .iter()
        .map(|&(s, d, bytes)| json!({"src": name(s), "dst": name(d), "bytes": bytes}))
        .collect();
    let mut body = json!({"name": job.name, "flows": flows});
    // Its compute phase, not a period: the period follows from the
    // placement, and a declared one would make the planner place the
    // flows at their average rate instead of the line rate they burst at.
    if let Some((compute_ps, fixed, start_ps)) = job.timing {
        body["compute_ms"] = json!(compute_ps as f64 / 1e9);
        body["start_ms"] = json!(start_ps as f64 / 1e9);
        body["offset"] = json!(if fixed { "fixed" } else { "shiftable" });
    }
    body
}

/// Registers the announced jobs before the run (the job API's
/// validation; their placement is decided at the start, so their entries
/// are in place at the first packet).
///
/// Together, as always: the placement sees every job's flows at once.
/// With two periodic jobs or more, the first decision is made now, for
/// its phase plan: the advice the scheduler takes before the jobs start
/// ([`PolicyLoop::recommended_offsets`]; the plans are written at
/// `start`, with the baseline). Where that plan does not stagger them,
/// they are registered again on a fresh core one by one, each placed
/// before the next (as the daemon places jobs whose `POST`s come one at
/// a time): each job's flows then spread over its own links, which is
/// what jobs kept apart in time need (the planner counts every job's
/// flows as concurrent, so together it may put two of one job on a link
/// the other job's flows avoid). That registration is kept when its plan
/// staggers the jobs.
pub(super) fn register_announced(
    topo: &Topology,
    cfg: &ControlConfig,
    announced: &[Announced],
) -> Result<(Core, Vec<Step>), LoopError> {
    let register = |core: &mut Core, job: &Announced| {
        core.register_job(0, &job_body(topo, job))
            .map(|_| ())
            .map_err(|e| LoopError::Job { job: job.name.clone(), message: e.to_string() })
    };
    let mut core = Core::new(topo.clone(), core_config(cfg), Mode::Act)?;
    for job in announced {
        register(&mut core, job)?;
    }
    if announced.iter().filter(|j| j.timing.is_some()).count() < 2 {
        return Ok((core, Vec::new()));
    }
    let first = vec![core.decide(0)];
    if core.placement().phase_verdict() == Some(Verdict::Staggered) {
        return Ok((core, first));
    }
    let mut one_by_one = Core::new(topo.clone(), core_config(cfg), Mode::Act)?;
    let mut steps = Vec::with_capacity(announced.len());
    for job in announced {
        register(&mut one_by_one, job)?;
        steps.push(one_by_one.decide_placement(0));
    }
    if one_by_one.placement().phase_verdict() == Some(Verdict::Staggered) {
        return Ok((one_by_one, steps));
    }
    Ok((core, first))
}
