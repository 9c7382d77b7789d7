//! L2: the job API against the controller daemon and in-process
//! P4Runtime switches on 127.0.0.1. A scheduler registers a job, the
//! controller places it before answering and lists it with its placement;
//! bad bodies are refused with every problem; viewers cannot register and
//! schedulers can do nothing else; a removed job's placement goes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::rig::{start, start_with, tempfile_path, topology, Running, OPER, SCHED, VIEW};
use common::{http, installed, pipeline, wait_for};
use metaroce_controller::daemon::{self, Config};
use metaroce_controller::mode::Mode;
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_pipeline::{Entry, Key};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

const MOE: &str = r#"{"name": "moe-7", "pattern": "all-to-all", "hosts": ["h1", "h3"], "bytes": 1048576, "period_ms": 200}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_job_is_placed_listed_and_removed() {
    let r = start(Mode::Act, "place").await;
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, MOE).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["job"]["name"], "moe-7");
    assert_eq!(v["job"]["flows"], 2);
    assert_eq!(v["placement"]["moves"]["new"], 2, "{v}");
    assert_eq!(v["placement"]["applied"], true);
    // Listed at once: the registration publishes the status before answering.
    let (status, jobs) = http(r.listen, "GET", "/api/v1/jobs", VIEW, "").await;
    assert_eq!((status, jobs["jobs"][0]["name"].clone()), (200, "moe-7".into()), "{jobs}");
    assert_eq!(jobs["jobs"][0]["hosts"], serde_json::json!(["h1", "h3"]));
    let (_, flows) = http(r.listen, "GET", "/api/v1/flows", VIEW, "").await;
    assert_eq!(flows["placed"], 2, "{flows}");
    assert_eq!(flows["applied"], true);
    let listed = flows["flows"].as_array().unwrap();
    assert!(listed.iter().all(|f| f["job"] == "moe-7"), "{flows}");
    assert!(listed.iter().all(|f| f["incast"].is_null()), "an All-to-All is no incast: {flows}");
    // Each flow crosses a leaf, a spine and the other leaf, steered where the leaf has a choice.
    for f in listed {
        let path = f["path"].as_array().unwrap();
        assert_eq!(path.len(), 2, "{f}");
        assert_eq!(path[0]["steered"], true, "{f}");
        assert!(path[0]["port"] == 3 || path[0]["port"] == 4, "{f}");
    }
    // The event log has each move with its reason.
    let (_, events) = http(r.listen, "GET", "/api/v1/events?limit=1000", VIEW, "").await;
    let moves: Vec<&Value> =
        events["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "flow_move").collect();
    assert_eq!(moves.len(), 2, "{events}");
    assert!(moves.iter().all(|m| m["details"]["reason"] == "new" && m["details"]["job"] == "moe-7"));
    let (_, metrics) = http_text(r.listen, "/metrics", VIEW).await;
    assert!(metrics.contains("metaroce_flow_moves_total{reason=\"new\"} 2"), "{metrics}");
    assert!(metrics.contains("metaroce_steered_flows 2"), "{metrics}");
    assert!(metrics.contains("metaroce_jobs 1"), "{metrics}");

    // The leaves hold the steer entries the placement lists.
    let p = pipeline();
    for (leaf, (src, dst)) in [(0usize, ([10, 0, 1, 1], [10, 0, 2, 1])), (1, ([10, 0, 2, 1], [10, 0, 1, 1]))]
    {
        let want = listed
            .iter()
            .find(|f| f["flow"]["src"] == Ipv4Addr::from(src).to_string())
            .map(|f| f["path"][0]["port"].as_u64().unwrap() as u16)
            .unwrap();
        wait_for("the steer entry on the leaf", 15, || async {
            steer_pair(&installed(r.addrs[leaf], leaf as u64 + 1, &p).await, src, dst) == Some(want)
        })
        .await;
    }
    // The spines have no choice toward a leaf: no entry there.
    for spine in [2usize, 3] {
        let st = installed(r.addrs[spine], spine as u64 + 1, &p).await;
        assert!(!st.keys().any(|k| matches!(k, Key::SteerPair(..) | Key::SteerFlow(_))), "{st:?}");
    }

    // The name is taken now (a conflict with what is registered: 409); the
    // same flows under another name are a bad body (400).
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, MOE).await;
    assert_eq!(status, 409, "{v}");
    assert!(v["problems"][0]["message"].as_str().unwrap().contains("already registered"), "{v}");
    let again = MOE.replace("moe-7", "moe-8");
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, &again).await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["problems"].as_array().unwrap().len(), 2, "{v}");
    assert!(v["problems"][0]["message"].as_str().unwrap().contains("already owned by job \"moe-7\""), "{v}");

    let (status, v) = http(r.listen, "DELETE", "/api/v1/jobs/moe-7", SCHED, "").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["placement"]["moves"]["ended"], 2, "{v}");
    let (status, _) = http(r.listen, "DELETE", "/api/v1/jobs/moe-7", SCHED, "").await;
    assert_eq!(status, 404);
    wait_for("the steer entries to go", 15, || async {
        let a = installed(r.addrs[0], 1, &p).await;
        let b = installed(r.addrs[1], 2, &p).await;
        steer_pair(&a, [10, 0, 1, 1], [10, 0, 2, 1]).is_none()
            && steer_pair(&b, [10, 0, 2, 1], [10, 0, 1, 1]).is_none()
    })
    .await;
    let (_, jobs) = http(r.listen, "GET", "/api/v1/jobs", VIEW, "").await;
    assert_eq!(jobs["jobs"], serde_json::json!([]));
    let (_, flows) = http(r.listen, "GET", "/api/v1/flows", VIEW, "").await;
    assert_eq!(flows["placed"], 0, "{flows}");

    // An incast into h1: its two senders on leaf2 are confined to one
    // uplink and listed with their receiver; h2 shares h1's leaf.
    let incast = r#"{"name": "in-1", "pattern": "incast", "hosts": ["h2", "h3", "h4"], "target": "h1", "bytes": 1048576}"#;
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, incast).await;
    assert_eq!(status, 201, "{v}");
    let (_, flows) = http(r.listen, "GET", "/api/v1/flows", VIEW, "").await;
    let listed = flows["flows"].as_array().unwrap();
    let from = |ip: &str| listed.iter().find(|f| f["flow"]["src"] == ip).unwrap_or_else(|| panic!("{flows}"));
    let (h3, h4) = (from("10.0.2.1"), from("10.0.2.2"));
    assert_eq!((h3["incast"].as_str(), h4["incast"].as_str()), (Some("h1"), Some("h1")), "{flows}");
    assert_eq!(h3["path"][0]["port"], h4["path"][0]["port"], "one uplink for the incast: {flows}");
    assert!(!r.addrs.is_empty());
    r.stop().await;
}

