//! L2 high availability: two `metaroce controller`s campaign in a real etcd
//! (started here on free ports, in a temporary directory) for the fabric
//! `metaroce sim serve` plays a hot spot on. The leader is SIGKILLed during
//! a congestion episode; the standby takes over: the time is measured, the
//! packets the served fabric dropped meanwhile are counted, and the
//! switches' tables must be what the new leader planned, with no second
//! pipeline push. Then the fencing case: the new leader is SIGSTOPped, a
//! third controller takes over, and the old one, resumed, writes nothing
//! and stands down by itself. Separately, on in-process switches: a job
//! registered on a leader outlives it and its successor, and its removal
//! sticks.
//!
//! Without etcd (Debian: etcd-server) the test prints one skip line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::etcd::{etcd, ha_controller, until};
use common::serve::{fabric, free_port, request, spawn_program as spawn, wait_stopped, Proc};
use common::{pipeline, read_switch, repo};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use metaroce_pipeline::{Entry, Key, Pipeline};
use serde_json::Value;

fn signal(c: &Child, sig: &str) -> bool {
    Command::new("kill").args([&format!("-{sig}"), &c.id().to_string()]).status().is_ok_and(|s| s.success())
}

/// The JSON body of an answer (Null when there is none).
fn body_json(answer: &str) -> Value {
    answer.split_once("\r\n\r\n").and_then(|(_, b)| serde_json::from_str(b).ok()).unwrap_or(Value::Null)
}

/// A controller of the HA group: its process, API, event log and stderr.
struct Ctl {
    proc: Proc,
    api: SocketAddr,
    events: PathBuf,
    log: PathBuf,
    /// The API token it was given (`--tokens`), if any.
    token: Option<&'static str>,
}

fn controller(dir: &Path, topo: &Path, etcd: &str, name: &str) -> Ctl {
    controller_with(dir, topo, etcd, name, None)
}

