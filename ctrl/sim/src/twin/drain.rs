//! Drain detection at a flow's first leaf: the rule that lets a flow change
//! path only when none of its packets is in flight (`p4src/README.md`,
//! "Moves that never reorder").
//!
//! The first leaf forwards a queue pair's data toward the fabric and the
//! ACKs and NAKs that come back to its sender. Per slot it keeps the
//! signature of the queue pair that owns it, the PSN after the highest it
//! forwarded (`fwd_next`), the cumulative acknowledgement it saw last
//! (`acked`: every PSN below it arrived) and whether a NAK is outstanding.
//! PSNs are the 24-bit serial numbers of the Base Transport Header, so
//! they wrap and start anywhere.
//!
//! A data packet is **fresh** (it may start a new path at every switch it
//! crosses) when its queue pair owns the slot, `acked == fwd_next` and no
//! NAK is outstanding: everything forwarded before it has arrived. Every
//! doubt answers "not fresh":
//! - a packet of a queue pair that does not own its slot while the owner
//!   has packets in flight (a collision: counted, never moves);
//! - the first packet after a queue pair takes over a drained slot (what
//!   it sent while it had no slot is not known; the first cumulative ACK
//!   beyond this packet covers it too);
//! - an outstanding NAK, until an ACK passes the PSN it asked for;
//! - ACKs for a queue pair that does not own the slot, ACKs behind the
//!   last one or beyond anything forwarded: ignored and counted.
//!
//! The rule is pure state and arithmetic (no clock), so the engine's
//! switches call it today and the pipeline twin will call the same code
//! when the P4 program carries it. Costs on Tofino are in `p4src/README.md`.

/// Slots per switch (a power of two), as a register array of the P4
/// program would size it.
pub const DRAIN_SLOTS: usize = 4096;

/// PSNs are 24 bits wide.
pub const PSN_MASK: u32 = 0x00FF_FFFF;

/// `a` comes after `b` in 24-bit serial arithmetic (RFC 1982 style).
pub fn psn_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & PSN_MASK;
    d != 0 && d < 1 << 23
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The owner's signature; 0 is an empty slot.
    sig: u32,
    fwd_next: u32,
    acked: u32,
    nak: bool,
    nak_psn: u32,
}

impl Slot {
    fn drained(&self) -> bool {
        !self.nak && self.acked == self.fwd_next
    }
}

/// What the first leaf concludes for a data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// Nothing of the queue pair is in flight: the packet may take a new path.
    Fresh,
    /// Packets are in flight, or their state is not known: keep the path.
    InFlight,
    /// The slot belongs to another queue pair with packets in flight.
    Collision,
}

/// What the table counted, for reports and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DrainCounters {
    /// Data packets found fresh.
    pub fresh: u64,
    /// Data packets of a queue pair whose slot another one held busy.
    pub collisions: u64,
    /// Drained slots taken over by another queue pair.
    pub takeovers: u64,
    /// ACKs or NAKs for a queue pair that owns no slot.
    pub unknown_acks: u64,
    /// ACKs or NAKs behind the last one seen, or beyond anything forwarded.
    pub stale_acks: u64,
    /// NAKs seen.
    pub naks: u64,
}

/// The drain state of every first leaf of a run.
#[derive(Debug, Clone)]
pub struct DrainTable {
    slots: Vec<Slot>,
    pub counters: DrainCounters,
}

/// Slot index and signature of queue pair `key` (any stable 64-bit name of
/// it: the P4 program hashes the destination QP and the host pair).
fn place(key: u64) -> (usize, u32) {
    let h = crate::rng::mix64(key ^ 0xD7A1_5EED);
    (h as usize & (DRAIN_SLOTS - 1), (h >> 32) as u32 | 1)
}

impl DrainTable {
    /// Slots for `switches` switches.
    pub fn new(switches: usize) -> Self {
        DrainTable {
            slots: vec![Slot::default(); switches * DRAIN_SLOTS],
            counters: DrainCounters::default(),
        }
    }

