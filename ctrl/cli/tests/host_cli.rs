//! `metaroce host export|scrape` and `metaroce doctor` as a user runs them,
//! against fixture sysfs trees given with `--sysfs-root`; servers listen
//! on loopback only.

// Tests may panic on what they set up themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{metaroce, text};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use metaroce_host::fixture;

/// A fresh fixture root with an mlx5 device and a Soft-RoCE device,
/// removed when the test ends.
fn root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fixture::write_mlx5(dir.path(), "mlx5_0", "enp1s0f0np0", 9000).unwrap();
    fixture::write_rxe(dir.path(), "rxe0", "eth1", 9000).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn host_commands_have_help() {
    for cmd in [
        &["host", "--help"][..],
        &["host", "export", "--help"],
        &["host", "scrape", "--help"],
        &["doctor", "--help"],
    ] {
        let out = metaroce(cmd);
        assert_eq!(out.status.code(), Some(0), "{cmd:?}: {}", text(&out));
        assert!(text(&out).contains("Usage:"), "{cmd:?}");
    }
    assert!(text(&metaroce(&["doctor", "--help"])).contains("Exit codes: 0 no check failed"));
}

#[test]
fn export_once_prints_openmetrics_from_the_fixture() {
    let tmp = root();
    let r = tmp.path();
    let out = metaroce(&["host", "export", "--once", "--host", "h1", "--sysfs-root", s(r)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(body.contains(
        "metaroce_rdma_counter_total{host=\"h1\",device=\"mlx5_0\",port=\"1\",source=\"hw_counters\",counter=\"np_cnp_sent\"}"
    ));
    assert!(body.contains("device=\"rxe0\",port=\"1\",source=\"hw_counters\",counter=\"sent_pkts\""));
    assert!(
        body.contains("metaroce_rdma_port_active{host=\"h1\",device=\"rxe0\",port=\"1\",netdev=\"eth1\"} 1")
    );
    assert!(body.trim_end().ends_with("# EOF"));
}

#[test]
fn doctor_json_on_a_fixture_and_exit_codes() {
    let tmp = root();
    let r = tmp.path();
    let out = metaroce(&["doctor", "--json", "--window", "10ms", "--sysfs-root", s(r)]);
    assert_eq!(out.status.code(), Some(0), "warnings only: {}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["fail"], 0);
    let checks = v["checks"].as_array().unwrap();
    assert!(checks.iter().any(|c| c["check"] == "gid.roce_v2" && c["status"] == "PASS"));
    assert!(checks.iter().all(|c| c["reason"].as_str().is_some_and(|r| !r.is_empty())));

    fixture::set(r, "class/infiniband/mlx5_0/ports/1/state", "1: DOWN").unwrap();
    let out = metaroce(&["doctor", "--window", "10ms", "--sysfs-root", s(r)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("FAIL  port.active  mlx5_0/1"), "{report}");
    assert!(report.contains("fix: bring the link up"), "{report}");

    let out = metaroce(&["doctor", "--sysfs-root", "/nonexistent/sys"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("--sysfs-root /nonexistent/sys: not a directory"));
}

#[test]
fn fixture_command_writes_a_tree_doctor_can_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sys");
    let out = metaroce(&["host", "fixture", s(&dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = metaroce(&["doctor", "--window", "10ms", "--sysfs-root", s(&dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("PASS  rdma.devices"));
    let out = metaroce(&["host", "fixture", s(&dir)]);
    assert_eq!(out.status.code(), Some(2), "an existing directory is not overwritten");
}

#[test]
fn export_csv_that_cannot_be_opened_names_the_file() {
    let tmp = root();
    let r = tmp.path();
    let out = metaroce(&["host", "export", "--once", "--sysfs-root", s(r), "--csv", s(r)]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains(&format!("cannot append CSV to {}", r.display())), "{}", text(&out));
}

/// Kills the exporter when the test ends, pass or fail.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn scrape_reads_a_running_exporter() {
    let tmp = root();
    let r = tmp.path();
    let addr = format!("127.0.0.1:{}", common::serve::free_port());
    let _child = Child(
        Command::new(env!("CARGO_BIN_EXE_metaroce"))
            .args([
                "host",
                "export",
                "--listen",
                &addr,
                "--interval",
                "100ms",
                "--host",
                "h7",
                "--sysfs-root",
                s(r),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut last = String::new();
    for _ in 0..100 {
        let out = metaroce(&["host", "scrape", &addr, "--timeout", "1s"]);
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["host"], "h7");
            assert_eq!(v["devices"]["mlx5_0"]["netdev"], "enp1s0f0np0");
            assert!(v["devices"]["mlx5_0"]["cnp_sent"]["total"].as_u64().is_some());
            assert!(v["devices"]["rxe0"]["cnp_sent"].is_null());
            return;
        }
        last = text(&out);
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the exporter never answered: {last}");
}
