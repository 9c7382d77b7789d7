//! The twin's own tests: the layers one by one, driven through a real
//! P4Runtime session to the in-process server (as a controller would).
//! The packet vectors (`tests/p4/cases`) are run by `metaroce-p4-vectors`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::Ipv4Addr;
use std::path::Path;

use metaroce_p4rt::entity::DigestConfig;
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::server::{Switch, SwitchOptions};
use metaroce_p4rt::session::Bmv2Json;
use metaroce_p4rt::{codec, Event, P4Info, Session, SessionConfig};
use metaroce_pipeline::{Counter, Entry, Pipeline, PipelineError, RouteTarget};
use tokio::sync::mpsc::UnboundedReceiver;

use super::*;

fn build_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build")
}

fn pipeline() -> Pipeline {
    let b = build_dir();
    Pipeline::load(&b.join("main.p4info.txtpb"), &b.join("main.json")).unwrap()
}

const MAC: [u8; 6] = [2, 0, 0, 0, 0, 7];

pub(super) struct Rig {
    pub twin: Twin,
    pub session: Session,
    pub pipeline: Pipeline,
    pub events: UnboundedReceiver<Event>,
}

pub(super) async fn rig() -> Rig {
    let pipeline = pipeline();
    let sw = Switch::new(SwitchOptions::default());
    let session = Session::connect_with(SessionConfig::new("twin", 1), sw.in_memory_channel()).await.unwrap();
    session.wait_primary().await.unwrap();
    session.set_pipeline(pipeline.info(), &Bmv2Json(pipeline.device_config().to_vec()), None).await.unwrap();
    let events = session.subscribe().unwrap();
    let twin = Twin::new(&pipeline, sw).unwrap();
    Rig { twin, session, pipeline, events }
}

impl Rig {
    pub async fn write(&self, kind: p4::update::Type, entries: &[Entry]) {
        let ups = entries.iter().map(|e| self.pipeline.update(kind, e).unwrap()).collect();
        self.session.write(ups).await.unwrap();
    }

    pub async fn insert(&self, entries: &[Entry]) {
        self.write(p4::update::Type::Insert, entries).await;
    }

    pub async fn counter(&self, c: Counter, index: usize) -> i64 {
        let got = self.session.read(vec![self.pipeline.counter_read(c).unwrap()]).await.unwrap();
        let cells: Vec<(i64, i64)> = got
            .into_iter()
            .filter_map(|e| match e.entity? {
                p4::entity::Entity::CounterEntry(c) => Some((c.index?.index, c.data?.packet_count)),
                _ => None,
            })
            .collect();
        cells.iter().find(|(i, _)| *i == index as i64).map(|(_, n)| *n).unwrap_or(0)
    }

    pub async fn register(&self, name: &str, index: i64) -> u128 {
        self.session.read_register(self.pipeline.info(), name, Some(index)).await.unwrap()[0].1
    }

    /// The next `n` threshold digests as `(port, depth, seq, congested)`.
    async fn digests(&mut self, n: usize) -> Vec<(u128, u128, u128, u128)> {
        let mut out = vec![];
        while out.len() < n {
            let ev =
                tokio::time::timeout(std::time::Duration::from_secs(5), self.events.recv()).await.unwrap();
            if let Some(Event::Digest(list)) = ev {
                for d in list.data {
                    let Some(p4::p4_data::Data::Struct(s)) = d.data else { panic!("not a struct") };
                    let v: Vec<u128> = s
                        .members
                        .iter()
                        .map(|m| match &m.data {
                            Some(p4::p4_data::Data::Bitstring(b)) => codec::decode_u128(b, 64).unwrap(),
                            _ => panic!("not a bitstring"),
                        })
                        .collect();
                    out.push((v[1], v[2], v[4], v[5]));
                }
            }
        }
        out
    }
}

pub(super) fn nhop(id: u16, port: u16) -> Entry {
    Entry::Nhop { id, port, src_mac: MAC, dst_mac: [2, 0, 0, 0, 0, port as u8] }
}

