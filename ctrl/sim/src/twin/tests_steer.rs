//! The twin's steer tables and large-flow detector through a real
//! P4Runtime session: the in-process server takes the entries as BMv2
//! would (the controller side refuses what leaves a route's group), and
//! a large-flow digest reaches the client and decodes into the typed
//! [`metaroce_pipeline::LargeFlowDigest`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;
use std::time::Duration;

use metaroce_p4rt::entity::DigestConfig;
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::Event;
use metaroce_pipeline::{check_steer_in, Counter, Entry, FlowKey, RouteTarget, SteerError};

use super::tests::{nhop, rig, roce, route, wire, Rig};
use super::Verdict;

const A: FlowKey =
    FlowKey { src: Ipv4Addr::new(10, 0, 1, 1), dst: Ipv4Addr::new(10, 0, 2, 1), sport: 49152, qp: 0x11 };

/// Next hops 1-3 on ports 1-3; 10.0.2.0/24 is group entry 1 -> selector
/// group 10 {next hop 2}; port 1 is an edge port.
fn base() -> Vec<Entry> {
    vec![
        Entry::Config { switch_id: 7, flowlet_timeout_us: 50_000 },
        Entry::EdgePort { port: 1 },
        nhop(1, 1),
        nhop(2, 2),
        nhop(3, 3),
        Entry::Member { id: 2, nhop: 2 },
        Entry::Group { id: 10, members: vec![(2, 1)] },
        Entry::GroupEntry { id: 1, group: 10 },
        route([10, 0, 2, 0], 24, RouteTarget::Group(1)),
    ]
}

async fn setup(extra: &[Entry]) -> Rig {
    let r = rig().await;
    for e in base().iter().chain(extra) {
        r.insert(std::slice::from_ref(e)).await;
    }
    r
}

