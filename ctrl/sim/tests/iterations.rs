//! Training iterations (a barrier plus compute time, the same queue pairs)
//! and the NICs' ordering model (go-back-N against out-of-order placement).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use metaroce_sim::engine::flows::Workload;
use metaroce_sim::RoutingMode;
use metaroce_topo::Routing;

#[test]
fn iterations_wait_for_every_rank_then_the_compute_time_on_the_same_queue_pairs() {
    let topo = leaf_spine(2, 2, 2, 100);
    let yaml =
        "jobs: [{name: a2a, pattern: all-to-all, hosts: all, size: 256KiB, iterations: 3, compute: 50us}]";
    let sc = scenario(&topo, yaml);
    let routing = Routing::compute(&topo);
    let w = Workload::build(&topo, &routing, &sc).unwrap();
    // 4 ranks: 12 queue pairs, 12 messages per iteration.
    assert_eq!((w.qps.len(), w.flows.len()), (12, 36));
    let iters = &w.jobs[0].iters;
    assert_eq!(iters.len(), 3);
    for k in 1..3 {
        for (a, b) in w.flows[iters[0].flows.clone()].iter().zip(&w.flows[iters[k].flows.clone()]) {
            assert_eq!((a.qp, a.sport), (b.qp, b.sport), "iteration {k} reuses the queue pairs and ports");
            assert!(b.post_ps.is_none(), "the barrier posts later iterations, not the clock");
        }
    }
    let run = run(&topo, &sc, RoutingMode::Ecmp);
    let job = &run.summary.jobs[0];
    assert_eq!(job.iterations.len(), 3);
    let per: Vec<f64> = job.iterations.iter().map(|i| i.completion_us.unwrap()).collect();
    let ideal = job.iterations[0].ideal_us;
    for (k, c) in per.iter().enumerate() {
        assert!(*c >= ideal * 0.999, "iteration {k}: {c} under the ideal {ideal}");
    }
    // The whole job spans the iterations and both compute phases.
    let total = job.completion_us.unwrap();
    assert!((total - (per.iter().sum::<f64>() + 100.0)).abs() < 0.01, "{total} vs {per:?} + 2 x 50 µs");
    assert!((job.ideal_us - (3.0 * ideal + 100.0)).abs() < 0.01);
    assert_eq!(run.summary.fct.count, 36);
    let json = serde_json::to_value(&run.summary).unwrap();
    let it = &json["jobs"][0]["iterations"][1];
    assert!(it["completion_us"].is_f64() && it["ideal_us"].is_f64() && it["slowdown"].is_f64(), "{it}");
}

#[test]
fn spraying_costs_resends_on_go_back_n_nics_and_nothing_on_out_of_order_ones() {
    // An incast beside an All-to-All: queues differ between the spines, so
    // sprayed packets overtake each other.
    let topo = leaf_spine(2, 2, 2, 100);
    let jobs = "jobs: [{pattern: incast, hosts: [h1-1, h1-2], target: h2-1, size: 1MiB}, \
                {pattern: all-to-all, hosts: all, size: 1MiB}]";
    let gbn = run(&topo, &scenario(&topo, jobs), RoutingMode::Spray);
    let ooo =
        run(&topo, &scenario(&topo, &format!("nic: {{ordering: out-of-order}}\n{jobs}")), RoutingMode::Spray);
    let ecmp = run(&topo, &scenario(&topo, jobs), RoutingMode::Ecmp);
    let (g, o, e) = (&gbn.summary, &ooo.summary, &ecmp.summary);
    eprintln!(
        "spray gbn {:?} {:?}; ooo {:?} {:?}",
        g.out_of_order, g.jobs[0].slowdown, o.out_of_order, o.jobs[0].slowdown
    );
    assert!(g.stopped.is_none() && o.stopped.is_none());
    assert!(o.out_of_order.packets > 0, "spraying reorders");
    assert_eq!((o.out_of_order.naks, o.out_of_order.retransmitted_bytes, o.retransmits), (0, 0, 0));
    assert!(g.out_of_order.naks > 0 && g.out_of_order.retransmitted_bytes > 0, "{:?}", g.out_of_order);
    assert!(g.jobs[0].slowdown.unwrap() > o.jobs[0].slowdown.unwrap(), "resends cost time");
    assert_eq!(
        (e.out_of_order.packets, e.out_of_order.naks, e.retransmits),
        (0, 0, 0),
        "a hash never reorders"
    );
    assert_eq!(g.nic_ordering, "go-back-n");
    assert_eq!(o.nic_ordering, "out-of-order");
}

