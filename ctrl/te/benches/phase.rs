//! The phase planner's time for 100 announced periodic jobs
//! (`metaroce_te::phase::plan_phases`). Target: <= 10 ms a plan. Prints
//! figures; asserts nothing about time.
//!
//! The jobs: periods of 1, 2 or 4 ms (one harmonic family, so the common
//! period is 4 ms on a grid of 256 slots), communication 5-30% of the
//! period, each on 16 of 512 directed links at 20-100% of their
//! capacity, drawn from a fixed sequence; one in ten is `fixed`.
//! `same_period`: the same jobs all with a 1 ms period (64 slots).

use std::time::Instant;

use metaroce_te::phase::{plan_phases, PhaseConfig, PhaseJob};

const JOBS: usize = 100;
const LINKS: usize = 512;
const CAP: u64 = 400_000_000_000;
const RUNS: usize = 21;

fn jobs(same_period: bool) -> Vec<PhaseJob> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    (0..JOBS)
        .map(|i| {
            let period = if same_period { 1_000_000 } else { 1_000_000 << next(3) };
            let comm = period * (5 + next(26)) / 100;
            let loads = (0..16).map(|_| (next(LINKS as u64) as usize, CAP / 100 * (20 + next(81)))).collect();
            PhaseJob { period_ns: period, comm_ns: comm, phase_ns: 0, shiftable: i % 10 != 0, loads }
        })
        .collect()
}

/// CPU time of this thread in milliseconds, from /proc/thread-self/schedstat
/// (Linux); None elsewhere. On a machine shared with other work this is
/// the figure to read.
fn cpu_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e6)
}

fn bench(name: &str, jobs: &[PhaseJob]) {
    let caps = vec![CAP; LINKS];
    let cfg = PhaseConfig::default();
    let mut times = Vec::with_capacity(RUNS);
    let mut plan = plan_phases(jobs, &caps, &cfg);
    let cpu_before = cpu_ms();
    for _ in 0..RUNS {
        let t = Instant::now();
        plan = std::hint::black_box(plan_phases(std::hint::black_box(jobs), &caps, &cfg));
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let cpu = cpu_ms().zip(cpu_before).map_or(-1.0, |(a, b)| (a - b) / RUNS as f64);
    times.sort_by(f64::total_cmp);
    let shifted = plan.advice.iter().filter(|a| a.offset_ns > 0).count();
    println!(
        "phase/{name}: {JOBS} jobs, {LINKS} links, common period {:.1} ms ({} slots): {cpu:.2} ms CPU a plan (mean of {RUNS}); wall median {:.2} ms, fastest {:.2} ms, slowest {:.2} ms (target <= 10 ms); {:?}, peak {:.2} -> {:.2}, {shifted} jobs shifted",
        plan.common_period_ns as f64 / 1e6,
        plan.common_period_ns / plan.slot_ns.max(1),
        times[RUNS / 2],
        times[0],
        times[RUNS - 1],
        plan.verdict,
        plan.peak_without,
        plan.peak_with,
    );
}

fn main() {
    // `cargo test --all-targets` runs benches once in a debug build,
    // without `--bench`: measuring there only costs time, so skip.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    bench("100_jobs_harmonic_periods", &jobs(false));
    bench("100_jobs_same_period", &jobs(true));
}
