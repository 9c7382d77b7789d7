//! A controller daemon on the four in-process switches of
//! [`super::fabric`], with the API and tokens for each role: the rig of
//! the job tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::PathBuf;

use metaroce_controller::daemon::{self, Config};
use metaroce_controller::mode::Mode;
use metaroce_p4rt::server::Switch;

use super::{http, installed, pipeline, wait_for};

pub const SCHED: &str = "scheduler-token-for-the-job-test";
pub const VIEW: &str = "viewer-token-for-the-job-test-01";
pub const OPER: &str = "operator-token-for-the-job-test-1";

pub fn topology(addrs: &[SocketAddr]) -> metaroce_topo::Topology {
    let yaml = format!(
        r#"
name: jobs-2x2
fabric: {{flowlet_timeout: 5ms, queue_high: 40pkt, queue_low: 10pkt, ecn_threshold: 20pkt}}
defaults: {{link: {{bandwidth: 100Mbps}}, host: {{nic_rate: 100Mbps}}}}
switches:
  - {{name: leaf1,  role: leaf,  device_id: 1, p4rt: "{}", subnet: 10.0.1.0/24}}
  - {{name: leaf2,  role: leaf,  device_id: 2, p4rt: "{}", subnet: 10.0.2.0/24}}
  - {{name: spine1, role: spine, device_id: 3, p4rt: "{}"}}
  - {{name: spine2, role: spine, device_id: 4, p4rt: "{}"}}
hosts:
  - {{name: h1, ip: 10.0.1.1, mac: "02:00:00:00:01:01", leaf: leaf1, port: 1}}
  - {{name: h2, ip: 10.0.1.2, mac: "02:00:00:00:01:02", leaf: leaf1, port: 2}}
  - {{name: h3, ip: 10.0.2.1, mac: "02:00:00:00:02:01", leaf: leaf2, port: 1}}
  - {{name: h4, ip: 10.0.2.2, mac: "02:00:00:00:02:02", leaf: leaf2, port: 2}}
links:
  - {{a: "leaf1:3", b: "spine1:1"}}
  - {{a: "leaf1:4", b: "spine2:1"}}
  - {{a: "leaf2:3", b: "spine1:2"}}
  - {{a: "leaf2:4", b: "spine2:2"}}
"#,
        addrs[0], addrs[1], addrs[2], addrs[3]
    );
    metaroce_topo::load_str(&yaml, "jobs").unwrap()
}

pub fn tempfile_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("metaroce-jobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

pub struct Running {
    pub listen: SocketAddr,
    pub addrs: Vec<SocketAddr>,
    pub quit: tokio::sync::oneshot::Sender<()>,
    pub daemon: tokio::task::JoinHandle<Result<(), daemon::DaemonError>>,
    pub stop: tokio::sync::watch::Sender<bool>,
    pub switches: Vec<Switch>,
}

pub async fn start(mode: Mode, tag: &str) -> Running {
    start_with(mode, tag, |_| {}).await
}

pub async fn start_with(mode: Mode, tag: &str, tune: impl FnOnce(&mut Config)) -> Running {
    start_on(super::fabric().await, mode, tag, tune).await
}

/// [`start_with`] on switches made (and perhaps prepared) by the caller.
pub async fn start_on(
    fabric: (Vec<Switch>, Vec<SocketAddr>, tokio::sync::watch::Sender<bool>),
    mode: Mode,
    tag: &str,
    tune: impl FnOnce(&mut Config),
) -> Running {
    let p = pipeline();
    let (switches, addrs, stop) = fabric;
    let topo = topology(&addrs);
    let listen = super::free_addr();
    let tokens = tempfile_path(&format!("{tag}-tokens"));
    std::fs::write(&tokens, format!("scheduler {SCHED}\nviewer {VIEW}\noperator {OPER}\n")).unwrap();
    let mut cfg = Config::new(topo, p);
    cfg.mode = mode;
    cfg.listen = Some(listen);
    cfg.tokens = Some(tokens);
    cfg.core.place.limits.max_flows = 8;
    tune(&mut cfg);
    let (quit, quit_rx) = tokio::sync::oneshot::channel::<()>();
    let daemon = tokio::spawn(daemon::run(cfg, async move {
        let _ = quit_rx.await;
    }));
    wait_for("the API", 10, || async { http(listen, "GET", "/healthz", SCHED, "").await.0 == 200 }).await;
    let p = pipeline();
    wait_for("the baseline on the leaves", 10, || async {
        installed(addrs[0], 1, &p).await.len() > 4 && installed(addrs[1], 2, &p).await.len() > 4
    })
    .await;
    Running { listen, addrs, quit, daemon, stop, switches }
}

impl Running {
    pub async fn stop(self) {
        let _ = self.quit.send(());
        self.daemon.await.unwrap().unwrap();
        let _ = self.stop.send(true);
    }
}
