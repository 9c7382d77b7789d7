//! One seed for every draw, and the Poisson data-centre workload: its
//! draws, its FCT slowdown report and its errors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use metaroce_sim::scenario::{load_file, Loaded};
use metaroce_sim::{Pattern, RoutingMode};
use metaroce_topo::Routing;

/// A shipped scenario (`scenarios/NAME`), and its topology's routing.
fn load(name: &str) -> (Loaded, Routing) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(name);
    let l = load_file(&path).unwrap_or_else(|e| panic!("{}", e.report()));
    let routing = Routing::compute(&l.topology);
    (l, routing)
}

const SHUFFLED: &str =
    "jobs: [{name: p, pattern: permutation, hosts: all, size: 64KiB, placement: shuffled}]";

/// The host pairs of job 0 (a permutation): (source host, destination host).
fn pairs(sc: &metaroce_sim::Scenario) -> Vec<(usize, usize)> {
    let job = &sc.jobs[0];
    let Pattern::Permutation { perm } = &job.pattern else { panic!("not a permutation") };
    perm.iter().enumerate().map(|(i, &p)| (job.ranks[i], job.ranks[p])).collect()
}

#[test]
fn the_seed_redraws_shuffled_placements_and_permutations() {
    let topo = leaf_spine(4, 4, 4, 100);
    let base = scenario(&topo, &format!("seed: 1\n{SHUFFLED}"));
    let mut seen = Vec::new();
    for seed in 1..=6 {
        let mut sc = base.clone();
        sc.reseed(&topo, seed);
        let again = scenario(&topo, &format!("seed: {seed}\n{SHUFFLED}"));
        assert_eq!(pairs(&sc), pairs(&again), "seed {seed}: reseeding equals loading with that seed");
        seen.push(pairs(&sc));
    }
    for i in 0..seen.len() {
        for j in i + 1..seen.len() {
            assert_ne!(seen[i], seen[j], "seeds {} and {} gave the same host pairs", i + 1, j + 1);
        }
    }
    // Setting the seed alone redraws too, when the run starts.
    let mut sc = base.clone();
    sc.seed = 2;
    assert_eq!(pairs(&sc.drawn(&topo)), seen[1]);
    let a = run(&topo, &sc, RoutingMode::Ecmp);
    let mut b = base.clone();
    b.reseed(&topo, 2);
    assert_eq!(a.fcts_ps, run(&topo, &b, RoutingMode::Ecmp).fcts_ps, "the same seed gives the same run");
}

const POISSON: &str = "network: {dcqcn: false}\njobs: [{name: bg, pattern: poisson, hosts: all, \
                       load: 0.5, sizes: storage, duration: 200us}]";

#[test]
fn poisson_flows_follow_load_and_seed() {
    let topo = leaf_spine(4, 4, 4, 100);
    let sc = scenario(&topo, &format!("seed: 3\n{POISSON}"));
    let flows = |sc: &metaroce_sim::Scenario| match &sc.jobs[0].pattern {
        Pattern::Poisson { flows, .. } => flows.clone(),
        _ => panic!("not poisson"),
    };
    let f = flows(&sc);
    // 16 senders at half of 100 Gb/s for 200 µs carry about 20 MB.
    let bytes: u64 = f.iter().map(|x| x.bytes).sum();
    assert!((12e6..30e6).contains(&(bytes as f64)), "{bytes} bytes in {} flows", f.len());
    assert!(f.iter().all(|x| x.src != x.dst && x.at_ps < 200_000_000));
    assert!(f.windows(2).all(|w| w[0].at_ps <= w[1].at_ps));
    let mut other = sc.clone();
    other.reseed(&topo, 4);
    assert_ne!(flows(&other), f, "another seed draws other flows");
    other.reseed(&topo, 3);
    assert_eq!(flows(&other), f, "the same seed draws the same flows");
}

