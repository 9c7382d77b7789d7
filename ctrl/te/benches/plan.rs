//! Planner time on the 2,048-switch 3-tier Clos of the routing bench with
//! 100,000 flows, and job placement on `ai-64x16`.
//!
//! - `full_100k`: every flow new, one decision places them all (here on
//!   a fresh copy each time; the summary's figure is the steady state of
//!   one planner deciding again, which keeps its buffers, and it prints
//!   that planner's cold first decision too).
//! - `hot_link`: one decision after unsteered load fills the busiest leaf
//!   uplink (flows move off it).
//! - `link_failure`: one decision after that uplink fails (its flows are
//!   re-placed); the routing repair itself is `metaroce-topo`'s bench.
//! - `job_a2a_512_ai64x16`: an All-to-All over all 512 hosts of
//!   `topologies/ai-64x16.yaml` (261,632 host-pair flows), announced and
//!   placed in one decision; `job_a2a_1024_64x16`: 1,024 ranks on the same
//!   64 x 16 leaf-spine with 16 hosts per leaf (ai-64x16 has 8, so one
//!   rank per host cannot reach 1,024 there): 1,047,552 flows.
//! - `exact_perm_1024_fat_tree_k16`: a shuffled permutation over the
//!   1,024 hosts of a k=16 fat-tree (16 pods of 8 leaves and 8 spines, 64
//!   cores), announced and placed in one decision by the recursive
//!   colouring.
//! - (summary only) two jobs announced together on that fat-tree, 4 MiB
//!   elephants beside a 1 MiB All-to-All, placed with and without
//!   rearranging the batch (`rearrange.rs`).
//!
//! Targets: full placement <= 100 ms, re-placement after one hot link or
//! failure <= 1 ms, the exact permutation on the k=16 fat-tree <= 5 ms. Criterion prints the timings; a summary line per
//! figure follows.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BatchSize, Criterion};
use metaroce_te::job::Pattern;
use metaroce_te::{Demand, FlowKey, Planner, TeConfig};
use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;
use metaroce_topo::{Routing, Topology};

// The planner runs inside the `metaroce` binary (the controller, the
// simulator), which allocates with mimalloc: measure it as it runs there.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MS: u64 = 1_000_000;
const FLOWS: usize = 100_000;
/// Full placements timed for the summary: the steady state's runs on one
/// planner, and the fat-tree's copies.
const FULL_RUNS: usize = 5;

/// 32 pods x (48 leaves + 8 spines) + 8 planes x 32 super-spines = 2,048 switches.
fn fabric() -> Topology {
    let t = gen::clos3(&Common::new("bench-2048", Bandwidth::gbps(400)), 32, 48, 8, 32, 4)
        .unwrap_or_else(|e| panic!("benchmark fabric: {e}"));
    assert_eq!(t.switches.len(), 2048);
    t
}

/// `FLOWS` flows between pseudo-random distinct hosts, each offering
/// 1..=100 Gb/s, from a fixed sequence so every run places the same ones.
fn flows(t: &Topology) -> Vec<(FlowKey, Demand)> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let n = t.hosts.len() as u64;
    let mut out = Vec::with_capacity(FLOWS);
    while out.len() < FLOWS {
        let (a, b) = ((next() % n) as usize, (next() % n) as usize);
        if a == b {
            continue;
        }
        let sport = 0xC000 | (next() as u16 & 0x3FFF);
        let key = FlowKey::flow(t.hosts[a].ip, t.hosts[b].ip, sport, (next() & 0xFF_FFFF) as u32);
        out.push((key, Demand::rate((next() % 100 + 1) * 1_000_000_000)));
    }
    out
}

/// A planner with every flow known and none placed yet.
fn loaded(t: &Topology, r: &Routing, fl: &[(FlowKey, Demand)]) -> Planner {
    let mut p = Planner::new(t, r, TeConfig::default()).unwrap_or_else(|e| panic!("{e}"));
    for &(k, d) in fl {
        p.upsert(k, d).unwrap_or_else(|e| panic!("{e}"));
    }
    p
}

/// The busiest leaf uplink of a placed planner: (switch, port, link).
fn busiest_uplink(t: &Topology, p: &Planner) -> (usize, u16, usize) {
    let mut best = (0.0, (0, 0, 0));
    for s in (0..t.switches.len()).filter(|&s| t.switches[s].role == metaroce_topo::Role::Leaf) {
        for a in t.adjacency(s) {
            let u = p.utilisation(s, a.port).unwrap_or(0.0);
            if u > best.0 {
                best = (u, (s, a.port, a.link));
            }
        }
    }
    best.1
}

