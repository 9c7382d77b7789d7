//! Shared set-up: an in-process switch on 127.0.0.1:0 and a session to it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use metaroce_p4rt::server::{Switch, SwitchOptions};
use metaroce_p4rt::session::{Bmv2Json, PipelineOutcome};
use metaroce_p4rt::{P4Info, Session, SessionConfig};

pub fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

pub fn info() -> P4Info {
    P4Info::load(&data("test.p4info.txt")).expect("test P4Info loads")
}

pub struct Rig {
    pub switch: Switch,
    pub addr: String,
    pub info: P4Info,
    pub task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

pub async fn rig(opts: SwitchOptions) -> Rig {
    let switch = Switch::new(opts);
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let (addr, task) = switch
        .bind("127.0.0.1:0".parse().unwrap(), async move {
            let _ = rx.await;
        })
        .await
        .unwrap();
    Rig { switch, addr: format!("http://{addr}"), info: info(), task, _stop: stop }
}

pub fn config(addr: &str, election_id: u128) -> SessionConfig {
    let mut c = SessionConfig::new(addr, 1);
    c.election_id = election_id;
    c.rpc_timeout = Duration::from_secs(5);
    c.backoff_initial = Duration::from_millis(10);
    c.backoff_max = Duration::from_millis(100);
    c
}

/// A primary session with the test pipeline installed.
pub async fn primary(r: &Rig) -> Session {
    let s = Session::connect(config(&r.addr, 10)).await.unwrap();
    s.wait_primary().await.unwrap();
    let outcome = s.set_pipeline(&r.info, &Bmv2Json(b"{}".to_vec()), None).await.unwrap();
    assert_eq!(outcome, PipelineOutcome::Pushed);
    s
}
