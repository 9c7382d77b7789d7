//! The L2 end-to-end test: `metaroce sim serve` plays a hot spot on the
//! Mininet-sized fabric while the real `metaroce controller` binary runs
//! against it in act mode, both as users start them. Traffic builds a hot
//! spot; digests and INT reports reach the controller; the controller
//! derates the hot uplink in the upstream group; the served switch holds the
//! new weights; new flowlets then follow them.
//!
//! The fabric is a copy of `topologies/mininet-2x2.yaml` on free ports.

// Tests may panic on what they set up themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::repo;
use common::serve::{both_logs, controller, fabric, free_port, get, spawn, Proc};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use metaroce_p4rt::{Session, SessionConfig};
use metaroce_pipeline::{Entry, Key, Pipeline};

/// `(port, weight)` of a group's members, by port.
type Weights = Vec<(u16, u32)>;

fn pipeline() -> Pipeline {
    let dir = repo().join("p4src/build");
    Pipeline::load(&dir.join("main.p4info.txtpb"), &dir.join("main.json")).unwrap()
}

/// Everything of ours a served switch holds, read by a backup client.
async fn installed(addr: SocketAddr, device_id: u64, p: &Pipeline) -> BTreeMap<Key, Entry> {
    let mut cfg = SessionConfig::new(format!("http://{addr}"), device_id);
    cfg.election_id = 1;
    let Ok(s) = Session::connect(cfg).await else { return BTreeMap::new() };
    p.read_installed(&s).await.map(|i| i.entries).unwrap_or_default()
}

/// New flowlets per egress port of a served switch (the program's
/// `new_flowlets` counter).
async fn new_flowlets(addr: SocketAddr, device_id: u64, p: &Pipeline) -> BTreeMap<i64, i64> {
    use metaroce_p4rt::proto::p4::v1::entity::Entity as E;
    let mut cfg = SessionConfig::new(format!("http://{addr}"), device_id);
    cfg.election_id = 1;
    let Ok(s) = Session::connect(cfg).await else { return BTreeMap::new() };
    let req = p.counter_read(metaroce_pipeline::Counter::NewFlowlets).unwrap();
    let mut out = BTreeMap::new();
    for e in s.read(vec![req]).await.unwrap_or_default() {
        if let Some(E::CounterEntry(c)) = e.entity {
            let (Some(i), Some(d)) = (c.index, c.data) else { continue };
            out.insert(i.index, d.packet_count);
        }
    }
    out
}

