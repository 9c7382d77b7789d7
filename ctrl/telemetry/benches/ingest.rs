//! How fast the controller can take telemetry in: decoding a report frame
//! (the BMv2 vector of `tests/p4/cases/int.yaml`), applying reports and
//! threshold crossings to the view, and taking the policy's heat snapshot
//! and the congestion trees of a large fabric. Criterion prints the
//! timings; a summary line per figure follows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use metaroce_telemetry::{decode_frame, CongestionView, PortKey, ThresholdCrossing, ViewConfig};

const FRAME: &str = "02000000ff010200000000070800450000ac00004000401123d90aff00070aff0064c3507ffe0098\
000020000000000000071421052074000000000000000002000100000011000000000000010203040506\
456e0088004200003e1164b40a0002010a000101c00012b700740000100f006820000602f40000000000\
000000000009000100040000001400000001000000000000138800000005000100020000001e000000\
020000000000000fa00400ffff0000001100000007";

fn frame() -> Vec<u8> {
    let hex: Vec<u8> = FRAME.bytes().collect();
    hex.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap()).collect()
}

/// 64 leaves x 32 spines, every leaf linked to every spine on port
/// 33 + spine; node id = switch index.
fn fabric() -> CongestionView {
    let mut links = vec![];
    for leaf in 0..64usize {
        for spine in 0..32usize {
            links.push((
                PortKey { switch: leaf, port: 33 + spine as u16 },
                PortKey { switch: 64 + spine, port: leaf as u16 + 1 },
            ));
        }
    }
    let nodes: BTreeMap<u32, usize> = (0..96).map(|s| (s as u32, s)).collect();
    CongestionView::new(ViewConfig::default(), nodes, &links)
}

fn bench(c: &mut Criterion) {
    let f = frame();
    let report = decode_frame(&f).unwrap();
    let mut g = c.benchmark_group("telemetry");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    g.bench_function("decode_frame", |b| b.iter(|| black_box(decode_frame(black_box(&f)))));
    let mut v = fabric();
    let mut i = 0u32;
    g.bench_function("on_report", |b| {
        b.iter(|| {
            let mut r = report.clone();
            i = i.wrapping_add(1);
            r.group.seq = i & 0x3f_ffff;
            r.inner.int.hops[0].node_id = i % 64;
            r.inner.int.hops[1].node_id = 64 + i % 32;
            v.on_report(u64::from(i), black_box(&r));
        })
    });
    g.bench_function("on_crossing", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            let c = ThresholdCrossing {
                switch: (i % 96) as usize,
                port: (i % 64) as u16,
                depth: i % 64,
                switch_ts: u64::from(i),
                seq: i / 96,
                congested: i.is_multiple_of(3),
            };
            v.on_crossing(u64::from(i), black_box(&c));
        })
    });
    g.bench_function("heat", |b| b.iter(|| black_box(v.heat())));
    g.bench_function("congestion_trees", |b| b.iter(|| black_box(v.congestion_trees())));
    g.finish();
    summary(&f, &mut v);
}

/// Plain figures, so `cargo bench` ends with the numbers that matter.
fn summary(f: &[u8], v: &mut CongestionView) {
    let n = 100_000u32;
    let t = Instant::now();
    for _ in 0..n {
        black_box(decode_frame(black_box(f)).ok());
    }
    let per = t.elapsed() / n;
    println!(
        "summary: decode_frame {per:?} per report ({:.1} M reports/s on one core)",
        1e-6 / per.as_secs_f64()
    );
    let c = v.counters();
    let hot = v.hot_ports().len();
    let t = Instant::now();
    let trees = v.congestion_trees();
    println!(
        "summary: {} ports ({hot} hot), {} paths; {} congestion trees in {:?}",
        c.ports,
        c.paths,
        trees.len(),
        t.elapsed()
    );
}

criterion_group!(benches, bench);

fn main() {
    // `cargo test --all-targets` runs benches once in a debug build, without
    // `--bench`: measuring there only costs time, so skip.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
