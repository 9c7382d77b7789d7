//! Learning `qp_pair`: which ACK queue pair belongs to which data queue
//! pair, from the drain rule's pairing digests (`p4src/README.md`, "Moves
//! that never reorder"). Pure: reports and time go in, each switch's
//! `qp_pair` entries come out.
//!
//! A flow's data carries the responder's QP, its ACKs the requester's, so
//! the sender's leaf cannot tell which ACKs drain which data until the
//! controller says. The leaf reports a data queue pair's PSN when it takes
//! a slot, then once per interval until a paired ACK confirms the slot
//! (and on fresh packets), and an ACK no entry pairs with its own QP and
//! PSN; every report carries the switch's time. An ACK acknowledges what
//! its queue pair had sent, so its PSN lies on the data's trajectory: an
//! ACK names a data queue pair when two of that pair's reports, one at or
//! before it and one at or after it by the switch's clock, **bracket** its
//! PSN, each within a margin (4,096 packets: the ACK's lag behind what was
//! sent) plus what the fastest NIC can send in the time between them.
//! PSNs start at random in a 24-bit space, so two queue pairs of one host
//! pair rarely run close enough for one ACK to fit both. The rule never
//! pairs on doubt:
//!
//! - an ACK report that no queue pair brackets waits (a report that
//!   brackets it may be late, or still to come); one that two bracket
//!   pairs nothing (counted as ambiguous);
//! - reports arrive in any order and may be lost: only reports that
//!   bracket the ACK pair it, and they must come from the same sender's
//!   leaf, so they share a clock (the controller's receive times would
//!   squeeze a burst of old reports into one instant);
//! - a clock that wraps between two reports (Tofino's 48-bit nanoseconds,
//!   every 78 hours) only makes the window too wide to prove anything;
//! - a pair whose data queue pair reported nothing for `pair_ttl_ns` is
//!   dropped, so a QP number reused for a new connection is learnt anew
//!   (until then its ACKs drain the old pair's slot, whose PSNs they do
//!   not match: the rule counts them as stale and moves nothing).
//!
//! What it cannot rule out: two queue pairs of one host pair whose PSNs
//! cross (each sweeps the 24-bit space every few seconds at line rate)
//! while the right one's reports around an ACK are all lost.
//!
//! **Announced pairs are exact.** A job flow that gives its sender's QP
//! (`src_qp` in the job API) names its pair outright: [`Pairing::set_announced`]
//! takes every registered job's, they never expire while the job is
//! registered, and they take the place of a learnt pair under the same
//! key. Two jobs announcing one ACK queue pair for different data queue
//! pairs is a doubt: neither is written (the flow then never moves on a
//! drained point), and the conflict is counted.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
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

/// Reports kept per queue pair (data) or per ACK queue pair (pending).
const HISTORY: usize = 8;

/// One report: a PSN at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    psn: u32,
    /// The switch's time of the report.
    switch_ns: u64,
    /// The controller's (for expiry).
    at_ns: u64,
}

/// Keeps the last [`HISTORY`] reports, ordered by the switch's time.
fn remember(h: &mut VecDeque<Seen>, s: Seen) {
    let at = h.iter().position(|x| x.switch_ns > s.switch_ns).unwrap_or(h.len());
    h.insert(at, s);
    if h.len() > HISTORY {
        h.pop_front();
    }
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
    /// ACK reports no data queue pair bracketed before they expired.
    pub unmatched: u64,
    /// ACK reports that two data queue pairs bracketed.
    pub ambiguous: u64,
    pub expired: u64,
    pub evicted: u64,
    /// ACK queue pairs two announced connections claimed for different
    /// data queue pairs (none of them written), at the last announcement.
    pub announced_conflicts: u64,
}

/// The key of a `qp_pair` entry at a switch: the ACK's source, its
/// destination (the data's sender) and its QP.
pub type AckKey = (Ipv4Addr, Ipv4Addr, u32);

