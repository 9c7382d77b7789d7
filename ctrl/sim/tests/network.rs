//! PFC, lossy mode, ECN/DCQCN, ECMP collisions and determinism.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use metaroce_sim::control::forward::{Ecmp, Forwarder, NetView, PacketInfo};
use metaroce_sim::engine::flows::Workload;
use metaroce_sim::engine::net::Ports;
use metaroce_sim::{RoutingMode, Stop};
use metaroce_topo::gen;
use metaroce_topo::Routing;

const INCAST: &str =
    "jobs: [{name: incast, pattern: incast, hosts: [h2-1, h2-2, h2-3, h3-1, h3-2, h3-3, h4-1, h4-2], \
                      target: h1-1, size: 1MiB}]";

#[test]
fn pfc_keeps_lossless_mode_loss_free_and_grows_a_congestion_tree() {
    let topo = leaf_spine(4, 4, 4, 100);
    let sc = scenario(&topo, &format!("{INCAST}\nnetwork: {{dcqcn: false}}"));
    let run = run(&topo, &sc, RoutingMode::Ecmp);
    let s = &run.summary;
    assert!(s.stopped.is_none());
    assert_eq!(s.drops, 0);
    assert_eq!(s.pfc.headroom_overflows, 0, "headroom absorbs what is in flight");
    assert_eq!(s.retransmits, 0);
    assert!(s.pfc.pauses > 0, "8->1 incast must pause");
    let tree = s.pfc.largest_tree;
    eprintln!("8->1 incast, lossless: {} pauses, largest tree {tree:?}, drops {}", s.pfc.pauses, s.drops);
    // Pauses reach from the receiver's leaf through the spines to the
    // senders' leaves and NICs.
    assert!(tree.switches >= 3 && tree.links >= 4, "{tree:?}");
    assert!(s.jobs[0].slowdown.unwrap() < 1.05, "PFC keeps the receiver busy: {:?}", s.jobs[0].slowdown);
}

#[test]
fn lossy_mode_drops_and_go_back_n_recovers() {
    let topo = leaf_spine(4, 4, 4, 100);
    let sc = scenario(&topo, &format!("{INCAST}\nnetwork: {{lossless: false, dcqcn: false, rto: 50us}}"));
    let run = run(&topo, &sc, RoutingMode::Ecmp);
    let s = &run.summary;
    assert!(s.stopped.is_none(), "{:?}", s.stopped);
    eprintln!("8->1 incast, lossy: {} drops, {} retransmitted", s.drops, s.retransmits);
    assert!(s.drops > 0, "1 MiB buffers overflow under 8 MiB of incast");
    assert!(s.retransmits >= s.drops, "every drop is resent (go-back-N resends more)");
    assert_eq!(s.pfc.pauses, 0);
    assert_eq!(s.fct.count, 8, "every message still completes");
}

#[test]
fn dcqcn_reacts_to_ecn_marks() {
    let topo = leaf_spine(4, 4, 4, 100);
    let on = run(&topo, &scenario(&topo, INCAST), RoutingMode::Ecmp);
    let off =
        run(&topo, &scenario(&topo, &format!("{INCAST}\nnetwork: {{dcqcn: false}}")), RoutingMode::Ecmp);
    assert!(on.summary.ecn_marks > 0 && on.summary.cnps > 0, "{:?}", on.summary.cnps);
    assert_eq!(off.summary.cnps, 0);
    assert!(off.summary.ecn_marks > 0, "marking does not depend on the reaction");
    assert!(
        on.summary.pfc.pauses < off.summary.pfc.pauses,
        "rate control relieves PFC: {} vs {}",
        on.summary.pfc.pauses,
        off.summary.pfc.pauses
    );
    assert_eq!(on.summary.drops, 0);
}

struct NoView;
impl NetView for NoView {
    fn queue_bytes(&self, _: u32) -> u64 {
        0
    }
}

