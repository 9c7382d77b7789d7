//! The congestion view: threshold semantics, snapshot reconciliation,
//! reports into samples and path latencies, trees, counters, replay, and
//! bounded memory under floods.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;

use metaroce_telemetry::report::{
    GroupHeader, HopRecord, IndividualHeader, InnerPacket, IntMd, SinkMetadata, TelemetryReport,
};
use metaroce_telemetry::view::SampleSource;
use metaroce_telemetry::{
    CongestionTree, CongestionView, PortKey, PortRegisters, RegisterSnapshot, ThresholdCrossing, ViewConfig,
    ViewInput,
};

const MS: u64 = 1_000_000;

fn k(switch: usize, port: u16) -> PortKey {
    PortKey { switch, port }
}

/// Leaves 0..3 (hosts on ports 1, 2), spines 10, 11; leaf l port 3 to
/// spine 10 port l+1, port 4 to spine 11 port l+1. Node id = switch + 100.
fn view_with(cfg: ViewConfig) -> CongestionView {
    let mut links = vec![];
    for leaf in 0..3u16 {
        links.push((k(usize::from(leaf), 3), k(10, leaf + 1)));
        links.push((k(usize::from(leaf), 4), k(11, leaf + 1)));
    }
    let nodes = [0usize, 1, 2, 10, 11].into_iter().map(|s| (s as u32 + 100, s)).collect();
    CongestionView::new(cfg, nodes, &links)
}

fn view() -> CongestionView {
    view_with(ViewConfig::default())
}

fn crossing(switch: usize, port: u16, seq: u32, ts: u64, congested: bool) -> ThresholdCrossing {
    ThresholdCrossing { switch, port, depth: if congested { 40 } else { 5 }, switch_ts: ts, seq, congested }
}

/// A report from sink `hops.last()` over `hops` (node id, egress port, latency, occupancy).
fn report(seq: u32, hops: &[(u32, u16, u32, u32)]) -> TelemetryReport {
    let (sink, upstream) = hops.split_last().unwrap();
    let hop = |&(node_id, egress_port, hop_latency, queue_occupancy): &(u32, u16, u32, u32)| HopRecord {
        node_id,
        ingress_port: 1,
        egress_port,
        hop_latency,
        queue_id: 0,
        queue_occupancy,
        egress_ts: 0,
    };
    TelemetryReport {
        encap: None,
        group: GroupHeader { version: 2, hw_id: 0, seq, node_id: sink.0 },
        individual: IndividualHeader {
            rep_type: 1,
            in_type: 4,
            report_len_words: 0,
            md_len_words: 5,
            dropped: false,
            congested_queue: false,
            tracked_flow: true,
            intermediate: false,
            rep_md_bits: 0x7400,
            domain_id: 0,
            ds_md_bits: 0,
            ds_md_status: 0,
        },
        sink: SinkMetadata {
            ingress_port: 3,
            egress_port: sink.1,
            hop_latency: sink.2,
            queue_id: 0,
            queue_occupancy: sink.3,
            egress_ts: 0,
        },
        inner: InnerPacket {
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 0, 2, 1),
            protocol: 17,
            src_port: 49152,
            dst_port: 4791,
            dscp: 27,
            ecn: 0,
            ttl: 62,
            dest_qp: Some(0x11),
            int: IntMd {
                original_dscp: 26,
                version: 2,
                discard: false,
                hop_limit_exceeded: false,
                mtu_exceeded: false,
                hop_ml: 6,
                remaining_hops: 2,
                instructions: 0xF400,
                domain_id: 0,
                hops: upstream.iter().map(hop).collect(),
            },
        },
    }
}

#[test]
fn crossings_set_and_clear_congestion_with_receive_time() {
    let mut v = view();
    v.on_crossing(5 * MS, &crossing(0, 3, 0, 100, true));
    let h = v.heat()[&k(0, 3)];
    assert!(h.congested);
    assert_eq!((h.since_ns, h.depth, h.max_depth), (5 * MS, 40, 40));
    // A repeated up crossing (its down was lost) keeps since.
    v.on_crossing(6 * MS, &crossing(0, 3, 1, 200, true));
    assert_eq!(v.heat()[&k(0, 3)].since_ns, 5 * MS);
    v.on_crossing(9 * MS, &crossing(0, 3, 2, 300, false));
    let h = v.heat()[&k(0, 3)];
    assert!(!h.congested);
    assert_eq!((h.since_ns, h.depth, h.max_depth), (9 * MS, 5, 40));
    assert_eq!(v.counters().digests.received, 3);
    assert!(v.needs_snapshot().is_empty());
}

#[test]
fn duplicate_and_older_crossings_do_not_undo_newer_ones() {
    let mut v = view();
    v.on_crossing(MS, &crossing(0, 3, 0, 100, true));
    v.on_crossing(2 * MS, &crossing(0, 3, 2, 300, false));
    // Seq 1 arrives late, and its switch time is older: not applied.
    v.on_crossing(3 * MS, &crossing(0, 3, 1, 200, true));
    v.on_crossing(4 * MS, &crossing(0, 3, 2, 300, false));
    assert!(!v.heat()[&k(0, 3)].congested);
    let c = v.counters();
    assert_eq!((c.stale_crossings, c.digests.late, c.digests.duplicates), (2, 1, 1));
}