fn send(r: &mut Rig, sport: u16, now: u64) -> u16 {
    let mut h = wire(&roce([10, 0, 2, 1], sport));
    match r.twin.ingress(1, &mut h, now).unwrap() {
        Verdict::Forward { port } => port as u16,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_server_takes_steer_entries_as_bmv2_does() {
    let r = setup(&[]).await;
    let outside = Entry::SteerFlow { flow: A, nhop_id: 3, port: 3 };
    let pair = Entry::SteerPair { src: A.src, dst: A.dst, nhop_id: 2, port: 2 };
    let cfg = Entry::LargeFlowConfig { window_us: 1000, threshold_bytes: 4000 };
    // BMv2 knows no routes: a next hop outside the group is written...
    r.insert(&[outside.clone(), pair.clone(), cfg.clone()]).await;
    let installed = r.pipeline.read_installed(&r.session).await.unwrap();
    assert!(installed.unreadable.is_empty(), "{:?}", installed.unreadable);
    for e in [&outside, &pair, &cfg] {
        assert_eq!(installed.entries.get(&e.key()), Some(e), "{e:?} reads back");
    }
    // ...and the controller side refuses it, naming it.
    let err = check_steer_in(&installed.entries, &outside).unwrap_err();
    assert!(matches!(err, SteerError::NotAMember { nhop_id: 3, .. }), "{err}");
    assert!(err.to_string().contains("steer_flow 10.0.1.1:49152 -> 10.0.2.1"), "{err}");
    assert_eq!(check_steer_in(&installed.entries, &pair), Ok(()));
    // A second insert of the same key, a modify of a missing one: as BMv2.
    let dup = r.pipeline.update(p4::update::Type::Insert, &pair).unwrap();
    let e = r.session.write(vec![dup]).await.unwrap_err();
    assert!(format!("{e:?}").contains("AlreadyExists"), "{e:?}");
    let other = Entry::SteerPair { src: A.src, dst: Ipv4Addr::new(10, 0, 2, 9), nhop_id: 2, port: 2 };
    let missing = r.pipeline.update(p4::update::Type::Modify, &other).unwrap();
    let e = r.session.write(vec![missing]).await.unwrap_err();
    assert!(format!("{e:?}").contains("NotFound"), "{e:?}");
}

#[tokio::test]
async fn the_pair_table_is_full_at_its_size() {
    let r = setup(&[]).await;
    let pair =
        |i: u32| Entry::SteerPair { src: A.src, dst: Ipv4Addr::from(0x0a00_0000 + i), nhop_id: 2, port: 2 };
    let size = metaroce_pipeline::names::STEER_PAIR_TABLE_SIZE;
    let ups = (0..size).map(|i| r.pipeline.update(p4::update::Type::Insert, &pair(i)).unwrap()).collect();
    r.session.write(ups).await.unwrap();
    let one_more = r.pipeline.update(p4::update::Type::Insert, &pair(size)).unwrap();
    let e = r.session.write(vec![one_more]).await.unwrap_err();
    assert!(format!("{e:?}").contains("ResourceExhausted"), "{e:?}");
}

#[tokio::test]
async fn a_steer_entry_moves_a_flow_at_its_next_flowlet_only() {
    let mut r = setup(&[]).await;
    assert_eq!(send(&mut r, 49152, 1_000_000), 2);
    r.insert(&[Entry::SteerFlow { flow: A, nhop_id: 3, port: 3 }]).await;
    assert_eq!(send(&mut r, 49152, 1_010_000), 2, "the running flowlet stays");
    assert_eq!(send(&mut r, 49152, 1_100_000), 3, "after the gap: the entry");
    assert_eq!(r.counter(Counter::Steered, 3).await, 1);
    // Port 3 down: the running, steered flowlet leaves it at once.
    r.insert(&[Entry::PortDown { port: 3 }]).await;
    assert_eq!(send(&mut r, 49152, 1_110_000), 2);
    assert_eq!(r.counter(Counter::NewFlowlets, 2).await, 2);
}

#[tokio::test]
async fn a_large_flow_digest_decodes_into_the_typed_struct() {
    let mut r = setup(&[Entry::LargeFlowConfig { window_us: 10_000, threshold_bytes: 300 }]).await;
    let sub = r.pipeline.large_flow_digest_entry(DigestConfig { max_list_size: 1, ..Default::default() });
    r.session.configure_digest(sub.unwrap()).await.unwrap();
    // 72 IPv4 bytes a packet: 5 in the window (360 bytes; the 5th crosses
    // 300, an early digest), then one after it (the close's digest).
    for i in 0..5 {
        assert_eq!(send(&mut r, 49152, 1_000_000 + i * 1000), 2);
    }
    assert_eq!(send(&mut r, 49152, 1_012_000), 2);
    let mut digests = Vec::new();
    while digests.len() < 2 {
        let ev = tokio::time::timeout(Duration::from_secs(5), r.events.recv()).await.unwrap();
        if let Some(Event::Digest(list)) = ev {
            assert!(r.pipeline.is_large_flow_digest(&list) && !r.pipeline.is_queue_digest(&list));
            let got = r.pipeline.decode_large_flows(&list);
            assert!(got.malformed.is_empty(), "{:?}", got.malformed);
            digests.extend(got.flows);
        }
    }
    let [early, d] = digests[..] else { panic!("{digests:?}") };
    assert_eq!((early.switch_id, early.flow, early.egress_port), (7, A, 2));
    assert_eq!(
        (early.bytes, early.window_us, early.collision, early.timestamp),
        (360, 4_000, false, 1_004_000)
    );
    assert_eq!((d.switch_id, d.flow, d.egress_port), (7, A, 2));
    assert_eq!((d.bytes, d.window_us, d.collision, d.timestamp), (360, 12_000, false, 1_012_000));
    let slot =
        super::hash::flow_hash(&roce([10, 0, 2, 1], 49152)) & (metaroce_pipeline::names::FLOW_SLOTS - 1);
    assert_eq!(u32::from(d.slot), slot);
    assert_eq!(r.register(metaroce_pipeline::names::WINDOW_BYTES, i64::from(d.slot)).await, 72);
}
