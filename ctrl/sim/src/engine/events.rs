//! The event queue: a radix heap (buckets by the highest bit in which an
//! event's time differs from the last popped time), earliest first, then
//! in insertion order, so that simultaneous events run in a reproducible
//! order.

/// Index of a directed port (an egress queue and the link it feeds).
pub type PortId = u32;
/// Index of a flow (one message on one queue pair).
pub type FlowId = u32;
/// Index of a queue pair.
pub type QpId = u32;

/// A packet in flight or in a queue. Packets travel by value, in port
/// FIFOs and on the wire of a port (a FIFO too, since a link delivers in
/// order): on big runs an indirection through a packet table costs a cache
/// miss per hop. 40 bytes (a test holds it there): what can be looked up in a small table (the
/// destination's leaf) or computed is not carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Packet {
    pub flow: FlowId,
    pub psn: u32,
    /// Bytes on the wire, headers included (the MTU is at most 9,000).
    pub bytes: u16,
    /// Port it arrived over at the current switch (for PFC accounting).
    pub in_port: PortId,
    pub dst_host: u32,
    /// What a switch hashes, carried along so forwarding touches no
    /// per-flow state (that state is cold in cache on big runs).
    pub tuple_hash: u64,
    pub src_host: u32,
    pub sport: u16,
    pub ce: bool,
    /// Set by the flow's first leaf when nothing of its queue pair is in
    /// flight (`twin/drain.rs`): switches that move flows only when they
    /// are drained may give this packet a new path.
    pub fresh: bool,
    /// A fold of the egress ports the packet took so far: two packets of a
    /// flow with different values took different paths (what the receiver
    /// uses to say why a packet arrived out of order; 8 bits, so two paths
    /// alias once in 256).
    pub route: u8,
    /// Traffic class: index into the run's priorities.
    pub tc: u8,
    /// Which transmission this is (a NIC counter, wrapping): a resent PSN
    /// is another packet, and whatever travels with a packet outside the
    /// engine (serve mode's headers) is keyed by it.
    pub tx: u32,
}

/// Something that happens at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    /// The port finished serializing a packet.
    TxDone { port: PortId },
    /// The oldest packet on `port`'s wire reaches the far end.
    Arrive { port: PortId },
    /// A host NIC may have a rate-limited queue pair ready to send.
    NicWake { host: u32 },
    /// A PAUSE (`on`) or RESUME frame for traffic class `tc` reaches the
    /// upstream end of `port`.
    Pause { port: PortId, tc: u8, on: bool },
    /// The messages posted at this instant (the next run of the schedule
    /// sorted by post time, from index `next`): one event for a whole
    /// collective's start instead of one per message.
    Posts { next: u32 },
    /// A congestion notification reaches the sender of `qp`.
    Cnp { qp: QpId },
    /// Cumulative acknowledgement up to (not including) `psn`, out of band
    /// (serve mode).
    Ack { flow: FlowId, psn: u32 },
    /// The receiver expects `psn` and saw a later one, out of band (serve
    /// mode).
    Nack { flow: FlowId, psn: u32 },
    /// An ACK or NAK (`engine/ctl.rs`) reaches the far end of `port`.
    Ctl { port: PortId, flow: FlowId, word: u32 },
    /// Retransmission timer: no progress beyond `una` since it was set.
    Rto { flow: FlowId, una: u32 },
    /// A wake-up the control asked for (see `crate::control`).
    Wake { token: u64 },
    /// Topology link `link` goes down or comes back.
    Link { link: u32, up: bool },
    /// Iteration `iter` of job `job` starts (its compute phase is over).
    Iteration { job: u32, iter: u32 },
}

