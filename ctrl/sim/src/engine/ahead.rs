//! Reading ahead: before it runs an event, the event loop asks the CPU to
//! start loading what events a few places later in the same slot will
//! touch, so that by the time they run it is in cache.
//!
//! A big run is bound by cache misses, not instructions: every large item
//! of its profile is one record touched once per packet and hop (the slot
//! of a port's ring a packet is queued into or sent from, a queue pair's
//! hot record, a message's receive state, the packet its arrival carries),
//! each on a line nothing touched for microseconds. The order of events is
//! known a few dozen ahead (a slot holds about 60 on a 1,024-host
//! All-to-All, sorted when the wheel reaches it), and what most of them
//! will touch can be worked out from the event and the records it names.
//! The hints are prefetch instructions, which the CPU may drop and whose
//! data nothing waits for: an earlier try with plain loads, whose values
//! were thrown away, was 13% slower, as a load that misses holds up the
//! retirement of everything after it. They do wait for a free miss
//! buffer, though: a profile of the 1,024-host run puts many samples
//! right after them, a sign that the core already has as many misses in
//! flight as it can, which is why this gains about a tenth and not the
//! misses' whole share (see the crate README).
//!
//! Three stages, each at its own distance: the first names records from
//! the event alone (the packet, a port's queue, a NIC, a message), the
//! second reads those (in cache by then) to name what they point at (the
//! slot a port's queue sends from, the receive state, the egress queue of
//! an arrival whose route is known or hashed), the third reads one more
//! level (the queue pair a NIC sends from next, the slot an egress queue
//! receives into). Nothing here changes the simulation: a wrong guess
//! costs a wasted load, never a different result (`tests/sim-identity.sh`:
//! reports identical).

use prefetch_index::prefetch_index;

use super::{Packet, Sim};
use crate::engine::events::{Ev, PortId};
use crate::engine::flows::tuple_hash;
use crate::engine::net::Node;

/// How many events ahead of the next one each stage looks.
const FIRST: usize = 12;
const SECOND: usize = 8;
const THIRD: usize = 4;
/// Places in [`Ahead::egress`]: more than `SECOND - THIRD`, a power of two.
const MEMO: usize = 8;

/// What the second stage worked out for the third: the egress of an
/// arrival (hashing it again would cost as much as the rest of reading
/// ahead), at the place of the loop's event count when the third stage
/// will look, tagged with the arrival's port and packet index (a stale or
/// wrong entry only costs a wasted hint).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Ahead {
    egress: [(PortId, u32, PortId); MEMO],
}

/// Hints the cache line that holds `x`.
#[inline(always)]
fn touch<T>(x: &T) {
    prefetch_index(std::slice::from_ref(x), 0);
}

