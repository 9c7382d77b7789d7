//! Learning `qp_pair`: which ACK queue pair belongs to which data queue
//! pair, from the drain rule's pairing digests (`p4src/README.md`, "Moves
//! that never reorder"). Pure: reports and time go in, each switch's
//! `qp_pair` entries come out.
//!
//! A flow's data carries the responder's QP, its ACKs the requester's, so
//! the sender's leaf cannot tell which ACKs drain which data until the
//! controller says. The leaf reports a data queue pair with a PSN when it
//! takes a slot (and again on a fresh packet, at most once per interval),
//! and an ACK no entry pairs with its own QP and PSN. PSNs start at random
//! in a 24-bit space and advance by at most the line rate: an ACK names a
//! data queue pair when its PSN is at or shortly past one of that host
//! pair's data reports, shortly meaning what the fastest NIC can send in
//! the time between the two reports by the switch's own clock (both come
//! from the sender's leaf; the controller's receive times would shrink
//! that time to nothing when it reads digests in a burst), plus a margin.
//! A clock that wraps between the two (Tofino's 48-bit nanoseconds, every
//! 78 hours) only makes the window too wide to prove anything: nothing is
//! paired until the next report. The rule never pairs on doubt:
//!
//! - an ACK whose PSN fits no data report, or fits two data queue pairs,
//!   pairs nothing (counted); the leaf asks again after its interval;
//! - reports arrive in any order and may be lost: an ACK report only ever
//!   matches data reports already seen, and a data report only refreshes;
//!   a lost one is made good by the next (fresh data reports again);
//! - a pair whose data queue pair reported nothing for `pair_ttl_ns` is
//!   dropped, so a QP number reused for a new connection is learnt anew
//!   (until then its ACKs drain the old pair's slot, whose PSNs they do
//!   not match: the rule counts them as stale and moves nothing).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

use metaroce_pipeline::Entry;
use metaroce_topo::SwitchId;
use serde::{Deserialize, Serialize};

/// PSNs are 24 bits.
const PSN_MASK: u32 = 0x00FF_FFFF;

/// What a pairing digest reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairKind {
    /// A data queue pair at its first leaf: `qp` is the data's QP.
    Data,
    /// An ACK no entry pairs, at its sender's leaf: `qp` is the ACK's QP.
    Ack,
}

/// One pairing digest, target-neutral: the data's direction (`src` sends
/// to `dst`) either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairReport {
    pub switch: SwitchId,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub qp: u32,
    pub psn: u32,
    /// The switch's time of the report, in nanoseconds.
    pub switch_ns: u64,
    pub kind: PairKind,
}

/// How far an ACK's PSN may be from a data report's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairConfig {
    /// Packets a queue pair may send between two reports, at least (the
    /// ACK's own delay, coalescing, digest batching).
    pub margin_packets: u32,
    /// The fastest a queue pair sends: packets per second (its NIC's rate
    /// over the smallest packet worth counting).
    pub max_pps: u64,
    /// A pair whose data reported nothing for this long is dropped.
    pub pair_ttl_ns: u64,
    /// Data reports older than this are forgotten.
    pub data_ttl_ns: u64,
    /// Pairs per switch at most (the `qp_pair` table's size); the oldest
    /// go first.
    pub capacity: usize,
}

impl Default for PairConfig {
    fn default() -> Self {
        PairConfig {
            margin_packets: 1 << 12,
            // 400 Gb/s of 1 KiB packets.
            max_pps: 400_000_000_000 / 8 / 1024,
            pair_ttl_ns: 10_000_000_000,
            data_ttl_ns: 10_000_000_000,
            capacity: 4096,
        }
    }
}

/// `(switch, data source, data destination)`.
type HostPair = (SwitchId, Ipv4Addr, Ipv4Addr);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DataSeen {
    psn: u32,
    /// The switch's time of the report.
    switch_ns: u64,
    /// The controller's (for expiry).
    at_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pair {
    data_qp: u32,
    /// Last time the data queue pair reported (or the pair was made).
    seen_ns: u64,
}

/// What [`Pairing`] counted, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PairCounters {
    pub data_reports: u64,
    pub ack_reports: u64,
    pub paired: u64,
    /// ACK reports that fitted no data report.
    pub unmatched: u64,
    /// ACK reports that fitted more than one data queue pair.
    pub ambiguous: u64,
    pub expired: u64,
    pub evicted: u64,
}

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Pairing {
    config: PairConfig,
    /// Per host pair, the data queue pairs seen: QP → last report.
    data: BTreeMap<HostPair, BTreeMap<u32, DataSeen>>,
    /// Per switch, `(ack source, ack destination, ack QP)` → pair.
    pairs: BTreeMap<SwitchId, BTreeMap<(Ipv4Addr, Ipv4Addr, u32), Pair>>,
    /// Each switch's entries as last built, shared with its plans.
    built: BTreeMap<SwitchId, Arc<Vec<Entry>>>,
    dirty: BTreeSet<SwitchId>,
    pub counters: PairCounters,
}