fn job(t: &Topology, hosts: usize) -> Vec<FlowKey> {
    let ranks: Vec<usize> = (0..hosts).collect();
    Pattern::AllToAll
        .pairs(&ranks)
        .into_iter()
        .map(|(a, b)| FlowKey::pair(t.hosts[a].ip, t.hosts[b].ip))
        .collect()
}

fn job_planner(t: &Topology, r: &Routing, keys: &[FlowKey]) -> Planner {
    let mut p = Planner::new(t, r, TeConfig::default()).unwrap_or_else(|e| panic!("{e}"));
    for &k in keys {
        p.upsert(k, Demand::announced(1 << 20, None)).unwrap_or_else(|e| panic!("{e}"));
    }
    p
}

/// The k=16 fat-tree and a shuffled permutation over its 1,024 hosts
/// (a fixed xorshift sequence), as host pairs.
fn fat_tree_permutation() -> (Topology, Vec<FlowKey>) {
    let t = gen::fat_tree(&Common::new("fat-tree-k16", Bandwidth::gbps(400)), 16)
        .unwrap_or_else(|e| panic!("fat-tree k=16: {e}"));
    let mut perm: Vec<usize> = (0..t.hosts.len()).collect();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in (1..perm.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        perm.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let ranks: Vec<usize> = (0..t.hosts.len()).collect();
    let keys = Pattern::Permutation { perm }
        .pairs(&ranks)
        .into_iter()
        .map(|(a, b)| FlowKey::pair(t.hosts[a].ip, t.hosts[b].ip))
        .collect();
    (t, keys)
}

fn ai64x16() -> Topology {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/ai-64x16.yaml");
    metaroce_topo::load_file(&path).unwrap_or_else(|e| panic!("ai-64x16: {e}"))
}

fn big64x16() -> Topology {
    gen::leaf_spine(&Common::new("a2a-1024", Bandwidth::gbps(400)), 64, 16, 16, 1)
        .unwrap_or_else(|e| panic!("64x16x16: {e}"))
}

fn bench(c: &mut Criterion) {
    let t = fabric();
    let r = Routing::compute(&t);
    let fl = flows(&t);
    let fresh = loaded(&t, &r, &fl);
    let mut placed = fresh.clone();
    placed.plan(0);
    let (sw, port, link) = busiest_uplink(&t, &placed);
    let mut failed = r.clone();
    let changes = failed.fail_link(&t, link).unwrap_or_default();
    let mut g = c.benchmark_group("plan");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("full_100k", |b| {
        b.iter_batched_ref(|| fresh.clone(), |p| black_box(p.plan(0)), BatchSize::LargeInput)
    });
    g.bench_function("hot_link", |b| {
        b.iter_batched_ref(
            || {
                let mut p = placed.clone();
                p.set_background(sw, port, 400_000_000_000).unwrap_or_else(|e| panic!("{e}"));
                p
            },
            |p| black_box(p.plan(1000 * MS)),
            BatchSize::LargeInput,
        )
    });
    g.bench_function("link_failure", |b| {
        b.iter_batched_ref(
            || placed.clone(),
            |p| {
                p.routing_changed(&failed, &changes);
                black_box(p.plan(1000 * MS))
            },
            BatchSize::LargeInput,
        )
    });
    let (ft, ft_keys) = fat_tree_permutation();
    let ft_p = job_planner(&ft, &Routing::compute(&ft), &ft_keys);
    g.bench_function("exact_perm_1024_fat_tree_k16", |b| {
        b.iter_batched_ref(|| ft_p.clone(), |p| black_box(p.plan(0)), BatchSize::LargeInput)
    });
    let ai = ai64x16();
    let ai_r = Routing::compute(&ai);
    let keys = job(&ai, ai.hosts.len());
    let jp = job_planner(&ai, &ai_r, &keys);
    g.bench_function("job_a2a_512_ai64x16", |b| {
        b.iter_batched_ref(|| jp.clone(), |p| black_box(p.plan(0)), BatchSize::LargeInput)
    });
    g.finish();
}

/// One plain measurement of each figure, so `make bench` ends with them.
fn summary() {
    let t = fabric();
    let (route_ms, _, r) = timed(|| Routing::compute(&t));
    let fl = flows(&t);
    let (index_ms, _, empty) = timed(|| Planner::new(&t, &r, TeConfig::default()));
    let mut p = empty.unwrap_or_else(|e| panic!("{e}"));
    let (upsert_ms, _, ()) = timed(|| {
        for &(k, d) in &fl {
            p.upsert(k, d).unwrap_or_else(|e| panic!("{e}"));
        }
    });
    // One decision places every flow. A controller decides again and
    // again with one planner, which keeps its buffers from decision to
    // decision: that steady state is the figure, the median of
    // `FULL_RUNS` decisions of one planner reset to the same input
    // before each (`clone_from` keeps the target's buffers). The
    // planner's first decision, with every buffer fresh, is printed too.
    let (cold, mut runs, plan) = steady(&mut p);
    let cpus: Vec<String> = runs.iter().map(|r| format!("{:.0}", r.1)).collect();
    let faults: Vec<String> = runs.iter().map(|r| r.2.to_string()).collect();
    runs.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (full, full_cpu, _) = runs[runs.len() / 2];
    print_hash("full", &(&plan, p.placement()));
    println!(
        "\nsummary: 2,048 switches, {} hosts, {FLOWS} flows: index {index_ms:.0} ms (routing {route_ms:.0} ms), \
         upserts {upsert_ms:.1} ms; full placement, steady state, median of {FULL_RUNS} {full:.1} ms wall, \
         {full_cpu:.0} ms CPU (runs, ms CPU: {}; page faults: {}; the planner's first, cold: {:.0} ms CPU, {} \
         page faults): max utilisation {:.3}, lower bound {:.3}, {} search steps, {} unplaced",
        t.hosts.len(),
        cpus.join(", "),
        faults.join(", "),
        cold.1,
        cold.2,
        plan.max_utilisation,
        plan.lower_bound,
        plan.search_steps,
        plan.unplaced.len()
    );
    let (sw, port, link) = busiest_uplink(&t, &p);
    let on = p.placement().iter().filter(|(_, x)| x.hops.iter().any(|h| h.link == link)).count();
    let (hot, d) = repeat(&p, |q| {
        q.set_background(sw, port, 400_000_000_000).unwrap_or_else(|e| panic!("{e}"));
        q.plan(1000 * MS)
    });
    print_hash("hot link", &d);
    println!(
        "summary: one hot leaf uplink ({on} flows on it): re-placement {hot}, moves {}, max utilisation {:.3}",
        by_reason(&d),
        d.max_utilisation
    );
    let mut failed = r.clone();
    let (repair_ms, _, changes) = timed(|| failed.fail_link(&t, link).unwrap_or_default());
    let (fail, d) = repeat(&p, |q| {
        q.routing_changed(&failed, &changes);
        q.plan(1000 * MS)
    });
    print_hash("failure", &d);
    println!(
        "summary: one failed leaf uplink: re-placement {fail} ({} route changes; topo's repair {repair_ms:.2} ms), \
         moves {}, {} unplaced",
        changes.len(),
        by_reason(&d),
        d.unplaced.len()
    );
    fat_tree_summary();
    two_jobs_summary();
    if std::env::args().any(|a| a == "--clos-only") {
        return;
    }
    for (name, topo) in [("ai-64x16, 512 ranks", ai64x16()), ("64x16 x 16 hosts, 1,024 ranks", big64x16())] {
        let r = Routing::compute(&topo);
        let keys = job(&topo, topo.hosts.len());
        let (up_ms, _, mut jp) = timed(|| job_planner(&topo, &r, &keys));
        let (ms, cpu, d) = timed(|| jp.plan(0));
        println!(
            "summary: All-to-All job on {name}: {} flows, announce {up_ms:.0} ms, placement {ms:.0} ms wall \
             {cpu:.0} ms CPU (exact colouring: {}), max utilisation {:.4}, lower bound {:.4}",
            keys.len(),
            d.exact,
            d.max_utilisation,
            d.lower_bound
        );
    }
}

/// Wall and CPU milliseconds and page faults of each run, and the last
/// copy with its plan.
type Runs = (Vec<Time>, Option<(Planner, metaroce_te::Plan)>);

/// Wall and CPU milliseconds of one decision, and the page faults it
/// took (this thread's minor faults; 0 where /proc is missing).
type Time = (f64, f64, u64);

/// The full placement on one long-lived planner: its first decision
/// (cold), then `FULL_RUNS` more, each after `clone_from(p)` resets it to
/// `p`'s state (keeping its buffers, as a planner deciding again has
/// them) and each plan dropped before the next decision, as a caller
/// that has acted on it. Leaves `p` as placed by the last.
fn steady(p: &mut Planner) -> (Time, Vec<Time>, metaroce_te::Plan) {
    let mut q = p.clone();
    let (cold, first) = timed_faults(|| q.plan(0));
    drop(first);
    let mut runs = Vec::new();
    let mut last = None;
    for _ in 0..FULL_RUNS {
        drop(last.take());
        q.clone_from(p);
        let (time, plan) = timed_faults(|| q.plan(0));
        runs.push(time);
        last = Some(plan);
    }
    *p = q;
    (cold, runs, last.unwrap_or_else(|| panic!("no run")))
}

/// [`timed`], with the minor page faults `f` took.
fn timed_faults<T>(f: impl FnOnce() -> T) -> (Time, T) {
    let before = minor_faults();
    let (wall, cpu, out) = timed(f);
    let faults = minor_faults().zip(before).map_or(0, |(after, before)| after.saturating_sub(before));
    ((wall, cpu, faults), out)
}

/// This thread's minor page faults so far, from /proc/thread-self/stat
/// (the 10th field; the fields after the command name's closing
/// parenthesis start at the 3rd); None elsewhere.
fn minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(7)?.parse().ok()
}