/// Pending events, earliest first: a radix heap over time. Simulated time
/// never goes back, which is all a radix heap needs: an event waits in
/// bucket `b`, the highest bit in which its time differs from the last
/// popped time; each pop of a new time spreads the lowest bucket into lower
/// ones, so an event moves at most 64 times (a few, in practice) and a push
/// is O(1).
///
/// Simultaneous events run in the order they were scheduled, with no
/// sequence number: events of one time always sit in one bucket, in the
/// order they were pushed (a push goes where events of its time are; a
/// spread moves them in order), and once their time is the current one
/// they wait in the FIFO `now`.
#[derive(Debug)]
pub struct Queue {
    last: u64,
    /// Events at time `last`, in order, from `head` on.
    now: Vec<Ev>,
    head: usize,
    /// Bucket `b` (1..=64) at index `b - 1`.
    buckets: Vec<Vec<(u64, Ev)>>,
    /// Bit `b - 1` set when bucket `b` is not empty.
    occupied: u64,
    len: usize,
}

impl Default for Queue {
    fn default() -> Self {
        Queue {
            last: 0,
            now: Vec::new(),
            head: 0,
            buckets: (0..64).map(|_| Vec::new()).collect(),
            occupied: 0,
            len: 0,
        }
    }
}

impl Queue {
    /// Schedules `ev` at `time`, which must not be before the last popped
    /// event (an earlier time is taken as the current one, so a bug cannot
    /// corrupt the order).
    #[inline]
    pub fn push(&mut self, time: u64, ev: Ev) {
        self.len += 1;
        let x = time ^ self.last;
        if time <= self.last {
            self.now.push(ev);
            return;
        }
        let i = 63 - x.leading_zeros() as usize;
        self.buckets[i].push((time, ev));
        self.occupied |= 1 << i;
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(u64, Ev)> {
        if self.head == self.now.len() {
            self.advance()?;
        }
        let ev = self.now[self.head];
        self.head += 1;
        self.len -= 1;
        Some((self.last, ev))
    }

    /// Moves to the next time with events: spreads the lowest non-empty
    /// bucket, its earliest events into `now`.
    fn advance(&mut self) -> Option<()> {
        if self.occupied == 0 {
            return None;
        }
        self.now.clear();
        self.head = 0;
        let i = self.occupied.trailing_zeros() as usize;
        let mut moved = std::mem::take(&mut self.buckets[i]);
        self.occupied &= !(1 << i);
        self.last = moved.iter().map(|e| e.0).min()?;
        for &(t, ev) in &moved {
            if t == self.last {
                self.now.push(ev);
            } else {
                let b = 63 - (t ^ self.last).leading_zeros() as usize;
                self.buckets[b].push((t, ev));
                self.occupied |= 1 << b;
            }
        }
        // Give the emptied bucket its allocation back.
        moved.clear();
        if self.buckets[i].is_empty() {
            self.buckets[i] = moved;
        }
        Some(())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes one pending event takes.
    pub const ENTRY_BYTES: usize = std::mem::size_of::<(u64, Ev)>();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_stays_within_40_bytes() {
        assert!(std::mem::size_of::<Packet>() <= 40, "{}", std::mem::size_of::<Packet>());
    }

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
    fn matches_a_sorted_order_under_interleaving() {
        // Deltas within one slot, across the wheel, and beyond its horizon.
        for max_delta in [4u64, 1_000, 1 << 20, 1 << 28, 1 << 40, 1 << 49] {
            interleave(max_delta);
        }
    }

    fn interleave(max_delta: u64) {
        let mut q = Queue::default();
        let mut rng = crate::rng::Rng::new(1);
        let mut now = 0u64;
        let mut popped = Vec::new();
        let mut expect = std::collections::BTreeSet::new();
        let mut seq = 0u64;
        for _ in 0..20_000 {
            if rng.below(3) > 0 {
                let t = now + rng.below(max_delta);
                seq += 1;
                q.push(t, Ev::NicWake { host: seq as u32 });
                expect.insert((t, seq));
            } else if let Some((t, Ev::NicWake { host })) = q.pop() {
                let first = *expect.iter().next().unwrap();
                assert_eq!((t, u64::from(host)), first);
                expect.remove(&first);
                now = t;
                popped.push(t);
            }
        }
        assert!(popped.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(q.len(), expect.len());
    }
}
