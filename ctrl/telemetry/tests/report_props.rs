//! Property tests of the report decoder: arbitrary, truncated and mutated
//! bytes never panic, and every report our sink can build decodes back to
//! what was put in.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;

use metaroce_telemetry::report::HopRecord;
use metaroce_telemetry::{decode_frame, decode_udp_payload};
use proptest::prelude::*;

/// A report as the sink builds it (report.p4), from its parts.
#[derive(Debug, Clone)]
struct Parts {
    seq: u32,
    node_id: u32,
    hw_id: u8,
    q: bool,
    sink: [u32; 5],
    hops: Vec<HopRecord>,
    remaining_hops: u8,
    e: bool,
    m: bool,
    dest_qp: Option<u32>,
}

fn encode(p: &Parts) -> Vec<u8> {
    let mut inner = vec![];
    inner.extend_from_slice(&[0x45, (27 << 2) | 2, 0, 136, 0, 0x42, 0, 0, 62, 17, 0, 0]);
    inner.extend_from_slice(&[10, 0, 2, 1, 10, 0, 1, 1]);
    let dport: u16 = if p.dest_qp.is_some() { 4791 } else { 5000 };
    inner.extend_from_slice(&[0xc0, 0x00]);
    inner.extend_from_slice(&dport.to_be_bytes());
    inner.extend_from_slice(&[0, 116, 0, 0]);
    let words = 3 + 6 * p.hops.len() as u8;
    inner.extend_from_slice(&[0x10, words, 0, 26 << 2]);
    let flags = 0x20 | (u8::from(p.e) << 2) | (u8::from(p.m) << 1);
    inner.extend_from_slice(&[flags, 0, 6, p.remaining_hops, 0xf4, 0, 0, 0, 0, 0, 0, 0]);
    for h in p.hops.iter().rev() {
        inner.extend_from_slice(&h.node_id.to_be_bytes());
        inner.extend_from_slice(&h.ingress_port.to_be_bytes());
        inner.extend_from_slice(&h.egress_port.to_be_bytes());
        inner.extend_from_slice(&h.hop_latency.to_be_bytes());
        inner.extend_from_slice(&((u32::from(h.queue_id) << 24) | h.queue_occupancy).to_be_bytes());
        inner.extend_from_slice(&h.egress_ts.to_be_bytes());
    }
    if let Some(qp) = p.dest_qp {
        inner.extend_from_slice(&[4, 0, 0xff, 0xff]);
        inner.extend_from_slice(&qp.to_be_bytes());
        inner.extend_from_slice(&[0, 0, 0, 7]);
    }
    let mut out = vec![];
    out.extend_from_slice(&((2u32 << 28) | (u32::from(p.hw_id) << 22) | p.seq).to_be_bytes());
    out.extend_from_slice(&p.node_id.to_be_bytes());
    let report_len = (2 + 5 + inner.len() / 4) as u8;
    out.extend_from_slice(&[0x14, report_len, 5, 0x20 | (u8::from(p.q) << 6), 0x74, 0, 0, 0, 0, 0, 0, 0]);
    for w in p.sink {
        out.extend_from_slice(&w.to_be_bytes());
    }
    out.extend_from_slice(&inner);
    out
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0xff, 1, 2, 0, 0, 0, 0, 7, 8, 0];
    let udp_len = (8 + payload.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&(20 + udp_len).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 10, 255, 0, 7, 10, 255, 0, 100]);
    f.extend_from_slice(&[0xc3, 0x50, 0x7f, 0xfe]);
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

fn hop() -> impl Strategy<Value = HopRecord> {
    (any::<u32>(), any::<u16>(), any::<u16>(), any::<u32>(), any::<u8>(), 0u32..1 << 24, any::<u64>())
        .prop_map(
            |(node_id, ingress_port, egress_port, hop_latency, queue_id, queue_occupancy, egress_ts)| {
                HopRecord {
                    node_id,
                    ingress_port,
                    egress_port,
                    hop_latency,
                    queue_id,
                    queue_occupancy,
                    egress_ts,
                }
            },
        )
}

fn parts() -> impl Strategy<Value = Parts> {
    (
        (0u32..1 << 22, any::<u32>(), 0u8..64, any::<bool>()),
        any::<[u32; 5]>(),
        proptest::collection::vec(hop(), 0..=8),
        (any::<u8>(), any::<bool>(), any::<bool>()),
        proptest::option::of(0u32..1 << 24),
    )
        .prop_map(|((seq, node_id, hw_id, q), sink, hops, (remaining_hops, e, m), dest_qp)| Parts {
            seq,
            node_id,
            hw_id,
            q,
            sink,
            hops,
            remaining_hops,
            e,
            m,
            dest_qp,
        })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode_frame(&data);
        let _ = decode_udp_payload(&data);
    }

    #[test]
    fn built_reports_round_trip(p in parts()) {
        let payload = encode(&p);
        let r = decode_udp_payload(&payload).unwrap();
        prop_assert_eq!((r.group.seq, r.group.node_id, r.group.hw_id), (p.seq, p.node_id, p.hw_id));
        prop_assert_eq!(r.individual.congested_queue, p.q);
        prop_assert_eq!(&r.inner.int.hops, &p.hops);
        prop_assert_eq!(r.inner.int.remaining_hops, p.remaining_hops);
        prop_assert_eq!((r.inner.int.hop_limit_exceeded, r.inner.int.mtu_exceeded), (p.e, p.m));
        prop_assert_eq!(r.inner.dest_qp, p.dest_qp);
        prop_assert_eq!(r.sink.hop_latency, p.sink[1]);
        prop_assert_eq!(r.sink.queue_occupancy, p.sink[2] & 0xff_ffff);
        prop_assert_eq!(r.inner.src_ip, Ipv4Addr::new(10, 0, 2, 1));
        prop_assert_eq!(r.path().len(), p.hops.len() + 1);
        let f = decode_frame(&frame(&payload)).unwrap();
        prop_assert_eq!(f.inner, r.inner);
    }

    #[test]
    fn truncated_and_mutated_reports_never_panic(
        p in parts(),
        cut in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
    ) {
        let payload = encode(&p);
        let whole = frame(&payload);
        let n = cut.index(whole.len());
        prop_assert!(decode_frame(&whole[..n]).is_err());
        prop_assert!(decode_udp_payload(&payload[..cut.index(payload.len())]).is_err());
        let mut bad = whole.clone();
        for (at, v) in flips {
            let i = at.index(bad.len());
            bad[i] = v;
        }
        let _ = decode_frame(&bad);
        let _ = decode_udp_payload(&bad[42..]);
    }
}
