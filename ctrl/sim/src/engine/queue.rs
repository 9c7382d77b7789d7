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

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};

use super::events::Ev;

/// Slots on the wheel (a power of two).
pub const SLOTS: usize = 1 << 13;
const MASK: u64 = SLOTS as u64 - 1;
const WORDS: usize = SLOTS / 64;

/// Slot width by default: 2^10 ps, about a nanosecond, so the wheel spans
/// 8.4 µs.
pub const DEFAULT_SHIFT: u32 = 10;

/// Pending events, earliest first, ties in the order they were pushed.
#[derive(Debug)]
pub struct Queue {
    shift: u32,
    /// The time of the last popped event (0 before the first).
    last: u64,
    /// The slot being served: `last >> shift`.
    slot: u64,
    /// The events of `slot`, by time (ties in push order), from `head` on.
    cur: Vec<(u64, Ev)>,
    head: usize,
    /// Slots `slot + 1 ..= slot + SLOTS - 1`, at index `slot % SLOTS`, each
    /// in push order.
    wheel: Vec<Vec<(u64, Ev)>>,
    /// Bit i set when `wheel[i]` is not empty.
    occupied: Vec<u64>,
    /// Emptied slot lists, the last served on top: a slot that gets its
    /// first event takes the top one, whose memory the pops of that slot
    /// have just brought into cache. Without it each slot kept its own
    /// list, last touched a whole turn of the wheel before (8.4 µs of
    /// simulated time, megabytes of events on a big run), and nearly every
    /// push was a cache miss.
    spare: Vec<Vec<(u64, Ev)>>,
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
    /// A queue whose slots are `2^shift` picoseconds wide (at most 2^40).
    /// The width only tunes speed: the order is the same for any width.
    pub fn new(shift: u32) -> Self {
        Queue {
            shift: shift.min(40),
            last: 0,
            slot: 0,
            cur: Vec::new(),
            head: 0,
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
    /// corrupt the order).
    #[inline]
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

    /// Onto the wheel: `time`'s slot is after the one being served and
    /// within the horizon.
    #[inline]
    fn push_wheel(&mut self, time: u64, ev: Ev) {
        let i = ((time >> self.shift) & MASK) as usize;
        let list = &mut self.wheel[i];
        if list.capacity() == 0 {
            if let Some(spare) = self.spare.pop() {
                *list = spare;
            }
        }
        list.push((time, ev));
        self.occupied[i / 64] |= 1 << (i % 64);
        self.in_wheel += 1;
    }

    /// Into the slot being served: after every event up to `time`.
    #[cold]
    #[inline(never)]
    fn push_now(&mut self, time: u64, ev: Ev) {
        let pos = self.head + self.cur[self.head..].partition_point(|e| e.0 <= time);
        self.cur.insert(pos, (time, ev));
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
        let (t, ev) = self.cur[self.head];
        self.head += 1;
        self.len -= 1;
        self.last = t;
        Some((t, ev))
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
            self.push_wheel(f.time, f.ev);
            self.far_pop(&f);
        }
        let i = (self.slot & MASK) as usize;
        let mut served = std::mem::replace(&mut self.cur, std::mem::take(&mut self.wheel[i]));
        if served.capacity() > 0 {
            served.clear();
            self.spare.push(served);
        }
        self.occupied[i / 64] &= !(1 << (i % 64));
        self.in_wheel -= self.cur.len();
        self.head = 0;
        // Stable: events of one time stay in the order they were pushed.
        self.cur.sort_by_key(|e| e.0);
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
    pub const ENTRY_BYTES: usize = std::mem::size_of::<(u64, Ev)>();
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
    fn matches_a_sorted_order_under_interleaving() {
        // Deltas within one slot, across the wheel, and beyond its horizon,
        // on narrow and wide slots.
        for shift in [0, 4, DEFAULT_SHIFT, 20] {
            for max_delta in [4u64, 1_000, 1 << 20, 1 << 28, 1 << 40, 1 << 49] {
                interleave(shift, max_delta);
            }
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
                // Timers, which may take the FIFO beyond the wheel, and others.
                let ev = if rng.below(2) == 0 {
                    Ev::Rto { flow: seq as u32, una: 0 }
                } else {
                    Ev::Wake { token: seq }
                };
                q.push(t, ev);
                expect.insert((t, seq));
            } else if let Some((t, ev)) = q.pop() {
                let first = *expect.iter().next().unwrap();
                assert_eq!((t, token(ev)), first, "shift {shift}, deltas below {max_delta}");
                expect.remove(&first);
                now = t;
            }
            assert_eq!(q.len(), expect.len());
        }
        while let Some((t, ev)) = q.pop() {
            let first = *expect.iter().next().unwrap();
            assert_eq!((t, token(ev)), first);
            expect.remove(&first);
        }
        assert!(expect.is_empty() && q.is_empty());
    }
}
