//! L2: `metaroce controller run --tofino` against in-process switches that
//! play the SDE's P4Runtime server: the committed bf-p4c build
//! (`p4src/build/tofino/`) is pushed in the SDE's device-config format and
//! programmed in Tofino units; a truncated device config, or one for
//! another program, is refused before any switch is touched.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::serve::Proc;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use metaroce_p4rt::server::{Switch, SwitchOptions};
use metaroce_p4rt::tofino::TofinoConfig;

fn topology(addrs: &[SocketAddr]) -> String {
    format!(
        r#"name: tofino-2x1
fabric: {{flowlet_timeout: 5ms, queue_high: 40pkt, queue_low: 10pkt, ecn_threshold: 20pkt, cpu_port: 192}}
defaults: {{link: {{bandwidth: 100Gbps}}, host: {{nic_rate: 100Gbps}}}}
switches:
  - {{name: leaf1,  role: leaf,  device_id: 1, p4rt: "{}", subnet: 10.0.1.0/24}}
  - {{name: leaf2,  role: leaf,  device_id: 2, p4rt: "{}", subnet: 10.0.2.0/24}}
  - {{name: spine1, role: spine, device_id: 3, p4rt: "{}"}}
hosts:
  - {{name: h1, ip: 10.0.1.1, mac: "02:00:00:00:01:01", leaf: leaf1, port: 1}}
  - {{name: h2, ip: 10.0.2.1, mac: "02:00:00:00:02:01", leaf: leaf2, port: 1}}
links:
  - {{a: "leaf1:3", b: "spine1:1"}}
  - {{a: "leaf2:3", b: "spine1:2"}}
"#,
        addrs[0], addrs[1], addrs[2]
    )
}

async fn fabric() -> (Vec<Switch>, Vec<SocketAddr>, tokio::sync::watch::Sender<bool>) {
    common::in_process_switches(3, |id| SwitchOptions {
        device_id: id,
        tofino_program: Some("main".into()),
        ..Default::default()
    })
    .await
}

/// The committed bf-p4c build (`p4src/build/tofino/`).
fn committed() -> PathBuf {
    common::repo().join("p4src/build/tofino")
}

/// A scratch directory with a copy of the committed build, to cut and
/// rename.
fn build(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("metaroce-tofino-cli-{tag}-{}", std::process::id()));
    let pipe = dir.join("tofino/pipe");
    std::fs::create_dir_all(&pipe).unwrap();
    for f in ["main.p4info.txtpb", "pipe/tofino.bin", "pipe/context.json"] {
        std::fs::copy(committed().join(f), dir.join("tofino").join(f)).unwrap();
    }
    dir
}

async fn metaroce(args: Vec<String>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::metaroce(&args)
    })
    .await
    .unwrap()
}

fn args(dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "controller".into(),
        "run".into(),
        dir.join("topo.yaml").display().to_string(),
        "--tofino".into(),
        "--p4info".into(),
        dir.join("tofino/main.p4info.txtpb").display().to_string(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_device_configs_are_refused_before_any_switch_is_touched() {
    let (switches, addrs, _stop) = fabric().await;
    let dir = build("bad");
    std::fs::write(dir.join("topo.yaml"), topology(&addrs)).unwrap();
    let good = TofinoConfig::load_dir(&dir.join("tofino"), "main").unwrap().encode().unwrap();
    std::fs::write(dir.join("truncated.bin"), &good[..good.len() - 5]).unwrap();
    let mut other = TofinoConfig::load_dir(&dir.join("tofino"), "main").unwrap();
    other.program = "switch".into();
    std::fs::write(dir.join("other.bin"), other.encode().unwrap()).unwrap();

    for (file, why) in [("truncated.bin", "truncated"), ("other.bin", "not \"main\"")] {
        let path = dir.join(file).display().to_string();
        let out = metaroce(args(&dir, &["--device-config", &path, "--duration", "1"])).await;
        let text = common::text(&out);
        assert_eq!(out.status.code(), Some(1), "{file}: {text}");
        assert!(text.contains(why), "{file}: {text}");
    }
    // A Tofino build directory with a v1model P4Info is refused too.
    let v1 = common::repo().join("p4src/build/main.p4info.txtpb").display().to_string();
    let tofino = dir.join("tofino").display().to_string();
    let out = metaroce(vec![
        "controller".into(),
        "run".into(),
        dir.join("topo.yaml").display().to_string(),
        "--p4info".into(),
        v1,
        "--device-config".into(),
        tofino,
    ])
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", common::text(&out));
    assert!(common::text(&out).contains("TNA P4Info"), "{}", common::text(&out));
    assert!(switches.iter().all(|s| s.pipeline_pushes() == 0 && s.writes() == 0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--tofino` alone loads the committed bf-p4c build from the repository:
/// its P4Info and its `tofino.bin` and `context.json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_programs_a_tofino_in_its_units() {
    let (switches, addrs, _stop) = fabric().await;
    let dir = build("run");
    std::fs::write(dir.join("topo.yaml"), topology(&addrs)).unwrap();
    let a: Vec<String> = vec![
        "controller".into(),
        "run".into(),
        dir.join("topo.yaml").display().to_string(),
        "--tofino".into(),
        "--duration".into(),
        "60".into(),
    ];
    let child = Command::new(env!("CARGO_BIN_EXE_metaroce"))
        .args(&a)
        .current_dir(common::repo())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut proc = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    // Threshold digests come back through Tofino's recirculation port 68.
    while switches.iter().any(|s| s.clone_session_ports(501) != Some(vec![68])) {
        if let Ok(Some(st)) = proc.0.try_wait() {
            panic!("the controller exited: {st}");
        }
        assert!(Instant::now() < deadline, "the switches were not programmed within 60 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(switches.iter().all(|s| s.pipeline_pushes() == 1));
    assert_eq!(switches[0].clone_session_ports(500), Some(vec![192]), "reports to the CPU port");
    // The P4Info pushed is bf-p4c's.
    let text = std::fs::read_to_string(committed().join("main.p4info.txtpb")).unwrap();
    let want = metaroce_p4rt::P4Info::from_text(&text).unwrap();
    for s in &switches {
        assert_eq!(s.p4info().unwrap().raw(), want.raw());
    }
    drop(proc);
    let _ = std::fs::remove_dir_all(&dir);
}
