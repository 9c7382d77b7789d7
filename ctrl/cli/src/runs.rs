//! Many simulator runs on a pool of threads, for `sim sweep` and
//! `sim suite`: each task is one scenario on one seed in one mode; each
//! (scenario, seed) computes its job floors once, by the first of its
//! modes to run (they do not depend on the mode).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, OnceLock};

use metaroce_sim::report::floor::{self, Floor};
use metaroce_sim::report::Summary;
use metaroce_sim::scenario::Loaded;
use metaroce_sim::RoutingMode;
use metaroce_topo::Routing;

/// The job floors of one (scenario, seed), shared by its modes' tasks.
pub type Floors = OnceLock<Vec<Option<Floor>>>;

/// One run to make.
pub struct Task<'a> {
    pub loaded: &'a Loaded,
    pub routing: &'a Routing,
    pub seed: u64,
    pub mode: RoutingMode,
    pub floors: &'a Floors,
}

/// Runs every task on `workers` threads; `done(count, index, summary)` is
/// called on this thread as each finishes (for progress). The summaries
/// come back in task order. The first failed run ends it with its error.
pub fn run_all(
    tasks: &[Task<'_>],
    workers: usize,
    mut done: impl FnMut(usize, usize, &Summary),
) -> anyhow::Result<Vec<Summary>> {
    let workers = workers.clamp(1, tasks.len().max(1));
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, Result<Summary, String>)>();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let tx = tx.clone();
            let next = &next;
            scope.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(t) = tasks.get(i) else { break };
                let mut sc = t.loaded.scenario.clone();
                sc.reseed(&t.loaded.topology, t.seed);
                let floors = t.floors.get_or_init(|| floor::job_floors(&t.loaded.topology, &sc));
                let r = metaroce_sim::run_mode(&t.loaded.topology, t.routing, &sc, t.mode, &mut |_| {})
                    .map(|mut r| {
                        floor::attach(&mut r, floors);
                        r.summary
                    })
                    .map_err(|e| format!("{} seed {} mode {}: {e}", sc.name, t.seed, t.mode));
                if tx.send((i, r)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut results: Vec<Option<Summary>> = vec![None; tasks.len()];
        for (count, (i, r)) in rx.iter().enumerate() {
            let s = r.map_err(|e| anyhow::anyhow!(e))?;
            done(count + 1, i, &s);
            results[i] = Some(s);
        }
        Ok(results.into_iter().flatten().collect())
    })
}

/// Threads to use: the asked number, else the machine's cores.
pub fn workers(asked: Option<u16>) -> usize {
    asked.map(usize::from).unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The options `sim sweep` and `sim suite` share.
#[derive(Debug, clap::Args)]
pub struct PoolArgs {
    /// Routing modes, comma-separated: ecmp, flowlet, spray, metaroce (default: the scenario's or family's).
    #[arg(long, value_delimiter = ',')]
    pub modes: Vec<RoutingMode>,
    /// Override the NIC ordering model: go-back-n or out-of-order.
    #[arg(long, value_name = "MODEL")]
    pub ordering: Option<metaroce_sim::Ordering>,
    /// Runs at once (default: the number of cores).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: Option<u16>,
    /// Print the JSON summary instead of the markdown table.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Writes `NAME.md`, `NAME.json` and `NAME-box.svg` into `out`, then
/// prints the markdown (the JSON with `--json`) on stdout.
pub fn emit(
    out: &std::path::Path,
    name: &str,
    pool: &PoolArgs,
    json: &str,
    md: &str,
    svg: &str,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::Write as _;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for (file, bytes) in
        [(format!("{name}.md"), md), (format!("{name}.json"), json), (format!("{name}-box.svg"), svg)]
    {
        let path = out.join(file);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    let stdout = &mut std::io::stdout().lock();
    writeln!(stdout, "{}", if pool.json { json } else { md.trim_end() })?;
    Ok(())
}
