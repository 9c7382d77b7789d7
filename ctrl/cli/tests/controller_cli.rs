//! L2: the `metaroce controller` binary beside itself, against in-process
//! P4Runtime switches on 127.0.0.1. A running controller says at the
//! default log level what it did to each switch; `snapshot` reads beside
//! it as a backup; `rollback` refuses to fight it and says what to do
//! instead, and works once it is stopped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::serve::Proc;

use common::repo;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use metaroce_p4rt::server::{Switch, SwitchOptions};

fn topology(addrs: &[SocketAddr]) -> String {
    format!(
        r#"name: cli-2x2
fabric: {{flowlet_timeout: 5ms, queue_high: 40pkt, queue_low: 10pkt, ecn_threshold: 20pkt}}
defaults: {{link: {{bandwidth: 100Mbps}}, host: {{nic_rate: 100Mbps}}}}
switches:
  - {{name: leaf1,  role: leaf,  device_id: 1, p4rt: "{}", subnet: 10.0.1.0/24}}
  - {{name: leaf2,  role: leaf,  device_id: 2, p4rt: "{}", subnet: 10.0.2.0/24}}
  - {{name: spine1, role: spine, device_id: 3, p4rt: "{}"}}
  - {{name: spine2, role: spine, device_id: 4, p4rt: "{}"}}
hosts:
  - {{name: h1, ip: 10.0.1.1, mac: "02:00:00:00:01:01", leaf: leaf1, port: 1}}
  - {{name: h3, ip: 10.0.2.1, mac: "02:00:00:00:02:01", leaf: leaf2, port: 1}}
links:
  - {{a: "leaf1:3", b: "spine1:1"}}
  - {{a: "leaf1:4", b: "spine2:1"}}
  - {{a: "leaf2:3", b: "spine1:2"}}
  - {{a: "leaf2:4", b: "spine2:2"}}
"#,
        addrs[0], addrs[1], addrs[2], addrs[3]
    )
}

async fn fabric() -> (Vec<Switch>, Vec<SocketAddr>, tokio::sync::watch::Sender<bool>) {
    common::in_process_switches(4, |id| SwitchOptions { device_id: id, ..Default::default() }).await
}

/// `metaroce ARGS` off the async runtime's threads.
async fn metaroce(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::metaroce(&args)
    })
    .await
    .unwrap()
}

fn wait_for_log(log: &Path, proc: &mut Proc, what: &str, count: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.matches(what).count() >= count {
            return text;
        }
        if let Ok(Some(st)) = proc.0.try_wait() {
            panic!("the controller exited ({st}):\n{text}");
        }
        assert!(Instant::now() < deadline, "no {count}× {what:?} within 30 s:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_beside_a_running_controller_and_rollback_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (switches, addrs, stop) = fabric().await;
    let topo = dir.path().join("fabric.yaml");
    std::fs::write(&topo, topology(&addrs)).unwrap();
    let topo_s = topo.to_str().unwrap().to_owned();
    let log = dir.path().join("controller.log");
    // As a user starts it: no -v, so this is what the default level shows.
    let child = Command::new(env!("CARGO_BIN_EXE_metaroce"))
        .args(["controller", "run", &topo_s, "--mode", "act"])
        .current_dir(repo())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut ctl = Proc(child);
    let text = wait_for_log(&log, &mut ctl, "the control loop runs", 1);
    let programmed: Vec<&str> = text.lines().filter(|l| l.contains("switch programmed")).collect();
    assert_eq!(programmed.len(), 4, "one line per switch:\n{text}");
    for name in ["leaf1", "leaf2", "spine1", "spine2"] {
        let line = programmed.iter().find(|l| l.contains(&format!("switch={name}"))).expect(name);
        assert!(line.contains("primary=true") && line.contains("written="), "{line}");
    }

    // A snapshot beside the running primary: read as a backup.
    let snap = dir.path().join("snap.json");
    let snap_s = snap.to_str().unwrap().to_owned();
    let out =
        metaroce(vec!["controller".into(), "snapshot".into(), topo_s.clone(), "-o".into(), snap_s.clone()])
            .await;
    assert_eq!(out.status.code(), Some(0), "{}", common::text(&out));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&snap).unwrap()).unwrap();
    for name in ["leaf1", "leaf2", "spine1", "spine2"] {
        let n = doc["switches"][name].as_array().map_or(0, Vec::len);
        assert!(n > 0, "{name} has entries in the snapshot: {doc}");
    }
    assert!(switches.iter().all(|s| s.primary_election_id() == Some(10)), "the controller stays primary");

    // A rollback would fight it: refused, saying what to do.
    let rollback = vec!["controller".into(), "rollback".into(), topo_s.clone(), snap_s.clone()];
    let out = metaroce(rollback.clone()).await;
    let err = common::text(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("POST /api/v1/rollback") && err.contains("stop that controller"), "{err}");
    assert!(switches.iter().all(|s| s.primary_election_id() == Some(10)), "nothing taken over");

    // Stopped, the rollback restores (nothing changed, so nothing to write).
    drop(ctl);
    let deadline = Instant::now() + Duration::from_secs(10);
    while switches.iter().any(|s| s.primary_election_id().is_some()) {
        assert!(Instant::now() < deadline, "the switches never saw the controller go");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = metaroce(rollback).await;
    let text = common::text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let restored =
        text.lines().filter(|l| l.contains(": restored (") || l.contains(": already at the snapshot"));
    assert_eq!(restored.count(), 4, "{text}");
    let _ = stop.send(true);
}