impl Pairing {
    pub fn new(config: PairConfig) -> Self {
        Pairing { config, ..Default::default() }
    }

    /// Takes one report at `now_ns`. True when a switch's pairs changed.
    pub fn on_report(&mut self, now_ns: u64, r: &PairReport) -> bool {
        let qp = r.qp & PSN_MASK;
        let psn = r.psn & PSN_MASK;
        match r.kind {
            PairKind::Data => {
                self.counters.data_reports += 1;
                self.data
                    .entry((r.switch, r.src, r.dst))
                    .or_default()
                    .insert(qp, DataSeen { psn, switch_ns: r.switch_ns, at_ns: now_ns });
                // The pair of this data queue pair, if any, is alive.
                if let Some(pairs) = self.pairs.get_mut(&r.switch) {
                    for ((s, d, _), p) in pairs.iter_mut() {
                        if (*s, *d) == (r.dst, r.src) && p.data_qp == qp {
                            p.seen_ns = now_ns;
                        }
                    }
                }
                false
            }
            PairKind::Ack => {
                self.counters.ack_reports += 1;
                self.on_ack(now_ns, r, qp, psn)
            }
        }
    }

    fn on_ack(&mut self, now_ns: u64, r: &PairReport, ack_qp: u32, psn: u32) -> bool {
        let (switch, src, dst) = (r.switch, r.src, r.dst);
        let Some(seen) = self.data.get(&(switch, src, dst)) else {
            self.counters.unmatched += 1;
            return false;
        };
        let fits: Vec<u32> = seen
            .iter()
            .filter(|(_, d)| {
                let elapsed = r.switch_ns.saturating_sub(d.switch_ns);
                let reach = u128::from(self.config.max_pps) * u128::from(elapsed) / 1_000_000_000;
                let window = u128::from(self.config.margin_packets) + reach;
                let ahead = psn.wrapping_sub(d.psn) & PSN_MASK;
                // Past the report, within what could have been sent since;
                // a window of half the space or more proves nothing.
                window < 1 << 23 && u128::from(ahead) <= window
            })
            .map(|(qp, _)| *qp)
            .collect();
        let [data_qp] = fits[..] else {
            if fits.is_empty() {
                self.counters.unmatched += 1;
            } else {
                self.counters.ambiguous += 1;
            }
            return false;
        };
        // The ACK flows from the data's destination to its source.
        let key = (dst, src, ack_qp);
        let pairs = self.pairs.entry(switch).or_default();
        if pairs.get(&key).map(|p| p.data_qp) == Some(data_qp) {
            return false;
        }
        pairs.insert(key, Pair { data_qp, seen_ns: now_ns });
        self.counters.paired += 1;
        if pairs.len() > self.config.capacity {
            if let Some(oldest) = pairs.iter().min_by_key(|(_, p)| p.seen_ns).map(|(k, _)| *k) {
                pairs.remove(&oldest);
                self.counters.evicted += 1;
            }
        }
        self.dirty.insert(switch);
        true
    }

    /// Drops pairs and data reports past their time. True when a switch's
    /// pairs changed.
    pub fn expire(&mut self, now_ns: u64) -> bool {
        let (pair_ttl, data_ttl) = (self.config.pair_ttl_ns, self.config.data_ttl_ns);
        let mut changed = false;
        for (s, pairs) in self.pairs.iter_mut() {
            let before = pairs.len();
            pairs.retain(|_, p| now_ns.saturating_sub(p.seen_ns) < pair_ttl);
            if pairs.len() != before {
                self.counters.expired += (before - pairs.len()) as u64;
                self.dirty.insert(*s);
                changed = true;
            }
        }
        for seen in self.data.values_mut() {
            seen.retain(|_, d| now_ns.saturating_sub(d.at_ns) < data_ttl);
        }
        self.data.retain(|_, seen| !seen.is_empty());
        changed
    }

    /// The switches whose pairs changed since the last call.
    pub fn take_dirty(&mut self) -> BTreeSet<SwitchId> {
        std::mem::take(&mut self.dirty)
    }

    /// Switch `s`'s `qp_pair` entries, shared until they change.
    pub fn entries(&mut self, s: SwitchId) -> Arc<Vec<Entry>> {
        let want: Vec<Entry> = self
            .pairs
            .get(&s)
            .into_iter()
            .flatten()
            .map(|(&(src, dst, ack_qp), p)| Entry::QpPair { src, dst, ack_qp, data_qp: p.data_qp })
            .collect();
        match self.built.get(&s) {
            Some(b) if **b == want => b.clone(),
            _ => {
                let b = Arc::new(want);
                self.built.insert(s, b.clone());
                b
            }
        }
    }