#[test]
fn out_of_order_nics_recover_losses_without_counting_a_packet_twice() {
    // Lossy and sprayed: drops, reordering and resends together. Every
    // message must complete exactly once.
    let topo = leaf_spine(4, 4, 4, 100);
    let sc = scenario(
        &topo,
        "nic: {ordering: out-of-order}\nnetwork: {lossless: false, dcqcn: false, rto: 50us}\n\
         jobs: [{name: in, pattern: incast, hosts: [h2-1, h2-2, h3-1, h3-2, h4-1, h4-2], target: h1-1, size: 1MiB}]",
    );
    let run = run(&topo, &sc, RoutingMode::Spray);
    let s = &run.summary;
    assert!(s.stopped.is_none(), "{:?}", s.stopped);
    assert!(s.drops > 0 && s.retransmits > 0, "drops {} retransmits {}", s.drops, s.retransmits);
    assert_eq!(s.out_of_order.naks, 0, "out-of-order NICs send no NAK");
    assert_eq!(s.fct.count, 6);
    assert!(s.jobs[0].slowdown.unwrap() >= 0.999);
}

#[test]
fn a_sweep_reports_the_slowest_later_iteration_per_run() {
    let topo = leaf_spine(2, 2, 2, 100);
    let yaml =
        "jobs: [{name: a2a, pattern: all-to-all, hosts: all, size: 256KiB, iterations: 3, compute: 10us}]";
    let mut runs = Vec::new();
    for seed in 1..=3 {
        let mut sc = scenario(&topo, yaml);
        sc.seed = seed;
        runs.push(run(&topo, &sc, RoutingMode::Ecmp).summary);
    }
    let s = metaroce_sim::report::sweep::aggregate("t", &[1, 2, 3], &["ecmp".to_string()], &runs);
    let row = &s.rows[0];
    assert_eq!((row.finished, row.unfinished, row.later_iterations.len()), (3, 0, 3));
    let slowest: Vec<f64> = runs
        .iter()
        .map(|r| r.jobs[0].iterations[1..].iter().map(|i| i.slowdown.unwrap()).fold(0.0, f64::max))
        .collect();
    let worst = slowest.iter().copied().fold(0.0, f64::max);
    assert!((row.later_worst - worst).abs() < 1e-12, "{row:?}");
    assert!(row.later_median >= 1.0 && row.later_median <= row.later_worst);
    let md = metaroce_sim::report::sweep::markdown(&s);
    assert!(md.contains("iterations 2+") && md.contains("| ecmp | a2a |"), "{md}");
}

#[test]
fn each_iteration_reports_the_largest_congestion_tree_that_stood_while_it_ran() {
    // A lossless 6 -> 1 incast: every iteration pauses its way back to the
    // senders. One job, so the run's tree is the largest of its iterations.
    let topo = leaf_spine(4, 2, 2, 100);
    let yaml = "network: {dcqcn: false}\njobs: [{name: in, pattern: incast, \
                hosts: [h2-1, h2-2, h3-1, h3-2, h4-1, h4-2], target: h1-1, size: 256KiB, iterations: 3, compute: 20us}]";
    let s = run(&topo, &scenario(&topo, yaml), RoutingMode::Ecmp).summary;
    let run_tree = s.pfc.largest_tree;
    let trees: Vec<_> = s.jobs[0].iterations.iter().map(|i| i.largest_tree).collect();
    eprintln!("run {run_tree:?}, iterations {trees:?}");
    for t in &trees {
        assert!(t.links >= 6 && t.links <= run_tree.links && t.switches >= 1, "{t:?} vs {run_tree:?}");
    }
    assert_eq!(trees.iter().map(|t| t.links).max(), Some(run_tree.links));
    let json = serde_json::to_value(&s).unwrap();
    assert!(json["jobs"][0]["iterations"][2]["largest_tree"]["links"].is_u64(), "{json}");
    let sweep =
        metaroce_sim::report::sweep::aggregate("t", &[1], &["ecmp".to_string()], std::slice::from_ref(&s));
    let row = &sweep.rows[0];
    assert_eq!(row.iteration_tree_links.len(), 3);
    assert_eq!(row.tree_links_median, f64::from(run_tree.links));
    let later = trees[1..].iter().map(|t| t.links).max().unwrap_or(0);
    assert_eq!(row.later_tree_links_median, f64::from(later));
    // Its pauses too: every iteration pauses, and together they are the
    // run's (nothing pauses in the compute gaps, with no traffic).
    let pauses: Vec<u64> = s.jobs[0].iterations.iter().map(|i| i.pfc_pauses).collect();
    assert!(pauses.iter().all(|&p| p > 0), "{pauses:?}");
    assert_eq!(pauses.iter().sum::<u64>(), s.pfc.pauses, "{pauses:?} vs {}", s.pfc.pauses);
    assert!(json["jobs"][0]["iterations"][1]["pfc_pauses"].is_u64(), "{json}");
    assert_eq!(row.later_pauses_median, (pauses[1] + pauses[2]) as f64);
    assert_eq!(row.later_pauses_max, pauses[1] + pauses[2]);
    assert!(metaroce_sim::report::sweep::markdown(&sweep).contains("PFC pauses in iterations 2+"));
}
