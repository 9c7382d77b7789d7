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