#[test]
fn a_snapshot_wins_over_a_view_that_missed_a_digest() {
    let mut v = view();
    v.on_crossing(MS, &crossing(1, 3, 0, 100, true));
    // Seq 1 (down) is lost; seq 2 is another port: a gap.
    v.on_crossing(2 * MS, &crossing(1, 4, 2, 300, false));
    assert_eq!(v.needs_snapshot(), vec![1]);
    let snap = RegisterSnapshot {
        switch: 1,
        ports: vec![
            PortRegisters { port: 3, max_depth: 44, congested: false },
            PortRegisters { port: 1, max_depth: 70, congested: true },
        ],
    };
    v.on_snapshot(10 * MS, &snap);
    let heat = v.heat();
    assert!(!heat[&k(1, 3)].congested);
    assert_eq!((heat[&k(1, 3)].since_ns, heat[&k(1, 3)].max_depth), (10 * MS, 44));
    assert!(heat[&k(1, 1)].congested);
    assert_eq!(heat[&k(1, 1)].since_ns, 10 * MS);
    assert_eq!(v.counters().reconciled, 2);
    assert!(v.needs_snapshot().is_empty());
    // An agreeing snapshot changes no since.
    v.on_snapshot(20 * MS, &snap);
    assert_eq!(v.heat()[&k(1, 1)].since_ns, 10 * MS);
    assert_eq!(v.counters().reconciled, 2);
    let last = v.samples(k(1, 1)).last().copied().unwrap();
    assert_eq!((last.t_ns, last.depth, last.source), (20 * MS, 70, SampleSource::Snapshot));
}

#[test]
fn a_report_samples_every_hop_and_records_its_path_latency() {
    let mut v = view();
    // Leaf 0 (node 100) -> spine 10 (110) -> sink leaf 2 (102).
    let r = report(0, &[(100, 3, 30, 2), (110, 3, 20, 9), (102, 1, 17, 0)]);
    v.on_report(MS, &r);
    let heat = v.heat();
    assert_eq!(heat[&k(0, 3)].depth, 2);
    assert_eq!(heat[&k(10, 3)].depth, 9);
    assert_eq!(heat[&k(2, 1)].depth, 0);
    let path = vec![k(0, 3), k(10, 3), k(2, 1)];
    let p = v.path_latency(&path).unwrap();
    assert_eq!((p.last_total, p.reports), (67, 1));
    let r2 = report(1, &[(100, 3, 30, 2), (110, 3, 100, 9), (102, 1, 17, 0)]);
    v.on_report(2 * MS, &r2);
    let p = v.path_latency(&path).unwrap();
    assert_eq!((p.last_total, p.reports, p.last_update_ns), (147, 2, 2 * MS));
    assert!((p.ewma_total - (67.0 + 0.125 * 80.0)).abs() < 1e-9);
    assert!((p.hops[1].ewma - 30.0).abs() < 1e-9);
    // The same report again is a duplicate: no third update.
    v.on_report(3 * MS, &r2);
    assert_eq!(v.path_latency(&path).unwrap().reports, 2);
    assert_eq!(v.counters().reports.duplicates, 1);
}

#[test]
fn unknown_node_ids_are_counted_and_skipped() {
    let mut v = view();
    v.on_report(MS, &report(0, &[(100, 3, 1, 4), (999, 3, 1, 5), (102, 1, 1, 0)]));
    let c = v.counters();
    assert_eq!((c.unknown_node_ids, c.paths, c.ports), (1, 0, 2));
    assert_eq!(v.heat()[&k(0, 3)].depth, 4);
}

#[test]
fn lost_reports_are_counted_per_sink() {
    let mut v = view();
    let hops = [(100, 3, 1, 0), (102, 1, 1, 0)];
    for seq in (0..200).filter(|s| s % 10 != 5) {
        v.on_report(MS, &report(seq, &hops));
    }
    // Another sink, in order.
    for seq in 0..50 {
        v.on_report(MS, &report(seq, &[(101, 1, 1, 0)]));
    }
    let c = v.counters().reports;
    // Numbers 5..=135 (14 of them) have left the 64-wide window; 145..=195 are still pending.
    assert_eq!((c.received, c.lost, c.restarts), (180 + 50, 14, 0));
}

#[test]
fn trees_follow_links_into_congested_switches() {
    let mut v = view();
    for (i, (sw, port)) in [(2, 1), (10, 3), (0, 3), (1, 3), (1, 1)].into_iter().enumerate() {
        v.on_crossing(MS, &crossing(sw, port, i as u32, i as u64, true));
    }
    let trees = v.congestion_trees();
    assert_eq!(
        trees,
        vec![
            CongestionTree { root: k(1, 1), members: vec![], depth: 0 },
            CongestionTree { root: k(2, 1), members: vec![k(0, 3), k(1, 3), k(10, 3)], depth: 2 },
        ]
    );
    assert_eq!(v.congestion_tree(k(10, 3)).unwrap().members, vec![k(0, 3), k(1, 3)]);
    assert_eq!(v.congestion_tree(k(11, 1)), None);
    assert_eq!(v.hot_ports().len(), 5);
}

