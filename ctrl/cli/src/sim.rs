//! `metaroce sim …`: run a scenario on the packet-level simulator, with
//! routing modes side by side, and write the report, plots and pcaps.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Subcommand;
use metaroce_sim::report::{self, plot};
use metaroce_sim::{scenario, ModeRun, Progress, RoutingMode, SimError};
use metaroce_topo::{Routing, TopoError};

use crate::Exit;

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Run a scenario: every routing mode on the same seed, side by side.
    Run {
        /// Scenario YAML (it names its topology, relative to itself).
        scenario: PathBuf,
        /// Routing modes, comma-separated: ecmp, flowlet, spray, metaroce (default: the scenario's).
        #[arg(long, value_delimiter = ',')]
        modes: Vec<RoutingMode>,
        /// Directory for report.md, report.json, the SVG plots and pcaps.
        #[arg(short, long, default_value = "sim-report")]
        out: PathBuf,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Override the scenario's NIC ordering model: go-back-n or out-of-order.
        #[arg(long, value_name = "MODEL")]
        ordering: Option<metaroce_sim::Ordering>,
        /// Capture this link end's egress to DIR/MODE.pcap: `switch:port`. Repeatable.
        #[arg(long = "pcap", value_name = "LINK_END")]
        pcap: Vec<String>,
        /// Print the JSON report instead of the markdown one.
        #[arg(long)]
        json: bool,
        /// No progress lines on stderr.
        #[arg(short, long)]
        quiet: bool,
    },
    /// Check a scenario and its topology; print every problem.
    Check {
        /// Scenario YAML (it names its topology, relative to itself).
        scenario: PathBuf,
    },
    /// Run every mode of a scenario on many seeds, in parallel: median / p90 / worst completion
    /// over ideal, PFC pauses and out-of-order packets per mode, and a box plot.
    Sweep(crate::sweep::SweepArgs),
    /// Draw the cases of a scenario family (fabrics, collectives, sizes and timings from ranges)
    /// and run each on several seeds in every mode: judged completion by job role and mode, a box
    /// plot, and every case written out as a scenario.
    Suite(crate::suite::SuiteArgs),
    /// Serve the fabric: every switch a P4Runtime server (at its topology address, on 127.0.0.1)
    /// forwarding with the pipeline twin, for the real controller; optionally play a scenario.
    Serve(crate::serve::ServeArgs),
}

pub fn run(cmd: SimCommand) -> anyhow::Result<Exit> {
    match cmd {
        SimCommand::Check { scenario } => check(&scenario),
        SimCommand::Serve(args) => crate::serve::run(args),
        SimCommand::Sweep(args) => crate::sweep::run(&args),
        SimCommand::Suite(args) => crate::suite::run(&args),
        SimCommand::Run { scenario, modes, out, seed, ordering, pcap, json, quiet } => {
            let opts = RunOpts { modes, out, seed, ordering, pcap, json, quiet };
            run_scenario(&scenario, &opts)
        }
    }
}

struct RunOpts {
    modes: Vec<RoutingMode>,
    out: PathBuf,
    seed: Option<u64>,
    ordering: Option<metaroce_sim::Ordering>,
    pcap: Vec<String>,
    json: bool,
    quiet: bool,
}

/// Prints a load error the way compilers do and says which exit code it is.
pub(crate) fn load(path: &Path) -> anyhow::Result<Result<scenario::Loaded, Exit>> {
    match scenario::load_file(path) {
        Ok(l) => Ok(Ok(l)),
        // The scenario's topology file is missing or unreadable: I/O, exit 3.
        Err(SimError::Topology {
            source: e @ (TopoError::Io { .. } | TopoError::TooLarge { .. }), ..
        }) => Err(anyhow::Error::new(e).context(format!("the topology of scenario {}", path.display()))),
        Err(e @ (SimError::Invalid { .. } | SimError::Topology { .. })) => {
            eprint!("{}", e.report());
            eprintln!("error: {e}");
            Ok(Err(Exit::Invalid))
        }
        Err(e) => Err(e).with_context(|| format!("loading scenario {}", path.display())),
    }
}

