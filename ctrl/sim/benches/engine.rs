//! `make bench`: prints simulator throughput (events per second on one
//! core), the wall time of a 1,024-host All-to-All, and the memory each
//! packet in flight costs. Figures only; nothing here asserts on timing.

use std::time::Instant;

use metaroce_sim::{scenario, RoutingMode};
use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;
use metaroce_topo::{Routing, Topology};

// The engine runs inside the `metaroce` binary, which allocates with
// mimalloc: measure it as it runs there. With the system allocator this
// bench's 1,024-host run took 21.9-24.3 s of CPU where `metaroce sim run`
// took 17.7-18.7 s on the same engine (6 December 2026); mimalloc's
// memory came in huge pages (the kernel's profile shows them), which
// probably is why: the run reads hundreds of megabytes at random.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Every host sends 64 KiB to every other, all at once.
const A2A_64K: &str = "network: {dcqcn: true}\nlimits: {events: 2000000000}\n\
                       jobs: [{name: a2a, pattern: all-to-all, hosts: all, size: 64KiB}]";

fn fabric(leaves: usize, spines: usize, hosts: usize) -> Option<Topology> {
    let c = Common::new("bench", Bandwidth::gbps(400));
    match gen::leaf_spine(&c, leaves, spines, hosts, 1) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("bench: cannot generate the fabric: {e}");
            None
        }
    }
}

/// CPU time this thread has run, from Linux's schedstat (None elsewhere):
/// the machine may be shared, and events per CPU-second is what "one core"
/// means.
fn cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

fn bench(label: &str, topo: &Topology, yaml: &str, mode: RoutingMode) {
    let sc = match scenario::load_str(yaml, label, topo) {
        Ok(s) => s,
        Err(e) => {
            eprint!("{}", e.report());
            return;
        }
    };
    let t0 = Instant::now();
    let routing = Routing::compute(topo);
    let setup = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let c1 = cpu_seconds();
    let run = match metaroce_sim::run_mode(topo, &routing, &sc, mode, &mut |_| {}) {
        Ok(r) => r,
        Err(e) => {
            eprint!("{}", e.report());
            return;
        }
    };
    let wall = t1.elapsed().as_secs_f64();
    let cpu = c1.zip(cpu_seconds()).map(|(a, b)| b - a);
    let s = &run.summary;
    let per_cpu = cpu.map_or(String::new(), |c| {
        format!(" ({c:.2} s on the CPU = {:.1}M events per CPU-second)", s.events as f64 / c / 1e6)
    });
    println!(
        "{label} [{mode}]: {} hosts, {} messages, {:.1}M events in {wall:.2} s wall = {:.1}M events/s{per_cpu}; \
         {:.0} µs simulated; routing {setup:.2} s; peak {} packets in flight, peak {} pending events{}",
        topo.hosts.len(),
        s.fct.count,
        s.events as f64 / 1e6,
        s.events as f64 / wall / 1e6,
        s.sim_time_us,
        s.max_packets_in_flight,
        run.max_pending_events,
        s.stopped.map_or(String::new(), |st| format!(" (STOPPED: {st:?})")),
    );
}

fn main() {
    // `cargo test --all-targets` runs this too, in a debug build: measuring
    // there means minutes of work for meaningless figures.
    if !std::env::args().any(|a| a == "--bench") {
        println!("sim engine bench: not run under `cargo test`; `make bench` runs it");
        return;
    }
    // A smaller All-to-All of the same shape as the 1,024-host one (k
    // leaves, k spines, k hosts per leaf), alone: what a profiler runs
    // (`SIM_BENCH_A2A_K=16 valgrind --tool=callgrind ...`).
    if let Some(k) = std::env::var("SIM_BENCH_A2A_K").ok().and_then(|v| v.parse::<usize>().ok()) {
        if let Some(t) = fabric(k, k, k) {
            bench(&format!("all-to-all {} hosts, 64 KiB per pair", k * k), &t, A2A_64K, RoutingMode::Ecmp);
        }
        return;
    }
    println!(
        "sim: state per packet in flight: {} bytes (on a link: the {}-byte packet its Arrive event carries, that event's \
         and the link's TxDone's {}-byte entries; a queued packet is one {}-byte FIFO slot)",
        metaroce_sim::engine::bytes_per_packet(),
        std::mem::size_of::<metaroce_sim::engine::Packet>(),
        metaroce_sim::engine::events::Queue::ENTRY_BYTES,
        std::mem::size_of::<metaroce_sim::engine::Packet>(),
    );
    println!(
        "sim: state per message: {} + {} bytes per queue pair (hot, cold) + {} per message + {} receive state",
        std::mem::size_of::<metaroce_sim::engine::flows::QpHot>(),
        std::mem::size_of::<metaroce_sim::engine::flows::Qp>(),
        std::mem::size_of::<metaroce_sim::engine::flows::Flow>(),
        std::mem::size_of::<metaroce_sim::engine::flows::Rcv>(),
    );
    if std::env::var_os("SIM_BENCH_LARGE").is_none() {
        if let Some(t) = fabric(4, 4, 4) {
            // Few queue pairs: all state stays in cache, so this is the
            // engine's own speed rather than the memory system's.
            let yaml = "network: {dcqcn: true}\nlimits: {events: 1000000000}\n\
                        jobs: [{name: p, pattern: permutation, hosts: all, shift: 4, size: 512MiB}]";
            bench("permutation 16 hosts, 512 MiB each", &t, yaml, RoutingMode::Ecmp);
            // Four permutations, on one priority and then on two (half of
            // them lossy): what a queue per (port, priority) and DWRR cost.
            for (label, lossy) in [("one priority", 3), ("priorities 3 and 0", 0)] {
                let jobs: Vec<String> = (1..=4)
                    .map(|i| {
                        let p = if i > 2 { lossy } else { 3 };
                        format!("{{name: p{i}, pattern: permutation, hosts: \"h*-{i}\", shift: 1, size: 256MiB, priority: {p}}}")
                    })
                    .collect();
                let yaml = format!(
                    "network: {{dcqcn: true, lossless: [3]}}\nlimits: {{events: 1000000000}}\njobs: [{}]",
                    jobs.join(", ")
                );
                bench(
                    &format!("4 permutations 16 hosts, 256 MiB each, {label}"),
                    &t,
                    &yaml,
                    RoutingMode::Ecmp,
                );
            }
        }
        if let Some(t) = fabric(16, 8, 16) {
            let yaml = "network: {dcqcn: true}\nlimits: {events: 1000000000}\n\
                    jobs: [{name: a2a, pattern: all-to-all, hosts: all, size: 256KiB}]";
            bench("all-to-all 256 hosts, 256 KiB per pair", &t, yaml, RoutingMode::Ecmp);
        }
    }
    if std::env::var_os("SIM_BENCH_SMALL").is_some() {
        return;
    }
    if let Some(t) = fabric(32, 32, 32) {
        bench("all-to-all 1,024 hosts, 64 KiB per pair", &t, A2A_64K, RoutingMode::Ecmp);
    }
}
