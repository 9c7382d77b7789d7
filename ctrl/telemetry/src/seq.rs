//! Sequence-number tracking per report source: lost reports from gaps,
//! duplicates, small reordering, and source restarts, for the 22-bit
//! Telemetry Report sequence (per sink) and the 32-bit threshold-digest
//! sequence (per switch).
//!
//! A gap is only counted as lost once its numbers fall out of the reorder
//! window, so a report that arrives a little late is not lost and the
//! `lost` counter never has to go back down. A jump backwards beyond the
//! window, or forwards beyond `max_gap`, is a restart (the switch was
//! reloaded and its register started again at 0): the tracker resyncs
//! instead of counting billions of losses.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Width of the Telemetry Report group header's sequence number.
pub const REPORT_SEQ_BITS: u32 = 22;
/// Width of the threshold digest's sequence number.
pub const DIGEST_SEQ_BITS: u32 = 32;

/// How a sequence space behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqConfig {
    /// Width in bits (1..=32); numbers wrap at `2^bits`.
    pub bits: u32,
    /// How far back (1..=128) a number may arrive and still count as late
    /// rather than a restart; gaps are confirmed lost after this many.
    pub reorder_window: u32,
    /// Largest forward jump believed to be loss rather than a restart.
    pub max_gap: u32,
}

impl SeqConfig {
    /// Telemetry Reports: 22 bits; a jump of more than 2^18 reports is a
    /// restart, not a loss.
    pub const REPORTS: SeqConfig = SeqConfig { bits: REPORT_SEQ_BITS, reorder_window: 64, max_gap: 1 << 18 };
    /// Threshold digests: 32 bits; digests are rare, so a jump of more
    /// than 2^20 is a restart.
    pub const DIGESTS: SeqConfig = SeqConfig { bits: DIGEST_SEQ_BITS, reorder_window: 64, max_gap: 1 << 20 };

    fn modulus(&self) -> u64 {
        1u64 << self.bits.clamp(1, 32)
    }

    fn window(&self) -> u64 {
        u64::from(self.reorder_window.clamp(1, 128))
    }
}

/// What one sequence number meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SeqEvent {
    /// The first number from this source.
    First,
    /// The next number.
    InOrder,
    /// Ahead by more than one: `missing` numbers have not (yet) arrived.
    Gap { missing: u64 },
    /// Behind the newest, inside the window, not seen before.
    Late,
    /// Seen before.
    Duplicate,
    /// Too far behind or ahead: the source restarted; counting starts over.
    Restart,
}

/// Counters of one source, or summed over several.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqStats {
    /// Every number observed, duplicates included.
    pub received: u64,
    /// Numbers that fell out of the reorder window without arriving.
    pub lost: u64,
    pub duplicates: u64,
    /// Arrived behind the newest but inside the window.
    pub late: u64,
    pub restarts: u64,
}

impl SeqStats {
    fn add(&mut self, o: &SeqStats) {
        self.received += o.received;
        self.lost += o.lost;
        self.duplicates += o.duplicates;
        self.late += o.late;
        self.restarts += o.restarts;
    }
}

/// One source's sequence state: the newest number and a bitmap of which
/// of the `reorder_window` numbers up to it have arrived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqTracker {
    cfg: SeqConfig,
    newest: Option<u64>,
    /// Bit `i`: `newest - i` has arrived.
    seen: u128,
    /// Positions `0..tracked` are numbers sent since the first one seen:
    /// only those can be lost. Older positions arriving late are welcome
    /// but never charged as lost, so a collector that starts listening
    /// mid-stream has lost nothing.
    tracked: u64,
    stats: SeqStats,
}

impl SeqTracker {
    pub fn new(cfg: SeqConfig) -> Self {
        SeqTracker { cfg, newest: None, seen: 0, tracked: 0, stats: SeqStats::default() }
    }

    pub fn stats(&self) -> SeqStats {
        self.stats
    }

