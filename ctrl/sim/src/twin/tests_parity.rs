//! Parity of the engine's data-plane rules with the twin's (issue 35).
//!
//! The fabric simulator's own switches keep flowlets and steer entries in
//! `control/forward.rs` (`Flowlet`) and steer entries and the large-flow
//! detector in `engine/steer.rs`; the twin keeps them in the P4 program's
//! tables and registers and is held to BMv2's packet vectors, so it is the
//! reference. Both are fed the same generated trace at one leaf: packets
//! of a few flows from an edge port to a group of four uplinks, with
//! random gaps below, at and above the flowlet timeout; `steer_flow` and
//! `steer_pair` entries written, moved and deleted; uplinks taken out of
//! the group and put back (the controller's failover: a `port_down` entry
//! and the group rewritten without the member, on the twin; the member
//! gone from the group, on the engine); and a detector window and
//! threshold that some flows cross.
//!
//! Compared, per packet, on both sides: whether it starts a new flowlet,
//! whether that flowlet follows a steer entry and on which port, that a
//! running flowlet keeps its port, and that a flowlet whose port left the
//! group fails over to a live member (not to its steer entry: the P4
//! program looks steer entries up for new flowlets only). Compared over
//! the trace: the same large-flow reports (flow, time, bytes, window,
//! collision flag), each naming the egress port its side sent the closing
//! packet on.
//!
//! Not compared, by design:
//! - **Hash slots.** The engine indexes its flowlet table and its detector
//!   with `mix64`, the P4 program with `crc32`. The generated flows are
//!   chosen so that no two share a flowlet or detector slot on either side
//!   (a case where two would is skipped), so slot sharing never decides
//!   anything here and the collision flag is always clean; what a shared
//!   slot does is the one rule of `twin/window.rs`, tested there and by
//!   each side's own collision test.
//! - **The member an unsteered new flowlet draws.** The engine draws by
//!   weight from its RNG, the P4 program by its action selector's hash: it
//!   is checked only to be a live member of the group. Each side then keeps
//!   its own draw, so every decision is checked against the rule applied to
//!   that side's own pinned port ([`expect`], the P4 program's rule in
//!   words); where both sides hold the same port their decisions are
//!   therefore equal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use metaroce_p4rt::entity::DigestConfig;
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::Event;
use metaroce_pipeline::names::{FLOW_SLOTS, NEW_FLOWLETS, STEERED};
use metaroce_pipeline::{Entry, FlowKey, RouteTarget};
use proptest::prelude::*;

use super::tests::{nhop, rig, route, wire, Rig};
use super::{Bridged, Bth, Ethernet, Headers, Ipv4, Udp, Verdict, L4};
use crate::control::forward::{switch_hash, Flowlet, Forwarder, NetView, PacketInfo, FLOWLET_SLOTS};
use crate::engine::events::PortId;
use crate::engine::net::FibMember;
use crate::engine::steer::{self, Detector, PacketFlow, SteerKey, Steering};
use crate::rng::mix64;

/// The flowlet timeout of both sides, µs.
const TIMEOUT_US: u64 = 100;
/// The group's members: next hop `p` leaves by port `p`.
const UPLINKS: [u16; 4] = [2, 3, 4, 5];
const EDGE_PORT: u32 = 1;
const PS_PER_US: u64 = 1_000_000;

/// One flow of the trace: host indices, UDP source port, queue pair.
#[derive(Debug, Clone, Copy)]
struct Flow {
    src: u32,
    dst: u32,
    sport: u16,
    qp: u32,
}

