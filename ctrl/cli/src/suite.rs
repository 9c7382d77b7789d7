//! `metaroce sim suite`: the cases a scenario family draws, each on
//! several seeds in every mode, in parallel; the judged figures by job
//! role and mode as a table, JSON and a box plot, and every case written
//! out as a scenario that `sim run` takes alone.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use metaroce_sim::report::suite;
use metaroce_sim::suite::{Case, Family};
use metaroce_sim::{scenario, RoutingMode, SimError};
use metaroce_topo::Routing;

use crate::runs::{self, Floors, Task};
use crate::sweep::Seeds;
use crate::Exit;

#[derive(Debug, clap::Args)]
pub struct SuiteArgs {
    /// Family YAML: shapes, patterns and ranges to draw cases from (see scenarios/families/).
    pub family: PathBuf,
    /// Cases to draw, numbered from 1 (default: the family's `cases`).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub cases: Option<u32>,
    /// Seeds each case runs on: a range "1-3", a list "1,5,9", or both (default: the family's `seeds`).
    #[arg(long, value_parser = crate::sweep::parse_seeds)]
    pub seeds: Option<Seeds>,
    /// Directory for suite.md, suite.json, suite-box.svg and the drawn cases (cases/NNN/).
    #[arg(short, long, default_value = "sim-suite")]
    pub out: PathBuf,
    /// Also run the reference on every case and seed: spray on NICs that place packets out of order (mode
    /// `spray-ooo`); the tables add its column and, per mode, how many jobs are within 2% of it.
    #[arg(long)]
    pub reference: bool,
    #[command(flatten)]
    pub pool: runs::PoolArgs,
}

/// Problems of a family (or of a case it drew) are printed; exit 1.
fn invalid(e: &SimError) -> Exit {
    eprint!("{}", e.report());
    eprintln!("error: {e}");
    Exit::Invalid
}

/// Writes case `c` under `dir` and loads it back as `sim run` would.
fn write_case(
    dir: &Path,
    fam: &Family,
    family_path: &Path,
    c: &Case,
) -> anyhow::Result<Result<scenario::Loaded, Exit>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let topo_path = dir.join("topology.yaml");
    let header = format!("Case {} of family {} ({}): {}", c.number, fam.name, family_path.display(), c.shape);
    std::fs::write(&topo_path, metaroce_topo::emit::to_yaml(&c.topology, &header))
        .with_context(|| format!("writing {}", topo_path.display()))?;
    let sc_path = dir.join("scenario.yaml");
    std::fs::write(&sc_path, &c.scenario_yaml).with_context(|| format!("writing {}", sc_path.display()))?;
    match scenario::load_file(&sc_path) {
        Ok(l) => Ok(Ok(l)),
        Err(SimError::Invalid { diagnostics, .. }) => {
            // A problem in a block the family copies is the family's: show it there.
            for d in &diagnostics {
                match fam.position_of(&d.path) {
                    Some(pos) => eprintln!(
                        "{}:{pos}: {} (in {}: {})",
                        family_path.display(),
                        d.message,
                        d.path,
                        sc_path.display()
                    ),
                    None => eprintln!("{}: {d}", sc_path.display()),
                }
            }
            eprintln!("error: case {} of family {} is not a valid scenario", c.number, fam.name);
            Ok(Err(Exit::Invalid))
        }
        Err(e) => Err(e).with_context(|| format!("loading {}", sc_path.display())),
    }
}

/// The cases a family drew, and each loaded back as a scenario.
type Drawn = (Vec<Case>, Vec<scenario::Loaded>);

/// Draws cases 1 to `n` of the family, writes each out and loads it back
/// to run in `modes`.
fn draw_cases(
    a: &SuiteArgs,
    fam: &Family,
    modes: &[metaroce_sim::RoutingMode],
    n: usize,
) -> anyhow::Result<Result<Drawn, Exit>> {
    let mut cases = Vec::with_capacity(n);
    let mut loaded = Vec::with_capacity(n);
    for i in 1..=n {
        let c = match fam.case(i) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{}: {e}", a.family.display());
                eprintln!(
                    "error: family {} draws a fabric that cannot be built; narrow its shapes",
                    fam.name
                );
                return Ok(Err(Exit::Invalid));
            }
        };
        let mut l = match write_case(&a.out.join("cases").join(format!("{i:03}")), fam, &a.family, &c)? {
            Ok(l) => l,
            Err(code) => return Ok(Err(code)),
        };
        l.scenario.modes = modes.to_vec();
        if let Some(o) = a.pool.ordering {
            l.scenario.net.ordering = o;
        }
        cases.push(c);
        loaded.push(l);
    }
    Ok(Ok((cases, loaded)))
}

/// Case `l` as the reference runs it: spray, on NICs that place packets
/// out of order.
fn reference_case(l: &scenario::Loaded) -> scenario::Loaded {
    let mut r = l.clone();
    r.scenario.modes = vec![RoutingMode::Spray];
    r.scenario.net.ordering = metaroce_sim::Ordering::OutOfOrder;
    r
}

