//! Each job's floor: its completion when it runs alone with no fabric in
//! the way, all its hosts on one switch (same NICs, host links, network
//! settings and chunking). What a job cannot beat there, chunk round trips
//! and headers, is not routing's to answer for: the report puts the floor
//! beside the ideal bound, and `vs_floor` is completion over the larger of
//! the two.

use metaroce_topo::gen::{self, Common};
use metaroce_topo::{HostId, Routing, Topology};
use serde::Serialize;

use crate::control::forward::Ecmp;
use crate::report::{JobSummary, ModeRun};
use crate::scenario::config::{Pattern, Scenario};

/// Hosts one switch of the floor can take (a leaf's /24).
pub const MAX_FLOOR_HOSTS: usize = 254;

/// A job's floor: the whole run and each iteration, alone on one switch.
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
    (0..sc.jobs.len()).map(|j| floor_of(topo, sc, j)).collect()
}

fn floor_of(topo: &Topology, sc: &Scenario, j: usize) -> Option<Floor> {
    let job = &sc.jobs[j];
    if matches!(job.pattern, Pattern::Poisson { .. }) {
        return None;
    }
    // The job's hosts, each once, in rank order (an incast's target too).
    let mut hosts: Vec<HostId> = Vec::new();
    let target = match job.pattern {
        Pattern::Incast { target } => Some(target),
        _ => None,
    };
    for &h in job.ranks.iter().chain(target.iter()) {
        if !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    if hosts.is_empty() || hosts.len() > MAX_FLOOR_HOSTS {
        return None;
    }
    let mut c = Common::new("floor", topo.defaults.link_bandwidth);
    c.defaults = topo.defaults.clone();
    c.fabric = topo.fabric.clone();
    let mut star = gen::leaf_spine(&c, 1, 1, hosts.len(), 1).ok()?;
    for (i, &h) in hosts.iter().enumerate() {
        let (from, to) = (topo.hosts.get(h)?, star.hosts.get_mut(i)?);
        to.nic_rate = from.nic_rate;
        to.delay = from.delay;
    }
    let star_of = |h: HostId| hosts.iter().position(|&x| x == h);
    let mut alone = job.clone();
    alone.ranks = job.ranks.iter().map(|&h| star_of(h)).collect::<Option<Vec<_>>>()?;
    if let Some(t) = target {
        alone.pattern = Pattern::Incast { target: star_of(t)? };
    }
    alone.announce = false;
    alone.start_ps = 0;
    let mut fsc = sc.clone();
    fsc.jobs = vec![alone];
    fsc.events.clear();
    fsc.pcap.clear();
    let routing = Routing::compute(&star);
    let fwd = Box::new(Ecmp { seed: sc.seed });
    let run = crate::run_controlled(&star, &routing, &fsc, "floor", fwd, None, &mut |_| {}).ok()?;
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
