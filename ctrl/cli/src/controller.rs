//! `metaroce controller`: run the closed loop, take and restore snapshots,
//! replay a recording.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use metaroce_controller::core::CoreConfig;
use metaroce_controller::daemon::{self, Config};
use metaroce_controller::mode::Mode;
use metaroce_controller::obs::TokenError;
use metaroce_pipeline::Pipeline;
use metaroce_topo::Topology;

use crate::program::ProgramArgs;
use crate::Exit;

mod snapshot;

#[derive(Debug, Subcommand)]
pub enum ControllerCommand {
    /// Connect to every switch, install the pipeline and baseline, and close the loop.
    Run(Box<RunArgs>),
    /// Write every switch's installed state to a JSON file (reads as a backup: works beside a running controller).
    Snapshot(SnapshotArgs),
    /// Bring every switch back to a snapshot (stop a running controller first,
    /// or use its API: POST /api/v1/rollback).
    Rollback(RollbackArgs),
    /// Replay a recording (`run --record`) offline and print the decisions as JSON lines.
    Replay(ReplayArgs),
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Topology YAML.
    pub topology: PathBuf,
    #[command(flatten)]
    pub program: ProgramArgs,
    /// observe: sense and log; advise: also publish recommendations; act: closed loop.
    #[arg(long, default_value = "observe")]
    pub mode: Mode,
    /// Compute and log every change; write nothing to the switches.
    #[arg(long)]
    pub dry_run: bool,
    /// Take over switches whose pipeline cookie names another fabric or switch (refused otherwise:
    /// a wrong p4rt address must not wipe another fabric); their pipeline is pushed again, which
    /// clears their tables before this controller writes its entries.
    #[arg(long)]
    pub adopt: bool,
    /// Status API and /metrics (e.g. 127.0.0.1:9100).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// `/metrics` alone on this address, without authentication (for Prometheus while --tokens guards the API).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// Bearer tokens (lines "<viewer|scheduler|operator|admin> <token>", tokens of 16 characters or more);
    /// without it the API is read-only.
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// Append every change as JSON lines to this file.
    #[arg(long)]
    pub events: Option<PathBuf>,
    /// Record every controller input as JSON lines (for `replay`).
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Receive Telemetry Reports on this UDP address too (collector port mode).
    #[arg(long)]
    pub collector: Option<SocketAddr>,
    /// Register poll interval in milliseconds for the ports that are hot, and for every port of a
    /// switch whose digests were lost (push first: the switches' digests carry congestion).
    #[arg(long, default_value_t = 100)]
    pub poll_ms: u64,
    /// Audit interval in milliseconds: every port's registers (and ECN counters) are read this
    /// often whatever the digests say, which bounds how late a hot port whose digest was lost
    /// (with no later digest to show the gap) is found; after a gap in a switch's digests its
    /// ports are polled every --poll-ms for this long.
    #[arg(long, default_value_t = 2000)]
    pub audit_ms: u64,
    /// How often, in milliseconds, the ports' ECN-mark counters are read for /metrics: they ride
    /// in the first audit this long after the last read (so at most once per --audit-ms). They
    /// are totals, so a slower read loses no mark, it only shows them later.
    #[arg(long, default_value_t = 10000)]
    pub ecn_ms: u64,
    /// Most switches opened at once (connect, pipeline push, read back, first write); the others
    /// wait their turn, so that a large fabric's pushes do not all compete for the CPU and
    /// memory at once [default: 4 per CPU, 4 to 64]
    #[arg(long, value_name = "N")]
    pub open_in_flight: Option<usize>,
    /// Policy: how long a port must stay congested before its first derate step (ms).
    #[arg(long, default_value_t = 2.0)]
    pub hold_up_ms: f64,
    /// Policy: how long a derated port must stay cool before each restore step (ms).
    #[arg(long, default_value_t = 50.0)]
    pub hold_down_ms: f64,
    /// Policy: least time between two level steps of one port (ms); bounds the rate of change.
    #[arg(long, default_value_t = 10.0)]
    pub step_interval_ms: f64,
    /// Policy: each derate step keeps this share of a hot port's counted capacity (per mille).
    #[arg(long, default_value_t = 500)]
    pub derate_step_permille: u32,
    /// Policy: a hot port keeps at least this share of its capacity (per mille).
    #[arg(long, default_value_t = 125)]
    pub min_factor_permille: u32,
    /// Policy: no member's share of a group grows past this much of its baseline share (per mille;
    /// 1334 keeps a two-uplink leaf at 1:2, so moved flowlets do not herd onto the other uplink).
    #[arg(long, default_value_t = 1334)]
    pub max_share_growth_permille: u32,
    /// Placement: a flow the data plane reported large, with no report for
    /// this long, has ended; its steer entries are removed (ms).
    #[arg(long, default_value_t = 1000.0)]
    pub flow_idle_ms: f64,
    /// Placement: a placed flow moves only if that lowers its bottleneck by
    /// this much of a link's capacity (per mille).
    #[arg(long, default_value_t = 50)]
    pub te_min_gain_permille: u32,
    /// Placement: most rebalancing moves per decision.
    #[arg(long, default_value_t = 64)]
    pub te_max_moves: usize,
    /// Placement: a flow that moved is not moved again to rebalance for this long (ms).
    #[arg(long, default_value_t = 100.0)]
    pub te_hold_down_ms: f64,
    /// Placement: place the flows of an incast (flows into one host whose NIC is full, from
    /// senders with room) like any others, for the lowest highest utilisation alone, instead
    /// of confining them to as few links as their senders allow (the default, which keeps
    /// their PFC congestion tree small and other flows off it).
    #[arg(long)]
    pub te_spread_incasts: bool,
    /// Place announced jobs' new flows greedily and by one- and two-flow moves only, instead
    /// of also rearranging them together when that lowers the highest link utilisation (the
    /// default: up to some 70 ms of CPU for a batch of 2,000 flows above its bound).
    #[arg(long)]
    pub te_no_rearrange: bool,
    /// Scrape interval of host exporters (`hosts[].exporter`), milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub host_scrape_ms: u64,
    /// P4Runtime election id (higher wins primary); with --ha the election sets it instead.
    #[arg(long, default_value_t = 10)]
    pub election_id: u64,
    /// Telemetry Reports are sent when a flow's path latency changes bucket,
    /// a bucket being 2^SHIFT target time units (µs on BMv2, where 12 ≈ 4 ms
    /// suits its millisecond jitter; ns on Tofino, where 8–10 is typical).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u8).range(0..=40))]
    pub report_latency_shift: u8,
    /// Periodic Telemetry Report per flow, milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub report_period_ms: u64,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Run one runtime worker per CPU this process may use (its affinity set), each pinned to
    /// its own CPU, for a controller host of its own: a woken worker then runs on its idle CPU
    /// instead of preempting the worker that woke it (measured on 2 vCPUs: job → steer write
    /// p99 2.0 ms unpinned, 0.6 ms pinned). Linux only; where other work shares the CPUs, leave it off.
    #[arg(long)]
    pub pin_workers: bool,
    #[command(flatten)]
    pub ha: HaArgs,
}

