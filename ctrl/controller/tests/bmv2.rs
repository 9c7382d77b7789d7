//! L3: the controller against four real BMv2 switches (`simple_switch_grpc`,
//! no interfaces needed). It must install the baseline that BMv2 accepts
//! (groups with weights, clone sessions, keyless defaults, the digest
//! subscription) and poll registers over BMv2's Thrift fallback. A job
//! registered through the job API must put its steer entries on the
//! switches, read back from BMv2 as they were written; removing the job
//! must take them away and leave the baseline. A restarted controller must
//! then find it all in place and write nothing. Skips, saying what is
//! missing, where BMv2 is absent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{http, wait_for, wait_for_why};
use metaroce_controller::daemon::{self, Config};
use metaroce_controller::mode::Mode;
use metaroce_controller::place::SteerHop;
use metaroce_controller::plan::{self, Overrides, Settings};
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::{Session, SessionConfig};
use metaroce_pipeline::{names, Entry, Key, Pipeline};
use serde_json::Value;

const SCHED: &str = "scheduler-token-for-the-bmv2-test";
const VIEW: &str = "viewer-token-for-the-bmv2-test-01";

/// One job of three flows: two queue pairs (`steer_flow`), one each way
/// between h1 and h3, and everything from h2 to h4 (`steer_pair`).
const JOB: &str = r#"{"name": "l3-job", "flows": [
    {"src": "h1", "dst": "h3", "sport": 49152, "qp": 17, "bytes": 1048576},
    {"src": "h3", "dst": "h1", "sport": 49153, "qp": 18, "bytes": 1048576},
    {"src": "h2", "dst": "h4", "bytes": 1048576}]}"#;

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn binary() -> Option<PathBuf> {
    let p = PathBuf::from(
        std::env::var("SIMPLE_SWITCH_GRPC").unwrap_or_else(|_| "/opt/p4/bin/simple_switch_grpc".into()),
    );
    p.exists().then_some(p)
}

/// Both steer tables of the switch at `addr`, read by a backup client
/// (a fresh, low election id): each entity as BMv2 returns it, with the
/// entry it parses to.
async fn steer_read(addr: SocketAddr, device_id: u64, p: &Pipeline) -> Vec<(p4::TableEntry, Entry)> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let mut cfg = SessionConfig::new(format!("http://{addr}"), device_id);
    cfg.election_id = u128::from(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 9 + 1);
    let session = Session::connect(cfg).await.unwrap();
    let mut out = Vec::new();
    for table in [names::STEER_FLOW, names::STEER_PAIR] {
        let table_id = p.info().tables.id_of(table).unwrap();
        let read = p4::Entity::from(p4::TableEntry { table_id, ..Default::default() });
        for entity in session.read(vec![read]).await.unwrap() {
            let Some(p4::entity::Entity::TableEntry(t)) = entity.entity.clone() else {
                panic!("{table}: read returned {entity:?}")
            };
            let entry = p.parse(&entity).unwrap().unwrap_or_else(|| panic!("{table}: {t:?} is not ours"));
            out.push((t, entry));
        }
    }
    out
}

/// A table entry as written or read, with its match fields in field order
/// (P4Runtime leaves their order to the server).
fn canonical(t: &p4::TableEntry) -> p4::TableEntry {
    let mut t = t.clone();
    t.r#match.sort_by_key(|m| m.field_id);
    t
}

/// The steer entries the controller's placement (`GET /api/v1/flows`)
/// asks of each switch, by switch name: one per steered hop of each flow.
fn planned_steer(flows: &Value) -> BTreeMap<String, BTreeMap<Key, Entry>> {
    let mut want: BTreeMap<String, BTreeMap<Key, Entry>> = BTreeMap::new();
    for f in flows["flows"].as_array().unwrap() {
        let key: metaroce_te::FlowKey = serde_json::from_value(f["flow"].clone()).unwrap();
        for hop in f["path"].as_array().unwrap().iter().filter(|h| h["steered"] == true) {
            let port = u16::try_from(hop["port"].as_u64().unwrap()).unwrap();
            let e = plan::steer_entry(
                &key,
                &SteerHop { port, nhop_id: plan::nhop_id(port), downstream: Vec::new() },
            );
            want.entry(hop["switch"].as_str().unwrap().to_owned()).or_default().insert(e.key(), e);
        }
    }
    want
}

