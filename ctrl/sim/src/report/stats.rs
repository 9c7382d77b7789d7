//! What a run measures while it runs: per-port bytes, queue depths and
//! pauses, queue-depth histograms per port class, and a downsampled time
//! series of queue depth per port for the plots.

use serde::Serialize;

/// A log-linear histogram: exact below 16, then 16 buckets per power of two
/// (about 6% resolution), for any u64.
#[derive(Debug, Clone, Default)]
pub struct LogHist {
    counts: Vec<u64>,
    total: u64,
    max: u64,
}

impl LogHist {
    fn index(v: u64) -> usize {
        if v < 16 {
            return v as usize;
        }
        let e = 63 - v.leading_zeros() as usize;
        16 + (e - 4) * 16 + ((v >> (e - 4)) & 15) as usize
    }

    fn lower(i: usize) -> u64 {
        if i < 16 {
            return i as u64;
        }
        let e = (i - 16) / 16 + 4;
        (16 + ((i - 16) % 16) as u64) << (e - 4)
    }

    #[inline]
    pub fn add(&mut self, v: u64) {
        let i = Self::index(v);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        self.total += 1;
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The `q`-quantile (0..=1), as the lower edge of its bucket.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        if rank == self.total {
            return self.max;
        }
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::lower(i).min(self.max);
            }
        }
        self.max
    }

    pub fn merge(&mut self, other: &LogHist) {
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
    }
}

/// Most points per port series; the interval doubles when it would overflow.
pub const SERIES_POINTS: usize = 512;

/// What the engine counts per port for the report on every hop: bytes
/// sent, the deepest queue, and the time series' open bucket. Kept in the
/// engine's per-port record (`engine::PortState`), a cache line every hop
/// touches anyway, and not in arrays of their own: on a big run each of
/// those was one more line, missing in cache, per packet and hop.
/// [`Stats::finish_ports`] copies them out at the end of the run.
#[derive(Debug, Clone, Copy, Default)]
pub struct PortTally {
    pub tx_bytes: u64,
    pub max_queue: u64,
    /// The series' bucket being filled and its maximum so far, written
    /// through to [`Series::data`] only when the bucket changes.
    open: (u32, u32),
}

/// The per-port tallies, wherever the engine keeps them.
pub trait Tallies {
    fn tally(&mut self, port: usize) -> &mut PortTally;
    fn ports(&self) -> usize;
}

/// Bare tallies, for this module's tests (the engine keeps its own in
/// its per-port records).
#[cfg(test)]
impl Tallies for [PortTally] {
    fn tally(&mut self, port: usize) -> &mut PortTally {
        &mut self[port]
    }

    fn ports(&self) -> usize {
        self.len()
    }
}

/// Largest queue depth per port per time bucket.
#[derive(Debug, Clone)]
pub struct Series {
    pub interval_ps: u64,
    pub data: Vec<Vec<u32>>,
    /// The bucket of the last time recorded and where it ends: time only
    /// moves forward, so most records skip the division.
    bucket: u32,
    bucket_end: u64,
}

impl Series {
    fn new(ports: usize, interval_ps: u64) -> Self {
        let interval_ps = interval_ps.max(1);
        Series { interval_ps, data: vec![Vec::new(); ports], bucket: 0, bucket_end: interval_ps }
    }

    /// Records depth `bytes` of `port` at `now`; its open bucket is in
    /// `tallies`.
    #[inline]
    fn record<T: Tallies + ?Sized>(&mut self, tallies: &mut T, port: usize, now: u64, bytes: u64) {
        if now >= self.bucket_end || now < self.bucket_end - self.interval_ps {
            let mut b = (now / self.interval_ps) as usize;
            while b >= SERIES_POINTS {
                self.halve(tallies);
                b = (now / self.interval_ps) as usize;
            }
            self.bucket = b as u32;
            self.bucket_end = (b as u64 + 1) * self.interval_ps;
        }
        let b = self.bucket as usize;
        let v = u32::try_from(bytes).unwrap_or(u32::MAX);
        let open = &mut tallies.tally(port).open;
        if open.0 as usize != b {
            let done = *open;
            *open = (b as u32, 0);
            self.write(port, done);
        }
        let open = &mut tallies.tally(port).open;
        open.1 = open.1.max(v);
    }

    fn write(&mut self, port: usize, (b, v): (u32, u32)) {
        if v == 0 {
            return;
        }
        let s = &mut self.data[port];
        let b = b as usize;
        if s.len() <= b {
            s.resize(b + 1, 0);
        }
        s[b] = s[b].max(v);
    }