/// `(port, weight)` of the group a switch routes `prefix/len` through.
fn weights_toward(st: &BTreeMap<Key, Entry>, prefix: [u8; 4], len: u8) -> Option<Vec<(u16, u32)>> {
    metaroce_pipeline::route_weights(st, prefix.into(), len)
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `metaroce host export` for h1 on a fixture sysfs tree, on a free port
/// written into the topology as h1's `exporter`.
fn host_exporter(dir: &Path, topo: &Path) -> Proc {
    let root = dir.join("sysfs");
    let out = common::metaroce(&["host", "fixture", root.to_str().unwrap()]);
    assert!(out.status.success(), "{}", common::text(&out));
    let addr = format!("127.0.0.1:{}", free_port());
    let text = std::fs::read_to_string(topo).unwrap();
    let h1 = "{name: h1, ip: 10.0.1.1, mac: \"02:00:00:00:01:01\", leaf: leaf1, port: 1";
    assert!(text.contains(h1), "h1 as in mininet-2x2.yaml");
    std::fs::write(topo, text.replace(h1, &format!("{h1}, exporter: \"{addr}\""))).unwrap();
    let args = ["host", "export", "--listen", &addr, "--sysfs-root", root.to_str().unwrap(), "--host", "h1"];
    spawn(&[&args[..], &["--interval", "200ms"]].concat(), &dir.join("exporter.log"))
}

/// The metric names the README's metrics table and the Grafana dashboard
/// name: each must have a sample in a served run's scrape.
fn every_documented_metric_has_samples(scrape: &str) {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let table = readme.split("### Metrics").nth(1).and_then(|t| t.split("\n#").next()).unwrap_or("");
    let mut names: Vec<String> = table
        .split('`')
        .filter(|w| w.starts_with("metaroce_") && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(str::to_owned)
        .collect();
    assert!(names.len() >= 15, "the README's metrics table lists the families: {names:?}");
    let dash = std::fs::read_to_string(repo().join("ctrl/controller/grafana/metaroce.json")).unwrap();
    for expr in dash.split("\"expr\": \"").skip(1) {
        let expr = expr.split('"').next().unwrap_or("");
        for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("metaroce_") {
                names.push(word.to_owned());
            }
        }
    }
    names.sort();
    names.dedup();
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !scrape.lines().any(|l| !l.starts_with('#') && l.starts_with(n.as_str())))
        .collect();
    assert!(missing.is_empty(), "no samples for {missing:?} in\n{scrape}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_reroutes_a_hot_spot_on_the_served_fabric() {
    let dir = tempfile::tempdir().unwrap();
    let (topo, sc, addrs) = fabric(dir.path(), "serve-hotspot.yaml");
    let (topo_s, sc_s) = (topo.to_str().unwrap(), sc.to_str().unwrap());
    // h1 runs a counter exporter (over a fixture sysfs tree), so the host
    // metrics have samples too.
    let _exporter = host_exporter(dir.path(), &topo);
    let out = dir.path().join("report");
    let serve_log = dir.path().join("serve.log");
    let mut serve_proc =
        spawn(&["sim", "serve", topo_s, sc_s, "-o", out.to_str().unwrap(), "--wait", "120"], &serve_log);
    // A long hold-down keeps derated weights in place long enough to be read.
    let ctl = controller(
        dir.path(),
        topo_s,
        // The register audit every 500 ms with the ECN counters in each,
        // not every 2 s and 10 s, so that the scrape below sees the marks soon.
        &[
            "--hold-down-ms",
            "3000",
            "--hold-up-ms",
            "0.5",
            "--host-scrape-ms",
            "200",
            "--audit-ms",
            "500",
            "--ecn-ms",
            "500",
        ],
    );
    let (api, events, ctl_log) = (ctl.api, ctl.events.clone(), ctl.log.clone());
    let p = pipeline();
    let logs = || both_logs(&serve_log, &ctl_log);
    // Watch leaf1's group toward leaf2 (10.0.2.0/24) and leaf2's toward leaf1.
    let mut seen: Vec<(u64, Vec<(u16, u32)>)> = vec![];
    // Per switch: its new-flowlet counts when it first held uneven weights.
    let mut at_derate: BTreeMap<u64, (Weights, BTreeMap<i64, i64>)> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(240);
    // Derated weights stay 3 s (the hold-down) after the last hot spot:
    // after the traffic, look that long for one not seen yet.
    let mut done_at: Option<Instant> = None;
    loop {
        assert!(Instant::now() < deadline, "traffic did not finish in time\n{}", logs());
        for (i, prefix) in [(0usize, [10, 0, 2, 0]), (1, [10, 0, 1, 0])] {
            let st = installed(addrs[i], i as u64 + 1, &p).await;
            let dev = i as u64 + 1;
            if let Some(w) = weights_toward(&st, prefix, 24) {
                if w.iter().any(|x| x.1 != w[0].1) && !at_derate.contains_key(&dev) {
                    at_derate.insert(dev, (w.clone(), new_flowlets(addrs[i], dev, &p).await));
                }
                if !seen.iter().any(|(d, x)| *d == dev && *x == w) {
                    seen.push((dev, w));
                }
            }
        }
        if let Ok(Some(status)) = serve_proc.0.try_wait() {
            panic!("serve exited early ({status})\n{}", logs());
        }
        if done_at.is_none()
            && std::fs::read_to_string(&serve_log).unwrap_or_default().contains("traffic done")
        {
            done_at = Some(Instant::now());
        }
        if done_at.is_some_and(|t| !at_derate.is_empty() || t.elapsed() > Duration::from_secs(2)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let serve = std::fs::read_to_string(&serve_log).unwrap();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let run = &report["modes"][0];
    assert_eq!(run["unfinished_messages"], 0, "every message of the scenario arrives\n{}", logs());
    // "serve: done at … ms simulated: … N digests and M packet-ins to the controller"
    let digests: u64 = serve
        .lines()
        .find(|l| l.starts_with("serve: done at"))
        .and_then(|l| l.split(" digests").next()?.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0);
    assert!(digests >= 1, "the switches raised threshold digests:\n{serve}");

    // The ECN-mark counters are read by the audits: wait for one after the marks.
    let mut metrics = get(api, "/metrics");
    let ecn_deadline = Instant::now() + Duration::from_secs(10);
    while metric(&metrics, "metaroce_ecn_marks_total") < 1.0 && Instant::now() < ecn_deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        metrics = get(api, "/metrics");
    }
    every_documented_metric_has_samples(&metrics);
    assert!(metric(&metrics, "metaroce_ecn_marks_total") >= 1.0, "the switches' ECN marks\n{metrics}");
    assert!(
        metric(&metrics, "metaroce_digests_total") >= 1.0,
        "threshold digests reach the controller\n{metrics}"
    );
    assert!(
        metric(&metrics, "metaroce_int_reports_total") >= 1.0,
        "INT reports reach the controller\n{metrics}"
    );
    assert!(
        metric(&metrics, "metaroce_reroutes_total{reason=\"congestion\"}") >= 1.0,
        "the controller rerouted around the hot spot\n{metrics}\n{}",
        logs()
    );
    // The controller's derate (and restore) events name the weights it
    // wrote; the served switches held exactly those.
    let changes: Vec<serde_json::Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| (e["kind"] == "derate" || e["kind"] == "restore") && e["details"]["applied"] == true)
        .collect();
    assert!(changes.iter().any(|e| e["kind"] == "derate"), "a derate event\n{}", logs());
    let uneven: Vec<&(u64, Vec<(u16, u32)>)> =
        seen.iter().filter(|(_, w)| w.iter().any(|x| x.1 != w[0].1)).collect();
    assert!(!uneven.is_empty(), "a served switch held derated weights; saw {seen:?}\n{}", logs());
    let written: Vec<Vec<(u16, u32)>> = changes
        .iter()
        .map(|e| {
            let mut w: Vec<(u16, u32)> = e["details"]["new"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| (m["port"].as_u64().unwrap() as u16, m["weight"].as_u64().unwrap() as u32))
                .collect();
            w.sort_unstable();
            w
        })
        .collect();
    // Traffic moved: after a switch first held derated weights, new
    // flowlets left on the member the controller raised.
    assert!(!at_derate.is_empty());
    for (dev, (w, before)) in &at_derate {
        let after = new_flowlets(addrs[*dev as usize - 1], *dev, &p).await;
        let delta = |port: u16| {
            after.get(&i64::from(port)).unwrap_or(&0) - before.get(&i64::from(port)).unwrap_or(&0)
        };
        let raised = w.iter().max_by_key(|x| x.1).map(|x| x.0).unwrap();
        let moved: Vec<(u16, i64)> = w.iter().map(|x| (x.0, delta(x.0))).collect();
        eprintln!("switch {dev}: first derated weights {w:?}; new flowlets per port since: {moved:?}");
        assert!(
            delta(raised) >= 1,
            "new flowlets took raised port {raised} of switch {dev}: {moved:?}\n{}",
            logs()
        );
    }
    assert!(
        uneven.iter().all(|(_, w)| written.contains(w)),
        "every uneven group the switches held is one the controller wrote: held {uneven:?}, wrote {written:?}"
    );
}

/// A served link failure: serve plays the link monitor and reports it to
/// the controller's API the moment it happens; the controller routes
/// around it at once (leaf1 marks the port down and stops using it) and
/// every message still arrives (go-back-N resends what the dead link ate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_link_failure_reaches_the_controller_and_traffic_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let (topo, sc, addrs) = fabric(dir.path(), "serve-link-failure.yaml");
    let (topo_s, sc_s) = (topo.to_str().unwrap(), sc.to_str().unwrap());
    let tokens = dir.path().join("tokens.txt");
    // The controller's own tokens file, as the README writes one: serve
    // takes its first operator token, past the scheduler's.
    let lines = "viewer vvvvvvvvvvvvvvvvvvvvvvvv\nscheduler ssssssssssssssssssssssss\noperator 0123456789abcdef0123456789abcdef\n";
    std::fs::write(&tokens, lines).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let ctl = controller(dir.path(), topo_s, &["--tokens", tokens.to_str().unwrap()]);
    let (api, events, ctl_log) = (ctl.api, ctl.events.clone(), ctl.log.clone());
    let out = dir.path().join("report");
    let serve_log = dir.path().join("serve.log");
    let url = format!("http://{api}");
    let mut serve_proc = spawn(
        &[
            "sim",
            "serve",
            topo_s,
            sc_s,
            "-o",
            out.to_str().unwrap(),
            "--wait",
            "120",
            "--exit-when-done",
            "--controller-api",
            &url,
            "--token-file",
            tokens.to_str().unwrap(),
        ],
        &serve_log,
    );
    let logs = || both_logs(&serve_log, &ctl_log);
    // leaf1 must mark port 3 down and route toward leaf2 over spine2
    // (port 4) only, while the traffic still runs.
    let p = pipeline();
    let mut rerouted = false;
    let deadline = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(st) = serve_proc.0.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "serve did not finish in time\n{}", logs());
        if !rerouted {
            let st = installed(addrs[0], 1, &p).await;
            rerouted = st.contains_key(&Key::PortDown(3)) && routes_off_port3(&st);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "serve: {status}\n{}", logs());
    let serve = std::fs::read_to_string(&serve_log).unwrap();
    assert!(
        serve.lines().any(|l| l.starts_with("serve: link leaf1:3 down at 130.000 ms simulated; reported")),
        "serve reported the failure when it happened\n{}",
        logs()
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let run = &report["modes"][0];
    assert_eq!(run["unfinished_messages"], 0, "every message arrives\n{}", logs());
    let log: Vec<serde_json::Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        log.iter().any(|e| e["kind"] == "link_down" && e["details"]["a"] == "leaf1:3"),
        "the controller took the link down\n{}",
        logs()
    );
    assert!(
        log.iter().any(|e| e["kind"] == "api"
            && e["details"]["endpoint"] == "links"
            && e["details"]["role"] == "operator"),
        "the report is audited with the operator role\n{}",
        logs()
    );
    assert!(rerouted, "leaf1 marked port 3 down and routed toward leaf2 off it\n{}", logs());
}

