//! L2: the driver against the in-process P4Runtime server over TCP.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use metaroce_p4rt::entity::{self, clone_session, insert, modify, multicast_group, DigestConfig};
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::server::SwitchOptions;
use metaroce_p4rt::session::{Bmv2Json, PipelineOutcome, RegisterCell};
use metaroce_p4rt::{Event, Session, SessionError};
use tonic::Code;

fn ip(a: u8, b: u8, c: u8, d: u8) -> Vec<u8> {
    vec![a, b, c, d]
}

async fn next_event(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Event>,
    want: impl Fn(&Event) -> bool,
) -> Event {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let e = rx.recv().await.expect("subscription alive");
            if want(&e) {
                return e;
            }
        }
    })
    .await
    .expect("event within 5 s")
}

/// The cookie is the same in every process: the P4Info's type maps
/// (HashMaps, iterated in a per-map random order) do not change it.
#[test]
fn the_pipeline_cookie_does_not_depend_on_map_order() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4src/build/main.p4info.txtpb"))
            .unwrap();
    let info = metaroce_p4rt::P4Info::from_text(&text).unwrap();
    let want = metaroce_p4rt::session::pipeline_cookie(&info, b"{}");
    for _ in 0..8 {
        let mut raw = info.raw().clone();
        if let Some(t) = raw.type_info.as_mut() {
            // Rebuilt maps get new hash seeds, so another iteration order.
            t.structs = t.structs.drain().collect();
        }
        let again = metaroce_p4rt::P4Info::new(raw).unwrap();
        assert_eq!(metaroce_p4rt::session::pipeline_cookie(&again, b"{}"), want);
    }
}

#[tokio::test]
async fn pipeline_cookie_skips_reinstall() {
    let r = common::rig(SwitchOptions::default()).await;
    let s = common::primary(&r).await;
    assert_eq!(
        s.set_pipeline(&r.info, &Bmv2Json(b"{}".to_vec()), None).await.unwrap(),
        PipelineOutcome::AlreadyInstalled
    );
    assert_eq!(r.switch.pipeline_pushes(), 1);
    assert_eq!(
        s.set_pipeline(&r.info, &Bmv2Json(b"{ }".to_vec()), None).await.unwrap(),
        PipelineOutcome::Pushed
    );
    assert_eq!(s.capabilities().await.unwrap(), "1.6.0");
}

#[tokio::test]
async fn a_device_refuses_a_program_it_cannot_run() {
    use metaroce_p4rt::server::{CheckError, PipelineCheck};
    let check =
        PipelineCheck(std::sync::Arc::new(|info: &metaroce_p4rt::P4Info| -> Result<(), CheckError> {
            info.table("no_such_table").map(|_| ()).map_err(|_| "table no_such_table is missing".into())
        }));
    let r = common::rig(SwitchOptions { accepts: Some(check), ..Default::default() }).await;
    let s = Session::connect(common::config(&r.addr, 10)).await.unwrap();
    s.wait_primary().await.unwrap();
    let err = s.set_pipeline(&r.info, &Bmv2Json(b"{}".to_vec()), None).await.unwrap_err().to_string();
    assert!(err.contains("table no_such_table is missing"), "{err}");
    assert_eq!(r.switch.pipeline_pushes(), 0, "nothing was committed");
    assert!(r.switch.p4info().is_none());
}