/// High availability: two or more controllers, one leader elected in etcd.
#[derive(Debug, Args)]
pub struct HaArgs {
    /// Campaign for leadership in etcd (etcd://HOST:PORT[,HOST:PORT...]); only the leader writes
    /// to the switches, with an election id above every older leader's; the others stand by.
    #[arg(long, value_name = "URL", value_parser = parse_ha_url, requires = "ha_name")]
    pub ha: Option<EtcdEndpoints>,
    /// This controller's name in the election (distinct per controller; standbys name the leader by it).
    #[arg(long, value_name = "NAME", requires = "ha", value_parser = parse_ha_name)]
    pub ha_name: Option<String>,
    /// With --ha: this controller's API URL as clients reach it (http://ctl-a:9100), campaigned with
    /// the name so that a standby's 409 sends clients to the leader. Default: http://ADDR:PORT where
    /// --listen listens, when that is a specific address (not 0.0.0.0 or [::]).
    #[arg(long, value_name = "URL", requires = "ha", value_parser = parse_advertise)]
    pub ha_advertise: Option<String>,
    /// With --ha: if etcd cannot be reached at start-up, run alone (and say so) instead of exiting.
    #[arg(long, requires = "ha")]
    pub ha_optional: bool,
    /// With --ha: the etcd lease, in milliseconds (rounded up to seconds, and to etcd's own minimum):
    /// a standby takes over within about this long of the leader's death.
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub ha_lease_ms: u64,
    /// With --ha: split the switches with the other instances of the fabric instead of one leader
    /// writing to all of them. Each switch is owned by one instance at a time (an etcd lease; a dead
    /// instance's switches move to the others); the elected instance plans for every switch and the
    /// owners write its decisions. Every instance runs --shard with the same topology and program.
    #[arg(long, requires = "ha")]
    pub shard: bool,
}

