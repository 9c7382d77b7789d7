//! Per-priority PFC (802.1Qbb): a lossless priority beside a lossy one on
//! the same links, PAUSE that stops only its own priority, and bad
//! priorities refused where they are written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use metaroce_sim::report::stats::PriorityFigures;
use metaroce_sim::{ModeRun, RoutingMode};

/// 8 -> 1 incast on priority 3 (the default) into h1-1.
const INCAST: &str =
    "{name: incast, pattern: incast, hosts: [h2-1, h2-2, h2-3, h3-1, h3-2, h3-3, h4-1, h4-2], \
                      target: h1-1, size: 1MiB}";

fn prio(run: &ModeRun, p: u8) -> PriorityFigures {
    *run.summary.pfc.by_priority.iter().find(|f| f.priority == p).expect("priority in the report")
}

#[test]
fn a_lossless_incast_never_drops_while_a_lossy_job_beside_it_drops_and_recovers() {
    let topo = leaf_spine(4, 4, 4, 100);
    // A lossy 3 -> 1 incast on priority 0 into the same receiver: it shares
    // the spine downlinks and the receiver's link with the lossless one.
    let sc = scenario(
        &topo,
        &format!(
            "nic: {{ordering: out-of-order}}\nnetwork: {{lossless: [3], dcqcn: false, rto: 50us}}\njobs:\n  - {INCAST}\n  - \
             {{name: lossy, pattern: incast, hosts: [h2-4, h3-4, h4-4], target: h1-1, size: 1MiB, priority: 0}}"
        ),
    );
    let run = run(&topo, &sc, RoutingMode::Ecmp);
    let s = &run.summary;
    assert!(s.stopped.is_none(), "{:?}", s.stopped);
    assert_eq!(s.fct.count, 11, "every message completes, lossy ones after recovery");
    let (lossless, lossy) = (prio(&run, 3), prio(&run, 0));
    eprintln!("lossless {lossless:?}\nlossy {lossy:?}");
    assert!(lossless.lossless && !lossy.lossless);
    assert_eq!((lossless.drops, lossless.retransmits), (0, 0), "priority 3 is lossless");
    assert_eq!(s.pfc.headroom_overflows, 0);
    assert!(lossless.pauses > 0 && lossless.largest_tree.links >= 4, "the incast builds a tree");
    assert!(lossy.drops > 0, "3 MiB of lossy incast overflows its 1 MiB queue");
    assert!(lossy.retransmits >= lossy.drops, "go-back-N resends every drop");
    assert_eq!((lossy.pauses, lossy.paused_links), (0, 0), "a lossy priority is never paused");
    assert_eq!(lossy.paused_time_us, 0.0);
    assert_eq!(s.drops, lossy.drops);
    assert_eq!(s.pfc.pauses, lossless.pauses);
    let again = common::run(&topo, &sc, RoutingMode::Ecmp);
    let json = |r: &ModeRun| serde_json::to_string(&r.summary).unwrap();
    assert_eq!(json(&run), json(&again), "two priorities run deterministically");
    assert_eq!(run.fcts_ps, again.fcts_ps);
}

/// Completion of job `j` in multiples of S/B for `bytes` at 100 Gbps.
fn slowdown(run: &ModeRun, j: usize, bytes: u64) -> f64 {
    completion(run, j) / (wire(bytes, 4096) as f64 * 8.0 / 100e3)
}

/// Beside the incast, from 50 µs (when the congestion tree stands), a
/// permutation of 256 KiB messages on `priority`: h2-1 also sends to the
/// incast on its NIC, h3-4 -> h1-3 and h1-2's traffic cross the spine
/// downlinks to leaf1 that the incast pauses.
fn bystander(priority: u8) -> ModeRun {
    let topo = leaf_spine(4, 4, 4, 100);
    let sc = scenario(
        &topo,
        &format!(
            "nic: {{ordering: out-of-order}}\nnetwork: {{lossless: [0, 3], dcqcn: false}}\njobs:\n  - {INCAST}\n  - \
             {{name: bystander, pattern: permutation, hosts: [h2-1, h1-2, h3-4, h1-3], shift: 1, \
             size: 256KiB, start: 50us, priority: {priority}}}"
        ),
    );
    // Sprayed, so the bystander's own flows never collide on a link, to
    // NICs that place packets out of order (so spraying costs no resends).
    run(&topo, &sc, RoutingMode::Spray)
}

#[test]
fn pausing_one_priority_never_stops_another() {
    let apart = bystander(0);
    let (incast, other) = (prio(&apart, 3), prio(&apart, 0));
    eprintln!("incast {incast:?}\nbystander {other:?}");
    assert!(incast.pauses > 0 && incast.paused_time_us > 100.0, "the incast pauses for long: {incast:?}");
    assert_eq!((other.pauses, other.drops), (0, 0), "nothing congests priority 0");
    let alone = slowdown(&apart, 1, 256 << 10);
    // h2-1's NIC alternates between the classes while priority 3 sends, and
    // sends priority 0 alone while it is paused: at worst half the line.
    assert!(alone < 2.1, "priority 0 beside a paused priority 3: {alone:.2} x S/B");
    // The same bystander on the incast's priority waits behind its pauses
    // (head-of-line blocking), which is what separate priorities avoid.
    let shared = bystander(3);
    let blocked = slowdown(&shared, 1, 256 << 10);
    eprintln!("bystander: {alone:.2} x S/B on its own priority, {blocked:.2} x S/B sharing priority 3");
    assert!(blocked > 2.0 * alone, "sharing the paused priority must be slower: {blocked:.2} vs {alone:.2}");
    assert_eq!(shared.summary.pfc.by_priority.len(), 1);
}

