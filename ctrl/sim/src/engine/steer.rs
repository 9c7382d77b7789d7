//! Flow steering and large-flow detection, as the P4 program has them
//! (`p4src/README.md`, "Steering" and "Large flows"), for the engine's own
//! switches.
//!
//! - **Steer entries** pin a flow (per flow: source host, destination host,
//!   UDP source port) or a host pair to one egress port at one switch. The
//!   flowlet forwarder consults them only when a flowlet starts, so a move
//!   takes effect at the flow's next gap and never reorders it; a steered
//!   port that is not a member of the route's group (a failed link the
//!   controller took out) is never used: the packet falls back to the group.
//!   A per-flow entry wins over a pair entry.
//! - **The detector** runs at a flow's first switch (the packet arrived from
//!   a host NIC). Each flow hashes to a slot holding the signature of the
//!   flow that opened the slot's window, the window's start and the bytes
//!   counted in it. The first packet after the window has ended reports it
//!   if it reached the threshold (naming that packet's flow and egress
//!   port), then opens the next: at most one report per slot and window,
//!   and a lost report loses no state (the next window reports again).
//!   Packets of another flow in an open window count into it and flag it,
//!   and the report carries the flag, so a reader can tell a collision
//!   from a rate. A new large flow is also reported at its threshold
//!   crossing, once. One rule with the pipeline twin's (`twin/window.rs`),
//!   which keeps the same state in the P4 registers.

use std::collections::HashMap;

use crate::engine::events::PortId;
use crate::rng::mix64;
use crate::twin::window::{self, Count, Window};

/// What a steer entry matches: a flow, or (with `sport` None) a host pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SteerKey {
    pub src: u32,
    pub dst: u32,
    pub sport: Option<u16>,
}

/// One large-flow report, as the P4 program's digest carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LargeFlow {
    /// The first switch (topology index).
    pub switch: usize,
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    /// The queue pair (the run's QP number): with the UDP source port it
    /// names the flow as the `steer_flow` table does.
    pub qp: u32,
    /// Egress port number the flow left the switch by.
    pub port: u16,
    /// Bytes the flow sent in the window, and the window's length.
    pub bytes: u64,
    pub window_ps: u64,
    /// Another flow used the slot since its last report.
    pub collision: bool,
}

/// The flow a packet belongs to, as the detector names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketFlow {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub qp: u32,
}

/// The detector's settings (the P4 program's config action).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detector {
    pub window_ps: u64,
    pub threshold_bytes: u64,
}

/// Slots per switch, as `LARGE_FLOW_SLOTS` in `sizes.p4` sizes them.
pub const SLOTS: usize = 4096;

/// The engine's steering state: entries, their first use, the detector.
#[derive(Debug, Default)]
pub struct Steering {
    flows: HashMap<(u32, u32, u32, u16), PortId>,
    pairs: HashMap<(u32, u32, u32), PortId>,
    /// Entries written and not yet used by a new flowlet: their tag, when
    /// they were written, and the packets they matched meanwhile that kept
    /// their flowlet's port (not drained yet).
    pending: HashMap<(u32, SteerKey), (u64, u64, u64)>,
    /// From a steer write to the first packet that took it, per write
    /// that landed.
    pub landed_ps: Vec<u64>,
    /// Per write that landed, the packets its switch forwarded for it
    /// after the write and before the one that took it.
    pub landed_after_pkts: Vec<u64>,
    detector: Option<Detector>,
    slots: Vec<Window>,
    /// Flowlets that started on a steer entry.
    pub steered_flowlets: u64,
}

