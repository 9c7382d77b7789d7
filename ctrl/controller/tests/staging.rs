//! L2: downstream first across switches. On a three-tier Clos a flow
//! between pods has two choices (its leaf picks a pod spine, the spine a
//! super-spine), so its path needs two steer entries on two switches with
//! agents of their own. The controller publishes the spine's entry first
//! and the leaf's only once the spine has acknowledged it: in the event
//! log, the spine's write comes before the leaf's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use common::{installed, pipeline, wait_for};
use metaroce_controller::daemon::{self, Config};
use metaroce_controller::mode::Mode;
use metaroce_p4rt::server::SwitchOptions;
use metaroce_pipeline::{Entry, Key};
use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;
use serde_json::Value;

const SCHED: &str = "scheduler-token-for-the-staging-test";

async fn post(addr: SocketAddr, path: &str, body: &str) -> (u16, Value) {
    common::http(addr, "POST", path, SCHED, body).await
}

fn steers(st: &BTreeMap<Key, Entry>) -> usize {
    st.keys().filter(|k| matches!(k, Key::SteerPair(..) | Key::SteerFlow(_))).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_hop_placement_is_written_downstream_first() {
    let p = pipeline();
    // 2 pods of 1 leaf and 2 spines, 2 planes of 2 super-spines, 1 host per leaf.
    let mut topo = gen::clos3(&Common::new("staging", Bandwidth::gbps(100)), 2, 1, 2, 2, 1).unwrap();
    let options = topo.switches.iter().map(|sw| SwitchOptions {
        device_id: sw.device_id,
        registers_via_p4runtime: true,
        ..Default::default()
    });
    let (_switches, addrs, stop) = metaroce_p4rt::server::start_local(options).await.unwrap();
    for (sw, addr) in topo.switches.iter_mut().zip(&addrs) {
        sw.p4rt = addr.to_string();
    }
    let dir = std::env::temp_dir().join(format!("metaroce-staging-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("scheduler {SCHED}\n")).unwrap();
    let events = dir.join("events.jsonl");
    let _ = std::fs::remove_file(&events);
    let listen = common::free_addr();
    let mut cfg = Config::new(topo.clone(), p.clone());
    cfg.mode = Mode::Act;
    cfg.listen = Some(listen);
    cfg.tokens = Some(tokens);
    cfg.events = Some(events.clone());
    let (quit, quit_rx) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(daemon::run(cfg, async move {
        let _ = quit_rx.await;
    }));
    let n = topo.switches.len();
    wait_for("the baseline on every switch", 20, || async {
        std::fs::read_to_string(&events).unwrap_or_default().matches("\"kind\":\"write\"").count() >= n
    })
    .await;
    let (h1, h2) = (&topo.hosts[0], &topo.hosts[1]);
    let (leaf1, leaf2) = (h1.leaf, h2.leaf);
    let body = format!(
        r#"{{"name": "x", "pattern": "all-to-all", "hosts": ["{}", "{}"], "bytes": 1000000}}"#,
        h1.name, h2.name
    );
    let (status, v) = post(listen, "/api/v1/jobs", &body).await;
    assert_eq!(status, 201, "{v}");
    let addr = |s: usize| topo.switches[s].p4rt.parse::<SocketAddr>().unwrap();
    let dev = |s: usize| topo.switches[s].device_id;
    wait_for("both leaves steering", 5, || async {
        steers(&installed(addr(leaf1), dev(leaf1), &p).await) == 1
            && steers(&installed(addr(leaf2), dev(leaf2), &p).await) == 1
    })
    .await;
    // Each flow's second choice is at a pod spine: which one, the leaf's entry says.
    let spine_after = |leaf: usize, st: &BTreeMap<Key, Entry>| -> usize {
        let port = st.values().find_map(|e| match e {
            Entry::SteerPair { port, .. } => Some(*port),
            _ => None,
        });
        topo.adjacency(leaf).iter().find(|a| Some(a.port) == port).map(|a| a.peer).unwrap()
    };
    let s1 = spine_after(leaf1, &installed(addr(leaf1), dev(leaf1), &p).await);
    let s2 = spine_after(leaf2, &installed(addr(leaf2), dev(leaf2), &p).await);
    for s in [s1, s2] {
        assert_eq!(steers(&installed(addr(s), dev(s), &p).await), 1, "the spine on the path steers too");
    }
    let _ = quit.send(());
    daemon.await.unwrap().unwrap();
    let _ = stop.send(true);
    // In the log, after the job: each spine's write before its leaf's.
    let log: Vec<Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let from = log.iter().position(|e| e["kind"] == "job_registered").unwrap();
    let first_write = |s: usize| -> &Value {
        let name = &topo.switches[s].name;
        log[from..].iter().find(|e| e["kind"] == "write" && e["switch"] == name.as_str()).unwrap()
    };
    for (leaf, spine) in [(leaf1, s1), (leaf2, s2)] {
        // The spine's pass was acknowledged (and logged) before the leaf's began.
        let acked_ns = first_write(spine)["ts_unix_ns"].as_u64().unwrap();
        let leaf_began_ns = first_write(leaf)["details"]["started_unix_us"].as_u64().unwrap() * 1000;
        assert!(
            acked_ns <= leaf_began_ns + 1000,
            "spine {spine} acknowledged at {acked_ns}, leaf {leaf} began at {leaf_began_ns}: {log:#?}"
        );
    }
}
