//! The drain rule as the P4 program runs it (`p4src/v1model/drain.p4`):
//! RoCEv2 data entering the fabric at its first leaf gets its mark in the
//! BTH's reserved bits (none, governed, or fresh), and ACKs and NAKs routed
//! to their sender update their data's slot through `qp_pair`. Data that
//! takes a slot, fresh data and ACKs no entry pairs (the last two at most
//! once per `pair_interval_us` per slot, `pair_asked`) raise
//! `drain_pair_digest_t` for the controller. The rule
//! itself is [`super::drain::Slot`], shared with the fabric simulator's
//! engine; this file is only where the program keeps it (the `slot_owner`
//! and `slot_psn` registers) and what it counts (`drain.events`).

use super::drain::{Drain, Event, Slot, PSN_MASK};
use super::hash::drain_hash;
use super::headers::Headers;
use super::ids::DrainIds;
use super::{Twin, TwinError, TIME_MASK};
use metaroce_pipeline::names::DRAIN_SLOT_COUNT;

/// The BTH opcodes the rule tells apart (`p4src/shared/constants.p4`).
pub const OPCODE_RC_ACK: u8 = 0x11;
const OPCODE_RC_ATOMIC_ACK: u8 = 0x12;
/// The mark in `reserved0[1:0]`.
pub const MARK_GOVERNED: u8 = 2;
pub const MARK_FRESH: u8 = 3;
/// `pair_interval_us` until the controller writes the rule's config.
const DEFAULT_PAIR_INTERVAL_US: u64 = 1000;
/// `drain_pair_digest_t` kinds.
const PAIR_DATA: u8 = 0;
const PAIR_ACK: u8 = 1;

/// The slot index and signature (30 bits, never 0) of the queue pair
/// (`src`, `dst`, `qp`).
fn locate(src: u32, dst: u32, protocol: u8, qp: u32) -> (u32, u32) {
    let h = drain_hash(src, dst, protocol, qp);
    (h & (DRAIN_SLOT_COUNT - 1), (h >> 2) | 1)
}

/// A pairing digest to raise: data direction hosts, QP, PSN, kind.
struct PairReport {
    src: u32,
    dst: u32,
    protocol: u8,
    qp: u32,
    psn: u32,
    kind: u8,
}

impl Twin {
    /// The drain step of routing: `group` is the route's group (0: routed
    /// straight to a host), `edge` whether the packet came from a host,
    /// `now` the ingress time. The caller checked that the packet carries a
    /// BTH.
    pub(super) fn drain(
        &mut self,
        h: &mut Headers,
        group: u16,
        edge: bool,
        now: u64,
    ) -> Result<(), TwinError> {
        let report = match &self.ids.drain {
            Some(ids) => self.drain_with(ids, h, group, edge, now)?,
            None => None,
        };
        if let (Some(r), Some(ids)) = (report, &self.ids.drain) {
            let (digest, widths) = (ids.pair_digest, ids.pair_digest_widths.clone());
            let hosts = u128::from(r.src) << 40 | u128::from(r.dst) << 8 | u128::from(r.protocol);
            let report = u128::from(r.kind) << 96
                | u128::from(r.qp & PSN_MASK) << 72
                | u128::from(r.psn) << 48
                | u128::from(now & TIME_MASK);
            let values = [hosts, report];
            self.emit_digest(digest, &widths, &values);
        }
        Ok(())
    }

    fn drain_with(
        &self,
        ids: &DrainIds,
        h: &mut Headers,
        group: u16,
        edge: bool,
        now: u64,
    ) -> Result<Option<PairReport>, TwinError> {
        let (on, interval) = match self.lookup(&ids.config, &[], 0)?.params(&ids.configure).as_deref() {
            Some([on, interval]) => (*on == 1, *interval as u64),
            _ => (false, DEFAULT_PAIR_INTERVAL_US),
        };
        if group != 0 {
            return if edge { self.drain_data(ids, h, on, interval, now) } else { Ok(None) };
        }
        if h.aeth.is_none() || !on {
            return Ok(None);
        }
        self.drain_ack(ids, h, interval, now)
    }

