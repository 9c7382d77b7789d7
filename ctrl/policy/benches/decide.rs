//! Decision time on the 2,048-switch 3-tier Clos of the routing bench,
//! with 1% and 10% of the switch-to-switch egress ports congested.
//!
//! - `first_step`: every hot port takes its first derate step at once, so
//!   every destination they touch is recomputed (the worst decision).
//! - `steady`: the same fabric one millisecond later, nothing may step: the
//!   cost of a routine decision while overrides are in force.
//!
//! Criterion prints the timings; a summary line per figure follows.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BatchSize, Criterion};
use metaroce_policy::{Input, Policy, PolicyConfig, PolicyState};
use metaroce_telemetry::{Heat, PortHeat, PortKey};
use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;
use metaroce_topo::{Routing, Topology};

const MS: u64 = 1_000_000;

/// 32 pods x (48 leaves + 8 spines) + 8 planes x 32 super-spines = 2,048 switches.
fn fabric() -> Topology {
    let t = gen::clos3(&Common::new("bench-2048", Bandwidth::gbps(400)), 32, 48, 8, 32, 4)
        .unwrap_or_else(|e| panic!("benchmark fabric: {e}"));
    assert_eq!(t.switches.len(), 2048);
    t
}

/// `percent` of all egress ports congested since time 0, picked by a fixed
/// pseudo-random sequence so every run heats the same ports.
fn heat(t: &Topology, percent: u64) -> Heat {
    let mut ports: Vec<PortKey> = (0..t.switches.len())
        .flat_map(|s| t.adjacency(s).iter().map(move |a| PortKey { switch: s, port: a.port }))
        .collect();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Fisher-Yates with the generator above.
    for i in (1..ports.len()).rev() {
        let j = usize::try_from(next() % (i as u64 + 1)).unwrap_or(0);
        ports.swap(i, j);
    }
    let hot = ports.len() * usize::try_from(percent).unwrap_or(0) / 100;
    ports
        .into_iter()
        .take(hot)
        .map(|k| (k, PortHeat { congested: true, since_ns: 0, depth: 60, max_depth: 64 }))
        .collect()
}

struct Case {
    name: String,
    heat: Heat,
    /// State after the first step, for the steady case.
    after: PolicyState,
    hot: usize,
}

fn cases(t: &Topology, r: &Routing, p: &Policy) -> Vec<Case> {
    [1, 10]
        .into_iter()
        .map(|percent| {
            let heat = heat(t, percent);
            let mut after = PolicyState::default();
            let now = p.config().hold_up_ns;
            p.decide(Input { topo: t, routing: r, heat: &heat, now_ns: now }, &mut after);
            Case { name: format!("{percent}pct_hot"), hot: heat.len(), heat, after }
        })
        .collect()
}