#[tokio::test]
async fn match_kinds_and_lookup_semantics() {
    let r = common::rig(SwitchOptions::default()).await;
    let s = common::primary(&r).await;
    let i = &r.info;
    let lpm = |p: &[u8], len, g: u16| {
        i.table_entry("ipv4_lpm")
            .unwrap()
            .lpm("dst_addr", p.to_vec(), len)
            .unwrap()
            .action("set_group", &[("group", g.into())])
            .unwrap()
            .build()
    };
    let acl = |v: u32, m: u32, lo: u16, hi: u16, prio| {
        i.table_entry("acl")
            .unwrap()
            .ternary("src_addr", v, m)
            .unwrap()
            .range("l4_dst_port", lo, hi)
            .unwrap()
            .priority(prio)
            .action("to_cpu", &[("reason", (prio as u8).into())])
            .unwrap()
            .build()
    };
    s.write(vec![
        insert(lpm(&ip(10, 0, 0, 0), 8, 1)),
        insert(lpm(&ip(10, 1, 0, 0), 16, 2)),
        insert(
            i.table_entry("dmac")
                .unwrap()
                .exact("dst_addr", [2, 0, 0, 0, 0, 1])
                .unwrap()
                .action("set_port", &[("port", 7u16.into())])
                .unwrap()
                .build(),
        ),
        insert(acl(0x0a00_0000, 0xff00_0000, 0, 1000, 1)),
        insert(acl(0x0a01_0000, 0xffff_0000, 500, 600, 5)),
        insert(
            i.table_entry("acl")
                .unwrap()
                .optional("ingress_port", 4u16)
                .unwrap()
                .priority(3)
                .action("drop", &[])
                .unwrap()
                .build(),
        ),
    ])
    .await
    .unwrap();
    let lpm_id = i.tables.id_of("ipv4_lpm").unwrap();
    let group = |h: metaroce_p4rt::server::Hit| h.action.unwrap().params[0].value.clone();
    assert_eq!(group(r.switch.lookup(lpm_id, &[(1, ip(10, 1, 2, 3))], 0, 64).unwrap()), vec![2]);
    assert_eq!(group(r.switch.lookup(lpm_id, &[(1, ip(10, 2, 2, 3))], 0, 64).unwrap()), vec![1]);
    let miss = r.switch.lookup(lpm_id, &[(1, ip(11, 0, 0, 1))], 0, 64).unwrap();
    assert!(!miss.hit && miss.action.is_none());
    let acl_id = i.tables.id_of("acl").unwrap();
    let key = |src: Vec<u8>, port: u16, inp: u16| {
        vec![(1, src), (2, port.to_be_bytes().to_vec()), (3, inp.to_be_bytes().to_vec())]
    };
    assert_eq!(group(r.switch.lookup(acl_id, &key(ip(10, 1, 0, 9), 550, 1), 0, 64).unwrap()), vec![5]);
    assert_eq!(group(r.switch.lookup(acl_id, &key(ip(10, 1, 0, 9), 700, 1), 0, 64).unwrap()), vec![1]);
    assert_eq!(
        r.switch.lookup(acl_id, &key(ip(9, 1, 0, 9), 700, 4), 0, 64).unwrap().action.unwrap().action_id,
        i.actions.id_of("drop").unwrap()
    );
    assert!(!r.switch.lookup(acl_id, &key(ip(9, 1, 0, 9), 700, 1), 0, 64).unwrap().hit);

    // Streamed read of one table, and of everything.
    let all = s.read(vec![p4::TableEntry { table_id: acl_id, ..Default::default() }.into()]).await.unwrap();
    assert_eq!(all.len(), 3);
    let everything = s.read(vec![p4::TableEntry::default().into()]).await.unwrap();
    assert_eq!(everything.len(), 6);
    // Direct counter counted the hits.
    let counters = s
        .read(vec![p4::DirectCounterEntry {
            table_entry: Some(p4::TableEntry { table_id: acl_id, ..Default::default() }),
            data: None,
        }
        .into()])
        .await
        .unwrap();
    let hits: i64 = counters
        .iter()
        .filter_map(|e| match &e.entity {
            Some(p4::entity::Entity::DirectCounterEntry(c)) => Some(c.data?.packet_count),
            _ => None,
        })
        .sum();
    assert_eq!(hits, 3);

    // Default action: only MODIFY works.
    let default = i.table_entry("acl").unwrap().action("NoAction", &[]).unwrap().default_action().build();
    let e = s.write(vec![insert(default.clone())]).await.unwrap_err();
    assert_eq!(e.code(), Some(Code::Unknown));
    s.write(vec![modify(default)]).await.unwrap();
    assert_eq!(
        r.switch.lookup(acl_id, &key(ip(9, 1, 0, 9), 700, 1), 0, 64).unwrap().action.unwrap().action_id,
        i.actions.id_of("NoAction").unwrap()
    );
}

#[tokio::test]
async fn partial_failure_reports_each_update() {
    let r = common::rig(SwitchOptions::default()).await;
    let s = common::primary(&r).await;
    let e = |mac: u8| {
        r.info
            .table_entry("dmac")
            .unwrap()
            .exact("dst_addr", [0, 0, 0, 0, 0, mac])
            .unwrap()
            .action("set_port", &[("port", 1u16.into())])
            .unwrap()
            .build()
    };
    s.write(vec![insert(e(1))]).await.unwrap();
    let err =
        s.write(vec![insert(e(2)), insert(e(1)), insert(e(3)), entity::delete(e(9))]).await.unwrap_err();
    let SessionError::Write { failure, .. } = err else { panic!("{err}") };
    assert_eq!(failure.failed_indexes(), vec![1, 3]);
    assert_eq!(failure.failures[0].code, Code::AlreadyExists);
    assert_eq!(failure.failures[1].code, Code::NotFound);
    let SessionError::Write { failure, .. } = s.write(vec![insert(e(2)), insert(e(3))]).await.unwrap_err()
    else {
        panic!()
    };
    assert!(failure.only_already_exists());
    let SessionError::Write { failure, .. } = s
        .write_batched(vec![entity::delete(e(2)), entity::delete(e(8)), entity::delete(e(9))], 2)
        .await
        .unwrap_err()
    else {
        panic!()
    };
    assert_eq!(failure.failed_indexes(), vec![1, 2]);
    assert!(failure.only_not_found());
    // A raw too-wide value (bypassing the builder) is OUT_OF_RANGE.
    let mut bad = e(4);
    if let Some(p4::field_match::FieldMatchType::Exact(x)) = bad.r#match[0].field_match_type.as_mut() {
        x.value = vec![1, 0, 0, 0, 0, 0, 0];
    }
    let SessionError::Write { failure, .. } = s.write(vec![insert(bad)]).await.unwrap_err() else { panic!() };
    assert_eq!(failure.failures[0].code, Code::OutOfRange);
}

