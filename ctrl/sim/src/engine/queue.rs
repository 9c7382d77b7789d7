//! The event queue: a calendar of time slots, earliest first, then in the
//! order events were scheduled, so that simultaneous events run in a
//! reproducible order.
//!
//! Nearly every event a packet causes falls within a few microseconds of
//! now (a serialization, a link's delay, an ACK's hops), so the queue is a
//! wheel of [`SLOTS`] slots of `2^shift` picoseconds each: a push appends
//! to its slot's list (O(1), no comparisons), and when the wheel reaches a
//! slot its list is sorted by time, stably, so ties keep the order they
//! were scheduled in. Events beyond the wheel's horizon (timeouts, job
//! starts, the control's ticks) wait in a binary heap ordered by (time,
//! push number) and move onto the wheel, in that order, as soon as their
//! slot comes within the horizon: before any event can be pushed straight
//! into that slot, so a slot's list is always in push order.
//!
//! The radix heap this replaced moved each event through several buckets
//! (a third of a 128-host All-to-All's instructions).
//!
//! On the wheel an event is an [`Entry`] of 16 bytes, not a 24-byte
//! (time, [`Ev`]): its slot gives the high bits of its time, so the entry
//! keeps only the offset within the slot, packed with the event's kind.
//! Megabytes of events are pending on a big run, and the wheel's lists
//! are where most of the engine's cache misses were.
//!
//! A packet travels in its Arrive event: each slot has a second list, of
//! the packets its Arrive events carry (the entry holds the index), filled
//! and read in about the order of the slot's events. A per-port FIFO of
//! the packets on the wire, written at one end and read a link's delay
//! later at the other, missed the cache at nearly every read; a slot's
//! packets are read one after another while the slot is served.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use super::events::{Ev, Packet, PortId};

/// Slots on the wheel (a power of two).
pub const SLOTS: usize = 1 << 13;
const MASK: u64 = SLOTS as u64 - 1;
const WORDS: usize = SLOTS / 64;

/// Slot width by default: 2^10 ps, about a nanosecond, so the wheel spans
/// 8.4 µs.
pub const DEFAULT_SHIFT: u32 = 10;
/// Widest slot: 2^20 ps (an [`Entry`] holds the offset in 20 bits).
pub const MAX_SHIFT: u32 = 20;
const LO_BITS: u32 = 20;
/// The `pkt` of an Arrive event whose packet was lost on a link that went
/// down ([`Queue::lose_arrivals`]): [`Queue::packet`] has none for it.
pub const LOST: u32 = u32::MAX;
const LO_MASK: u32 = (1 << LO_BITS) - 1;

/// An event on the wheel: bits 0-19 of `head` are its time's offset
/// within its slot, bits 20-23 its kind, bits 24-31 a small field; `a`,
/// `b`, `c` hold the rest of its fields (see [`Entry::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    head: u32,
    a: u32,
    b: u32,
    c: u32,
}

impl Entry {
    #[inline(always)]
    fn new(lo: u32, ev: Ev) -> Self {
        let (kind, small, a, b, c) = match ev {
            Ev::TxDone { port } => (0, 0, port, 0, 0),
            Ev::Arrive { port, pkt } => (1, 0, port, pkt, 0),
            Ev::NicWake { host } => (2, 0, host, 0, 0),
            Ev::Pause { port, tc, on } => (3, tc, port, u32::from(on), 0),
            Ev::Posts { next } => (4, 0, next, 0, 0),
            Ev::Cnp { qp } => (5, 0, qp, 0, 0),
            Ev::Ack { flow, psn } => (6, 0, flow, psn, 0),
            Ev::Nack { flow, psn } => (7, 0, flow, psn, 0),
            Ev::Ctl { port, flow, word } => (8, 0, port, flow, word),
            Ev::Rto { flow, una } => (9, 0, flow, una, 0),
            Ev::Wake { token } => (10, 0, token as u32, (token >> 32) as u32, 0),
            Ev::Link { link, up } => (11, 0, link, u32::from(up), 0),
            Ev::Iteration { job, iter } => (12, 0, job, iter, 0),
        };
        Entry { head: lo | kind << LO_BITS | u32::from(small) << 24, a, b, c }
    }

    #[inline]
    fn lo(self) -> u32 {
        self.head & LO_MASK
    }