/// The port of the `steer_pair` entry `st` holds for `src -> dst`.
fn steer_pair(st: &BTreeMap<Key, Entry>, src: [u8; 4], dst: [u8; 4]) -> Option<u16> {
    match st.get(&Key::SteerPair(u32::from_be_bytes(src), u32::from_be_bytes(dst)))? {
        Entry::SteerPair { port, nhop_id, .. } => {
            assert_eq!(*nhop_id, port + 1, "the next hop of port P is P + 1");
            Some(*port)
        }
        _ => None,
    }
}

async fn http_text(addr: SocketAddr, path: &str, token: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    (out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0), out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_job_bodies_are_refused_with_every_problem_and_roles_are_checked() {
    let r = start(Mode::Act, "bad").await;
    let body = r#"{"name": "ring 3", "flows": [
        {"src": "h1", "dst": "h9", "bytes": 1024},
        {"src": "h1", "dst": "h3", "sport": 49152, "qp": 17, "bytes": 1024},
        {"src": "h1", "dst": "h3", "sport": 49152, "qp": 17, "bytes": 1024},
        {"src": "h2", "dst": "h2", "bytes": 0}
    ], "colour": "red"}"#;
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, body).await;
    assert_eq!(status, 400, "{v}");
    let problems = v["problems"].as_array().unwrap();
    let at = |path: &str| problems.iter().any(|p| p["path"] == path);
    for path in ["name", "colour", "flows[0].dst", "flows[2]", "flows[3].bytes"] {
        assert!(at(path), "no problem at {path}: {v}");
    }
    assert!(v["error"].as_str().unwrap().contains(&format!("{} problem", problems.len())), "{v}");
    // Too many flows for the limit (8): 4 hosts all-to-all is 12.
    let big = r#"{"name": "big", "pattern": "all-to-all", "hosts": ["h1", "h2", "h3", "h4"], "bytes": 1}"#;
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, big).await;
    assert_eq!(status, 400, "{v}");
    assert!(v["problems"][0]["message"].as_str().unwrap().contains("more than the limit"), "{v}");
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, "not json").await;
    assert_eq!(status, 400, "{v}");
    // Viewers cannot register jobs; schedulers cannot change the mode.
    let (status, _) = http(r.listen, "POST", "/api/v1/jobs", VIEW, MOE).await;
    assert_eq!(status, 403);
    let (status, _) = http(r.listen, "DELETE", "/api/v1/jobs/moe-7", VIEW, "").await;
    assert_eq!(status, 403);
    let (status, _) = http(r.listen, "POST", "/api/v1/mode", SCHED, r#"{"mode":"observe"}"#).await;
    assert_eq!(status, 403);
    // Operators may manage jobs too.
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", OPER, MOE).await;
    assert_eq!(status, 201, "{v}");
    let (_, events) = http(r.listen, "GET", "/api/v1/events?limit=1000", VIEW, "").await;
    let refused = events["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "job_refused").count();
    // Two reached the state task; the body that is not JSON was refused by the API itself.
    assert_eq!(refused, 2, "{events}");
    r.stop().await;
}

/// Observe and advise plan the placement and show it, but write no steer
/// entry: the flows endpoint says it is not applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_mode_places_but_does_not_apply() {
    let r = start(Mode::Observe, "observe").await;
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, MOE).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["placement"]["applied"], false, "{v}");
    let (_, flows) = http(r.listen, "GET", "/api/v1/flows", VIEW, "").await;
    assert_eq!((flows["placed"].clone(), flows["applied"].clone()), (2.into(), false.into()), "{flows}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let p = pipeline();
    for (i, sw) in r.addrs.iter().enumerate() {
        let st = installed(*sw, i as u64 + 1, &p).await;
        assert!(
            !st.keys().any(|k| matches!(k, Key::SteerPair(..) | Key::SteerFlow(_))),
            "switch {i}: {st:?}"
        );
    }
    r.stop().await;
}

