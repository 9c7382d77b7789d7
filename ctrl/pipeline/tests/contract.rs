//! The committed P4Info satisfies the contract, every entry survives a
//! round trip through P4Runtime form, and a mismatched P4Info is refused
//! with every problem named.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;
use std::path::PathBuf;

use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::P4Info;
use metaroce_pipeline::{Entry, FlowKey, Pipeline, PipelineError, RouteTarget};

fn build_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build")
}

fn text() -> String {
    std::fs::read_to_string(build_dir().join("main.p4info.txtpb")).unwrap()
}

fn pipeline() -> Pipeline {
    Pipeline::load(&build_dir().join("main.p4info.txtpb"), &build_dir().join("main.json")).unwrap()
}

pub fn samples() -> Vec<Entry> {
    let mac = [2, 0, 0, 0, 1, 1];
    vec![
        Entry::Config { switch_id: 7, flowlet_timeout_us: 5000 },
        Entry::EgressConfig { digest_interval_us: 1000, report_period_us: 1_000_000, latency_shift: 8 },
        Entry::ReportConfig {
            src_mac: mac,
            dst_mac: [2, 0, 0, 0, 0, 0xfe],
            src_ip: Ipv4Addr::new(10, 255, 0, 1),
            dst_ip: Ipv4Addr::new(10, 255, 255, 254),
            dst_port: 32766,
        },
        Entry::EdgePort { port: 1 },
        Entry::Watch {
            src: (Ipv4Addr::UNSPECIFIED, 0),
            dst: (Ipv4Addr::new(10, 0, 0, 0), 0xff00_0000),
            l4_dst_port: (4791, 0xffff),
            priority: 10,
            max_hops: 4,
        },
        Entry::Route { prefix: Ipv4Addr::new(10, 0, 2, 0), len: 24, target: RouteTarget::Group(3) },
        Entry::Route { prefix: Ipv4Addr::new(10, 0, 1, 1), len: 32, target: RouteTarget::Nhop(2) },
        Entry::Nhop { id: 2, port: 1, src_mac: mac, dst_mac: [2, 0, 0, 0, 1, 2] },
        Entry::Member { id: 2, nhop: 2 },
        Entry::Group { id: 3, members: vec![(2, 5), (4, 1)] },
        Entry::GroupEntry { id: 3, group: 3 },
        Entry::PortDown { port: 4 },
        Entry::SteerFlow {
            flow: FlowKey {
                src: Ipv4Addr::new(10, 0, 1, 1),
                dst: Ipv4Addr::new(10, 0, 2, 1),
                sport: 49152,
                qp: 0xab_cdef,
            },
            nhop_id: 2,
            port: 1,
        },
        Entry::SteerPair {
            src: Ipv4Addr::new(10, 0, 1, 1),
            dst: Ipv4Addr::new(10, 0, 2, 2),
            nhop_id: 4,
            port: 3,
        },
        Entry::LargeFlowConfig { window_us: 10_000, threshold_bytes: 1_000_000 },
        Entry::DrainConfig { enabled: true, pair_interval_us: 1000 },
        Entry::QpPair {
            src: Ipv4Addr::new(10, 0, 2, 1),
            dst: Ipv4Addr::new(10, 0, 1, 1),
            ack_qp: 0x22,
            data_qp: 0xab_cdef,
        },
        Entry::EgressPort {
            port: 1,
            edge: true,
            mtu: 1500,
            queue_high: 40,
            queue_low: 10,
            ecn_threshold: 20,
        },
        Entry::CloneSession { id: 500, port: 255 },
    ]
}

#[test]
fn committed_p4info_matches_the_contract() {
    let p = pipeline();
    assert!(!p.device_config().is_empty());
    // 13 tables (4 keyless), the drain rule's 2 (1 keyless), the
    // selector's members and groups, clone sessions.
    assert!(p.has_drain());
    assert_eq!(p.read_requests().len(), 18);
}

#[test]
fn a_bmv2_device_config_that_is_not_json_is_refused_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("metaroce-bad-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("main.json");
    // Cut short, as a truncated copy would be.
    let text = std::fs::read(build_dir().join("main.json")).unwrap();
    std::fs::write(&bad, &text[..text.len() / 2]).unwrap();
    let err = Pipeline::load(&build_dir().join("main.p4info.txtpb"), &bad).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(matches!(err, metaroce_pipeline::PipelineError::Bmv2Json { .. }), "{err:?}");
    assert!(err.to_string().contains("main.json"), "{err}");
    let cause = std::error::Error::source(&err).map(|e| e.to_string()).unwrap_or_default();
    assert!(cause.contains("line"), "the cause says where: {cause}");
}

