//! L2 end to end, flow placement: `metaroce sim serve` plays
//! `scenarios/serve-placement.yaml` (four flows between the leaves, ten
//! iterations each) while the real `metaroce controller` runs against it in
//! act mode. Announced: a scheduler registers the job before the traffic;
//! the served leaves hold one steer entry per flow, one flow per uplink, and
//! the served report shows the uplinks' bytes balanced. Unannounced: the
//! served switches' large-flow detector reports the flows, the controller
//! places them, and the two flows leaving each leaf are split over its
//! uplinks with flow steer entries. The drain rule is on, so those moves
//! land only after the controller has learnt each flow's `qp_pair` from
//! the twins' pairing digests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::repo;
use common::serve::{self, fabric, spawn, Proc};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use metaroce_p4rt::{Session, SessionConfig};
use metaroce_pipeline::{Entry, Key, Pipeline};

const SCHED: &str = "scheduler-token-of-the-serve-test";

fn pipeline() -> Pipeline {
    let dir = repo().join("p4src/build");
    Pipeline::load(&dir.join("main.p4info.txtpb"), &dir.join("main.json")).unwrap()
}

async fn installed(addr: SocketAddr, device_id: u64, p: &Pipeline) -> BTreeMap<Key, Entry> {
    let mut cfg = SessionConfig::new(format!("http://{addr}"), device_id);
    cfg.election_id = 1;
    let Ok(s) = Session::connect(cfg).await else { return BTreeMap::new() };
    p.read_installed(&s).await.map(|i| i.entries).unwrap_or_default()
}

/// The steer entries a switch holds: (flow kind, src, dst) → port.
fn steers(st: &BTreeMap<Key, Entry>) -> Vec<(&'static str, [u8; 4], [u8; 4], u16)> {
    st.values()
        .filter_map(|e| match e {
            Entry::SteerPair { src, dst, port, .. } => Some(("pair", src.octets(), dst.octets(), *port)),
            Entry::SteerFlow { flow, port, .. } => {
                Some(("flow", flow.src.octets(), flow.dst.octets(), *port))
            }
            _ => None,
        })
        .collect()
}

fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> String {
    serve::request(addr, method, path, Some(SCHED), body)
}

struct Run {
    _ctl: Proc,
    api: SocketAddr,
    ctl_log: PathBuf,
    events: PathBuf,
    dir: tempfile::TempDir,
    topo: PathBuf,
    sc: PathBuf,
    addrs: Vec<SocketAddr>,
}