/// A large-flow digest as the program raises it: `large_flow_digest_t`.
fn large_flow(
    switch_id: u32,
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    qp: u32,
    port: u16,
    bytes: u32,
) -> p4::P4Data {
    let bits = |v: u128, n: usize| p4::P4Data {
        data: Some(p4::p4_data::Data::Bitstring(v.to_be_bytes()[16 - n..].to_vec())),
    };
    let flow = u128::from(u32::from_be_bytes(src)) << 72
        | u128::from(u32::from_be_bytes(dst)) << 40
        | u128::from(sport) << 24
        | u128::from(qp & 0xff_ffff);
    p4::P4Data {
        data: Some(p4::p4_data::Data::Struct(p4::P4StructLike {
            members: vec![
                bits(u128::from(switch_id), 4),
                bits(flow, 13),
                bits(u128::from(port), 2),
                bits(u128::from(bytes), 4),
                bits(1000, 4),
                bits(7, 2),
                bits(0, 1),
                bits(123_456, 6),
            ],
        })),
    }
}

/// The port of the `steer_flow` entry `st` holds for the flow.
fn steer_flow(st: &BTreeMap<Key, Entry>, src: [u8; 4], dst: [u8; 4], sport: u16, qp: u32) -> Option<u16> {
    let key = metaroce_pipeline::FlowKey { src: src.into(), dst: dst.into(), sport, qp };
    match st.get(&Key::SteerFlow(key))? {
        Entry::SteerFlow { port, .. } => Some(*port),
        _ => None,
    }
}

