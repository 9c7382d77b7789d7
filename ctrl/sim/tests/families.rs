//! A sample of the shipped scenario families (`scenarios/families/`), as
//! `metaroce sim suite` draws them: every case runs to the end in every
//! mode, no iteration beats its ideal bound (the bound is a bound on cases
//! nobody picked, not only on the shipped scenarios), and metaroce's
//! figures stay in the ranges the README states for the families.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use metaroce_sim::report::floor;
use metaroce_sim::report::suite::judged;
use metaroce_sim::{scenario, RoutingMode};
use metaroce_topo::Routing;

/// Cases of each family the sample runs (of the 12 the families ship).
const CASES: usize = 5;

fn family(name: &str) -> metaroce_sim::suite::Family {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/families").join(name);
    metaroce_sim::suite::load_file(&path).unwrap_or_else(|e| panic!("{}", e.report()))
}

/// Per mode, the judged value of every job of the sample.
fn sample(name: &str) -> Vec<(RoutingMode, String, bool, f64)> {
    let fam = family(name);
    let mut out = Vec::new();
    for i in 1..=CASES {
        let case = fam.case(i).unwrap();
        let sc = scenario::load_str(&case.scenario_yaml, &format!("{name} case {i}"), &case.topology)
            .unwrap_or_else(|e| panic!("{}", e.report()));
        let routing = Routing::compute(&case.topology);
        let floors = floor::job_floors(&case.topology, &sc);
        for mode in RoutingMode::ALL {
            let mut r = metaroce_sim::run_mode(&case.topology, &routing, &sc, mode, &mut |_| {}).unwrap();
            floor::attach(&mut r, &floors);
            let s = &r.summary;
            assert!(s.stopped.is_none(), "{name} case {i} ({}) {mode}: {:?}", case.shape, s.stopped);
            for (job, meta) in s.jobs.iter().zip(&case.jobs) {
                for (k, it) in job.iterations.iter().enumerate() {
                    let slow = it
                        .slowdown
                        .unwrap_or_else(|| panic!("{name} case {i} {mode}: {} unfinished", job.name));
                    assert!(
                        slow >= 1.0 - 1e-9,
                        "{name} case {i} ({}) {mode}: {} iteration {} ran at {slow:.3}x of its ideal bound",
                        case.shape,
                        job.name,
                        k + 1
                    );
                }
                out.push((mode, meta.role.clone(), meta.announced, judged(job, meta.announced).unwrap()));
            }
        }
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn check(name: &str) {
    let s = sample(name);
    let of = |m: RoutingMode| s.iter().filter(|x| x.0 == m).map(|x| x.3).collect::<Vec<_>>();
    let (ecmp, flowlet, meta) =
        (median(of(RoutingMode::Ecmp)), median(of(RoutingMode::Flowlet)), median(of(RoutingMode::Metaroce)));
    eprintln!("{name}: median judged ecmp {ecmp:.3}, flowlet {flowlet:.3}, metaroce {meta:.3}");
    for x in s.iter().filter(|x| x.0 == RoutingMode::Metaroce) {
        eprintln!("  metaroce {}: {:.3}", x.1, x.3);
    }
    assert!(
        meta <= ecmp && meta <= flowlet,
        "{name}: metaroce's median {meta:.3} above ecmp {ecmp:.3} or flowlet {flowlet:.3}"
    );
    assert!(meta <= 1.15, "{name}: metaroce's median {meta:.3}");
    // Announced All-to-All and rings: placed before their first packet.
    for x in s.iter().filter(|x| {
        x.0 == RoutingMode::Metaroce && x.2 && (x.1.starts_with("all-to-all") || x.1.starts_with("ring"))
    }) {
        assert!(x.3 <= 1.2, "{name}: announced {} at {:.3}", x.1, x.3);
    }
}

#[test]
fn a_sample_of_the_clos_family_meets_its_bounds_and_ranges() {
    check("clos.yaml");
}

#[test]
fn a_sample_of_the_leaf_spine_family_meets_its_bounds_and_ranges() {
    check("leaf-spine.yaml");
}
