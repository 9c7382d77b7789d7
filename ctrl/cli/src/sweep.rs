//! `metaroce sim sweep`: every mode of a scenario on many seeds, in
//! parallel across cores, reduced to median / p90 / worst completion over
//! ideal, PFC pauses and out-of-order packets per mode, with a box plot.

use std::path::PathBuf;
use std::time::Instant;

use metaroce_sim::report::{plot, sweep, Summary};
use metaroce_topo::Routing;

use crate::runs::{self, Floors, Task};
use crate::Exit;

#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    /// Scenario YAML (it names its topology, relative to itself).
    pub scenario: PathBuf,
    /// Seeds to run: a range "1-20", a list "1,5,9", or both "1-10,42".
    #[arg(long, value_parser = parse_seeds, default_value = "1-20")]
    pub seeds: Seeds,
    /// Directory for sweep.md, sweep.json and sweep-box.svg.
    #[arg(short, long, default_value = "sim-sweep")]
    pub out: PathBuf,
    #[command(flatten)]
    pub pool: runs::PoolArgs,
}

/// The seeds of a sweep, ascending, each once.
#[derive(Debug, Clone)]
pub struct Seeds(pub Vec<u64>);

pub(crate) fn parse_seeds(text: &str) -> Result<Seeds, metaroce_sim::seeds::SeedsError> {
    metaroce_sim::seeds::parse(text).map(Seeds)
}

pub fn run(a: &SweepArgs) -> anyhow::Result<Exit> {
    let mut l = match crate::sim::load(&a.scenario)? {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    if let Some(o) = a.pool.ordering {
        l.scenario.net.ordering = o;
    }
    let modes = if a.pool.modes.is_empty() { l.scenario.modes.clone() } else { a.pool.modes.clone() };
    let routing = Routing::compute(&l.topology);
    let floors: Vec<Floors> = a.seeds.0.iter().map(|_| Floors::new()).collect();
    let tasks: Vec<Task<'_>> = a
        .seeds
        .0
        .iter()
        .zip(&floors)
        .flat_map(|(&seed, floors)| modes.iter().map(move |&mode| (seed, mode, floors)))
        .map(|(seed, mode, floors)| Task { loaded: &l, routing: &routing, seed, mode, floors })
        .collect();
    let workers = runs::workers(a.pool.jobs).min(tasks.len());
    let start = Instant::now();
    let results = runs::run_all(&tasks, workers, |done, i, s| {
        if !a.pool.quiet {
            let worst = s.jobs.iter().filter_map(|j| j.slowdown).fold(0.0, f64::max);
            eprintln!(
                "sweep: {done}/{} runs done ({:.0} s): seed {} {}, worst job {worst:.2}× of ideal",
                tasks.len(),
                start.elapsed().as_secs_f64(),
                tasks[i].seed,
                tasks[i].mode
            );
        }
    })?;
    let names: Vec<String> = modes.iter().map(|m| m.as_str().to_string()).collect();
    let s = sweep::aggregate(&l.scenario.name, &a.seeds.0, &names, &results);
    let json = serde_json::to_string_pretty(&s)?;
    runs::emit(&a.out, "sweep", &a.pool, &json, &sweep::markdown(&s), &plot::sweep_box(&s))?;
    if !a.pool.quiet {
        eprintln!(
            "sweep: {} runs on {workers} threads in {:.1} s; table, JSON and box plot in {}",
            tasks.len(),
            start.elapsed().as_secs_f64(),
            a.out.display()
        );
    }
    let stopped: Vec<&Summary> = results.iter().filter(|r| r.stopped.is_some()).collect();
    for r in &stopped {
        eprintln!(
            "error: seed {} mode {} stopped before the end, since {}; raise `limits` in the scenario if the run is meant to be this long",
            r.seed,
            r.mode,
            r.stopped.map_or_else(String::new, |s| s.to_string())
        );
    }
    Ok(if stopped.is_empty() { Exit::Ok } else { Exit::Invalid })
}
