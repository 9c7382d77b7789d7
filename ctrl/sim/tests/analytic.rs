//! Validation against cases with a known answer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use metaroce_sim::RoutingMode;

/// Seconds → µs for `bytes` at `gbps`.
fn xfer_us(bytes: u64, gbps: u64) -> f64 {
    bytes as f64 * 8.0 / (gbps as f64 * 1e3)
}

#[test]
fn a_single_flow_reaches_line_rate() {
    let topo = leaf_spine(2, 2, 2, 100);
    let sc = scenario(
        &topo,
        "jobs: [{name: one, pattern: permutation, hosts: [h1-1, h2-1], size: 8MiB}]\nnetwork: {dcqcn: false}",
    );
    let run = run(&topo, &sc, RoutingMode::Ecmp);
    let t = completion(&run, 0);
    // Both flows of the 2-rank permutation run at once on disjoint NICs.
    let want = xfer_us(wire(8 << 20, 4096), 100);
    eprintln!("single flow: {t:.2} µs, line rate gives {want:.2} µs");
    assert!(t >= want, "faster than line rate: {t} < {want}");
    assert!(t < want * 1.01, "completion {t:.1} µs, line rate gives {want:.1} µs");
    let goodput = (8u64 << 20) as f64 * 8.0 / (t * 1e3);
    assert!(goodput > 98.0 * 4096.0 / 4158.0, "goodput {goodput:.2} Gbps");
    assert_eq!(run.summary.drops, 0);
    assert_eq!(run.summary.pfc.pauses, 0, "one flow at line rate never pauses");
    let pairs: Vec<[&str; 2]> =
        run.summary.jobs[0].pairs.iter().map(|[s, d]| [s.as_str(), d.as_str()]).collect();
    assert_eq!(pairs, [["h1-1", "h2-1"], ["h2-1", "h1-1"]], "the report names the pairs it ran");
}

#[test]
fn incast_completes_in_n_s_over_b() {
    let topo = leaf_spine(4, 4, 4, 100);
    for n in [2usize, 4, 8] {
        let senders: Vec<String> = (0..n).map(|i| format!("h{}-{}", 2 + i / 4, 1 + i % 4)).collect();
        let sc = scenario(
            &topo,
            &format!(
                "jobs: [{{name: incast, pattern: incast, hosts: [{}], target: h1-1, size: 1MiB}}]\nnetwork: {{dcqcn: false}}",
                senders.join(", ")
            ),
        );
        let run = run(&topo, &sc, RoutingMode::Ecmp);
        let t = completion(&run, 0);
        let want = xfer_us(n as u64 * wire(1 << 20, 4096), 100);
        eprintln!("{n}->1 incast: {t:.2} µs, N·S/B = {want:.2} µs");
        assert!(t >= want, "{n}->1 faster than the receiver NIC: {t} < {want}");
        assert!(t < want * 1.05, "{n}->1 took {t:.1} µs, N·S/B = {want:.1} µs");
        assert_eq!(run.summary.drops + run.summary.pfc.headroom_overflows, 0, "lossless");
        assert!(run.summary.jobs[0].slowdown.unwrap() < 1.05);
    }
}

#[test]
fn permutation_with_ideal_spreading_completes_in_s_over_b() {
    // 4 leaves x 4 spines x 4 hosts: non-blocking. Shift 4 sends every host
    // to the next leaf, so all traffic crosses the spines. Sprayed packets
    // overtake each other, so the NICs place them as they arrive (on
    // go-back-N NICs every overtaking packet is a resend).
    let topo = leaf_spine(4, 4, 4, 100);
    let sc = scenario(
        &topo,
        "jobs: [{name: perm, pattern: permutation, hosts: all, shift: 4, size: 4MiB}]\nnetwork: {dcqcn: false}\n\
         nic: {ordering: out-of-order}",
    );
    let run = run(&topo, &sc, RoutingMode::Spray);
    let t = completion(&run, 0);
    let want = xfer_us(wire(4 << 20, 4096), 100);
    eprintln!("permutation with spraying: {t:.2} µs, S/B = {want:.2} µs");
    assert!(t >= want);
    assert!(t < want * 1.06, "spray took {t:.1} µs, S/B = {want:.1} µs");
    assert_eq!(run.summary.drops + run.summary.pfc.headroom_overflows, 0);
}