    /// Writes every open bucket through; call before reading `data`.
    pub fn flush<T: Tallies + ?Sized>(&mut self, tallies: &mut T) {
        for port in 0..tallies.ports().min(self.data.len()) {
            let done = std::mem::take(&mut tallies.tally(port).open);
            self.write(port, done);
        }
    }

    fn halve<T: Tallies + ?Sized>(&mut self, tallies: &mut T) {
        self.flush(tallies);
        self.interval_ps *= 2;
        for s in &mut self.data {
            let merged: Vec<u32> = s.chunks(2).map(|c| c.iter().copied().max().unwrap_or(0)).collect();
            *s = merged;
        }
    }
}

/// The biggest congestion tree seen: paused links that touch each other.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tree {
    pub links: u32,
    pub switches: u32,
    pub hosts: u32,
    pub at_ps: u64,
}

/// PFC and loss figures of one priority.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PriorityFigures {
    pub priority: u8,
    pub lossless: bool,
    /// Times a link went from sending to paused in this priority.
    pub pauses: u64,
    pub paused_links: usize,
    pub paused_time_us: f64,
    pub largest_tree: Tree,
    pub drops: u64,
    pub retransmits: u64,
}

/// Why a packet reached its receiver out of order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reorder {
    /// Per-packet spraying sent it on another path than the one before.
    Spray = 0,
    /// A flowlet (or a drained flow) was re-picked onto another path.
    Flowlet = 1,
    /// A steer entry moved the flow.
    Steer = 2,
    /// The flow's path lost a link (a failover, or routing converging).
    Failover = 3,
    /// The same path as the packet before it: a packet ahead was lost or
    /// is being resent.
    Loss = 4,
}

impl Reorder {
    pub const ALL: [Reorder; 5] =
        [Reorder::Spray, Reorder::Flowlet, Reorder::Steer, Reorder::Failover, Reorder::Loss];

    pub fn as_str(self) -> &'static str {
        match self {
            Reorder::Spray => "spray",
            Reorder::Flowlet => "flowlet",
            Reorder::Steer => "steer",
            Reorder::Failover => "failover",
            Reorder::Loss => "loss",
        }
    }

    pub fn from_u8(v: u8) -> Option<Reorder> {
        Reorder::ALL.get(usize::from(v)).copied()
    }
}

/// Counters and samples of one run.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Per port, filled at the end of the run ([`Stats::finish_ports`]).
    pub tx_bytes: Vec<u64>,
    pub max_queue: Vec<u64>,
    /// The run's priorities, one traffic class each, ascending.
    pub prios: Vec<u8>,
    /// Per (port, class), `[port * prios.len() + class]`.
    pub pauses: Vec<u32>,
    pub paused_ps: Vec<u64>,
    pub paused_since: Vec<u64>,
    /// Queue depth seen by each packet enqueued, per port class.
    pub queue_hist: Vec<LogHist>,
    pub series: Series,
    pub ecn_marks: u64,
    pub cnps: u64,
    pub drops: u64,
    pub headroom_overflows: u64,
    pub packets_sent: u64,
    pub retransmits: u64,
    /// Wire bytes (headers included) of the retransmissions.
    pub retransmit_bytes: u64,
    /// Packets that reached their receiver ahead of the next PSN it expected
    /// (or, without retransmission, not right after the highest seen).
    pub out_of_order: u64,
    /// The same, by cause (`[Reorder as usize]`).
    pub out_of_order_by_cause: [u64; Reorder::ALL.len()],
    /// NAKs go-back-N receivers sent for a missing PSN.
    pub naks: u64,
    pub pause_frames: u64,
    /// The largest congestion tree of any class, and of each.
    pub largest_tree: Tree,
    pub trees_by_tc: Vec<Tree>,
    /// The largest tree of any class in each span between two marks (a
    /// job iteration starting or ending): (the span's start, its tree),
    /// in time order. A span starts with the largest tree standing then,
    /// so each iteration's tree is the largest over the spans it covers.
    pub tree_spans: Vec<(u64, Tree)>,
    /// PFC pauses (any class, any port) that began in each of those spans.
    pub span_pauses: Vec<u64>,
    pub drops_by_tc: Vec<u64>,
    pub retransmits_by_tc: Vec<u64>,
    /// Links that went down or came back.
    pub link_events: u64,
    /// Packets queued for, or on the wire of, a link when it went down.
    pub lost_on_failure: u64,
    /// ACKs and NAKs lost on a dead link (in band, `engine/ctl.rs`).
    pub ctl_lost: u64,
    /// Packets a switch routed into a dead link.
    pub blackholed: u64,
    /// Packets a switch pipeline delivered to the wrong host (serve mode:
    /// the controller's routes decide; dropped there, and counted).
    pub misdelivered: u64,
}

