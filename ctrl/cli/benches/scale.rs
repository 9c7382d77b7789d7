//! The controller at fabric scale (issue 33): `metaroce sim serve` of a
//! generated k-ary fat-tree and `metaroce controller run --mode act` at
//! default settings, both as users start them, and per fabric size:
//!
//! - the programming time: the controller's start to its line "the control
//!   loop runs: every switch holds its desired state";
//! - idle CPU of both processes, per switch-second, over a quiet window
//!   after programming (no traffic);
//! - resident memory (VmRSS from /proc) of both processes, per switch;
//! - a job of 10,000 flows (all-to-all over 101 hosts) registered through
//!   the job API: its placement time (the POST until its 201, which comes
//!   once the flows are placed and their steer entries published) and its
//!   time to written (the POST until the last steer Write it caused is
//!   acknowledged, from the controller's event log);
//! - reaction with a hot link: after the job, `sim serve` plays traffic it
//!   was given at the start (`hot_scenario`): rounds of a permutation
//!   between the hosts of two leaves in the last two pods, whose flows
//!   collide on the leaves' uplinks under ECMP, so queues cross their
//!   threshold and the switches send digests. The figure is the p99 over
//!   the writes those digests caused (`reaction_ms` of the event log:
//!   digest in, rewrite acknowledged) and of the controller's own share
//!   (`controller_ms`: digest in, first Write sent). Simulated time runs
//!   [`HOT_DILATION`] times slower than the wall clock, and the traffic
//!   starts [`HOT_AFTER`] (wall) after the fabric is programmed, once the
//!   idle window and the job are over.
//!
//! Each figure is printed with the machine's load average beside it: the
//! machine may be shared, and CPU figures mean little without it.
//!
//! Sizes: `SCALE_K` (comma-separated k, default `8,16,32`: 80, 320 and
//! 1,280 switches) or `-- --k 8,16`; the idle window `SCALE_IDLE_S` or
//! `-- --idle-s N` (default 10); `SCALE_KEEP=1` keeps each size's directory
//! (topology, logs, the controller's event log) and prints where; `SCALE_BIN` runs another build of the
//! command (an older commit's, to compare). Run with `cargo bench -p metaroce-cli
//! --bench scale`; it prints figures and asserts nothing about time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const SCHED: &str = "scheduler-token-of-the-scale-bench";
/// Hosts of the job: 101 × 100 directed pairs = 10,100 flows.
const JOB_HOSTS: usize = 101;
/// Wall seconds per simulated second while `sim serve` plays the hot-link traffic.
const HOT_DILATION: f64 = 1000.0;
/// When the hot-link traffic starts, in wall time after the fabric is programmed.
const HOT_AFTER: Duration = Duration::from_secs(45);
/// Rounds of the hot-link permutation, and the simulated time between them.
const HOT_ROUNDS: usize = 5;
const HOT_EVERY_MS: f64 = 2.0;

/// Kills the child when the bench ends, however it ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

struct Opts {
    ks: Vec<usize>,
    idle: Duration,
}