impl Sim<'_> {
    /// Starts the loads of the events ahead of the next one.
    #[inline]
    pub(super) fn read_ahead(&mut self) {
        if let Some(ev) = self.q.ahead(FIRST) {
            self.ahead_first(ev);
        }
        if let Some(ev) = self.q.ahead(SECOND) {
            self.ahead_second(ev);
        }
        if let Some(ev) = self.q.ahead(THIRD) {
            self.ahead_third(ev);
        }
    }

    /// What the event names itself.
    #[inline]
    fn ahead_first(&self, ev: Ev) {
        match ev {
            Ev::Arrive { port, pkt } => {
                prefetch_index(self.q.packets(), pkt as usize);
                prefetch_index(&self.ports.to, port as usize);
            }
            Ev::TxDone { port } => {
                let p = port as usize;
                // The port's timing, for the packet it starts next.
                prefetch_index(&self.ports.specs, p);
                if let Some(nic) = self.nics.get(p) {
                    for c in 0..self.ntc {
                        touch(&nic.ready[c]);
                    }
                    // Its rate-limited queue pairs, checked first.
                    touch(&nic.waiting);
                } else {
                    prefetch_index(&self.st, p);
                    prefetch_index(&self.tcs, p * self.ntc);
                }
            }
            Ev::Ctl { port, flow, .. } => {
                prefetch_index(&self.w.flows, flow as usize);
                prefetch_index(&self.ports.to, port as usize);
                prefetch_index(&self.st, port as usize);
            }
            Ev::Cnp { qp } => {
                prefetch_index(&self.w.qps, qp as usize);
                prefetch_index(&self.w.hot, qp as usize);
            }
            Ev::NicWake { host } => {
                if let Some(nic) = self.nics.get(host as usize) {
                    for c in 0..self.ntc {
                        touch(&nic.ready[c]);
                    }
                    touch(&nic.waiting);
                }
            }
            // A retransmission timer reads its message and queue pair (a
            // million of them on a 1,024-host All-to-All, each cold).
            Ev::Rto { flow, .. } => prefetch_index(&self.w.flows, flow as usize),
            _ => {}
        }
    }

    /// What the records the first stage named point at.
    #[inline]
    fn ahead_second(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { port, pkt } => {
                let Some(p) = self.q.packet(pkt) else { return };
                let i = port as usize;
                if (self.ports.hosts..2 * self.ports.hosts).contains(&i) {
                    // Down to a host: its receive state.
                    prefetch_index(&self.w.rcv, p.flow as usize);
                    return;
                }
                if self.tc_lossless[usize::from(p.tc) & 7] {
                    // PFC's accounting of what arrived over the port.
                    prefetch_index(&self.ingress, i * self.ntc + usize::from(p.tc));
                }
                if let Some(e) = self.known_egress(port, &p) {
                    prefetch_index(&self.ports.specs, e as usize);
                    prefetch_index(&self.st, e as usize);
                    prefetch_index(&self.tcs, e as usize * self.ntc + usize::from(p.tc));
                    let at = (self.events as usize + SECOND - THIRD) % MEMO;
                    self.ahead.egress[at] = (port, pkt, e);
                }
            }
            Ev::TxDone { port } => {
                let p = port as usize;
                if let Some(nic) = self.nics.get(p) {
                    for c in 0..self.ntc {
                        let (ready, _) = nic.ready[c].as_slices();
                        prefetch_index(ready, 0);
                    }
                    // The earliest of them (the heap's top).
                    prefetch_index(nic.waiting.as_slice(), 0);
                } else {
                    self.ahead_head(port);
                }
            }
            Ev::Ctl { flow, .. } => {
                if let Some(f) = self.w.flows.get(flow as usize) {
                    prefetch_index(&self.w.qps, f.qp as usize);
                    prefetch_index(&self.w.hot, f.qp as usize);
                }
            }
            Ev::NicWake { host } => {
                if let Some(nic) = self.nics.get(host as usize) {
                    for c in 0..self.ntc {
                        let (ready, _) = nic.ready[c].as_slices();
                        prefetch_index(ready, 0);
                    }
                    prefetch_index(nic.waiting.as_slice(), 0);
                }
            }
            Ev::Rto { flow, .. } => {
                if let Some(f) = self.w.flows.get(flow as usize) {
                    prefetch_index(&self.w.hot, f.qp as usize);
                }
            }
            _ => {}
        }
    }

    /// One level further: the slot a switch queue receives the packet into,
    /// the queue pair a NIC sends from next.
    #[inline]
    fn ahead_third(&self, ev: Ev) {
        match ev {
            Ev::Arrive { port, pkt } => {
                let (p, k, e) = self.ahead.egress[self.events as usize % MEMO];
                if (p, k) != (port, pkt) {
                    return;
                }
                let Some(c) = self.q.packet(pkt).map(|p| usize::from(p.tc)) else { return };
                if let Some(t) = self.tcs.get(e as usize * self.ntc + c) {
                    // The slot after the last: where `push_back` writes.
                    let (a, b) = t.queue.as_slices();
                    if b.is_empty() {
                        prefetch_index(a, a.len());
                    } else {
                        prefetch_index(b, b.len());
                    }
                }
            }
            Ev::TxDone { port } => {
                if (port as usize) < self.nics.len() {
                    self.ahead_nic_next(port as usize);
                } else {
                    self.ahead_ingress(port);
                }
            }
            Ev::NicWake { host } => self.ahead_nic_next(host as usize),
            _ => {}
        }
    }

    /// The queue pairs NIC `h` sends from next (the first of each class
    /// ready; the earliest rate-limited one).
    #[inline]
    fn ahead_nic_next(&self, h: usize) {
        let Some(nic) = self.nics.get(h) else { return };
        for c in 0..self.ntc {
            if let Some(&qp) = nic.ready[c].front() {
                prefetch_index(&self.w.hot, qp as usize);
            }
        }
        if let Some(&std::cmp::Reverse((_, qp, _))) = nic.waiting.peek() {
            prefetch_index(&self.w.hot, qp as usize);
        }
    }

    /// Where a switch port's next packets came in (the slots they leave
    /// from were hinted a stage before): PFC's accounting of their
    /// ingress ports, which the dequeue releases.
    #[inline]
    fn ahead_ingress(&self, port: PortId) {
        let Some(st) = self.st.get(port as usize) else { return };
        for c in 0..self.ntc {
            if st.backlog & (1 << c) != 0 && self.tc_lossless[c & 7] {
                if let Some(p) = self.tcs.get(port as usize * self.ntc + c).and_then(|t| t.queue.front()) {
                    prefetch_index(&self.ingress, p.in_port as usize * self.ntc + c);
                }
            }
        }
    }

    /// The slot each class of switch port `port` with packets queued sends
    /// from next.
    #[inline]
    fn ahead_head(&self, port: PortId) {
        let st = &self.st[port as usize];
        for c in 0..self.ntc {
            if st.backlog & (1 << c) != 0 {
                if let Some(t) = self.tcs.get(port as usize * self.ntc + c) {
                    let (a, _) = t.queue.as_slices();
                    prefetch_index(a, 0);
                }
            }
        }
    }

    /// The port a switch will queue `p` on when it arrives over `port`,
    /// where routing leaves no choice (down to a host on its leaf, a group
    /// of one member: a spine's way down to a leaf) or the forwarder can
    /// tell without a change to its state ([`crate::control::forward::Forwarder::peek`]: ECMP's
    /// hash). None where it cannot (flowlets, spraying, the controller's
    /// steering keep state, and are not asked early).
    #[inline]
    fn known_egress(&self, port: PortId, p: &Packet) -> Option<PortId> {
        if self.pipeline {
            return None;
        }
        let Node::Switch(s) = *self.ports.to.get(port as usize)? else { return None };
        let &(dst_leaf, dest) = self.host_dest.get(p.dst_host as usize)?;
        if dst_leaf == s {
            return Some(self.ports.to_host(p.dst_host as usize));
        }
        match self.ports.group(s, dest) {
            ([], _) => None,
            ([only], _) => Some(only.port),
            (group, total) => {
                let hosts = &self.w.hosts;
                let (src, dst) = (hosts.get(p.src_host as usize)?, hosts.get(p.dst_host as usize)?);
                let i = self.fwd.peek(s, group, total, tuple_hash(src.ip, dst.ip, p.sport))?;
                group.get(i).map(|m| m.port)
            }
        }
    }
}
