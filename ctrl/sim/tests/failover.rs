//! A link that fails and comes back: the baselines wait for convergence
//! both ways, the controller in the loop fails over and restores through
//! its own latencies, and the link carries traffic again afterwards.
//!
//! The convergence here (100 µs) is faster than the controller (650 µs),
//! and the link returns at 300 µs: metaroce's failover lands at 652 µs,
//! after the repair, and its restore (heard at 350 µs, decided when the
//! controller is free) follows. That is what a slow control loop does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use metaroce_sim::{ModeRun, RoutingMode};

/// leaf1:3 (to spine1) is down from 2 µs to 300 µs; a permutation from
/// leaf1 to leaf2 runs for about 1.4 ms, its chunks alternating two source
/// ports, so that flowlets can start on the restored link (a running
/// flowlet never moves: with one port per queue pair they would stay).
const SCENARIO: &str = "
network: {dcqcn: false, rto: 50us, sports_per_qp: 2}
control: {convergence: 100us}
events:
  - {at: 2us, link_down: \"leaf1:3\"}
  - {at: 300us, link_up: \"leaf1:3\"}
jobs: [{name: p, pattern: permutation, hosts: [h1-1, h1-2, h2-1, h2-2], shift: 2, size: 8MiB, chunk: 512KiB}]
";

fn uplink_util(r: &ModeRun) -> f64 {
    r.port_util.iter().find(|(label, _, _)| label == "leaf1:3").unwrap().2
}

#[test]
fn a_restored_link_carries_traffic_again_in_every_mode() {
    let topo = leaf_spine(2, 2, 2, 100);
    let sc = scenario(&topo, SCENARIO);
    for mode in [RoutingMode::Ecmp, RoutingMode::Flowlet, RoutingMode::Metaroce] {
        let r = run(&topo, &sc, mode);
        let s = &r.summary;
        assert!(s.stopped.is_none(), "{mode}: {:?}", s.stopped);
        assert_eq!(s.fct.count, 4 * 16, "{mode}: every chunk arrives");
        let c = s.control.as_ref().unwrap();
        let fo = c.failover.as_ref().unwrap();
        eprintln!(
            "{mode}: {:.2}x, leaf1:3 at {:.0}%, failover {:.0} us, {} group writes",
            s.jobs[0].slowdown.unwrap(),
            uplink_util(&r) * 100.0,
            fo.min_us,
            c.group_writes
        );
        assert_eq!(fo.count, 1, "{mode}: one failure");
        // ACKs cross the fabric in band: those the baselines route into the
        // dead link before they converge are lost, and the senders recover
        // (the resent last packet of a message is acknowledged again).
        if mode == RoutingMode::Ecmp {
            assert!(s.acks_lost > 0, "{mode}: ACKs routed into the dead link");
        }
        // Out of the groups, then back in: at least two writes at leaf1.
        assert!(c.group_writes >= 2, "{mode}: {c:?}");
        // Down for 0.3 of ~1.4 ms, the link still carries a fair share after.
        assert!(uplink_util(&r) > 0.1, "{mode}: leaf1:3 carried {:.2}", uplink_util(&r));
        match mode {
            RoutingMode::Metaroce => assert!((650.0..800.0).contains(&fo.min_us), "{fo:?}"),
            _ => assert_eq!(fo.min_us, 100.0),
        }
    }
}

#[test]
fn the_controller_in_the_loop_is_deterministic() {
    let topo = leaf_spine(2, 2, 2, 100);
    let sc = scenario(&topo, SCENARIO);
    let (a, b) = (run(&topo, &sc, RoutingMode::Metaroce), run(&topo, &sc, RoutingMode::Metaroce));
    assert_eq!(a.fcts_ps, b.fcts_ps);
    assert_eq!(a.summary.control, b.summary.control);
    assert_eq!(a.summary.events, b.summary.events);
}