#[tokio::test]
async fn action_profiles_groups_and_one_shot() {
    let r = common::rig(SwitchOptions::default()).await;
    let s = common::primary(&r).await;
    let i = &r.info;
    let nh = |port: u16| {
        i.action_call("set_nhop", &[("port", port.into()), ("dmac", [2, 0, 0, 0, 0, port as u8].into())])
            .unwrap()
    };
    let mut ups: Vec<p4::Update> =
        (1..=3).map(|m| insert(i.profile_member("nhop_selector", m, nh(m as u16)).unwrap())).collect();
    ups.push(insert(i.profile_group("nhop_selector", 100, &[(1, 3), (2, 1)], 8).unwrap()));
    ups.push(insert(i.table_entry("nhop").unwrap().exact("group", 100u16).unwrap().group(100).build()));
    ups.push(insert(
        i.table_entry("nhop")
            .unwrap()
            .exact("group", 200u16)
            .unwrap()
            .action_set(vec![(nh(5), 1), (nh(6), 1)])
            .build(),
    ));
    s.write(ups).await.unwrap();
    let t = i.tables.id_of("nhop").unwrap();
    let ports: Vec<u8> = (0..4u64)
        .map(|h| r.switch.lookup(t, &[(1, vec![100])], h, 1).unwrap().action.unwrap().params[0].value[0])
        .collect();
    assert_eq!(ports, vec![1, 1, 1, 2], "weights 3:1");
    let one_shot: Vec<u8> = (0..2u64)
        .map(|h| r.switch.lookup(t, &[(1, vec![200])], h, 1).unwrap().action.unwrap().params[0].value[0])
        .collect();
    assert_eq!(one_shot, vec![5, 6]);
    // Weight over max_size; member in use; max_size over the profile's.
    let codes = |e: SessionError| match e {
        SessionError::Write { failure, .. } => failure.failures.iter().map(|f| f.code).collect::<Vec<_>>(),
        e => panic!("{e}"),
    };
    let over = i.profile_group("nhop_selector", 100, &[(1, 6), (2, 3)], 0).unwrap();
    assert_eq!(codes(s.write(vec![modify(over)]).await.unwrap_err()), vec![Code::ResourceExhausted]);
    let del = i.profile_member("nhop_selector", 1, nh(1)).unwrap();
    assert_eq!(codes(s.write(vec![entity::delete(del)]).await.unwrap_err()), vec![Code::FailedPrecondition]);
    let mut huge = i.profile_group("nhop_selector", 101, &[(3, 1)], 8).unwrap();
    huge.max_size = 1000;
    assert_eq!(codes(s.write(vec![insert(huge)]).await.unwrap_err()), vec![Code::ResourceExhausted]);
    let ghost = i.profile_group("nhop_selector", 102, &[(77, 1)], 8).unwrap();
    assert_eq!(codes(s.write(vec![insert(ghost)]).await.unwrap_err()), vec![Code::NotFound]);
    let groups = s.read(vec![p4::ActionProfileGroup::default().into()]).await.unwrap();
    assert_eq!(groups.len(), 1);
}