impl Flow {
    fn src_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 1, self.src as u8 + 1)
    }
    fn dst_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 2, self.dst as u8 + 1)
    }
    fn key(&self) -> FlowKey {
        FlowKey { src: self.src_ip(), dst: self.dst_ip(), sport: self.sport, qp: self.qp }
    }
    /// The engine's host ids: sources 0.., destinations 10...
    fn engine_hosts(&self) -> (u32, u32) {
        (self.src, 10 + self.dst)
    }
    fn tuple_hash(&self) -> u64 {
        mix64(u64::from(self.src) << 48 ^ u64::from(self.dst) << 32 ^ u64::from(self.sport) << 16)
            ^ mix64(u64::from(self.qp))
    }
    /// A RoCEv2 packet of the flow with `bytes` of IPv4 (total length).
    fn packet(&self, bytes: u16) -> Headers {
        let payload = vec![0xab; usize::from(bytes) - 20 - 8 - 12];
        let ipv4 = Ipv4 {
            version: 4,
            ihl: 5,
            total_len: bytes,
            ttl: 64,
            protocol: 17,
            src: u32::from(self.src_ip()),
            dst: u32::from(self.dst_ip()),
            ..Default::default()
        };
        let udp = Udp { src_port: self.sport, dst_port: 4791, len: bytes - 20, checksum: 0 };
        wire(&Headers {
            eth: Ethernet { dst: [2, 0, 0, 0, 0, 7], src: [2, 0, 0, 0, 1, 1], ether_type: 0x0800 },
            ipv4: Some(ipv4),
            l4: Some(L4::Udp(udp)),
            int: None,
            bth: Some(Bth { head: 0x0400_ffff, reserved0: 0, dest_qp: self.qp, psn_word: 9 }),
            aeth: None,
            payload,
            meta: Bridged::default(),
        })
    }
}

/// One step of the trace. Flow indices are taken modulo the flow count.
#[derive(Debug, Clone)]
enum Op {
    /// A packet of the flow, `gap_us` after the trace's previous event.
    Packet { flow: usize, gap_us: u64, bytes: u16 },
    /// Write (`Some`) or delete the flow's `steer_flow` entry.
    SteerFlow { flow: usize, port: Option<u16> },
    /// Write or delete the `steer_pair` entry of the flow's host pair.
    SteerPair { flow: usize, port: Option<u16> },
    /// Take an uplink out of the group, or put it back.
    Toggle { port: u16 },
}

/// What the P4 program's rule says a packet does (`routing.p4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// The running flowlet keeps its port.
    Keep(u16),
    /// A new flowlet on its steer entry's port.
    Steer(u16),
    /// A new flowlet drawn from the group (any live member).
    Draw,
}

/// The rule: a flowlet runs while its gaps stay within the timeout and its
/// port stays in the group; a running flowlet whose port left fails over
/// by a draw; a new one takes its steer entry if that port is live, else
/// draws. `pinned`: this side's (last packet time, port) of the flow.
fn expect(pinned: Option<(u64, u16)>, now: u64, live: &BTreeSet<u16>, steer: Option<u16>) -> Expect {
    match pinned {
        Some((last, port)) if now - last <= TIMEOUT_US && live.contains(&port) => Expect::Keep(port),
        Some((last, _)) if now - last <= TIMEOUT_US => Expect::Draw,
        _ => match steer {
            Some(p) if live.contains(&p) => Expect::Steer(p),
            _ => Expect::Draw,
        },
    }
}

/// What one side did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Did {
    port: u16,
    new: bool,
    steered: bool,
}

fn check(side: &str, i: usize, e: Expect, d: Did, live: &BTreeSet<u16>) -> Result<(), TestCaseError> {
    let ok = match e {
        Expect::Keep(p) => d == Did { port: p, new: false, steered: false },
        Expect::Steer(p) => d == Did { port: p, new: true, steered: true },
        Expect::Draw => d.new && !d.steered && live.contains(&d.port),
    };
    prop_assert!(ok, "op {i}: the {side} did {d:?} where the rule says {e:?} (live {live:?})");
    Ok(())
}

/// A large-flow report in common units: flow index, closing packet's
/// time (µs), bytes, window (µs), collision.
type Report = (usize, u64, u64, u64, bool);

/// The engine's side: its flowlet forwarder, steering and detector.
struct Engine {
    fwd: Flowlet,
    steering: Steering,
}

struct View<'a>(&'a Steering);

impl NetView for View<'_> {
    fn queue_bytes(&self, _: PortId) -> u64 {
        0
    }
    fn steer(&self, switch: u32, pkt: &PacketInfo) -> Option<(PortId, SteerKey)> {
        self.0.lookup(switch, pkt.src as u32, pkt.dst as u32, pkt.sport)
    }
}

