//! Helpers the CLI suites share: running the binary as a user does.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod etcd;
pub mod serve;
pub mod webdriver;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (the binary's default program is built in; tests
/// read the committed files here to compare).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Runs `metaroce ARGS` from the repository root and waits for it.
pub fn metaroce(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_metaroce"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run metaroce: {e}"))
}

/// Runs `metaroce ARGS` from a directory outside the repository, as an
/// installed binary runs: paths in `args` must be absolute.
pub fn metaroce_outside(args: &[&str]) -> Output {
    let outside = std::env::temp_dir();
    assert!(!outside.starts_with(repo()), "{} is inside the repository", outside.display());
    Command::new(env!("CARGO_BIN_EXE_metaroce"))
        .args(args)
        .current_dir(outside)
        .output()
        .unwrap_or_else(|e| panic!("cannot run metaroce: {e}"))
}

/// Everything it printed, stdout then stderr.
pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// `n` in-process P4Runtime switches (device ids from 1) on free ports,
/// each with `options(id)`; they stop when `true` is sent on the sender.
pub async fn in_process_switches(
    n: u64,
    options: impl Fn(u64) -> metaroce_p4rt::server::SwitchOptions,
) -> (Vec<metaroce_p4rt::server::Switch>, Vec<std::net::SocketAddr>, tokio::sync::watch::Sender<bool>) {
    metaroce_p4rt::server::start_local((1..=n).map(options)).await.unwrap()
}

/// Our program as the repository builds it.
pub fn pipeline() -> metaroce_pipeline::Pipeline {
    let dir = repo().join("p4src/build");
    metaroce_pipeline::Pipeline::load(&dir.join("main.p4info.txtpb"), &dir.join("main.json")).unwrap()
}

/// What a served switch holds, and whose election id is primary there
/// (read with election id 1, below every controller's).
pub async fn read_switch(
    addr: std::net::SocketAddr,
    device_id: u64,
    p: &metaroce_pipeline::Pipeline,
) -> (std::collections::BTreeMap<metaroce_pipeline::Key, metaroce_pipeline::Entry>, Option<u128>) {
    let mut cfg = metaroce_p4rt::SessionConfig::new(format!("http://{addr}"), device_id);
    cfg.election_id = 1;
    let Ok(s) = metaroce_p4rt::Session::connect(cfg).await else { return (Default::default(), None) };
    let entries = p.read_installed(&s).await.map(|i| i.entries).unwrap_or_default();
    (entries, s.role().election_id)
}

/// Whose election id is primary on a served switch, without reading its
/// entries (a backup session with election id 1 learns it on arbitration).
pub async fn primary_of(addr: std::net::SocketAddr, device_id: u64) -> Option<u128> {
    let mut cfg = metaroce_p4rt::SessionConfig::new(format!("http://{addr}"), device_id);
    cfg.election_id = 1;
    metaroce_p4rt::Session::connect(cfg).await.ok()?.role().election_id
}

/// The JSON lines of a file (an event log); lines that do not parse are skipped.
pub fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The last `n` lines of each `dir/NAME.log`, for a failing assertion.
pub fn log_tails(dir: &Path, names: &'static [&'static str], n: usize) -> impl Fn() -> String {
    let dir = dir.to_path_buf();
    move || {
        let mut out = String::new();
        for name in names {
            let text = std::fs::read_to_string(dir.join(format!("{name}.log"))).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out += &format!("--- {name}\n{}\n", lines[lines.len().saturating_sub(n)..].join("\n"));
        }
        out
    }
}