fn check(path: &Path) -> anyhow::Result<Exit> {
    let l = match load(path)? {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    let s = &l.scenario;
    out!(
        "{}: ok: {} job(s) on {} ({} hosts), modes {}",
        path.display(),
        s.jobs.len(),
        l.topology_path.display(),
        l.topology.hosts.len(),
        s.modes.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(",")
    );
    Ok(Exit::Ok)
}

fn run_scenario(path: &Path, o: &RunOpts) -> anyhow::Result<Exit> {
    let mut l = match load(path)? {
        Ok(l) => l,
        Err(code) => return Ok(code),
    };
    let sc = &mut l.scenario;
    if let Some(seed) = o.seed {
        sc.reseed(&l.topology, seed);
    }
    if let Some(ord) = o.ordering {
        sc.net.ordering = ord;
    }
    if !o.modes.is_empty() {
        sc.modes = o.modes.clone();
    }
    for text in &o.pcap {
        match l.topology.link_end(text) {
            Ok(e) => sc.pcap.push(e),
            Err(msg) => {
                eprintln!("error: --pcap {text}: {msg}");
                return Ok(Exit::Usage);
            }
        }
    }
    let routing = Routing::compute(&l.topology);
    // Modes are independent runs on the same seed: one thread each, results
    // in the order asked for, so the report does not depend on scheduling.
    let sc: &metaroce_sim::Scenario = sc;
    let (runs, floors) = std::thread::scope(|scope| {
        let handles: Vec<_> = sc
            .modes
            .iter()
            .map(|&mode| {
                let (topo, routing) = (&l.topology, &routing);
                scope.spawn(move || run_one(topo, routing, sc, mode, o.quiet))
            })
            .collect();
        // Each job alone with no fabric in the way, once for every mode.
        let floors = metaroce_sim::report::floor::job_floors(&l.topology, sc);
        let runs = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a simulation thread panicked"))))
            .collect::<anyhow::Result<Vec<ModeRun>>>();
        runs.map(|r| (r, floors))
    })?;
    let mut runs = runs;
    for r in &mut runs {
        metaroce_sim::report::floor::attach(r, &floors);
    }
    write_outputs(&o.out, sc, &runs)?;
    let stdout = &mut std::io::stdout().lock();
    if o.json {
        serde_json::to_writer_pretty(&mut *stdout, &report::json(&runs))?;
        writeln!(stdout)?;
    } else {
        write!(stdout, "{}", report::markdown(sc, &runs))?;
    }
    eprintln!("sim: report, plots{} in {}", if sc.pcap.is_empty() { "" } else { ", pcaps" }, o.out.display());
    let mut plots = vec!["fct-cdf.svg".to_string(), "utilization.svg".to_string()];
    if sc.jobs.iter().any(|j| j.iterations > 1) {
        plots.push("iterations.svg".to_string());
    }
    if runs.iter().any(|r| r.summary.fct_slowdown.is_some()) {
        plots.push("fct-slowdown.svg".to_string());
    }
    plots.extend(runs.iter().map(|r| format!("queue-{}.svg", r.summary.mode)));
    for p in plots {
        eprintln!("sim: plot {}", o.out.join(p).display());
    }
    let stopped: Vec<&ModeRun> = runs.iter().filter(|r| r.summary.stopped.is_some()).collect();
    for r in &stopped {
        let n = r.summary.unfinished_messages;
        eprintln!(
            "error: mode {} stopped before the end, since {}, with {n} message{} unfinished; raise `limits` in the scenario if the run is meant to be this long",
            r.summary.mode,
            r.summary.stopped.map_or_else(String::new, |s| s.to_string()),
            if n == 1 { "" } else { "s" }
        );
    }
    Ok(if stopped.is_empty() { Exit::Ok } else { Exit::Invalid })
}

fn run_one(
    topo: &metaroce_topo::Topology,
    routing: &Routing,
    sc: &metaroce_sim::Scenario,
    mode: RoutingMode,
    quiet: bool,
) -> anyhow::Result<ModeRun> {
    let start = Instant::now();
    if !quiet {
        eprintln!("sim {mode}: running scenario {} on seed {}", sc.name, sc.seed);
    }
    let mut last = start;
    let mut progress = |p: &Progress| {
        if quiet || last.elapsed().as_secs_f64() < 1.0 {
            return;
        }
        last = Instant::now();
        let rate = p.events as f64 / start.elapsed().as_secs_f64() / 1e6;
        eprintln!(
            "sim {mode}: {:.1} µs simulated, {:.1}M events ({rate:.1}M/s), {}/{} messages done",
            p.now_ps as f64 / 1e6,
            p.events as f64 / 1e6,
            p.flows_done,
            p.flows_total
        );
    };
    let run = metaroce_sim::run_mode(topo, routing, sc, mode, &mut progress)
        .with_context(|| format!("running mode {mode}"))?;
    let wall = start.elapsed().as_secs_f64();
    if !quiet {
        eprintln!(
            "sim {mode}: {} events in {wall:.2} s wall ({:.1}M events/s), {:.1} µs simulated",
            run.summary.events,
            run.summary.events as f64 / wall.max(1e-9) / 1e6,
            run.summary.sim_time_us
        );
    }
    Ok(run)
}

pub(crate) fn write_outputs(dir: &Path, sc: &metaroce_sim::Scenario, runs: &[ModeRun]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let write = |name: String, bytes: &[u8]| -> anyhow::Result<()> {
        let path = dir.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
    };
    write("report.md".into(), report::markdown(sc, runs).as_bytes())?;
    write("report.json".into(), serde_json::to_string_pretty(&report::json(runs))?.as_bytes())?;
    write("fct-cdf.svg".into(), plot::fct_cdf(runs).as_bytes())?;
    write("utilization.svg".into(), plot::utilization_heatmap(runs).as_bytes())?;
    if let Some(svg) = plot::fct_slowdown(runs) {
        write("fct-slowdown.svg".into(), svg.as_bytes())?;
    }
    if let Some(svg) = plot::iterations(runs) {
        write("iterations.svg".into(), svg.as_bytes())?;
    }
    if let Some(svg) = metaroce_sim::report::timeline::plot(runs) {
        write("timeline.svg".into(), svg.as_bytes())?;
    }
    for r in runs {
        write(format!("queue-{}.svg", r.summary.mode), plot::queue_depth(r).as_bytes())?;
        if let Some(p) = &r.pcap {
            write(format!("{}.pcap", r.summary.mode), p)?;
        }
    }
    Ok(())
}
