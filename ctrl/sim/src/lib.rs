//! The fabric simulator: a deterministic, discrete-event, packet-level
//! model of a RoCEv2 fabric described by a topology YAML, driven by the AI
//! collectives of a scenario YAML.
//!
//! This crate owns the scenario format, the engine (links, egress queues,
//! ECN, PFC, lossy go-back-N), the RoCEv2 host model (queue pairs, DCQCN),
//! the routing baselines (ECMP, LetFlow-like flowlets, per-packet spray)
//! behind the [`Forwarder`] trait, the analytic ideal bound, and the
//! reports, plots and pcap files of a run.
//!
//! ```no_run
//! let loaded = metaroce_sim::scenario::load_file("scenarios/ecmp-collisions.yaml".as_ref())?;
//! let routing = metaroce_topo::Routing::compute(&loaded.topology);
//! let run = metaroce_sim::run_mode(&loaded.topology, &routing, &loaded.scenario, metaroce_sim::RoutingMode::Ecmp, &mut |_| {})?;
//! println!("{}", run.summary.mode);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Runs depend only on their inputs and the seed: there is no wall clock
//! in here, so the same scenario gives the same report, byte for byte.

pub mod control;
pub mod engine;
mod error;
pub mod report;
mod rng;
pub mod scenario;
pub mod seeds;
pub mod serve;
pub mod suite;
pub mod twin;

pub use control::forward::{Forwarder, NetView, PacketInfo};
pub use control::{Control, ControlError, ControlSummary, Crossing, Ctx, Thresholds};
pub use engine::{Outcome, Progress, Stop};
pub use error::{Diagnostic, SimError};
pub use report::{ModeRun, Summary};
pub use rng::Rng;
pub use scenario::config::{
    ControlConfig, Dcqcn, Ecn, Job, Limits, LinkEvent, NetConfig, Ordering, Pattern, Pfc, RoutingMode,
    Scenario, PS_PER_NS, ROCE_HEADER_BYTES,
};

use std::borrow::Cow;
use std::collections::BTreeMap;

use metaroce_topo::{Routing, Topology};

/// Runs one routing mode: a baseline, or `metaroce` with the controller
/// in the loop. Baselines get the modelled routing convergence when the
/// scenario fails links.
pub fn run_mode(
    topo: &Topology,
    routing: &Routing,
    sc: &Scenario,
    mode: RoutingMode,
    progress: &mut dyn FnMut(&Progress),
) -> Result<ModeRun, SimError> {
    let sc = &*sc.drawn(topo);
    let fwd = control::forward::for_mode(
        mode,
        sc.net.ordering,
        sc.control.repick,
        sc.seed,
        topo.switches.len(),
        sc.net.flowlet_timeout_ps,
    );
    let control: Option<Box<dyn Control + '_>> = match mode {
        RoutingMode::Metaroce => {
            let announced = announced_jobs(topo, routing, sc);
            let l = control::inloop::PolicyLoop::new(topo, routing, &sc.control, sc.net.mtu, announced)
                .map_err(|e| SimError::Invalid {
                    origin: sc.name.clone(),
                    diagnostics: vec![Diagnostic {
                        path: "control".into(),
                        pos: None,
                        message: e.to_string(),
                    }],
                })?;
            let shifted = take_offsets(sc, &l.recommended_offsets());
            return run_controlled(topo, routing, &shifted, mode.as_str(), fwd, Some(Box::new(l)), progress);
        }
        _ if !sc.events.is_empty() => {
            Some(Box::new(control::converge::Convergence::new(topo, routing, sc.control.convergence_ps)))
        }
        _ => None,
    };
    run_controlled(topo, routing, sc, mode.as_str(), fwd, control, progress)
}

/// The scenario as a scheduler that takes the controller's advice runs
/// it: each announced job not marked `offset: fixed` starts later by its
/// recommended offset (recorded in `offset_ps` for the report).
fn take_offsets<'s>(sc: &'s Scenario, offsets: &BTreeMap<String, u64>) -> Cow<'s, Scenario> {
    let delayed = |j: &Job| j.announce && !j.offset_fixed && offsets.get(&j.name).is_some_and(|&o| o > 0);
    if !sc.jobs.iter().any(delayed) {
        return Cow::Borrowed(sc);
    }
    let mut out = sc.clone();
    for j in out.jobs.iter_mut().filter(|j| delayed(j)) {
        let o = offsets.get(&j.name).copied().unwrap_or(0);
        tracing::info!(job = %j.name, offset_us = o / 1_000_000, "scheduler takes the recommended start offset");
        j.start_ps = j.start_ps.saturating_add(o);
        j.offset_ps = o;
    }
    Cow::Owned(out)
}

/// The jobs the scenario announces to the controller before they start,
/// with every queue pair's host pair and bytes.
fn announced_jobs(topo: &Topology, routing: &Routing, sc: &Scenario) -> Vec<control::inloop::Announced> {
    let announced: Vec<usize> = (0..sc.jobs.len()).filter(|&j| sc.jobs[j].announce).collect();
    if announced.is_empty() {
        return Vec::new();
    }
    let Ok(w) = engine::flows::Workload::build(topo, routing, sc) else { return Vec::new() };
    announced
        .into_iter()
        .map(|j| {
            let mut bytes: std::collections::BTreeMap<(u32, u32), u64> = Default::default();
            for f in &w.flows[w.jobs[j].flows.clone()] {
                let qp = &w.qps[f.qp as usize];
                *bytes.entry((qp.src, qp.dst)).or_insert(0) += f.bytes;
            }
            let job = &sc.jobs[j];
            // The job API takes bytes per iteration.
            let iterations = u64::from(job.iterations.max(1));
            control::inloop::Announced {
                name: job.name.clone(),
                flows: bytes.into_iter().map(|((s, d), b)| (s, d, b.div_ceil(iterations))).collect(),
                timing: (job.iterations > 1).then_some((job.compute_ps, job.offset_fixed, job.start_ps)),
            }
        })
        .collect()
}

/// Runs with any forwarding policy, named `mode` in the report.
pub fn run_with(
    topo: &Topology,
    routing: &Routing,
    sc: &Scenario,
    mode: &str,
    fwd: Box<dyn Forwarder>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<ModeRun, SimError> {
    run_controlled(topo, routing, sc, mode, fwd, None, progress)
}

/// Runs with a forwarding policy and a control plane (see [`control`]),
/// named `mode` in the report.
pub fn run_controlled<'a>(
    topo: &'a Topology,
    routing: &Routing,
    sc: &Scenario,
    mode: &str,
    fwd: Box<dyn Forwarder>,
    control: Option<Box<dyn Control + 'a>>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<ModeRun, SimError> {
    // Jobs drawn for the seed the run has, however it was set.
    let sc = &*sc.drawn(topo);
    let mut sim = engine::Sim::new(topo, routing, sc, fwd).map_err(|e| SimError::Invalid {
        origin: sc.name.clone(),
        diagnostics: vec![Diagnostic { path: "jobs".into(), pos: None, message: e.to_string() }],
    })?;
    if let Some(c) = control {
        sim = sim.with_control(c);
    }
    let span = tracing::info_span!("sim_run", scenario = %sc.name, mode);
    let _enter = span.enter();
    let outcome = sim.run(progress);
    tracing::info!(events = outcome.events, end_ps = outcome.end_ps, stopped = ?outcome.stop, "mode finished");
    Ok(report::summarize(topo, routing, sc, mode, outcome))
}