fn opts() -> Opts {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let ks = flag("--k").or_else(|| std::env::var("SCALE_K").ok()).unwrap_or_else(|| "8,16,32".into());
    let ks = ks
        .split(',')
        .map(|s| {
            let k: usize =
                s.trim().parse().unwrap_or_else(|_| panic!("SCALE_K / --k: {s:?} is not a number"));
            assert!(k >= 4 && k.is_multiple_of(2), "SCALE_K / --k: k = {k} must be even and at least 4");
            k
        })
        .collect();
    let idle = flag("--idle-s").or_else(|| std::env::var("SCALE_IDLE_S").ok()).unwrap_or_else(|| "10".into());
    let idle: f64 =
        idle.parse().unwrap_or_else(|_| panic!("SCALE_IDLE_S / --idle-s: {idle:?} is not a number"));
    Opts { ks, idle: Duration::from_secs_f64(idle.max(1.0)) }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` runs this
    // once without it (as `make test` does): a fabric served and
    // programmed at three sizes is a benchmark, not a test, so skip.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let o = opts();
    // SCALE_BIN: another build of the command (an older commit's, to compare).
    let bin = std::env::var_os("SCALE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_metaroce").into());
    let tick = clock_ticks();
    println!(
        "scale bench: {}: sim serve of fat-trees k = {:?}, controller run --mode act at default settings; idle window {:.0} s; {} CPUs",
        bin.display(),
        o.ks,
        o.idle.as_secs_f64(),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    let mut rows = vec![];
    for &k in &o.ks {
        match one_size(&bin, k, &o, tick) {
            Ok(r) => rows.push(r),
            Err(e) => println!("k = {k}: failed: {e}"),
        }
    }
    println!();
    println!("| k | switches | programmed in | controller idle CPU | serve idle CPU | controller resident | serve resident | 10k-flow job placed | written | hot link: reaction p99 | load (1 min) |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.2} s | {:.3} ms/switch-s | {:.3} ms/switch-s | {:.2} MB/switch ({:.0} MB) | {:.2} MB/switch ({:.0} MB) | {} | {} | {} | {:.2} |",
            r.k,
            r.switches,
            r.programmed.as_secs_f64(),
            r.ctl_cpu_ms_per_switch_s,
            r.serve_cpu_ms_per_switch_s,
            r.ctl_rss_mb / r.switches as f64,
            r.ctl_rss_mb,
            r.serve_rss_mb / r.switches as f64,
            r.serve_rss_mb,
            r.job_placed.map(|d| format!("{:.2} s", d.as_secs_f64())).unwrap_or_else(|| "-".into()),
            r.job_written.map(|d| format!("{:.2} s", d.as_secs_f64())).unwrap_or_else(|| "-".into()),
            r.hot.text(),
            r.load,
        );
    }
}

struct Row {
    k: usize,
    switches: usize,
    programmed: Duration,
    ctl_cpu_ms_per_switch_s: f64,
    serve_cpu_ms_per_switch_s: f64,
    ctl_rss_mb: f64,
    serve_rss_mb: f64,
    job_placed: Option<Duration>,
    job_written: Option<Duration>,
    hot: Hot,
    load: f64,
}

/// The writes hot-link digests caused: how many, and the p99 of the
/// reaction (digest in → rewrite acknowledged) and of the controller's
/// share (digest in → first Write sent), in ms.
#[derive(Default)]
struct Hot {
    writes: usize,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    controller_p99_ms: Option<f64>,
}

impl Hot {
    fn text(&self) -> String {
        let (Some(p50), Some(p99)) = (self.p50_ms, self.p99_ms) else {
            return "- (no digest-caused write seen)".into();
        };
        let own =
            self.controller_p99_ms.map(|c| format!(", controller's share p99 {c:.2} ms")).unwrap_or_default();
        format!("p50 {p50:.2} ms, p99 {p99:.2} ms{own} ({} writes)", self.writes)
    }
}

/// Traffic for `sim serve` on a generated fat-tree of `k`: [`HOT_ROUNDS`]
/// rounds of a permutation between the hosts of the last leaf of pod
/// k - 1 and the last leaf of pod k (every host sends 4 MiB to its
/// partner), [`HOT_EVERY_MS`] simulated ms apart, starting [`HOT_AFTER`]
/// wall time after the fabric is programmed. Each leaf sends k/2 flows
/// over its k/2 uplinks: ECMP puts two on one uplink in nearly every
/// round, and that queue crosses its threshold. The last pods keep the
/// hosts apart from the job's (it takes hosts from the front).
fn hot_scenario(k: usize) -> String {
    let half = k / 2;
    // Leaves are numbered across the fabric, k/2 per pod, and leaf L's
    // hosts are hL-1 .. hL-(k/2).
    let (a, b) = ((k - 1) * half, k * half);
    let hosts: Vec<String> =
        [a, b].iter().flat_map(|leaf| (1..=half).map(move |h| format!("h{leaf}-{h}"))).collect();
    let start_ms = HOT_AFTER.as_secs_f64() * 1e3 / HOT_DILATION;
    let jobs: String = (0..HOT_ROUNDS)
        .map(|r| {
            format!(
                "  - {{name: hot{r}, pattern: permutation, hosts: [{}], shift: {half}, size: 4MiB, start: {:.3}ms}}\n",
                hosts.join(", "),
                start_ms + r as f64 * HOT_EVERY_MS
            )
        })
        .collect();
    format!(
        "# Written by the scale bench: hot links for the controller to react to.\n\
         name: scale-bench-hot\n\
         topology: fabric.yaml\n\
         seed: 1\n\
         modes: [flowlet]\n\
         network: {{mtu: 4096B, dcqcn: false}}\n\
         jobs:\n{jobs}"
    )
}

/// The writes since `from_ns` that a digest caused, from the event log.
fn hot_reactions(events: &Path, from_ns: u64) -> Result<Hot, String> {
    let text = std::fs::read_to_string(events).map_err(|e| format!("{}: {e}", events.display()))?;
    let mut total = vec![];
    let mut own = vec![];
    for v in text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()) {
        if v["kind"] != "write" || v["ts_unix_ns"].as_u64().is_none_or(|t| t < from_ns) {
            continue;
        }
        let field = |name: &str| v["details"][name].as_f64().or_else(|| v[name].as_f64());
        if let Some(ms) = field("reaction_ms") {
            total.push(ms);
            own.extend(field("controller_ms"));
        }
    }
    total.sort_by(f64::total_cmp);
    own.sort_by(f64::total_cmp);
    Ok(Hot {
        writes: total.len(),
        p50_ms: rank(&total, 0.50),
        p99_ms: rank(&total, 0.99),
        controller_p99_ms: rank(&own, 0.99),
    })
}

/// The `q` quantile of sorted `v` (nearest rank), `None` when empty.
fn rank(v: &[f64], q: f64) -> Option<f64> {
    let i = ((v.len() as f64 * q).ceil() as usize).max(1) - 1;
    v.get(i).copied()
}

fn one_size(bin: &Path, k: usize, o: &Opts, tick: f64) -> Result<Row, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    // Removed at the end unless SCALE_KEEP asks to look at it afterwards.
    let (_remove, d) = if std::env::var_os("SCALE_KEEP").is_some_and(|v| !v.is_empty() && v != "0") {
        let d = dir.keep();
        progress(k, &format!("SCALE_KEEP: keeping {}", d.display()));
        (None, d)
    } else {
        let d = dir.path().to_path_buf();
        (Some(dir), d)
    };
    let d = d.as_path();
    let switches = 5 * k * k / 4;
    let base = free_port_range(switches + 1)?;
    let topo = d.join("fabric.yaml");
    let gen = Command::new(bin)
        .args(["topo", "gen", "fat-tree", "--k", &k.to_string(), "--thrift-base-port", "0"])
        .args(["--p4rt-base-port", &base.to_string(), "-o"])
        .arg(&topo)
        .output()
        .map_err(|e| format!("topo gen: {e}"))?;
    if !gen.status.success() {
        return Err(format!("topo gen: {}", String::from_utf8_lossy(&gen.stderr)));
    }
    progress(k, &format!("{switches} switches on ports {base}..; starting sim serve"));
    let hot = d.join("hot.yaml");
    std::fs::write(&hot, hot_scenario(k)).map_err(|e| format!("{}: {e}", hot.display()))?;
    let serve_log = d.join("serve.log");
    let dilation = HOT_DILATION.to_string();
    let serve = spawn(
        bin,
        &[
            OsArg::P(&topo),
            OsArg::P(&hot),
            OsArg::S("--quiet"),
            OsArg::S("--dilation"),
            OsArg::S(&dilation),
            OsArg::S("--wait"),
            OsArg::S("600"),
            OsArg::S("--out"),
            OsArg::P(&d.join("serve-report")),
        ],
        &["sim", "serve"],
        &serve_log,
    )?;
    // Bound: one line per switch, then it waits for a controller.
    wait_lines(&serve, &serve_log, "(device ", switches, Duration::from_secs(120 + switches as u64 / 10))?;
    let serve_rss_mb = rss_mb(serve.pid())?;
    progress(k, &format!("serve up: {serve_rss_mb:.0} MB resident; starting the controller"));
    let tokens = d.join("tokens");
    std::fs::write(&tokens, format!("scheduler {SCHED}\n")).map_err(|e| format!("tokens: {e}"))?;
    let events = d.join("events.jsonl");
    let ctl_log = d.join("controller.log");
    let began = Instant::now();
    let ctl = spawn(
        bin,
        &[
            OsArg::P(&topo),
            OsArg::S("--mode"),
            OsArg::S("act"),
            OsArg::S("--listen"),
            OsArg::S("127.0.0.1:0"),
            OsArg::S("--tokens"),
            OsArg::P(&tokens),
            OsArg::S("--events"),
            OsArg::P(&events),
        ],
        &["controller", "run"],
        &ctl_log,
    )?;
    wait_line(&ctl, &ctl_log, "the control loop runs", Duration::from_secs(300))?;
    let programmed = began.elapsed();
    progress(k, &format!("programmed in {:.2} s (load {:.2})", programmed.as_secs_f64(), load()));
    let api = api_addr(&ctl_log)?;
    // Let the first audits and metrics settle before the quiet window.
    std::thread::sleep(Duration::from_secs(2));
    progress(k, &format!("idle for {:.0} s", o.idle.as_secs_f64()));
    let (c0, s0, t0) = (cpu_s(ctl.pid(), tick)?, cpu_s(serve.pid(), tick)?, Instant::now());
    std::thread::sleep(o.idle);
    let (c1, s1, dt) = (cpu_s(ctl.pid(), tick)?, cpu_s(serve.pid(), tick)?, t0.elapsed().as_secs_f64());
    let per = |a: f64, b: f64| (b - a) * 1e3 / (dt * switches as f64);
    let (ctl_cpu, serve_cpu) = (per(c0, c1), per(s0, s1));
    let (ctl_rss_mb, serve_rss_mb) = (rss_mb(ctl.pid())?, rss_mb(serve.pid())?);
    let load_idle = load();
    progress(
        k,
        &format!(
            "idle: controller {ctl_cpu:.3} ms CPU/switch-s ({:.2} cores), serve {serve_cpu:.3} ms/switch-s; resident controller {ctl_rss_mb:.0} MB, serve {serve_rss_mb:.0} MB (load {load_idle:.2})",
            (c1 - c0) / dt
        ),
    );
    let (job_placed, job_written) = match job(k, &topo, api, &events) {
        Ok((p, w)) => (Some(p), w),
        Err(e) => {
            progress(k, &format!("job: {e}"));
            (None, None)
        }
    };
    let after_job_ns = unix_ns();
    if began.elapsed() > programmed + HOT_AFTER {
        progress(k, "the idle window and the job outlasted the wait before the hot-link traffic; its reactions may overlap them");
    }
    progress(k, "waiting for the hot-link traffic (played by sim serve)");
    let within = HOT_AFTER + Duration::from_secs(120 + switches as u64 / 10);
    let hot = match wait_line(&serve, &serve_log, "traffic done", within) {
        Ok(()) => hot_reactions(&events, after_job_ns),
        Err(e) => Err(e),
    };
    let hot = hot.unwrap_or_else(|e| {
        progress(k, &format!("hot link: {e}"));
        Hot::default()
    });
    progress(k, &format!("hot link: {} (load {:.2})", hot.text(), load()));
    Ok(Row {
        k,
        switches,
        programmed,
        ctl_cpu_ms_per_switch_s: ctl_cpu,
        serve_cpu_ms_per_switch_s: serve_cpu,
        ctl_rss_mb,
        serve_rss_mb,
        job_placed,
        job_written,
        hot,
        load: load_idle,
    })
}

/// Registers an all-to-all job over [`JOB_HOSTS`] hosts spread over the
/// fabric's leaves: its placement time and, when its writes were seen, its
/// time to written.
fn job(
    k: usize,
    topo: &Path,
    api: SocketAddr,
    events: &Path,
) -> Result<(Duration, Option<Duration>), String> {
    let t = metaroce_topo::load_file(topo).map_err(|e| format!("{}: {e}", topo.display()))?;
    let hosts: Vec<&str> = t.hosts.iter().map(|h| h.name.as_str()).collect();
    if hosts.len() < JOB_HOSTS {
        return Err(format!("the fabric has {} hosts, the job needs {JOB_HOSTS}", hosts.len()));
    }
    // Spread over the fabric, so that the job spans as many leaves as it can.
    let stride = (hosts.len() / JOB_HOSTS).max(1);
    let picked: Vec<String> =
        hosts.iter().step_by(stride).take(JOB_HOSTS).map(|h| format!("{h:?}")).collect();
    let body = format!(
        r#"{{"name": "scale-bench", "pattern": "all-to-all", "hosts": [{}], "bytes": 1000000}}"#,
        picked.join(", ")
    );
    progress(k, &format!("registering a job of {} flows", JOB_HOSTS * (JOB_HOSTS - 1)));
    let from_ns = unix_ns();
    let t0 = Instant::now();
    let answer = http_post(api, "/api/v1/jobs", SCHED, &body, Duration::from_secs(120));
    let placed = t0.elapsed();
    let status = answer.lines().next().unwrap_or("no answer").to_owned();
    if !status.contains(" 201") {
        return Err(format!("POST /api/v1/jobs answered {status:?}"));
    }
    // The writes it caused: wait until a second passes without a new one.
    let mut last: Option<u64> = None;
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_secs(1) && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
        let now = last_write_ns(events, from_ns);
        if now != last {
            last = now;
            quiet_since = Instant::now();
        }
    }
    let written = last.map(|ns| Duration::from_nanos(ns.saturating_sub(from_ns)));
    progress(
        k,
        &format!(
            "job placed in {:.2} s, written in {} (load {:.2})",
            placed.as_secs_f64(),
            written
                .map(|d| format!("{:.2} s", d.as_secs_f64()))
                .unwrap_or_else(|| "- (no write seen)".into()),
            load()
        ),
    );
    Ok((placed, written))
}

/// The latest acknowledged write the event log records since `from_ns`.
fn last_write_ns(events: &Path, from_ns: u64) -> Option<u64> {
    let text = std::fs::read_to_string(events).ok()?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "write")
        .filter_map(|v| v["ts_unix_ns"].as_u64())
        .filter(|&ts| ts >= from_ns)
        .max()
}

enum OsArg<'a> {
    S(&'a str),
    P(&'a Path),
}

fn spawn(bin: &Path, args: &[OsArg], sub: &[&str], log: &Path) -> Result<Proc, String> {
    let err = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut cmd = Command::new(bin);
    cmd.args(sub);
    for a in args {
        match a {
            OsArg::S(s) => cmd.arg(s),
            OsArg::P(p) => cmd.arg(p),
        };
    }
    let child = cmd
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    Ok(Proc(child))
}

/// Waits until `log` has `n` lines containing `needle`.
fn wait_lines(p: &Proc, log: &Path, needle: &str, n: usize, within: Duration) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.lines().filter(|l| l.contains(needle)).count() >= n {
            return Ok(());
        }
        let pid = p.pid();
        if !Path::new(&format!("/proc/{pid}")).exists() || t0.elapsed() > within {
            let tail: String = text.lines().rev().take(20).collect::<Vec<_>>().join("\n");
            return Err(format!(
                "fewer than {n} lines with {needle:?} in {} within {within:?}; its last lines:\n{tail}",
                log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `log` has a line containing `needle`.
fn wait_line(p: &Proc, log: &Path, needle: &str, within: Duration) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(needle) {
            return Ok(());
        }
        let tail: String = text.lines().rev().take(20).collect::<Vec<_>>().join("\n");
        let pid = p.pid();
        if !Path::new(&format!("/proc/{pid}")).exists() || t0.elapsed() > within {
            return Err(format!(
                "no {needle:?} in {} within {within:?}; its last lines:\n{tail}",
                log.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn api_addr(log: &Path) -> Result<SocketAddr, String> {
    let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
    text.lines()
        .filter(|l| l.contains("status API listening"))
        .find_map(|l| l.split("addr=").nth(1)?.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| "the controller did not log its API address".into())
}

/// The process's user + system CPU time, in seconds (/proc/PID/stat).
fn cpu_s(pid: u32, tick: f64) -> Result<f64, String> {
    let stat =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, 11 and 12 after the name.
    Ok((num(11) + num(12)) / tick)
}

/// Resident memory in MB (VmRSS of /proc/PID/status).
fn rss_mb(pid: u32) -> Result<f64, String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    let kb = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .ok_or_else(|| format!("no VmRSS in /proc/{pid}/status"))?;
    Ok(kb / 1024.0)
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok())
        .unwrap_or(100.0)
}

/// The 1-minute load average.
fn load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A base port with `n` free ports above it on 127.0.0.1 (checked by binding each).
fn free_port_range(n: usize) -> Result<u16, String> {
    let n = u16::try_from(n).map_err(|_| format!("{n} ports are too many"))?;
    let mut base: u16 = 20_000;
    while base.checked_add(n).is_some_and(|top| top < 32_000) {
        let taken = (0..n).find(|i| TcpListener::bind(("127.0.0.1", base + i)).is_err());
        match taken {
            None => return Ok(base),
            Some(i) => base += i + 1,
        }
    }
    Err(format!("no {n} free ports in 20000-32000"))
}

fn http_post(addr: SocketAddr, path: &str, token: &str, body: &str, timeout: Duration) -> String {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else { return String::new() };
    let _ = s.set_read_timeout(Some(timeout));
    let _ = write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

fn progress(k: usize, what: &str) {
    eprintln!("scale k={k}: {what}");
    let _ = std::io::stderr().flush();
}