/// Distinct uplinks and largest load when each leaf hashes its 4 flows
/// (to the next leaf) over its 4 uplinks.
fn ecmp_bins(seed: u64) -> Vec<(usize, usize)> {
    let topo = leaf_spine(4, 4, 4, 100);
    let routing = Routing::compute(&topo);
    let sc = scenario(
        &topo,
        &format!(
            "seed: {seed}\njobs: [{{name: p, pattern: permutation, hosts: all, shift: 4, size: 64KiB}}]"
        ),
    );
    let ports = Ports::build(&topo, &routing, &sc.net);
    let w = Workload::build(&topo, &routing, &sc).unwrap();
    let mut ecmp = Ecmp { seed: sc.seed };
    let mut out = Vec::new();
    for leaf in 0..4u32 {
        let mut load = [0usize; 4];
        for f in &w.flows {
            let qp = &w.qps[f.qp as usize];
            if topo.hosts[qp.src as usize].leaf != leaf as usize {
                continue;
            }
            let dst_leaf = topo.hosts[qp.dst as usize].leaf;
            let (group, total) = ports.group(leaf, ports.dest_of[dst_leaf].unwrap());
            assert_eq!(group.len(), 4);
            let info = PacketInfo {
                tuple_hash: f.tuple_hash,
                src: qp.src as usize,
                dst: qp.dst as usize,
                sport: f.sport,
                bytes: 0,
                fresh: false,
            };
            load[ecmp.choose(0, leaf, group, total, &info, &NoView)] += 1;
        }
        out.push((load.iter().filter(|&&l| l > 0).count(), *load.iter().max().unwrap()));
    }
    out
}

#[test]
fn ecmp_collisions_match_balls_into_bins() {
    let samples: Vec<(usize, usize)> = (0..500).flat_map(ecmp_bins).collect();
    let n = samples.len() as f64;
    let occupied = samples.iter().map(|s| s.0 as f64).sum::<f64>() / n;
    // 4 balls into 4 bins: E[occupied] = 4 (1 - (3/4)^4) = 2.734;
    // P(no collision) = 4!/4^4 = 0.094.
    let expected = 4.0 * (1.0 - 0.75f64.powi(4));
    let clean = samples.iter().filter(|s| s.1 == 1).count() as f64 / n;
    eprintln!("ECMP: {occupied:.3} of 4 uplinks used (balls-into-bins {expected:.3}); {clean:.3} of leaves collision-free (0.094)");
    assert!(
        (occupied - expected).abs() < 0.08,
        "mean occupied uplinks {occupied:.3}, balls-into-bins {expected:.3}"
    );
    assert!((clean - 0.09375).abs() < 0.035, "collision-free leaves {clean:.3}, expected 0.094");
}

#[test]
fn ecmp_completion_follows_the_most_loaded_link() {
    let topo = leaf_spine(4, 4, 4, 100);
    for seed in 1u64..=8 {
        let worst = ecmp_bins(seed).iter().map(|b| b.1).max().unwrap();
        let sc = scenario(
            &topo,
            &format!(
                "seed: {seed}\nnetwork: {{dcqcn: false}}\njobs: [{{name: p, pattern: permutation, hosts: all, shift: 4, size: 2MiB}}]"
            ),
        );
        let run = run(&topo, &sc, RoutingMode::Ecmp);
        let t = completion(&run, 0);
        let one = wire(2 << 20, 4096) as f64 * 8.0 / 100e3;
        let ratio = t / one;
        eprintln!("seed {seed}: busiest uplink carries {worst} flows; completion {ratio:.3} x S/B");
        assert!(
            (ratio - worst as f64).abs() < 0.08 * worst as f64,
            "seed {seed}: {worst} flows on the busiest uplink, completion {ratio:.2} x S/B"
        );
    }
}

#[test]
fn runs_are_deterministic() {
    let topo = leaf_spine(4, 4, 4, 100);
    let sc = scenario(
        &topo,
        "seed: 9\njobs: [{name: a2a, pattern: all-to-all, hosts: all, size: 64KiB, placement: shuffled}]",
    );
    for mode in [RoutingMode::Ecmp, RoutingMode::Flowlet] {
        let a = run(&topo, &sc, mode);
        let b = run(&topo, &sc, mode);
        assert_eq!(serde_json::to_string(&a.summary).unwrap(), serde_json::to_string(&b.summary).unwrap());
        assert_eq!(a.fcts_ps, b.fcts_ps);
    }
    let other = scenario(
        &topo,
        "seed: 10\njobs: [{name: a2a, pattern: all-to-all, hosts: all, size: 64KiB, placement: shuffled}]",
    );
    assert_ne!(
        run(&topo, &sc, RoutingMode::Flowlet).fcts_ps,
        run(&topo, &other, RoutingMode::Flowlet).fcts_ps
    );
}

