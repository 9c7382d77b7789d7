//! L1: recorded controller inputs replayed through the core against golden
//! outputs. `UPDATE_GOLDEN=1 cargo test -p metaroce-controller --test replay`
//! rewrites the goldens after an intended change; review the diff.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use metaroce_controller::core::CoreConfig;
use metaroce_controller::mode::Mode;
use metaroce_controller::replay;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/replay")
}

fn check(recording: &str, topology: &str, mode: Mode) {
    let topo = metaroce_topo::load_file(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../topologies").join(topology),
    )
    .unwrap();
    let inputs = replay::parse(&std::fs::read_to_string(dir().join(recording)).unwrap()).unwrap();
    let out = replay::run(topo, CoreConfig::default(), mode, &inputs).unwrap();
    let text = serde_json::to_string_pretty(&out).unwrap() + "\n";
    let golden = dir().join(format!("{}.{mode}.golden.json", recording.trim_end_matches(".jsonl")));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&golden)
        .unwrap_or_else(|_| panic!("{} is missing; run with UPDATE_GOLDEN=1", golden.display()));
    assert!(
        want == text,
        "{} differs from the replay; if intended, regenerate with UPDATE_GOLDEN=1:\n{text}",
        golden.display()
    );
}

#[test]
fn congestion_cooldown_and_failures_in_act_mode() {
    check("congestion-2x2.jsonl", "mininet-2x2.yaml", Mode::Act);
}

#[test]
fn observe_mode_decides_the_same_but_plans_no_reroute() {
    check("congestion-2x2.jsonl", "mininet-2x2.yaml", Mode::Observe);
}

#[test]
fn jobs_and_large_flows_are_placed_with_steer_entries_in_act_mode() {
    check("jobs-2x2.jsonl", "mininet-2x2.yaml", Mode::Act);
}

#[test]
fn observe_mode_plans_the_placement_but_writes_no_steer_entry() {
    check("jobs-2x2.jsonl", "mininet-2x2.yaml", Mode::Observe);
}

#[test]
fn a_replay_is_deterministic() {
    let topo = metaroce_topo::load_file(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../topologies/mininet-2x2.yaml"),
    )
    .unwrap();
    let inputs =
        replay::parse(&std::fs::read_to_string(dir().join("congestion-2x2.jsonl")).unwrap()).unwrap();
    let a = replay::run(topo.clone(), CoreConfig::default(), Mode::Act, &inputs).unwrap();
    let b = replay::run(topo, CoreConfig::default(), Mode::Act, &inputs).unwrap();
    assert_eq!(a, b);
}

#[test]
fn bad_recordings_name_the_line() {
    let e = replay::parse(
        "{\"t_ns\": 5, \"input\": {\"kind\": \"tick\"}}\n{\"t_ns\": 1, \"input\": {\"kind\": \"tick\"}}",
    )
    .unwrap_err();
    assert!(e.to_string().contains("line 2"), "{e}");
    let e = replay::parse("\n{\"t_ns\": 5, \"input\": {\"kind\": \"teleport\"}}").unwrap_err();
    assert!(e.to_string().starts_with("line 2: input:"), "{e}");
    assert!(replay::parse("not json").is_err());
}

#[test]
fn a_flow_that_has_not_moved_is_counted_where_it_is_seen_before_new_flows_are_placed() {
    check("stuck-2x2.jsonl", "mininet-2x2.yaml", Mode::Act);
}