#[test]
fn classes_share_a_link_by_dwrr() {
    // Two lossless 4 -> 1 incasts of equal size into one receiver, on
    // priorities 0 and 5, sprayed (to NICs that place packets out of
    // order, so spraying costs no resends) so that only the receiver's link is
    // shared: equal quanta give each half of it, so they finish together,
    // in about twice the time of one alone.
    let topo = leaf_spine(4, 4, 4, 100);
    let jobs = |p: u8| {
        format!(
            "nic: {{ordering: out-of-order}}\nnetwork: {{lossless: [0, 5], dcqcn: false}}\njobs:\n  - \
             {{name: a, pattern: incast, hosts: [h2-1, h2-2, h3-1, h3-2], target: h1-1, size: 1MiB, priority: 0}}\n  - \
             {{name: b, pattern: incast, hosts: [h2-3, h2-4, h3-3, h3-4], target: h1-1, size: 1MiB, priority: {p}}}"
        )
    };
    let run = run(&topo, &scenario(&topo, &jobs(5)), RoutingMode::Spray);
    let (a, b) = (slowdown(&run, 0, 4 << 20), slowdown(&run, 1, 4 << 20));
    eprintln!("DWRR: job a {a:.3}, job b {b:.3} x (4 MiB / B)");
    assert!((a - b).abs() < 0.05, "equal shares finish together: {a:.3} vs {b:.3}");
    assert!(a > 1.95 && a < 2.1, "each gets half the link: {a:.3}");
    assert_eq!(run.summary.drops, 0);
    assert_eq!(run.summary.pfc.by_priority.len(), 2);
    // Had the scheduler favoured one class (strict priority), the other
    // would finish only after it: at about 1.0 and 2.0.
    let one = run_alone(&topo);
    assert!(one < 1.1, "one incast alone takes S/B: {one:.3}");
}

fn run_alone(topo: &metaroce_topo::Topology) -> f64 {
    let sc = scenario(
        topo,
        "nic: {ordering: out-of-order}\nnetwork: {dcqcn: false}
jobs: [{name: a, pattern: incast, hosts: [h2-1, h2-2, h3-1, h3-2], \
         target: h1-1, size: 1MiB}]",
    );
    slowdown(&run(topo, &sc, RoutingMode::Spray), 0, 4 << 20)
}

#[test]
fn bad_priorities_are_refused_where_they_are_written() {
    let r = problems("jobs:\n  - {pattern: all-to-all, hosts: all, size: 1MiB, priority: 8}\n");
    assert!(r.contains("bad.yaml:2:") && r.contains("jobs[0].priority"), "{r}");
    assert!(r.contains("priority 8 does not exist") && r.contains("0..=7"), "{r}");
    let r = problems("network:\n  lossless: [3, 9]\njobs: [{pattern: all-to-all, hosts: all, size: 1MiB}]");
    assert!(r.contains("bad.yaml:2:") && r.contains("network.lossless[1]"), "{r}");
    assert!(r.contains("priority 9 does not exist"), "{r}");
    let r = problems("network: {lossless: [3, 3]}\njobs: [{pattern: all-to-all, hosts: all, size: 1MiB}]");
    assert!(r.contains("network.lossless[1]") && r.contains("listed twice"), "{r}");
    let r = problems("network: {lossless: 3}\njobs: [{pattern: all-to-all, hosts: all, size: 1MiB}]");
    assert!(r.contains("network.lossless") && r.contains("list of lossless priorities"), "{r}");
    let r = problems("network: {priority: -1}\njobs: [{pattern: all-to-all, hosts: all, size: 1MiB}]");
    assert!(r.contains("network.priority") && r.contains("0..=7"), "{r}");
    let r = problems("jobs: [{pattern: all-to-all, hosts: all, size: 1MiB, priority: three}]");
    assert!(r.contains("jobs[0].priority") && r.contains("whole number"), "{r}");
}

#[test]
fn lossless_follows_the_default_priority() {
    let topo = leaf_spine(2, 2, 2, 100);
    let job = "jobs: [{pattern: all-to-all, hosts: all, size: 1MiB}]";
    let sc = scenario(&topo, &format!("network: {{priority: 5}}\n{job}"));
    assert_eq!((sc.net.lossless_priorities.clone(), sc.jobs[0].priority), (vec![5], 5));
    let sc = scenario(&topo, &format!("network: {{lossless: false}}\n{job}"));
    assert!(sc.net.lossless_priorities.is_empty() && !sc.net.lossless && sc.net.reliable);
    let sc = scenario(&topo, job);
    assert_eq!((sc.net.lossless_priorities.clone(), sc.jobs[0].priority), (vec![3], 3));
}