impl Stats {
    /// `classes` are port classes (tiers); `prios` the traffic classes.
    pub fn new(ports: usize, classes: usize, series_interval_ps: u64, prios: Vec<u8>) -> Self {
        let ntc = prios.len();
        Stats {
            tx_bytes: vec![0; ports],
            max_queue: vec![0; ports],
            pauses: vec![0; ports * ntc],
            paused_ps: vec![0; ports * ntc],
            paused_since: vec![0; ports * ntc],
            trees_by_tc: vec![Tree::default(); ntc],
            tree_spans: Vec::new(),
            span_pauses: Vec::new(),
            drops_by_tc: vec![0; ntc],
            retransmits_by_tc: vec![0; ntc],
            prios,
            queue_hist: vec![LogHist::default(); classes],
            series: Series::new(ports, series_interval_ps),
            ecn_marks: 0,
            cnps: 0,
            drops: 0,
            headroom_overflows: 0,
            packets_sent: 0,
            retransmits: 0,
            retransmit_bytes: 0,
            out_of_order: 0,
            out_of_order_by_cause: [0; Reorder::ALL.len()],
            naks: 0,
            pause_frames: 0,
            largest_tree: Tree::default(),
            link_events: 0,
            lost_on_failure: 0,
            ctl_lost: 0,
            blackholed: 0,
            misdelivered: 0,
        }
    }

    /// Ports paused at least once, in any priority.
    pub fn paused_links(&self) -> usize {
        self.pauses.chunks(self.prios.len().max(1)).filter(|c| c.iter().any(|&p| p > 0)).count()
    }

    /// PFC and loss figures per priority; `lossless` says which are.
    pub fn by_priority(&self, lossless: impl Fn(u8) -> bool) -> Vec<PriorityFigures> {
        let ntc = self.prios.len();
        self.prios
            .iter()
            .enumerate()
            .map(|(c, &priority)| {
                let of_class = |v: &[u32]| v.iter().skip(c).step_by(ntc).copied().collect::<Vec<u32>>();
                let pauses = of_class(&self.pauses);
                let paused_ps: u64 = self.paused_ps.iter().skip(c).step_by(ntc).sum();
                PriorityFigures {
                    priority,
                    lossless: lossless(priority),
                    pauses: pauses.iter().map(|&p| u64::from(p)).sum(),
                    paused_links: pauses.iter().filter(|&&p| p > 0).count(),
                    paused_time_us: paused_ps as f64 / 1e6,
                    largest_tree: self.trees_by_tc[c],
                    drops: self.drops_by_tc[c],
                    retransmits: self.retransmits_by_tc[c],
                }
            })
            .collect()
    }

    /// A pause made the tree of class `class` `tree`: the largest of the
    /// run, of its class and of the current span so far?
    pub fn tree_seen(&mut self, class: usize, tree: Tree) {
        let by_tc = &mut self.trees_by_tc[class];
        if tree.links > by_tc.links {
            *by_tc = tree;
        }
        if tree.links > self.largest_tree.links {
            self.largest_tree = tree;
        }
        if let Some((_, span)) = self.tree_spans.last_mut() {
            if tree.links > span.links {
                *span = tree;
            }
        }
    }

    /// The largest tree that stood between `from` and `to` (picoseconds):
    /// over the spans from the one `from` falls in (an iteration's start
    /// is a mark, so its span starts there) to the last one before `to`.
    pub fn largest_tree_within(&self, from: u64, to: u64) -> Tree {
        let spans = self.tree_spans.get(self.spans_within(from, to)).unwrap_or_default().iter();
        spans.map(|&(_, tree)| tree).fold(Tree::default(), |a, b| if b.links > a.links { b } else { a })
    }

    /// The spans between `from` and `to`, as [`Stats::largest_tree_within`] covers them.
    fn spans_within(&self, from: u64, to: u64) -> std::ops::Range<usize> {
        let first = self.tree_spans.partition_point(|&(t, _)| t <= from).saturating_sub(1);
        let end = self.tree_spans.partition_point(|&(t, _)| t < to).max(first);
        first..end
    }