pub(super) fn route(prefix: [u8; 4], len: u8, target: RouteTarget) -> Entry {
    Entry::Route { prefix: Ipv4Addr::from(prefix), len, target }
}

/// A RoCEv2 packet 10.0.1.1 -> `dst`, UDP source port `sport`.
pub(super) fn roce(dst: [u8; 4], sport: u16) -> Headers {
    let payload = vec![0xab; 32];
    let ipv4 = Ipv4 {
        version: 4,
        ihl: 5,
        total_len: 20 + 8 + 12 + 32,
        ttl: 64,
        protocol: 17,
        src: u32::from_be_bytes([10, 0, 1, 1]),
        dst: u32::from_be_bytes(dst),
        ..Default::default()
    };
    Headers {
        eth: Ethernet { dst: MAC, src: [2, 0, 0, 0, 1, 1], ether_type: 0x0800 },
        ipv4: Some(ipv4),
        l4: Some(L4::Udp(Udp { src_port: sport, dst_port: 4791, len: 8 + 12 + 32, checksum: 0 })),
        int: None,
        bth: Some(Bth { head: 0x0400_ffff, reserved0: 0, dest_qp: 0x11, psn_word: 9 }),
        aeth: None,
        payload,
        meta: Bridged::default(),
    }
}

/// Parses what `deparse` wrote, so the checksum field is the computed one.
pub(super) fn wire(h: &Headers) -> Headers {
    Headers::parse(&h.deparse()).unwrap()
}

#[test]
fn parse_deparse_round_trip_and_parser_drops() {
    let mut h = roce([10, 0, 2, 1], 49152);
    if let Some(ip) = h.ipv4.as_mut() {
        ip.dscp = 27;
        ip.total_len += 16 + 48;
    }
    let hop = |n| IntHop {
        node_id: n,
        ingress_port: 1,
        egress_port: 2,
        hop_latency: 30,
        occupancy: 2,
        egress_ts: 4000,
        queue_id: 0,
    };
    h.int = Some(Int {
        shim: IntShim { int_type: 1, len: 15, original_dscp: 26, ..Default::default() },
        md: IntMd { version: 2, hop_ml: 6, remaining_hops: 2, instructions: 0xF400, ..Default::default() },
        hops: vec![hop(9), hop(5)],
    });
    let bytes = h.deparse();
    assert_eq!(bytes.len(), 14 + 20 + 8 + 16 + 48 + 12 + 32);
    let back = Headers::parse(&bytes).unwrap();
    assert_eq!(back.deparse(), bytes);
    assert_eq!(back.int.as_ref().map(|i| i.hops.len()), Some(2));
    assert_eq!(back.bth.map(|b| b.dest_qp), Some(0x11));

    // Cut inside the stack, the BTH, UDP: parser error.
    for cut in [14 + 20 + 8 + 16 + 30, 14 + 20 + 8 + 16 + 48 + 5, 14 + 20 + 4, 10] {
        assert_eq!(Headers::parse(&bytes[..cut]), Err(DropReason::ParserError), "cut at {cut}");
    }
    // A shim length that is not whole hops, an unknown INT type: INT malformed.
    let mut bad = bytes.clone();
    bad[14 + 20 + 8 + 1] = 10;
    assert_eq!(Headers::parse(&bad), Err(DropReason::IntMalformed));
    let mut bad = bytes.clone();
    bad[14 + 20 + 8] = 0x20;
    assert_eq!(Headers::parse(&bad), Err(DropReason::IntMalformed));
    // A wrong checksum, options, version 6: IPv4 invalid.
    let mut bad = bytes.clone();
    bad[14 + 10] ^= 1;
    assert_eq!(Headers::parse(&bad), Err(DropReason::Ipv4Invalid));
    for first in [0x46u8, 0x65] {
        let mut ip = back.ipv4.unwrap();
        ip.version = first >> 4;
        ip.ihl = first & 0xf;
        let mut bad = bytes.clone();
        bad[14..34].copy_from_slice(&ip.bytes(ip.computed_checksum()));
        assert_eq!(Headers::parse(&bad), Err(DropReason::Ipv4Invalid), "first byte {first:#x}");
    }
}

