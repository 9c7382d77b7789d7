//! Each job's floor: its completion when it runs alone with no fabric in
//! the way: on its own fabric, every switch-to-switch link
//! [`CORE_SPEEDUP`] times as fast (capacity only: each hop still stores
//! and forwards a data packet as slowly as at the real rate), the same
//! NICs, host links, path latencies, network settings and chunking. What a job cannot beat
//! there, chunk round trips over its paths' hops and headers, is not
//! routing's to answer for: the report puts the floor beside the ideal
//! bound, and `vs_floor` is completion over the larger of the two. (The
//! floor used to be the job on one switch, which has no hops between
//! leaves: a job of small chunks on three tiers, planned at the bound,
//! then ran at 1.5x of it from the round trips alone.) The floor is
//! the better of two runs, iteration by iteration: one without congestion
//! control (DCQCN's reaction to the job's own bursts is no floor: an
//! incast alone ran at twice its time beside other traffic) and one with
//! the scenario's (a chunked All-to-All alone ran slower without it than
//! with it: its receivers' PAUSEs held up every queue pair of their
//! senders). It is a run, not a proof: PFC's dynamics differ from the
//! real run's.

use metaroce_topo::units::Bandwidth;
use metaroce_topo::{Routing, Topology};
use serde::Serialize;

use crate::control::forward::Ecmp;
use crate::report::{JobSummary, ModeRun};
use crate::scenario::config::{Pattern, Scenario};

/// Largest job (hosts) whose floor is run: a floor costs a run of the job.
pub const MAX_FLOOR_HOSTS: usize = 254;

/// How much faster every switch-to-switch link of the floor's fabric is:
/// enough that no link between switches is in any job's way (16 flows
/// on one link at line rate), while paths keep their hops.
pub const CORE_SPEEDUP: u64 = 16;

/// A job's floor: the whole run and each iteration, alone with no fabric in the way.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Floor {
    pub completion_us: f64,
    pub iterations_us: Vec<f64>,
}

/// The floor of every job of `sc` (drawn for its seed), in job order:
/// None for a data-centre (Poisson) job, whose figure is its FCT slowdown,
/// for a job of more than [`MAX_FLOOR_HOSTS`] hosts, or one that did not
/// finish alone.
pub fn job_floors(topo: &Topology, sc: &Scenario) -> Vec<Option<Floor>> {
    let sc = &*sc.drawn(topo);
    // The fabric with its core out of the way, once for every job.
    let mut fast = topo.clone();
    for l in &mut fast.links {
        l.bandwidth = Bandwidth::from_bps(l.bandwidth.bps().saturating_mul(CORE_SPEEDUP));
    }
    let routing = Routing::compute(&fast);
    (0..sc.jobs.len()).map(|j| floor_of(&fast, &routing, sc, j)).collect()
}

fn floor_of(fast: &Topology, routing: &Routing, sc: &Scenario, j: usize) -> Option<Floor> {
    let job = &sc.jobs[j];
    let hosts = job.ranks.len() + usize::from(matches!(job.pattern, Pattern::Incast { .. }));
    if matches!(job.pattern, Pattern::Poisson { .. }) || hosts == 0 || hosts > MAX_FLOOR_HOSTS {
        return None;
    }
    let mut alone = job.clone();
    alone.announce = false;
    alone.start_ps = 0;
    let mut fsc = sc.clone();
    fsc.jobs = vec![alone];
    fsc.events.clear();
    fsc.pcap.clear();
    // Capacity, not latency: every hop still stores and forwards a data
    // packet as slowly as at the real rate (`NetConfig::core_speedup`).
    fsc.net.core_speedup = CORE_SPEEDUP;
    // With and without congestion control, the better of the two per
    // iteration (why: the module documentation).
    let without = {
        let mut s = fsc.clone();
        s.net.dcqcn = None;
        alone_run(fast, routing, &s)
    };
    let with = fsc.net.dcqcn.is_some().then(|| alone_run(fast, routing, &fsc)).flatten();
    match (without, with) {
        (Some(a), Some(b)) if a.iterations_us.len() == b.iterations_us.len() => Some(Floor {
            completion_us: a.completion_us.min(b.completion_us),
            iterations_us: a.iterations_us.iter().zip(&b.iterations_us).map(|(x, y)| x.min(*y)).collect(),
        }),
        (a, b) => a.or(b),
    }
}

/// The job of `sc` (its only one) alone on the fast fabric.
fn alone_run(fast: &Topology, routing: &Routing, sc: &Scenario) -> Option<Floor> {
    let fwd = Box::new(Ecmp { seed: sc.seed });
    let run = crate::run_controlled(fast, routing, sc, "floor", fwd, None, &mut |_| {}).ok()?;
    let js = run.summary.jobs.first()?;
    Some(Floor {
        completion_us: js.completion_us?,
        iterations_us: js.iterations.iter().map(|it| it.completion_us).collect::<Option<Vec<_>>>()?,
    })
}

/// Puts the floors beside each job's ideal in a mode's summary.
pub fn attach(run: &mut ModeRun, floors: &[Option<Floor>]) {
    for (job, floor) in run.summary.jobs.iter_mut().zip(floors) {
        attach_job(job, floor.as_ref());
    }
}

fn attach_job(job: &mut JobSummary, floor: Option<&Floor>) {
    let Some(f) = floor else { return };
    // The run's floor: its iterations alone, with the run's own compute
    // phases between them (as the whole-run completion counts them).
    job.floor_us = Some(f.completion_us);
    job.vs_floor = job.completion_us.map(|c| c / job.ideal_us.max(f.completion_us));
    for (it, &fl) in job.iterations.iter_mut().zip(&f.iterations_us) {
        it.floor_us = Some(fl);
        it.vs_floor = it.completion_us.map(|c| c / it.ideal_us.max(fl));
    }
}