impl Engine {
    /// The decision, and a report (bytes, window µs, collision) if the
    /// packet closed a large window.
    fn packet(
        &mut self,
        now_us: u64,
        f: &Flow,
        bytes: u16,
        live: &BTreeSet<u16>,
    ) -> (Did, Option<(u64, u64, bool)>) {
        let group: Vec<FibMember> =
            live.iter().map(|&p| FibMember { port: PortId::from(p), weight: 1 }).collect();
        let (src, dst) = f.engine_hosts();
        let info = PacketInfo {
            tuple_hash: f.tuple_hash(),
            src: src as usize,
            dst: dst as usize,
            sport: f.sport,
            bytes: u32::from(bytes),
            fresh: false,
        };
        let now = now_us * PS_PER_US;
        let total = group.len() as u32;
        let i = self.fwd.choose(now, 0, &group, total, &info, &View(&self.steering));
        let port = group[i].port as u16;
        let did = Did { port, new: self.fwd.started_flowlet(), steered: self.fwd.steered().is_some() };
        let flow = PacketFlow { src, dst, sport: f.sport, qp: f.qp };
        let report = self.steering.observe(now, 0, flow, port, u32::from(bytes)).map(|r| {
            assert_eq!(r.port, port, "the report names the closing packet's port");
            (r.bytes, r.window_ps / PS_PER_US, r.collision)
        });
        (did, report)
    }
}

/// The twin's side: a rig with the leaf's entries, and the counter
/// totals seen so far per port (new flowlets, steered).
struct TwinSide {
    rig: Rig,
    counts: BTreeMap<u16, (i64, i64)>,
}

impl TwinSide {
    async fn new(window_us: u32, threshold_bytes: u32) -> TwinSide {
        let rig = rig().await;
        let mut entries = vec![
            Entry::Config { switch_id: 7, flowlet_timeout_us: TIMEOUT_US },
            Entry::EdgePort { port: EDGE_PORT as u16 },
            Entry::LargeFlowConfig { window_us, threshold_bytes },
        ];
        for p in UPLINKS {
            entries.push(nhop(p, p));
            entries.push(Entry::Member { id: u32::from(p), nhop: p });
        }
        entries.push(group(&UPLINKS.into_iter().collect()));
        entries.push(Entry::GroupEntry { id: 1, group: 10 });
        entries.push(route([10, 0, 2, 0], 24, RouteTarget::Group(1)));
        for e in &entries {
            rig.insert(std::slice::from_ref(e)).await;
        }
        let sub = DigestConfig { max_list_size: 1, ..Default::default() };
        rig.session.configure_digest(rig.pipeline.large_flow_digest_entry(sub).unwrap()).await.unwrap();
        TwinSide { rig, counts: BTreeMap::new() }
    }

    /// The port's (new flowlets, steered) counter cells.
    async fn cells(&self, port: u16) -> (i64, i64) {
        let info = self.rig.pipeline.info();
        let cell = |name| -> p4::Entity { info.counter_entry(name, Some(i64::from(port))).unwrap().into() };
        let new_id = info.counter_entry(NEW_FLOWLETS, None).unwrap().counter_id;
        let got = self.rig.session.read(vec![cell(NEW_FLOWLETS), cell(STEERED)]).await.unwrap();
        let mut out = (0, 0);
        for e in got {
            if let Some(p4::entity::Entity::CounterEntry(c)) = e.entity {
                let n = c.data.map_or(0, |d| d.packet_count);
                if c.counter_id == new_id {
                    out.0 = n;
                } else {
                    out.1 = n;
                }
            }
        }
        out
    }

    async fn packet(&mut self, now_us: u64, f: &Flow, bytes: u16) -> Did {
        let mut h = f.packet(bytes);
        let port = match self.rig.twin.ingress(EDGE_PORT, &mut h, now_us).unwrap() {
            Verdict::Forward { port } => port as u16,
            other => panic!("the twin did not forward: {other:?}"),
        };
        let (new, steered) = self.cells(port).await;
        let before = self.counts.insert(port, (new, steered)).unwrap_or((0, 0));
        Did { port, new: new > before.0, steered: steered > before.1 }
    }

    /// Writes `entry` (`Some`) or deletes the entry at `was`.
    async fn set(&self, was: Option<&Entry>, entry: Option<Entry>) {
        use p4::update::Type;
        match (was, entry) {
            (None, Some(e)) => self.rig.write(Type::Insert, &[e]).await,
            (Some(_), Some(e)) => self.rig.write(Type::Modify, &[e]).await,
            (Some(old), None) => self.rig.write(Type::Delete, std::slice::from_ref(old)).await,
            (None, None) => {}
        }
    }

