//! L0: loading and indexing P4Info, building entities, bad input.

mod common;

use metaroce_p4rt::codec::ValueError;
use metaroce_p4rt::{P4Info, P4InfoError};
use prost::Message;

#[test]
fn text_and_binary_agree_and_index_everything() {
    let info = common::info();
    let bin = info.raw().encode_to_vec();
    let again = P4Info::from_binary(&bin).unwrap();
    assert_eq!(again.raw(), info.raw());
    assert_eq!(info.tables.len(), 4);
    assert_eq!(info.tables.id_of("Ingress.l2.dmac").unwrap(), 33554433);
    assert_eq!(info.tables.id_of("l2.dmac").unwrap(), 33554433);
    assert_eq!(info.tables.id_of("dmac").unwrap(), 33554433);
    assert_eq!(info.actions.by_id(16777218).unwrap().preamble.as_ref().unwrap().name, "Ingress.drop");
    assert!(info.action_profiles.by_name("nhop_selector").is_ok());
    assert!(info.counters.by_name("port_rx").is_ok());
    assert!(info.direct_counters.by_name("acl_counter").is_ok());
    assert!(info.registers.by_name("queue_depth").is_ok());
    assert!(info.digests.by_name("congestion_digest").is_ok());
    let t = info.table("ipv4_lpm").unwrap();
    assert_eq!(metaroce_p4rt::p4info::match_field(t, "dst_addr").unwrap().id, 1);
    assert_eq!(metaroce_p4rt::p4info::match_field_by_id(t, 1).unwrap().name, "hdr.ipv4.dst_addr");
    assert!(matches!(
        metaroce_p4rt::p4info::match_field_by_id(t, 9),
        Err(P4InfoError::UnknownId { id: 9, .. })
    ));
    let a = info.action("set_nhop").unwrap();
    assert_eq!(metaroce_p4rt::p4info::action_param_by_id(a, 2).unwrap().name, "dmac");
    let md = info
        .packet_metadata("packet_in", &[("ingress_port", 300u16.into()), ("reason", 2u8.into())])
        .unwrap();
    assert_eq!(
        info.decode_packet_metadata("packet_in", &md).unwrap(),
        vec![("ingress_port".to_string(), 300), ("reason".to_string(), 2)]
    );
    let mut bad = md.clone();
    bad[1].value = vec![1, 0];
    assert!(matches!(info.decode_packet_metadata("packet_in", &bad), Err(P4InfoError::Value { .. })));
    assert_eq!(metaroce_p4rt::p4info::action_param(a, "dmac").unwrap().bitwidth, 48);
}

#[test]
fn unknown_names_suggest() {
    let info = common::info();
    let e = info.table("Ingress.routing.ipv4_lmp").unwrap_err();
    assert!(e.to_string().contains("did you mean \"Ingress.routing.ipv4_lpm\""), "{e}");
    let e = info.table_entry("dmac").unwrap().exact("hdr.ethernet.dst_adr", 1u64).unwrap_err();
    assert!(matches!(e, P4InfoError::UnknownName { .. }) && e.to_string().contains("did you mean"), "{e}");
    let e = info.table("nothing_like_it_at_all").unwrap_err();
    assert!(matches!(e, P4InfoError::UnknownName { suggestion: None, .. }), "{e}");
    // "port" is a parameter of two actions, but a table suffix lookup of a
    // shared suffix is ambiguous:
    let e = info.tables.by_name("nhop_x").unwrap_err();
    assert!(e.to_string().contains("did you mean"), "{e}");
}

#[test]
fn ambiguous_suffix_is_typed() {
    let mut raw = common::info().raw().clone();
    let mut t = raw.tables[0].clone();
    t.preamble.as_mut().unwrap().id = 33554499;
    t.preamble.as_mut().unwrap().name = "Egress.l2.dmac".into();
    t.preamble.as_mut().unwrap().alias = "egress_dmac".into();
    raw.tables.push(t);
    let info = P4Info::new(raw).unwrap();
    assert!(matches!(info.table("l2.dmac"), Err(P4InfoError::Ambiguous { .. })));
    assert!(info.table("Egress.l2.dmac").is_ok());
}

