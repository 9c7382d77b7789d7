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
//! The rule is pure state and arithmetic (no clock): [`Slot::data`],
//! [`Slot::ack`] and [`Slot::nak`] are the whole of it, called by the
//! engine's first leaves through [`DrainTable`] and by the pipeline twin on
//! the P4 program's `drain.slots` register ([`Slot::pack`]), so that the
//! simulator and the program cannot disagree. The P4 program is
//! `p4src/v1model/drain.p4`; costs on Tofino are in `p4src/README.md`.

/// Slots per switch (a power of two), as the P4 program's register array
/// is sized (`DRAIN_SLOTS` in `p4src/shared/sizes.p4`).
pub const DRAIN_SLOTS: usize = metaroce_pipeline::names::DRAIN_SLOT_COUNT as usize;

/// PSNs are 24 bits wide.
pub const PSN_MASK: u32 = 0x00FF_FFFF;

/// `a` comes after `b` in 24-bit serial arithmetic (RFC 1982 style).
pub fn psn_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & PSN_MASK;
    d != 0 && d < 1 << 23
}

/// One slot's state: the owner's signature (31 bits; 0: never used), the
/// PSN after the highest forwarded, the last cumulative acknowledgement,
/// and whether a NAK is outstanding.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slot {
    pub sig: u32,
    pub fwd_next: u32,
    pub acked: u32,
    pub nak: bool,
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

/// What the rule counts: the index of the P4 program's `drain.events`
/// (the `DRAIN_` constants of `p4src/shared/constants.p4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Fresh = 0,
    Collision = 1,
    Takeover = 2,
    UnknownAck = 3,
    StaleAck = 4,
    Nak = 5,
}

impl Slot {
    fn drained(&self) -> bool {
        !self.nak && self.acked == self.fwd_next
    }

    fn taken(sig: u32, psn: u32) -> Slot {
        Slot { sig, fwd_next: psn.wrapping_add(1) & PSN_MASK, acked: psn, nak: false }
    }

    /// A data packet of the queue pair signed `sig`, PSN `psn`, is
    /// forwarded: the verdict, what it counts, and whether the queue pair
    /// took the slot (first use or takeover: the program reports its PSN).
    pub fn data(&mut self, sig: u32, psn: u32) -> (Drain, Option<Event>, bool) {
        let psn = psn & PSN_MASK;
        let next = psn.wrapping_add(1) & PSN_MASK;
        if self.sig == sig {
            let fresh = self.drained();
            if psn_after(next, self.fwd_next) {
                self.fwd_next = next;
            }
            if fresh {
                (Drain::Fresh, Some(Event::Fresh), false)
            } else {
                (Drain::InFlight, None, false)
            }
        } else if self.sig == 0 {
            // Never used: the queue pair's first packet here.
            *self = Slot::taken(sig, psn);
            (Drain::Fresh, Some(Event::Fresh), true)
        } else if self.drained() {
            // What it sent while it had no slot is not known: the first
            // cumulative ACK past this packet covers it.
            *self = Slot::taken(sig, psn);
            (Drain::InFlight, Some(Event::Takeover), true)
        } else {
            (Drain::Collision, Some(Event::Collision), false)
        }
    }

    /// A cumulative ACK of the queue pair signed `sig`: every PSN below
    /// `next` arrived (an ACK packet's BTH PSN plus one). One that moves
    /// `acked` on also ends an outstanding NAK: a NAK leaves `acked` at or
    /// past the PSN it asked for, so this ACK has passed it.
    pub fn ack(&mut self, sig: u32, next: u32) -> Option<Event> {
        let next = next & PSN_MASK;
        if self.sig != sig {
            return Some(Event::UnknownAck);
        }
        if next == self.acked {
            // A repeat (coalesced ACKs can say the same twice): harmless.
            None
        } else if psn_after(next, self.acked) && !psn_after(next, self.fwd_next) {
            self.acked = next;
            self.nak = false;
            None
        } else {
            Some(Event::StaleAck)
        }
    }

    /// A NAK of the queue pair signed `sig`: the receiver expects `psn`
    /// (everything below it arrived) and saw a later one. Counted as a NAK,
    /// and also as stale when it asks for more than was forwarded.
    pub fn nak(&mut self, sig: u32, psn: u32) -> Vec<Event> {
        let psn = psn & PSN_MASK;
        if self.sig != sig {
            return vec![Event::UnknownAck];
        }
        if psn_after(psn, self.fwd_next) {
            return vec![Event::Nak, Event::StaleAck];
        }
        if psn_after(psn, self.acked) {
            self.acked = psn;
        }
        // Outstanding whatever the order: safe (no move) until an ACK
        // passes the PSN it asked for.
        self.nak = true;
        vec![Event::Nak]
    }

