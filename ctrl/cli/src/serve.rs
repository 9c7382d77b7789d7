//! `metaroce sim serve TOPO [SCENARIO]`: the simulated fabric as P4Runtime
//! switches, for the real controller.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use metaroce_pipeline::Pipeline;
use metaroce_sim::serve::{Counters, Fabric, LinkChange, Options, ServeError, Status};
use metaroce_sim::{report, scenario, Progress};
use metaroce_topo::{Routing, Topology};
use tokio::sync::watch;

use crate::links::{self, LinkReporter};
use crate::Exit;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Topology YAML: every switch serves P4Runtime at the port of its `p4rt` address.
    pub topology: PathBuf,
    /// Scenario YAML whose traffic to play once a controller has programmed the fabric
    /// (it must run on the same topology). Without one, the switches only serve.
    pub scenario: Option<PathBuf>,
    /// Address every switch listens on (the port comes from the topology).
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Wall seconds per simulated second: 1 is real time, 10 runs ten times slower.
    #[arg(long, default_value_t = 1.0)]
    pub dilation: f64,
    #[command(flatten)]
    pub program: crate::program::ServeProgramArgs,
    /// Seconds to wait for a controller to program every switch before traffic.
    #[arg(long, default_value_t = 60)]
    pub wait: u64,
    /// Milliseconds without writes after which the fabric counts as programmed.
    #[arg(long, default_value_t = 500)]
    pub settle_ms: u64,
    /// Directory for the run's report.md, report.json and plots.
    #[arg(short, long, default_value = "serve-report")]
    pub out: PathBuf,
    /// Exit when the scenario's traffic is done instead of serving on until Ctrl-C.
    #[arg(long)]
    pub exit_when_done: bool,
    /// The controller's API (its --listen address, e.g. http://127.0.0.1:9100): the
    /// scenario's link failures and repairs are reported there with POST /api/v1/links
    /// the moment they happen, as a link monitor would (P4Runtime has no port status).
    /// Needed when the scenario fails links.
    #[arg(long, value_name = "URL", requires = "token_file")]
    pub controller_api: Option<String>,
    /// File with the operator (or admin) bearer token for --controller-api: the token
    /// alone, or the controller's own --tokens file.
    #[arg(long, value_name = "FILE", requires = "controller_api")]
    pub token_file: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(short, long)]
    pub quiet: bool,
}

pub fn run(a: ServeArgs) -> anyhow::Result<Exit> {
    if !(a.dilation > 0.0 && a.dilation <= 1e6) {
        eprintln!("error: --dilation must be a number of wall seconds per simulated second, above 0 and at most 1000000");
        return Ok(Exit::Usage);
    }
    // Invalid files print every problem and exit 1; unreadable ones exit 3.
    let topo = match metaroce_topo::load_file(&a.topology) {
        Ok(t) => t,
        Err(e @ metaroce_topo::TopoError::Invalid { .. }) => {
            eprint!("{}", e.report());
            eprintln!("error: {e}; fix them and run `metaroce topo check {}`", a.topology.display());
            return Ok(Exit::Invalid);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(Exit::Failure);
        }
    };
    let loaded = match &a.scenario {
        None => None,
        // As `sim run` loads it: a topology the scenario names that cannot
        // be read is I/O (exit 3), not a problem of the scenario.
        Some(p) => match crate::sim::load(p)? {
            Ok(l) => Some(l),
            Err(code) => return Ok(code),
        },
    };
    if let Some(l) = &loaded {
        if fabric_of(&l.topology) != fabric_of(&topo) {
            let e = ServeError::TopologyMismatch {
                scenario: l.topology_path.display().to_string(),
                served: a.topology.display().to_string(),
            };
            eprintln!("error: {e}");
            return Ok(Exit::Usage);
        }
        if !l.scenario.events.is_empty() && a.controller_api.is_none() {
            eprintln!("error: {}", ServeError::LinkEvents { count: l.scenario.events.len() });
            return Ok(Exit::Invalid);
        }
    }
    let reporter = match (&a.controller_api, &a.token_file) {
        (Some(url), Some(file)) => {
            let authority = match links::parse_api(url) {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(Exit::Usage);
                }
            };
            match links::read_token(file) {
                Ok(token) => Some(LinkReporter::new(authority, token)),
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(match e {
                        links::TokenError::Unreadable(_) => Exit::Failure,
                        links::TokenError::Invalid(_) => Exit::Invalid,
                    });
                }
            }
        }
        _ => None,
    };
    let pipeline = match crate::program::load(a.program.source()) {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    // Megabytes per switch are allocated and freed while a controller
    // programs the fabric: see `small_pages` for why huge pages cost here.
    metaroce_controller::runtime::small_pages();
    let rt =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    rt.block_on(serve(a, topo, loaded, pipeline, reporter))
}