#[tokio::test]
async fn counters_registers_and_replication() {
    let r = common::rig(SwitchOptions::default()).await;
    let s = common::primary(&r).await;
    let i = &r.info;
    let c = i.counters.id_of("port_rx").unwrap();
    assert!(r.switch.count(c, 3, 100));
    let read = s.read(vec![i.counter_entry("port_rx", Some(3)).unwrap().into()]).await.unwrap();
    let Some(p4::entity::Entity::CounterEntry(ce)) = &read[0].entity else { panic!() };
    assert_eq!(ce.data.unwrap().byte_count, 100);
    assert_eq!(s.read(vec![i.counter_entry("port_rx", None).unwrap().into()]).await.unwrap().len(), 512);

    s.write_register(i, "queue_depth", Some(5), 1234).await.unwrap();
    assert_eq!(s.read_register(i, "queue_depth", Some(5)).await.unwrap(), vec![(5, 1234)]);
    assert_eq!(s.read_register(i, "queue_depth", None).await.unwrap().len(), 64);
    assert!(s.write_register(i, "queue_depth", Some(2), 1 << 64).await.is_err(), "over 64 bits");
    let e = s.read_register(i, "queue_depth", Some(64)).await.unwrap_err();
    assert_eq!(e.code(), Some(Code::OutOfRange));
    // A prepared batch (register cells and a counter cell) reads the same
    // every time, over P4Runtime alone; a whole register is its own batch
    // (an answer goes to every asked cell it matches).
    let cells = [
        RegisterCell { register: "queue_depth", index: Some(5) },
        RegisterCell { register: "queue_depth", index: Some(6) },
    ];
    let read = s.register_read(i, &cells, vec![i.counter_entry("port_rx", Some(3)).unwrap().into()]).unwrap();
    let whole = s.register_read(i, &[RegisterCell { register: "queue_depth", index: None }], vec![]).unwrap();
    for _ in 0..2 {
        let (values, counters) = s.read_prepared(&read).await.unwrap();
        assert_eq!(values, vec![vec![(5, 1234)], vec![(6, 0)]]);
        assert_eq!(
            counters.iter().map(|c| c.data.map(|d| d.byte_count)).collect::<Vec<_>>(),
            vec![Some(100)]
        );
        let (values, counters) = s.read_prepared(&whole).await.unwrap();
        assert_eq!((values[0].len(), values[0][5], counters.len()), (64, (5, 1234), 0));
    }

    s.write(vec![
        p4::Update {
            r#type: p4::update::Type::Insert as i32,
            entity: Some(clone_session(5, &[(255, 1)], 0, 128)),
        },
        p4::Update {
            r#type: p4::update::Type::Insert as i32,
            entity: Some(multicast_group(1, &[(1, 1), (2, 1)])),
        },
    ])
    .await
    .unwrap();
    let pre = s.read(vec![clone_session(0, &[], 0, 0), multicast_group(0, &[])]).await.unwrap();
    assert_eq!(pre.len(), 2);
    // The data plane sees a session's replica ports; an unknown session makes no copy.
    assert_eq!(r.switch.clone_session_ports(5), Some(vec![255]));
    assert_eq!(r.switch.clone_session_ports(6), None);
    let dup = s
        .write(vec![p4::Update {
            r#type: p4::update::Type::Insert as i32,
            entity: Some(clone_session(5, &[], 0, 0)),
        }])
        .await;
    assert!(matches!(dup, Err(SessionError::Write { failure, .. }) if failure.only_already_exists()));
    // The owner may commit a pipeline without arbitrating; it starts empty.
    let pushes = r.switch.pipeline_pushes();
    let config = p4::ForwardingPipelineConfig { p4info: Some(i.raw().clone()), ..Default::default() };
    r.switch.commit_pipeline(config).unwrap();
    assert_eq!(r.switch.pipeline_pushes(), pushes + 1);
    assert_eq!(r.switch.clone_session_ports(5), None);
    assert!(r.switch.commit_pipeline(p4::ForwardingPipelineConfig::default()).is_err());
}

#[tokio::test]
async fn registers_fall_back_to_thrift_and_queues_are_set() {
    let r = common::rig(SwitchOptions { registers_via_p4runtime: false, ..Default::default() }).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let taddr = listener.local_addr().unwrap();
    let stand_in = metaroce_p4rt::thrift::StandIn::new(r.switch.clone());
    let queues = stand_in.queues.clone();
    tokio::spawn(stand_in.serve(listener));
    let s = common::primary(&r).await;
    let i = &r.info;
    // P4Runtime itself refuses, as BMv2's PI does.
    let direct = s.read(vec![i.register_entry("queue_depth", Some(1), None).unwrap().into()]).await;
    assert_eq!(direct.unwrap_err().code(), Some(Code::Unimplemented));
    let s = s.with_thrift(metaroce_p4rt::thrift::ThriftConfig::new(taddr));
    s.write_register(i, "queue_depth", Some(2), 77).await.unwrap();
    assert_eq!(s.read_register(i, "queue_depth", Some(2)).await.unwrap(), vec![(2, 77)]);
    assert_eq!(r.switch.register_cell(i.registers.id_of("queue_depth").unwrap(), 2), Some(vec![77]));
    assert_eq!(s.read_register(i, "queue_depth", None).await.unwrap().len(), 64);
    // A batch with counter cells, prepared once and read twice: the
    // registers over Thrift, the counters on their own over P4Runtime.
    let c = i.counters.id_of("port_rx").unwrap();
    assert!(r.switch.count(c, 3, 100));
    let cells = [
        RegisterCell { register: "queue_depth", index: Some(2) },
        RegisterCell { register: "queue_depth", index: Some(5) },
    ];
    let read = s.register_read(i, &cells, vec![i.counter_entry("port_rx", Some(3)).unwrap().into()]).unwrap();
    assert_eq!((read.cells(), read.others()), (2, 1));
    for _ in 0..2 {
        let (values, counters) = s.read_prepared(&read).await.unwrap();
        assert_eq!(values, vec![vec![(2, 77)], vec![(5, 0)]]);
        assert_eq!(counters.len(), 1);
        assert_eq!((counters[0].counter_id, counters[0].index.map(|x| x.index)), (c, Some(3)));
        assert_eq!(counters[0].data.map(|d| d.byte_count), Some(100));
    }

    let mut t = metaroce_p4rt::thrift::ThriftClient::connect(metaroce_p4rt::thrift::ThriftConfig::new(taddr))
        .await
        .unwrap();
    t.set_queue_depth(Some(3), 64).await.unwrap();
    t.set_queue_rate(None, 1000).await.unwrap();
    assert!(matches!(
        t.register_read("Ingress.nope", 0).await,
        Err(metaroce_p4rt::thrift::ThriftError::Register { code: 1, .. })
    ));
    let q = queues.lock().unwrap().clone();
    assert_eq!((q.depth.get(&3), q.rate.get(&-1)), (Some(&64), Some(&1000)));
}

