//! Helpers the controller's integration tests share.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use metaroce_p4rt::server::{Switch, SwitchOptions};
use metaroce_p4rt::{Session, SessionConfig};
use metaroce_pipeline::{Entry, Key, Pipeline};
use serde_json::Value;

#[path = "../../../../tests/support/ports.rs"]
mod ports;
pub mod rig;

/// 127.0.0.1 on a port outside the kernel's ephemeral range (see
/// `tests/support/ports.rs`), for a listener or a BMv2 started later.
#[allow(dead_code)]
pub fn free_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], ports::free_port()))
}

/// The committed program of `p4src/build/`.
pub fn pipeline() -> Arc<Pipeline> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build");
    Arc::new(Pipeline::load(&dir.join("main.p4info.txtpb"), &dir.join("main.json")).unwrap())
}

/// Everything of ours a switch holds, read by a backup client with a fresh,
/// low election id (the server may not have dropped the previous one yet).
pub async fn installed(addr: SocketAddr, device_id: u64, p: &Pipeline) -> BTreeMap<Key, Entry> {
    match try_installed(addr, device_id, p).await {
        Ok(entries) => entries,
        Err(e) => panic!("cannot read switch {device_id} at {addr}: {e}"),
    }
}

/// As [`installed`], but a switch that does not answer yet (a BMv2 still
/// starting) is an error to retry on, not a panic.
#[allow(dead_code)]
pub async fn try_installed(
    addr: SocketAddr,
    device_id: u64,
    p: &Pipeline,
) -> Result<BTreeMap<Key, Entry>, metaroce_p4rt::SessionError> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let mut cfg = SessionConfig::new(format!("http://{addr}"), device_id);
    cfg.election_id = u128::from(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 9 + 1);
    let s = Session::connect(cfg).await?;
    Ok(p.read_installed(&s).await.map(|i| i.entries).unwrap_or_default())
}

/// Four in-process P4Runtime switches (device ids 1-4) on free ports, with
/// registers over P4Runtime; they stop when `true` is sent on the sender.
#[allow(dead_code)]
pub async fn fabric() -> (Vec<Switch>, Vec<SocketAddr>, tokio::sync::watch::Sender<bool>) {
    let options = |id| SwitchOptions { device_id: id, registers_via_p4runtime: true, ..Default::default() };
    metaroce_p4rt::server::start_local((1..=4).map(options)).await.unwrap()
}

/// One HTTP exchange: (status, JSON body).
#[allow(dead_code)]
pub async fn http(addr: SocketAddr, method: &str, path: &str, token: &str, body: &str) -> (u16, Value) {
    let out = http_text(addr, method, path, Some(token), body).await;
    let status = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let json =
        out.split_once("\r\n\r\n").and_then(|(_, b)| serde_json::from_str(b).ok()).unwrap_or(Value::Null);
    (status, json)
}

/// One HTTP exchange, with a bearer token if given: the whole answer, or
/// "" when nothing listens yet (so a `wait_for` tries again).
#[allow(dead_code)]
pub async fn http_text(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else { return String::new() };
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// Polls `f` every 20 ms until it holds; panics naming `what` after `secs`.
#[allow(dead_code)]
pub async fn wait_for<F: FnMut() -> Fut, Fut: std::future::Future<Output = bool>>(
    what: &str,
    secs: u64,
    mut f: F,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Like [`wait_for`], every `every`, for a check that says why it is not
/// there yet; the last reason is in the panic.
#[allow(dead_code)]
pub async fn wait_for_why<F: FnMut() -> Fut, Fut: std::future::Future<Output = Result<(), String>>>(
    what: &str,
    secs: u64,
    every: Duration,
    mut f: F,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut why = String::from("never checked");
    while tokio::time::Instant::now() < deadline {
        match f().await {
            Ok(()) => return,
            Err(e) => why = e,
        }
        tokio::time::sleep(every).await;
    }
    panic!("timed out waiting for {what} after {secs} s; last: {why}");
}
