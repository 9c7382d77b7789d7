//! The drain rule as the P4 program runs it (`p4src/v1model/drain.p4`):
//! RoCEv2 data entering the fabric at its first leaf gets its mark in the
//! BTH's reserved bits (none, governed, or fresh), and ACKs and NAKs routed
//! to their sender update their data's slot through `qp_pair`. The rule
//! itself is [`super::drain::Slot`], shared with the fabric simulator's
//! engine; this file is only where the program keeps it (the `slot_owner`
//! and `slot_psn` registers) and what it counts (`drain.events`).

use super::drain::{Drain, Event, Slot, PSN_MASK};
use super::hash::drain_hash;
use super::headers::Headers;
use super::ids::DrainIds;
use super::{Twin, TwinError};
use metaroce_pipeline::names::DRAIN_SLOT_COUNT;

/// The BTH opcodes the rule tells apart (`p4src/shared/constants.p4`).
pub const OPCODE_RC_ACK: u8 = 0x11;
const OPCODE_RC_ATOMIC_ACK: u8 = 0x12;
/// The mark in `reserved0[1:0]`.
pub const MARK_GOVERNED: u8 = 2;
pub const MARK_FRESH: u8 = 3;

/// The slot index and signature (31 bits, never 0) of the queue pair
/// (`src`, `dst`, `qp`).
fn locate(src: u32, dst: u32, protocol: u8, qp: u32) -> (u32, u32) {
    let h = drain_hash(src, dst, protocol, qp);
    (h & (DRAIN_SLOT_COUNT - 1), (h >> 1) | 1)
}

impl Twin {
    /// The drain step of routing: `group` is the route's group (0: routed
    /// straight to a host), `edge` whether the packet came from a host.
    /// The caller checked that the packet carries a BTH.
    pub(super) fn drain(&self, h: &mut Headers, group: u16, edge: bool) -> Result<(), TwinError> {
        let Some(ids) = &self.ids.drain else { return Ok(()) };
        let Some(ip) = h.ipv4 else { return Ok(()) };
        let Some(bth) = h.bth.as_mut() else { return Ok(()) };
        let on = matches!(self.lookup(&ids.config, &[], 0)?.params(&ids.configure).as_deref(), Some([1]));
        let psn = bth.psn_word & PSN_MASK;
        if group != 0 {
            if !edge {
                return Ok(());
            }
            bth.reserved0 &= !3;
            let op = (bth.head >> 24) as u8;
            if !on || op >> 5 != 0 || op == OPCODE_RC_ACK || op == OPCODE_RC_ATOMIC_ACK {
                return Ok(());
            }
            bth.reserved0 |= MARK_GOVERNED;
            let (idx, sig) = locate(ip.src, ip.dst, ip.protocol, bth.dest_qp);
            let mut slot = self.drain_slot(ids, idx)?;
            let (verdict, event) = slot.data(sig, psn);
            if verdict == Drain::Fresh {
                bth.reserved0 |= MARK_FRESH;
            }
            self.set_drain_slot(ids, idx, &slot)?;
            self.count_drain(ids, event.into_iter());
            return Ok(());
        }
        let Some(aeth) = h.aeth else { return Ok(()) };
        if !on {
            return Ok(());
        }
        let key = [u128::from(ip.src), u128::from(ip.dst), u128::from(bth.dest_qp)];
        let Some([data_qp]) =
            self.lookup(&ids.qp_pair, &key, 0)?.params(&ids.pair).as_deref().map(|p| [p[0]])
        else {
            self.count_drain(ids, [Event::UnknownAck].into_iter());
            return Ok(());
        };
        let (idx, sig) = locate(ip.dst, ip.src, ip.protocol, data_qp as u32);
        let mut slot = self.drain_slot(ids, idx)?;
        let events = if aeth.syndrome >> 5 & 3 != 0 {
            slot.nak(sig, psn)
        } else {
            slot.ack(sig, psn.wrapping_add(1)).into_iter().collect()
        };
        self.set_drain_slot(ids, idx, &slot)?;
        self.count_drain(ids, events.into_iter());
        Ok(())
    }

    fn drain_slot(&self, ids: &DrainIds, idx: u32) -> Result<Slot, TwinError> {
        Ok(Slot::unpack(self.reg(ids.slot_owner, idx)?, self.reg(ids.slot_psn, idx)?))
    }

    fn set_drain_slot(&self, ids: &DrainIds, idx: u32, slot: &Slot) -> Result<(), TwinError> {
        let (owner, psn) = slot.pack();
        self.set_reg(ids.slot_owner, idx, owner)?;
        self.set_reg(ids.slot_psn, idx, psn)
    }

    fn count_drain(&self, ids: &DrainIds, events: impl Iterator<Item = Event>) {
        for e in events {
            self.count(ids.events, e as u32);
        }
    }
}