/// One decision on each of `FULL_RUNS` copies of `p`.
fn on_copies(p: &Planner) -> Runs {
    let mut runs = Vec::new();
    let mut last = None;
    for _ in 0..FULL_RUNS {
        let mut q = p.clone();
        let (time, plan) = timed_faults(|| q.plan(0));
        runs.push(time);
        last = Some((q, plan));
    }
    (runs, last)
}

/// Decisions of the fat-tree permutation timed together for its CPU
/// figure: one takes about a millisecond, below what the thread's CPU
/// clock resolves (it advances at scheduler ticks).
const FT_CPU_RUNS: usize = 40;

/// The exact permutation on the k=16 fat-tree: the median decision of
/// `FULL_RUNS` copies (wall), the mean CPU of `FT_CPU_RUNS` decisions
/// on copies made beforehand, and what it planned against the bound.
fn fat_tree_summary() {
    let (t, keys) = fat_tree_permutation();
    let p = job_planner(&t, &Routing::compute(&t), &keys);
    let (mut runs, last) = on_copies(&p);
    let Some((_, plan)) = last else { return };
    let walls: Vec<String> = runs.iter().map(|r| format!("{:.2}", r.0)).collect();
    let faults: Vec<String> = runs.iter().map(|r| r.2.to_string()).collect();
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut copies: Vec<Planner> = (0..FT_CPU_RUNS).map(|_| p.clone()).collect();
    let (_, cpu, plans) = timed(|| copies.iter_mut().map(|q| q.plan(0)).collect::<Vec<_>>());
    let same = plans.iter().all(|q| q.moves == plan.moves);
    print_hash("fat-tree permutation", &plan);
    println!(
        "summary: shuffled permutation over the 1,024 hosts of a k=16 fat-tree ({} flows): placement median of \
         {FULL_RUNS} {:.2} ms wall (runs, ms wall: {}; page faults: {}), mean of {FT_CPU_RUNS} {:.2} ms CPU (target 5 ms), exact \
         colouring: {}, max utilisation {:.4}, lower bound {:.4}{}",
        keys.len(),
        runs[runs.len() / 2].0,
        walls.join(", "),
        faults.join(", "),
        cpu / FT_CPU_RUNS as f64,
        plan.exact,
        plan.max_utilisation,
        plan.lower_bound,
        if same { "" } else { " (copies decided differently!)" }
    );
}