#[test]
fn poisson_reports_fct_slowdown_by_size() {
    let topo = leaf_spine(4, 4, 4, 100);
    let sc = scenario(&topo, &format!("seed: 3\nmodes: [ecmp, spray]\n{POISSON}"));
    for mode in [RoutingMode::Ecmp, RoutingMode::Spray] {
        let r = run(&topo, &sc, mode);
        let s = r.summary.fct_slowdown.as_ref().expect("a poisson job reports slowdowns");
        assert_eq!(s.unfinished, 0);
        assert_eq!(s.all.flows, s.by_size.iter().map(|b| b.flows).sum::<usize>());
        let (p50, p99) = (s.all.p50.unwrap(), s.all.p99.unwrap());
        println!("{mode}: {} flows, slowdown p50 {p50:.2} p99 {p99:.2}", s.all.flows);
        // Never faster than alone on the idle fabric; at half load, the
        // median flow is not slowed much.
        assert!((1.0..3.0).contains(&p50), "{mode} p50 {p50}");
        assert!(p99 >= p50 && p99 < 60.0, "{mode} p99 {p99}");
        let md = metaroce_sim::report::markdown(&sc, std::slice::from_ref(&r));
        assert!(md.contains("FCT slowdown by flow size") && md.contains("≤ 10 KB"), "{md}");
        let json = metaroce_sim::report::json(std::slice::from_ref(&r)).to_string();
        assert!(json.contains("\"fct_slowdown\"") && json.contains("\"by_size\""));
        let svg = metaroce_sim::report::plot::fct_slowdown(std::slice::from_ref(&r)).unwrap();
        assert!(svg.contains("log scale") && svg.contains(&format!("{mode} p99")));
    }
}

#[test]
fn bad_poisson_jobs_are_reported_where_they_are() {
    let job = |fields: &str| format!("jobs:\n  - {{pattern: poisson, hosts: all, {fields}}}\n");
    let r = problems(&job("load: 0.5, sizes: storage, duration: 1ms, size: 1MiB"));
    assert!(r.contains("leave out \"size\""), "{r}");
    let r = problems("jobs:\n  - {pattern: poison, hosts: all, size: 1MiB}\n");
    assert!(
        r.contains("bad.yaml:2:") && r.contains("unknown pattern \"poison\"; did you mean \"poisson\""),
        "{r}"
    );
    for load in ["0", "-0.2", "1.5", "120%"] {
        let r = problems(&job(&format!("load: {load}, sizes: storage, duration: 1ms")));
        assert!(r.contains("bad.yaml:2:") && r.contains("jobs[0].load") && r.contains("out of range"), "{r}");
    }
    let r = problems(&job("load: 0.5, sizes: websearch, duration: 1ms"));
    assert!(r.contains("jobs[0].sizes") && r.contains("did you mean \"web-search\""), "{r}");
    let r = problems(&job("load: 0.5, sizes: [[1KB, 0.5], [500B, 0.7], [2KB, 1]], duration: 1ms"));
    assert!(r.contains("bad.yaml:2:") && r.contains("jobs[0].sizes[1]") && r.contains("not monotone"), "{r}");
    assert!(!r.contains("needs \"sizes\""), "a bad CDF is not also a missing one: {r}");
    let r = problems(&job("load: 0.5, sizes: [[1KB, 0.5], [2KB, 0.4], [3KB, 1]], duration: 1ms"));
    assert!(r.contains("sizes[1]") && r.contains("not monotone"), "{r}");
    let r = problems(&job("load: 0.5, sizes: [[1KB, 0.5], [2KB, 0.9]], duration: 1ms"));
    assert!(r.contains("jobs[0].sizes") && r.contains("ends at 0.9, not at 1"), "{r}");
    let r = problems(&job("load: 0.5, sizes: [[0, 0.1], [2KB, 1]], duration: 1ms"));
    assert!(r.contains("sizes[0]") && r.contains("at least one packet"), "{r}");
    let r = problems(&job("sizes: storage"));
    assert!(r.contains("needs \"load\"") && r.contains("needs \"duration\""), "{r}");
    let r = problems("jobs:\n  - {pattern: all-to-all, hosts: all, size: 1MiB, load: 0.5}\n");
    assert!(r.contains("jobs[0].load") && r.contains("only pattern poisson"), "{r}");
}