#[test]
fn limits_stop_runaway_scenarios() {
    let topo = leaf_spine(2, 2, 2, 100);
    let job = "jobs: [{name: big, pattern: all-to-all, hosts: all, size: 64MiB}]";
    let t = run(&topo, &scenario(&topo, &format!("limits: {{time: 20us}}\n{job}")), RoutingMode::Ecmp);
    assert_eq!(t.summary.stopped, Some(Stop::TimeLimit));
    assert!(t.summary.sim_time_us <= 20.0);
    assert!(t.summary.jobs[0].completion_us.is_none());
    let e = run(&topo, &scenario(&topo, &format!("limits: {{events: 5000}}\n{job}")), RoutingMode::Ecmp);
    assert_eq!(e.summary.stopped, Some(Stop::EventLimit));
    assert_eq!(e.summary.events, 5000);
}

#[test]
fn ring_allreduce_takes_2_n_minus_1_steps() {
    let topo = leaf_spine(4, 4, 4, 100);
    let sc = scenario(
        &topo,
        "network: {dcqcn: false}\njobs: [{name: ring, pattern: ring-allreduce, hosts: \"h*-1\", size: 8MiB}]",
    );
    let run = run(&topo, &sc, RoutingMode::Ecmp);
    let t = completion(&run, 0);
    // 4 ranks: 6 steps of 2 MiB chunks, each at most at line rate.
    let step = wire(2 << 20, 4096) as f64 * 8.0 / 100e3;
    assert!(t > 6.0 * step && t < 6.0 * step * 1.05, "ring took {t:.1} µs, 6 steps of {step:.1} µs");
    assert_eq!(run.summary.jobs[0].messages, 24);
    let ideal = run.summary.jobs[0].ideal_us;
    assert!(ideal <= t && ideal > 6.0 * step, "ideal {ideal:.1}");
}

/// A ring on go-back-N NICs under spray: a rank posts its next step on a
/// queue pair before the one before it is acknowledged, so a queue pair's
/// messages are not posted in the order of their ids. A NAK or timeout
/// for a message that waited behind a later one once left it with no
/// timer and nothing to send it again: the run stalled in iteration 4.
#[test]
fn go_back_n_recovers_a_message_posted_before_an_older_one_is_acknowledged() {
    let topo = gen::fat_tree(&gen::Common::new("k4", metaroce_topo::units::Bandwidth::gbps(100)), 4).unwrap();
    // Case 6 of scenarios/families/clos.yaml, as `sim suite` drew it.
    let sc = scenario(
        &topo,
        "name: ring\nseed: 1\nnic: {ordering: go-back-n}\n\
         network: {mtu: 4096B, lossless: true, pfc: {xoff: 24pkt, xon: 12pkt, headroom: auto}, \
         ecn: {kmin: 32pkt, kmax: 128pkt, pmax: 20%}, dcqcn: true, sports_per_qp: 1}\n\
         jobs:\n  - {name: ring, pattern: ring-allreduce, hosts: [h5-2, h5-1, h7-2, h6-2, h1-2, h2-1, h1-1, \
         h8-1, h7-1, h3-2, h6-1, h4-1, h8-2, h3-1, h4-2, h2-2], size: 756KiB, iterations: 4, compute: 800us, \
         placement: shuffled}\n",
    );
    for seed in 1..=3 {
        let mut sc = sc.clone();
        sc.reseed(&topo, seed);
        let r = run(&topo, &sc, RoutingMode::Spray);
        let s = &r.summary;
        assert!(s.stopped.is_none(), "seed {seed}: {:?}", s.stopped);
        assert!(s.retransmits > 0, "seed {seed}: spray reorders and go-back-N resends");
        assert!(s.jobs[0].iterations.iter().all(|i| i.completion_us.is_some()), "seed {seed}");
    }
}
