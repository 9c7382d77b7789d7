//! Helpers the controller's integration tests share.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use metaroce_p4rt::server::{Switch, SwitchOptions};
use metaroce_p4rt::{Session, SessionConfig};
use metaroce_pipeline::{Entry, Key, Pipeline};

/// The committed program of `p4src/build/`.
pub fn pipeline() -> Arc<Pipeline> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build");
    Arc::new(Pipeline::load(&dir.join("main.p4info.txtpb"), &dir.join("main.json")).unwrap())
}

/// Everything of ours a switch holds, read by a backup client with a fresh,
/// low election id (the server may not have dropped the previous one yet).
pub async fn installed(addr: SocketAddr, device_id: u64, p: &Pipeline) -> BTreeMap<Key, Entry> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let mut cfg = SessionConfig::new(format!("http://{addr}"), device_id);
    cfg.election_id = u128::from(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 9 + 1);
    let s = Session::connect(cfg).await.unwrap();
    p.read_installed(&s).await.map(|i| i.entries).unwrap_or_default()
}

/// Four in-process P4Runtime switches (device ids 1-4) on free ports, with
/// registers over P4Runtime; they stop when `true` is sent on the sender.
#[allow(dead_code)]
pub async fn fabric() -> (Vec<Switch>, Vec<SocketAddr>, tokio::sync::watch::Sender<bool>) {
    let (stop, rx) = tokio::sync::watch::channel(false);
    let mut switches = vec![];
    let mut addrs = vec![];
    for id in 1..=4u64 {
        let sw =
            Switch::new(SwitchOptions { device_id: id, registers_via_p4runtime: true, ..Default::default() });
        let mut rx = rx.clone();
        let (addr, _task) = sw
            .bind("127.0.0.1:0".parse().unwrap(), async move {
                let _ = rx.wait_for(|s| *s).await;
            })
            .await
            .unwrap();
        switches.push(sw);
        addrs.push(addr);
    }
    (switches, addrs, stop)
}