/// leaf1's route toward leaf2 (10.0.2.0/24) goes over port 4 only.
fn routes_off_port3(st: &BTreeMap<Key, Entry>) -> bool {
    match st.get(&Key::Route(u32::from_be_bytes([10, 0, 2, 0]), 24)) {
        Some(Entry::Route { target: metaroce_pipeline::RouteTarget::Nhop(h), .. }) => {
            matches!(st.get(&Key::Nhop(*h)), Some(Entry::Nhop { port: 4, .. }))
        }
        Some(_) => weights_toward(st, [10, 0, 2, 0], 24).is_some_and(|w| w.iter().all(|x| x.0 == 4)),
        None => false,
    }
}

/// Bad input: an exit code that says what kind, and a message that says what.
#[test]
fn serve_refuses_bad_input_before_listening() {
    const M22: &str = "topologies/mininet-2x2.yaml";
    const API: &str = "--controller-api";
    // (arguments after `sim serve`, exit code, what stderr names)
    let cases: &[(&[&str], i32, &str)] = &[
        (&["no/such/fabric.yaml"], 3, "cannot read topology file"),
        (&[M22, "--dilation", "0"], 2, "--dilation"),
        (&[M22, "--p4info", "p4src/build/main.p4info.txtpb"], 2, "give both"),
        (&[M22, "--p4info", "no/such.txtpb", "--device-config", "p4src/build/main.json"], 3, "no/such.txtpb"),
        (&[M22, "--dilation", "1e30"], 2, "--dilation"),
        (
            &["topologies/leaf-spine-4x4.yaml", "scenarios/serve-hotspot.yaml"],
            2,
            "serve the scenario's topology",
        ),
        (&["topologies/leaf-spine-4x4.yaml", "scenarios/link-failure.yaml"], 1, "POST /api/v1/links"),
        (&[M22, API, "http://127.0.0.1:9"], 2, "--token-file"),
        (&[M22, API, "https://127.0.0.1:9", "--token-file", "Cargo.toml"], 2, "plain http"),
        (&[M22, API, "http://127.0.0.1:9", "--token-file", "no/such/tokens"], 3, "cannot read token file"),
        (
            &[
                M22,
                "--p4info",
                "ctrl/p4rt/tests/data/test.p4info.txt",
                "--device-config",
                "p4src/build/main.json",
            ],
            1,
            "no table named \"MetaroceIngress.routing.ipv4_lpm\"",
        ),
    ];
    for (args, code, needle) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_metaroce"))
            .args(["sim", "serve"])
            .args(*args)
            .current_dir(repo())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?} should name {needle:?}: {err}");
    }
}