#[test]
fn a_recording_replays_to_the_same_summary_and_everything_serializes() {
    let inputs = vec![
        (MS, ViewInput::Crossing(crossing(0, 3, 0, 1, true))),
        (
            2 * MS,
            ViewInput::Report(Box::new(report(0, &[(100, 3, 30, 2), (110, 3, 20, 9), (102, 1, 17, 0)]))),
        ),
        (3 * MS, ViewInput::Snapshot(RegisterSnapshot { switch: 0, ports: vec![] })),
        (4 * MS, ViewInput::SwitchRestarted(0)),
        (5 * MS, ViewInput::Crossing(crossing(0, 3, 0, 1, false))),
    ];
    let json = serde_json::to_string(&inputs).unwrap();
    let replayed: Vec<(u64, ViewInput)> = serde_json::from_str(&json).unwrap();
    assert_eq!(replayed, inputs);
    let (mut a, mut b) = (view(), view());
    for (t, i) in &inputs {
        a.apply(*t, i);
    }
    for (t, i) in &replayed {
        b.apply(*t, i);
    }
    let (sa, sb) = (a.summary(16), b.summary(16));
    assert_eq!(sa, sb);
    assert_eq!(serde_json::to_string(&sa).unwrap(), serde_json::to_string(&sb).unwrap());
    let back: metaroce_telemetry::ViewSummary =
        serde_json::from_str(&serde_json::to_string(&sa).unwrap()).unwrap();
    assert_eq!(back, sa);
    assert_eq!(sa.ports.len(), 3);
    assert_eq!(sa.hot_ports, vec![]);
    assert_eq!(sa.counters.digests.received, 2);
}

#[test]
fn memory_stays_bounded_under_floods_of_ports_paths_and_digests() {
    let cfg =
        ViewConfig { samples_per_port: 8, max_ports: 64, max_paths: 32, max_sources: 16, ewma_weight: 0.125 };
    let mut v = view_with(cfg);
    // 20k reports over distinct paths and ports (egress ports from packets are arbitrary).
    for i in 0..20_000u32 {
        let p = (i % 60_000) as u16;
        v.on_report(
            u64::from(i),
            &report(i, &[(100, p, 1, i), (110, p.wrapping_add(1), 2, i), (102, 1, 3, 0)]),
        );
    }
    // A digest storm on one port and on many switches and ports.
    for i in 0..50_000u32 {
        v.on_crossing(u64::from(i), &crossing(0, 1, i, u64::from(i), i % 2 == 0));
        v.on_crossing(u64::from(i), &crossing(i as usize % 1000, (i % 512) as u16, i, u64::from(i), true));
    }
    let c = v.counters();
    assert!(c.ports <= 64 && c.paths <= 32, "{c:?}");
    assert!(c.ports_over_cap > 0 && c.paths_evicted > 0 && c.digests_untracked > 0);
    let map = v.congestion_map(usize::MAX);
    assert!(map.iter().all(|p| p.samples.len() <= 8));
    assert!(v.needs_snapshot().len() <= 16);
    assert!(v.path_latencies().len() <= 32);
}

#[test]
fn a_restarted_switch_is_forgotten_on_the_controllers_word() {
    let mut v = view();
    for seq in 0..3 {
        v.on_crossing(MS, &crossing(0, 3, seq, 1000 + u64::from(seq), seq % 2 == 0));
    }
    v.on_report(MS, &report(7, &[(100, 3, 1, 0)]));
    assert!(v.heat()[&k(0, 3)].congested);
    // Restarted: seq and switch time start again. Only 3 digests back, so
    // the sequence alone cannot tell; the controller says so.
    v.switch_restarted(0);
    v.on_crossing(2 * MS, &crossing(0, 3, 0, 5, false));
    v.on_report(2 * MS, &report(0, &[(100, 3, 1, 0)]));
    assert!(!v.heat()[&k(0, 3)].congested);
    let c = v.counters();
    assert_eq!((c.stale_crossings, c.digests.duplicates, c.digests.received), (0, 0, 4));
    assert_eq!((c.reports.received, c.reports.duplicates), (2, 0));
}

#[test]
fn a_large_digest_sequence_jump_back_is_a_restart_that_resets_crossing_order() {
    let mut v = view();
    for seq in 0..100 {
        v.on_crossing(MS, &crossing(0, 3, seq, 1_000_000 + u64::from(seq), seq % 2 == 0));
    }
    assert!(!v.heat()[&k(0, 3)].congested);
    v.on_crossing(2 * MS, &crossing(0, 3, 0, 5, true));
    assert!(v.heat()[&k(0, 3)].congested);
    let c = v.counters();
    assert_eq!((c.digests.restarts, c.digests.lost, c.stale_crossings), (1, 0, 0));
    assert_eq!(v.needs_snapshot(), vec![0]);
}