    /// Every large-flow report the twin sent, once `n` arrived (or 5 s).
    async fn reports(&mut self, flows: &[Flow], n: usize) -> Vec<(Report, u16)> {
        let mut out = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let wait = |got: usize| if got >= n { Duration::from_millis(50) } else { Duration::from_secs(5) };
        loop {
            let until = (tokio::time::Instant::now() + wait(out.len())).min(deadline);
            let Ok(Some(ev)) = tokio::time::timeout_at(until, self.rig.events.recv()).await else { break };
            let Event::Digest(list) = ev else { continue };
            let got = self.rig.pipeline.decode_large_flows(&list);
            assert!(got.malformed.is_empty(), "{:?}", got.malformed);
            for d in got.flows {
                let f = flows.iter().position(|f| f.key() == d.flow).unwrap_or(usize::MAX);
                let r = (f, d.timestamp, u64::from(d.bytes), u64::from(d.window_us), d.collision);
                out.push((r, d.egress_port));
            }
        }
        out
    }
}

fn group(live: &BTreeSet<u16>) -> Entry {
    Entry::Group { id: 10, members: live.iter().map(|&p| (u32::from(p), 1)).collect() }
}

/// True when two flows share a flowlet or detector slot on either side.
fn slots_shared(flows: &[Flow], seed: u64) -> bool {
    let mut seen = BTreeSet::new();
    flows.iter().any(|f| {
        let twin = super::hash::flow_hash(&f.packet(64)) & (FLOW_SLOTS - 1);
        let (src, dst) = f.engine_hosts();
        let flowlet = switch_hash(seed, 0, f.tuple_hash()) as usize & (FLOWLET_SLOTS - 1);
        let h = mix64(u64::from(src) << 40 ^ u64::from(dst) << 16 ^ u64::from(f.sport));
        let detector = h as usize & (steer::SLOTS - 1);
        !(seen.insert((0, twin as usize)) & seen.insert((1, flowlet)) & seen.insert((2, detector)))
    })
}