pub fn run(a: &SuiteArgs) -> anyhow::Result<Exit> {
    let fam = match metaroce_sim::suite::load_file(&a.family) {
        Ok(f) => f,
        Err(e @ SimError::Invalid { .. }) => return Ok(invalid(&e)),
        Err(e) => return Err(e).with_context(|| format!("reading family {}", a.family.display())),
    };
    let n = a.cases.map_or(fam.cases, |c| c as usize);
    let seeds = a.seeds.as_ref().map_or_else(|| fam.seeds.clone(), |s| s.0.clone());
    let modes = if a.pool.modes.is_empty() { fam.modes.clone() } else { a.pool.modes.clone() };
    let (cases, loaded) = match draw_cases(a, &fam, &modes, n)? {
        Ok(drawn) => drawn,
        Err(code) => return Ok(code),
    };
    let routings: Vec<Routing> = loaded.iter().map(|l| Routing::compute(&l.topology)).collect();
    let floors: Vec<Floors> = (0..n * seeds.len()).map(|_| Floors::new()).collect();
    // The reference: each case again, its NICs placing out of order, with floors of its own.
    let reference: Vec<scenario::Loaded> =
        if a.reference { loaded.iter().map(reference_case).collect() } else { Vec::new() };
    let ref_floors: Vec<Floors> = (0..reference.len() * seeds.len()).map(|_| Floors::new()).collect();
    let mut tasks = Vec::with_capacity((n * modes.len() + reference.len()) * seeds.len());
    let mut case_of = Vec::with_capacity(tasks.capacity());
    for (ci, (l, routing)) in loaded.iter().zip(&routings).enumerate() {
        for (si, &seed) in seeds.iter().enumerate() {
            for &mode in &modes {
                tasks.push(Task { loaded: l, routing, seed, mode, floors: &floors[ci * seeds.len() + si] });
                case_of.push(ci);
            }
        }
    }
    let first_reference = tasks.len();
    for (ci, (l, routing)) in reference.iter().zip(&routings).enumerate() {
        for (si, &seed) in seeds.iter().enumerate() {
            let floors = &ref_floors[ci * seeds.len() + si];
            tasks.push(Task { loaded: l, routing, seed, mode: RoutingMode::Spray, floors });
            case_of.push(ci);
        }
    }
    let mode_name = |i: usize| if i >= first_reference { suite::REFERENCE } else { tasks[i].mode.as_str() };
    let workers = runs::workers(a.pool.jobs).min(tasks.len());
    let start = Instant::now();
    if !a.pool.quiet {
        eprintln!(
            "suite: {} cases of {} on seeds {}, modes {}: {} runs on {workers} threads; cases in {}",
            n,
            fam.name,
            metaroce_sim::report::sweep::seeds_text(&seeds),
            modes
                .iter()
                .map(|m| m.as_str())
                .chain(a.reference.then_some(suite::REFERENCE))
                .collect::<Vec<_>>()
                .join(","),
            tasks.len(),
            a.out.join("cases").display()
        );
    }
    let summaries = runs::run_all(&tasks, workers, |done, i, s| {
        if !a.pool.quiet {
            let meta = &cases[case_of[i]];
            let worst = s
                .jobs
                .iter()
                .zip(&meta.jobs)
                .map(|(j, m)| suite::judged(j, m.announced).unwrap_or(f64::INFINITY))
                .fold(0.0, f64::max);
            eprintln!(
                "suite: {done}/{} runs done ({:.0} s): case {} ({}, {}) seed {} {}, worst job {worst:.2}×",
                tasks.len(),
                start.elapsed().as_secs_f64(),
                meta.number,
                meta.shape,
                meta.pattern,
                tasks[i].seed,
                mode_name(i)
            );
        }
    })?;
    let mut runs: Vec<(usize, metaroce_sim::report::Summary)> =
        case_of.iter().copied().zip(summaries).collect();
    for (_, s) in runs.iter_mut().skip(first_reference) {
        s.mode = suite::REFERENCE.to_string();
    }
    let mut names: Vec<String> = modes.iter().map(|m| m.as_str().to_string()).collect();
    if a.reference {
        names.push(suite::REFERENCE.to_string());
    }
    let s = suite::aggregate(&fam, &seeds, &names, &cases, &runs);
    let json = serde_json::to_string_pretty(&s)?;
    runs::emit(&a.out, "suite", &a.pool, &json, &suite::markdown(&s), &suite::box_plot(&s))?;
    if !a.pool.quiet {
        eprintln!(
            "suite: {} runs in {:.1} s; table, JSON and box plot in {}",
            runs.len(),
            start.elapsed().as_secs_f64(),
            a.out.display()
        );
    }
    let stopped: Vec<&(usize, metaroce_sim::report::Summary)> =
        runs.iter().filter(|(_, r)| r.stopped.is_some()).collect();
    for (ci, r) in &stopped {
        eprintln!(
            "error: case {} seed {} mode {} stopped before the end, since {}; raise `limits` in the family if its cases are meant to run this long",
            cases[*ci].number,
            r.seed,
            r.mode,
            r.stopped.map_or_else(String::new, |s| s.to_string())
        );
    }
    Ok(if stopped.is_empty() { Exit::Ok } else { Exit::Invalid })
}