    /// An Arrive event over `port` that has not lost its packet.
    fn arrival_over(self, port: PortId) -> bool {
        (self.head >> LO_BITS) & 0xF == 1 && self.a == port && self.b != LOST
    }

    #[inline]
    fn ev(self) -> Ev {
        let (a, b, c) = (self.a, self.b, self.c);
        match (self.head >> LO_BITS) & 0xF {
            0 => Ev::TxDone { port: a },
            1 => Ev::Arrive { port: a, pkt: b },
            2 => Ev::NicWake { host: a },
            3 => Ev::Pause { port: a, tc: (self.head >> 24) as u8, on: b != 0 },
            4 => Ev::Posts { next: a },
            5 => Ev::Cnp { qp: a },
            6 => Ev::Ack { flow: a, psn: b },
            7 => Ev::Nack { flow: a, psn: b },
            8 => Ev::Ctl { port: a, flow: b, word: c },
            9 => Ev::Rto { flow: a, una: b },
            10 => Ev::Wake { token: u64::from(a) | u64::from(b) << 32 },
            11 => Ev::Link { link: a, up: b != 0 },
            // 12: the only other kind `new` writes.
            _ => Ev::Iteration { job: a, iter: b },
        }
    }
}

/// Pending events, earliest first, ties in the order they were pushed.
#[derive(Debug)]
pub struct Queue {
    shift: u32,
    /// The time of the last popped event (0 before the first).
    last: u64,
    /// The slot being served: `last >> shift`.
    slot: u64,
    /// The events of `slot`, by time (ties in push order), from `head` on.
    cur: Vec<Entry>,
    head: usize,
    /// The packets `cur`'s Arrive events carry, at the index each holds.
    cur_pkts: Vec<Packet>,
    /// Per slot of the wheel, the packets its Arrive events carry.
    wheel_pkts: Vec<Vec<Packet>>,
    /// Emptied packet lists, as `spare`.
    spare_pkts: Vec<Vec<Packet>>,
    /// The packets of Arrive events beyond the wheel's horizon (links
    /// longer than it), and their free places.
    far_pkts: Vec<Packet>,
    far_free: Vec<u32>,
    /// Slots `slot + 1 ..= slot + SLOTS - 1`, at index `slot % SLOTS`, each
    /// in push order.
    wheel: Vec<Vec<Entry>>,
    /// Bit i set when `wheel[i]` is not empty.
    occupied: Vec<u64>,
    /// Emptied slot lists, the last served on top: a slot that gets its
    /// first event takes the top one, whose memory the pops of that slot
    /// have just brought into cache. Without it each slot kept its own
    /// list, last touched a whole turn of the wheel before (8.4 µs of
    /// simulated time, megabytes of events on a big run), and nearly every
    /// push was a cache miss.
    spare: Vec<Vec<Entry>>,
    in_wheel: usize,
    /// Events at or beyond `slot + SLOTS`: retransmission timers, which
    /// are set at now plus a constant and so come in order, in a FIFO
    /// (a million of them pending on a 1,024-host All-to-All, where a
    /// heap cost a cache miss per level); the rest in a heap.
    far_run: VecDeque<Far>,
    far: BinaryHeap<Reverse<Far>>,
    pushes: u64,
    len: usize,
}

/// An event beyond the wheel's horizon, ordered by time, then push number.
#[derive(Debug, Clone, Copy)]
struct Far {
    time: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Far {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}

impl Eq for Far {}

impl PartialOrd for Far {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Far {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

impl Default for Queue {
    fn default() -> Self {
        Queue::new(DEFAULT_SHIFT)
    }
}

impl Queue {
    /// A queue whose slots are `2^shift` picoseconds wide (at most
    /// 2^[`MAX_SHIFT`]). The width only tunes speed: the order is the same
    /// for any width.
    pub fn new(shift: u32) -> Self {
        Queue {
            shift: shift.min(MAX_SHIFT),
            last: 0,
            slot: 0,
            cur: Vec::new(),
            head: 0,
            cur_pkts: Vec::new(),
            wheel_pkts: (0..SLOTS).map(|_| Vec::new()).collect(),
            spare_pkts: Vec::new(),
            far_pkts: Vec::new(),
            far_free: Vec::new(),
            wheel: (0..SLOTS).map(|_| Vec::new()).collect(),
            occupied: vec![0; WORDS],
            spare: Vec::new(),
            in_wheel: 0,
            far_run: VecDeque::new(),
            far: BinaryHeap::new(),
            pushes: 0,
            len: 0,
        }
    }