impl Steering {
    /// True when no entry is installed (the forwarder's fast path).
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty() && self.pairs.is_empty()
    }

    /// Installs (`Some`) or removes an entry of switch `switch`; `tag`
    /// names it in the control's "moved" callback.
    pub(crate) fn set(&mut self, now_ps: u64, switch: u32, key: SteerKey, port: Option<PortId>, tag: u64) {
        match (key.sport, port) {
            (Some(sp), Some(p)) => _ = self.flows.insert((switch, key.src, key.dst, sp), p),
            (Some(sp), None) => _ = self.flows.remove(&(switch, key.src, key.dst, sp)),
            (None, Some(p)) => _ = self.pairs.insert((switch, key.src, key.dst), p),
            (None, None) => _ = self.pairs.remove(&(switch, key.src, key.dst)),
        }
        if port.is_some() {
            self.pending.insert((switch, key), (tag, now_ps, 0));
        } else {
            self.pending.remove(&(switch, key));
        }
    }

    /// The entry that applies to a packet at `switch`, and the key it matched.
    pub fn lookup(&self, switch: u32, src: u32, dst: u32, sport: u16) -> Option<(PortId, SteerKey)> {
        if let Some(&p) = self.flows.get(&(switch, src, dst, sport)) {
            return Some((p, SteerKey { src, dst, sport: Some(sport) }));
        }
        self.pairs.get(&(switch, src, dst)).map(|&p| (p, SteerKey { src, dst, sport: None }))
    }

    /// A flowlet started on the entry `key` of `switch`: the tag of the
    /// write it was the first to use, if any.
    pub(crate) fn used(&mut self, now_ps: u64, switch: u32, key: SteerKey) -> Option<u64> {
        self.steered_flowlets += 1;
        let (tag, at, before) = self.pending.remove(&(switch, key))?;
        self.landed_ps.push(now_ps.saturating_sub(at));
        self.landed_after_pkts.push(before);
        Some(tag)
    }

    /// A packet at `switch` kept its flowlet's port: if an entry written
    /// for it waits to be taken, the packet counts against it (the flow
    /// had not drained). Free while nothing waits.
    pub(crate) fn passed(&mut self, switch: u32, src: u32, dst: u32, sport: u16) {
        if self.pending.is_empty() {
            return;
        }
        let flow = SteerKey { src, dst, sport: Some(sport) };
        let key = if self.pending.contains_key(&(switch, flow)) {
            flow
        } else {
            SteerKey { src, dst, sport: None }
        };
        if let Some(p) = self.pending.get_mut(&(switch, key)) {
            p.2 += 1;
        }
    }

    /// Entries written and never taken by a packet (yet).
    pub fn unlanded(&self) -> usize {
        self.pending.len()
    }

    pub(crate) fn set_detector(&mut self, d: Option<Detector>, switches: usize) {
        self.detector = d;
        self.slots = if d.is_some() { vec![Window::default(); switches * SLOTS] } else { Vec::new() };
    }

    pub fn detecting(&self) -> bool {
        self.detector.is_some()
    }

    /// A packet of `bytes` from host `src` entered the fabric at `switch`
    /// and leaves it by port number `port`: a report, if it closed a large
    /// window of its slot or brought a new flow to the threshold.
    pub(crate) fn observe(
        &mut self,
        now_ps: u64,
        switch: usize,
        flow: PacketFlow,
        port: u16,
        bytes: u32,
    ) -> Option<LargeFlow> {
        let d = self.detector?;
        let PacketFlow { src, dst, sport, qp } = flow;
        let h = mix64(u64::from(src) << 40 ^ u64::from(dst) << 16 ^ u64::from(sport));
        let sig = (h >> 32) as u32 | 1;
        let slot = self.slots.get_mut(switch * SLOTS + (h as usize & (SLOTS - 1)))?;
        let elapsed = now_ps.saturating_sub(slot.start);
        let closed = match window::count(
            slot,
            u64::from(sig),
            u64::from(bytes),
            now_ps,
            elapsed,
            d.window_ps,
            d.threshold_bytes,
        ) {
            Count::Counted => return None,
            Count::Crossed(crossed) => crossed,
            Count::Opened(closed) => closed?,
        };
        Some(LargeFlow {
            switch,
            src,
            dst,
            sport,
            qp,
            port,
            bytes: closed.bytes,
            window_ps: closed.elapsed,
            collision: closed.collision,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pf(src: u32, dst: u32, sport: u16) -> PacketFlow {
        PacketFlow { src, dst, sport, qp: 0 }
    }

    #[test]
    fn flow_entries_win_over_pairs_and_removal_restores_the_pair() {
        let mut s = Steering::default();
        s.set(0, 1, SteerKey { src: 1, dst: 2, sport: None }, Some(7), 0);
        s.set(5, 1, SteerKey { src: 1, dst: 2, sport: Some(9) }, Some(8), 1);
        assert_eq!(s.lookup(1, 1, 2, 9).map(|x| x.0), Some(8));
        assert_eq!(s.lookup(1, 1, 2, 10).map(|x| x.0), Some(7));
        assert_eq!(s.lookup(2, 1, 2, 9), None, "entries are per switch");
        s.set(9, 1, SteerKey { src: 1, dst: 2, sport: Some(9) }, None, 2);
        assert_eq!(s.lookup(1, 1, 2, 9).map(|x| x.0), Some(7));
        assert_eq!(s.unlanded(), 1, "the pair entry waits for a packet");
        assert_eq!(s.used(30, 1, SteerKey { src: 1, dst: 2, sport: None }), Some(0));
        assert_eq!(s.used(40, 1, SteerKey { src: 1, dst: 2, sport: None }), None, "only the first use");
        assert_eq!(s.landed_ps, vec![30], "written at 0, taken at 30");
        assert_eq!(s.unlanded(), 0);
    }

    #[test]
    fn packets_that_keep_their_port_count_against_the_waiting_entry() {
        let mut s = Steering::default();
        s.passed(1, 1, 2, 9);
        s.set(0, 1, SteerKey { src: 1, dst: 2, sport: None }, Some(7), 0);
        s.set(0, 1, SteerKey { src: 1, dst: 3, sport: Some(9) }, Some(7), 1);
        for _ in 0..3 {
            s.passed(1, 1, 2, 9); // the pair entry's
        }
        s.passed(1, 1, 3, 9); // the flow entry's
        s.passed(2, 1, 2, 9); // another switch: none of theirs
        assert_eq!(s.used(10, 1, SteerKey { src: 1, dst: 2, sport: None }), Some(0));
        assert_eq!(s.used(10, 1, SteerKey { src: 1, dst: 3, sport: Some(9) }), Some(1));
        assert_eq!(s.landed_after_pkts, vec![3, 1]);
        s.passed(1, 1, 2, 9);
        assert_eq!(s.landed_after_pkts, vec![3, 1], "a landed entry counts nothing more");
    }

    #[test]
    fn the_detector_reports_a_new_flow_at_its_crossing_then_once_per_large_window() {
        let mut s = Steering::default();
        s.set_detector(Some(Detector { window_ps: 1_000_000, threshold_bytes: 10_000 }), 2);
        let mut reports = Vec::new();
        // 4 KiB every 100 ns: 40 KiB per 1 µs window, for 5 µs.
        for i in 0..50u64 {
            reports.extend(s.observe(i * 100_000, 1, pf(3, 4, 49152), 5, 4096));
        }
        assert_eq!(
            reports.len(),
            5,
            "the crossing in window 1, then windows 1-4 closed by a later packet: {reports:?}"
        );
        let r = reports[0];
        assert_eq!((r.switch, r.src, r.dst, r.sport, r.port, r.collision), (1, 3, 4, 49152, 5, false));
        assert_eq!((r.bytes, r.window_ps), (3 * 4096, 200_000), "the third packet crosses 10,000 bytes");
        let r = reports[1];
        assert_eq!((r.bytes, r.window_ps), (10 * 4096, 1_000_000));
        assert!(reports[2..].iter().all(|r| r.bytes == 10 * 4096), "a known flow reports at the close only");
        // A small flow never reports.
        let small: Vec<_> =
            (0..50u64).filter_map(|i| s.observe(i * 100_000, 0, pf(5, 6, 1), 2, 100)).collect();
        assert!(small.is_empty());
    }

    #[test]
    fn a_second_flow_in_a_live_slot_is_flagged() {
        let mut s = Steering::default();
        s.set_detector(Some(Detector { window_ps: 1_000_000, threshold_bytes: 1 }), 1);
        // Find two flows that share a slot.
        let slot_of = |sport: u16| {
            let h = mix64(1u64 << 40 ^ 2u64 << 16 ^ u64::from(sport));
            h as usize & (SLOTS - 1)
        };
        let a = 1u16;
        let Some(b) = (2..u16::MAX).find(|&b| slot_of(b) == slot_of(a)) else {
            panic!("no colliding source port")
        };
        assert!(s.observe(0, 0, pf(1, 2, a), 3, 1000).is_none());
        assert!(s.observe(100_000, 0, pf(1, 2, b), 3, 1000).is_none(), "b counts into a's open window");
        let r = s.observe(2_000_000, 0, pf(1, 2, a), 3, 1000);
        assert_eq!(r.map(|r| (r.sport, r.bytes, r.collision)), Some((a, 2000, true)));
        let r = s.observe(4_000_000, 0, pf(1, 2, a), 3, 1000);
        assert_eq!(r.map(|r| r.collision), Some(false), "a window of one flow is clean");
        let r = s.observe(6_000_000, 0, pf(1, 2, b), 3, 1000);
        assert_eq!(r.map(|r| (r.sport, r.collision)), Some((b, true)), "closed by another flow");
    }
}
