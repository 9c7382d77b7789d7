//! The L2 harness: `metaroce sim serve` and the real controller, started
//! as users start them, on a copy of the 2x2 Mininet fabric on free ports.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::repo;

#[path = "../../../../tests/support/ports.rs"]
mod ports;
pub use ports::free_port;

/// Waits until every thread of process `pid` is stopped (state `T` in
/// `/proc/PID/task/*/stat`) after a SIGSTOP, up to 2 s: `kill` returns
/// when the signal is sent, and the process may run a little longer.
pub fn wait_stopped(pid: u32) -> bool {
    let tasks = format!("/proc/{pid}/task");
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        let all = std::fs::read_dir(&tasks).is_ok_and(|d| {
            d.flatten().all(|t| {
                let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
                // `pid (comm) S ...`: the state follows the last ')'.
                stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
            })
        });
        if all {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

/// Kills the child when the test ends, however it ends.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `metaroce ARGS` outside the repository, as an installed binary runs
/// (so it must find its program without `p4src/build/`), its stderr in
/// `log`. Every path in `args` is absolute.
pub fn spawn(args: &[&str], log: &Path) -> Proc {
    spawn_program(env!("CARGO_BIN_EXE_metaroce"), args, log)
}

/// Any program (etcd, chromedriver, ...) started the same way.
pub fn spawn_program(program: &str, args: &[&str], log: &Path) -> Proc {
    let err = std::fs::File::create(log).unwrap();
    let outside = std::env::temp_dir();
    assert!(!outside.starts_with(repo()), "{} is inside the repository", outside.display());
    let child = Command::new(program)
        .args(args)
        .current_dir(outside)
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    Proc(child)
}

/// The 2x2 fabric and the shipped scenario `scenario`, on free ports, in `dir`.
pub fn fabric(dir: &Path, scenario: &str) -> (PathBuf, PathBuf, Vec<SocketAddr>) {
    let mut topo = std::fs::read_to_string(repo().join("topologies/mininet-2x2.yaml")).unwrap();
    let mut addrs = vec![];
    for n in 1..=4 {
        let port = free_port();
        topo = topo.replace(&format!("127.0.0.1:5000{n}"), &format!("127.0.0.1:{port}"));
        addrs.push(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    let topo_path = dir.join("fabric.yaml");
    std::fs::write(&topo_path, topo).unwrap();
    let sc = std::fs::read_to_string(repo().join("scenarios").join(scenario)).unwrap();
    let sc = sc.replace("topology: ../topologies/mininet-2x2.yaml", "topology: fabric.yaml");
    let sc_path = dir.join(scenario);
    std::fs::write(&sc_path, sc).unwrap();
    (topo_path, sc_path, addrs)
}

pub fn get(addr: SocketAddr, path: &str) -> String {
    request(addr, "GET", path, None, "")
}

/// One HTTP/1.0 request, with a bearer token if given; the whole answer
/// (status line, headers, body), or "" when nothing answers.
pub fn request(addr: SocketAddr, method: &str, path: &str, token: Option<&str>, body: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let _ = write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: x\r\n{auth}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// The real controller in act mode on `topo`, its API on a free port and
/// its event log and stderr in `dir`, with `extra` arguments.
pub struct Controller {
    pub proc: Proc,
    pub api: SocketAddr,
    pub events: PathBuf,
    pub log: PathBuf,
}

pub fn controller(dir: &Path, topo: &str, extra: &[&str]) -> Controller {
    let events = dir.join("events.jsonl");
    let log = dir.join("controller.log");
    let events_s = events.to_str().unwrap().to_owned();
    // Port 0, then the address it logs: a port picked here and bound there
    // later may be taken in between (by the other test's connections).
    let mut args = vec![
        "-v",
        "controller",
        "run",
        topo,
        "--mode",
        "act",
        "--listen",
        "127.0.0.1:0",
        "--events",
        &events_s,
    ];
    args.extend_from_slice(extra);
    let mut proc = spawn(&args, &log);
    let deadline = Instant::now() + Duration::from_secs(30);
    let api = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let addr = text
            .lines()
            .filter(|l| l.contains("status API listening"))
            .find_map(|l| l.split("addr=").nth(1)?.split_whitespace().next()?.parse::<SocketAddr>().ok());
        if let Some(a) = addr {
            break a;
        }
        if let Ok(Some(st)) = proc.0.try_wait() {
            panic!("the controller exited ({st}) before its API listened:\n{text}");
        }
        assert!(Instant::now() < deadline, "the controller's API did not listen within 30 s:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    Controller { proc, api, events, log }
}

/// Both processes' stderr, for a failing assertion.
pub fn both_logs(serve: &Path, controller: &Path) -> String {
    format!(
        "--- serve\n{}\n--- controller\n{}",
        std::fs::read_to_string(serve).unwrap_or_default(),
        std::fs::read_to_string(controller).unwrap_or_default()
    )
}