/// Two jobs announced together on the k=16 fat-tree: a permutation of
/// 4 MiB elephants over half its hosts and a 40-rank All-to-All of 1 MiB
/// flows beside them (2,072 flows of two rates, which the colouring
/// does not take), placed with and without rearranging (`rearrange.rs`):
/// what the rearrangement costs a decision and what it gains.
fn two_jobs_summary() {
    let t = match gen::fat_tree(&Common::new("fat-tree-k16", Bandwidth::gbps(400)), 16) {
        Ok(t) => t,
        Err(e) => return eprintln!("bench: fat-tree k=16: {e}"),
    };
    let r = Routing::compute(&t);
    let n = t.hosts.len();
    // Hosts in a fixed scattered order: elephants on the first half,
    // the All-to-All's ranks on the next 40.
    let hosts: Vec<usize> = (0..n).map(|i| (i * 7919) % n).collect();
    let (e, a) = (n / 2, n / 2 + 40);
    let perm: Vec<usize> = (0..e).map(|i| (i * 5 + 3) % e).collect();
    let pair = |(x, y): (usize, usize)| FlowKey::pair(t.hosts[x].ip, t.hosts[y].ip);
    let elephants: Vec<FlowKey> =
        Pattern::Permutation { perm }.pairs(&hosts[..e]).into_iter().map(pair).collect();
    let all: Vec<FlowKey> = Pattern::AllToAll.pairs(&hosts[e..a]).into_iter().map(pair).collect();
    for rearrange in [false, true] {
        let mut p = Planner::new(&t, &r, TeConfig { rearrange_jobs: rearrange, ..TeConfig::default() })
            .unwrap_or_else(|e| panic!("planner: {e}"));
        for &k in &elephants {
            p.upsert(k, Demand::announced(4 << 20, None)).unwrap_or_else(|e| panic!("{e}"));
        }
        for &k in &all {
            p.upsert(k, Demand::announced(1 << 20, None)).unwrap_or_else(|e| panic!("{e}"));
        }
        // CPU time is read at scheduler ticks (a few ms), about one such
        // decision without rearranging: the mean of many decisions, timed
        // together, as for the fat-tree permutation.
        let mut copies: Vec<Planner> = (0..FT_CPU_RUNS).map(|_| p.clone()).collect();
        let (wall, cpu, plans) = timed(|| copies.iter_mut().map(|q| q.plan(0)).collect::<Vec<_>>());
        let Some(plan) = plans.last() else { return };
        println!(
            "summary: two jobs announced together on a k=16 fat-tree ({} elephants, a 40-rank All-to-All: {} \
             flows), rearranging {}: placement mean of {FT_CPU_RUNS} {:.1} ms CPU ({:.1} ms wall), max utilisation \
             {:.4}, lower bound {:.4}",
            elephants.len(),
            elephants.len() + all.len(),
            if rearrange { "on" } else { "off" },
            cpu / FT_CPU_RUNS as f64,
            wall / FT_CPU_RUNS as f64,
            plan.max_utilisation,
            plan.lower_bound
        );
    }
}

