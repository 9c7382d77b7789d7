//! Jobs staggered in time (issue 34): the shipped scenarios
//! `staggered-*` and `staggering-cannot-help`, on several seeds, and no
//! shipped scenario whose jobs are slower for the offsets the scheduler
//! took (each run again with every job `offset: fixed`, so none is
//! taken).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::shipped as load;
use metaroce_sim::{scenario, RoutingMode, Summary};
use metaroce_topo::Routing;

fn run(l: &scenario::Loaded, routing: &Routing, sc: &metaroce_sim::Scenario) -> Summary {
    let r = metaroce_sim::run_mode(&l.topology, routing, sc, RoutingMode::Metaroce, &mut |_| {}).unwrap();
    assert!(r.summary.stopped.is_none() && r.summary.unfinished_messages == 0);
    r.summary
}

/// The slowest iteration from the second on, over its ideal.
fn worst_later(s: &Summary, j: usize) -> f64 {
    s.jobs[j].iterations[1..].iter().map(|i| i.slowdown.unwrap()).fold(0.0, f64::max)
}

fn on_seeds(name: &str, seeds: std::ops::RangeInclusive<u64>) -> Vec<Summary> {
    let (l, routing) = load(name);
    seeds
        .map(|seed| {
            let mut sc = l.scenario.clone();
            sc.reseed(&l.topology, seed);
            run(&l, &routing, &sc)
        })
        .collect()
}

#[test]
fn two_jobs_that_fit_only_staggered_run_at_ideal_with_jitter() {
    for name in ["staggered-two-jobs.yaml", "staggered-jitter.yaml"] {
        for s in on_seeds(name, 1..=4) {
            assert!(s.jobs[0].offset_us == 0.0 && s.jobs[1].offset_us > 0.0, "{name}: offsets");
            for j in 0..2 {
                let w = worst_later(&s, j);
                assert!(w <= 1.10, "{name} job {}: iterations 2+ at {w:.3}x", s.jobs[j].name);
            }
        }
    }
}

#[test]
fn three_jobs_go_around_the_fixed_one() {
    for s in on_seeds("staggered-three-jobs.yaml", 1..=2) {
        assert_eq!(s.jobs[0].offset_us, 0.0, "a is fixed");
        assert!(s.jobs[1].offset_us > 0.0 && s.jobs[2].offset_us > 0.0);
        assert_ne!(s.jobs[1].offset_us, s.jobs[2].offset_us);
        for j in 0..3 {
            assert!(worst_later(&s, j) <= 1.10, "job {}: {:.3}", s.jobs[j].name, worst_later(&s, j));
        }
    }
}

#[test]
fn where_staggering_cannot_help_no_offset_is_taken() {
    for s in on_seeds("staggering-cannot-help.yaml", 1..=2) {
        assert!(s.jobs.iter().all(|j| j.offset_us == 0.0));
        // The two jobs share the uplinks: each about twice its ideal.
        assert!(worst_later(&s, 0) > 1.5);
    }
}

#[test]
fn no_shipped_scenario_is_slower_for_an_offset() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    let mut compared = 0;
    for name in names {
        let (l, routing) = load(&name);
        if !l.scenario.modes.contains(&RoutingMode::Metaroce) || !l.scenario.jobs.iter().any(|j| j.announce) {
            continue;
        }
        let with = run(&l, &routing, &l.scenario);
        if with.jobs.iter().all(|j| j.offset_us == 0.0) {
            continue;
        }
        let mut fixed = l.scenario.clone();
        for j in &mut fixed.jobs {
            j.offset_fixed = j.announce;
        }
        let without = run(&l, &routing, &fixed);
        for (a, b) in with.jobs.iter().zip(&without.jobs) {
            let mean = |s: &metaroce_sim::report::JobSummary| {
                let v: Vec<f64> = s.iterations.iter().filter_map(|i| i.completion_us).collect();
                v.iter().sum::<f64>() / v.len() as f64
            };
            assert!(
                mean(a) <= mean(b) * 1.02,
                "{name} job {}: mean iteration {:.1} us with offsets, {:.1} without",
                a.name,
                mean(a),
                mean(b)
            );
        }
        compared += 1;
    }
    assert!(compared >= 3, "the staggered scenarios take offsets");
}
