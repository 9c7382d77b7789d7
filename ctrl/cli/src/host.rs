//! `metaroce host export|scrape` and `metaroce doctor`: the host side —
//! serve this host's RoCE NIC counters, read an exporter back as the
//! controller does, and check the host against the troubleshooting table.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use metaroce_host::doctor::{self, DoctorOptions, Status};
use metaroce_host::netlink::{KernelNicStats, NicStats, NoNicStats};
use metaroce_host::{exporter, fixture, openmetrics, scrape, Collector, Sampler, ScrapeOptions, Sysfs};

use crate::Exit;

#[derive(Debug, Subcommand)]
pub enum HostCommand {
    /// Serve this host's RoCE NIC counters as OpenMetrics on /metrics (and append CSV).
    ///
    /// Reads /sys/class/infiniband/*/ports/*/{counters,hw_counters}, the netdev's
    /// /sys/class/net/*/statistics, pause frames over ethtool netlink and PFC per
    /// priority over DCB netlink. Rates are per second over the poll interval.
    Export(ExportArgs),
    /// Fetch one exporter and print its per-device PFC/CNP/ECN counters as JSON,
    /// exactly as the controller reads them.
    Scrape(ScrapeArgs),
    /// Write a fixture sysfs tree (an mlx5 and a Soft-RoCE device) to try
    /// `host export` and `doctor` on a machine without RDMA, via --sysfs-root.
    Fixture {
        /// Directory to create; it must not exist yet.
        dir: PathBuf,
    },
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Address to serve on; use 0.0.0.0:9469 so the controller can reach it.
    #[arg(long, default_value = "127.0.0.1:9469")]
    pub listen: SocketAddr,
    /// Poll interval, e.g. 1s or 500ms.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// The `host` label (default: this machine's hostname).
    #[arg(long)]
    pub host: Option<String>,
    /// Also append every poll to this CSV file (timestamp_ms,host,device,port,source,counter,value,rate_per_s).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Poll once, print the OpenMetrics text to stdout and exit (no server).
    #[arg(long)]
    pub once: bool,
}

#[derive(Debug, Args)]
pub struct SourceArgs {
    /// Read sysfs from this directory instead of /sys (a fixture tree, for example).
    #[arg(long, value_name = "DIR", default_value = "/sys")]
    pub sysfs_root: PathBuf,
    /// Do not ask the kernel for ethtool pause and DCB PFC counters
    /// (they are never read when --sysfs-root is not /sys).
    #[arg(long)]
    pub no_netlink: bool,
}

#[derive(Debug, Args)]
pub struct ScrapeArgs {
    /// Exporter address, host:port (as in the topology's `exporter`).
    pub addr: String,
    /// Give up after this long, e.g. 2s.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub timeout: Duration,
}

#[derive(Debug, Args)]
#[command(after_help = "Exit codes: 0 no check failed (warnings allowed); 1 a check failed; \
2 wrong arguments; 3 the checks could not run.")]
pub struct DoctorArgs {
    /// How long to watch PFC and CNP counters, e.g. 2s.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub window: Duration,
    /// The priority RoCE traffic uses (ECN must be on for it).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(0..8))]
    pub priority: u8,
    /// The MTU every RoCE netdev should have (default: only check they agree).
    #[arg(long)]
    pub mtu: Option<u32>,
    /// Print JSON: {"checks": [{check, subject, status, reason, fix}], "pass", "warn", "fail"}.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub source: SourceArgs,
}

pub fn run(cmd: HostCommand) -> anyhow::Result<Exit> {
    match cmd {
        HostCommand::Export(a) => export(a),
        HostCommand::Scrape(a) => scrape_one(&a),
        HostCommand::Fixture { dir } => write_fixture(&dir),
    }
}