#[test]
fn malformed_p4info_is_typed() {
    let bin = common::info().raw().encode_to_vec();
    // Cut inside a length-delimited field.
    assert!(matches!(
        P4Info::from_binary(&bin[..bin.len() / 2 + 3]),
        Err(P4InfoError::Binary(_) | P4InfoError::Invalid { .. })
    ));
    assert!(matches!(P4Info::from_binary(&[0x0a, 0x40, 1, 2]), Err(P4InfoError::Binary(_))));
    assert!(matches!(P4Info::from_text("tables { preamble { id: 1 "), Err(P4InfoError::Text { .. })));
    assert!(matches!(P4Info::from_text("no_such_field: 3"), Err(P4InfoError::Text { .. })));
    let dup = "actions { preamble { id: 1 name: \"a\" } } actions { preamble { id: 1 name: \"b\" } }";
    assert!(matches!(P4Info::from_text(dup), Err(P4InfoError::Invalid { .. })));
    let dangling = "tables { preamble { id: 2 name: \"t\" } action_refs { id: 9 } }";
    assert!(matches!(P4Info::from_text(dangling), Err(P4InfoError::Invalid { .. })));
    assert!(matches!(P4Info::load(&common::data("missing.txt")), Err(P4InfoError::Io { .. })));
}

#[test]
fn entries_encode_canonically_and_refuse_bad_values() {
    let info = common::info();
    let e = info
        .table_entry("acl")
        .unwrap()
        .ternary("src_addr", 0x0a00_00ffu32, 0xffff_ff00u32)
        .unwrap()
        .range("l4_dst_port", 1000u16, 2000u16)
        .unwrap()
        .optional("ingress_port", 3u16)
        .unwrap()
        .priority(10)
        .action("drop", &[])
        .unwrap()
        .build();
    assert_eq!(e.r#match.len(), 3);
    use metaroce_p4rt::proto::p4::v1::field_match::FieldMatchType as F;
    match &e.r#match[0].field_match_type {
        Some(F::Ternary(t)) => assert_eq!(
            (t.value.as_slice(), t.mask.as_slice()),
            (&[0x0a, 0, 0, 0][..], &[0xff, 0xff, 0xff, 0][..])
        ),
        other => panic!("{other:?}"),
    }
    let too_wide = info.table_entry("dmac").unwrap().exact("dst_addr", 1u64 << 48).unwrap_err();
    assert!(
        matches!(
            too_wide,
            P4InfoError::Value { source: ValueError::TooWide { bitwidth: 48, needed: 49 }, .. }
        ),
        "{too_wide}"
    );
    let port = info.action_call("set_port", &[("port", 512u16.into())]).unwrap_err();
    assert!(matches!(port, P4InfoError::Value { .. }));
    let kind = info.table_entry("dmac").unwrap().lpm("dst_addr", 1u64, 8).unwrap_err();
    assert!(matches!(kind, P4InfoError::MatchKind { .. }), "{kind}");
    let missing = info.action_call("set_nhop", &[("port", 1u16.into())]).unwrap_err();
    assert!(missing.to_string().contains("dmac is missing"), "{missing}");
    let not_in_table = info
        .table_entry("dmac")
        .unwrap()
        .exact("dst_addr", 1u64)
        .unwrap()
        .action("set_group", &[("group", 1u16.into())]);
    assert!(matches!(not_in_table, Err(P4InfoError::Usage { .. })));
    let lpm = info.table_entry("ipv4_lpm").unwrap().lpm("dst_addr", 0x0a01_02ffu32, 24).unwrap().build();
    match &lpm.r#match[0].field_match_type {
        Some(F::Lpm(l)) => assert_eq!(l.value, vec![0x0a, 0x01, 0x02, 0x00]),
        other => panic!("{other:?}"),
    }
    assert!(info.profile_group("nhop_selector", 1, &[(1, 1)], 65).is_err());
    assert!(info.profile_group("nhop_selector", 1, &[(1, 0)], 8).is_err());
}