#[tokio::test]
async fn digests_are_batched_acked_and_deduplicated() {
    let r = common::rig(SwitchOptions::default()).await;
    let s = common::primary(&r).await;
    let mut ev = s.subscribe().unwrap();
    let cfg = DigestConfig { max_timeout_ns: 0, max_list_size: 1, ack_timeout_ns: 10_000_000_000 };
    s.configure_digest(r.info.digest_entry("congestion_digest", cfg).unwrap()).await.unwrap();
    let id = r.info.digests.id_of("congestion_digest").unwrap();
    let data = |v: u8| p4::P4Data { data: Some(p4::p4_data::Data::Bitstring(vec![v])) };
    assert!(r.switch.emit_digest(id, data(1)));
    let Event::Digest(list) = next_event(&mut ev, |e| matches!(e, Event::Digest(_))).await else {
        unreachable!()
    };
    assert_eq!((list.digest_id, list.data.len()), (id, 1));
    // The ack reaches the server; the same data may then come again.
    tokio::time::timeout(Duration::from_secs(5), async {
        while r.switch.outstanding_digests() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    // Batching by timeout: two items in one list.
    let cfg = DigestConfig { max_timeout_ns: 50_000_000, max_list_size: 10, ack_timeout_ns: 10_000_000_000 };
    s.configure_digest(r.info.digest_entry("congestion_digest", cfg).unwrap()).await.unwrap();
    assert!(r.switch.emit_digest(id, data(2)));
    assert!(r.switch.emit_digest(id, data(3)));
    assert!(!r.switch.emit_digest(id, data(3)), "same data is not queued twice");
    let Event::Digest(list) = next_event(&mut ev, |e| matches!(e, Event::Digest(_))).await else {
        unreachable!()
    };
    assert_eq!(list.data.len(), 2);
}

#[tokio::test]
async fn stream_drop_mid_digest_keeps_subscriptions() {
    let r = common::rig(SwitchOptions::default()).await;
    let s = common::primary(&r).await;
    let mut ev = s.subscribe().unwrap();
    let cfg = DigestConfig { max_timeout_ns: 0, max_list_size: 1, ack_timeout_ns: 10_000_000_000 };
    s.configure_digest(r.info.digest_entry("congestion_digest", cfg).unwrap()).await.unwrap();
    let id = r.info.digests.id_of("congestion_digest").unwrap();
    let data = |v: u8| p4::P4Data { data: Some(p4::p4_data::Data::Bitstring(vec![v])) };
    r.switch.emit_digest(id, data(1));
    r.switch.drop_streams();
    next_event(&mut ev, |e| matches!(e, Event::Disconnected { .. })).await;
    next_event(&mut ev, |e| matches!(e, Event::Reconnected)).await;
    next_event(&mut ev, |e| matches!(e, Event::Role { primary: true, .. })).await;
    s.wait_primary().await.unwrap();
    assert!(r.switch.emit_digest(id, data(2)));
    let Event::Digest(list) =
        next_event(&mut ev, |e| matches!(e, Event::Digest(d) if d.data == vec![data(2)])).await
    else {
        unreachable!()
    };
    assert_eq!(list.digest_id, id);
    // Writes work again after re-arbitration.
    s.write(vec![insert(
        r.info
            .table_entry("dmac")
            .unwrap()
            .exact("dst_addr", 5u64)
            .unwrap()
            .action("drop", &[])
            .unwrap()
            .build(),
    )])
    .await
    .unwrap();
}

#[tokio::test]
async fn unknown_digest_id_is_reported_not_delivered() {
    let r = common::rig(SwitchOptions::default()).await;
    let s = common::primary(&r).await;
    let mut ev = s.subscribe().unwrap();
    let cfg = DigestConfig { max_timeout_ns: 0, max_list_size: 1, ack_timeout_ns: 10_000_000_000 };
    s.configure_digest(r.info.digest_entry("congestion_digest", cfg).unwrap()).await.unwrap();
    // The session believes in a program without this digest.
    let mut raw = r.info.raw().clone();
    raw.digests.clear();
    raw.actions.push(metaroce_p4rt::proto::p4::config::v1::Action {
        preamble: Some(metaroce_p4rt::proto::p4::config::v1::Preamble {
            id: 16777299,
            name: "x".into(),
            ..Default::default()
        }),
        params: vec![],
    });
    let mut other = metaroce_p4rt::P4Info::new(raw).unwrap().raw().clone();
    other.digests.push(metaroce_p4rt::proto::p4::config::v1::Digest {
        preamble: Some(metaroce_p4rt::proto::p4::config::v1::Preamble {
            id: 385875970,
            name: "other".into(),
            ..Default::default()
        }),
        type_spec: None,
    });
    s.use_p4info(&metaroce_p4rt::P4Info::new(other).unwrap()).unwrap();
    let id = r.info.digests.id_of("congestion_digest").unwrap();
    r.switch.emit_digest(id, p4::P4Data { data: Some(p4::p4_data::Data::Bitstring(vec![1])) });
    let e = next_event(&mut ev, |e| matches!(e, Event::UnknownDigest { .. } | Event::Digest(_))).await;
    assert!(matches!(e, Event::UnknownDigest { digest_id, .. } if digest_id == id), "{e:?}");
    assert_eq!(r.switch.outstanding_digests(), 1, "not acked");
    // The subscription still works.
    assert!(r.switch.packet_in(vec![1, 2], vec![]));
    next_event(&mut ev, |e| matches!(e, Event::PacketIn(_))).await;
}

#[tokio::test]
async fn packets_and_idle_timeouts() {
    let r = common::rig(SwitchOptions::default()).await;
    let s = common::primary(&r).await;
    let mut ev = s.subscribe().unwrap();
    let mut outs = r.switch.take_packet_outs().unwrap();
    let md = r.info.packet_metadata("packet_out", &[("egress_port", 3u16.into())]).unwrap();
    s.packet_out(vec![0xde, 0xad], md.clone()).unwrap();
    let p = tokio::time::timeout(Duration::from_secs(5), outs.recv()).await.unwrap().unwrap();
    assert_eq!((p.payload, p.metadata), (vec![0xde, 0xad], md));
    let md_in = r
        .info
        .packet_metadata("packet_in", &[("ingress_port", 2u16.into()), ("reason", 1u8.into())])
        .unwrap();
    assert!(r.switch.packet_in(vec![1], md_in.clone()));
    let Event::PacketIn(p) = next_event(&mut ev, |e| matches!(e, Event::PacketIn(_))).await else {
        unreachable!()
    };
    assert_eq!(p.metadata, md_in);
    assert!(r.info.packet_metadata("packet_out", &[("egress_port", 512u16.into())]).is_err());

    let e = r
        .info
        .table_entry("dmac")
        .unwrap()
        .exact("dst_addr", 9u64)
        .unwrap()
        .action("drop", &[])
        .unwrap()
        .idle_timeout_ns(1_000_000)
        .build();
    s.write(vec![insert(e)]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(r.switch.check_idle(), 1);
    let Event::IdleTimeout(n) = next_event(&mut ev, |e| matches!(e, Event::IdleTimeout(_))).await else {
        unreachable!()
    };
    assert_eq!(n.table_entry.len(), 1);
    assert_eq!(r.switch.check_idle(), 0, "notified once");
}

/// The first arbitration answer arrives inside `connect`, before anyone
/// can subscribe: a subscription starts with the standing role, so a
/// caller that tracks the role (the controller's status) never misses it.
#[tokio::test]
async fn a_subscription_starts_with_the_standing_role() {
    let r = common::rig(SwitchOptions::default()).await;
    let s = Session::connect(common::config(&r.addr, 5)).await.unwrap();
    s.wait_primary().await.unwrap();
    let mut ev = s.subscribe().unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), ev.recv()).await.unwrap().unwrap();
    assert_eq!(first, Event::Role { primary: true, election_id: Some(5) });
    // A backup hears that it is one, and who the primary is.
    let backup = Session::connect(common::config(&r.addr, 2)).await.unwrap();
    let mut ev = backup.subscribe().unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), ev.recv()).await.unwrap().unwrap();
    assert_eq!(first, Event::Role { primary: false, election_id: Some(5) });
}