/// Two unannounced elephants from leaf2 toward leaf1 both leave by port 3
/// (spine1): once reported large they are placed on different spines with
/// steer entries, and when the reports stop they age out and their entries go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reported_elephants_are_split_and_age_out() {
    let r = start_with(Mode::Act, "elephants", |c| c.core.place.flow_idle_ns = 5_000_000_000).await;
    let p = pipeline();
    let digest = p.info().digests.id_of(metaroce_pipeline::names::LARGE_FLOW_DIGEST).unwrap();
    let leaf2 = 2u32; // int_node_id defaults to the device id
    let elephants =
        [([10, 0, 2, 1], [10, 0, 1, 1], 49152u16, 17u32), ([10, 0, 2, 2], [10, 0, 1, 2], 49153, 18)];
    // 100 kB in 1 ms: 800 Mb/s offered, capped by the 100 Mb/s NICs.
    for (src, dst, sport, qp) in elephants {
        assert!(r.switches[1].emit_digest(digest, large_flow(leaf2, src, dst, sport, qp, 3, 100_000)));
    }
    let held = |st: &BTreeMap<Key, Entry>| -> Vec<u16> {
        elephants.iter().filter_map(|&(s, d, sp, q)| steer_flow(st, s, d, sp, q)).collect()
    };
    wait_for("both elephants steered on leaf2", 15, || async {
        held(&installed(r.addrs[1], 2, &p).await).len() == 2
    })
    .await;
    let mut ports = held(&installed(r.addrs[1], 2, &p).await);
    ports.sort_unstable();
    assert_eq!(ports, vec![3, 4], "one elephant per spine");
    // The status documents refresh at most every 500 ms.
    wait_for("the placement in /api/v1/flows", 10, || async {
        http(r.listen, "GET", "/api/v1/flows", VIEW, "").await.1["placed"] == 2
    })
    .await;
    let (_, flows) = http(r.listen, "GET", "/api/v1/flows", VIEW, "").await;
    assert!(flows["flows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["flow"]["kind"] == "flow" && f["job"].is_null()));
    let (_, metrics) = http_text(r.listen, "/metrics", VIEW).await;
    assert!(metrics.contains("metaroce_large_flow_digests_total{switch=\"leaf2\"} 2"), "{metrics}");
    assert!(
        metrics.contains("metaroce_observed_max_utilisation_ratio 16"),
        "both reported on port 3: {metrics}"
    );
    // No more reports: both age out and their entries go.
    wait_for("the entries to age out", 15, || async {
        let st = installed(r.addrs[1], 2, &p).await;
        elephants.iter().all(|&(s, d, sp, q)| steer_flow(&st, s, d, sp, q).is_none())
    })
    .await;
    let (_, events) = http(r.listen, "GET", "/api/v1/events?limit=1000", VIEW, "").await;
    let ended = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "flow_move" && e["details"]["reason"] == "ended")
        .count();
    assert_eq!(ended, 2, "{events}");
    r.stop().await;
}

/// A controller that (re)starts keeps the steer entries it finds for the
/// steer grace (the flow idle time), as a new leader does after a takeover:
/// a restart does not undo a working placement before its flows are
/// reported or its jobs posted again. Then those nobody claimed go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_keeps_the_steer_entries_it_finds_for_the_grace() {
    let idle_ms = 1500;
    let r = start_with(Mode::Act, "restart", |c| c.core.place.flow_idle_ns = idle_ms * 1_000_000).await;
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, MOE).await;
    assert_eq!(status, 201, "{v}");
    let p = pipeline();
    wait_for("the job's steer entry on leaf1", 15, || async {
        steer_pair(&installed(r.addrs[0], 1, &p).await, [10, 0, 1, 1], [10, 0, 2, 1]).is_some()
    })
    .await;
    // The controller stops; the switches keep running with what they hold.
    let Running { addrs, quit, daemon, stop, switches, .. } = r;
    let _ = quit.send(());
    daemon.await.unwrap().unwrap();

    let listen = common::free_addr();
    let mut cfg = Config::new(topology(&addrs), pipeline());
    cfg.mode = Mode::Act;
    cfg.listen = Some(listen);
    cfg.core.place.flow_idle_ns = idle_ms * 1_000_000;
    let (quit, quit_rx) = tokio::sync::oneshot::channel::<()>();
    let started = std::time::Instant::now();
    let daemon = tokio::spawn(daemon::run(cfg, async move {
        let _ = quit_rx.await;
    }));
    wait_for("the restarted controller has synced every switch", 10, || async {
        let (_, st) = http(listen, "GET", "/api/v1/status", VIEW, "").await;
        st["switches"].as_array().is_some_and(|v| v.len() == 4 && v.iter().all(|s| s["programmed"] == true))
    })
    .await;
    let held = steer_pair(&installed(addrs[0], 1, &p).await, [10, 0, 1, 1], [10, 0, 2, 1]);
    assert!(
        held.is_some() || started.elapsed().as_millis() >= u128::from(idle_ms),
        "the restart deleted the job's entry before the grace ran out"
    );
    wait_for("the unclaimed entry to go after the grace", 15, || async {
        steer_pair(&installed(addrs[0], 1, &p).await, [10, 0, 1, 1], [10, 0, 2, 1]).is_none()
    })
    .await;
    assert!(started.elapsed().as_millis() >= u128::from(idle_ms), "gone only once the grace ran out");
    let _ = quit.send(());
    daemon.await.unwrap().unwrap();
    let _ = stop.send(true);
    drop(switches);
}

