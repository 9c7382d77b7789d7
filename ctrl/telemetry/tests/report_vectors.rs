//! Byte-vector tests: the Telemetry Reports of `tests/p4/cases/int.yaml`,
//! built with the vector runner's own packet builder
//! (`metaroce_p4_vectors::packet::Template::build`), which BMv2 matches
//! byte for byte in those cases. The two fields the vectors mask (the
//! sink's hop latency and egress timestamp, which depend on time) are set
//! to 17 and 0x010203040506 here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;

use metaroce_telemetry::report::{HopRecord, PathHop, ReportEncap};
use metaroce_telemetry::{decode_frame, decode_udp_payload, ReportError};

/// `int_sink_strips_and_reports` (and the first report of
/// `int_sink_report_sampling`, and the packet-in payload of
/// `int_sink_report_to_controller`): seq 0, two upstream hops.
const SINK_REPORT: &str = "02000000ff010200000000070800450000ac00004000401123d90aff00070aff0064c3507ffe0098\
00002000000000000007142105207400000000000000000200010000001100000000000001020304\
0506456e0088004200003e1164b40a0002010a000101c00012b700740000100f006820000602f400\
00000000000000000009000100040000001400000001000000000000138800000005000100020000\
001e000000020000000000000fa00400ffff0000001100000007";

/// The second report of `int_sink_report_sampling`: seq 1, the upstream
/// hop's latency 200000 (a new bucket), PSN 9.
const SAMPLED_REPORT: &str =
    "02000000ff010200000000070800450000ac00004000401123d90aff00070aff0064c3507ffe0098\
00002000000100000007142105207400000000000000000200010000001100000000000001020304\
0506456e0088004200003e1164b40a0002010a000101c00012b700740000100f006820000602f400\
000000000000000000090001000400030d4000000001000000000000138800000005000100020000\
001e000000020000000000000fa00400ffff0000001100000009";

fn bytes(hex: &str) -> Vec<u8> {
    let digits: Vec<u8> = hex.bytes().filter(u8::is_ascii_hexdigit).collect();
    digits.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap()).collect()
}

/// Offset of the UDP payload (the group header) in the frames above.
const PAYLOAD_AT: usize = 14 + 20 + 8;

#[test]
fn sink_report_decodes_every_field() {
    let frame = bytes(SINK_REPORT);
    assert_eq!(frame.len(), 186);
    let r = decode_frame(&frame).unwrap();
    assert_eq!(
        r.encap,
        Some(ReportEncap {
            src_mac: [2, 0, 0, 0, 0, 7],
            dst_mac: [2, 0, 0, 0, 0xff, 1],
            src_ip: Ipv4Addr::new(10, 255, 0, 7),
            dst_ip: Ipv4Addr::new(10, 255, 0, 100),
            src_port: 50000,
            dst_port: 32766,
        })
    );
    assert_eq!((r.group.version, r.group.hw_id, r.group.seq, r.group.node_id), (2, 0, 0, 7));
    let i = r.individual;
    assert_eq!((i.rep_type, i.in_type, i.report_len_words, i.md_len_words), (1, 4, 33, 5));
    assert_eq!((i.dropped, i.congested_queue, i.tracked_flow, i.intermediate), (false, false, true, false));
    assert_eq!((i.rep_md_bits, i.domain_id, i.ds_md_bits, i.ds_md_status), (0x7400, 0, 0, 0));
    let s = r.sink;
    assert_eq!((s.ingress_port, s.egress_port, s.hop_latency), (2, 1, 17));
    assert_eq!((s.queue_id, s.queue_occupancy, s.egress_ts), (0, 0, 0x0102_0304_0506));
    let p = &r.inner;
    assert_eq!((p.src_ip, p.dst_ip), (Ipv4Addr::new(10, 0, 2, 1), Ipv4Addr::new(10, 0, 1, 1)));
    assert_eq!((p.protocol, p.src_port, p.dst_port), (17, 49152, 4791));
    assert_eq!((p.dscp, p.ecn, p.ttl, p.dest_qp), (27, 2, 62, Some(0x11)));
    let int = &p.int;
    assert_eq!((int.original_dscp, int.version, int.hop_ml, int.remaining_hops), (26, 2, 6, 2));
    assert_eq!((int.discard, int.hop_limit_exceeded, int.mtu_exceeded), (false, false, false));
    assert_eq!(int.instructions, 0xF400);
    // Path order: node 5 was the source (pushed first, deepest on the wire).
    assert_eq!(
        int.hops,
        vec![
            HopRecord {
                node_id: 5,
                ingress_port: 1,
                egress_port: 2,
                hop_latency: 30,
                queue_id: 0,
                queue_occupancy: 2,
                egress_ts: 4000,
            },
            HopRecord {
                node_id: 9,
                ingress_port: 1,
                egress_port: 4,
                hop_latency: 20,
                queue_id: 0,
                queue_occupancy: 1,
                egress_ts: 5000,
            },
        ]
    );
    let hop = |node_id, egress_port, hop_latency, queue_occupancy| PathHop {
        node_id,
        egress_port,
        hop_latency,
        queue_occupancy,
    };
    assert_eq!(r.path(), vec![hop(5, 2, 30, 2), hop(9, 4, 20, 1), hop(7, 1, 17, 0)]);
    assert_eq!(r.path_latency(), 67);
}

