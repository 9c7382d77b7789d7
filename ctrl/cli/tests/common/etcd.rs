//! etcd for the suites that need it: started on free ports with its data
//! in a temporary directory, or one skip line when it is not installed.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::serve::{free_port, get, spawn_program as spawn, Proc};

/// Polls `f` every 10 ms until it gives a value, up to `limit`.
pub fn until<T>(
    limit: Duration,
    what: &str,
    logs: &dyn Fn() -> String,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}\n{}", logs());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// etcd on free ports with its data in `dir`; `None` (and one skip line)
/// when it is not installed.
pub fn etcd(dir: &Path, what: &str) -> Option<(Proc, String)> {
    if Command::new("etcd").arg("--version").output().is_err() {
        println!("skip: {what} (etcd not installed; Debian: apt-get install etcd-server)");
        return None;
    }
    let (client, peer) = (free_port(), free_port());
    let (c, p) = (format!("http://127.0.0.1:{client}"), format!("http://127.0.0.1:{peer}"));
    let data = dir.join("etcd-data");
    let cluster = format!("t={p}");
    // A 50 ms heartbeat and 500 ms election timeout make etcd's least
    // lease 1 s (1.5 election timeouts, rounded up), the controller's default.
    let args = [
        "--name",
        "t",
        "--data-dir",
        data.to_str().unwrap(),
        "--listen-client-urls",
        &c,
        "--advertise-client-urls",
        &c,
        "--listen-peer-urls",
        &p,
        "--initial-advertise-peer-urls",
        &p,
        "--initial-cluster",
        &cluster,
        "--heartbeat-interval",
        "50",
        "--election-timeout",
        "500",
    ];
    let log = dir.join("etcd.log");
    let proc = spawn("etcd", &args, &log);
    let addr = SocketAddr::from(([127, 0, 0, 1], client));
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();
    until(Duration::from_secs(30), "etcd healthy", &logs, || {
        get(addr, "/health").contains("true").then_some(())
    });
    Some((proc, format!("etcd://127.0.0.1:{client}")))
}

/// A controller of an HA group (`--mode act`, API on a free port, events
/// and stderr in `dir/NAME.events.jsonl` and `dir/NAME.log`), with `extra`
/// arguments; returns once its API listens: (process, API, events, log).
pub fn ha_controller(
    dir: &Path,
    topo: &Path,
    etcd: &str,
    name: &str,
    extra: &[&str],
) -> (Proc, SocketAddr, PathBuf, PathBuf) {
    let events = dir.join(format!("{name}.events.jsonl"));
    let log = dir.join(format!("{name}.log"));
    let mut args = vec![
        "-v",
        "controller",
        "run",
        topo.to_str().unwrap(),
        "--mode",
        "act",
        "--listen",
        "127.0.0.1:0",
        "--events",
        events.to_str().unwrap(),
        "--ha",
        etcd,
        "--ha-name",
        name,
    ];
    args.extend(extra);
    let mut proc = spawn(env!("CARGO_BIN_EXE_metaroce"), &args, &log);
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    let api = until(Duration::from_secs(60), "the controller's API listens", &text, || {
        if let Ok(Some(st)) = proc.0.try_wait() {
            panic!("controller {name} exited ({st}):\n{}", text());
        }
        text()
            .lines()
            .filter(|l| l.contains("status API listening"))
            .find_map(|l| l.split("addr=").nth(1)?.split_whitespace().next()?.parse().ok())
    });
    (proc, api, events, log)
}
