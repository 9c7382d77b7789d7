//! L0: periodic jobs in time through the core: two announced
//! permutations that fill the same oversubscribed uplinks get offsets a
//! communication phase apart, each placed over its own links; a job
//! whose measured phase drifts gets its offset re-issued with a note.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use metaroce_core::place::LargeFlowReport;
use metaroce_core::{Core, CoreConfig, Input, Mode, NoteKind};
use serde_json::{json, Value};

fn core() -> Core {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../topologies/leaf-spine-4x2-oversub.yaml");
    let topo = metaroce_topo::load_file(&path).unwrap();
    let mut core = Core::new(topo, CoreConfig::default(), Mode::Act).unwrap();
    core.decide(0);
    core
}

/// A shift-1 permutation over `hosts` (every flow crosses leaves), 2 MiB
/// a flow, 0.4 ms of compute unless `extra` says otherwise.
fn body(name: &str, col: [u32; 2], extra: Value) -> Value {
    let hosts: Vec<String> = col.iter().flat_map(|c| (1..=4).map(move |l| format!("h{l}-{c}"))).collect();
    let mut b = json!({"name": name, "pattern": "permutation", "hosts": hosts, "shift": 1, "bytes": 2097152, "compute_ms": 0.4});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

fn offset_ms(core: &Core, name: &str) -> f64 {
    core.placement().job_timing(name).unwrap()["recommended_offset_ms"].as_f64().unwrap()
}

#[test]
fn two_jobs_that_share_the_uplinks_are_staggered() {
    let mut core = core();
    core.register_job(0, &body("a", [1, 2], json!({}))).unwrap();
    core.decide_placement(0);
    core.register_job(0, &body("b", [3, 4], json!({}))).unwrap();
    let step = core.decide_placement(0);
    let note = step.placement.as_ref().and_then(|p| p.phase.clone()).expect("a phase plan note");
    assert_eq!(note.kind, NoteKind::JobPhasePlan);
    let t = core.placement().job_timing("b").unwrap();
    assert_eq!(t["verdict"], "staggered", "{t}");
    assert_eq!(offset_ms(&core, "a"), 0.0);
    // 2 MiB at 100 Gb/s: 0.168 ms; b waits at least that long.
    let b = offset_ms(&core, "b");
    assert!((0.16..=0.4).contains(&b), "{t}");
    let with = t["expected_iteration_ms"]["with_offset"].as_f64().unwrap();
    let without = t["expected_iteration_ms"]["without"].as_f64().unwrap();
    assert!(with < without, "{t}");
    // The jobs document carries the recommendation too.
    let doc = core.jobs_doc();
    assert_eq!(doc["jobs"][1]["recommendation"]["verdict"], "staggered");
}

#[test]
fn a_fixed_job_is_not_shifted_and_the_other_goes_around_it() {
    let mut core = core();
    core.register_job(0, &body("a", [1, 2], json!({"offset": "fixed", "start_ms": 0.1}))).unwrap();
    core.decide_placement(0);
    core.register_job(0, &body("b", [3, 4], json!({}))).unwrap();
    core.decide_placement(0);
    assert_eq!(offset_ms(&core, "a"), 0.0);
    let b = offset_ms(&core, "b");
    // a communicates over [0.1, 0.27) ms of each period: b starts after it.
    assert!(b >= 0.26, "b offset {b}");
}

#[test]
fn a_phase_that_drifts_gets_its_offset_reissued() {
    // A period of 20 ms, long against the report window (1 ms).
    let mut core = core();
    core.register_job(0, &body("a", [1, 2], json!({"compute_ms": 20}))).unwrap();
    core.decide_placement(0);
    core.register_job(0, &body("b", [3, 4], json!({"compute_ms": 20}))).unwrap();
    core.decide_placement(0);
    let period_ns = (core.placement().job_timing("a").unwrap()["period_ms"].as_f64().unwrap() * 1e6) as u64;
    // a's flow h1-1 → h2-1 reported a third of a period late.
    let late = period_ns + period_ns / 3;
    let topo = core.topology();
    let (src, dst) = (topo.hosts[0].ip, topo.hosts[4].ip);
    let report = || {
        Input::LargeFlow(LargeFlowReport {
            switch: 0,
            src,
            dst,
            sport: 49152,
            qp: 17,
            egress_port: 5,
            bytes: 100_000,
            window_ns: 1_000_000,
            collision: false,
        })
    };
    let step = core.handle(late, &report());
    let notes: Vec<_> = step.notes.iter().filter(|n| n.kind == NoteKind::JobPhaseDrift).collect();
    assert_eq!(notes.len(), 1, "{:?}", step.notes);
    let t = core.placement().job_timing("a").unwrap();
    assert_eq!(t["measured_phase_starts_ns"].as_array().unwrap().len(), 1);
    assert_eq!(t["plans_issued"], 3);
}