    /// The earliest time a pair or data report runs out, if any.
    pub fn next_expiry(&self) -> Option<u64> {
        let pairs = self.pairs.values().flat_map(|p| p.values()).map(|p| p.seen_ns + self.config.pair_ttl_ns);
        let data = self.data.values().flat_map(|d| d.values()).map(|d| d.at_ns + self.config.data_ttl_ns);
        pairs.chain(data).min()
    }

    /// Pairs held, over all switches.
    pub fn len(&self) -> usize {
        self.pairs.values().map(|p| p.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
    const D: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);
    const MS: u64 = 1_000_000;

    fn data(qp: u32, psn: u32) -> PairReport {
        PairReport { switch: 3, src: S, dst: D, qp, psn, switch_ns: 0, kind: PairKind::Data }
    }
    fn ack(qp: u32, psn: u32) -> PairReport {
        PairReport { switch: 3, src: S, dst: D, qp, psn, switch_ns: 0, kind: PairKind::Ack }
    }
    /// The same at switch time `t`.
    fn at(mut r: PairReport, t: u64) -> PairReport {
        r.switch_ns = t;
        r
    }
    fn pairs_of(p: &mut Pairing) -> Vec<Entry> {
        p.entries(3).to_vec()
    }

    #[test]
    fn an_ack_just_past_a_data_report_pairs_them() {
        let mut p = Pairing::new(PairConfig::default());
        assert!(!p.on_report(0, &data(0x11, 0xFF_FFF0)));
        assert!(p.on_report(MS / 10, &ack(0x22, 0x00_0004)), "past the report, across the wrap");
        // Far past it, but the switch's clock says 50 ms went by: still it.
        let mut q = Pairing::new(PairConfig::default());
        q.on_report(0, &at(data(0x11, 7), 1_000 * MS));
        assert!(q.on_report(0, &at(ack(0x22, 7 + 1_000_000), 1_050 * MS)), "read in one burst");
        assert_eq!(pairs_of(&mut p), vec![Entry::QpPair { src: D, dst: S, ack_qp: 0x22, data_qp: 0x11 }]);
        assert_eq!(p.take_dirty(), BTreeSet::from([3]));
        // The same again changes nothing.
        assert!(!p.on_report(MS / 5, &ack(0x22, 0x00_0010)));
    }

    #[test]
    fn doubt_pairs_nothing() {
        let mut p = Pairing::new(PairConfig::default());
        // An ACK before any data report, or behind it: nothing.
        assert!(!p.on_report(0, &ack(0x22, 500)));
        p.on_report(MS, &data(0x11, 1000));
        assert!(!p.on_report(MS, &ack(0x22, 900)));
        // Far ahead of what could have been sent since, by the switch's
        // clock (the controller read them a while apart).
        assert!(!p.on_report(20 * MS, &ack(0x22, 1000 + 100_000)));
        // Two data queue pairs of the host pair both fit: nothing.
        p.on_report(MS, &data(0x33, 1200));
        assert!(!p.on_report(MS, &ack(0x22, 1300)));
        assert!(p.is_empty());
        assert_eq!((p.counters.unmatched, p.counters.ambiguous), (3, 1));
    }

    #[test]
    fn pairs_expire_unless_their_data_reports() {
        let cfg = PairConfig { pair_ttl_ns: 100 * MS, data_ttl_ns: 100 * MS, ..PairConfig::default() };
        let mut p = Pairing::new(cfg);
        p.on_report(0, &data(0x11, 10));
        p.on_report(0, &ack(0x22, 12));
        p.take_dirty();
        p.on_report(90 * MS, &data(0x11, 5000));
        assert!(!p.expire(150 * MS), "refreshed at 90 ms");
        assert!(p.expire(200 * MS));
        assert!(p.is_empty());
        assert_eq!(p.take_dirty(), BTreeSet::from([3]));
        assert_eq!(p.next_expiry(), None);
    }

    #[test]
    fn the_oldest_pair_goes_past_capacity() {
        let mut p = Pairing::new(PairConfig { capacity: 2, ..PairConfig::default() });
        for (i, qp) in [0x11u32, 0x12, 0x13].iter().enumerate() {
            let t = i as u64 * MS;
            let psn = 100_000 * (i as u32 + 1);
            p.on_report(t, &data(*qp, psn));
            p.on_report(t, &ack(0x40 + qp, psn + 1));
        }
        let qps: Vec<u32> = pairs_of(&mut p)
            .iter()
            .filter_map(|e| match e {
                Entry::QpPair { data_qp, .. } => Some(*data_qp),
                _ => None,
            })
            .collect();
        assert_eq!(qps, vec![0x12, 0x13]);
        assert_eq!(p.counters.evicted, 1);
    }
}