    fn slot(&mut self, switch: usize, idx: usize) -> Option<&mut Slot> {
        self.slots.get_mut(switch * DRAIN_SLOTS + idx)
    }

    /// A data packet of queue pair `key` with PSN `psn` is forwarded by its
    /// first leaf `switch`.
    pub fn on_data(&mut self, switch: usize, key: u64, psn: u32) -> Drain {
        let psn = psn & PSN_MASK;
        let next = psn.wrapping_add(1) & PSN_MASK;
        let (idx, sig) = place(key);
        let Some(s) = self.slot(switch, idx) else { return Drain::InFlight };
        let verdict = if s.sig == 0 {
            // Never used: the queue pair's first packet here.
            *s = Slot { sig, fwd_next: next, acked: psn, nak: false, nak_psn: 0 };
            Drain::Fresh
        } else if s.sig == sig {
            let fresh = s.drained();
            if psn_after(next, s.fwd_next) {
                s.fwd_next = next;
            }
            if fresh {
                Drain::Fresh
            } else {
                Drain::InFlight
            }
        } else if s.drained() {
            *s = Slot { sig, fwd_next: next, acked: psn, nak: false, nak_psn: 0 };
            self.counters.takeovers += 1;
            Drain::InFlight
        } else {
            self.counters.collisions += 1;
            Drain::Collision
        };
        if verdict == Drain::Fresh {
            self.counters.fresh += 1;
        }
        verdict
    }

    /// A cumulative ACK for queue pair `key` passes its sender's leaf:
    /// every PSN below `psn` arrived.
    pub fn on_ack(&mut self, switch: usize, key: u64, psn: u32) {
        let psn = psn & PSN_MASK;
        let (idx, sig) = place(key);
        let c = &mut self.counters;
        let Some(s) = self.slots.get_mut(switch * DRAIN_SLOTS + idx) else { return };
        if s.sig != sig {
            c.unknown_acks += 1;
            return;
        }
        if psn == s.acked {
            // A repeat (coalesced ACKs can say the same twice): harmless.
        } else if psn_after(psn, s.acked) && !psn_after(psn, s.fwd_next) {
            s.acked = psn;
            if s.nak && psn_after(psn, s.nak_psn) {
                s.nak = false;
            }
        } else {
            c.stale_acks += 1;
        }
    }

