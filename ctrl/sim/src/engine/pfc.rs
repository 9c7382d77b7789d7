//! Priority flow control (802.1Qbb) and the scheduler between traffic
//! classes.
//!
//! A run keeps one traffic class per priority its jobs use. Every switch
//! port has a queue per class; bytes are accounted per (ingress port,
//! class), and a lossless class past XOFF sends a PAUSE for its own
//! priority upstream (RESUME at XON), so a paused priority stops only its
//! own queue: other classes on the same link keep sending. Lossy classes
//! never pause; they drop at the egress buffer instead.
//!
//! Between the classes of a port, deficit weighted round-robin with equal
//! quanta of one full packet (ETS, 802.1Qaz, with equal shares — what RoCE
//! fabrics configure so that neither the lossless class nor the lossy one
//! starves the other). Strict priority would let a saturated lossless
//! class starve lossy traffic and hide how the two interact.

use std::collections::VecDeque;

use super::Sim;
use crate::engine::events::{Ev, Packet, PortId};
use crate::engine::net::Node;
use crate::report::stats::Tree;

/// Bytes of a PAUSE frame on the wire.
const PAUSE_FRAME_BYTES: u64 = 64;

/// One traffic class of one port: its egress queue and the DWRR deficit.
/// One cache line each, so that reading ahead (`ahead.rs`) names all of it
/// with one hint.
#[derive(Debug, Clone, Default)]
#[repr(align(64))]
pub struct TcState {
    pub queue: VecDeque<Packet>,
    pub qbytes: u64,
    /// DWRR credit, bytes.
    pub deficit: u32,
}

/// PFC's accounting, at the far switch, of what arrived over one port in
/// one class, with the port's thresholds: one line that a packet's
/// arrival and its departure from the far switch touch, where the bytes
/// (in the port's [`TcState`] before) and the thresholds (in the second
/// line of its [`crate::engine::net::PortSpec`]) were two.
#[derive(Debug, Clone, Default)]
#[repr(align(64))]
pub struct Ingress {
    /// Bytes of this class that arrived over this port and still sit in
    /// the far switch.
    pub bytes: u64,
    pub pause_sent: bool,
    /// The port's XOFF and XON thresholds, and XOFF plus the headroom
    /// (beyond it a real switch would drop).
    xoff: u64,
    xon: u64,
    limit: u64,
}

impl Ingress {
    pub fn new(spec: &crate::engine::net::PortSpec) -> Self {
        Ingress {
            bytes: 0,
            pause_sent: false,
            xoff: spec.xoff,
            xon: spec.xon,
            limit: spec.xoff.saturating_add(spec.headroom),
        }
    }
}