    /// PFC pauses that began between `from` and `to` (an iteration's
    /// interval: its start and end are marks).
    pub fn pauses_within(&self, from: u64, to: u64) -> u64 {
        self.span_pauses.get(self.spans_within(from, to)).map_or(0, |p| p.iter().sum())
    }

    /// A packet joins a queue of `port` that holds `depth` bytes before it.
    #[inline]
    pub fn enqueued<T: Tallies + ?Sized>(
        &mut self,
        tallies: &mut T,
        port: usize,
        class: usize,
        now: u64,
        depth: u64,
        after: u64,
    ) {
        self.queue_hist[class].add(depth);
        let t = tallies.tally(port);
        if after > t.max_queue {
            t.max_queue = after;
        }
        self.series.record(tallies, port, now, after);
    }

    /// The end of the run: the per-port tallies into `tx_bytes`,
    /// `max_queue` and the series.
    pub fn finish_ports<T: Tallies + ?Sized>(&mut self, tallies: &mut T) {
        self.series.flush(tallies);
        for port in 0..tallies.ports().min(self.tx_bytes.len()) {
            let t = *tallies.tally(port);
            self.tx_bytes[port] = t.tx_bytes;
            self.max_queue[port] = t.max_queue;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_close() {
        let mut h = LogHist::default();
        for v in 1..=10_000u64 {
            h.add(v);
        }
        for (q, want) in [(0.5, 5_000.0), (0.99, 9_900.0)] {
            let got = h.quantile(q) as f64;
            assert!((got - want).abs() / want < 0.07, "q{q}: {got} vs {want}");
        }
        assert_eq!(h.quantile(1.0), 10_000);
        assert_eq!(LogHist::default().quantile(0.5), 0);
        for v in [0u64, 15, 16, 17, 1 << 40, u64::MAX] {
            assert!(LogHist::lower(LogHist::index(v)) <= v);
        }
    }

    #[test]
    fn an_interval_gets_the_largest_tree_of_the_spans_it_covers() {
        let tree = |links| Tree { links, switches: 1, hosts: 0, at_ps: 0 };
        let mut s = Stats::new(1, 1, 10, vec![3]);
        s.tree_seen(0, tree(9)); // before any mark: the run's figure only
        for (at, links) in [(10, 2), (20, 0), (30, 4)] {
            s.tree_spans.push((at, tree(0)));
            s.tree_seen(0, tree(links));
        }
        s.tree_seen(0, tree(3)); // smaller than the span's 4 so far
        assert_eq!(s.largest_tree.links, 9);
        assert_eq!(s.largest_tree_within(10, 20).links, 2);
        assert_eq!(s.largest_tree_within(20, 30).links, 0);
        assert_eq!(s.largest_tree_within(10, 31).links, 4);
        assert_eq!(s.largest_tree_within(30, u64::MAX).links, 4);
        // Between marks: the span it falls in counts whole.
        assert_eq!(s.largest_tree_within(25, 26).links, 0);
        assert_eq!(Stats::new(1, 1, 10, vec![3]).largest_tree_within(0, 5), Tree::default());
    }

    #[test]
    fn an_interval_counts_the_pauses_that_began_in_the_spans_it_covers() {
        let mut s = Stats::new(1, 1, 10, vec![3]);
        for (at, pauses) in [(10, 2), (20, 0), (30, 5)] {
            s.tree_spans.push((at, Tree::default()));
            s.span_pauses.push(pauses);
        }
        assert_eq!(s.pauses_within(10, 20), 2);
        assert_eq!(s.pauses_within(10, 31), 7);
        assert_eq!(s.pauses_within(20, 30), 0);
        assert_eq!(s.pauses_within(30, u64::MAX), 5);
        assert_eq!(s.pauses_within(31, 30), 0, "an empty interval");
        assert_eq!(Stats::new(1, 1, 10, vec![3]).pauses_within(0, 5), 0);
    }

    #[test]
    fn series_downsample_keeps_the_maximum() {
        let mut s = Series::new(1, 10);
        let t = &mut [PortTally::default()][..];
        s.record(t, 0, 5, 7);
        s.record(t, 0, 15, 3);
        s.record(t, 0, 10 * SERIES_POINTS as u64 + 1, 1);
        s.flush(t);
        assert_eq!(s.interval_ps, 20);
        assert_eq!(s.data[0].len(), SERIES_POINTS / 2 + 1);
        assert_eq!(s.data[0][0], 7);
    }
}
