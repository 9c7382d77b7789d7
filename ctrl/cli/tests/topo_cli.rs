//! The `metaroce topo` commands as a user runs them: output, files written
//! and exit codes (0 ok, 1 invalid topology, 2 usage, 3 cannot read/write).

// Tests may panic on what they set up themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{metaroce, repo, text};

use std::path::PathBuf;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("metaroce-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn check_accepts_every_shipped_fabric() {
    let out = metaroce(&[
        "topo",
        "check",
        "topologies/mininet-2x2.yaml",
        "topologies/leaf-spine-4x4.yaml",
        "topologies/fat-tree-k4.yaml",
        "topologies/ai-64x16.yaml",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("topologies/ai-64x16.yaml: ok: 80 switches, 512 hosts, 1024 links"));
}

#[test]
fn check_prints_every_problem_and_exits_1() {
    let bad = tmp("bad.yaml");
    std::fs::write(
        &bad,
        "name: bad\nswitches:\n  - {name: leaf1, role: leaf, device_id: 1, p4rt: \"127.0.0.1:1\"}\n  - {name: leaf2, role: leaf, device_id: 1, p4rt: \"127.0.0.1:2\", colour: red}\nlinks:\n  - {a: \"leaf1:1\", b: \"s9:1\"}\n",
    )
    .unwrap();
    let out = metaroce(&["topo", "check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("bad.yaml:4:66: switches[1]: unknown key \"colour\""), "{t}");
    assert!(t.contains("switches[1].device_id: duplicate device_id 1"), "{t}");
    assert!(t.contains("links[0].b: unknown switch \"s9\""), "{t}");
    assert!(t.contains("has 3 problems"), "{t}");
    let out = metaroce(&["topo", "check", "--json", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["problems"].as_array().map(Vec::len), Some(3));
    assert_eq!(v[0]["problems"][0]["line"], 4);
}

#[test]
fn unreadable_files_exit_3_and_bad_arguments_exit_2() {
    let out = metaroce(&["topo", "check", "no/such/file.yaml"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("cannot read topology file no/such/file.yaml"), "{}", text(&out));
    let out = metaroce(&["topo", "show", "no/such/file.yaml"]);
    assert_eq!(out.status.code(), Some(3));
    let out = metaroce(&["topo", "gen", "hexagon"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = metaroce(&["topo", "gen", "leaf-spine", "--bandwidth", "fast"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("bandwidth \"fast\""), "{}", text(&out));
    let out = metaroce(&["topo", "gen", "fat-tree", "--k", "5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("fat-tree k must be even, got 5"), "{}", text(&out));
}

#[test]
fn every_command_has_help() {
    for cmd in [
        &["--help"][..],
        &["topo", "--help"],
        &["topo", "check", "--help"],
        &["topo", "gen", "--help"],
        &["topo", "paths", "--help"],
        &["topo", "render", "--help"],
        &["topo", "groups", "--help"],
    ] {
        let out = metaroce(cmd);
        assert_eq!(out.status.code(), Some(0), "{cmd:?}: {}", text(&out));
        assert!(text(&out).contains("Usage:"), "{cmd:?}");
    }
    let help = text(&metaroce(&["--help"]));
    assert!(help.contains("Congestion-aware adaptive routing"), "{help}");
    assert!(
        help.contains("Exit codes: 0 success; 1 the topology, scenario, snapshot or P4Info has problems"),
        "{help}"
    );
}

#[test]
fn paths_lists_equal_cost_paths_and_failures_remove_them() {
    let out = metaroce(&["topo", "paths", "topologies/fat-tree-k4.yaml", "h1-1", "10.0.7.2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("4 equal-cost paths from h1-1 (10.0.0.1) to h8-2 (10.0.7.2)"), "{t}");
    let out = metaroce(&[
        "topo",
        "paths",
        "topologies/fat-tree-k4.yaml",
        "h1-1",
        "h8-2",
        "--fail",
        "p1-spine1",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let paths = v["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2);
    assert!(paths.iter().all(|p| p["hops"][1]["switch"] == "p1-spine2"));
    let out = metaroce(&[
        "topo",
        "paths",
        "topologies/mininet-2x2.yaml",
        "h1",
        "h3",
        "--fail",
        "spine1",
        "--fail",
        "spine2",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("cannot reach"));
    let out = metaroce(&["topo", "paths", "topologies/mininet-2x2.yaml", "h1", "hx"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("no host named \"hx\""), "{}", text(&out));
}

#[test]
fn groups_shows_weights() {
    let out = metaroce(&["topo", "groups", "topologies/mininet-2x2.yaml", "--switch", "leaf1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("[3->spine1 w1, 4->spine2 w1]  for 10.0.2.0/24"), "{}", text(&out));
    let out = metaroce(&["topo", "groups", "topologies/mininet-2x2.yaml", "--switch", "leaf9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("did you mean \"leaf1\""), "{}", text(&out));
}

#[test]
fn gen_writes_files_that_check_clean() {
    for (shape, extra) in [
        ("leaf-spine", &["--leaves", "3", "--spines", "2", "--parallel", "2"][..]),
        ("clos3", &["--pods", "2", "--leaves", "2", "--spines", "2", "--supers", "2"]),
        ("fat-tree", &["--k", "6"]),
    ] {
        let file = tmp(&format!("{shape}.yaml"));
        let mut args = vec!["topo", "gen", shape, "-o", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = metaroce(&args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let out = metaroce(&["topo", "check", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
}

#[test]
fn shipped_generated_fabrics_are_reproducible() {
    // The header of each generated file names the command that made it.
    for file in ["topologies/leaf-spine-4x4.yaml", "topologies/fat-tree-k4.yaml", "topologies/ai-64x16.yaml"]
    {
        let committed = std::fs::read_to_string(repo().join(file)).unwrap();
        let cmd = committed.lines().next().and_then(|l| l.strip_prefix("# Generated by: metaroce ")).unwrap();
        let out = metaroce(&cmd.split_whitespace().collect::<Vec<_>>());
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(String::from_utf8_lossy(&out.stdout) == committed, "{file} differs from `metaroce {cmd}`");
    }
}

/// A controller of one shipped fabric must never find another's switches
/// where it looks for its own (two fabrics once shared 127.0.0.1:50001-4),
/// nor read another's registers over Thrift; and no switch takes 9100,
/// the port the README's examples give the controller's `--listen`.
#[test]
fn shipped_fabrics_use_distinct_p4rt_addresses() {
    let mut owner: std::collections::BTreeMap<String, String> = Default::default();
    let mut thrift: std::collections::BTreeMap<u16, String> = Default::default();
    let mut files = 0;
    for entry in std::fs::read_dir(repo().join("topologies")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        files += 1;
        let topo = metaroce_topo::load_file(&path).unwrap();
        for sw in &topo.switches {
            let was = owner.insert(sw.p4rt.clone(), topo.name.clone());
            assert!(was.is_none(), "{} is used by {} and {}", sw.p4rt, topo.name, was.unwrap_or_default());
            if let Some(port) = sw.thrift_port {
                assert_ne!(port, 9100, "{}: {} takes the README's API port", topo.name, sw.name);
                let was = thrift.insert(port, topo.name.clone());
                assert!(
                    was.is_none(),
                    "Thrift port {port} is used by {} and {}",
                    topo.name,
                    was.unwrap_or_default()
                );
            }
        }
    }
    assert!(files >= 6, "the shipped topologies were found ({files})");
}

#[test]
fn render_draws_the_fabric() {
    let svg = tmp("fabric.svg");
    let out = metaroce(&[
        "topo",
        "render",
        "topologies/fat-tree-k4.yaml",
        "-o",
        svg.to_str().unwrap(),
        "--fail",
        "p1-leaf1:3",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let body = std::fs::read_to_string(&svg).unwrap();
    assert!(
        body.starts_with("<svg") && body.contains(">p4-spine2</text>") && body.contains("stroke-dasharray")
    );
    let out = metaroce(&["topo", "render", "topologies/fat-tree-k4.yaml", "-o", "/no/such/dir/x.svg"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out).contains("cannot write /no/such/dir/x.svg"), "{}", text(&out));
}

#[test]
fn schema_matches_the_committed_file() {
    let out = metaroce(&["topo", "schema"]);
    assert_eq!(out.status.code(), Some(0));
    let committed = std::fs::read_to_string(repo().join("topologies/schema.json")).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), committed);
}