/// Parses `500ms`, `2s`, `1.5s` or `1m`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        return Err(format!("{s:?} needs a unit: ms, s or m (e.g. 500ms, 2s)"));
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("{s:?} is not a duration like 500ms or 2s"))?;
    if !(v.is_finite() && v > 0.0 && v * scale <= 86_400.0) {
        return Err(format!("{s:?} must be above zero and at most a day"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

/// The sampler for `--sysfs-root`; `Err` with the exit code when the root is unusable.
fn sampler(a: &SourceArgs) -> Result<Sampler, Exit> {
    if !a.sysfs_root.is_dir() {
        eprintln!(
            "error: --sysfs-root {}: not a directory; give /sys or a tree with class/infiniband and class/net",
            a.sysfs_root.display()
        );
        return Err(Exit::Usage);
    }
    let live = a.sysfs_root.canonicalize().is_ok_and(|p| p == Path::new("/sys"));
    let nic: Arc<dyn NicStats> = if live && !a.no_netlink {
        Arc::new(KernelNicStats)
    } else {
        if !live && !a.no_netlink {
            tracing::info!(root = %a.sysfs_root.display(), "ethtool/DCB counters come from the live kernel only; not read for this root");
        }
        Arc::new(NoNicStats)
    };
    Ok(Sampler::new(Sysfs::new(&a.sysfs_root), nic))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn export(a: ExportArgs) -> anyhow::Result<Exit> {
    let sampler = match sampler(&a.source) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    let host = a.host.clone().unwrap_or_else(hostname);
    let mut collector = Collector::new(sampler, host);
    if let Some(path) = &a.csv {
        collector = collector.with_csv(path).context("--csv")?;
    }
    if a.once {
        outp!("{}", openmetrics::render(&collector.poll()));
        return Ok(Exit::Ok);
    }
    let cfg = exporter::ExportConfig { listen: a.listen, interval: a.interval };
    eprintln!("metaroce host export: http://{}/metrics every {:?}; Ctrl-C stops", a.listen, a.interval);
    let rt = runtime()?;
    // Ctrl-C, or SIGTERM from systemd or a container runtime, stops it cleanly.
    let mut term = rt
        .block_on(async { tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) })
        .context("cannot watch for SIGTERM")?;
    let shutdown = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("stopping the exporter");
    };
    rt.block_on(exporter::run(cfg, collector, shutdown)).context("the exporter stopped")?;
    Ok(Exit::Ok)
}

fn write_fixture(dir: &Path) -> anyhow::Result<Exit> {
    if dir.exists() {
        eprintln!("error: {} exists; give a new directory so nothing is overwritten", dir.display());
        return Ok(Exit::Usage);
    }
    let write = || -> std::io::Result<()> {
        fixture::write_mlx5(dir, "mlx5_0", "enp1s0f0np0", 9000)?;
        fixture::write_rxe(dir, "rxe0", "eth1", 9000)
    };
    write().with_context(|| format!("writing the fixture to {}", dir.display()))?;
    out!("{}: mlx5_0 over enp1s0f0np0, rxe0 over eth1; try --sysfs-root {0}", dir.display());
    Ok(Exit::Ok)
}

fn scrape_one(a: &ScrapeArgs) -> anyhow::Result<Exit> {
    let opts = ScrapeOptions { timeout: a.timeout, ..ScrapeOptions::default() };
    let got = runtime()?.block_on(scrape(&a.addr, &opts)).with_context(|| format!("scraping {}", a.addr))?;
    out!("{}", serde_json::to_string_pretty(&got)?);
    Ok(Exit::Ok)
}

pub fn doctor(a: DoctorArgs) -> anyhow::Result<Exit> {
    let sampler = match sampler(&a.source) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    let first = sampler.sample();
    if !a.json {
        eprintln!("metaroce doctor: watching PFC and CNP counters for {:?}", a.window);
    }
    std::thread::sleep(a.window);
    let second = sampler.sample();
    let opts = DoctorOptions { priority: a.priority, mtu: a.mtu };
    let checks = doctor::diagnose(&first, &second, a.window, &opts);
    if a.json {
        out!("{}", serde_json::to_string_pretty(&doctor::to_json(&checks))?);
    } else {
        outp!("{}", doctor::render(&checks));
    }
    Ok(if checks.iter().any(|c| c.status == Status::Fail) { Exit::Invalid } else { Exit::Ok })
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("2").is_err_and(|e| e.contains("needs a unit")));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("xs").is_err());
    }
}