/// The controller in act mode with a scheduler token, its API address read from its log.
fn controller() -> Run {
    let dir = tempfile::tempdir().unwrap();
    let (topo, sc, addrs) = fabric(dir.path(), "serve-placement.yaml");
    let tokens = dir.path().join("tokens.txt");
    std::fs::write(&tokens, format!("scheduler {SCHED}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let topo_s = topo.to_str().unwrap().to_owned();
    let tokens_s = tokens.to_str().unwrap().to_owned();
    let ctl = serve::controller(dir.path(), &topo_s, &["--tokens", &tokens_s, "--flow-idle-ms", "5000"]);
    let (proc, api, ctl_log, events) = (ctl.proc, ctl.api, ctl.log, ctl.events);
    Run { _ctl: proc, api, ctl_log, events, dir, topo, sc, addrs }
}

impl Run {
    fn logs(&self, serve: &Path) -> String {
        format!(
            "--- serve\n{}\n--- controller\n{}",
            std::fs::read_to_string(serve).unwrap_or_default(),
            std::fs::read_to_string(&self.ctl_log).unwrap_or_default()
        )
    }

    /// Serves the scenario until its traffic is done; the steer entries
    /// the leaves held meanwhile (the last non-empty read of each), and the report.
    async fn serve(&self) -> (Vec<Vec<(&'static str, [u8; 4], [u8; 4], u16)>>, serde_json::Value, PathBuf) {
        let (held, _, report, log) = self.serve_with_pairs().await;
        (held, report, log)
    }

    /// [`Run::serve`], and the most `qp_pair` entries each leaf held.
    async fn serve_with_pairs(
        &self,
    ) -> (Vec<Vec<(&'static str, [u8; 4], [u8; 4], u16)>>, Vec<usize>, serde_json::Value, PathBuf) {
        let out = self.dir.path().join("report");
        let log = self.dir.path().join("serve.log");
        let (topo, sc) = (self.topo.to_str().unwrap(), self.sc.to_str().unwrap());
        let args =
            ["sim", "serve", topo, sc, "-o", out.to_str().unwrap(), "--wait", "120", "--exit-when-done"];
        let mut serve = spawn(&args, &log);
        let p = pipeline();
        let mut held = vec![Vec::new(), Vec::new()];
        let mut pairs = vec![0, 0];
        let deadline = Instant::now() + Duration::from_secs(240);
        let status = loop {
            if let Some(st) = serve.0.try_wait().unwrap() {
                break st;
            }
            assert!(Instant::now() < deadline, "serve did not finish in time\n{}", self.logs(&log));
            for (i, h) in held.iter_mut().enumerate() {
                let all = installed(self.addrs[i], i as u64 + 1, &p).await;
                pairs[i] = pairs[i].max(all.values().filter(|e| matches!(e, Entry::QpPair { .. })).count());
                let st = steers(&all);
                if st.len() >= h.len() && !st.is_empty() {
                    *h = st;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(status.success(), "serve: {status}\n{}", self.logs(&log));
        let report =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
        (held, pairs, report, log)
    }
}

/// The imbalance (max / mean) of the leaf uplinks' bytes in a served report.
fn uplink_imbalance(report: &serde_json::Value) -> f64 {
    report["modes"][0]["utilization"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["tier"] == "leaf→spine")
        .and_then(|u| u["imbalance"].as_f64())
        .unwrap()
}

/// Each leaf steers its two outgoing flows to different uplinks.
fn split(held: &[(&str, [u8; 4], [u8; 4], u16)], kind: &str) -> bool {
    let ports: std::collections::BTreeSet<u16> = held.iter().filter(|h| h.0 == kind).map(|h| h.3).collect();
    held.iter().filter(|h| h.0 == kind).count() == 2 && ports.len() == 2
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announced_job_is_placed_before_it_starts_and_balances_the_uplinks() {
    let run = controller();
    let body = r#"{"name": "perm", "pattern": "permutation", "hosts": ["h1", "h2", "h3", "h4"], "shift": 2, "bytes": 262144}"#;
    let answer = http(run.api, "POST", "/api/v1/jobs", body);
    assert!(answer.starts_with("HTTP/1.1 201") || answer.starts_with("HTTP/1.0 201"), "{answer}");
    let (held, report, log) = run.serve().await;
    for (leaf, h) in held.iter().enumerate() {
        assert!(
            split(h, "pair"),
            "leaf{} split its two host pairs over its uplinks: {h:?}\n{}",
            leaf + 1,
            run.logs(&log)
        );
    }
    let run0 = &report["modes"][0];
    assert_eq!(run0["unfinished_messages"], 0, "every message arrives\n{}", run.logs(&log));
    let imbalance = uplink_imbalance(&report);
    eprintln!(
        "announced: leaf uplink imbalance (max/mean bytes) {imbalance:.3}; steered flowlets {}",
        run0["steered_flowlets"]
    );
    assert!(imbalance <= 1.02, "one flow per uplink gives equal bytes: {imbalance}\n{report:#}");
    let events = std::fs::read_to_string(&run.events).unwrap();
    assert!(events.contains("\"kind\":\"job_registered\""), "{events}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unannounced_elephants_are_split_after_the_switches_report_them() {
    let run = controller();
    let (held, pairs, report, log) = run.serve_with_pairs().await;
    // The drain rule is on (the topology's NICs need order): a flow moves
    // only once its leaf sees its ACKs, which takes the pair the
    // controller learns from the twins' pairing digests.
    for (leaf, n) in pairs.iter().enumerate() {
        assert!(*n >= 2, "leaf{} learnt the qp_pair of its two elephants: {n}\n{}", leaf + 1, run.logs(&log));
    }
    for (leaf, h) in held.iter().enumerate() {
        assert!(
            split(h, "flow"),
            "leaf{} split its two elephants over its uplinks: {h:?}\n{}",
            leaf + 1,
            run.logs(&log)
        );
    }
    let run0 = &report["modes"][0];
    assert_eq!(run0["unfinished_messages"], 0, "every message arrives\n{}", run.logs(&log));
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&run.events)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let placed = events
        .iter()
        .filter(|e| {
            e["kind"] == "flow_move"
                && e["details"]["reason"] == "new"
                && e["details"]["flow"]["kind"] == "flow"
        })
        .count();
    assert!(placed >= 4, "the four reported flows were placed: {placed}\n{}", run.logs(&log));
    let imbalance = uplink_imbalance(&report);
    eprintln!(
        "unannounced: leaf uplink imbalance (max/mean bytes) {imbalance:.3}; steered flowlets {}",
        run0["steered_flowlets"]
    );
    // The first iteration runs before any report; the nine after it are placed.
    assert!(imbalance <= 1.15, "uplinks near balance once placed: {imbalance}\n{report:#}");
}