/// A controller of the group; with `tokens` (file, token), its API takes jobs.
fn controller_with(
    dir: &Path,
    topo: &Path,
    etcd: &str,
    name: &str,
    tokens: Option<(&Path, &'static str)>,
) -> Ctl {
    let mut extra = vec!["--hold-down-ms", "3000", "--hold-up-ms", "0.5"];
    if let Some((file, _)) = tokens {
        extra.extend(["--tokens", file.to_str().unwrap()]);
    }
    let (proc, api, events, log) = ha_controller(dir, topo, etcd, name, &extra);
    Ctl { proc, api, events, log, token: tokens.map(|t| t.1) }
}

impl Ctl {
    fn get(&self, path: &str) -> Value {
        body_json(&request(self.api, "GET", path, self.token, ""))
    }

    fn status(&self) -> Value {
        self.get("/api/v1/status")
    }

    /// Leader, and primary on every switch.
    fn leads(&self) -> bool {
        let s = self.status();
        s["ha"]["role"] == "leader"
            && s["switches"]
                .as_array()
                .is_some_and(|v| !v.is_empty() && v.iter().all(|x| x["primary"] == true))
    }

    /// Standby, connected to every switch, following `leader`.
    fn stands_by(&self, leader: &str) -> bool {
        let s = self.status();
        s["ha"]["role"] == "standby"
            && s["ha"]["leader"] == leader
            && s["switches"].as_array().is_some_and(|v| v.iter().all(|x| x["connected"] == true))
    }

    fn events(&self) -> Vec<Value> {
        common::json_lines(&self.events)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Every served switch's entries.
async fn tables(addrs: &[SocketAddr], p: &Pipeline) -> Vec<BTreeMap<Key, Entry>> {
    let mut out = vec![];
    for (i, addr) in addrs.iter().enumerate() {
        out.push(read_switch(*addr, i as u64 + 1, p).await.0);
    }
    out
}

/// Entries added, changed or removed between two reads, by kind of key.
fn changed_kinds(before: &[BTreeMap<Key, Entry>], after: &[BTreeMap<Key, Entry>]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (b, a) in before.iter().zip(after) {
        let keys: std::collections::BTreeSet<&Key> = b.keys().chain(a.keys()).collect();
        for k in keys.into_iter().filter(|k| b.get(k) != a.get(k)) {
            let kind = format!("{k:?}").split(['(', ' ', '{']).next().unwrap_or("").to_owned();
            *out.entry(kind).or_default() += 1;
        }
    }
    out
}

/// Steer entries on every served switch.
async fn steer_entries(addrs: &[SocketAddr], p: &Pipeline) -> usize {
    let mut n = 0;
    for (i, addr) in addrs.iter().enumerate() {
        let held = read_switch(*addr, i as u64 + 1, p).await.0;
        n += held.keys().filter(|k| matches!(k, Key::SteerFlow(_) | Key::SteerPair(..))).count();
    }
    n
}

/// `(forwarded, dropped)` of serve's last progress line.
fn serve_counts(log: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let line =
        text.lines().rev().find(|l| l.contains(" forwarded, ") && l.contains(" dropped")).unwrap_or("");
    let num = |after: &str| -> u64 {
        line.split(after).next().and_then(|s| s.rsplit(' ').next()).and_then(|n| n.parse().ok()).unwrap_or(0)
    };
    (num(" forwarded"), num(" dropped"))
}

fn progress_lines(log: &Path) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().lines().filter(|l| l.contains(" forwarded, ")).count()
}

/// The first write pass per switch after `ctl` was elected: (inserts, modifies, deletes).
fn takeover_writes(ctl: &Ctl) -> (u64, u64, u64) {
    let ev = ctl.events();
    let from = ev.iter().rposition(|e| e["kind"] == "ha_role" && e["details"]["to"] == "leader").unwrap_or(0);
    let mut seen = std::collections::BTreeSet::new();
    let mut sum = (0, 0, 0);
    for e in &ev[from..] {
        if e["kind"] == "write" && seen.insert(e["switch"].as_str().unwrap_or("").to_owned()) {
            let n = |k: &str| e["details"][k].as_u64().unwrap_or(0);
            sum = (sum.0 + n("inserts"), sum.1 + n("modifies"), sum.2 + n("deletes"));
        }
    }
    sum
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_a_killed_leader_and_a_paused_one_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let Some((etcd_proc, url)) = etcd(dir.path(), "L2 controller high availability") else { return };
    let (topo, sc, addrs) = fabric(dir.path(), "serve-hotspot.yaml");
    let serve_log = dir.path().join("serve.log");
    let out = dir.path().join("report");
    // Ten wall seconds per simulated one: the traffic lasts long enough to
    // kill a leader in the middle of it.
    let serve_args = [
        "sim",
        "serve",
        topo.to_str().unwrap(),
        sc.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--wait",
        "180",
        "--dilation",
        "10",
    ];
    let _serve = spawn(env!("CARGO_BIN_EXE_metaroce"), &serve_args, &serve_log);
    let logs = common::log_tails(dir.path(), &["serve", "a", "b", "c"], 150);
    let mut a = controller(dir.path(), &topo, &url, "a");
    let p = pipeline();
    until(Duration::from_secs(60), "a leads", &logs, || a.leads().then_some(()));
    let b = controller(dir.path(), &topo, &url, "b");
    until(Duration::from_secs(60), "b stands by", &logs, || b.stands_by("a").then_some(()));
    // A congestion episode: a derates a hot uplink.
    until(Duration::from_secs(120), "a derates", &logs, || {
        a.events().iter().any(|e| e["kind"] == "derate" && e["details"]["applied"] == true).then_some(())
    });
    let tables_before = tables(&addrs, &p).await;
    let steer_before = steer_entries(&addrs, &p).await;
    let (fwd0, drop0) = serve_counts(&serve_log);
    let lines0 = progress_lines(&serve_log);
    // SIGKILL: no resignation, the lease has to lapse.
    a.proc.0.kill().unwrap();
    let killed = Instant::now();
    until(Duration::from_secs(10), "b takes over within 10 s", &logs, || b.leads().then_some(()));
    let takeover = killed.elapsed();
    let steer_after = steer_entries(&addrs, &p).await;
    // Drops from serve's last progress line before the kill to its first
    // line a second after the takeover (its lines come once a second).
    let after = Instant::now() + Duration::from_secs(1);
    until(Duration::from_secs(20), "serve's progress", &logs, || {
        (Instant::now() >= after && progress_lines(&serve_log) > lines0 + 1).then_some(())
    });
    let (fwd1, drop1) = serve_counts(&serve_log);
    let (ins, modi, del) = takeover_writes(&b);
    let changed = changed_kinds(&tables_before, &tables(&addrs, &p).await);
    let elected_to_primary = b.status()["ha"]["last_takeover_ms"].as_f64().unwrap_or(f64::NAN);
    println!(
        "ha: takeover after SIGKILL {:.0} ms (elected → primary on every switch {elected_to_primary:.1} ms); \
         served fabric around it: {} packets dropped of {} forwarded; first passes of the new leader: \
         {ins} inserts, {modi} modifies, {del} deletes; steer entries on the switches: {steer_before} before the kill, \
         {steer_after} once b leads; entries that differ from before the kill, by table: {changed:?}",
        takeover.as_secs_f64() * 1e3,
        drop1.saturating_sub(drop0),
        fwd1.saturating_sub(fwd0),
    );
    let blog = b.log_text();
    assert!(blog.contains("elected: primary on this switch"), "{}", logs());
    assert!(!blog.contains("pipeline pushed"), "no second pipeline push (it wipes the tables)\n{}", logs());
    let ev = b.events();
    let elected = ev.iter().rposition(|e| e["kind"] == "ha_role" && e["details"]["to"] == "leader").unwrap();
    assert!(
        ev[elected..]
            .iter()
            .filter(|e| e["kind"] == "switch_up")
            .all(|e| e["details"]["installed_entries"] != 0),
        "b found the tables a left\n{}",
        logs()
    );
    // After the traffic, the served tables are exactly what b holds them to.
    until(Duration::from_secs(240), "the traffic ends", &logs, || {
        std::fs::read_to_string(&serve_log).unwrap_or_default().contains("traffic done").then_some(())
    });
    let names: Vec<String> = ["leaf1", "leaf2", "spine1", "spine2"].map(String::from).to_vec();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut held = vec![];
        for (i, addr) in addrs.iter().enumerate() {
            held.push(Arc::new(read_switch(*addr, i as u64 + 1, &p).await.0));
        }
        let switch_view = metaroce_controller::status::groups(&names, &held);
        let status = b.status();
        let synced = status["switches"].as_array().is_some_and(|v| {
            v.iter().zip(&held).all(|(s, h)| {
                s["programmed"] == true && s["last_error"].is_null() && s["installed_entries"] == h.len()
            })
        });
        let b_view = b.get("/api/v1/groups");
        if synced && b_view == switch_view {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "served tables {switch_view:#} differ from b's {b_view:#}\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap_or_default())
            .unwrap_or_default();
    println!(
        "ha: the run: {} unfinished messages, {} drops in all",
        report["modes"][0]["unfinished_messages"], report["modes"][0]["drops"]
    );

    // Fencing: c stands by, b is paused, c takes over, b resumes.
    let c = controller(dir.path(), &topo, &url, "c");
    until(Duration::from_secs(60), "c stands by", &logs, || c.stands_by("b").then_some(()));
    assert!(signal(&b.proc.0, "STOP"));
    let stopped = Instant::now();
    // Writes that began before b actually stopped may end after it; the
    // mark is taken once every thread of b is stopped.
    assert!(wait_stopped(b.proc.0.id()), "b stopped on SIGSTOP\n{}", logs());
    let stopped_unix_us =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as u64;
    until(Duration::from_secs(10), "c takes over from the paused b", &logs, || c.leads().then_some(()));
    println!("ha: takeover from a SIGSTOPped leader {:.0} ms", stopped.elapsed().as_secs_f64() * 1e3);
    let c_id: u128 = c.status()["ha"]["election_id"].as_str().unwrap().parse().unwrap();
    assert!(signal(&b.proc.0, "CONT"));
    until(Duration::from_secs(20), "b stands down by itself", &logs, || {
        let s = b.status();
        (s["ha"]["role"] == "standby").then_some(())
    });
    // Give a resumed b the chance to write what it had pending.
    let settle = Instant::now() + Duration::from_millis(500);
    until(Duration::from_secs(5), "a moment", &logs, || (Instant::now() >= settle).then_some(()));
    // A pass that began before the pause may end after it (its event is
    // logged then); none that began after it may have written anything.
    let ok_writes: Vec<Value> = b
        .events()
        .into_iter()
        .filter(|e| e["kind"] == "write" && e["details"]["started_unix_us"].as_u64() >= Some(stopped_unix_us))
        .collect();
    assert!(ok_writes.is_empty(), "the paused leader wrote after resuming: {ok_writes:?}\n{}", logs());
    for (i, addr) in addrs.iter().enumerate() {
        let (_, primary) = read_switch(*addr, i as u64 + 1, &p).await;
        assert_eq!(primary, Some(c_id), "switch {} keeps c as its primary", i + 1);
    }
    assert!(b.log_text().contains("leadership lost"), "b says it stood down\n{}", logs());
    let refused = b.events().iter().filter(|e| e["kind"] == "write_failed").count();
    println!("ha: the resumed leader stood down; its writes refused by the switches meanwhile: {refused}");

    // etcd lost: the leader stands down after its lease and leaves the
    // switches as they are; once etcd is back, a leader is elected again.
    assert!(signal(&etcd_proc.0, "STOP"));
    let lost = Instant::now();
    until(Duration::from_secs(10), "c stands down without etcd", &logs, || {
        (c.status()["ha"]["role"] == "standby").then_some(())
    });
    println!("ha: etcd paused: the leader stood down after {:.0} ms", lost.elapsed().as_secs_f64() * 1e3);
    // What c last wrote stays: the switches hold what its view says (its
    // view may trail a pass that ended as it stood down: a few tries).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let held: Vec<Arc<BTreeMap<Key, Entry>>> =
            tables(&addrs, &p).await.into_iter().map(Arc::new).collect();
        let switch_view = metaroce_controller::status::groups(&names, &held);
        let c_view = c.get("/api/v1/groups");
        if switch_view == c_view && held.iter().all(|h| !h.is_empty()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the switches keep c's tables: {switch_view:#} vs {c_view:#}\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(signal(&etcd_proc.0, "CONT"));
    until(Duration::from_secs(20), "a leader again once etcd is back", &logs, || {
        (b.leads() || c.leads()).then_some(())
    });
}

const SCHED: &str = "scheduler-token-of-the-ha-test";

/// The steer entries on the switches, as (switch, key) pairs.
async fn steer_keys(addrs: &[SocketAddr], p: &Pipeline) -> Vec<(usize, Key)> {
    let mut out = vec![];
    for (i, addr) in addrs.iter().enumerate() {
        let held = read_switch(*addr, i as u64 + 1, p).await.0;
        out.extend(
            held.into_keys().filter(|k| matches!(k, Key::SteerFlow(_) | Key::SteerPair(..))).map(|k| (i, k)),
        );
    }
    out
}

/// The answer's status code is `code`.
fn status_is(answer: &str, code: u16) -> bool {
    answer.split_whitespace().nth(1) == Some(code.to_string().as_str())
}

fn job_names(ctl: &Ctl) -> Vec<String> {
    let doc = ctl.get("/api/v1/jobs");
    let jobs = doc["jobs"].as_array().cloned().unwrap_or_default();
    jobs.iter().filter_map(|j| j["name"].as_str().map(String::from)).collect()
}

/// Jobs outlive their leader: a job registered on the leader is kept in
/// etcd, the standby that takes over after a SIGKILL registers it again
/// and holds its steer entries; a job removed on the new leader stays
/// removed when a third controller takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_survive_a_takeover() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_etcd, url)) = etcd(dir.path(), "L2 controller high availability") else { return };
    let options = |id| metaroce_p4rt::server::SwitchOptions { device_id: id, ..Default::default() };
    let (_switches, addrs, _stop) = common::in_process_switches(4, options).await;
    let mut topo = std::fs::read_to_string(repo().join("topologies/mininet-2x2.yaml")).unwrap();
    for (n, addr) in addrs.iter().enumerate() {
        topo = topo.replace(&format!("127.0.0.1:5000{}", n + 1), &addr.to_string());
    }
    let topo_path = dir.path().join("fabric.yaml");
    std::fs::write(&topo_path, topo).unwrap();
    let tokens = dir.path().join("tokens.txt");
    std::fs::write(&tokens, format!("scheduler {SCHED}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let with = Some((tokens.as_path(), SCHED));
    let logs = common::log_tails(dir.path(), &["serve", "a", "b", "c"], 150);
    let p = pipeline();
    let mut a = controller_with(dir.path(), &topo_path, &url, "a", with);
    until(Duration::from_secs(60), "a leads", &logs, || a.leads().then_some(()));
    let mut b = controller_with(dir.path(), &topo_path, &url, "b", with);
    until(Duration::from_secs(60), "b stands by", &logs, || b.stands_by("a").then_some(()));

    let job = r#"{"name": "perm", "pattern": "permutation", "hosts": ["h1", "h2", "h3", "h4"], "shift": 2, "bytes": 262144}"#;
    // The standby refuses and sends the client to where a's API listens.
    let answer = request(b.api, "POST", "/api/v1/jobs", Some(SCHED), job);
    assert!(status_is(&answer, 409), "{answer}");
    assert_eq!(body_json(&answer)["leader_url"], format!("http://{}", a.api), "{answer}");
    let answer = request(a.api, "POST", "/api/v1/jobs", Some(SCHED), job);
    assert!(status_is(&answer, 201), "{answer}\n{}", logs());
    assert_eq!(body_json(&answer)["replicated"], true, "{answer}");
    let placed = steer_until(&addrs, &p, "a writes the job's steer entries", &logs, |k| !k.is_empty()).await;
    assert!(job_names(&b).is_empty(), "a standby registers nothing");

    a.proc.0.kill().unwrap();
    until(Duration::from_secs(10), "b takes over", &logs, || b.leads().then_some(()));
    until(Duration::from_secs(10), "b registers the kept job again", &logs, || {
        (job_names(&b) == ["perm"]).then_some(())
    });
    // The event file is written once per round of b's loop, and that round
    // goes on to place the job: the API can list it before the line lands.
    let restored = until(Duration::from_secs(10), "b logs the jobs it restored", &logs, || {
        b.events().into_iter().find(|e| e["kind"] == "jobs_restored")
    });
    assert_eq!(restored["details"]["restored"], serde_json::json!(["perm"]), "{restored}");
    // b places it as a did: the same entries, and they stay (not aged out
    // as entries of flows nobody reports would be).
    steer_until(&addrs, &p, "b holds a's steer entries", &logs, |k| k == placed.as_slice()).await;
    let flows = b.get("/api/v1/flows");
    assert!(flows.to_string().contains("perm"), "the placement names the job: {flows}");

    let answer = request(b.api, "DELETE", "/api/v1/jobs/perm", Some(SCHED), "");
    assert!(status_is(&answer, 200), "{answer}");
    assert_eq!(body_json(&answer)["replicated"], true, "{answer}");
    steer_until(&addrs, &p, "the job's entries go", &logs, |k| k.is_empty()).await;
    let c = controller_with(dir.path(), &topo_path, &url, "c", with);
    until(Duration::from_secs(60), "c stands by", &logs, || c.stands_by("b").then_some(()));
    b.proc.0.kill().unwrap();
    until(Duration::from_secs(10), "c takes over", &logs, || c.leads().then_some(()));
    until(Duration::from_secs(10), "c has read the kept jobs", &logs, || {
        c.events().into_iter().find(|e| e["kind"] == "jobs_restored")
    });
    assert!(job_names(&c).is_empty(), "a removed job stays removed: {:?}", job_names(&c));
    println!(
        "ha jobs: a job outlived two leaders' deaths and its removal stuck ({} steer entries)",
        placed.len()
    );
}

/// Polls the switches' steer entries every 50 ms until `done` holds, up to 10 s.
async fn steer_until(
    addrs: &[SocketAddr],
    p: &Pipeline,
    what: &str,
    logs: &dyn Fn() -> String,
    done: impl Fn(&[(usize, Key)]) -> bool,
) -> Vec<(usize, Key)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let keys = steer_keys(addrs, p).await;
        if done(&keys) {
            return keys;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for: {what}; steer entries {keys:?}\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `make bench-ha`: the takeover time after SIGKILL, over 10 kills, on an
/// idle served fabric (p50 / max printed, nothing asserted but a bound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: make bench-ha"]
async fn takeover_time_over_ten_kills() {
    let dir = tempfile::tempdir().unwrap();
    let Some((_etcd, url)) = etcd(dir.path(), "L2 controller high availability") else { return };
    let (topo, _, _) = fabric(dir.path(), "serve-hotspot.yaml");
    let _serve = spawn(
        env!("CARGO_BIN_EXE_metaroce"),
        &["sim", "serve", topo.to_str().unwrap()],
        &dir.path().join("serve.log"),
    );
    let logs = common::log_tails(dir.path(), &["serve", "a", "b", "c"], 150);
    let mut leader = controller(dir.path(), &topo, &url, "k0");
    until(Duration::from_secs(60), "k0 leads", &logs, || leader.leads().then_some(()));
    let mut times = vec![];
    for i in 1..=10 {
        let name = format!("k{i}");
        let standby = controller(dir.path(), &topo, &url, &name);
        let led = format!("k{}", i - 1);
        until(Duration::from_secs(60), "the next stands by", &logs, || standby.stands_by(&led).then_some(()));
        leader.proc.0.kill().unwrap();
        let killed = Instant::now();
        until(Duration::from_secs(10), "takeover within 10 s", &logs, || standby.leads().then_some(()));
        let took = killed.elapsed().as_secs_f64() * 1e3;
        println!("ha bench: kill {i}: primary again after {took:.0} ms");
        times.push(took);
        leader = standby;
    }
    times.sort_by(f64::total_cmp);
    println!(
        "ha bench: takeover after SIGKILL over {} kills (lease 1 s): p50 {:.0} ms, max {:.0} ms",
        times.len(),
        times[times.len() / 2],
        times[times.len() - 1]
    );
}

/// Bad input: etcd unreachable at start-up is an I/O failure (exit 3)
/// unless --ha-optional, which runs alone and says so; wrong --ha
/// arguments are usage errors (exit 2).
#[test]
fn ha_refuses_bad_input_and_an_unreachable_etcd() {
    const M22: &str = "topologies/mininet-2x2.yaml";
    let closed = format!("etcd://127.0.0.1:{}", free_port());
    let run = |extra: &[&str]| {
        let mut args = vec!["controller", "run", M22, "--duration", "1"];
        args.extend_from_slice(extra);
        common::metaroce(&args)
    };
    let cases: &[(&[&str], i32, &str)] = &[
        (&["--ha", "http://127.0.0.1:2379", "--ha-name", "a"], 2, "etcd://"),
        (&["--ha", "etcd://127.0.0.1", "--ha-name", "a"], 2, "HOST:PORT"),
        (&["--ha", "etcd://127.0.0.1:2379"], 2, "--ha-name"),
        (&["--ha-name", "a"], 2, "--ha"),
        (&["--ha", &closed, "--ha-name", "a"], 3, "cannot be reached"),
    ];
    for (extra, code, needle) in cases {
        let out = run(extra);
        let text = common::text(&out);
        assert_eq!(out.status.code(), Some(*code), "{extra:?}: {text}");
        assert!(text.contains(needle), "{extra:?} should name {needle:?}: {text}");
    }
    let out = run(&["--ha", &closed, "--ha-name", "a", "--ha-optional"]);
    let text = common::text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("running alone"), "{text}");
}