impl Sim<'_> {
    /// DWRR: the class `port` sends from next, among `eligible` (a bit per
    /// class: queued and not paused; not zero). The class served last
    /// keeps the port while its credit lasts; then the next eligible class
    /// gets one quantum, which always covers one packet.
    pub(super) fn dwrr(&mut self, port: PortId, eligible: u8) -> usize {
        let base = port as usize * self.ntc;
        let mut c = usize::from(self.st[port as usize].rr);
        loop {
            if eligible & (1 << c) != 0 {
                let t = &mut self.tcs[base + c];
                let head = t.queue.front().map_or(0, |p| u32::from(p.bytes));
                if t.deficit >= head {
                    t.deficit -= head;
                    self.st[port as usize].rr = c as u8;
                    return c;
                }
            }
            c = (c + 1) % self.ntc;
            if eligible & (1 << c) != 0 {
                self.tcs[base + c].deficit += self.quantum;
            }
        }
    }

    /// Accounts bytes of class `tc` held from `in_port`; sends PAUSE for
    /// that priority upstream past XOFF.
    pub(super) fn ingress_add(&mut self, in_port: PortId, tc: u8, bytes: u64) {
        let i = in_port as usize;
        let t = &mut self.ingress[i * self.ntc + usize::from(tc)];
        t.bytes += bytes;
        if t.bytes > t.limit {
            // Headroom too small for what was in flight: a real switch would
            // drop here. Counted, so lossless runs can prove it never happens.
            self.stats.headroom_overflows += 1;
        }
        if t.bytes >= t.xoff && !t.pause_sent {
            t.pause_sent = true;
            self.send_pause(in_port, tc, true);
        }
    }

    pub(super) fn ingress_release(&mut self, in_port: PortId, tc: u8, bytes: u64) {
        let i = in_port as usize;
        let t = &mut self.ingress[i * self.ntc + usize::from(tc)];
        t.bytes = t.bytes.saturating_sub(bytes);
        if t.pause_sent && t.bytes <= t.xon {
            t.pause_sent = false;
            self.send_pause(in_port, tc, false);
        }
    }

    /// A PAUSE (`on`) or RESUME frame for class `tc` goes back up `in_port`.
    #[cold]
    fn send_pause(&mut self, in_port: PortId, tc: u8, on: bool) {
        self.stats.pause_frames += 1;
        let spec = &self.ports.specs[in_port as usize];
        let at = self.now + spec.delay_ps + spec.ser_ps(PAUSE_FRAME_BYTES);
        self.q.push(at, Ev::Pause { port: in_port, tc, on });
    }

    /// A PAUSE or RESUME frame for class `tc` reaches the sender of `port`.
    pub(super) fn pause(&mut self, port: PortId, tc: u8, on: bool) {
        let p = port as usize;
        let bit = 1u8 << tc;
        // A dead link carries no PAUSE frames.
        if (self.st[p].paused & bit != 0) == on || self.st[p].down {
            return;
        }
        self.st[p].paused ^= bit;
        let k = p * self.ntc + usize::from(tc);
        self.track_paused(port, tc, on);
        if on {
            self.stats.pauses[k] += 1;
            if let Some(n) = self.stats.span_pauses.last_mut() {
                *n += 1;
            }
            self.stats.paused_since[k] = self.now;
            self.measure_tree(port, tc);
        } else {
            self.stats.paused_ps[k] += self.now - self.stats.paused_since[k];
            match self.ports.specs[p].from {
                Node::Host(h) => self.nic_kick(h as usize),
                Node::Switch(_) => self.try_send(port),
            }
        }
    }

    /// Ends every pause `port` is under (its link died), counting the time.
    pub(super) fn unpause_all(&mut self, port: PortId) {
        let p = port as usize;
        for c in 0..self.ntc {
            if self.st[p].paused & (1 << c) != 0 {
                let k = p * self.ntc + c;
                self.stats.paused_ps[k] += self.now - self.stats.paused_since[k];
                self.track_paused(port, c as u8, false);
            }
        }
        self.st[p].paused = 0;
    }

    fn node_index(&self, n: Node) -> usize {
        match n {
            Node::Switch(s) => s as usize,
            Node::Host(h) => self.topo.switches.len() + h as usize,
        }
    }

    /// Keeps [`Sim::paused_at`] in step with a pause of `port` in class
    /// `tc` starting or ending.
    fn track_paused(&mut self, port: PortId, tc: u8, on: bool) {
        let spec = &self.ports.specs[port as usize];
        let ends = [self.node_index(spec.from), self.node_index(spec.to)];
        for n in ends {
            let list = &mut self.trees.paused_at[n * self.ntc + usize::from(tc)];
            if on {
                list.push(port);
            } else if let Some(i) = list.iter().position(|&p| p == port) {
                list.swap_remove(i);
            }
        }
    }

    /// Size of the congestion tree of class `tc` that `port` now belongs
    /// to: the links paused in that class connected to it through the
    /// nodes they join. Walks paused links only, so a pause costs the size
    /// of its tree, not the degree of every node in it.
    fn measure_tree(&mut self, port: PortId, tc: u8) {
        self.trees.generation = self.trees.generation.wrapping_add(1).max(1);
        let start = self.node_index(self.ports.specs[port as usize].from);
        let tree = self.walk_tree(start, usize::from(tc), self.trees.generation);
        self.stats.tree_seen(usize::from(tc), tree);
    }

    /// The tree of class `c` around node `start`, marking what it visits
    /// with walk `g`.
    fn walk_tree(&mut self, start: usize, c: usize, g: u32) -> Tree {
        let ntc = self.ntc;
        let mut stack = std::mem::take(&mut self.trees.tree_stack);
        stack.push(start);
        self.trees.node_stamp[start] = g;
        let (mut links, mut switches, mut hosts) = (0u32, 0u32, 0u32);
        while let Some(n) = stack.pop() {
            if n < self.topo.switches.len() {
                switches += 1;
            } else {
                hosts += 1;
            }
            for k in 0..self.trees.paused_at[n * ntc + c].len() {
                let p = self.trees.paused_at[n * ntc + c][k] as usize;
                if self.trees.stamp[p] == g {
                    continue;
                }
                self.trees.stamp[p] = g;
                links += 1;
                let spec = &self.ports.specs[p];
                for m in [self.node_index(spec.from), self.node_index(spec.to)] {
                    if self.trees.node_stamp[m] != g {
                        self.trees.node_stamp[m] = g;
                        stack.push(m);
                    }
                }
            }
        }
        self.trees.tree_stack = stack;
        Tree { links, switches, hosts, at_ps: self.now }
    }

    /// A job iteration starts or ends: a new span of the per-iteration
    /// congestion tree figure begins, holding the largest tree standing
    /// now (it stood in the iteration that starts, too). Walks every
    /// paused link once (a mark is rare: a scan of the nodes costs
    /// nothing next to an iteration's packets).
    #[cold]
    #[inline(never)]
    pub(super) fn mark_tree_span(&mut self) {
        if self.stats.tree_spans.last().is_some_and(|&(t, _)| t == self.now) {
            return;
        }
        let mut largest = Tree { at_ps: self.now, ..Tree::default() };
        for c in 0..self.ntc {
            self.trees.generation = self.trees.generation.wrapping_add(1).max(1);
            let g = self.trees.generation;
            for n in 0..self.trees.node_stamp.len() {
                if self.trees.node_stamp[n] != g && !self.trees.paused_at[n * self.ntc + c].is_empty() {
                    let tree = self.walk_tree(n, c, g);
                    if tree.links > largest.links {
                        largest = tree;
                    }
                }
            }
        }
        self.stats.tree_spans.push((self.now, largest));
        self.stats.span_pauses.push(0);
    }
}