async fn serve(
    a: ServeArgs,
    topo: Topology,
    loaded: Option<scenario::Loaded>,
    pipeline: Arc<Pipeline>,
    reporter: Option<LinkReporter>,
) -> anyhow::Result<Exit> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let opts = Options { ip: a.bind, dilation: a.dilation };
    let fabric = match Fabric::bind(&topo, pipeline, &opts, &stop_rx).await {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(Exit::Failure);
        }
    };
    for s in &fabric.switches {
        eprintln!("serve: {} (device {}) on {}", s.name, s.device_id, s.addr);
    }
    let stopping = fabric.stop.clone();
    {
        let (stopping, stop_tx) = (stopping.clone(), stop_tx.clone());
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("serve: stopping (Ctrl-C again to exit at once)");
                stopping.store(true, Ordering::Relaxed);
                let _ = stop_tx.send(true);
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("serve: exiting");
                std::process::exit(130);
            }
        });
    }
    let Some(loaded) = loaded else {
        eprintln!("serve: no scenario: serving until Ctrl-C");
        let mut rx = stop_rx.clone();
        let _ = rx.wait_for(|s| *s).await;
        return Ok(Exit::Ok);
    };
    let quiet = a.quiet;
    let mut last = (usize::MAX, Instant::now());
    let mut tick = |done: usize, all: usize| {
        if !quiet && (done != last.0 || last.1.elapsed() >= Duration::from_secs(5)) {
            eprintln!("serve: waiting for a controller: {done}/{all} switches programmed");
            last = (done, Instant::now());
        }
    };
    let wait =
        fabric.wait_programmed(Duration::from_secs(a.wait), Duration::from_millis(a.settle_ms), &mut tick);
    let mut rx = stop_rx.clone();
    tokio::select! {
        r = wait => if let Err(e) = r {
            eprintln!("error: {e}");
            return Ok(Exit::Failure);
        },
        _ = rx.wait_for(|s| *s) => return Ok(Exit::Ok),
    }
    eprintln!("serve: fabric programmed; playing {} (dilation {})", loaded.scenario.name, a.dilation);
    let exit = play(&a, &fabric, &topo, &loaded, &opts, reporter).await?;
    if !a.exit_when_done && !stopping.load(Ordering::Relaxed) {
        eprintln!("serve: traffic done; serving until Ctrl-C");
        let mut rx = stop_rx.clone();
        let _ = rx.wait_for(|s| *s).await;
    }
    let _ = stop_tx.send(true);
    Ok(exit)
}

