//! The event queue: a binary heap ordered by time, then by insertion
//! order, so that simultaneous events run in a reproducible order.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Index of a directed port (an egress queue and the link it feeds).
pub type PortId = u32;
/// Index of a packet in the packet slab.
pub type PktId = u32;
/// Index of a flow (one message on one queue pair).
pub type FlowId = u32;
/// Index of a queue pair.
pub type QpId = u32;

/// Something that happens at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ev {
    /// The port finished serializing a packet.
    TxDone { port: PortId },
    /// A packet reaches the far end of `port`'s link.
    Arrive { port: PortId, pkt: PktId },
    /// A host NIC may have a rate-limited queue pair ready to send.
    NicWake { host: u32 },
    /// A PAUSE (`on`) or RESUME frame reaches the upstream end of `port`.
    Pause { port: PortId, on: bool },
    /// A message is posted on its queue pair.
    FlowStart { flow: FlowId },
    /// A congestion notification reaches the sender of `qp`.
    Cnp { qp: QpId },
    /// Cumulative acknowledgement up to (not including) `psn` (lossy mode).
    Ack { flow: FlowId, psn: u32 },
    /// The receiver expects `psn` and saw a later one (lossy mode).
    Nack { flow: FlowId, psn: u32 },
    /// Retransmission timer: no progress beyond `una` since it was set.
    Rto { flow: FlowId, una: u32 },
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    time: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.seq == other.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and we want the earliest first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// Pending events, earliest first.
#[derive(Debug, Default)]
pub struct Queue {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl Queue {
    pub fn push(&mut self, time: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry { time, seq: self.seq, ev });
    }

    pub fn pop(&mut self) -> Option<(u64, Ev)> {
        self.heap.pop().map(|e| (e.time, e.ev))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Bytes one pending event takes.
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
}