#[tokio::test]
async fn lpm_next_hop_ttl_and_drop_reasons() {
    let mut r = rig().await;
    r.insert(&[Entry::Config { switch_id: 7, flowlet_timeout_us: 50_000 }]).await;
    r.insert(&[nhop(1, 1), nhop(2, 2)]).await;
    r.insert(&[
        route([10, 0, 0, 0], 8, RouteTarget::Nhop(1)),
        route([10, 0, 2, 0], 24, RouteTarget::Nhop(2)),
        route([10, 0, 9, 0], 24, RouteTarget::Nhop(9)),
    ])
    .await;
    let mut h = wire(&roce([10, 0, 2, 1], 1));
    assert_eq!(r.twin.ingress(3, &mut h, 10).unwrap(), Verdict::Forward { port: 2 });
    assert_eq!(h.ipv4.map(|ip| ip.ttl), Some(63));
    assert_eq!((h.eth.src, h.eth.dst), (MAC, [2, 0, 0, 0, 0, 2]));
    assert_eq!((h.meta.ingress_port, h.meta.ingress_ts, h.meta.switch_id), (3, 10, 7));
    let mut h = wire(&roce([10, 0, 3, 1], 1));
    assert_eq!(r.twin.ingress(3, &mut h, 10).unwrap(), Verdict::Forward { port: 1 });

    let mut h = wire(&roce([11, 0, 0, 1], 1));
    assert_eq!(r.twin.ingress(3, &mut h, 10).unwrap(), Verdict::Drop(DropReason::NoRoute));
    let mut h = wire(&roce([10, 0, 9, 1], 1));
    assert_eq!(r.twin.ingress(3, &mut h, 10).unwrap(), Verdict::Drop(DropReason::NoNextHop));
    let mut h = roce([10, 0, 2, 1], 1);
    h.ipv4.as_mut().unwrap().ttl = 1;
    assert_eq!(r.twin.ingress(3, &mut h, 10).unwrap(), Verdict::Drop(DropReason::TtlExpired));
    // Bytes that do not parse are counted under their reason too.
    assert!(r.twin.process(3, &[0u8; 8], 20).unwrap().is_empty());
    for (reason, n) in [(1, 1), (2, 1), (3, 1), (4, 1), (5, 0)] {
        assert_eq!(r.counter(Counter::DropReasons, reason).await, n, "reason {reason}");
    }
    assert!(matches!(r.twin.ingress(512, &mut h, 0), Err(TwinError::BadPort { port: 512 })));
}

async fn two_way_group(r: &Rig) {
    r.insert(&[Entry::Config { switch_id: 7, flowlet_timeout_us: 50_000 }, nhop(2, 2), nhop(3, 3)]).await;
    r.insert(&[Entry::Member { id: 2, nhop: 2 }, Entry::Member { id: 3, nhop: 3 }]).await;
    r.insert(&[
        Entry::Group { id: 10, members: vec![(2, 1), (3, 1)] },
        Entry::GroupEntry { id: 10, group: 10 },
    ])
    .await;
    r.insert(&[route([10, 0, 2, 0], 24, RouteTarget::Group(10))]).await;
}

fn port_of(v: Verdict) -> u16 {
    match v {
        Verdict::Forward { port } => port as u16,
        other => panic!("not forwarded: {other:?}"),
    }
}