    /// Numbers inside the window that have not arrived yet (not yet lost).
    pub fn missing(&self) -> u64 {
        u64::from((!self.seen & mask(self.tracked)).count_ones())
    }

    /// Records `seq` (taken modulo the space) and says what it meant.
    pub fn observe(&mut self, seq: u64) -> SeqEvent {
        let m = self.cfg.modulus();
        let seq = seq % m;
        self.stats.received += 1;
        let Some(newest) = self.newest else {
            self.reset(seq);
            return SeqEvent::First;
        };
        let ahead = (seq + m - newest) % m;
        let behind = (m - ahead) % m;
        let w = self.cfg.window();
        if ahead == 0 {
            self.stats.duplicates += 1;
            SeqEvent::Duplicate
        } else if ahead <= u64::from(self.cfg.max_gap) && ahead < m / 2 {
            self.advance(ahead);
            match ahead {
                1 => SeqEvent::InOrder,
                _ => SeqEvent::Gap { missing: ahead - 1 },
            }
        } else if behind < w {
            let bit = 1u128 << behind;
            if self.seen & bit != 0 {
                self.stats.duplicates += 1;
                SeqEvent::Duplicate
            } else {
                self.seen |= bit;
                self.stats.late += 1;
                SeqEvent::Late
            }
        } else {
            self.stats.restarts += 1;
            self.reset(seq);
            SeqEvent::Restart
        }
    }

    fn reset(&mut self, seq: u64) {
        self.seen = 1;
        self.tracked = 1;
        self.newest = Some(seq);
    }

    /// Moves the newest number `d` ahead; tracked numbers leaving the
    /// window unseen are lost.
    fn advance(&mut self, d: u64) {
        let w = self.cfg.window();
        let unseen = !self.seen & mask(self.tracked);
        // Bit i moves to i + d and leaves the window when i + d >= w.
        let leaving = if d >= w { unseen } else { unseen >> (w - d) };
        self.stats.lost += u64::from(leaving.count_ones());
        // Numbers jumped over that land beyond the window at once.
        self.stats.lost += d.saturating_sub(w);
        let shifted = if d >= 128 { 0 } else { self.seen << d };
        self.seen = (shifted & mask(w)) | 1;
        self.tracked = (self.tracked + d).min(w);
        let m = self.cfg.modulus();
        if let Some(n) = self.newest.as_mut() {
            *n = (*n + d) % m;
        }
    }
}

/// A mask of the low `n` bits (n ≤ 128).
fn mask(n: u64) -> u128 {
    if n >= 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    }
}

/// Trackers for many sources, at most `max_sources` of them: a source
/// beyond the cap is counted in `untracked` rather than growing memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqTable<K: Ord> {
    cfg: SeqConfig,
    max_sources: usize,
    sources: BTreeMap<K, SeqTracker>,
    /// Counts of forgotten sources.
    retired: SeqStats,
    untracked: u64,
}

impl<K: Ord + Clone> SeqTable<K> {
    pub fn new(cfg: SeqConfig, max_sources: usize) -> Self {
        SeqTable { cfg, max_sources, sources: BTreeMap::new(), retired: SeqStats::default(), untracked: 0 }
    }

    /// Records `seq` from `source`; `None` when the source is over the cap.
    pub fn observe(&mut self, source: &K, seq: u64) -> Option<SeqEvent> {
        if let Some(t) = self.sources.get_mut(source) {
            return Some(t.observe(seq));
        }
        if self.sources.len() >= self.max_sources {
            self.untracked += 1;
            return None;
        }
        let mut t = SeqTracker::new(self.cfg);
        let ev = t.observe(seq);
        self.sources.insert(source.clone(), t);
        Some(ev)
    }

    /// Forgets a source (it restarted): its next number is a first one.
    /// Its counts stay in the totals, which never go down.
    pub fn forget(&mut self, source: &K) {
        if let Some(t) = self.sources.remove(source) {
            self.retired.add(&t.stats);
        }
    }

    pub fn get(&self, source: &K) -> Option<&SeqTracker> {
        self.sources.get(source)
    }

