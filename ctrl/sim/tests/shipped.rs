//! The shipped scenarios (`scenarios/*.yaml`), every mode on the scenario's
//! seed, checked on ranges around what was measured (release and debug run
//! the same virtual time, so the figures are the same): the ranges leave
//! room for model changes, not for a different story. Where metaroce does
//! not beat flowlet, the test says so instead of hiding it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;

mod common;

use common::shipped as load;
use metaroce_sim::{scenario, ModeRun, RoutingMode, Summary};
use metaroce_topo::Routing;

/// Runs a shipped scenario in all its modes; summaries by mode name.
fn run(name: &str) -> BTreeMap<String, Summary> {
    let (l, routing) = load(name);
    let mut out = BTreeMap::new();
    for &mode in &l.scenario.modes {
        let r: ModeRun =
            metaroce_sim::run_mode(&l.topology, &routing, &l.scenario, mode, &mut |_| {}).unwrap();
        let s = r.summary;
        assert!(s.stopped.is_none(), "{name} {mode}: stopped {:?}", s.stopped);
        assert_eq!(s.unfinished_messages, 0);
        assert_eq!(s.pfc.headroom_overflows, 0, "{name} {mode}");
        let jobs: Vec<String> =
            s.jobs.iter().map(|j| format!("{} {:.2}x", j.name, j.slowdown.unwrap_or(f64::NAN))).collect();
        eprintln!("{name} {mode}: {} | fct p99 {:.0} us | {:?}", jobs.join(", "), s.fct.p99_us, s.control);
        out.insert(mode.as_str().to_string(), s);
    }
    let modes: Vec<&str> = out.keys().map(String::as_str).collect();
    assert_eq!(modes, ["ecmp", "flowlet", "metaroce"], "{name}: every shipped scenario runs all three");
    out
}

fn slowdown(s: &Summary, job: usize) -> f64 {
    s.jobs[job].slowdown.unwrap()
}

fn within(v: f64, lo: f64, hi: f64, what: &str) {
    assert!((lo..=hi).contains(&v), "{what}: {v:.3} not in {lo}..={hi}");
}

/// The controller's modelled reaction can never beat its parts: digest
/// 50 µs + hold-up 200 µs + decision 100 µs + write 500 µs for a first
/// crossing. With several iterations a port crosses up again after it
/// cooled, and the policy's hold-up may have run since an earlier
/// crossing: then only digest + decision + write (650 µs, less a
/// nanosecond: the policy's clock counts nanoseconds, the engine's
/// picoseconds) bound the reaction.
const LEAST_REPEAT_REACTION_US: f64 = 649.999;

