//! One contract on two targets: the committed v1model and TNA P4Infos name
//! every object the controller uses, with the same match fields and
//! compatible widths; the target and its units come from the P4Info; a TNA
//! P4Info that lacks a name fails with the name and a suggestion.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use metaroce_p4rt::P4Info;
use std::net::Ipv4Addr;

use metaroce_pipeline::{parity, Entry, FlowKey, Pipeline, PipelineError, QueueUnit, RouteTarget, Target};

fn build_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build")
}

fn v1model_text() -> String {
    std::fs::read_to_string(build_dir().join("main.p4info.txtpb")).unwrap()
}

/// The TNA P4Info bf-p4c wrote into `p4src/build/tofino/` (committed; see
/// `p4src/README.md`), if any.
fn tna_text() -> Option<String> {
    std::fs::read_to_string(build_dir().join("tofino/main.p4info.txtpb")).ok()
}

/// A TNA P4Info: the committed one, or the v1model one given TNA's
/// architecture and 32-bit time registers (the shape the contract wants).
fn tna_like() -> P4Info {
    if let Some(t) = tna_text() {
        return P4Info::from_text(&t).unwrap();
    }
    let mut raw = P4Info::from_text(&v1model_text()).unwrap().raw().clone();
    raw.pkg_info.get_or_insert_with(Default::default).arch = "tna".into();
    for r in &mut raw.registers {
        let name = r.preamble.as_ref().map(|p| p.name.clone()).unwrap_or_default();
        let time = ["flowlet_last_seen", "port_last_digest", "report_last_time", "window_start"]
            .iter()
            .any(|t| name.ends_with(t));
        if time {
            set_width(r, 32);
        }
    }
    P4Info::new(raw).unwrap()
}

fn set_width(r: &mut metaroce_p4rt::proto::p4::config::v1::Register, w: i32) {
    use metaroce_p4rt::proto::p4::config::v1::p4_bitstring_like_type_spec::TypeSpec as B;
    use metaroce_p4rt::proto::p4::config::v1::p4_data_type_spec::TypeSpec as T;
    if let Some(T::Bitstring(b)) = r.type_spec.as_mut().and_then(|t| t.type_spec.as_mut()) {
        if let Some(B::Bit(bit)) = b.type_spec.as_mut() {
            bit.bitwidth = w;
        }
    }
}

#[test]
fn the_v1model_and_tna_p4infos_agree_on_every_name_the_controller_uses() {
    let Some(tna) = tna_text() else {
        println!(
            "skip: P4Info parity (p4src/build/tofino/main.p4info.txtpb is missing: make p4-tna, see p4src/README.md)"
        );
        return;
    };
    let v1 = P4Info::from_text(&v1model_text()).unwrap();
    let tna = P4Info::from_text(&tna).unwrap();
    // Both carry the drain rule (p4src/README.md, Moves that never
    // reorder): no difference is allowed.
    let problems = parity(&v1, &tna);
    assert!(problems.is_empty(), "the two P4Infos disagree:\n  {}", problems.join("\n  "));
}

#[test]
fn parity_names_a_difference() {
    let v1 = P4Info::from_text(&v1model_text()).unwrap();
    let same = parity(&v1, &tna_like());
    assert!(same.is_empty(), "{same:?}");
    // A match field renamed on one side only.
    let mut raw = tna_like().raw().clone();
    for t in &mut raw.tables {
        if t.preamble.as_ref().is_some_and(|p| p.name.ends_with("routing.steer_flow")) {
            t.match_fields[2].name = "l4_src_port".into();
        }
    }
    let problems = parity(&v1, &P4Info::new(raw).unwrap());
    assert!(problems.iter().any(|p| p.contains("steer_flow") && p.contains("udp_src_port")), "{problems:?}");
}

#[test]
fn parity_covers_objects_the_contract_does_not_name() {
    let v1 = P4Info::from_text(&v1model_text()).unwrap();
    // A table only one side has, and a non-time register of another width.
    let mut raw = tna_like().raw().clone();
    let mut extra = raw.tables[0].clone();
    if let Some(p) = extra.preamble.as_mut() {
        p.name = "MetaroceIngress.routing.extra".into();
        p.alias = "extra".into();
        p.id += 1_000_000;
    }
    raw.tables.push(extra);
    for r in &mut raw.registers {
        if r.preamble.as_ref().is_some_and(|p| p.name.ends_with("routing.flowlet_id")) {
            set_width(r, 32);
        }
    }
    let problems = parity(&v1, &P4Info::new(raw).unwrap());
    assert!(
        problems.iter().any(|p| p.contains("MetaroceIngress.routing.extra is in the TNA P4Info only")),
        "{problems:?}"
    );
    assert!(problems.iter().any(|p| p.contains("flowlet_id") && p.contains("bit<")), "{problems:?}");
}

