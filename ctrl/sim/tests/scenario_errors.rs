//! Bad scenarios get clear errors that say where.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use metaroce_sim::{scenario, SimError};

#[test]
fn unknown_hosts_are_named_with_a_suggestion_and_position() {
    let r = problems("jobs:\n  - {name: a, pattern: all-to-all, hosts: [h1-1, h9-1, h1-2], size: 1MiB}\n");
    assert!(r.contains("bad.yaml:2:"), "{r}");
    assert!(r.contains("jobs[0].hosts[1]"), "{r}");
    assert!(r.contains("unknown host \"h9-1\""), "{r}");
    assert!(r.contains("did you mean"), "{r}");
    let r = problems("jobs: [{pattern: incast, hosts: all, target: spine1, size: 1MiB}]");
    assert!(r.contains("jobs[0].target") && r.contains("is a switch, not a host"), "{r}");
    let r = problems("jobs: [{pattern: all-to-all, hosts: \"x*\", size: 1MiB}]");
    assert!(r.contains("matches no host"), "{r}");
}

#[test]
fn impossible_values_are_refused() {
    let r = problems("jobs: [{pattern: all-to-all, hosts: all, size: 0B}]");
    assert!(r.contains("jobs[0].size") && r.contains("zero bytes"), "{r}");
    let r = problems("jobs: [{pattern: all-to-all, hosts: all, size: 1MiB, rate: 400Gbps}]");
    assert!(r.contains("jobs[0].rate") && r.contains("impossible") && r.contains("100Gbps NIC"), "{r}");
    let r = problems("network: {mtu: 20000B}\njobs: [{pattern: all-to-all, hosts: all, size: 1MiB}]");
    assert!(r.contains("network.mtu") && r.contains("impossible"), "{r}");
    let r = problems(
        "network: {pfc: {xoff: 10pkt, xon: 20pkt}}\njobs: [{pattern: all-to-all, hosts: all, size: 1MiB}]",
    );
    assert!(r.contains("xon") && r.contains("below xoff"), "{r}");
    let r = problems("limits: {time: 0ns}\njobs: [{pattern: all-to-all, hosts: all, size: 1MiB}]");
    assert!(r.contains("limits.time"), "{r}");
    let r = problems("jobs: [{pattern: all-to-all, hosts: all, size: 1MiB, count: 9}]");
    assert!(r.contains("count 9 is more than the 4 hosts"), "{r}");
    let r = problems("jobs: [{pattern: permutation, hosts: all, size: 1MiB, shift: 4}]");
    assert!(r.contains("maps every rank to itself"), "{r}");
}

#[test]
fn inconsistent_with_the_topology() {
    let r = problems("pcap: [leaf1:99, lef1:3]\njobs: [{pattern: all-to-all, hosts: all, size: 1MiB}]");
    assert!(r.contains("pcap[0]") && r.contains("no link on port 99"), "{r}");
    assert!(r.contains("pcap[1]") && r.contains("did you mean \"leaf1\""), "{r}");
    let r = problems("jobs: [{pattern: ring-allreduce, hosts: [h1-1], size: 1MiB}]");
    assert!(r.contains("needs at least 2 hosts"), "{r}");
    let r = problems("jobs: [{pattern: all-to-all, hosts: [h1-1, h1-1], size: 1MiB}]");
    assert!(r.contains("listed twice"), "{r}");
}

#[test]
fn every_problem_is_reported_at_once_with_typo_hints() {
    let r = problems(
        "modes: [ecmp, hashing]\nnetwrok: {}\njobs:\n  - {pattern: all-to-al, hosts: all, size: 1MiB}\n  - {pattern: incast, hosts: all, size: 1MiB}\n",
    );
    assert!(r.contains("modes[1]") && r.contains("unknown routing mode \"hashing\""), "{r}");
    assert!(r.contains("unknown field \"netwrok\"; did you mean \"network\"?"), "{r}");
    assert!(r.contains("did you mean \"all-to-all\"?"), "{r}");
    assert!(r.contains("jobs[1]") && r.contains("needs a \"target\""), "{r}");
    assert!(r.lines().count() >= 4, "{r}");
    let r = problems("seed: 1\n");
    assert!(r.contains("missing field \"jobs\""), "{r}");
    let r = problems("- just\n- a list\n");
    assert!(r.contains("a scenario is a mapping"), "{r}");
}