/// Runs a shipped scenario on each seed, every mode (modes in parallel);
/// summaries by mode name, one per seed.
fn sweep(name: &str, seeds: std::ops::RangeInclusive<u64>) -> BTreeMap<String, Vec<Summary>> {
    let (l, routing) = load(name);
    let mut out: BTreeMap<String, Vec<Summary>> = BTreeMap::new();
    for seed in seeds {
        let mut sc = l.scenario.clone();
        sc.seed = seed;
        let runs: Vec<Summary> = std::thread::scope(|scope| {
            let hs: Vec<_> = sc
                .modes
                .iter()
                .map(|&mode| {
                    let (l, routing, sc) = (&l, &routing, &sc);
                    scope.spawn(move || {
                        metaroce_sim::run_mode(&l.topology, routing, sc, mode, &mut |_| {}).unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap().summary).collect()
        });
        for s in runs {
            assert!(s.stopped.is_none(), "{name} seed {seed} {}: stopped {:?}", s.mode, s.stopped);
            assert_eq!(s.unfinished_messages, 0);
            assert_eq!(s.pfc.headroom_overflows, 0, "{name} {}", s.mode);
            for j in &s.jobs {
                assert!(j.iterations.len() >= 3, "{name}: failure-free scenarios run at least 3 iterations");
                for it in &j.iterations {
                    assert!(
                        it.slowdown.unwrap() >= 0.999,
                        "{name} {}: no iteration beats the ideal bound",
                        s.mode
                    );
                    assert!(
                        it.largest_tree.links <= s.pfc.largest_tree.links,
                        "{name} {}: an iteration's tree is part of the run's",
                        s.mode
                    );
                }
            }
            out.entry(s.mode.clone()).or_default().push(s);
        }
    }
    let modes: Vec<&str> = out.keys().map(String::as_str).collect();
    assert_eq!(modes, ["ecmp", "flowlet", "metaroce"], "{name}: every shipped scenario runs all three");
    out
}

/// Spray on out-of-order NICs (the yardstick for PFC pauses) on
/// the shipped scenario `name`, one run per seed.
fn spray_out_of_order(name: &str, seeds: std::ops::RangeInclusive<u64>) -> Vec<Summary> {
    let (l, routing) = load(name);
    let mut sc = l.scenario.clone();
    sc.net.ordering = metaroce_sim::Ordering::OutOfOrder;
    seeds
        .map(|seed| {
            sc.seed = seed;
            metaroce_sim::run_mode(&l.topology, &routing, &sc, RoutingMode::Spray, &mut |_| {})
                .unwrap()
                .summary
        })
        .collect()
}

/// The PFC pauses that began during job `job`'s iterations from the
/// second on: the median over seeds.
fn median_later_pauses(runs: &[Summary], job: usize) -> f64 {
    median_of(runs, |s| s.jobs[job].iterations[1..].iter().map(|i| i.pfc_pauses).sum::<u64>() as f64)
}

/// The median over seeds of job `job`'s completion over ideal.
fn median(runs: &[Summary], job: usize) -> f64 {
    let mut v: Vec<f64> = runs.iter().map(|s| slowdown(s, job)).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The median over seeds of iteration `it` (0-based) of job `job`.
fn median_iteration(runs: &[Summary], job: usize, it: usize) -> f64 {
    median_of(runs, |s| s.jobs[job].iterations[it].slowdown.unwrap())
}

fn median_of(runs: &[Summary], f: impl Fn(&Summary) -> f64) -> f64 {
    let mut v: Vec<f64> = runs.iter().map(f).collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

// Ranges below are around medians over the seeds each test runs (debug
// time allows 3 to 5), with room for the spread a 20-seed sweep showed
// (`metaroce sim sweep SCENARIO --seeds 1-20`, quoted in each test).

#[test]
fn low_entropy_all_to_all_collides_under_ecmp() {
    let r = sweep("ecmp-collisions.yaml", 1..=5);
    let (e, f, m) = (&r["ecmp"], &r["flowlet"], &r["metaroce"]);
    // 10-seed sweep (`metaroce sim sweep scenarios/ecmp-collisions.yaml
    // --seeds 1-10 --modes ecmp,flowlet,spray,metaroce`), medians over the
    // three iterations: ecmp 1.25x, flowlet 1.14x, spray 1.40x (go-back-N
    // NICs resend what it reorders), metaroce 1.06x (worst 1.10x).
    within(median(e, 0), 1.1, 1.5, "ecmp slowdown");
    within(median(f, 0), 1.05, 1.35, "flowlet slowdown");
    within(median(m, 0), 1.0, 1.1, "metaroce slowdown");
    assert!(median(f, 0) < median(e, 0), "ECMP's collisions cost more than flowlets' re-picks");
    assert!(median(m, 0) < median(f, 0), "placing the flows beats picking at random");
    // Under ECMP a flow keeps its path: nothing arrives out of order.
    for s in e {
        assert_eq!((s.out_of_order.packets, s.out_of_order.naks), (0, 0));
    }
    for s in m {
        // Iteration 1 runs on flowlets while the first switches report its
        // flows; the planner's placement takes effect at each flow's next
        // flowlet, the next iteration: from there every iteration is
        // within 1.05x of ideal (measured 1.014-1.037 on seeds 1-5), and
        // no packet was reordered.
        for it in &s.jobs[0].iterations[1..] {
            within(it.slowdown.unwrap(), 1.0, 1.05, "metaroce from iteration 2");
        }
        assert_eq!((s.out_of_order.packets, s.out_of_order.naks), (0, 0), "seed {}", s.seed);
        let c = s.control.as_ref().unwrap();
        let p = c.placement.as_ref().unwrap();
        // Every inter-leaf pair but those whose reports all share a
        // detector slot: the controller's rule (now the simulator's too,
        // through the shared core) never adds a flow from a report that
        // flags a shared slot. 187 of 192 on seed 1.
        assert!((180..=192).contains(&p.flows), "inter-leaf pairs reported large and placed: {p:?}");
        assert!(s.steered_flowlets >= 180, "{}", s.steered_flowlets);
        let placed = p.placed.as_ref().unwrap();
        assert!(placed.min_us > 0.0 && placed.count > 0, "{placed:?}");
    }
    assert!(e[0].control.is_none() && f[0].control.is_none(), "no control without failures");
    // PFC pauses that began during iterations 2+: no more than spray's on
    // out-of-order NICs (10 seeds, medians: 54 against 218).
    let spray = spray_out_of_order("ecmp-collisions.yaml", 1..=5);
    let (lm, ls) = (median_later_pauses(m, 0), median_later_pauses(&spray, 0));
    eprintln!("ecmp-collisions: pauses in iterations 2+, metaroce {lm} spray out-of-order {ls}");
    assert!(lm <= ls, "{lm} vs {ls}");
}

#[test]
fn an_announced_job_is_placed_before_its_first_packet() {
    let r = sweep("announced-all-to-all.yaml", 1..=3);
    // 10 seeds: metaroce 1.01x on every seed, PFC pauses 72 / 73 (median /
    // max), none reordered; spray on out-of-order NICs (`--ordering
    // out-of-order`) 1.01x with 275 / 291 pauses.
    for s in &r["metaroce"] {
        for it in &s.jobs[0].iterations {
            within(it.slowdown.unwrap(), 1.0, 1.05, "announced, every iteration");
        }
        assert_eq!(s.out_of_order.packets, 0);
        assert!(s.pfc.pauses <= 127, "no more pauses than spray on out-of-order NICs: {}", s.pfc.pauses);
        let p = s.control.as_ref().unwrap().placement.clone().unwrap();
        assert_eq!(p.moves.get("new"), Some(&192), "placed before the run: {p:?}");
    }
    assert!(median(&r["metaroce"], 0) < median(&r["flowlet"], 0));
}

#[test]
fn incast_grows_a_congestion_tree_in_every_mode() {
    let r = sweep("incast-tree.yaml", 1..=5);
    // Seeds 1-5 (`metaroce sim sweep scenarios/incast-tree.yaml --seeds
    // 1-5`), medians: incast ecmp 1.00x, flowlet 1.08x, metaroce 1.04x:
    // flowlets re-picked under the tree's pauses arrive out of order, and
    // go-back-N NICs resend; metaroce's placed flows keep their paths.
    within(median(&r["ecmp"], 0), 1.0, 1.05, "ecmp incast");
    within(median(&r["flowlet"], 0), 1.02, 1.3, "flowlet incast");
    within(median(&r["metaroce"], 0), 1.0, 1.15, "metaroce incast");
    for (mode, runs) in &r {
        for s in runs {
            let t = s.pfc.largest_tree;
            assert!(t.links >= 12 && t.switches >= 8, "{mode}: {t:?}");
            assert_eq!(s.drops, 0, "{mode}: PFC keeps it lossless");
        }
        let ooo = median_of(runs, |s| s.out_of_order.packets as f64);
        match mode.as_str() {
            "flowlet" => assert!(ooo > 0.0, "{mode}: flowlets re-picked at gaps reorder under the tree"),
            // ECMP never moves a flow; metaroce moves one only when its
            // first leaf has seen everything it forwarded acknowledged
            // (before that rule, 288 out of order on seed 3).
            _ => assert!(runs.iter().all(|s| s.out_of_order.packets == 0), "{mode}: nothing reordered"),
        }
    }
    // The bystander is where routing matters: seeds 1-5, medians ecmp
    // 1.45x, flowlet 1.51x, metaroce 1.26x (20 seeds, `metaroce sim sweep
    // scenarios/incast-tree.yaml --seeds 1-20`: 1.46 / 1.55 / 1.27): the
    // planner keeps the bystander's placed paths off the incast's links.
    // The target, 1.2x, is not reached reactively: the first
    // iteration (ideal 348 us) is over before any placement lands (report
    // -> entries in place >= 650 us, and the bystander's queue pairs have
    // no flowlet gap until the iteration ends), so it runs as under
    // flowlets, at 2.7-3.1x, which alone costs 0.22x of the job. From the
    // second iteration on every seed runs at its own figure: alone in the
    // fabric it runs at 1.28x per iteration, since each chunk is posted
    // when the ACK of the one before reaches its sender (1.154x when the
    // simulator posted it the instant the chunk arrived). `incast-tree-announced.yaml` is the same scenario
    // with the jobs announced: there the first iteration is shielded too.
    within(median(&r["ecmp"], 1), 1.2, 1.8, "ecmp bystander");
    within(median(&r["flowlet"], 1), 1.25, 1.8, "flowlet bystander");
    within(median(&r["metaroce"], 1), 1.05, 1.35, "metaroce bystander");
    assert!(median(&r["metaroce"], 1) < median(&r["flowlet"], 1), "placement shields the bystander");
    for s in &r["metaroce"] {
        // A flow placed before the rest of the incast was known is not
        // held down: the bystander found a clean path by its second
        // iteration (seed 4 ran it at 2.53x while that placement was held).
        for it in &s.jobs[1].iterations[1..] {
            within(it.slowdown.unwrap(), 1.0, 1.3, "metaroce bystander, iterations 2+");
        }
    }
    for s in &r["metaroce"] {
        let c = s.control.as_ref().unwrap();
        assert!(c.group_writes > 0, "the controller reacts to the tree: {c:?}");
    }
    // The largest congestion tree over the whole run is not smaller than
    // ECMP's: seeds 1-5, median links ecmp 26, flowlet 29, metaroce 28
    // (20 seeds, `metaroce sim sweep scenarios/incast-tree.yaml --seeds
    // 1-20`, column "tree links": 27 / 31.5 / 29). It is the first
    // iteration's: metaroce's runs as flowlets before any placement lands,
    // tree for tree (and slowdown for slowdown) on every seed.
    let tree = |mode: &str| median_of(&r[mode], |s| s.pfc.largest_tree.links as f64);
    within(tree("ecmp"), 20.0, 32.0, "ecmp tree links");
    within(tree("metaroce"), 24.0, 34.0, "metaroce tree links");
    assert!(tree("metaroce") < tree("flowlet"), "placed flows keep their paths under the tree");
    // From the second iteration on, which is what a reactive controller
    // is judged on, it is far smaller: the largest tree that stood during
    // each incast iteration (`iterations[k].largest_tree`), seeds 1-5,
    // medians for iterations 2 and 3: ecmp 25 / 25, flowlet 28 / 24,
    // metaroce 14 / 14 (14 on every seed: the planned paths; ECMP's
    // depend on the hash, 22-28). 20 seeds, the sweep's "tree links" per
    // iteration: ecmp 25 / 24.5 (14-31 over seeds), flowlet 30 / 27,
    // metaroce 14 / 14, as announced (below). The incast's iterations are
    // the ones to read: the bystander's drift against them under ECMP
    // (its iterations run at 2.2x), so an ECMP bystander iteration may
    // overlap the incast's compute phase and see no tree. The planner
    // confines the incast (`metaroce_te`'s receiver-bound groups): its
    // members share as few links as their senders allow, 14 links over 7
    // switches (the eight senders' host links and six between switches);
    // spread over both aggregation switches of the receiver's pod, as the
    // planner placed it before it knew groups, it stood 22-24.
    let iter_tree =
        |mode: &str, k: usize| median_of(&r[mode], |s| s.jobs[0].iterations[k].largest_tree.links as f64);
    for k in 1..3 {
        let (e, f, m) = (iter_tree("ecmp", k), iter_tree("flowlet", k), iter_tree("metaroce", k));
        assert!(m < e && m < f, "incast iteration {}: metaroce {m} against ecmp {e}, flowlet {f}", k + 1);
        for s in &r["metaroce"] {
            let links = s.jobs[0].iterations[k].largest_tree.links as f64;
            within(links, 10.0, 16.0, "metaroce incast tree, iterations 2+, every seed");
        }
    }
}

#[test]
fn an_announced_incast_is_confined_before_its_first_packet() {
    let r = sweep("incast-tree-announced.yaml", 1..=3);
    // Both jobs go through the job API before the run: the planner caps
    // each incast flow at an eighth of the receiver's NIC and places the
    // bystander where the incast does not go, so its first iteration is
    // shielded too. Seeds 1-3 (and 20, `metaroce sim sweep
    // scenarios/incast-tree-announced.yaml --seeds 1-20`; metaroce does
    // not depend on the seed here: nothing is drawn at random once every
    // flow is placed): bystander every iteration 1.154x (its own figure
    // alone in the fabric), 1.05x for the whole run with its compute
    // phases, against ecmp 1.39x (1.46x) and flowlet 1.50x (1.55x);
    // incast 1.00x; none reordered; 480 PFC pauses against 945 under ECMP
    // and 932 for spray on out-of-order NICs (786 when the planner spread
    // the incast over both aggregation switches of the receiver's pod).
    let (e, f, m) = (&r["ecmp"], &r["flowlet"], &r["metaroce"]);
    for s in m {
        for it in &s.jobs[1].iterations {
            // Its own floor: alone in the fabric it runs at 1.28x per
            // iteration (each 512 KiB chunk is posted when the ACK of the
            // one before reaches its sender: a round trip per chunk).
            within(it.slowdown.unwrap(), 1.0, 1.3, "announced bystander, every iteration");
        }
        for it in &s.jobs[0].iterations {
            within(it.slowdown.unwrap(), 1.0, 1.05, "announced incast, every iteration");
        }
        assert_eq!((s.out_of_order.packets, s.drops), (0, 0));
        assert!(s.pfc.pauses <= 950, "no more pauses than spray on out-of-order NICs: {}", s.pfc.pauses);
        let p = s.control.as_ref().unwrap().placement.clone().unwrap();
        assert_eq!(
            p.moves.get("new"),
            Some(&12),
            "8 incast + 4 bystander flows placed before the run: {p:?}"
        );
    }
    assert!(median(m, 1) < median(e, 1) && median(m, 1) < median(f, 1));
    // The largest congestion tree: 14 links over 7 switches on every
    // seed (the incast confined: see the reactive test above), against
    // ECMP's 24-26 here (20 seeds: median 27, from 14 to 35) and
    // flowlet's 28-29 (31.5).
    let tree = |mode: &str| median_of(&r[mode], |s| s.pfc.largest_tree.links as f64);
    assert!(tree("metaroce") < tree("ecmp"), "{} vs {}", tree("metaroce"), tree("ecmp"));
    assert!(tree("metaroce") < tree("flowlet"));
    // Iteration by iteration, the incast's every iteration stands the same
    // tree (the same paths from the first packet on), the smallest its
    // senders allow; ECMP's medians are 24 / 24 / 22 here, 26 / 25 / 24.5
    // over 20 seeds, ranging 13-35 with the hash.
    for s in m {
        within(s.pfc.largest_tree.links as f64, 10.0, 16.0, "announced incast tree, every seed");
        for it in &s.jobs[0].iterations {
            assert_eq!(
                it.largest_tree.links, s.pfc.largest_tree.links,
                "announced: every iteration the same tree"
            );
        }
    }
}

#[test]
fn two_jobs_share_the_spines() {
    let r = sweep("two-jobs.yaml", 1..=3);
    let (e, f, m) = (&r["ecmp"], &r["flowlet"], &r["metaroce"]);
    // Seeds 1-3, medians: elephants ecmp 2.24x, flowlet 2.02x, metaroce
    // 1.28x; All-to-All 1.14x, 1.09x, 1.06x (20 seeds, `metaroce sim sweep
    // scenarios/two-jobs.yaml --seeds 1-20`: elephants 2.15 / 2.01 / 1.34,
    // All-to-All 1.13 / 1.09 / 1.05).
    // The elephants never pause within an iteration, so a steered one
    // keeps its flowlet path until its iteration ends (milliseconds: the
    // All-to-All's three iterations all run during the elephants' first).
    // The planner counts a flow still seen off its planned path two
    // detector windows after its entries landed where it is seen, before
    // it places new flows, and pins it there until it pauses: the
    // All-to-All is placed around the elephants where they are, not
    // where they were planned to go. (Before, it was placed on the spines
    // the plan left free and met the elephants there: All-to-All 1.18x,
    // iteration 2 at 1.43x.)
    within(median(e, 0), 1.9, 2.7, "ecmp elephants");
    within(median(f, 0), 1.7, 2.5, "flowlet elephants");
    // With the shared control core (seeds 1-3) the elephants run at
    // 1.59x median and the All-to-All at 1.12x, its iterations 2+ at
    // 1.27x median (1.37x worst); with the simulator's own copy of the
    // glue they ran at 1.28x and 1.06x (iterations 2+ 1.045x). The cause:
    // this scenario's NICs rotate the UDP source port per message
    // (`sports_per_qp: 2`). The old glue steered every reported flow as
    // its host pair from the first report; the daemon keys a flow as the
    // data plane's `steer_flow` table does, and steers a queue pair as
    // its pair only once it sees its second port (`core/src/place/
    // keys.rs`), a report window into the message that uses it, when the
    // message's first flowlet has picked a path it keeps. The regression
    // is the controller's, now measured; the README says so.
    within(median(m, 0), 1.1, 2.1, "metaroce elephants");
    assert!(median(m, 0) < median(f, 0), "placed elephants finish sooner");
    within(median(e, 1), 1.05, 1.3, "ecmp all-to-all");
    within(median(f, 1), 1.02, 1.2, "flowlet all-to-all");
    within(median(m, 1), 1.0, 1.2, "metaroce all-to-all");
    // No longer better than flowlets for the training job (1.12x against
    // flowlets' median, seeds 1-3): the claim is withdrawn until the
    // rotation above is handled.
    for it in 1..3 {
        // With ACKs in band (seeds 1-3) iteration 3 runs at 1.03 / 1.69 /
        // 1.46x: it meets the elephants' second iteration, whose flows
        // never drain while it runs, so they cannot be moved off its way.
        within(median_iteration(m, 1, it), 1.0, 1.5, "metaroce all-to-all, iterations 2+ (median)");
    }
    for s in m {
        for it in &s.jobs[1].iterations[1..] {
            // Worst 1.69x (seed 2, iteration 3, beside the elephants'
            // second iteration): a steered elephant never pauses within
            // an iteration, so it moves only at its next drained point.
            within(it.slowdown.unwrap(), 1.0, 1.75, "metaroce all-to-all, iterations 2+");
        }
        assert_eq!(s.out_of_order.packets, 0, "steering never reorders");
        let c = s.control.as_ref().unwrap();
        assert!(c.group_writes > 0, "{c:?}");
        let p = c.placement.as_ref().unwrap();
        assert!(p.stayed > 0, "elephants that had not moved were counted where they are: {p:?}");
        if let Some(moved) = &c.moved {
            assert!(
                moved.min_us >= LEAST_REPEAT_REACTION_US,
                "traffic cannot move before the weights: {moved:?}"
            );
        }
    }
    // PFC over the whole run: fewer pauses than ECMP, no longer fewer than
    // flowlets (seeds 1-3: 778 / 632 / 1717 median for metaroce / flowlet
    // / ecmp; 530 / 677 / 1330 when metaroce moved flows at flowlet gaps,
    // which is not safe under PFC). A steered elephant never pauses within
    // an iteration, so it moves only at its next drained point. More than
    // spray on out-of-order NICs (179 on seeds 1-5), which splits the
    // elephants packet by packet from the first iteration on.
    assert!(median_of(m, |s| s.pfc.pauses as f64) < median_of(e, |s| s.pfc.pauses as f64));
    // The issue compares iterations from the second on, where metaroce
    // has learnt the flows: the pauses that began while each job's later
    // iterations ran. 20 seeds (`metaroce sim sweep scenarios/two-jobs.yaml
    // --seeds 1-20`, and `--modes spray --ordering out-of-order`), medians
    // for elephants / All-to-All: ecmp 363 / 206, flowlet 263 / 208,
    // metaroce 108 / 102 (measured before spray was made even per flow),
    // spray on out-of-order NICs 0 / 2 (at most 71 / 95): spraying every
    // flow over every path, with NICs that take the reordering, pauses
    // almost never, and metaroce does not come near it (seeds 1-3:
    // 142 / 169 against 0 / 0).
    let spray = spray_out_of_order("two-jobs.yaml", 1..=3);
    for job in 0..2 {
        let (le, lf, lm, ls) = (
            median_later_pauses(e, job),
            median_later_pauses(f, job),
            median_later_pauses(m, job),
            median_later_pauses(&spray, job),
        );
        eprintln!("two-jobs job {job}: pauses in iterations 2+, ecmp {le} flowlet {lf} metaroce {lm} spray out-of-order {ls}");
        if job == 0 {
            assert!(
                lm < le,
                "job {job}: placed flows pause less than hashed ones in iterations 2+: {lm} vs {le}"
            );
        }
        assert!(ls <= lm, "job {job}: spray on out-of-order NICs pauses least: {ls} vs metaroce {lm}");
    }
    // Since metaroce moves a flow only when it is drained (seeds 1-3,
    // iterations 2+, elephants / All-to-All: ecmp 1091 / 225, flowlet
    // 137 / 227, metaroce 410 / 435), the elephants, one 32 MiB message
    // each that never drains within an iteration, keep the paths their
    // iteration started on, and the All-to-All is placed around them:
    // fewer pauses than ECMP for the elephants, more than flowlets, which
    // move at gaps (without reordering here, by luck rather than rule).
    let elephants = (median_later_pauses(m, 0), median_later_pauses(e, 0));
    assert!(elephants.0 < elephants.1, "placed elephants pause less than ECMP's: {elephants:?}");
}

#[test]
fn a_three_tier_clos_all_to_all_hashes_at_two_tiers() {
    let r = sweep("clos3-all-to-all.yaml", 1..=5);
    let (e, f, m) = (&r["ecmp"], &r["flowlet"], &r["metaroce"]);
    // Seeds 1-5, medians: ecmp 1.15x, flowlet 1.17x, metaroce 1.07x
    // (worst 1.31 / 1.25 / 1.08). Flowlets do not help here: their re-picks
    // reorder (go-back-N resends) and collide as often as the hash does;
    // the planner places every flow at both tiers that have a choice.
    within(median(e, 0), 1.05, 1.5, "ecmp");
    within(median(f, 0), 1.05, 1.5, "flowlet");
    within(median(m, 0), 1.0, 1.2, "metaroce");
    assert!(median_of(f, |s| s.out_of_order.packets as f64) > 0.0);
    assert!(e.iter().all(|s| s.out_of_order.packets == 0));
    // Issue 16's target for iterations 2+, 1.05x, is missed here: seeds
    // 1-5, metaroce's iterations 2 and 3 at 1.060x and 1.066x (medians,
    // worst 1.074 / 1.083), and its first iteration's flowlets reorder a
    // few packets (median 38). No placement is the bound: spray on
    // out-of-order NICs, the even split the ideal assumes, does no better
    // (seeds 1-3: 1.093x and 1.071x) with the same PFC pauses over the run
    // (313 vs 315); during iterations 2+ metaroce pauses far less (10
    // seeds, medians 48 against spray's 215; seeds 1-3 67 against 230).
    // Where the 6% goes, measured:
    // - the placement is as good as it gets: at most 14 flows on any link
    //   (a leaf's 28 inter-leaf flows over its 2 uplinks), the same as the
    //   announced job's exact-size placement;
    // - in a 6-iteration variant on seeds 1-4, announced (placed before
    //   iteration 1) its iterations run at 1.04-1.07x (median about
    //   1.047), reactive 1.04-1.13x (median about 1.06), with no control
    //   activity after the first
    //   iteration, so the spread is the transport's (DCQCN, PFC), not the
    //   controller's;
    // - the same All-to-All on one 16-port switch runs at 1.02x: the leaf
    //   uplinks at 93-100% load cost the rest.
    for it in 1..3 {
        within(median_iteration(m, 0, it), 1.0, 1.1, "metaroce, iterations 2+ (median)");
    }
    let spray = spray_out_of_order("clos3-all-to-all.yaml", 1..=3);
    let (lm, ls) = (median_later_pauses(m, 0), median_later_pauses(&spray, 0));
    eprintln!("clos3: pauses in iterations 2+, metaroce {lm} spray out-of-order {ls}");
    assert!(lm <= ls, "{lm} vs {ls}");
    assert!(e[0].utilization.iter().any(|u| u.tier == "spine→super-spine"), "traffic climbs to the cores");
}

#[test]
fn the_ai_ring_allreduce_scenario_loads() {
    // 512 hosts, 4 rings of 64 ranks: too heavy for a debug run of every
    // mode; `metaroce sim sweep` measures it (20 seeds: every mode within
    // a few percent of ideal).
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/ai-ring-allreduce.yaml");
    let l = scenario::load_file(&path).unwrap_or_else(|e| panic!("{}", e.report()));
    assert_eq!(l.topology.hosts.len(), 512);
    assert_eq!(l.scenario.jobs.len(), 4);
    assert!(l.scenario.jobs.iter().all(|j| j.ranks.len() == 64 && j.iterations == 3));
}

#[test]
fn a_link_failure_mid_collective_costs_the_baselines_their_convergence() {
    let r = run("link-failure.yaml");
    let (e, f, m) = (&r["ecmp"], &r["flowlet"], &r["metaroce"]);
    for (mode, s) in &r {
        if mode == "metaroce" {
            // Its flows keep the paths they were placed on until drained;
            // on this seed none was on the link when it failed (3,082
            // packets routed into it before the drain rule, 684 now), and
            // what arrives out of order is the failover's (29 packets).
            assert_eq!(
                s.out_of_order.packets, s.out_of_order.by_cause["failover"],
                "{mode}: only failovers reorder"
            );
        } else {
            assert!(s.lost_on_failure > 0, "{mode}: packets on the link are lost");
            assert!(s.retransmits > 0, "{mode}: go-back-N resends them");
        }
        let fo = s.control.as_ref().and_then(|c| c.failover.clone()).unwrap();
        assert_eq!(fo.count, 1, "{mode}");
    }
    // Baselines: exactly the 10 ms convergence; metaroce: digest + decision
    // + write = 650 µs, plus waiting for a decision in progress.
    for s in [e, f] {
        assert_eq!(s.control.as_ref().unwrap().failover.as_ref().unwrap().min_us, 10_000.0);
    }
    let fo = m.control.as_ref().unwrap().failover.clone().unwrap();
    within(fo.min_us, 650.0, 800.0, "metaroce failover");
    // Measured: ecmp 6.44x, flowlet 6.88x, metaroce 2.57x (3.51x when it
    // moved flows at flowlet gaps and ACKs travelled out of band).
    within(slowdown(e, 0), 5.5, 7.5, "ecmp");
    within(slowdown(f, 0), 6.0, 8.0, "flowlet");
    within(slowdown(m, 0), 2.2, 4.0, "metaroce");
    assert!(
        m.blackholed * 5 < e.blackholed.min(f.blackholed),
        "metaroce stops routing into the dead link sooner"
    );
}

#[test]
fn metaroce_s_gain_under_a_failure_is_its_failover_not_its_steady_state() {
    // The same ring without the failure: measured ecmp 2.24x, flowlet
    // 3.93x, metaroce 3.50x. Flowlets hurt this ring (their re-picks
    // collide more than seed 5's hash does), so metaroce beats ECMP only
    // because its failover takes 650 µs instead of 10 ms; the failure
    // itself costs metaroce almost nothing (3.51x with it).
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/link-failure.yaml");
    let mut l = scenario::load_file(&path).unwrap_or_else(|e| panic!("{}", e.report()));
    l.scenario.events.clear();
    l.scenario.net.reliable = false;
    let routing = Routing::compute(&l.topology);
    let run = |mode| {
        let r = metaroce_sim::run_mode(&l.topology, &routing, &l.scenario, mode, &mut |_| {}).unwrap();
        slowdown(&r.summary, 0)
    };
    let (e, f, m) = (run(RoutingMode::Ecmp), run(RoutingMode::Flowlet), run(RoutingMode::Metaroce));
    eprintln!("link-failure without the failure: ecmp {e:.2}x, flowlet {f:.2}x, metaroce {m:.2}x");
    within(e, 2.0, 2.5, "ecmp without failure");
    within(f, 3.5, 4.3, "flowlet without failure");
    // With the shared control core (queue pairs planned as the daemon
    // plans them) the ring runs at 2.73x without the failure (3.50x with
    // the simulator's own copy of the glue).
    within(m, 2.4, 4.0, "metaroce without failure");
    assert!(e < m, "without a failure ECMP wins this ring");
}

#[test]
fn the_demo_s_heavy_scenario_loads() {
    // Too heavy for a debug test run (6.5M events per mode): make demo runs it.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/ai-fabric-failure.yaml");
    let l = scenario::load_file(&path).unwrap_or_else(|e| panic!("{}", e.report()));
    let sc = &l.scenario;
    assert_eq!(sc.jobs[0].ranks.len(), 64);
    assert_eq!(sc.events.len(), 1);
    assert_eq!(sc.modes.len(), 3);
    assert!(sc.net.reliable);
}