/// The steer entries a switch holds, by the planner's flow key.
fn steer_of(st: &BTreeMap<Key, Entry>) -> BTreeMap<metaroce_te::FlowKey, u16> {
    st.values()
        .filter_map(|e| match *e {
            Entry::SteerFlow { flow, port, .. } => {
                Some((metaroce_te::FlowKey::flow(flow.src, flow.dst, flow.sport, flow.qp), port))
            }
            Entry::SteerPair { src, dst, port, .. } => Some((metaroce_te::FlowKey::pair(src, dst), port)),
            _ => None,
        })
        .collect()
}

/// Parity: the inputs the daemon recorded (a job, large-flow digests from
/// both leaves, a queue pair seen under a second source port) driven
/// through the simulator's decision path (`metaroce_sim::control::apply::
/// replay_steer`, the controller in the loop without the engine) give the
/// steer entries the daemon wrote to its switches, switch by switch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_decides_what_the_daemon_writes() {
    let recording = tempfile_path("parity-inputs.jsonl");
    let rec = recording.clone();
    // Flows live longer than the test: the recording ends at its last
    // input, and the comparison is of the state it leaves.
    let mut core = metaroce_controller::core::CoreConfig::default();
    core.place.limits.max_flows = 64;
    core.place.flow_idle_ns = 600_000_000_000;
    let daemon_core = core.clone();
    let r = start_with(Mode::Act, "parity", move |c| {
        c.record = Some(rec);
        c.core = daemon_core;
    })
    .await;
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, MOE).await;
    assert_eq!(status, 201, "{v}");
    let p = pipeline();
    let digest = p.info().digests.id_of(metaroce_pipeline::names::LARGE_FLOW_DIGEST).unwrap();
    // Leaf2's hosts toward leaf1, both first seen on spine1's port; h4's
    // queue pair 18 comes back under another source port.
    let reports = [
        (1usize, 2u32, [10, 0, 2, 2], [10, 0, 1, 2], 49153u16, 18u32, 3u16),
        (1, 2, [10, 0, 2, 1], [10, 0, 1, 2], 49160, 21, 3),
        (0, 1, [10, 0, 1, 2], [10, 0, 2, 2], 49170, 30, 4),
        (1, 2, [10, 0, 2, 2], [10, 0, 1, 2], 49155, 18, 4),
    ];
    for (i, &(sw, node, src, dst, sport, qp, port)) in reports.iter().enumerate() {
        assert!(r.switches[sw].emit_digest(digest, large_flow(node, src, dst, sport, qp, port, 100_000)));
        // Each report is its own input (the daemon coalesces a burst).
        wait_for("the report to be recorded", 10, || async {
            std::fs::read_to_string(&recording).map_or(0, |t| t.matches("large_flow").count()) > i
        })
        .await;
    }
    let topo = topology(&r.addrs);
    let inputs = metaroce_controller::replay::parse(&std::fs::read_to_string(&recording).unwrap()).unwrap();
    let sim = metaroce_sim::control::apply::replay_steer(&topo, core, &inputs).unwrap();
    assert!(
        sim.iter().map(BTreeMap::len).sum::<usize>() >= 4,
        "the job and the reports are steered: {sim:?}"
    );
    for (s, want) in sim.iter().enumerate() {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        let mut held = steer_of(&installed(r.addrs[s], s as u64 + 1, &p).await);
        while held != *want && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            held = steer_of(&installed(r.addrs[s], s as u64 + 1, &p).await);
        }
        if held != *want {
            let (_, events) = http(r.listen, "GET", "/api/v1/events?limit=1000", VIEW, "").await;
            eprintln!("recording:\n{}\nevents: {events:#}", std::fs::read_to_string(&recording).unwrap());
        }
        assert_eq!(held, *want, "switch {s}: the daemon's entries (left), the simulator's (right)");
    }
    r.stop().await;
}