    /// A NAK for queue pair `key` passes its sender's leaf: the receiver
    /// expects `psn` (everything below it arrived) and saw a later one.
    pub fn on_nak(&mut self, switch: usize, key: u64, psn: u32) {
        let psn = psn & PSN_MASK;
        let (idx, sig) = place(key);
        let c = &mut self.counters;
        c.naks += 1;
        let Some(s) = self.slots.get_mut(switch * DRAIN_SLOTS + idx) else { return };
        if s.sig != sig {
            c.unknown_acks += 1;
            return;
        }
        if psn_after(psn, s.fwd_next) {
            c.stale_acks += 1;
            return;
        }
        if psn_after(psn, s.acked) {
            s.acked = psn;
        }
        // Outstanding whatever the order: safe (no move) until an ACK
        // passes the PSN it asked for.
        s.nak = true;
        s.nak_psn = psn;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_order_wraps() {
        assert!(psn_after(1, 0));
        assert!(!psn_after(0, 1));
        assert!(!psn_after(5, 5));
        assert!(psn_after(2, PSN_MASK), "0xFFFFFF → 0 → 2");
        assert!(!psn_after(PSN_MASK, 2));
    }

    #[test]
    fn a_queue_pair_is_fresh_only_when_everything_forwarded_is_acknowledged() {
        let mut t = DrainTable::new(2);
        let start = PSN_MASK - 2; // wraps during the test
        assert_eq!(t.on_data(1, 7, start), Drain::Fresh, "first packet");
        for k in 1..5u32 {
            assert_eq!(t.on_data(1, 7, start.wrapping_add(k)), Drain::InFlight);
        }
        // ACK of the first three: two still in flight.
        t.on_ack(1, 7, start.wrapping_add(3));
        assert_eq!(t.on_data(1, 7, start.wrapping_add(5)), Drain::InFlight);
        t.on_ack(1, 7, start.wrapping_add(6));
        assert_eq!(t.on_data(1, 7, start.wrapping_add(6)), Drain::Fresh, "all acknowledged");
        // Another switch has its own state.
        assert_eq!(t.on_data(0, 7, 100), Drain::Fresh);
        assert_eq!(t.counters.fresh, 3);
    }

    #[test]
    fn a_nak_blocks_moves_until_the_resent_packet_is_acknowledged() {
        let mut t = DrainTable::new(1);
        for p in 10..20 {
            t.on_data(0, 1, p);
        }
        t.on_nak(0, 1, 14);
        // The resend from 14 .. 19: not fresh while the NAK is outstanding,
        // even once the ACKs catch up to everything sent before the NAK.
        t.on_ack(0, 1, 14);
        assert_eq!(t.on_data(0, 1, 14), Drain::InFlight);
        t.on_ack(0, 1, 14);
        assert_eq!(t.on_data(0, 1, 15), Drain::InFlight);
        t.on_ack(0, 1, 20);
        assert_eq!(t.on_data(0, 1, 20), Drain::Fresh, "the NAK'd PSN and all after it arrived");
        assert_eq!(t.counters.naks, 1);
    }

    #[test]
    fn bad_acks_are_counted_and_never_make_a_flow_movable() {
        let mut t = DrainTable::new(1);
        for p in 0..4 {
            t.on_data(0, 1, p);
        }
        t.on_ack(0, 99, 4); // another queue pair
        t.on_ack(0, 1, 9); // beyond anything forwarded
        assert_eq!(t.on_data(0, 1, 4), Drain::InFlight);
        t.on_ack(0, 1, 3);
        t.on_ack(0, 1, 2); // goes backwards
        t.on_nak(0, 1, 30); // beyond anything forwarded
        assert_eq!(t.on_data(0, 1, 5), Drain::InFlight);
        assert_eq!(t.counters.unknown_acks, 1);
        assert_eq!(t.counters.stale_acks, 3);
    }

    /// Two queue pairs whose keys share a slot.
    fn colliding() -> (u64, u64) {
        let a = 1u64;
        let slot = place(a).0;
        let b = (2..u64::MAX).find(|&b| place(b).0 == slot).unwrap_or(2);
        (a, b)
    }

    #[test]
    fn a_collision_never_moves_either_flow() {
        let (a, b) = colliding();
        let mut t = DrainTable::new(1);
        assert_eq!(t.on_data(0, a, 0), Drain::Fresh);
        t.on_data(0, a, 1);
        // b arrives while a has packets in flight: b is not tracked, never fresh.
        assert_eq!(t.on_data(0, b, 500), Drain::Collision);
        assert_eq!(t.on_data(0, b, 501), Drain::Collision);
        t.on_ack(0, b, 502); // b's ACKs find no slot
        t.on_ack(0, a, 2);
        // a drained: b takes over, but what it sent before is unknown.
        assert_eq!(t.on_data(0, b, 502), Drain::InFlight);
        assert_eq!(t.on_data(0, a, 2), Drain::Collision, "b holds the slot now");
        // Only a cumulative ACK beyond b's first tracked packet frees it;
        // it also covers what b sent untracked.
        t.on_ack(0, b, 503);
        assert_eq!(t.on_data(0, b, 503), Drain::Fresh);
        assert_eq!((t.counters.collisions, t.counters.takeovers, t.counters.unknown_acks), (3, 1, 1));
    }
}