    /// Counters summed over every source.
    pub fn totals(&self) -> SeqStats {
        let mut s = self.retired;
        for t in self.sources.values() {
            s.add(&t.stats);
        }
        s
    }

    /// Observations from sources beyond the cap.
    pub fn untracked(&self) -> u64 {
        self.untracked
    }

    pub fn len(&self) -> usize {
        self.sources.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&K, &SeqTracker)> {
        self.sources.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn feed(t: &mut SeqTracker, seqs: impl IntoIterator<Item = u64>) -> Vec<SeqEvent> {
        seqs.into_iter().map(|s| t.observe(s)).collect()
    }

    #[test]
    fn in_order_stream_loses_nothing() {
        let mut t = SeqTracker::new(SeqConfig::REPORTS);
        let ev = feed(&mut t, 0..1000);
        assert_eq!(ev[0], SeqEvent::First);
        assert!(ev[1..].iter().all(|e| *e == SeqEvent::InOrder));
        assert_eq!(t.stats(), SeqStats { received: 1000, ..SeqStats::default() });
    }

    #[test]
    fn a_gap_is_missing_at_once_and_lost_after_the_window() {
        let mut t = SeqTracker::new(SeqConfig::REPORTS);
        feed(&mut t, [10, 11]);
        assert_eq!(t.observe(15), SeqEvent::Gap { missing: 3 });
        assert_eq!((t.missing(), t.stats().lost), (3, 0));
        feed(&mut t, 16..16 + 64);
        assert_eq!((t.missing(), t.stats().lost), (0, 3));
    }

    #[test]
    fn a_late_number_fills_its_gap_and_a_repeat_is_a_duplicate() {
        let mut t = SeqTracker::new(SeqConfig::REPORTS);
        feed(&mut t, [1, 2, 4]);
        assert_eq!(t.observe(3), SeqEvent::Late);
        assert_eq!(t.observe(3), SeqEvent::Duplicate);
        assert_eq!(t.observe(4), SeqEvent::Duplicate);
        feed(&mut t, 5..200);
        let s = t.stats();
        assert_eq!((s.lost, s.late, s.duplicates, s.restarts), (0, 1, 2, 0));
    }

    #[test]
    fn the_22_bit_space_wraps_without_loss_and_counts_a_gap_across_the_wrap() {
        let top = (1u64 << 22) - 1;
        let mut t = SeqTracker::new(SeqConfig::REPORTS);
        let ev = feed(&mut t, [top - 1, top, 0, 1]);
        assert_eq!(&ev[1..], &[SeqEvent::InOrder; 3]);
        let mut t = SeqTracker::new(SeqConfig::REPORTS);
        feed(&mut t, [top - 1]);
        assert_eq!(t.observe(1), SeqEvent::Gap { missing: 2 });
        // The group header's value is already 22 bits, but wider input wraps.
        assert_eq!(t.observe(2 + (1 << 22)), SeqEvent::InOrder);
    }

    #[test]
    fn a_restart_is_counted_once_not_as_billions_of_losses() {
        let mut t = SeqTracker::new(SeqConfig::DIGESTS);
        feed(&mut t, 3_000_000_000..3_000_000_010);
        assert_eq!(t.observe(0), SeqEvent::Restart);
        feed(&mut t, 1..100);
        let s = t.stats();
        assert_eq!((s.lost, s.restarts, s.duplicates), (0, 1, 0));
        // Backwards beyond the window on the report space, too.
        let mut t = SeqTracker::new(SeqConfig::REPORTS);
        feed(&mut t, 5000..5010);
        assert_eq!(t.observe(3), SeqEvent::Restart);
        assert_eq!(t.observe(4), SeqEvent::InOrder);
        assert_eq!(t.stats().lost, 0);
    }

    #[test]
    fn a_jump_beyond_max_gap_is_a_restart() {
        let mut t = SeqTracker::new(SeqConfig::REPORTS);
        feed(&mut t, [0]);
        assert_eq!(t.observe(1 << 19), SeqEvent::Restart);
        assert_eq!(t.stats().lost, 0);
        assert_eq!(t.observe((1 << 19) + 1000), SeqEvent::Gap { missing: 999 });
        feed(&mut t, [(1 << 19) + 2000]);
        // The first gap is all lost; of the second, the 63 numbers still
        // inside the window are only missing.
        assert_eq!((t.stats().lost, t.missing()), (999 + 999 - 63, 63));
    }

    #[test]
    fn numbers_before_the_first_one_seen_are_late_not_lost() {
        let mut t = SeqTracker::new(SeqConfig::REPORTS);
        feed(&mut t, [103, 100, 101, 102]);
        feed(&mut t, 104..300);
        let s = t.stats();
        assert_eq!((s.lost, s.late, s.duplicates), (0, 3, 0));
    }

    #[test]
    fn the_table_caps_its_sources() {
        let mut table = SeqTable::new(SeqConfig::DIGESTS, 2);
        assert_eq!(table.observe(&1usize, 0), Some(SeqEvent::First));
        assert_eq!(table.observe(&2, 5), Some(SeqEvent::First));
        assert_eq!(table.observe(&3, 0), None);
        assert_eq!(table.observe(&1, 2), Some(SeqEvent::Gap { missing: 1 }));
        assert_eq!((table.len(), table.untracked(), table.totals().received), (2, 1, 3));
        table.forget(&1);
        assert_eq!(table.observe(&1, 0), Some(SeqEvent::First));
        assert_eq!((table.totals().received, table.totals().lost), (4, 0));
    }

    proptest! {
        /// A stream with drops, duplicates and reordering inside the window,
        /// starting anywhere (across the wrap), is counted exactly once the
        /// window has moved past it.
        #[test]
        fn drops_duplicates_and_reordering_are_counted_exactly(
            start in 0u64..1 << 22,
            keep in proptest::collection::vec(0u8..10, 1..400),
            shuffle_seed in any::<u64>(),
        ) {
            let m = 1u64 << 22;
            // 0: dropped, 1: sent twice, otherwise sent once. The first is always sent.
            let mut stream = vec![];
            let mut dropped = 0;
            let mut dups = 0;
            for (i, k) in keep.iter().enumerate() {
                let s = (start + i as u64) % m;
                match (i, k) {
                    (0, _) => stream.push(s),
                    (_, 0) => dropped += 1,
                    (_, 1) => { stream.extend([s, s]); dups += 1; }
                    _ => stream.push(s),
                }
            }
            // Reorder inside chunks of 8 (well within the 64-wide window),
            // keeping the first number first.
            let mut rng = shuffle_seed;
            for chunk in stream[1..].chunks_mut(8) {
                for i in (1..chunk.len()).rev() {
                    rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    chunk.swap(i, (rng >> 33) as usize % (i + 1));
                }
            }
            let mut t = SeqTracker::new(SeqConfig::REPORTS);
            feed(&mut t, stream.iter().copied());
            let end = start + keep.len() as u64;
            feed(&mut t, (end..end + 64).map(|s| s % m));
            let s = t.stats();
            prop_assert_eq!(s.lost, dropped);
            prop_assert_eq!(s.duplicates, dups);
            prop_assert_eq!(s.restarts, 0);
            prop_assert_eq!(s.received, stream.len() as u64 + 64);
        }

        #[test]
        fn arbitrary_numbers_never_panic_and_counts_stay_consistent(
            seqs in proptest::collection::vec(any::<u64>(), 0..300),
            bits in 1u32..=32,
            window in 0u32..200,
        ) {
            let cfg = SeqConfig { bits, reorder_window: window, max_gap: 1000 };
            let mut t = SeqTracker::new(cfg);
            feed(&mut t, seqs.iter().copied());
            prop_assert_eq!(t.stats().received, seqs.len() as u64);
            prop_assert!(t.missing() <= 128);
        }
    }
}
