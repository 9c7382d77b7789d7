//! The drain rule's pairing never pairs wrongly, whatever happens to the
//! reports: connections of one host pair (several queue pairs, PSNs from
//! random starts that do not cross during the run, sending at random
//! rates up to the NIC's), their data and ACK reports as a sender's leaf
//! raises them, then shuffled in arrival order and some dropped. Every
//! pair learnt must be a true one; and with nothing dropped, whatever the
//! order, every connection is learnt.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use metaroce_core::pair::{PairConfig, PairKind, PairReport, Pairing};
use metaroce_pipeline::Entry;
use proptest::prelude::*;

const S: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
const D: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);
const MASK: u32 = 0xFF_FFFF;

#[derive(Debug, Clone)]
struct Conn {
    data_qp: u32,
    ack_qp: u32,
    start_psn: u32,
    /// Packets per microsecond, at most the NIC's.
    rate: u32,
}

/// The reports one sender's leaf raises for `conns` over `steps`
/// microseconds: each connection's data report at its start and again
/// every 500 µs (a fresh packet), and an ACK report every 300 µs, at the
/// PSN the ACK covers then (everything sent until 5 µs earlier).
fn reports(conns: &[Conn], steps: u64) -> Vec<PairReport> {
    let mut out = Vec::new();
    for c in conns {
        for t in 0..steps {
            let sent = |t: u64| c.start_psn.wrapping_add((t as u32).wrapping_mul(c.rate)) & MASK;
            let at = |kind, qp, psn| PairReport {
                switch: 0,
                src: S,
                dst: D,
                qp,
                psn,
                switch_ns: 1_000_000 + t * 1000,
                kind,
            };
            if t % 500 == 0 {
                out.push(at(PairKind::Data, c.data_qp, sent(t)));
            }
            if t % 300 == 299 {
                out.push(at(PairKind::Ack, c.ack_qp, sent(t.saturating_sub(5))));
            }
        }
    }
    out.sort_by_key(|r| r.switch_ns);
    out
}

/// Up to four connections whose PSN starts lie a quarter of the space
/// apart (plus a random offset), so their trajectories (at most 147,000
/// PSNs in the 3 ms run) never come near each other.
fn conns() -> impl Strategy<Value = Vec<Conn>> {
    // 400 Gb/s of 1 KiB packets is about 49 packets per microsecond.
    (0u32..MASK, prop::collection::vec((0u32..1_000_000, 1u32..49), 1..5)).prop_map(|(base, v)| {
        v.into_iter()
            .enumerate()
            .map(|(i, (offset, rate))| Conn {
                data_qp: 0x100 + i as u32,
                ack_qp: 0x900 + i as u32,
                start_psn: base.wrapping_add(i as u32 * (1 << 22)).wrapping_add(offset) & MASK,
                rate,
            })
            .collect()
    })
}

fn learnt(p: &mut Pairing) -> BTreeMap<u32, u32> {
    p.entries(0)
        .iter()
        .filter_map(|e| match e {
            Entry::QpPair { src, dst, ack_qp, data_qp } => {
                assert_eq!((*src, *dst), (D, S), "an ACK flows from the data's destination");
                Some((*ack_qp, *data_qp))
            }
            _ => None,
        })
        .collect()
}

/// The reports of `conns` over 3 ms, in an arrival order drawn from
/// `order` (each swapped with one it names), every `drop_every`-th lost,
/// fed to a pairing.
fn arrive(conns: &[Conn], order: &[u64], drop_every: usize) -> Pairing {
    let mut rs = reports(conns, 3000);
    for i in 0..rs.len() {
        let j = (order[i % order.len()] as usize) % rs.len();
        rs.swap(i, j);
    }
    let mut p = Pairing::new(PairConfig::default());
    for (i, r) in rs.iter().enumerate() {
        if i % drop_every != 0 || drop_every == usize::MAX {
            p.on_report(i as u64 * 1000, r);
        }
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn reordered_or_lost_reports_never_pair_wrongly(
        conns in conns(),
        order in prop::collection::vec(any::<u64>(), 64),
        drop_every in 2usize..6,
    ) {
        let truth: BTreeMap<u32, u32> = conns.iter().map(|c| (c.ack_qp, c.data_qp)).collect();
        // Every `drop_every`-th report is lost.
        let mut p = arrive(&conns, &order, drop_every);
        for (ack, data) in learnt(&mut p) {
            prop_assert_eq!(truth.get(&ack), Some(&data), "ACK QP {:#x} paired with {:#x}", ack, data);
        }
    }

    #[test]
    fn with_nothing_lost_every_connection_is_learnt(
        conns in conns(),
        order in prop::collection::vec(any::<u64>(), 64),
    ) {
        let truth: BTreeMap<u32, u32> = conns.iter().map(|c| (c.ack_qp, c.data_qp)).collect();
        let mut p = arrive(&conns, &order, usize::MAX);
        prop_assert_eq!(learnt(&mut p), truth);
    }
}
