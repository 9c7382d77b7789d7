//! Helpers the controller's integration tests share.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

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