#[test]
fn the_bmv2_program_is_pushed_compact_and_named_by_the_file_as_given() {
    let p = pipeline();
    let file = std::fs::read(build_dir().join("main.json")).unwrap();
    assert_eq!(p.device_config(), metaroce_pipeline::compact_json(&file).as_slice());
    // The cookie of the file's bytes: a switch programmed with the
    // indented JSON by an earlier build still runs this program.
    assert_eq!(p.program_cookie(), metaroce_p4rt::session::pipeline_cookie(p.info(), &file));
}

#[test]
fn every_entry_round_trips() {
    let p = pipeline();
    for e in samples() {
        let entity = p.entity(&e).unwrap_or_else(|err| panic!("{e:?}: {err}"));
        let back = p.parse(&entity).unwrap().unwrap_or_else(|| panic!("{e:?} parsed to nothing"));
        assert_eq!(back, e);
    }
}

#[test]
fn defaults_are_modified_never_inserted_or_deleted() {
    let p = pipeline();
    let cfg = Entry::Config { switch_id: 1, flowlet_timeout_us: 1 };
    let u = p.update(p4::update::Type::Insert, &cfg).unwrap();
    assert_eq!(u.r#type, p4::update::Type::Modify as i32);
    assert!(p.update(p4::update::Type::Delete, &cfg).is_err());
}

#[test]
fn values_that_do_not_fit_are_refused() {
    let p = pipeline();
    let e = Entry::Nhop { id: 1, port: 600, src_mac: [0; 6], dst_mac: [0; 6] };
    let err = p.entity(&e).unwrap_err().to_string();
    assert!(err.contains("Nhop"), "{err}");
    // A QP is 24 bits; a steer port is 9.
    let flow = FlowKey { src: Ipv4Addr::LOCALHOST, dst: Ipv4Addr::LOCALHOST, sport: 1, qp: 1 << 24 };
    let err = p.entity(&Entry::SteerFlow { flow, nhop_id: 1, port: 1 }).unwrap_err().to_string();
    assert!(err.contains("SteerFlow"), "{err}");
    let pair = Entry::SteerPair { src: Ipv4Addr::LOCALHOST, dst: Ipv4Addr::LOCALHOST, nhop_id: 1, port: 512 };
    assert!(p.entity(&pair).is_err());
    // The key a new flowlet without a steer entry checks is never marked down.
    let err = p.entity(&Entry::PortDown { port: 0xffff }).unwrap_err();
    assert!(matches!(err, PipelineError::Refused { .. }) && err.to_string().contains("PORT_NONE"), "{err}");
}

#[test]
fn a_renamed_table_is_named_with_a_suggestion() {
    let bad = text().replace("MetaroceIngress.routing.nhop_group\"", "MetaroceIngress.routing.nhop_groups\"");
    let info = P4Info::from_text(&bad).unwrap();
    let err = Pipeline::new(info, vec![]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, PipelineError::Mismatch { .. }));
    assert!(msg.contains("nhop_group") && msg.contains("did you mean"), "{msg}");
    assert!(msg.contains("make p4"), "{msg}");
}

#[test]
fn a_changed_width_and_a_missing_digest_field_are_both_reported() {
    let t = text();
    // Widen queue_high (the 3rd param of set_port) and rename a digest member.
    let i = t.find("name: \"queue_high\"").unwrap();
    let j = i + t[i..].find("bitwidth: 32").unwrap();
    let mut bad = format!("{}bitwidth: 16{}", &t[..j], &t[j + "bitwidth: 32".len()..]);
    bad = bad.replacen("name: \"congested\"", "name: \"hot\"", 1);
    let info = P4Info::from_text(&bad).unwrap();
    let Err(PipelineError::Mismatch { problems }) = Pipeline::new(info, vec![]) else { panic!("accepted") };
    assert!(problems.iter().any(|p| p.contains("queue_high is 16 bits")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("digest queue_digest_t")), "{problems:?}");
}

