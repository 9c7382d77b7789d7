//! `metaroce sim run` as a user runs it: a small incast scenario on the
//! Mininet-sized fabric in two modes, the files it writes, the analytic
//! bound it must meet, determinism, and bad scenarios with their exit code.

// Tests may panic on what they set up themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{metaroce, metaroce_outside, repo, text};

use std::path::{Path, PathBuf};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("metaroce-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Three hosts send 64 KiB each to h4 over 100 Mbit/s links.
fn scenario(name: &str, target: &str) -> PathBuf {
    let topo = repo().join("topologies/mininet-2x2.yaml").canonicalize().unwrap();
    let p = tmp(name);
    std::fs::write(
        &p,
        format!(
            "name: tiny-incast\ntopology: {}\nseed: 3\nmodes: [ecmp, flowlet]\n\
             limits: {{time: 200ms, events: 10000000}}\n\
             jobs:\n  - {{name: incast, pattern: incast, hosts: [h1, h2, h3], target: {target}, size: 64KiB}}\n",
            topo.display()
        ),
    )
    .unwrap();
    p
}

#[test]
fn incast_runs_in_both_modes_meets_its_bound_and_writes_report_and_plots() {
    let s = scenario("incast.yaml", "h4");
    let out_dir = tmp("out");
    let out = metaroce(&[
        "sim",
        "run",
        s.to_str().unwrap(),
        "--modes",
        "ecmp,flowlet",
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    for f in
        ["report.json", "report.md", "fct-cdf.svg", "utilization.svg", "queue-ecmp.svg", "queue-flowlet.svg"]
    {
        assert!(out_dir.join(f).exists(), "{f} missing");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap()).unwrap();
    let modes = report["modes"].as_array().unwrap();
    assert_eq!(modes.iter().map(|m| m["mode"].as_str().unwrap()).collect::<Vec<_>>(), ["ecmp", "flowlet"]);
    // N·S/B: 3 × 64 KiB at 100 Mbit/s into h4 is 15.7 ms of payload.
    let payload_us = 3.0 * 65536.0 * 8.0 / 100e6 * 1e6;
    for m in modes {
        let job = &m["jobs"][0];
        let (done, ideal) = (job["completion_us"].as_f64().unwrap(), job["ideal_us"].as_f64().unwrap());
        assert!(ideal >= payload_us && ideal < payload_us * 1.1, "ideal {ideal} µs vs payload {payload_us}");
        assert!(
            done >= ideal * 0.999 && done < ideal * 1.5,
            "{}: completion {done} µs, ideal {ideal}",
            m["mode"]
        );
        assert_eq!(m["drops"], 0, "the lossless fabric drops nothing");
        assert_eq!(job["pairs"], serde_json::json!([["h1", "h4"], ["h2", "h4"], ["h3", "h4"]]));
    }
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("ecmp") && md.contains("flowlet"));
}

#[test]
fn the_same_seed_gives_the_same_report() {
    let s = scenario("again.yaml", "h4");
    let (a, b) = (tmp("a"), tmp("b"));
    for d in [&a, &b] {
        let out = metaroce(&["sim", "run", s.to_str().unwrap(), "-o", d.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let read = |d: &Path| std::fs::read_to_string(d.join("report.json")).unwrap();
    assert_eq!(read(&a), read(&b));
}

#[test]
fn a_bad_scenario_is_refused_with_its_location_and_exit_1() {
    let s = scenario("bad.yaml", "h9");
    let out = metaroce(&["sim", "run", s.to_str().unwrap(), "-o", tmp("bad-out").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("bad.yaml:7:") && t.contains("h9"), "{t}");
    let missing = metaroce(&["sim", "run", "/nonexistent/scenario.yaml"]);
    assert_eq!(missing.status.code(), Some(3), "{}", text(&missing));
}

#[test]
fn controller_policy_flags_are_validated_before_any_switch_is_touched() {
    let out = metaroce(&[
        "controller",
        "run",
        "topologies/mininet-2x2.yaml",
        "--hold-up-ms",
        "100",
        "--hold-down-ms",
        "10",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("hold_down_ns"), "{}", text(&out));
    let out =
        metaroce(&["controller", "run", "topologies/mininet-2x2.yaml", "--max-share-growth-permille", "900"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("max_share_growth_permille"), "{}", text(&out));
    let out = metaroce(&[
        "controller",
        "run",
        "topologies/mininet-2x2.yaml",
        "--p4info",
        "/nonexistent.txtpb",
        "--device-config",
        "p4src/build/main.json",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("/nonexistent.txtpb") && text(&out).contains("--p4info"), "{}", text(&out));
}

/// Run from outside the repository: the shipped scenario names its
/// topology relative to itself (`../topologies/...`).
#[test]
fn the_link_failure_scenario_compares_three_modes_with_the_control_plane() {
    let out_dir = tmp("link-failure");
    let sc = repo().join("scenarios/link-failure.yaml");
    let out = metaroce_outside(&["sim", "run", sc.to_str().unwrap(), "-o", out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    for mode in ["ecmp", "flowlet", "metaroce"] {
        assert!(err.contains(&format!("sim {mode}: running scenario link-failure")), "{err}");
        let plot = out_dir.join(format!("queue-{mode}.svg"));
        assert!(plot.exists() && err.contains(&format!("sim: plot {}", plot.display())), "{err}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap()).unwrap();
    let modes = report["modes"].as_array().unwrap();
    let failover = |i: usize| modes[i]["control"]["failover"]["min_us"].as_f64().unwrap();
    assert_eq!(modes[2]["mode"], "metaroce");
    assert_eq!(failover(0), 10_000.0, "ecmp waits for routing to converge");
    assert!((650.0..800.0).contains(&failover(2)), "metaroce: digest + decision + write");
    assert!(modes[2]["control"]["group_writes"].as_u64().unwrap() > 0);
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        md.contains("## Control plane") && md.contains("link failure → routes around it in place"),
        "{md}"
    );
}