fn decide(c: &mut Criterion) {
    let t = fabric();
    let r = Routing::compute(&t);
    let p = Policy::new(PolicyConfig::default()).unwrap_or_else(|e| panic!("{e}"));
    let up = p.config().hold_up_ns;
    let mut g = c.benchmark_group("decide");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    for case in cases(&t, &r, &p) {
        let first = Input { topo: &t, routing: &r, heat: &case.heat, now_ns: up };
        g.bench_function(format!("first_step_{}", case.name), |b| {
            b.iter_batched_ref(PolicyState::default, |s| black_box(p.decide(first, s)), BatchSize::LargeInput)
        });
        let steady = Input { now_ns: up + MS, ..first };
        g.bench_function(format!("steady_{}", case.name), |b| {
            b.iter_batched_ref(
                || case.after.clone(),
                |s| black_box(p.decide(steady, s)),
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

/// One plain measurement of each figure, so `make bench` ends with them.
fn summary() {
    let t = fabric();
    let r = Routing::compute(&t);
    let p = Policy::new(PolicyConfig::default()).unwrap_or_else(|e| panic!("{e}"));
    let up = p.config().hold_up_ns;
    let ports: usize = (0..t.switches.len()).map(|s| t.adjacency(s).len()).sum();
    println!(
        "\nsummary: 2,048 switches, {ports} egress ports, {} destination leaves, default config",
        r.destinations().len()
    );
    for case in cases(&t, &r, &p) {
        let mut s = PolicyState::default();
        let (first, first_cpu, d) =
            timed(|| p.decide(Input { topo: &t, routing: &r, heat: &case.heat, now_ns: up }, &mut s));
        let mut s = case.after.clone();
        let (steady, steady_cpu, _) =
            timed(|| p.decide(Input { topo: &t, routing: &r, heat: &case.heat, now_ns: up + MS }, &mut s));
        // Drain what the rate limit held back (time stands still, so no
        // level steps), then time a decision with nothing left to do.
        let quiet = Input { topo: &t, routing: &r, heat: &case.heat, now_ns: up + MS };
        let mut rounds = 0;
        while s.pending().next().is_some() && rounds < 10_000 {
            p.decide(quiet, &mut s);
            rounds += 1;
        }
        let (settled, settled_cpu, _) = timed(|| p.decide(quiet, &mut s));
        println!(
            "summary: {:>5} hot ports ({}): settled after {rounds} decisions, {} overrides: \
             {settled:>6.1} ms wall, {settled_cpu:>5.0} ms CPU per decision",
            case.hot,
            case.name,
            s.override_count(),
        );
        println!(
            "summary: {:>5} hot ports ({}): first step {first:>7.1} ms wall, {first_cpu:>6.0} ms CPU \
             ({} changes applied, {} held back, {} overrides); steady {steady:>6.1} ms wall, {steady_cpu:>5.0} ms CPU",
            case.hot,
            case.name,
            d.changes.len(),
            d.deferred,
            d.overrides,
        );
    }
}

/// Wall and CPU milliseconds of `f` (CPU: -1 where /proc is missing).
/// Wall time suffers when other work shares the cores; CPU time does not.
fn timed<T>(f: impl FnOnce() -> T) -> (f64, f64, T) {
    let cpu = cpu_ms();
    let start = Instant::now();
    let out = f();
    let wall = start.elapsed().as_secs_f64() * 1e3;
    let cpu = cpu_ms().zip(cpu).map_or(-1.0, |(after, before)| after - before);
    (wall, cpu, out)
}

/// User + system CPU time of this process in milliseconds, from
/// /proc/self/stat (Linux, 100 ticks per second); None elsewhere.
fn cpu_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks * 10.0)
}

/// The everyday case: one hot port at a time. A spine's downlink to a leaf
/// reaches the most switches (every spine and super-spine of its plane).
fn single() {
    let t = fabric();
    let r = Routing::compute(&t);
    let p = Policy::new(PolicyConfig::default()).unwrap_or_else(|e| panic!("{e}"));
    let up = p.config().hold_up_ns;
    let spine = t.switch_id("p1-spine1").unwrap_or_else(|| panic!("no p1-spine1"));
    for (what, peer) in [("spine->leaf downlink", "p1-leaf1"), ("spine->super-spine uplink", "ss1-1")] {
        let peer = t.switch_id(peer).unwrap_or_else(|| panic!("no {peer}"));
        let Some(a) = t.adjacency(spine).iter().find(|a| a.peer == peer) else { continue };
        let heat: Heat = [(
            PortKey { switch: spine, port: a.port },
            PortHeat { congested: true, since_ns: 0, depth: 60, max_depth: 64 },
        )]
        .into_iter()
        .collect();
        let mut s = PolicyState::default();
        let (wall, cpu, d) =
            timed(|| p.decide(Input { topo: &t, routing: &r, heat: &heat, now_ns: up }, &mut s));
        println!(
            "summary: one hot {what}: first step {wall:>7.1} ms wall, {cpu:>6.0} ms CPU ({} changes, {} held back)",
            d.changes.len(),
            d.deferred
        );
    }
}

criterion_group!(benches, decide);

fn main() {
    // `cargo test --all-targets` runs benches once in a debug build, without
    // `--bench`: measuring there only costs time, so skip.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
    single();
}