#[test]
fn sampled_report_carries_next_seq_and_new_latency() {
    let r = decode_frame(&bytes(SAMPLED_REPORT)).unwrap();
    assert_eq!(r.group.seq, 1);
    assert_eq!(r.inner.int.hops[1].hop_latency, 200_000);
    assert_eq!(r.path_latency(), 200_000 + 30 + 17);
}

#[test]
fn udp_payload_decodes_like_the_frame_without_encap() {
    let frame = bytes(SINK_REPORT);
    let from_frame = decode_frame(&frame).unwrap();
    let from_udp = decode_udp_payload(&frame[PAYLOAD_AT..]).unwrap();
    assert_eq!(from_udp.encap, None);
    assert_eq!(from_udp.group, from_frame.group);
    assert_eq!(from_udp.inner, from_frame.inner);
    assert_eq!(from_udp.sink, from_frame.sink);
}

#[test]
fn every_truncation_is_an_error() {
    let frame = bytes(SINK_REPORT);
    for n in 0..frame.len() {
        assert!(decode_frame(&frame[..n]).is_err(), "frame cut to {n} bytes decoded");
    }
    let payload = &frame[PAYLOAD_AT..];
    for n in 0..payload.len() {
        let err = decode_udp_payload(&payload[..n]).unwrap_err();
        assert!(matches!(err, ReportError::Truncated { .. }), "payload cut to {n}: {err}");
    }
}

#[test]
fn ethernet_padding_after_the_udp_length_is_ignored() {
    let mut frame = bytes(SINK_REPORT);
    frame.extend_from_slice(&[0; 4]);
    assert!(decode_frame(&frame).is_ok());
}

fn corrupt(at: usize, value: u8) -> ReportError {
    let mut frame = bytes(SINK_REPORT);
    frame[at] = value;
    decode_frame(&frame).unwrap_err()
}

#[test]
fn malformed_fields_are_named_with_their_offset() {
    let unexpected = |e: ReportError| match e {
        ReportError::Unexpected { what, offset, .. } => (what, offset),
        other => panic!("not Unexpected: {other}"),
    };
    assert_eq!(unexpected(corrupt(12, 0x86)), ("EtherType", 12));
    assert_eq!(unexpected(corrupt(23, 6)), ("outer IPv4 protocol", 23));
    assert_eq!(unexpected(corrupt(42, 0x10)), ("report group version", 42));
    assert_eq!(unexpected(corrupt(50, 0x24)), ("RepType", 50));
    assert_eq!(unexpected(corrupt(50, 0x16)), ("InType", 50));
    assert_eq!(unexpected(corrupt(54, 0xf4)), ("RepMdBits", 54));
    assert_eq!(unexpected(corrupt(82, 0x60)), ("inner IPv4 version", 82));
    assert_eq!(unexpected(corrupt(83, 0x68)), ("inner IPv4 DSCP", 83));
    assert_eq!(unexpected(corrupt(110, 0x20)), ("INT shim type", 110));
    assert_eq!(unexpected(corrupt(114, 0x10)), ("INT-MD version", 114));
    assert_eq!(unexpected(corrupt(116, 0x05)), ("INT-MD hop ML", 116));
    assert_eq!(unexpected(corrupt(118, 0xf0)), ("INT-MD instructions", 118));
    let e = corrupt(111, 0x0e);
    assert!(matches!(e, ReportError::Length { what: "INT stack (words)", offset: 111, .. }), "{e}");
    let e = corrupt(51, 0x06);
    assert!(matches!(e, ReportError::Length { what: "individual report length (words)", .. }), "{e}");
    // A report length one word longer than the bytes sent.
    let e = corrupt(51, 0x22);
    assert!(matches!(e, ReportError::Truncated { what: "individual report", offset: 62, .. }), "{e}");
    // Display names the object and the offset.
    assert_eq!(corrupt(42, 0x10).to_string(), "report group version at byte 42 is 0x1, expected 2");
}

#[test]
fn a_shorter_report_length_leaves_trailing_bytes_or_a_cut_bth() {
    // One word less: the BTH is cut to 8 bytes.
    let e = corrupt(51, 0x20);
    assert!(matches!(e, ReportError::Truncated { what: "inner RoCEv2 BTH", offset: 174, .. }), "{e}");
}