/// With `PLAN_HASH` set, prints a hash of `what`'s debug form, so that
/// two builds (same toolchain) can be shown to decide the same.
fn print_hash(name: &str, what: &impl std::fmt::Debug) {
    if std::env::var_os("PLAN_HASH").is_some() {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        format!("{what:?}").hash(&mut h);
        println!("plan hash, {name}: {:016x}", h.finish());
    }
}

/// "reason count" for every reason that moved a flow.
fn by_reason(plan: &metaroce_te::Plan) -> String {
    let mut counts = std::collections::BTreeMap::new();
    for m in &plan.moves {
        *counts.entry(m.reason.as_str()).or_insert(0) += 1;
    }
    let parts: Vec<String> = counts.iter().map(|(r, n)| format!("{r} {n}")).collect();
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// Runs `f` on 21 copies of `p` and gives the median and fastest wall
/// time (on a shared machine the fastest is the one least disturbed), and
/// the last plan.
fn repeat(p: &Planner, f: impl Fn(&mut Planner) -> metaroce_te::Plan) -> (String, metaroce_te::Plan) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..21 {
        let mut q = p.clone();
        let start = Instant::now();
        let plan = f(&mut q);
        times.push(start.elapsed().as_secs_f64() * 1e3);
        last = Some(plan);
    }
    times.sort_by(f64::total_cmp);
    let plan = last.unwrap_or_else(|| panic!("no run"));
    (format!("median {:.3} ms, fastest {:.3} ms wall", times[times.len() / 2], times[0]), plan)
}

/// Wall and CPU milliseconds of `f` (CPU: -1 where /proc is missing).
fn timed<T>(f: impl FnOnce() -> T) -> (f64, f64, T) {
    let cpu = cpu_ms();
    let start = Instant::now();
    let out = f();
    let wall = start.elapsed().as_secs_f64() * 1e3;
    let cpu = cpu_ms().zip(cpu).map_or(-1.0, |(after, before)| after - before);
    (wall, cpu, out)
}

/// CPU time of this thread in milliseconds, from /proc/thread-self/schedstat
/// (Linux; updated at scheduler ticks, so good to a few ms); None
/// elsewhere. The planner is single-threaded, so on a machine shared with
/// other work this is the figure to read for the long runs.
fn cpu_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e6)
}

criterion_group!(benches, bench);

fn main() {
    // `cargo test --all-targets` runs benches once in a debug build, without
    // `--bench`: measuring there only costs time, so skip.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    if !std::env::args().any(|a| a == "--summary-only") {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
    summary();
}