#[tokio::test]
async fn a_running_flowlet_survives_a_group_rewrite_and_moves_after_the_gap() {
    let mut r = rig().await;
    two_way_group(&r).await;
    let flow = wire(&roce([10, 0, 2, 1], 49152));
    let first = port_of(r.twin.ingress(1, &mut flow.clone(), 0).unwrap());
    let other = if first == 2 { 3 } else { 2 };
    // Make-before-break: a new group with only the other next hop, the
    // route pointed at it, the old group deleted.
    r.insert(&[
        Entry::Group { id: 11, members: vec![(u32::from(other), 1)] },
        Entry::GroupEntry { id: 11, group: 11 },
    ])
    .await;
    r.write(p4::update::Type::Modify, &[route([10, 0, 2, 0], 24, RouteTarget::Group(11))]).await;
    r.write(p4::update::Type::Delete, &[Entry::GroupEntry { id: 10, group: 10 }]).await;
    r.write(p4::update::Type::Delete, &[Entry::Group { id: 10, members: vec![] }]).await;
    // Packets 40 ms apart keep the flowlet running for 400 ms.
    for t in 1..=10u64 {
        assert_eq!(port_of(r.twin.ingress(1, &mut flow.clone(), t * 40_000).unwrap()), first, "t = {t}");
    }
    // A gap longer than the timeout starts a new flowlet, in the new group.
    assert_eq!(port_of(r.twin.ingress(1, &mut flow.clone(), 400_000 + 50_001).unwrap()), other);
    assert_eq!(r.counter(Counter::NewFlowlets, usize::from(first)).await, 1);
    assert_eq!(r.counter(Counter::NewFlowlets, usize::from(other)).await, 1);
}

#[tokio::test]
async fn port_down_moves_a_pinned_flowlet_at_once() {
    let mut r = rig().await;
    two_way_group(&r).await;
    let flow = wire(&roce([10, 0, 2, 1], 7));
    let first = port_of(r.twin.ingress(1, &mut flow.clone(), 0).unwrap());
    let other = if first == 2 { 3 } else { 2 };
    let member = |p: u16| u32::from(p);
    r.write(p4::update::Type::Modify, &[Entry::Group { id: 10, members: vec![(member(other), 1)] }]).await;
    assert_eq!(port_of(r.twin.ingress(1, &mut flow.clone(), 100).unwrap()), first, "pinned");
    r.insert(&[Entry::PortDown { port: first }]).await;
    assert_eq!(port_of(r.twin.ingress(1, &mut flow.clone(), 200).unwrap()), other, "moved");
    assert_eq!(port_of(r.twin.ingress(1, &mut flow.clone(), 300).unwrap()), other, "pinned again");
}

#[tokio::test]
async fn weights_split_flows_in_proportion() {
    let mut r = rig().await;
    two_way_group(&r).await;
    r.write(p4::update::Type::Modify, &[Entry::Group { id: 10, members: vec![(2, 3), (3, 1)] }]).await;
    let mut on2 = 0;
    for sport in 0..4000u16 {
        let mut h = roce([10, 0, 2, 1], 10_000 + sport);
        if port_of(r.twin.ingress(1, &mut h, u64::from(sport)).unwrap()) == 2 {
            on2 += 1;
        }
    }
    assert!((2800..=3200).contains(&on2), "{on2} of 4000 flows on the weight-3 member");
}

#[tokio::test]
async fn threshold_crossings_raise_rate_limited_digests() {
    let mut r = rig().await;
    r.insert(&[Entry::Config { switch_id: 7, flowlet_timeout_us: 50_000 }, nhop(2, 2)]).await;
    r.insert(&[route([10, 0, 2, 0], 24, RouteTarget::Nhop(2))]).await;
    r.insert(&[
        Entry::EgressPort { port: 2, edge: false, mtu: 0, queue_high: 10, queue_low: 2, ecn_threshold: 5 },
        Entry::EgressConfig { digest_interval_us: 1000, report_period_us: 1_000_000, latency_shift: 8 },
        Entry::CloneSession { id: metaroce_pipeline::names::DIGEST_SESSION, port: 1 },
    ])
    .await;
    let sub = DigestConfig { max_timeout_ns: 0, max_list_size: 1, ack_timeout_ns: 1_000_000 };
    r.session.configure_digest(r.pipeline.digest_entry(sub).unwrap()).await.unwrap();
    let mut send = |depth: u32, at: u64| {
        let mut h = wire(&roce([10, 0, 2, 1], 1));
        h.ipv4.as_mut().unwrap().ecn = 2;
        assert_eq!(r.twin.ingress(1, &mut h, at).unwrap(), Verdict::Forward { port: 2 });
        assert!(r.twin.egress(2, &mut h, depth, at).unwrap().is_empty());
        h.ipv4.unwrap().ecn
    };
    assert_eq!(send(4, 100), 2, "below the ECN threshold");
    assert_eq!(send(12, 200), 3, "CE at and above it");
    // Down through queue_low 400 us later: held back by the 1 ms interval,
    // and not recorded, so a packet after the interval raises it.
    send(1, 600);
    send(1, 1300);
    send(11, 1400); // up again, held back
    let got = r.digests(2).await;
    assert_eq!(got, vec![(2, 12, 0, 1), (2, 1, 1, 0)]);
    assert_eq!(r.register(metaroce_pipeline::names::DIGEST_SEQ, 0).await, 2, "two digests, no more");
    assert_eq!(r.register(metaroce_pipeline::names::PORT_CONGESTED, 2).await, 0);
    assert_eq!(r.register(metaroce_pipeline::names::PORT_MAX_DEPTH, 2).await, 12);
    assert_eq!(r.counter(Counter::EcnMarks, 2).await, 2);
}