    /// The slot as the v1model program's registers hold it:
    /// `drain.slot_owner` (signature ++ NAK, 32 bits) and `drain.slot_psn`
    /// (fwd_next ++ acked, 48 bits).
    pub fn pack(&self) -> (u128, u128) {
        let owner = u128::from(self.sig & 0x7FFF_FFFF) << 1 | u128::from(self.nak);
        let psn = u128::from(self.fwd_next & PSN_MASK) << 24 | u128::from(self.acked & PSN_MASK);
        (owner, psn)
    }

    pub fn unpack(owner: u128, psn: u128) -> Slot {
        let m = u128::from(PSN_MASK);
        Slot {
            sig: (owner >> 1) as u32 & 0x7FFF_FFFF,
            nak: owner & 1 == 1,
            fwd_next: ((psn >> 24) & m) as u32,
            acked: (psn & m) as u32,
        }
    }
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

impl DrainCounters {
    pub fn count(&mut self, e: Event) {
        let c = match e {
            Event::Fresh => &mut self.fresh,
            Event::Collision => &mut self.collisions,
            Event::Takeover => &mut self.takeovers,
            Event::UnknownAck => &mut self.unknown_acks,
            Event::StaleAck => &mut self.stale_acks,
            Event::Nak => &mut self.naks,
        };
        *c += 1;
    }
}

/// The drain state of every first leaf of a run (the engine's: keyed by
/// its own queue-pair numbers, as if every pairing were known).
#[derive(Debug, Clone)]
pub struct DrainTable {
    slots: Vec<Slot>,
    pub counters: DrainCounters,
}

/// Slot index and signature of queue pair `key` (any stable 64-bit name of
/// it: the P4 program hashes the destination QP and the host pair).
fn place(key: u64) -> (usize, u32) {
    let h = crate::rng::mix64(key ^ 0xD7A1_5EED);
    (h as usize & (DRAIN_SLOTS - 1), (h >> 33) as u32 | 1)
}

impl DrainTable {
    /// Slots for `switches` switches.
    pub fn new(switches: usize) -> Self {
        DrainTable {
            slots: vec![Slot::default(); switches * DRAIN_SLOTS],
            counters: DrainCounters::default(),
        }
    }

    fn slot(&mut self, switch: usize, key: u64) -> Option<(&mut Slot, u32, &mut DrainCounters)> {
        let (idx, sig) = place(key);
        let s = self.slots.get_mut(switch * DRAIN_SLOTS + idx)?;
        Some((s, sig, &mut self.counters))
    }

    /// A data packet of queue pair `key` with PSN `psn` is forwarded by its
    /// first leaf `switch`.
    pub fn on_data(&mut self, switch: usize, key: u64, psn: u32) -> Drain {
        let Some((s, sig, c)) = self.slot(switch, key) else { return Drain::InFlight };
        let (verdict, event, _) = s.data(sig, psn);
        if let Some(e) = event {
            c.count(e);
        }
        verdict
    }

    /// A cumulative ACK for queue pair `key` passes its sender's leaf:
    /// every PSN below `psn` arrived.
    pub fn on_ack(&mut self, switch: usize, key: u64, psn: u32) {
        let Some((s, sig, c)) = self.slot(switch, key) else { return };
        if let Some(e) = s.ack(sig, psn) {
            c.count(e);
        }
    }

    /// A NAK for queue pair `key` passes its sender's leaf: the receiver
    /// expects `psn` (everything below it arrived) and saw a later one.
    pub fn on_nak(&mut self, switch: usize, key: u64, psn: u32) {
        let Some((s, sig, c)) = self.slot(switch, key) else { return };
        for e in s.nak(sig, psn) {
            c.count(e);
        }
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
    fn a_slot_packs_as_the_p4_registers_hold_it() {
        let s = Slot { sig: 0x7ABC_DEF1, fwd_next: 0xFF_FFFF, acked: 0x12_3456, nak: true };
        let (owner, psn) = s.pack();
        assert_eq!(Slot::unpack(owner, psn), s);
        assert_eq!(owner, 0x7ABC_DEF1 << 1 | 1);
        assert_eq!(psn, 0xFFFF_FF12_3456);
    }

    #[test]
    fn a_nak_of_another_queue_pair_is_unknown_not_a_nak() {
        let mut t = DrainTable::new(1);
        t.on_data(0, 1, 10);
        t.on_nak(0, 99, 10);
        assert_eq!((t.counters.naks, t.counters.unknown_acks), (0, 1));
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