fn parse_ha_name(s: &str) -> Result<String, String> {
    if s.is_empty() || s.chars().any(char::is_whitespace) {
        return Err("a name in the election is one word: not empty, no spaces".into());
    }
    Ok(s.to_string())
}

fn parse_advertise(s: &str) -> Result<String, String> {
    let rest = s.strip_prefix("http://").or_else(|| s.strip_prefix("https://"));
    match rest {
        Some(r) if !r.is_empty() && !s.chars().any(char::is_whitespace) => {
            Ok(s.trim_end_matches('/').to_string())
        }
        _ => Err("expected http://HOST:PORT or https://HOST:PORT, without spaces".into()),
    }
}

/// The client URLs of `--ha etcd://...`.
#[derive(Debug, Clone)]
pub struct EtcdEndpoints(pub Vec<String>);

fn parse_ha_url(s: &str) -> Result<EtcdEndpoints, String> {
    metaroce_controller::ha::parse_url(s).map(EtcdEndpoints).map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Topology YAML: the switches and their p4rt addresses.
    pub topology: PathBuf,
    #[command(flatten)]
    pub program: ProgramArgs,
    /// Output file.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Seconds to wait for every switch.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
}

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// Topology YAML: the switches and their p4rt addresses.
    pub topology: PathBuf,
    /// Snapshot file written by `snapshot`.
    pub snapshot: PathBuf,
    #[command(flatten)]
    pub program: ProgramArgs,
    /// P4Runtime election id to write with (above the controller's default 10).
    #[arg(long, default_value_t = 20)]
    pub election_id: u64,
    /// Seconds to wait for every switch to be restored.
    #[arg(long, default_value_t = 20.0)]
    pub timeout: f64,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Topology YAML the recording was made on.
    pub topology: PathBuf,
    /// Recording (JSON lines of {"t_ns", "input"}).
    pub recording: PathBuf,
    /// Mode to replay in: observe, advise or act.
    #[arg(long, default_value = "act")]
    pub mode: Mode,
}

pub fn run(cmd: ControllerCommand) -> anyhow::Result<Exit> {
    let pin = matches!(&cmd, ControllerCommand::Run(a) if a.pin_workers);
    let rt = metaroce_controller::runtime::build(pin)?.runtime;
    match cmd {
        ControllerCommand::Run(a) => rt.block_on(run_daemon(*a)),
        ControllerCommand::Snapshot(a) => rt.block_on(snapshot::snapshot(a)),
        ControllerCommand::Rollback(a) => rt.block_on(snapshot::rollback(a)),
        ControllerCommand::Replay(a) => replay(a),
    }
}

/// An invalid topology prints its problems (exit 1); one that cannot be
/// read is an I/O error (exit 3).
fn load_topology(path: &Path) -> anyhow::Result<Result<Topology, Exit>> {
    match metaroce_topo::load_file(path) {
        Ok(t) => Ok(Ok(t)),
        Err(e @ metaroce_topo::TopoError::Invalid { .. }) => {
            eprint!("{}", e.report());
            eprintln!("{e}");
            Ok(Err(Exit::Invalid))
        }
        Err(e) => Err(e.into()),
    }
}

fn load_pipeline(p: &ProgramArgs) -> anyhow::Result<Result<Arc<Pipeline>, Exit>> {
    Ok(crate::program::load(p.source()))
}

macro_rules! load_or_exit {
    ($e:expr) => {
        match $e? {
            Ok(v) => v,
            Err(code) => return Ok(code),
        }
    };
}
use load_or_exit;