/// The whole run of one generated case.
async fn run(
    flows: Vec<Flow>,
    ops: Vec<Op>,
    seed: u64,
    window_us: u32,
    threshold: u32,
) -> Result<(), TestCaseError> {
    let mut twin = TwinSide::new(window_us, threshold).await;
    let mut engine =
        Engine { fwd: Flowlet::new(seed, 1, TIMEOUT_US * PS_PER_US), steering: Steering::default() };
    let detector =
        Detector { window_ps: u64::from(window_us) * PS_PER_US, threshold_bytes: u64::from(threshold) };
    engine.steering.set_detector(Some(detector), 1);
    let mut live: BTreeSet<u16> = UPLINKS.into_iter().collect();
    let mut flow_entries: BTreeMap<usize, Entry> = BTreeMap::new();
    let mut pair_entries: BTreeMap<(u32, u32), Entry> = BTreeMap::new();
    // Per flow and side: (last packet time, pinned port).
    let mut pinned: [BTreeMap<usize, (u64, u16)>; 2] = Default::default();
    let mut engine_reports: Vec<(Report, u16)> = Vec::new();
    let mut twin_ports: BTreeMap<(usize, u64), u16> = BTreeMap::new();
    let mut now = 1_000_000u64;
    for (i, op) in ops.into_iter().enumerate() {
        let tag = i as u64;
        match op {
            Op::Packet { flow, gap_us, bytes } => {
                now += gap_us;
                let k = flow % flows.len();
                let f = &flows[k];
                let steer = [flow_entries.get(&k), pair_entries.get(&(f.src, f.dst))]
                    .into_iter()
                    .flatten()
                    .find_map(|e| match e {
                        Entry::SteerFlow { port, .. } | Entry::SteerPair { port, .. } => Some(*port),
                        _ => None,
                    });
                let (e_did, e_report) = engine.packet(now, f, bytes, &live);
                let t_did = twin.packet(now, f, bytes).await;
                check("engine", i, expect(pinned[0].get(&k).copied(), now, &live, steer), e_did, &live)?;
                check("twin", i, expect(pinned[1].get(&k).copied(), now, &live, steer), t_did, &live)?;
                pinned[0].insert(k, (now, e_did.port));
                pinned[1].insert(k, (now, t_did.port));
                twin_ports.insert((k, now), t_did.port);
                if let Some((bytes, window, collision)) = e_report {
                    engine_reports.push(((k, now, bytes, window, collision), e_did.port));
                }
            }
            Op::SteerFlow { flow, port } => {
                let k = flow % flows.len();
                let f = flows[k];
                let (src, dst) = f.engine_hosts();
                let key = SteerKey { src, dst, sport: Some(f.sport) };
                engine.steering.set(now * PS_PER_US, 0, key, port.map(PortId::from), tag);
                let entry = port.map(|p| Entry::SteerFlow { flow: f.key(), nhop_id: p, port: p });
                twin.set(flow_entries.get(&k), entry.clone()).await;
                match entry {
                    Some(e) => _ = flow_entries.insert(k, e),
                    None => _ = flow_entries.remove(&k),
                }
            }
            Op::SteerPair { flow, port } => {
                let f = flows[flow % flows.len()];
                let (src, dst) = f.engine_hosts();
                let key = SteerKey { src, dst, sport: None };
                engine.steering.set(now * PS_PER_US, 0, key, port.map(PortId::from), tag);
                let entry =
                    port.map(|p| Entry::SteerPair { src: f.src_ip(), dst: f.dst_ip(), nhop_id: p, port: p });
                twin.set(pair_entries.get(&(f.src, f.dst)), entry.clone()).await;
                match entry {
                    Some(e) => _ = pair_entries.insert((f.src, f.dst), e),
                    None => _ = pair_entries.remove(&(f.src, f.dst)),
                }
            }
            Op::Toggle { port } => {
                use p4::update::Type;
                let down = Entry::PortDown { port };
                if live.contains(&port) {
                    if live.len() == 1 {
                        continue; // a group is never empty
                    }
                    live.remove(&port);
                    twin.rig.write(Type::Insert, &[down]).await;
                } else {
                    live.insert(port);
                    twin.rig.write(Type::Delete, &[down]).await;
                }
                twin.rig.write(Type::Modify, &[group(&live)]).await;
            }
        }
    }
    let twin_reports = twin.reports(&flows, engine_reports.len()).await;
    let strip = |v: &[(Report, u16)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
    prop_assert_eq!(strip(&engine_reports), strip(&twin_reports), "the same large-flow reports");
    for ((f, t, ..), port) in twin_reports {
        prop_assert_eq!(
            Some(&port),
            twin_ports.get(&(f, t)),
            "the twin's report names its closing packet's port"
        );
    }
    Ok(())
}

fn flows() -> impl Strategy<Value = Vec<Flow>> {
    prop::collection::vec((0u32..2, 0u32..2, 1u32..0xff_ffff), 2..=5).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (src, dst, qp))| Flow { src, dst, sport: 49152 + i as u16, qp })
            .collect()
    })
}

fn op() -> impl Strategy<Value = Op> {
    let gap = prop_oneof![
        4 => 1u64..TIMEOUT_US / 3,
        1 => TIMEOUT_US - 1..=TIMEOUT_US + 1,
        1 => TIMEOUT_US + 1..TIMEOUT_US * 4,
    ];
    let port = prop::option::weighted(0.8, prop::sample::select(UPLINKS.to_vec()));
    prop_oneof![
        12 => (0usize..8, gap, 64u16..4000).prop_map(|(flow, gap_us, bytes)| Op::Packet { flow, gap_us, bytes }),
        1 => (0usize..8, port.clone()).prop_map(|(flow, port)| Op::SteerFlow { flow, port }),
        1 => (0usize..8, port).prop_map(|(flow, port)| Op::SteerPair { flow, port }),
        2 => prop::sample::select(UPLINKS.to_vec()).prop_map(|port| Op::Toggle { port }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_engine_and_the_twin_decide_the_same_on_one_trace(
        flows in flows(),
        ops in prop::collection::vec(op(), 40..160),
        seed in any::<u64>(),
        window_us in 150u32..600,
        threshold in 1000u32..12_000,
    ) {
        prop_assume!(!slots_shared(&flows, seed));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(flows, ops, seed, window_us, threshold))?;
    }
}