#[test]
fn a_size_file_is_read_relative_to_the_scenario_and_its_errors_say_where() {
    let dir = std::env::temp_dir().join(format!("metaroce-sizes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let topo_path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/leaf-spine-4x4.yaml");
    let scenario = |sizes: &str| {
        format!(
            "topology: {}\njobs:\n  - {{pattern: poisson, hosts: all, load: 0.3, sizes: {sizes}, duration: 50us}}\n",
            topo_path.display()
        )
    };
    std::fs::write(dir.join("ok.yaml"), "name: mine\npoints:\n  - [1KB, 0.5]\n  - [8KB, 1]\n").unwrap();
    std::fs::write(dir.join("bad.yaml"), "points:\n  - [1KB, 0.5]\n  - [8KB, 0.25]\n").unwrap();
    std::fs::write(dir.join("s1.yaml"), scenario("ok.yaml")).unwrap();
    std::fs::write(dir.join("s2.yaml"), scenario("bad.yaml")).unwrap();
    let l = load_file(&dir.join("s1.yaml")).unwrap();
    let Pattern::Poisson { sizes, .. } = &l.scenario.jobs[0].pattern else { panic!() };
    assert_eq!(sizes.points, vec![(1000, 500_000_000), (8000, 1_000_000_000)]);
    let e = load_file(&dir.join("s2.yaml")).unwrap_err().report();
    assert!(e.contains("s2.yaml:3:") && e.contains("bad.yaml:3:") && e.contains("not monotone"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn spray_on_a_fat_tree_permutation_is_near_ideal_and_ecmp_is_not() {
    // `metaroce sim sweep scenarios/fat-tree-permutation.yaml --seeds 1-6
    // --ordering out-of-order`: spray 1.007-1.017x with no PFC pause (the
    // round-robin it replaced: 1.47x on every seed), ECMP 1.96-2.91x,
    // flowlet 1.96-2.91x, as each seed draws another permutation.
    let (l, routing) = load("fat-tree-permutation.yaml");
    let mut sc = l.scenario.clone();
    sc.net.ordering = metaroce_sim::Ordering::OutOfOrder;
    let mut pairs = Vec::new();
    for seed in 1..=3 {
        sc.reseed(&l.topology, seed);
        pairs.push(format!("{:?}", sc.jobs[0].pattern));
        let go =
            |mode| metaroce_sim::run_mode(&l.topology, &routing, &sc, mode, &mut |_| {}).unwrap().summary;
        let (spray, ecmp) = (go(RoutingMode::Spray), go(RoutingMode::Ecmp));
        eprintln!(
            "seed {seed}: spray {:.3}x ecmp {:.3}x",
            spray.jobs[0].slowdown.unwrap(),
            ecmp.jobs[0].slowdown.unwrap()
        );
        assert!((1.0..1.05).contains(&spray.jobs[0].slowdown.unwrap()), "spray, out-of-order NICs");
        assert_eq!(spray.pfc.pauses, 0, "seed {seed}: spray never fills a queue to XOFF here");
        assert!((1.5..3.5).contains(&ecmp.jobs[0].slowdown.unwrap()), "ecmp");
    }
    pairs.dedup();
    assert_eq!(pairs.len(), 3, "every seed draws its own permutation");
}

#[test]
fn the_conweave_scenarios_load() {
    // Too heavy for a debug test run (3 ms of 128 senders, 8-27M events
    // per mode): their figures are in ctrl/sim/README.md.
    for (name, want_ppm) in [("conweave-load50.yaml", 250_000), ("conweave-load80.yaml", 400_000)] {
        let (l, _) = load(name);
        let job = &l.scenario.jobs[0];
        assert_eq!(job.ranks.len(), 128);
        let metaroce_sim::Pattern::Poisson { load_ppm, flows, sizes, .. } = &job.pattern else {
            panic!("{name}: not a poisson job")
        };
        assert_eq!(*load_ppm, want_ppm);
        assert_eq!(sizes.name, "storage");
        // 128 senders at load x 100 Gb/s for 3 ms, 41 KB per flow on average.
        let want = 128.0 * f64::from(*load_ppm) / 1e6 * 100e9 / 8.0 * 3e-3 / sizes.mean();
        let n = flows.len() as f64;
        assert!((0.9 * want..1.1 * want).contains(&n), "{name}: {n} flows, {want:.0} expected");
    }
}