    /// Schedules `ev` at `time`, which must not be before the last popped
    /// event (an earlier time is taken as the current one, so a bug cannot
    /// corrupt the order). Always inlined: at each call site the event's
    /// kind is known, and packing it into an [`Entry`] folds to a few
    /// stores (out of line, the packing is a match on every push).
    /// Arrive events, which carry a packet, go through
    /// [`Queue::push_packet`] instead.
    #[inline(always)]
    pub fn push(&mut self, time: u64, ev: Ev) {
        self.len += 1;
        let time = time.max(self.last);
        let d = (time >> self.shift) - self.slot;
        // Nearly every push lands on the wheel; the rest go out of line.
        if d.wrapping_sub(1) < SLOTS as u64 - 1 {
            self.push_wheel(time, ev);
        } else if d == 0 {
            self.push_now(time, ev);
        } else {
            self.push_far(time, ev);
        }
    }

    /// Schedules packet `pkt`'s arrival over `port` at `time` (as
    /// [`Queue::push`]): the event carries the packet, and [`Queue::pop`]
    /// returns an `Ev::Arrive` whose `pkt` [`Queue::packet`] takes.
    /// Arrive events are pushed only this way.
    #[inline(always)]
    pub fn push_packet(&mut self, time: u64, port: PortId, pkt: Packet) {
        self.len += 1;
        let time = time.max(self.last);
        let d = (time >> self.shift) - self.slot;
        if d.wrapping_sub(1) < SLOTS as u64 - 1 {
            self.wheel_packet(time, port, pkt);
        } else if d == 0 {
            let i = self.cur_pkts.len() as u32;
            self.cur_pkts.push(pkt);
            self.push_now(time, Ev::Arrive { port, pkt: i });
        } else {
            let i = match self.far_free.pop() {
                Some(i) => {
                    self.far_pkts[i as usize] = pkt;
                    i
                }
                None => {
                    self.far_pkts.push(pkt);
                    self.far_pkts.len() as u32 - 1
                }
            };
            self.push_far(time, Ev::Arrive { port, pkt: i });
        }
    }

    /// The packet of the Arrive event just popped (`pkt` is its field);
    /// valid until the next pop. Also the packet of an Arrive event that
    /// [`Queue::ahead`] returned, until the wheel moves to the next slot.
    #[inline]
    pub fn packet(&self, pkt: u32) -> Option<Packet> {
        self.cur_pkts.get(pkt as usize).copied()
    }

    /// The Arrive events over `port` pending now lose their packets (the
    /// link died under them): they stay in their places, so every other
    /// event keeps its order, but carry [`LOST`] and no packet. Returns
    /// how many. A scan of every pending event, for a link failure, so
    /// that no arrival has to check its link's state.
    pub fn lose_arrivals(&mut self, port: PortId) -> u32 {
        let mut lost = 0;
        let mut lose = |e: &mut Entry| {
            if e.arrival_over(port) {
                e.b = LOST;
                lost += 1;
            }
        };
        let head = self.head;
        self.cur.iter_mut().skip(head).for_each(&mut lose);
        self.wheel.iter_mut().flatten().for_each(&mut lose);
        let mut far = std::mem::take(&mut self.far).into_vec();
        for f in far.iter_mut().map(|Reverse(f)| f).chain(self.far_run.iter_mut()) {
            if let Ev::Arrive { port: p, pkt } = f.ev {
                if p == port && pkt != LOST {
                    self.far_free.push(pkt);
                    f.ev = Ev::Arrive { port, pkt: LOST };
                    lost += 1;
                }
            }
        }
        // (time, push number) orders them totally: rebuilt, the heap pops
        // in the same order.
        self.far = BinaryHeap::from(far);
        lost
    }

    /// The event `k` places after the next one [`Queue::pop`] returns, if
    /// it is in the slot being served (what the event loop reads ahead
    /// for: the order is known, and the slot holds about 60 events on a
    /// big run).
    #[inline]
    pub fn ahead(&self, k: usize) -> Option<Ev> {
        self.cur.get(self.head + k).map(|e| e.ev())
    }

    /// The packets the slot being served carries, for reading ahead.
    #[inline]
    pub fn packets(&self) -> &[Packet] {
        &self.cur_pkts
    }