#[test]
fn digests_decode_and_malformed_ones_are_errors() {
    let p = pipeline();
    let bits = |v: u64, bytes: usize| p4::P4Data {
        data: Some(p4::p4_data::Data::Bitstring(v.to_be_bytes()[8 - bytes..].to_vec())),
    };
    let item = |members: Vec<p4::P4Data>| p4::P4Data {
        data: Some(p4::p4_data::Data::Struct(p4::P4StructLike { members })),
    };
    let good = item(vec![bits(3, 4), bits(2, 2), bits(45, 4), bits(123_456, 6), bits(9, 4), bits(1, 1)]);
    let list = p4::DigestList { digest_id: 0, list_id: 1, data: vec![good.clone()], timestamp: 0 };
    let d = p.decode_digests(&list).unwrap();
    assert_eq!(d[0].switch_id, 3);
    assert_eq!((d[0].port, d[0].depth, d[0].timestamp, d[0].seq, d[0].congested), (2, 45, 123_456, 9, true));
    let short = item(vec![bits(3, 4)]);
    let list = p4::DigestList { digest_id: 0, list_id: 1, data: vec![short], timestamp: 0 };
    assert!(p.decode_digests(&list).is_err());
    let wide = item(vec![bits(3, 4), bits(70_000, 3), bits(45, 4), bits(1, 6), bits(9, 4), bits(1, 1)]);
    let list = p4::DigestList { digest_id: 0, list_id: 1, data: vec![wide], timestamp: 0 };
    assert!(p.decode_digests(&list).is_err(), "a 17-bit port must not be truncated silently");
}

fn bits(v: u128, bytes: usize) -> p4::P4Data {
    p4::P4Data { data: Some(p4::p4_data::Data::Bitstring(v.to_be_bytes()[16 - bytes..].to_vec())) }
}

fn item(members: Vec<p4::P4Data>) -> p4::P4Data {
    p4::P4Data { data: Some(p4::p4_data::Data::Struct(p4::P4StructLike { members })) }
}

#[test]
fn large_flow_digests_decode_and_malformed_ones_are_counted_and_dropped() {
    let p = pipeline();
    let flow: u128 = (0x0a00_0101u128 << 72) | (0x0a00_0201u128 << 40) | (49152u128 << 24) | 0x11;
    let good = item(vec![
        bits(7, 4),
        bits(flow, 13),
        bits(3, 2),
        bits(2_500_000, 4),
        bits(10_010, 4),
        bits(0x1abc, 2),
        bits(1, 1),
        bits(1_234_567, 6),
    ]);
    let short = item(vec![bits(7, 4)]);
    let not_struct = bits(1, 1);
    let mut wide_port = match good.data.clone() {
        Some(p4::p4_data::Data::Struct(s)) => s,
        _ => unreachable!(),
    };
    wide_port.members[2] = bits(70_000, 3);
    let wide_port = p4::P4Data { data: Some(p4::p4_data::Data::Struct(wide_port)) };
    let id = p.info().digests.id_of(metaroce_pipeline::names::LARGE_FLOW_DIGEST).unwrap();
    let list = p4::DigestList {
        digest_id: id,
        list_id: 1,
        data: vec![short, good, not_struct, wide_port],
        timestamp: 0,
    };
    assert!(p.is_large_flow_digest(&list) && !p.is_queue_digest(&list));
    let before = p.malformed_large_flow_digests();
    let out = p.clone().decode_large_flows(&list);
    assert_eq!(out.malformed.len(), 3, "{:?}", out.malformed);
    assert_eq!(p.malformed_large_flow_digests(), before + 3, "counted, also through a clone");
    let [d] = out.flows[..] else { panic!("{:?}", out.flows) };
    assert_eq!(d.switch_id, 7);
    assert_eq!(
        d.flow,
        FlowKey { src: Ipv4Addr::new(10, 0, 1, 1), dst: Ipv4Addr::new(10, 0, 2, 1), sport: 49152, qp: 0x11 }
    );
    assert_eq!((d.egress_port, d.bytes, d.window_us, d.slot), (3, 2_500_000, 10_010, 0x1abc));
    assert!(d.collision);
    assert_eq!(d.timestamp, 1_234_567);
    let rate = d.bytes_per_second(1000).unwrap();
    assert!((rate - 2_500_000.0 / 0.010_010).abs() < 1.0, "{rate}");
    assert_eq!(metaroce_pipeline::LargeFlowDigest { window_us: 0, ..d }.bytes_per_second(1000), None);
}

#[test]
fn a_missing_steer_table_and_a_changed_large_flow_digest_are_reported() {
    let bad = text()
        .replace("MetaroceIngress.routing.steer_pair\"", "MetaroceIngress.routing.steer_pairs\"")
        .replacen("name: \"window_us\"\n        type_spec", "name: \"window\"\n        type_spec", 1);
    let info = P4Info::from_text(&bad).unwrap();
    let Err(PipelineError::Mismatch { problems }) = Pipeline::new(info, vec![]) else { panic!("accepted") };
    assert!(problems.iter().any(|p| p.contains("steer_pair") && p.contains("did you mean")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("digest large_flow_digest_t")), "{problems:?}");
}
