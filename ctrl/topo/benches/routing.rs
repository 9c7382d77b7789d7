//! Group computation on a generated 2,048-switch 3-tier Clos, and the
//! incremental repair after one link failure.
//!
//! Targets: full computation <= 1 s, repair after one failure <= 10 ms.
//! Criterion prints the timings; a summary line per figure follows.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BatchSize, Criterion};
use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;
use metaroce_topo::{Role, Routing, Topology};

/// 32 pods x (48 leaves + 8 spines) + 8 planes x 32 super-spines = 2,048 switches.
fn fabric() -> Topology {
    let t = gen::clos3(&Common::new("bench-2048", Bandwidth::gbps(400)), 32, 48, 8, 32, 4)
        .unwrap_or_else(|e| panic!("benchmark fabric: {e}"));
    assert_eq!(t.switches.len(), 2048);
    t
}

/// A link between a spine and a super-spine: its failure touches every
/// destination, the harder case for the repair.
fn spine_uplink(t: &Topology) -> usize {
    t.links
        .iter()
        .position(|l| t.switches[l.b.switch].role == Role::SuperSpine)
        .unwrap_or_else(|| panic!("no spine uplink"))
}

fn full(c: &mut Criterion) {
    let t = fabric();
    let mut g = c.benchmark_group("routing");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("full_2048_switches", |b| b.iter(|| black_box(Routing::compute(black_box(&t)))));
    g.finish();
}

fn incremental(c: &mut Criterion) {
    let t = fabric();
    let base = Routing::compute(&t);
    let leaf_uplink = 0; // leaf -> spine, the common case
    let spine_up = spine_uplink(&t);
    let mut g = c.benchmark_group("routing");
    g.sample_size(20).measurement_time(Duration::from_secs(20));
    for (name, link) in [("fail_leaf_uplink", leaf_uplink), ("fail_spine_uplink", spine_up)] {
        g.bench_function(name, |b| {
            b.iter_batched_ref(
                || base.clone(),
                |r| black_box(r.fail_link(&t, link).unwrap_or_default()),
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

/// One plain measurement of each figure, printed against its target, so
/// `make bench` ends with the numbers that matter.
fn summary() {
    let t = fabric();
    let cpu_before = cpu_ms();
    let start = Instant::now();
    let r = Routing::compute(&t);
    let full = start.elapsed();
    let cpu = cpu_ms().zip(cpu_before).map(|(after, before)| after - before);
    let (routes, groups) = r.totals();
    let mut worst = Duration::ZERO;
    let mut changes = 0;
    for link in [0, spine_uplink(&t)] {
        let mut copy = r.clone();
        let start = Instant::now();
        changes = copy.fail_link(&t, link).map(|c| c.len()).unwrap_or(0);
        worst = worst.max(start.elapsed());
    }
    println!(
        "\nsummary: 2,048 switches, {} links, {} destination leaves: {routes} routes in {groups} groups",
        t.links.len(),
        r.destinations().len()
    );
    println!("summary: full group computation     {:>9.1} ms (target <= 1000 ms)", full.as_secs_f64() * 1e3);
    if let Some(cpu) = cpu {
        // Wall time suffers when other work shares the cores; CPU time does not.
        println!("summary:   of which CPU time (2 threads) {cpu:>6.0} ms");
    }
    println!(
        "summary: repair after one link down  {:>9.3} ms (target <= 10 ms), {changes} routes changed",
        worst.as_secs_f64() * 1e3
    );
}

criterion_group!(benches, full, incremental);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}

/// User + system CPU time of this process in milliseconds, from
/// /proc/self/stat (Linux, 100 ticks per second); None elsewhere.
fn cpu_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks * 10.0)
}