#[tokio::test]
async fn arbitration_primary_backup_and_failover() {
    let r = common::rig(SwitchOptions::default()).await;
    let low = Session::connect(common::config(&r.addr, 5)).await.unwrap();
    low.wait_primary().await.unwrap();
    let mut low_ev = low.subscribe().unwrap();
    let high = Session::connect(common::config(&r.addr, 9)).await.unwrap();
    high.wait_primary().await.unwrap();
    next_event(&mut low_ev, |e| matches!(e, Event::Role { primary: false, election_id: Some(9) })).await;
    assert!(!low.role().primary);
    high.set_pipeline(&r.info, &Bmv2Json(vec![]), None).await.unwrap();
    let e = dmac_1_drop(&r.info);
    let denied = low.write(vec![insert(e.clone())]).await.unwrap_err();
    assert_eq!(denied.code(), Some(Code::PermissionDenied));
    // Same election id twice is refused.
    let started = std::time::Instant::now();
    let clash = Session::connect(common::config(&r.addr, 9)).await.unwrap_err();
    assert!(matches!(clash, SessionError::Refused { .. }), "{clash}");
    assert!(started.elapsed() < Duration::from_secs(2), "refused fast, not by deadline");
    drop(high);
    next_event(&mut low_ev, |e| matches!(e, Event::Role { primary: true, .. })).await;
    low.write(vec![insert(e)]).await.unwrap();
    assert_eq!(r.switch.primary_election_id(), Some(5));
}