#[test]
fn files_name_their_topology_relative_to_themselves() {
    let dir = std::env::temp_dir().join(format!("metaroce-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sc")).unwrap();
    let topo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/leaf-spine-4x4.yaml");
    std::fs::copy(topo, dir.join("fabric.yaml")).unwrap();
    std::fs::write(
        dir.join("sc/ok.yaml"),
        "topology: ../fabric.yaml\njobs: [{pattern: incast, hosts: \"h2-*\", target: h1-1, size: 64KiB}]",
    )
    .unwrap();
    let l = scenario::load_file(&dir.join("sc/ok.yaml")).unwrap();
    assert_eq!(l.scenario.jobs[0].ranks.len(), 4);
    std::fs::write(dir.join("sc/missing.yaml"), "topology: nowhere.yaml\njobs: []").unwrap();
    let e = scenario::load_file(&dir.join("sc/missing.yaml")).unwrap_err();
    assert!(matches!(e, SimError::Topology { .. }), "{e}");
    assert!(e.report().contains("nowhere.yaml"), "{}", e.report());
    std::fs::write(dir.join("sc/none.yaml"), "jobs: []").unwrap();
    let e = scenario::load_file(&dir.join("sc/none.yaml")).unwrap_err();
    assert!(e.report().contains("missing field \"topology\""), "{}", e.report());
    let e = scenario::load_file(&dir.join("sc/absent.yaml")).unwrap_err();
    assert!(matches!(e, SimError::Io { .. }));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn iterations_ordering_and_announce_are_checked_where_they_are_written() {
    let r = problems("nic: {ordering: in-order}\njobs: [{pattern: all-to-all, hosts: all, size: 1MiB}]");
    assert!(r.contains("bad.yaml:1:") && r.contains("nic.ordering"), "{r}");
    assert!(r.contains("unknown NIC ordering \"in-order\"") && r.contains("go-back-n"), "{r}");
    let r = problems(
        "network:\n  dcqcn: {clamp: after_timer}\njobs: [{pattern: all-to-all, hosts: all, size: 1MiB}]",
    );
    assert!(r.contains("bad.yaml:2:") && r.contains("network.dcqcn.clamp"), "{r}");
    assert!(
        r.contains("unknown DCQCN clamp \"after_timer\"") && r.contains("did you mean \"after-timer\""),
        "{r}"
    );
    let r = problems("jobs:\n  - {pattern: all-to-all, hosts: all, size: 1MiB, iterations: 0}\n");
    assert!(r.contains("bad.yaml:2:") && r.contains("jobs[0].iterations") && r.contains("at least 1"), "{r}");
    let r =
        problems("jobs:\n  - {pattern: all-to-all, hosts: all, size: 1MiB, iterations: 3, compute: -5us}\n");
    assert!(r.contains("bad.yaml:2:") && r.contains("jobs[0].compute") && r.contains("negative"), "{r}");
    let r = problems(
        "modes: [ecmp, spray]\njobs:\n  - {pattern: all-to-all, hosts: all, size: 1MiB, announce: true}\n",
    );
    assert!(r.contains("bad.yaml:3:") && r.contains("jobs[0].announce") && r.contains("metaroce"), "{r}");
    // With a controller, or announce: false, it is fine.
    let topo = leaf_spine(2, 2, 2, 100);
    let ok = "modes: [ecmp, metaroce]\nnic: {ordering: out-of-order}\njobs:\n  - {pattern: all-to-all, hosts: all, size: 1MiB, announce: true, iterations: 4, compute: 10us}\n";
    let sc = scenario::load_str(ok, "ok.yaml", &topo).unwrap_or_else(|e| panic!("{}", e.report()));
    assert!(sc.jobs[0].announce && sc.jobs[0].iterations == 4 && sc.jobs[0].compute_ps == 10_000_000);
    assert_eq!(sc.net.ordering, metaroce_sim::Ordering::OutOfOrder);
    let quiet = "modes: [ecmp]\njobs: [{pattern: all-to-all, hosts: all, size: 1MiB, announce: false}]";
    let sc = scenario::load_str(quiet, "ok.yaml", &topo).unwrap_or_else(|e| panic!("{}", e.report()));
    assert_eq!((sc.jobs[0].iterations, sc.net.ordering), (1, metaroce_sim::Ordering::GoBackN));
}

#[test]
fn timing_fields_are_checked_with_their_positions() {
    // offset: fixed on a job nobody announces, an unknown offset, a jitter
    // out of range and one without compute phases: every problem at once.
    let r = problems(
        "modes: [ecmp, metaroce]\njobs:\n  - {name: a, pattern: all-to-all, hosts: all, size: 1MiB, iterations: 3, compute: 10us, offset: fixed}\n  - {name: b, pattern: all-to-all, hosts: all, size: 1MiB, iterations: 3, compute: 10us, announce: true, offset: fxed}\n  - {name: c, pattern: all-to-all, hosts: all, size: 1MiB, iterations: 3, compute: 10us, compute_jitter: 80%}\n  - {name: d, pattern: all-to-all, hosts: all, size: 1MiB, compute_jitter: 5%}\n",
    );
    assert!(
        r.contains("bad.yaml:3:") && r.contains("jobs[0].offset") && r.contains("only an announced job"),
        "{r}"
    );
    assert!(
        r.contains("bad.yaml:4:") && r.contains("jobs[1].offset") && r.contains("unknown offset \"fxed\""),
        "{r}"
    );
    assert!(r.contains("did you mean"), "{r}");
    assert!(r.contains("jobs[2].compute_jitter") && r.contains("out of range"), "{r}");
    assert!(r.contains("jobs[3].compute_jitter") && r.contains("give \"iterations\" above 1"), "{r}");
}
