//! What the engine schedules: events, and the packets they move. The
//! queue that orders them is in `queue.rs`.

pub use super::queue::Queue;

/// Index of a directed port (an egress queue and the link it feeds).
pub type PortId = u32;
/// Index of a flow (one message on one queue pair).
pub type FlowId = u32;
/// Index of a queue pair.
pub type QpId = u32;

/// A packet in flight or in a queue. Packets travel by value, in port
/// FIFOs and on the wire of a port (a FIFO too, since a link delivers in
/// order): on big runs an indirection through a packet table costs a cache
/// miss per hop. 32 bytes, aligned to 32 (a test holds it there), so two
/// share a cache line and none straddles two: the packet's slots in port
/// rings are most of the engine's cache misses on big runs. What can be
/// looked up in a small table (the destination's leaf) or computed (the
/// 5-tuple's hash, from the hosts' addresses and the source port) is not
/// carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(align(32))]
pub struct Packet {
    pub flow: FlowId,
    pub psn: u32,
    /// Bytes on the wire, headers included (the MTU is at most 9,000).
    pub bytes: u16,
    /// Port it arrived over at the current switch (for PFC accounting).
    pub in_port: PortId,
    pub dst_host: u32,
    /// With `dst_host` and `sport`, what a switch hashes (the hash is
    /// recomputed from the hosts' addresses at each switch, so forwarding
    /// touches no per-flow state: that state is cold in cache on big runs).
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
    /// A packet sent over `port` reaches the far end. The event carries
    /// it: `pkt` is its index in the queue's list ([`Queue::packet`]), or
    /// `queue::LOST` for a packet lost when the link went down.
    Arrive { port: PortId, pkt: u32 },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_is_half_a_cache_line() {
        assert_eq!(std::mem::size_of::<Packet>(), 32);
        assert_eq!(std::mem::align_of::<Packet>(), 32);
    }
}