    /// RoCEv2 data entering the fabric: its mark, its slot, and a pairing
    /// report when the slot is taken, or fresh or unconfirmed data once per
    /// interval.
    fn drain_data(
        &self,
        ids: &DrainIds,
        h: &mut Headers,
        on: bool,
        interval: u64,
        now: u64,
    ) -> Result<Option<PairReport>, TwinError> {
        let (Some(ip), Some(bth)) = (h.ipv4, h.bth.as_mut()) else { return Ok(None) };
        bth.reserved0 &= !3;
        let op = (bth.head >> 24) as u8;
        if !on || op >> 5 != 0 || op == OPCODE_RC_ACK || op == OPCODE_RC_ATOMIC_ACK {
            return Ok(None);
        }
        bth.reserved0 |= MARK_GOVERNED;
        let psn = bth.psn_word & PSN_MASK;
        let (idx, sig) = locate(ip.src, ip.dst, ip.protocol, bth.dest_qp);
        let mut slot = self.drain_slot(ids, idx)?;
        let (verdict, event, took) = slot.data(sig, psn);
        if verdict == Drain::Fresh {
            bth.reserved0 |= MARK_FRESH;
        }
        self.set_drain_slot(ids, idx, &slot)?;
        self.count_drain(ids, event.into_iter());
        let report = PairReport {
            src: ip.src,
            dst: ip.dst,
            protocol: ip.protocol,
            qp: bth.dest_qp,
            psn,
            kind: PAIR_DATA,
        };
        if took {
            self.set_reg(ids.pair_asked, idx, u128::from(now))?;
            return Ok(Some(report));
        }
        let unconfirmed = slot.sig == sig && !slot.confirmed;
        Ok(((verdict == Drain::Fresh || unconfirmed) && self.ask(ids, idx, now, interval)?).then_some(report))
    }

    /// An ACK or NAK at its sender's leaf: its data's slot through
    /// `qp_pair`, or, unpaired, a report once per interval per slot its own
    /// key hashes to.
    fn drain_ack(
        &self,
        ids: &DrainIds,
        h: &Headers,
        interval: u64,
        now: u64,
    ) -> Result<Option<PairReport>, TwinError> {
        let (Some(ip), Some(bth), Some(aeth)) = (h.ipv4, h.bth, h.aeth) else { return Ok(None) };
        let psn = bth.psn_word & PSN_MASK;
        let key = [u128::from(ip.src), u128::from(ip.dst), u128::from(bth.dest_qp)];
        let hit = self.lookup(&ids.qp_pair, &key, 0)?;
        let Some(data_qp) = hit.params(&ids.pair).as_deref().and_then(|p| p.first().copied()) else {
            self.count_drain(ids, [Event::UnknownAck].into_iter());
            let (idx, _) = locate(ip.dst, ip.src, ip.protocol, bth.dest_qp);
            let report = PairReport {
                src: ip.dst,
                dst: ip.src,
                protocol: ip.protocol,
                qp: bth.dest_qp,
                psn,
                kind: PAIR_ACK,
            };
            return Ok(self.ask(ids, idx, now, interval)?.then_some(report));
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
        Ok(None)
    }

    /// Whether slot `idx` may report again (its last report is older than
    /// `interval`, or it has none); if so it is stamped `now`.
    fn ask(&self, ids: &DrainIds, idx: u32, now: u64, interval: u64) -> Result<bool, TwinError> {
        let last = self.reg(ids.pair_asked, idx)? as u64;
        if last != 0 && now.wrapping_sub(last) & TIME_MASK < interval {
            return Ok(false);
        }
        self.set_reg(ids.pair_asked, idx, u128::from(now))?;
        Ok(true)
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