    /// An arrival onto the wheel, its packet into its slot's list.
    #[inline(always)]
    fn wheel_packet(&mut self, time: u64, port: PortId, pkt: Packet) {
        let list = &mut self.wheel_pkts[((time >> self.shift) & MASK) as usize];
        if list.capacity() == 0 {
            if let Some(spare) = self.spare_pkts.pop() {
                *list = spare;
            }
        }
        let i = list.len() as u32;
        list.push(pkt);
        self.push_wheel(time, Ev::Arrive { port, pkt: i });
    }

    /// Onto the wheel: `time`'s slot is after the one being served and
    /// within the horizon.
    #[inline(always)]
    fn push_wheel(&mut self, time: u64, ev: Ev) {
        let i = ((time >> self.shift) & MASK) as usize;
        let entry = Entry::new(self.lo(time), ev);
        let list = &mut self.wheel[i];
        if list.capacity() == 0 {
            if let Some(spare) = self.spare.pop() {
                *list = spare;
            }
        }
        list.push(entry);
        self.occupied[i / 64] |= 1 << (i % 64);
        self.in_wheel += 1;
    }

    /// Into the slot being served: after every event up to `time`.
    #[cold]
    #[inline(never)]
    fn push_now(&mut self, time: u64, ev: Ev) {
        let lo = self.lo(time);
        let pos = self.head + self.cur[self.head..].partition_point(|e| e.lo() <= lo);
        self.cur.insert(pos, Entry::new(lo, ev));
    }

    /// `time`'s offset within its slot.
    #[inline]
    fn lo(&self, time: u64) -> u32 {
        (time & ((1 << self.shift) - 1)) as u32
    }

    #[cold]
    #[inline(never)]
    fn push_far(&mut self, time: u64, ev: Ev) {
        self.pushes += 1;
        let f = Far { time, seq: self.pushes, ev };
        if matches!(ev, Ev::Rto { .. }) && self.far_run.back().is_none_or(|b| b.time <= time) {
            self.far_run.push_back(f);
        } else {
            self.far.push(Reverse(f));
        }
    }

    /// The earliest event beyond the wheel, by (time, push number).
    fn far_first(&self) -> Option<Far> {
        match (self.far_run.front(), self.far.peek()) {
            (Some(a), Some(Reverse(b))) => Some(if a < b { *a } else { *b }),
            (Some(a), None) => Some(*a),
            (None, Some(Reverse(b))) => Some(*b),
            (None, None) => None,
        }
    }