/// Plays the scenario on the served fabric, showing progress, and writes the report.
async fn play(
    a: &ServeArgs,
    fabric: &Fabric,
    topo: &Topology,
    loaded: &scenario::Loaded,
    opts: &Options,
    reporter: Option<LinkReporter>,
) -> anyhow::Result<Exit> {
    let counters = fabric.counters.clone();
    let routing = Routing::compute(topo);
    let flows = Arc::new(std::sync::Mutex::new((0usize, 0usize)));
    let shown = show_progress(counters.clone(), flows.clone(), a.quiet);
    let (links_tx, reporting) = match reporter {
        Some(r) => {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            (Some(tx), Some(tokio::spawn(report_links(r, topo.clone(), rx))))
        }
        None => (None, None),
    };
    let run = tokio::task::block_in_place(|| {
        let mut progress = |p: &Progress| {
            if let Ok(mut f) = flows.lock() {
                *f = (p.flows_done, p.flows_total);
            }
        };
        fabric.run(topo, &routing, &loaded.scenario, opts, links_tx, &mut progress)
    });
    shown.abort();
    // The run dropped its sender: the reporter ends once it has told the rest.
    let unreported = match reporting {
        Some(task) => task.await.unwrap_or(1),
        None => 0,
    };
    let run = match run {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(Exit::Failure);
        }
    };
    let s = Status::of(&counters);
    eprintln!(
        "serve: done at {:.1} ms simulated: {} forwarded, {} dropped, {} ECN marks, {} digests and {} packet-ins to the controller",
        s.now_ps as f64 / 1e9,
        s.forwarded,
        s.dropped,
        s.ecn_marks,
        s.digests,
        s.packet_ins
    );
    if s.dropped > 0 {
        eprintln!("serve: drops by reason: {}", s.drops_by_reason());
    }
    let runs = [run];
    crate::sim::write_outputs(&a.out, &loaded.scenario, &runs)?;
    outp!("{}", report::markdown(&loaded.scenario, &runs));
    eprintln!("serve: report and plots in {}", a.out.display());
    if unreported > 0 {
        eprintln!(
            "error: {unreported} link change(s) never reached the controller: its view of the fabric, and the run, are not what the scenario says"
        );
        return Ok(Exit::Failure);
    }
    Ok(match runs[0].summary.stopped {
        None => Exit::Ok,
        Some(metaroce_sim::Stop::Interrupted) => {
            eprintln!("serve: interrupted; the report covers what ran until then");
            Exit::Ok
        }
        Some(_) => Exit::Invalid,
    })
}

/// Tells the controller every link change of the run, in order; the
/// number that could not be told.
async fn report_links(
    r: LinkReporter,
    topo: Topology,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<LinkChange>,
) -> u64 {
    let mut failed = 0;
    while let Some(c) = rx.recv().await {
        let at = c.at_ps as f64 / 1e9;
        match r.report(&topo, c).await {
            Ok(what) => eprintln!("serve: link {what} at {at:.3} ms simulated; reported to the controller"),
            Err(e) => {
                failed += 1;
                eprintln!("error: at {at:.3} ms simulated: {e}");
            }
        }
    }
    failed
}

fn show_progress(
    counters: Arc<Counters>,
    flows: Arc<std::sync::Mutex<(usize, usize)>>,
    quiet: bool,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if quiet {
            return;
        }
        let mut every = tokio::time::interval(Duration::from_secs(1));
        every.tick().await;
        loop {
            every.tick().await;
            let s = Status::of(&counters);
            let (done, all) = flows.lock().map(|f| *f).unwrap_or((0, 0));
            eprintln!(
                "serve: {:.2} ms simulated, {} forwarded, {} dropped, {} ECN, {} digests, lag {:.1} ms{}",
                s.now_ps as f64 / 1e9,
                s.forwarded,
                s.dropped,
                s.ecn_marks,
                s.digests,
                s.lag_us as f64 / 1e3,
                if all > 0 { format!(", {done}/{all} messages done") } else { String::new() }
            );
        }
    })
}

/// A topology without its management addresses: a scenario may name the
/// same fabric served on other ports (tests serve copies on free ports).
fn fabric_of(t: &Topology) -> serde_json::Value {
    let mut v = serde_json::to_value(t).unwrap_or_default();
    if let Some(switches) = v.get_mut("switches").and_then(|s| s.as_array_mut()) {
        for s in switches.iter_mut().filter_map(|s| s.as_object_mut()) {
            s.remove("p4rt");
            s.remove("thrift_port");
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("name");
        o.remove("description");
    }
    v
}
