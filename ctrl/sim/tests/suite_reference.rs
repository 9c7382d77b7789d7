//! `sim suite --reference`: every mode is compared job by job with the
//! reference runs (spray on out-of-order NICs) of the same case and seed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use metaroce_sim::report::floor;
use metaroce_sim::report::suite::{aggregate, judged, markdown, REFERENCE, REFERENCE_SLACK};
use metaroce_sim::report::Summary;
use metaroce_sim::{scenario, Ordering, RoutingMode};
use metaroce_topo::Routing;

fn run(case: &metaroce_sim::suite::Case, mode: RoutingMode, ordering: Ordering, seed: u64) -> Summary {
    let mut sc = scenario::load_str(&case.scenario_yaml, "case", &case.topology).unwrap();
    sc.net.ordering = ordering;
    sc.seed = seed;
    let routing = Routing::compute(&case.topology);
    let floors = floor::job_floors(&case.topology, &sc);
    let mut r = metaroce_sim::run_mode(&case.topology, &routing, &sc, mode, &mut |_| {}).unwrap();
    floor::attach(&mut r, &floors);
    r.summary
}

#[test]
fn each_mode_is_compared_with_the_reference_of_the_same_case_seed_and_job() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/families/leaf-spine.yaml");
    let fam = metaroce_sim::suite::load_file(&path).unwrap();
    // Two cases, two seeds: a run is paired only with its own case and seed.
    let cases: Vec<_> = [1, 2].iter().map(|&i| fam.case(i).unwrap()).collect();
    let mut runs = Vec::new();
    let mut expected = (0usize, 0usize, 0.0f64);
    for (ci, case) in cases.iter().enumerate() {
        for seed in [1, 2] {
            let ecmp = run(case, RoutingMode::Ecmp, Ordering::GoBackN, seed);
            let mut reference = run(case, RoutingMode::Spray, Ordering::OutOfOrder, seed);
            reference.mode = REFERENCE.to_string();
            for (meta, (a, b)) in case.jobs.iter().zip(ecmp.jobs.iter().zip(&reference.jobs)) {
                let (Some(v), Some(r)) = (judged(a, meta.announced), judged(b, meta.announced)) else {
                    continue;
                };
                expected.0 += 1;
                expected.1 += usize::from(v / r <= REFERENCE_SLACK);
                expected.2 = expected.2.max(v / r);
            }
            runs.push((ci, ecmp));
            runs.push((ci, reference));
        }
    }
    assert!(expected.0 >= 4, "too few jobs compared: {expected:?}");
    let modes = ["ecmp".to_string(), REFERENCE.to_string()];
    let s = aggregate(&fam, &[1, 2], &modes, &cases, &runs);
    let all = s.vs_reference.iter().find(|r| r.group == "all" && r.mode == "ecmp").expect("ecmp against it");
    assert_eq!((all.compared, all.within), (expected.0, expected.1));
    assert!((all.worst_ratio - expected.2).abs() < 1e-12);
    assert!(s.vs_reference.iter().all(|r| r.mode != REFERENCE), "the reference is not compared with itself");
    assert!(markdown(&s).contains("## Against the reference"));

    // The same runs as their own reference: every job within, at 1.0.
    let mut same: Vec<_> = runs.iter().filter(|(_, s)| s.mode == "ecmp").cloned().collect();
    for (ci, r) in runs.iter().filter(|(_, s)| s.mode == "ecmp") {
        let mut copy = r.clone();
        copy.mode = REFERENCE.to_string();
        same.push((*ci, copy));
    }
    let s = aggregate(&fam, &[1, 2], &modes, &cases, &same);
    let all = s.vs_reference.iter().find(|r| r.group == "all").unwrap();
    assert_eq!(all.within, all.compared);
    assert!((all.worst_ratio - 1.0).abs() < 1e-12);

    // Without reference runs: no comparison, no section.
    let plain: Vec<_> = runs.iter().filter(|(_, s)| s.mode == "ecmp").cloned().collect();
    let s = aggregate(&fam, &[1, 2], &modes[..1], &cases, &plain);
    assert!(s.vs_reference.is_empty());
    assert!(!markdown(&s).contains("Against the reference"));
}