async fn run_daemon(a: RunArgs) -> anyhow::Result<Exit> {
    let topo = load_or_exit!(load_topology(&a.topology));
    let pipeline = load_or_exit!(load_pipeline(&a.program));
    let mut cfg = Config::new(topo, pipeline);
    cfg.mode = a.mode;
    cfg.dry_run = a.dry_run;
    cfg.adopt = a.adopt;
    cfg.listen = a.listen;
    cfg.metrics_listen = a.metrics_listen;
    cfg.tokens = a.tokens;
    cfg.events = a.events;
    cfg.record = a.record;
    cfg.collector = a.collector;
    cfg.poll_interval = Duration::from_millis(a.poll_ms.max(1));
    cfg.audit_interval = Duration::from_millis(a.audit_ms.max(a.poll_ms).max(1));
    cfg.ecn_interval = Duration::from_millis(a.ecn_ms.max(1));
    cfg.host_scrape_interval = Duration::from_millis(a.host_scrape_ms.max(100));
    if let Some(n) = a.open_in_flight {
        cfg.opening = metaroce_controller::agent::Opening::new(n);
    }
    cfg.election_id = u128::from(a.election_id);
    if let (Some(EtcdEndpoints(endpoints)), Some(name)) = (a.ha.ha.clone(), a.ha.ha_name.clone()) {
        let mut ha = metaroce_controller::ha::HaConfig::new(endpoints, name);
        ha.optional = a.ha.ha_optional;
        ha.lease_ttl = Duration::from_millis(a.ha.ha_lease_ms);
        ha.url = a.ha.ha_advertise.clone();
        cfg.ha = Some(ha);
        cfg.shard = a.ha.shard;
    }
    cfg.core.settings.latency_shift = a.report_latency_shift;
    let ms = |v: f64| (v.max(0.0) * 1e6) as u64;
    cfg.core.policy.hold_up_ns = ms(a.hold_up_ms);
    cfg.core.policy.hold_down_ns = ms(a.hold_down_ms);
    cfg.core.policy.step_interval_ns = ms(a.step_interval_ms);
    cfg.core.policy.derate_step_permille = a.derate_step_permille;
    cfg.core.policy.min_factor_permille = a.min_factor_permille;
    cfg.core.policy.max_share_growth_permille = a.max_share_growth_permille;
    cfg.core.place.flow_idle_ns = ms(a.flow_idle_ms);
    cfg.core.place.te.min_gain_permille = a.te_min_gain_permille;
    cfg.core.place.te.max_moves = a.te_max_moves;
    cfg.core.place.te.hold_down_ns = ms(a.te_hold_down_ms);
    cfg.core.place.te.confine_incasts = !a.te_spread_incasts;
    cfg.core.place.te.rearrange_jobs = !a.te_no_rearrange;
    if let Err(e) = metaroce_policy_check(&cfg) {
        eprintln!("error: {e}");
        return Ok(Exit::Invalid);
    }
    cfg.core.settings.report_period_us = a.report_period_ms.saturating_mul(1000);
    let duration = a.duration.map(Duration::from_secs_f64);
    let shutdown = async move {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    eprintln!(
        "metaroce controller: {} switches, mode {}{}{}; Ctrl-C stops",
        cfg.topology.switches.len(),
        cfg.mode,
        if cfg.dry_run { " (dry run)" } else { "" },
        match &cfg.ha {
            Some(h) => format!(", high availability as {:?} (a standby until elected)", h.name),
            None => String::new(),
        }
    );
    match daemon::run(cfg, shutdown).await {
        Ok(()) => Ok(Exit::Ok),
        // A token file that was read but is wrong is bad input (exit 1).
        Err(daemon::DaemonError::Tokens(e)) if !matches!(e, TokenError::Read { .. }) => {
            eprintln!("error: {e}");
            Ok(Exit::Invalid)
        }
        // Another topology or program than the fabric's other instances: bad input (exit 1).
        Err(daemon::DaemonError::Shard(e @ metaroce_controller::shard::ShardError::Contract(_))) => {
            eprintln!("error: {e}");
            Ok(Exit::Invalid)
        }
        Err(e @ daemon::DaemonError::Ha(_)) => Err(anyhow::Error::new(e)
            .context("cannot campaign for leadership (--ha-optional runs alone when etcd is unreachable)")),
        Err(e) => Err(anyhow::Error::new(e).context("the controller stopped with an error")),
    }
}

fn replay(a: ReplayArgs) -> anyhow::Result<Exit> {
    let topo = load_or_exit!(load_topology(&a.topology));
    let text = std::fs::read_to_string(&a.recording)
        .with_context(|| format!("cannot read {}", a.recording.display()))?;
    let inputs = match metaroce_controller::replay::parse(&text) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("{}: {e}", a.recording.display());
            return Ok(Exit::Invalid);
        }
    };
    let out =
        metaroce_controller::replay::run(topo, CoreConfig::default(), a.mode, &inputs).context("replay")?;
    for v in out {
        out!("{v}");
    }
    Ok(Exit::Ok)
}

/// The policy settings must pass the policy's own validation before any
/// switch is touched.
fn metaroce_policy_check(cfg: &Config) -> Result<(), String> {
    metaroce_policy::Policy::new(cfg.core.policy.clone()).map(|_| ()).map_err(|e| e.to_string())?;
    cfg.core.place.te.validate().map_err(|e| e.to_string())
}