#[tokio::test]
async fn queues_drain_at_their_rate_in_virtual_time() {
    let mut r = rig().await;
    r.insert(&[nhop(2, 2)]).await;
    r.insert(&[route([10, 0, 2, 0], 24, RouteTarget::Nhop(2))]).await;
    r.twin.set_queue(2, Queue { rate_pps: Some(1000), depth_pkts: Some(3) }).unwrap();
    let bytes = roce([10, 0, 2, 1], 1).deparse();
    let mut left = vec![];
    for _ in 0..5 {
        left.extend(r.twin.process(1, &bytes, 0).unwrap());
    }
    assert_eq!(left.len(), 1, "the first leaves at once");
    assert_eq!(r.twin.tail_drops(), 1, "three wait, the fifth finds the queue full");
    assert_eq!(r.twin.next_departure_us(), Some(1000));
    left.extend(r.twin.advance(10_000).unwrap());
    let times: Vec<u64> = left
        .iter()
        .map(|o| match o {
            Output::Packet { port: 2, at_us, .. } => *at_us,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(times, vec![0, 1000, 2000, 3000]);
    let max = r.register(metaroce_pipeline::names::PORT_MAX_DEPTH, 2).await;
    assert_eq!(max, 2, "the second left two behind it");
    assert!(matches!(
        r.twin.set_queue(2, Queue { rate_pps: Some(0), depth_pkts: None }),
        Err(TwinError::BadQueue { .. })
    ));
    // A frame from the CPU port leaves on its packet_out port, untouched
    // by routing (TTL 1, not decremented).
    let mut h = roce([10, 0, 9, 9], 1);
    h.ipv4.as_mut().unwrap().ttl = 1;
    let mut frame = vec![0, 3, 0, 0];
    frame.extend(h.deparse());
    let out = r.twin.process(CPU_PORT, &frame, 20_000).unwrap();
    assert_eq!(out, vec![Output::Packet { port: 3, bytes: h.deparse(), at_us: 20_000 }]);
}

#[tokio::test]
async fn a_switch_must_run_the_twins_program() {
    let p = pipeline();
    let sw = Switch::new(SwitchOptions::default());
    let mut twin = Twin::new(&p, sw.clone()).unwrap();
    let mut h = roce([10, 0, 2, 1], 1);
    assert!(matches!(twin.ingress(1, &mut h, 0), Err(TwinError::NoPipeline { device_id: 1 })));
    assert!(matches!(Twin::new(&p, sw.clone()), Err(TwinError::PacketOutsTaken { .. })));
    twin.install_pipeline().unwrap();
    assert_eq!(twin.ingress(1, &mut h, 0).unwrap(), Verdict::Drop(DropReason::NoRoute));
    // Another program on the switch: refused, not misread.
    let mut raw = p.info().raw().clone();
    raw.tables.retain(|t| t.preamble.as_ref().is_some_and(|p| !p.name.ends_with("port_down")));
    let config = p4::ForwardingPipelineConfig { p4info: Some(raw.clone()), ..Default::default() };
    sw.commit_pipeline(config).unwrap();
    assert!(matches!(twin.ingress(1, &mut h, 0), Err(TwinError::OtherPipeline { .. })));
    // ... and a P4Info without what the twin needs fails at start-up, by name.
    let err = Pipeline::new(P4Info::new(raw).unwrap(), vec![]).unwrap_err();
    assert!(matches!(&err, PipelineError::Mismatch { .. }) && err.to_string().contains("port_down"), "{err}");
    let mut raw = p.info().raw().clone();
    raw.registers.retain(|r| r.preamble.as_ref().is_some_and(|p| !p.name.ends_with("flowlet_sig")));
    let err = Pipeline::new(P4Info::new(raw).unwrap(), vec![]).unwrap_err();
    assert!(err.to_string().contains("MetaroceIngress.routing.flowlet_sig"), "{err}");
}

/// A valid RoCEv2 frame with two INT hops.
fn int_frame() -> Vec<u8> {
    let mut h = roce([10, 0, 2, 1], 49152);
    h.ipv4.as_mut().unwrap().dscp = 27;
    h.ipv4.as_mut().unwrap().total_len += 16 + 48;
    let hop = IntHop { node_id: 9, hop_latency: 20, ..Default::default() };
    h.int = Some(Int {
        shim: IntShim { int_type: 1, len: 15, original_dscp: 26, ..Default::default() },
        md: IntMd { version: 2, hop_ml: 6, remaining_hops: 2, instructions: 0xF400, ..Default::default() },
        hops: vec![hop, hop],
    });
    h.deparse()
}

#[test]
fn the_parser_never_panics_and_deparses_what_it_accepts_byte_for_byte() {
    let base = int_frame();
    let mut rng = crate::Rng::new(7);
    let mut accepted = 0;
    for _ in 0..20_000 {
        let mut b = base.clone();
        for _ in 0..=rng.below(3) {
            let i = rng.below(b.len() as u64) as usize;
            b[i] = rng.next_u64() as u8;
        }
        if rng.below(4) == 0 {
            b.truncate(rng.below(b.len() as u64) as usize);
        }
        // Keep the IPv4 checksum right half of the time, so mutations get
        // past it into the layers after.
        if b.len() >= 34 && rng.below(2) == 0 {
            b[24..26].copy_from_slice(&[0, 0]);
            let c = headers::csum16(&b[14..34]);
            b[24..26].copy_from_slice(&c.to_be_bytes());
        }
        if let Ok(h) = Headers::parse(&b) {
            accepted += 1;
            assert_eq!(h.deparse(), b);
        }
    }
    assert!(accepted > 1000, "only {accepted} mutants parsed: the test would not exercise deparse");
}

/// One switch of a chain: its twin and the session that programs it.
async fn chain_switch(entries: &[Entry]) -> Rig {
    let r = rig().await;
    for e in entries {
        r.insert(std::slice::from_ref(e)).await;
    }
    r
}

#[tokio::test]
async fn int_over_three_switches_without_bytes() {
    // Leaf 1 (source, host on port 1) -> spine 2 -> leaf 3 (sink, host on
    // port 1, reports to the controller). Headers go from switch to switch
    // as they are, as the fabric simulator carries them.
    let edge =
        |port| Entry::EgressPort { port, edge: true, mtu: 0, queue_high: 0, queue_low: 0, ecn_threshold: 0 };
    let cfg = |id| Entry::Config { switch_id: id, flowlet_timeout_us: 50_000 };
    let any = (Ipv4Addr::UNSPECIFIED, 0);
    let watch = Entry::Watch { src: any, dst: any, l4_dst_port: (4791, 0xffff), priority: 10, max_hops: 4 };
    let mut leaf1 = chain_switch(&[cfg(1), Entry::EdgePort { port: 1 }, watch, edge(1), nhop(2, 2)]).await;
    leaf1.insert(&[route([10, 0, 2, 0], 24, RouteTarget::Nhop(2))]).await;
    let mut spine = chain_switch(&[cfg(2), nhop(3, 3)]).await;
    spine.insert(&[route([10, 0, 2, 0], 24, RouteTarget::Nhop(3))]).await;
    let report = Entry::ReportConfig {
        src_mac: MAC,
        dst_mac: [2, 0, 0, 0, 0xff, 1],
        src_ip: Ipv4Addr::new(10, 255, 0, 3),
        dst_ip: Ipv4Addr::new(10, 255, 0, 100),
        dst_port: 32766,
    };
    let sink_cfg =
        Entry::EgressConfig { digest_interval_us: 1000, report_period_us: 1_000_000, latency_shift: 0 };
    let to_cpu = Entry::CloneSession { id: metaroce_pipeline::names::REPORT_SESSION, port: CPU_PORT };
    let mut leaf3 = chain_switch(&[cfg(3), edge(1), nhop(1, 1), report, sink_cfg, to_cpu]).await;
    leaf3.insert(&[route([10, 0, 2, 1], 32, RouteTarget::Nhop(1))]).await;

    let sent = wire(&roce([10, 0, 2, 1], 49152));
    let mut h = sent.clone();
    let t = 1_000_000;
    assert_eq!(leaf1.twin.ingress(1, &mut h, t).unwrap(), Verdict::Forward { port: 2 });
    assert!(leaf1.twin.egress(2, &mut h, 3, t + 5).unwrap().is_empty());
    assert_eq!(spine.twin.ingress(1, &mut h, t + 10).unwrap(), Verdict::Forward { port: 3 });
    assert!(spine.twin.egress(3, &mut h, 0, t + 12).unwrap().is_empty());
    let int = h.int.clone().expect("INT on the wire");
    let hops: Vec<(u32, u32, u32)> =
        int.hops.iter().map(|x| (x.node_id, x.hop_latency, x.occupancy)).collect();
    assert_eq!(hops, vec![(2, 2, 0), (1, 5, 3)], "spine on top of the source");
    assert_eq!((int.md.remaining_hops, int.shim.len, int.shim.original_dscp), (2, 15, 0));
    // The IP length grows by what the links now carry: the 4-byte shim,
    // then the words its length counts (INT-MD header 12, 24 per hop).
    let grown = h.ipv4.unwrap().total_len - sent.ipv4.unwrap().total_len;
    assert_eq!(grown, 4 + 4 * u16::from(int.shim.len));
    assert_eq!(grown, 4 + 12 + 2 * 24);
    assert_eq!(leaf3.twin.ingress(1, &mut h, t + 20).unwrap(), Verdict::Forward { port: 1 });
    let copies = leaf3.twin.egress(1, &mut h, 0, t + 21).unwrap();

    // Delivered as sent, but for the hops' TTL and the MACs.
    let ip = h.ipv4.unwrap();
    assert_eq!(h.int, None);
    assert_eq!((ip.dscp, ip.total_len, ip.ttl), (0, sent.ipv4.unwrap().total_len, 61));
    assert_eq!(h.udp().map(|u| u.len), sent.udp().map(|u| u.len));
    let [Output::PacketIn { ingress_port: 1, reason: 1, payload }] = copies.as_slice() else {
        panic!("one report to the controller: {copies:?}")
    };
    // The report: 82 bytes of encapsulation and headers, then the packet
    // as the sink received it (two hops, BTH), payload cut.
    assert_eq!(payload.len(), 82 + 20 + 8 + 16 + 48 + 12);
    assert_eq!(u32::from_be_bytes(payload[46..50].try_into().unwrap()), 3, "the sink's node id");
    assert_eq!(payload[51], 2 + 5 + 8 + 15 + 3, "report length in words");
    let inner = Headers::parse(&[&[0u8; 12][..], &0x0800u16.to_be_bytes(), &payload[82..]].concat());
    let inner = inner.expect("the inner packet parses, checksum included");
    assert_eq!(inner.ipv4.map(|ip| (ip.ttl, ip.dscp)), Some((62, 1)));
    assert_eq!(inner.int.map(|i| i.hops.len()), Some(2));
    let pi = loop {
        match leaf3.events.recv().await {
            Some(Event::PacketIn(p)) => break p,
            Some(_) => continue,
            None => panic!("no packet-in"),
        }
    };
    assert_eq!(&pi.payload, payload);
    assert_eq!(leaf3.counter(Counter::ReportsSent, 0).await, 1);
}