    /// Takes `f`, which [`Queue::far_first`] returned.
    fn far_pop(&mut self, f: &Far) {
        if self.far_run.front() == Some(f) {
            self.far_run.pop_front();
        } else {
            self.far.pop();
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(u64, Ev)> {
        if self.head == self.cur.len() {
            self.advance()?;
        }
        let e = self.cur[self.head];
        self.head += 1;
        self.len -= 1;
        let t = self.slot << self.shift | u64::from(e.lo());
        self.last = t;
        Some((t, e.ev()))
    }

    /// Moves to the next slot with events and sorts its list into `cur`.
    fn advance(&mut self) -> Option<()> {
        self.slot =
            if self.in_wheel > 0 { self.next_occupied() } else { self.far_first()?.time >> self.shift };
        // The horizon moved: what it now covers leaves the heap, in order.
        while let Some(f) = self.far_first() {
            let s = f.time >> self.shift;
            if s - self.slot >= SLOTS as u64 {
                break;
            }
            match f.ev {
                Ev::Arrive { pkt: LOST, .. } => self.push_wheel(f.time, f.ev),
                Ev::Arrive { port, pkt } => {
                    let p = self.far_pkts.get(pkt as usize).copied().unwrap_or_default();
                    self.far_free.push(pkt);
                    self.wheel_packet(f.time, port, p);
                }
                ev => self.push_wheel(f.time, ev),
            }
            self.far_pop(&f);
        }
        let i = (self.slot & MASK) as usize;
        let mut served = std::mem::replace(&mut self.cur, std::mem::take(&mut self.wheel[i]));
        if served.capacity() > 0 {
            served.clear();
            self.spare.push(served);
        }
        let mut served = std::mem::replace(&mut self.cur_pkts, std::mem::take(&mut self.wheel_pkts[i]));
        if served.capacity() > 0 {
            served.clear();
            self.spare_pkts.push(served);
        }
        self.occupied[i / 64] &= !(1 << (i % 64));
        self.in_wheel -= self.cur.len();
        self.head = 0;
        // Stable: events of one time stay in the order they were pushed.
        self.cur.sort_by_key(|e| e.lo());
        Some(())
    }

    /// The first occupied slot after `slot` (the wheel is not empty, and
    /// `slot`'s own list is in `cur`).
    fn next_occupied(&self) -> u64 {
        let from = ((self.slot + 1) & MASK) as usize;
        let mut w = from / 64;
        let mut bits = self.occupied[w] & (!0u64 << (from % 64));
        // One turn and a word: the last word read again holds the slots
        // before `from` in it.
        for _ in 0..=WORDS {
            if bits != 0 {
                let i = (w * 64) as u64 + u64::from(bits.trailing_zeros());
                return self.slot + (i.wrapping_sub(self.slot) & MASK);
            }
            w = (w + 1) % WORDS;
            bits = self.occupied[w];
        }
        // Unreachable while `in_wheel` counts right; the next slot is as
        // good a guess as any and keeps the order of what is there.
        self.slot + 1
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes one pending event takes on the wheel.
    pub const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_fifo() {
        let mut q = Queue::default();
        q.push(5, Ev::NicWake { host: 1 });
        q.push(3, Ev::NicWake { host: 2 });
        q.push(5, Ev::NicWake { host: 3 });
        q.push(3, Ev::NicWake { host: 4 });
        let order: Vec<u32> = std::iter::from_fn(|| q.pop())
            .map(|(_, e)| match e {
                Ev::NicWake { host } => host,
                _ => 0,
            })
            .collect();
        assert_eq!(order, vec![2, 4, 1, 3]);
    }

    #[test]
    fn an_earlier_time_runs_now_after_what_is_due() {
        let mut q = Queue::default();
        q.push(100, Ev::NicWake { host: 1 });
        q.push(100, Ev::NicWake { host: 2 });
        assert_eq!(q.pop(), Some((100, Ev::NicWake { host: 1 })));
        q.push(7, Ev::NicWake { host: 3 });
        assert_eq!(q.pop(), Some((100, Ev::NicWake { host: 2 })));
        assert_eq!(q.pop(), Some((100, Ev::NicWake { host: 3 })));
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn ahead_sees_what_pop_will_return_in_the_slot() {
        let mut q = Queue::default();
        // One slot (1,024 ps wide): 40, 10, 10, 30; then another slot.
        for (t, host) in [(40, 1), (10, 2), (10, 3), (30, 4), (5_000, 5)] {
            q.push(t, Ev::NicWake { host });
        }
        q.push_packet(20, 9, Packet { flow: 77, ..Packet::default() });
        assert_eq!(q.pop(), Some((10, Ev::NicWake { host: 2 })));
        assert_eq!(q.ahead(0), Some(Ev::NicWake { host: 3 }));
        let Some(Ev::Arrive { port: 9, pkt }) = q.ahead(1) else { panic!("{:?}", q.ahead(1)) };
        assert_eq!(q.packets()[pkt as usize].flow, 77);
        assert_eq!(q.ahead(2), Some(Ev::NicWake { host: 4 }));
        assert_eq!(q.ahead(3), Some(Ev::NicWake { host: 1 }));
        // The next slot is not sorted yet: nothing is seen past this one.
        assert_eq!(q.ahead(4), None);
        assert_eq!(q.pop(), Some((10, Ev::NicWake { host: 3 })));
        assert_eq!(q.pop(), Some((20, Ev::Arrive { port: 9, pkt })));
        assert_eq!(q.packet(pkt).map(|p| p.flow), Some(77));
    }

    #[test]
    fn lost_arrivals_keep_their_places_without_packets() {
        let mut q = Queue::default();
        // In the slot being served, on the wheel, and beyond its horizon.
        let times = [10, 30, 5_000, 5_000, 1 << 40, (1 << 40) + 1];
        for (i, &t) in times.iter().enumerate() {
            q.push_packet(t, 3 + (i as u32 % 2), Packet { flow: i as u32, ..Packet::default() });
        }
        assert_eq!(q.pop().map(|(t, _)| t), Some(10));
        assert_eq!(q.lose_arrivals(3), 2, "the one popped is gone already");
        assert_eq!(q.lose_arrivals(3), 0, "lost once");
        let mut seen = Vec::new();
        while let Some((t, ev)) = q.pop() {
            let Ev::Arrive { port, pkt } = ev else { panic!("{ev:?}") };
            seen.push((t, port, q.packet(pkt).map(|p| p.flow)));
        }
        assert_eq!(
            seen,
            vec![
                (30, 4, Some(1)),
                (5_000, 3, None),
                (5_000, 4, Some(3)),
                (1 << 40, 3, None),
                ((1 << 40) + 1, 4, Some(5))
            ]
        );
        // The far packet's place is free again.
        q.push_packet(1 << 41, 3, Packet { flow: 9, ..Packet::default() });
        assert_eq!(q.far_pkts.len(), 2);
    }

    #[test]
    fn an_entry_gives_back_every_kind_of_event() {
        let evs = [
            Ev::TxDone { port: u32::MAX },
            Ev::Arrive { port: 7, pkt: 3 },
            Ev::NicWake { host: 3 },
            Ev::Pause { port: 9, tc: 255, on: true },
            Ev::Pause { port: 9, tc: 2, on: false },
            Ev::Posts { next: 12 },
            Ev::Cnp { qp: 1 << 30 },
            Ev::Ack { flow: 4, psn: u32::MAX },
            Ev::Nack { flow: u32::MAX, psn: 5 },
            Ev::Ctl { port: 1, flow: 2, word: 1 << 31 | 3 },
            Ev::Rto { flow: 6, una: 7 },
            Ev::Wake { token: u64::MAX - 1 },
            Ev::Link { link: 8, up: true },
            Ev::Iteration { job: 9, iter: 10 },
        ];
        for ev in evs {
            for lo in [0, 1, LO_MASK] {
                let e = Entry::new(lo, ev);
                assert_eq!((e.lo(), e.ev()), (lo, ev));
            }
        }
        assert_eq!(Queue::ENTRY_BYTES, 16);
    }

    #[test]
    fn matches_a_sorted_order_under_interleaving() {
        // Deltas within one slot, across the wheel, and beyond its horizon,
        // on narrow and wide slots.
        for shift in [0, 4, DEFAULT_SHIFT, 20] {
            for max_delta in [4u64, 1_000, 1 << 20, 1 << 28, 1 << 40, 1 << 49] {
                interleave(shift, max_delta);
            }
        }
    }

    /// What identifies a popped event: an arrival's packet, else its token.
    fn popped(q: &Queue, ev: Ev) -> u64 {
        match ev {
            Ev::Arrive { pkt, .. } => q.packet(pkt).map_or(0, |p| u64::from(p.flow)),
            ev => token(ev),
        }
    }

    fn token(ev: Ev) -> u64 {
        match ev {
            Ev::Rto { flow, .. } => u64::from(flow),
            Ev::Wake { token } => token,
            _ => 0,
        }
    }

    /// Pushes and pops at random against a set ordered by (time, push
    /// number), with many ties (times are drawn coarse half the time).
    fn interleave(shift: u32, max_delta: u64) {
        let mut q = Queue::new(shift);
        let mut rng = crate::rng::Rng::new(1 ^ max_delta ^ u64::from(shift) << 50);
        let mut now = 0u64;
        let mut expect = std::collections::BTreeSet::new();
        let mut seq = 0u64;
        for _ in 0..20_000 {
            if rng.below(3) > 0 {
                let mut d = rng.below(max_delta);
                if rng.below(2) == 0 {
                    d -= d % (max_delta / 4).max(1);
                }
                let t = now + d;
                seq += 1;
                // Timers, which may take the FIFO beyond the wheel, others,
                // and arrivals, whose packets travel with them.
                match rng.below(3) {
                    0 => q.push(t, Ev::Rto { flow: seq as u32, una: 0 }),
                    1 => q.push(t, Ev::Wake { token: seq }),
                    _ => q.push_packet(t, 0, Packet { flow: seq as u32, ..Packet::default() }),
                }
                expect.insert((t, seq));
            } else if let Some((t, ev)) = q.pop() {
                let first = *expect.iter().next().unwrap();
                assert_eq!((t, popped(&q, ev)), first, "shift {shift}, deltas below {max_delta}");
                expect.remove(&first);
                now = t;
            }
            assert_eq!(q.len(), expect.len());
        }
        while let Some((t, ev)) = q.pop() {
            let first = *expect.iter().next().unwrap();
            assert_eq!((t, popped(&q, ev)), first);
            expect.remove(&first);
        }
        assert!(expect.is_empty() && q.is_empty());
    }
}