/// One `simple_switch_grpc` on free ports, once its gRPC port accepts
/// connections. A switch that exits while starting (a port taken between
/// choosing it and binding it) is started again on other ports; one that
/// never listens fails the test saying so.
async fn start_bmv2(bin: &std::path::Path, id: u64) -> (Kill, u16, u16) {
    for _ in 0..3 {
        let (grpc, thrift) = (common::free_addr().port(), common::free_addr().port());
        let log = std::env::temp_dir().join(format!("metaroce-ctrl-bmv2-{grpc}.log"));
        let mut child = Kill(
            Command::new(bin)
                .args([
                    "--no-p4",
                    "--log-level",
                    "warn",
                    "--device-id",
                    &id.to_string(),
                    "--thrift-port",
                    &thrift.to_string(),
                ])
                .args(["--", "--grpc-server-addr", &format!("127.0.0.1:{grpc}"), "--cpu-port", "255"])
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).map(Stdio::from).unwrap_or_else(|_| Stdio::null()))
                .spawn()
                .unwrap(),
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = child.0.try_wait() {
                eprintln!(
                    "simple_switch_grpc {id} exited while starting ({status}): {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
                break;
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", grpc)).await.is_ok() {
                return (child, grpc, thrift);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.0.kill();
    }
    panic!("simple_switch_grpc {id} did not listen after 3 starts");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_installs_a_baseline_and_a_jobs_steer_entries_bmv2_accepts_and_restarts_without_writes() {
    let Some(bin) = binary() else {
        println!("skipped: simple_switch_grpc not found (set SIMPLE_SWITCH_GRPC)");
        return;
    };
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if repo.join("p4src/build/PENDING").is_file() {
        println!("skipped: p4src/build/ is not p4c's output of p4src/ yet (see p4src/build/PENDING)");
        return;
    }
    let p = common::pipeline();
    let mut procs = vec![];
    let mut ports = vec![];
    for id in 1..=4u64 {
        let (proc, grpc, thrift) = start_bmv2(&bin, id).await;
        procs.push(proc);
        ports.push((grpc, thrift));
    }
    let addrs: Vec<SocketAddr> =
        ports.iter().map(|&(grpc, _)| SocketAddr::from(([127, 0, 0, 1], grpc))).collect();
    let sw = |i: usize, name: &str, role: &str, extra: &str| {
        format!("  - {{name: {name}, role: {role}, device_id: {}, p4rt: \"127.0.0.1:{}\", thrift_port: {}{extra}}}\n", i + 1, ports[i].0, ports[i].1)
    };
    let yaml = format!(
        "name: bmv2-2x2\nfabric: {{flowlet_timeout: 5ms, queue_high: 40pkt, queue_low: 10pkt, ecn_threshold: 20pkt}}\n\
         switches:\n{}{}{}{}\
         hosts:\n  - {{name: h1, ip: 10.0.1.1, mac: \"02:00:00:00:01:01\", leaf: leaf1, port: 1}}\n\
         \x20 - {{name: h2, ip: 10.0.1.2, mac: \"02:00:00:00:01:02\", leaf: leaf1, port: 2}}\n\
         \x20 - {{name: h3, ip: 10.0.2.1, mac: \"02:00:00:00:02:01\", leaf: leaf2, port: 1}}\n\
         \x20 - {{name: h4, ip: 10.0.2.2, mac: \"02:00:00:00:02:02\", leaf: leaf2, port: 2}}\n\
         links:\n  - {{a: \"leaf1:3\", b: \"spine1:1\"}}\n  - {{a: \"leaf1:4\", b: \"spine2:1\"}}\n\
         \x20 - {{a: \"leaf2:3\", b: \"spine1:2\"}}\n  - {{a: \"leaf2:4\", b: \"spine2:2\"}}\n",
        sw(0, "leaf1", "leaf", ", subnet: 10.0.1.0/24"),
        sw(1, "leaf2", "leaf", ", subnet: 10.0.2.0/24"),
        sw(2, "spine1", "spine", ""),
        sw(3, "spine2", "spine", ""),
    );
    let topo = metaroce_topo::load_str(&yaml, "bmv2").unwrap();
    let routing = metaroce_topo::Routing::compute(&topo);
    let events = std::env::temp_dir().join(format!("metaroce-ctrl-bmv2-{}.jsonl", std::process::id()));
    let tokens = events.with_extension("tokens");
    std::fs::write(&tokens, format!("scheduler {SCHED}\nviewer {VIEW}\n")).unwrap();
    let config = |events: PathBuf| {
        let mut cfg = Config::new(topo.clone(), p.clone());
        cfg.mode = Mode::Act;
        cfg.events = Some(events);
        cfg.poll_interval = Duration::from_millis(200);
        cfg
    };
    // The baseline of each switch, as the plan assigns it against what the
    // switch holds, with the settings the daemon derives (the drain rule's
    // config included).
    let settings: Settings = config(events.clone()).core.settings;
    let baseline = |i: usize, got: &BTreeMap<Key, Entry>| {
        let none = Overrides::new();
        plan::assign(&plan::switch_plan(&topo, &routing, &none, &settings, i), got).unwrap()
    };
    let _ = std::fs::remove_file(&events);
    let listen = common::free_addr();
    let mut cfg = config(events.clone());
    cfg.listen = Some(listen);
    cfg.tokens = Some(tokens.clone());
    let (quit, quit_rx) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(daemon::run(cfg, async move {
        let _ = quit_rx.await;
    }));
    let p2 = p.clone();
    // Each look opens a session per switch: every 250 ms, not flat out,
    // so the looking does not crowd BMv2 while the controller programs it.
    wait_for_why("the baseline on every switch", 60, Duration::from_millis(250), || {
        let (p, addrs) = (p2.clone(), addrs.clone());
        let baseline = &baseline;
        async move {
            for (i, addr) in addrs.iter().enumerate() {
                // A BMv2 still starting does not answer yet: try again.
                let got = common::try_installed(*addr, i as u64 + 1, &p)
                    .await
                    .map_err(|e| format!("switch {}: cannot read it: {e}", i + 1))?;
                let want = baseline(i, &got);
                if got.len() < 5 || got != want {
                    let missing = want.keys().filter(|k| !got.contains_key(k)).count();
                    let differ = want.iter().filter(|(k, e)| got.get(k).is_some_and(|g| g != *e)).count();
                    let extra = got.keys().filter(|k| !want.contains_key(k)).count();
                    return Err(format!(
                        "switch {}: holds {} entries; {missing} missing, {differ} different, {extra} extra",
                        i + 1,
                        got.len()
                    ));
                }
            }
            Ok(())
        }
    })
    .await;

    // A job: the controller places its flows and pins them with steer entries.
    let (status, answer) = http(listen, "POST", "/api/v1/jobs", SCHED, JOB).await;
    assert_eq!(status, 201, "{answer}");
    let (status, flows) = http(listen, "GET", "/api/v1/flows", VIEW, "").await;
    assert_eq!(status, 200, "{flows}");
    let want = planned_steer(&flows);
    let planned: Vec<&Entry> = want.values().flat_map(BTreeMap::values).collect();
    assert_eq!(
        planned.iter().filter(|e| matches!(e, Entry::SteerFlow { .. })).count(),
        2,
        "a steer_flow entry per queue pair: {flows}"
    );
    assert_eq!(
        planned.iter().filter(|e| matches!(e, Entry::SteerPair { .. })).count(),
        1,
        "a steer_pair entry for h2 -> h4: {flows}"
    );
    let steer_of = |i: usize| want.get(&topo.switches[i].name).cloned().unwrap_or_default();
    let p2 = p.clone();
    wait_for("the job's steer entries on the switches", 10, || {
        let (p, addrs) = (p2.clone(), addrs.clone());
        let steer_of = &steer_of;
        async move {
            for (i, addr) in addrs.iter().enumerate() {
                let got: BTreeMap<Key, Entry> = steer_read(*addr, i as u64 + 1, &p)
                    .await
                    .into_iter()
                    .map(|(_, e)| (e.key(), e))
                    .collect();
                if got != steer_of(i) {
                    return false;
                }
            }
            true
        }
    })
    .await;
    // Read back as written: each entity BMv2 returns is the one the
    // controller's pipeline builds for the planned entry.
    for (i, addr) in addrs.iter().enumerate() {
        for (read, entry) in steer_read(*addr, i as u64 + 1, &p).await {
            let Some(p4::entity::Entity::TableEntry(written)) = p.entity(&entry).unwrap().entity else {
                panic!("{entry:?} is not a table entry")
            };
            assert_eq!(canonical(&read), canonical(&written), "switch {}", topo.switches[i].name);
        }
        // Everything else the switch holds is still the baseline.
        let got = common::installed(*addr, i as u64 + 1, &p).await;
        let mut without: BTreeMap<Key, Entry> = got.clone();
        without.retain(|_, e| !matches!(e, Entry::SteerFlow { .. } | Entry::SteerPair { .. }));
        assert_eq!(without, baseline(i, &without), "switch {}", topo.switches[i].name);
    }

    // The job goes: so do its entries, and the switches hold the baseline again.
    let (status, answer) = http(listen, "DELETE", "/api/v1/jobs/l3-job", SCHED, "").await;
    assert_eq!(status, 200, "{answer}");
    let p2 = p.clone();
    wait_for("the job's steer entries removed", 10, || {
        let (p, addrs) = (p2.clone(), addrs.clone());
        async move {
            for (i, addr) in addrs.iter().enumerate() {
                if !steer_read(*addr, i as u64 + 1, &p).await.is_empty() {
                    return false;
                }
            }
            true
        }
    })
    .await;
    for (i, addr) in addrs.iter().enumerate() {
        let got = common::installed(*addr, i as u64 + 1, &p).await;
        assert_eq!(got, baseline(i, &got), "switch {}", topo.switches[i].name);
    }
    let _ = quit.send(());
    controller.await.unwrap().unwrap();
    let log = std::fs::read_to_string(&events).unwrap();
    assert_eq!(log.matches("\"kind\":\"switch_up\"").count(), 4, "{log}");
    assert!(!log.contains("write_failed"), "BMv2 refused a write:\n{log}");

    let events2 = events.with_extension("2.jsonl");
    let _ = std::fs::remove_file(&events2);
    daemon::run(config(events2.clone()), tokio::time::sleep(Duration::from_secs(3))).await.unwrap();
    let log = std::fs::read_to_string(&events2).unwrap();
    assert_eq!(log.matches("\"kind\":\"switch_up\"").count(), 4, "{log}");
    let writes: Vec<&str> = log.lines().filter(|l| l.contains("\"kind\":\"write")).collect();
    assert!(writes.is_empty(), "a restarted controller must write nothing: {writes:?}");
}