/// A backup raises its election id on the open stream (an elected
/// standby controller) and becomes primary without reconnecting; the old
/// primary hears it and its writes are refused (fencing).
#[tokio::test]
async fn a_backup_takes_over_by_raising_its_election_id_in_place() {
    let r = common::rig(SwitchOptions::default()).await;
    let old = Session::connect(common::config(&r.addr, 5)).await.unwrap();
    old.wait_primary().await.unwrap();
    let mut old_ev = old.subscribe().unwrap();
    let mut new = Session::connect(common::config(&r.addr, 3)).await.unwrap();
    assert!(!new.role().primary);
    new.set_election_id(7).unwrap();
    new.wait_primary().await.unwrap();
    assert_eq!(new.role().election_id, Some(7));
    new.set_pipeline(&r.info, &Bmv2Json(vec![]), None).await.unwrap();
    next_event(&mut old_ev, |e| matches!(e, Event::Role { primary: false, election_id: Some(7) })).await;
    let e = dmac_1_drop(&r.info);
    let denied = old.write(vec![insert(e.clone())]).await.unwrap_err();
    assert_eq!(denied.code(), Some(Code::PermissionDenied));
    new.write(vec![insert(e)]).await.unwrap();
    assert_eq!(r.switch.primary_election_id(), Some(7));
    // Stepping down: back to a low id, and the other is primary again.
    new.set_election_id(2).unwrap();
    next_event(&mut old_ev, |e| matches!(e, Event::Role { primary: true, election_id: Some(5) })).await;
}