#[test]
fn the_target_and_its_units_come_from_the_p4info() {
    let v1 = Pipeline::new(P4Info::from_text(&v1model_text()).unwrap(), vec![]).unwrap();
    assert_eq!(v1.target(), Target::Bmv2);
    assert_eq!(v1.units().time_unit_ns, 1000);
    assert_eq!(v1.units().queue, QueueUnit::Packets);
    let tna = Pipeline::new(tna_like(), vec![]).unwrap();
    assert_eq!(tna.target(), Target::Tofino);
    let u = tna.units();
    assert_eq!(u.time_unit_ns, 1);
    assert_eq!(u.queue, QueueUnit::Cells { bytes: 80 });
    // 48 packets of 1500 bytes: 48 x 19 cells on Tofino, 48 slots on BMv2.
    assert_eq!(u.queue_packets(48), 912);
    assert_eq!(v1.units().queue_packets(48), 48);
    assert_eq!(u.queue_bytes(72_000), 900);
    assert_eq!(v1.units().queue_bytes(72_000), 48);
    // 50 µs: 50 on BMv2, 50000 on Tofino; Tofino's 32-bit time saturates.
    assert_eq!(v1.units().time(50_000), 50);
    assert_eq!(u.time(50_000), 50_000);
    assert_eq!(u.time(10_000_000_000), u64::from(u32::MAX));
}

#[test]
fn a_tna_p4info_missing_a_name_fails_with_the_name_and_a_suggestion() {
    let mut raw = tna_like().raw().clone();
    for t in &mut raw.tables {
        if let Some(p) = t.preamble.as_mut().filter(|p| p.name.ends_with("routing.steer_pair")) {
            p.name = p.name.replace("steer_pair", "steer_pairs");
        }
    }
    let err = Pipeline::new(P4Info::new(raw).unwrap(), vec![]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, PipelineError::Mismatch { .. }), "{msg}");
    assert!(msg.contains("MetaroceIngress.routing.steer_pair") && msg.contains("did you mean"), "{msg}");
}

#[test]
fn a_tna_p4info_with_48_bit_time_registers_is_refused() {
    let mut raw = P4Info::from_text(&v1model_text()).unwrap().raw().clone();
    raw.pkg_info.get_or_insert_with(Default::default).arch = "tna".into();
    let Err(PipelineError::Mismatch { problems }) = Pipeline::new(P4Info::new(raw).unwrap(), vec![]) else {
        panic!("accepted")
    };
    assert!(problems.iter().any(|p| p.contains("flowlet_last_seen is not bit<32>")), "{problems:?}");
}

#[test]
fn an_unknown_architecture_is_refused() {
    let mut raw = P4Info::from_text(&v1model_text()).unwrap().raw().clone();
    raw.pkg_info.get_or_insert_with(Default::default).arch = "psa".into();
    let err = Pipeline::new(P4Info::new(raw).unwrap(), vec![]).unwrap_err();
    assert!(err.to_string().contains("\"psa\""), "{err}");
}

#[test]
fn typed_entries_resolve_against_the_tna_p4info_too() {
    let tna = Pipeline::new(tna_like(), vec![]).unwrap();
    let v1 = Pipeline::new(P4Info::from_text(&v1model_text()).unwrap(), vec![]).unwrap();
    let mac = [2, 0, 0, 0, 1, 1];
    let flow = FlowKey {
        src: Ipv4Addr::new(10, 0, 1, 1),
        dst: Ipv4Addr::new(10, 0, 2, 1),
        sport: 49152,
        qp: 0xab_cdef,
    };
    let entries = vec![
        Entry::Config { switch_id: 7, flowlet_timeout_us: 50_000_000 },
        Entry::EgressConfig {
            digest_interval_us: 1_000_000,
            report_period_us: 1_000_000_000,
            latency_shift: 10,
        },
        Entry::EdgePort { port: 1 },
        Entry::Route { prefix: Ipv4Addr::new(10, 0, 2, 0), len: 24, target: RouteTarget::Group(3) },
        Entry::Nhop { id: 2, port: 1, src_mac: mac, dst_mac: [2, 0, 0, 0, 1, 2] },
        Entry::Member { id: 2, nhop: 2 },
        Entry::Group { id: 3, members: vec![(2, 5)] },
        Entry::GroupEntry { id: 3, group: 3 },
        Entry::PortDown { port: 4 },
        Entry::SteerFlow { flow, nhop_id: 2, port: 1 },
        Entry::LargeFlowConfig { window_us: 10_000_000, threshold_bytes: 125_000_000 },
        Entry::EgressPort {
            port: 1,
            edge: true,
            mtu: 1500,
            queue_high: 912,
            queue_low: 228,
            ecn_threshold: 380,
        },
        Entry::CloneSession { id: 501, port: 68 },
    ];
    for e in entries {
        let entity = tna.entity(&e).unwrap_or_else(|err| panic!("{e:?}: {err}"));
        assert_eq!(tna.parse(&entity).unwrap(), Some(e.clone()));
        // The same entry is the same entity on both targets, up to ids.
        assert!(v1.entity(&e).is_ok(), "{e:?}");
    }
    // Both carry the drain rule: the same tables to read back.
    assert!(tna.has_drain() && v1.has_drain());
    assert_eq!(tna.read_requests().len(), v1.read_requests().len());
}