/// One announced connection: at `switch` (the sender's leaf), ACKs of
/// `ack` drain data queue pair `data_qp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Announced {
    pub switch: SwitchId,
    pub ack: AckKey,
    pub data_qp: u32,
}

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Pairing {
    config: PairConfig,
    /// Per host pair, the data queue pairs seen: QP → its last reports.
    data: BTreeMap<HostPair, BTreeMap<u32, VecDeque<Seen>>>,
    /// Per host pair, ACK reports not paired yet: ACK QP → its last reports.
    pending: BTreeMap<HostPair, BTreeMap<u32, VecDeque<Seen>>>,
    /// Per switch, `(ack source, ack destination, ack QP)` → pair.
    pairs: BTreeMap<SwitchId, BTreeMap<(Ipv4Addr, Ipv4Addr, u32), Pair>>,
    /// Per switch, the pairs the job API announced (exact; no expiry).
    announced: BTreeMap<SwitchId, BTreeMap<AckKey, u32>>,
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
        let seen = Seen { psn: r.psn & PSN_MASK, switch_ns: r.switch_ns, at_ns: now_ns };
        let key = (r.switch, r.src, r.dst);
        match r.kind {
            PairKind::Data => {
                self.counters.data_reports += 1;
                remember(self.data.entry(key).or_default().entry(qp).or_default(), seen);
                // The pair of this data queue pair, if any, is alive.
                // (Only this host pair's keys: an ACK's are the data's turned
                // around.)
                if let Some(pairs) = self.pairs.get_mut(&r.switch) {
                    for (_, p) in pairs.range_mut((r.dst, r.src, 0)..=(r.dst, r.src, u32::MAX)) {
                        if p.data_qp == qp {
                            p.seen_ns = now_ns;
                        }
                    }
                }
            }
            PairKind::Ack => {
                self.counters.ack_reports += 1;
                remember(self.pending.entry(key).or_default().entry(qp).or_default(), seen);
            }
        }
        self.resolve(now_ns, key)
    }

    /// True when data report `d` and ACK report `a` are consistent: the
    /// ACK's PSN within what the queue pair can have sent between them, a
    /// margin either way. `before`: `d` is at or before `a`.
    fn fits(&self, d: &Seen, a: &Seen, before: bool) -> bool {
        let elapsed =
            if before { a.switch_ns.checked_sub(d.switch_ns) } else { d.switch_ns.checked_sub(a.switch_ns) };
        let Some(elapsed) = elapsed else { return false };
        let reach = u128::from(self.config.max_pps) * u128::from(elapsed) / 1_000_000_000;
        let window = u128::from(self.config.margin_packets) + reach;
        if window >= 1 << 22 {
            return false; // too wide to prove anything
        }
        // Signed 24-bit distance from the data's PSN to the ACK's.
        let ahead = i64::from(((a.psn.wrapping_sub(d.psn) & PSN_MASK) << 8) as i32 >> 8);
        let margin = i64::from(self.config.margin_packets);
        let window = window as i64;
        if before {
            // Sent by the ACK's time at most `window` past the report.
            (-margin..=window).contains(&ahead)
        } else {
            // Sent by the report's time: the ACK is behind it, by at most
            // `window`.
            (-window..=0).contains(&ahead)
        }
    }

    /// Data queue pairs of `key` whose reports bracket ACK report `a`.
    fn bracketing(&self, key: &HostPair, a: &Seen) -> Vec<u32> {
        let Some(data) = self.data.get(key) else { return Vec::new() };
        data.iter()
            .filter(|(_, h)| {
                h.iter().any(|d| d.switch_ns <= a.switch_ns && self.fits(d, a, true))
                    && h.iter().any(|d| d.switch_ns >= a.switch_ns && self.fits(d, a, false))
            })
            .map(|(qp, _)| *qp)
            .collect()
    }

    /// Pairs the pending ACK queue pairs of `key` that reports now
    /// bracket. True when a pair was made.
    fn resolve(&mut self, now_ns: u64, key: HostPair) -> bool {
        let Some(pending) = self.pending.get(&key) else { return false };
        let mut made = Vec::new();
        let mut ambiguous = 0;
        for (ack_qp, reports) in pending {
            let mut named = BTreeSet::new();
            for a in reports {
                match self.bracketing(&key, a)[..] {
                    [] => {}
                    [qp] => {
                        named.insert(qp);
                    }
                    _ => ambiguous += 1,
                }
            }
            // Reports naming two different queue pairs are a doubt too.
            if let [data_qp] = named.into_iter().collect::<Vec<_>>()[..] {
                made.push((*ack_qp, data_qp));
            }
        }
        self.counters.ambiguous += ambiguous;
        let (switch, src, dst) = key;
        let mut changed = false;
        for (ack_qp, data_qp) in made {
            if let Some(p) = self.pending.get_mut(&key) {
                p.remove(&ack_qp);
            }
            // The ACK flows from the data's destination to its source.
            let pairs = self.pairs.entry(switch).or_default();
            let k = (dst, src, ack_qp);
            if pairs.get(&k).map(|p| p.data_qp) == Some(data_qp) {
                continue;
            }
            pairs.insert(k, Pair { data_qp, seen_ns: now_ns });
            self.counters.paired += 1;
            changed = true;
            if pairs.len() > self.config.capacity {
                if let Some(oldest) = pairs.iter().min_by_key(|(_, p)| p.seen_ns).map(|(k, _)| *k) {
                    pairs.remove(&oldest);
                    self.counters.evicted += 1;
                }
            }
        }
        if changed {
            self.dirty.insert(switch);
        }
        changed
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
        let fresh = |h: &mut VecDeque<Seen>| {
            h.retain(|d| now_ns.saturating_sub(d.at_ns) < data_ttl);
            !h.is_empty()
        };
        for qps in self.data.values_mut() {
            qps.retain(|_, h| fresh(h));
        }
        self.data.retain(|_, qps| !qps.is_empty());
        let mut unmatched = 0;
        for qps in self.pending.values_mut() {
            for h in qps.values_mut() {
                let before = h.len();
                h.retain(|d| now_ns.saturating_sub(d.at_ns) < data_ttl);
                unmatched += (before - h.len()) as u64;
            }
            qps.retain(|_, h| !h.is_empty());
        }
        self.pending.retain(|_, qps| !qps.is_empty());
        self.counters.unmatched += unmatched;
        changed
    }

    /// Replaces the announced pairs with `all` (every registered job's).
    /// True when a switch's pairs changed.
    pub fn set_announced(&mut self, all: impl IntoIterator<Item = Announced>) -> bool {
        let mut want: BTreeMap<SwitchId, BTreeMap<AckKey, u32>> = BTreeMap::new();
        let mut doubtful: BTreeSet<(SwitchId, AckKey)> = BTreeSet::new();
        for a in all {
            let ack = (a.ack.0, a.ack.1, a.ack.2 & PSN_MASK);
            let at = want.entry(a.switch).or_default();
            match at.get(&ack) {
                Some(&q) if q != a.data_qp & PSN_MASK => {
                    doubtful.insert((a.switch, ack));
                }
                _ => {
                    at.insert(ack, a.data_qp & PSN_MASK);
                }
            }
        }
        for (s, ack) in &doubtful {
            if let Some(at) = want.get_mut(s) {
                at.remove(ack);
            }
        }
        want.retain(|_, at| !at.is_empty());
        self.counters.announced_conflicts = doubtful.len() as u64;
        let switches: BTreeSet<SwitchId> = want.keys().chain(self.announced.keys()).copied().collect();
        let mut changed = false;
        for s in switches {
            if want.get(&s) != self.announced.get(&s) {
                self.dirty.insert(s);
                changed = true;
            }
        }
        self.announced = want;
        changed
    }

    /// Announced pairs held, over all switches.
    pub fn announced_len(&self) -> usize {
        self.announced.values().map(BTreeMap::len).sum()
    }

    /// The switches whose pairs changed since the last call.
    pub fn take_dirty(&mut self) -> BTreeSet<SwitchId> {
        std::mem::take(&mut self.dirty)
    }

    /// Switch `s`'s `qp_pair` entries, shared until they change.
    pub fn entries(&mut self, s: SwitchId) -> Arc<Vec<Entry>> {
        let mut merged: BTreeMap<AckKey, u32> =
            self.pairs.get(&s).into_iter().flatten().map(|(k, p)| (*k, p.data_qp)).collect();
        // An announced pair is exact: it takes the place of a learnt one.
        merged.extend(self.announced.get(&s).into_iter().flatten().map(|(k, q)| (*k, *q)));
        let want: Vec<Entry> = merged
            .into_iter()
            .map(|((src, dst, ack_qp), data_qp)| Entry::QpPair { src, dst, ack_qp, data_qp })
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
        let ttl = self.config.data_ttl_ns;
        let data = self.data.values().chain(self.pending.values()).flat_map(|d| d.values()).flatten();
        pairs.chain(data.map(|d| d.at_ns + ttl)).min()
    }

    /// Pairs held (learnt or announced, each key once), over all switches.
    pub fn len(&self) -> usize {
        let learnt: usize = self.pairs.values().map(|p| p.len()).sum();
        let shadowed: usize = self
            .announced
            .iter()
            .map(|(s, at)| self.pairs.get(s).map_or(0, |p| at.keys().filter(|k| p.contains_key(k)).count()))
            .sum();
        learnt + self.announced_len() - shadowed
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
    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;

    /// A report of `kind` at switch time `t`.
    fn rep(kind: PairKind, qp: u32, psn: u32, t: u64) -> PairReport {
        PairReport { switch: 3, src: S, dst: D, qp, psn, switch_ns: t, kind }
    }
    fn data(qp: u32, psn: u32, t: u64) -> PairReport {
        rep(PairKind::Data, qp, psn, t)
    }
    fn ack(qp: u32, psn: u32, t: u64) -> PairReport {
        rep(PairKind::Ack, qp, psn, t)
    }
    fn pairs_of(p: &mut Pairing) -> Vec<Entry> {
        p.entries(3).to_vec()
    }

    #[test]
    fn an_ack_bracketed_by_its_data_pairs_them() {
        let mut p = Pairing::new(PairConfig::default());
        assert!(!p.on_report(0, &data(0x11, 0xFF_FFF0, 0)));
        // Nothing after the ACK yet: it waits.
        assert!(!p.on_report(0, &ack(0x22, 0x00_0004, 100 * US)));
        assert!(p.on_report(0, &data(0x11, 0x00_0100, 200 * US)), "bracketed, across the wrap");
        assert_eq!(pairs_of(&mut p), vec![Entry::QpPair { src: D, dst: S, ack_qp: 0x22, data_qp: 0x11 }]);
        assert_eq!(p.take_dirty(), BTreeSet::from([3]));
        // Reports read in one burst still carry the switch's times.
        let mut q = Pairing::new(PairConfig::default());
        q.on_report(0, &ack(0x22, 7 + 1_000_000, 1_050 * MS));
        q.on_report(0, &data(0x11, 7, 1_000 * MS));
        assert!(q.on_report(0, &data(0x11, 7 + 2_000_000, 1_100 * MS)), "in any order");
    }

    #[test]
    fn doubt_pairs_nothing() {
        let mut p = Pairing::new(PairConfig::default());
        p.on_report(0, &data(0x11, 1000, 0));
        p.on_report(0, &data(0x11, 1500, MS));
        // Behind what was sent before it, beyond the margin; or past what
        // was sent after it.
        assert!(!p.on_report(0, &ack(0x22, 1000u32.wrapping_sub(5000) & PSN_MASK, MS / 2)));
        assert!(!p.on_report(0, &ack(0x23, 1800, MS / 2)));
        // Two queue pairs of the host pair run close: both bracket.
        p.on_report(0, &data(0x33, 1200, 0));
        p.on_report(0, &data(0x33, 1700, MS));
        assert!(!p.on_report(0, &ack(0x24, 1250, MS / 2)));
        assert!(p.is_empty());
        assert!(p.counters.ambiguous >= 1);
        // The waiting reports run out and are counted.
        p.expire(PairConfig::default().data_ttl_ns + 1);
        assert!(p.counters.unmatched >= 2, "{:?}", p.counters);
    }

    #[test]
    fn pairs_expire_unless_their_data_reports() {
        let cfg = PairConfig { pair_ttl_ns: 100 * MS, data_ttl_ns: 100 * MS, ..PairConfig::default() };
        let mut p = Pairing::new(cfg);
        p.on_report(0, &data(0x11, 10, 0));
        p.on_report(0, &ack(0x22, 12, 10 * US));
        p.on_report(0, &data(0x11, 20, 20 * US));
        assert_eq!(p.len(), 1);
        p.take_dirty();
        p.on_report(90 * MS, &data(0x11, 5000, 90 * MS));
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
            let (t, psn) = (i as u64 * MS, 1_000_000 * (i as u32 + 1));
            p.on_report(t, &data(*qp, psn, t));
            p.on_report(t, &ack(0x40 + qp, psn + 1, t + US));
            p.on_report(t, &data(*qp, psn + 10, t + 2 * US));
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

    #[test]
    fn announced_pairs_are_exact_win_over_learnt_ones_and_doubt_writes_none() {
        let cfg = PairConfig { pair_ttl_ns: 100 * MS, data_ttl_ns: 100 * MS, ..PairConfig::default() };
        let mut p = Pairing::new(cfg);
        // Learnt: ACK QP 0x22 drains data QP 0x11.
        p.on_report(0, &data(0x11, 10, 0));
        p.on_report(0, &ack(0x22, 12, 10 * US));
        p.on_report(0, &data(0x11, 20, 20 * US));
        p.take_dirty();
        // Announced: the same ACK QP for another data QP, and one more.
        let a = |ack_qp, data_qp| Announced { switch: 3, ack: (D, S, ack_qp), data_qp };
        assert!(p.set_announced([a(0x22, 0x15), a(0x23, 0x16)]));
        assert_eq!(p.take_dirty(), BTreeSet::from([3]));
        assert_eq!(
            pairs_of(&mut p),
            vec![
                Entry::QpPair { src: D, dst: S, ack_qp: 0x22, data_qp: 0x15 },
                Entry::QpPair { src: D, dst: S, ack_qp: 0x23, data_qp: 0x16 },
            ],
            "the announcement takes the learnt key's place"
        );
        assert_eq!(p.len(), 2);
        // The same set again changes nothing; announced pairs never expire.
        assert!(!p.set_announced([a(0x23, 0x16), a(0x22, 0x15)]));
        p.expire(500 * MS);
        assert_eq!(p.announced_len(), 2);
        assert_eq!(p.len(), 2, "the learnt pair expired, the announced ones stay");
        // Two announcements of one ACK QP for different data: neither.
        assert!(p.set_announced([a(0x22, 0x15), a(0x22, 0x17), a(0x23, 0x16)]));
        assert_eq!(pairs_of(&mut p), vec![Entry::QpPair { src: D, dst: S, ack_qp: 0x23, data_qp: 0x16 }]);
        assert_eq!(p.counters.announced_conflicts, 1);
        // The jobs go: so do their pairs.
        assert!(p.set_announced([]));
        assert!(p.is_empty());
        assert_eq!(p.take_dirty(), BTreeSet::from([3]));
    }
}