#[tokio::test]
async fn silent_server_hits_deadlines() {
    // Accepts TCP connections and never says a word.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut keep = vec![];
        while let Ok((s, _)) = listener.accept().await {
            keep.push(s);
        }
    });
    let mut cfg = common::config(&format!("http://{addr}"), 1);
    cfg.connect_timeout = Duration::from_millis(200);
    cfg.rpc_timeout = Duration::from_millis(300);
    cfg.connect_attempts = 2;
    let started = std::time::Instant::now();
    let e = Session::connect(cfg).await.unwrap_err();
    assert!(matches!(e, SessionError::Connect { attempts: 2, .. } | SessionError::Deadline { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_secs(3));
    held.abort();
    // Nobody listening at all: Connect error after the attempts.
    let mut cfg = common::config("http://127.0.0.1:1", 1);
    cfg.connect_attempts = 2;
    assert!(matches!(Session::connect(cfg).await, Err(SessionError::Connect { .. })));
}

/// Arbitrates like a real switch, then never answers anything else.
struct Stall(metaroce_p4rt::server::Service);

#[tonic::async_trait]
impl p4::p4_runtime_server::P4Runtime for Stall {
    async fn write(
        &self,
        _: tonic::Request<p4::WriteRequest>,
    ) -> Result<tonic::Response<p4::WriteResponse>, tonic::Status> {
        std::future::pending().await
    }
    type ReadStream = <metaroce_p4rt::server::Service as p4::p4_runtime_server::P4Runtime>::ReadStream;
    async fn read(
        &self,
        _: tonic::Request<p4::ReadRequest>,
    ) -> Result<tonic::Response<Self::ReadStream>, tonic::Status> {
        std::future::pending().await
    }
    async fn set_forwarding_pipeline_config(
        &self,
        _: tonic::Request<p4::SetForwardingPipelineConfigRequest>,
    ) -> Result<tonic::Response<p4::SetForwardingPipelineConfigResponse>, tonic::Status> {
        std::future::pending().await
    }
    async fn get_forwarding_pipeline_config(
        &self,
        _: tonic::Request<p4::GetForwardingPipelineConfigRequest>,
    ) -> Result<tonic::Response<p4::GetForwardingPipelineConfigResponse>, tonic::Status> {
        std::future::pending().await
    }
    type StreamChannelStream =
        <metaroce_p4rt::server::Service as p4::p4_runtime_server::P4Runtime>::StreamChannelStream;
    async fn stream_channel(
        &self,
        r: tonic::Request<tonic::Streaming<p4::StreamMessageRequest>>,
    ) -> Result<tonic::Response<Self::StreamChannelStream>, tonic::Status> {
        p4::p4_runtime_server::P4Runtime::stream_channel(&self.0, r).await
    }
    async fn capabilities(
        &self,
        _: tonic::Request<p4::CapabilitiesRequest>,
    ) -> Result<tonic::Response<p4::CapabilitiesResponse>, tonic::Status> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn every_rpc_has_a_deadline() {
    use p4::p4_runtime_server::P4RuntimeServer;
    let switch = metaroce_p4rt::server::Switch::new(SwitchOptions::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(P4RuntimeServer::new(Stall(switch.handler())))
            .serve_with_incoming(incoming),
    );
    let mut cfg = common::config(&format!("http://{addr}"), 1);
    cfg.rpc_timeout = Duration::from_millis(200);
    let s = Session::connect(cfg).await.unwrap();
    s.wait_primary().await.unwrap();
    let info = common::info();
    let deadline = |e: SessionError| assert!(matches!(e, SessionError::Deadline { .. }), "{e}");
    deadline(s.set_pipeline(&info, &Bmv2Json(vec![]), None).await.unwrap_err());
    deadline(s.write(vec![]).await.unwrap_err());
    deadline(s.read(vec![p4::TableEntry::default().into()]).await.unwrap_err());
    deadline(s.capabilities().await.unwrap_err());
    // The stream is still up: events still flow.
    let mut ev = s.subscribe().unwrap();
    assert!(switch.packet_in(vec![7], vec![]));
    next_event(&mut ev, |e| matches!(e, Event::PacketIn(_))).await;
}

#[tokio::test]
async fn switch_restart_restores_pipeline_and_digests() {
    let r = common::rig(SwitchOptions::default()).await;
    let s = common::primary(&r).await;
    let mut ev = s.subscribe().unwrap();
    let cfg = DigestConfig { max_timeout_ns: 0, max_list_size: 1, ack_timeout_ns: 10_000_000_000 };
    s.configure_digest(r.info.digest_entry("congestion_digest", cfg).unwrap()).await.unwrap();
    // The switch goes away and a fresh one (no pipeline, no digest
    // config) comes up on the same address.
    let addr: std::net::SocketAddr = r.addr.trim_start_matches("http://").parse().unwrap();
    r.switch.drop_streams();
    r.task.abort();
    next_event(&mut ev, |e| matches!(e, Event::Disconnected { .. })).await;
    let fresh = metaroce_p4rt::server::Switch::new(SwitchOptions::default());
    let (_, _task) = loop {
        match fresh.bind(addr, std::future::pending()).await {
            Ok(x) => break x,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    next_event(&mut ev, |e| matches!(e, Event::Role { primary: true, .. })).await;
    let id = r.info.digests.id_of("congestion_digest").unwrap();
    let data = p4::P4Data { data: Some(p4::p4_data::Data::Bitstring(vec![4])) };
    tokio::time::timeout(Duration::from_secs(5), async {
        while !fresh.emit_digest(id, data.clone()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("digest configured again on the fresh switch");
    assert_eq!(fresh.pipeline_pushes(), 1);
    next_event(&mut ev, |e| matches!(e, Event::Digest(d) if d.data == vec![data.clone()])).await;
}

#[tokio::test]
async fn in_memory_transport_works_like_tcp() {
    let switch = metaroce_p4rt::server::Switch::new(SwitchOptions::default());
    let info = common::info();
    let s = Session::connect_with(common::config("in-memory", 3), switch.in_memory_channel()).await.unwrap();
    s.wait_primary().await.unwrap();
    s.set_pipeline(&info, &Bmv2Json(vec![]), None).await.unwrap();
    let mut ev = s.subscribe().unwrap();
    let e = dmac_1_drop(&info);
    s.write(vec![insert(e)]).await.unwrap();
    assert_eq!(s.read(vec![p4::TableEntry::default().into()]).await.unwrap().len(), 1);
    // A dropped stream reconnects over a fresh in-memory pipe.
    switch.drop_streams();
    next_event(&mut ev, |e| matches!(e, Event::Reconnected)).await;
    next_event(&mut ev, |e| matches!(e, Event::Role { primary: true, .. })).await;
    assert!(switch.packet_in(vec![1], vec![]));
    next_event(&mut ev, |e| matches!(e, Event::PacketIn(_))).await;
}

#[tokio::test]
async fn roles_arbitrate_separately() {
    let r = common::rig(SwitchOptions::default()).await;
    let full = Session::connect(common::config(&r.addr, 5)).await.unwrap();
    full.wait_primary().await.unwrap();
    let mut cfg = common::config(&r.addr, 5);
    cfg.role = "telemetry".into();
    let reader = Session::connect(cfg).await.unwrap();
    reader.wait_primary().await.unwrap();
    assert!(full.role().primary && reader.role().primary, "one primary per role");
    // The same election id may be used once per role, not twice in one.
    let mut again = common::config(&r.addr, 5);
    again.role = "telemetry".into();
    assert!(matches!(Session::connect(again).await, Err(SessionError::Refused { .. })));
}

/// The entry the role tests write: `dmac` 1 → drop.
fn dmac_1_drop(info: &metaroce_p4rt::P4Info) -> p4::TableEntry {
    info.table_entry("dmac").unwrap().exact("dst_addr", 1u64).unwrap().action("drop", &[]).unwrap().build()
}
