//! Each job's floor: the job alone with no fabric in the way (its own
//! fabric, switch-to-switch links 16 times as fast). Chunk round trips are
//! in it, so completion over max(ideal, floor) stops blaming them on
//! routing.

mod common;

use common::{leaf_spine, run, scenario};
use metaroce_sim::report::floor::{attach, job_floors};
use metaroce_sim::RoutingMode;

#[test]
fn the_floor_holds_what_no_routing_can_remove() {
    let topo = leaf_spine(2, 2, 2, 100);
    let sc = scenario(
        &topo,
        "jobs:
  - {name: chunked, pattern: permutation, hosts: [h1-1, h1-2, h2-1, h2-2], shift: 2, size: 1MiB, chunk: 64KiB, iterations: 2, compute: 50us}
  - {name: web, pattern: poisson, hosts: all, load: 0.1, sizes: web-search, duration: 100us, start: 2ms}
",
    );
    let floors = job_floors(&topo, &sc);
    assert_eq!(floors.len(), 2);
    assert!(floors[1].is_none(), "a data-centre job's figure is its FCT slowdown");
    let f = floors[0].clone().expect("a permutation has a floor");
    assert_eq!(f.iterations_us.len(), 2);
    let mut r = run(&topo, &sc, RoutingMode::Ecmp);
    attach(&mut r, &floors);
    let job = &r.summary.jobs[0];
    // Sixteen chunks a pair, each posted when the ACK of the one before
    // is back: well above the bound, with no fabric in the way already.
    assert!(f.iterations_us[0] > 1.1 * job.iterations[0].ideal_us, "{f:?} vs {}", job.iterations[0].ideal_us);
    assert_eq!(job.floor_us, Some(f.completion_us));
    for it in &job.iterations {
        let (c, fl) = (it.completion_us.unwrap(), it.floor_us.unwrap());
        assert!(
            c >= 0.99 * fl,
            "the fabric cannot beat the job alone with no fabric in the way: {c} vs {fl}"
        );
        let vs = it.vs_floor.unwrap();
        assert!((vs - c / it.ideal_us.max(fl)).abs() < 1e-9);
        assert!(vs < it.slowdown.unwrap(), "the floor is above the ideal here");
    }
}

#[test]
fn a_job_that_shares_no_link_runs_at_its_floor() {
    // Two flows in opposite directions between two leaves share no
    // directed link, so nothing is in their way in the fabric either: the
    // real run is the floor. Chunks of 64 KiB make each chunk's latency
    // count, store-and-forward at every hop included; a floor whose fast
    // links also forwarded each packet sooner read about 5% under the
    // real run here.
    let topo = leaf_spine(2, 2, 1, 100);
    let sc = scenario(
        &topo,
        "jobs:
  - {name: pair, pattern: permutation, hosts: [h1-1, h2-1], shift: 1, size: 1MiB, chunk: 64KiB, iterations: 2, compute: 20us}
",
    );
    let floors = job_floors(&topo, &sc);
    let f = floors[0].clone().expect("a permutation has a floor");
    let mut r = run(&topo, &sc, RoutingMode::Ecmp);
    attach(&mut r, &floors);
    for it in &r.summary.jobs[0].iterations {
        let (c, fl) = (it.completion_us.unwrap(), it.floor_us.unwrap());
        assert!(
            (c / fl - 1.0).abs() < 0.01,
            "alone on its paths, the job runs at its floor: {c} vs {fl} ({f:?})"
        );
    }
}

#[test]
fn a_chunked_all_to_all_never_beats_its_floor_with_congestion_control_on() {
    // Twelve ranks of a k=4 fat-tree, All-to-All in 64 KiB chunks, DCQCN
    // on (case 2 of the Clos family, seed 1, two iterations). Alone
    // without congestion control, its receivers' PAUSEs held up every
    // queue pair of their senders, and the job ran in the fabric, with
    // DCQCN, at 0.93x of that "floor". The floor is the better of the
    // runs with and without congestion control, so the fabric's run does
    // not beat it.
    let topo = metaroce_topo::gen::fat_tree(
        &metaroce_topo::gen::Common::new("k4", metaroce_topo::units::Bandwidth::gbps(100)),
        4,
    )
    .unwrap();
    let sc = scenario(
        &topo,
        "seed: 1
nic: {ordering: go-back-n}
network: {mtu: 4096B, lossless: true, pfc: {xoff: 24pkt, xon: 12pkt, headroom: auto}, ecn: {kmin: 32pkt, kmax: 128pkt, pmax: 20%}, dcqcn: true}
jobs:
  - {name: a2a, pattern: all-to-all, hosts: [h5-1, h4-1, h6-2, h2-1, h6-1, h7-1, h3-1, h7-2, h3-2, h4-2, h8-1, h2-2], size: 988KiB, iterations: 2, compute: 687us, chunk: 64KiB, placement: shuffled}
",
    );
    let floors = job_floors(&topo, &sc);
    let f = floors[0].clone().expect("an All-to-All has a floor");
    let mut without = sc.clone();
    without.net.dcqcn = None;
    let bare = job_floors(&topo, &without)[0].clone().expect("and one without congestion control");
    for (a, b) in f.iterations_us.iter().zip(&bare.iterations_us) {
        assert!(a <= b, "the floor is never above the run without congestion control: {f:?} vs {bare:?}");
    }
    assert!(
        f.iterations_us.iter().zip(&bare.iterations_us).any(|(a, b)| a < b),
        "here the run with DCQCN is the lower one: {f:?} vs {bare:?}"
    );
    for mode in [RoutingMode::Ecmp, RoutingMode::Flowlet, RoutingMode::Metaroce] {
        let mut r = run(&topo, &sc, mode);
        attach(&mut r, &floors);
        for it in &r.summary.jobs[0].iterations {
            let (c, fl) = (it.completion_us.unwrap(), it.floor_us.unwrap());
            assert!(c >= 0.99 * fl, "{mode:?}: the fabric beat the job alone: {c} vs {fl} ({f:?})");
        }
    }
}
