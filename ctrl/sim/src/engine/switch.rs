//! Switches: forwarding, egress queues with ECN marking and buffer limits,
//! and PFC on the ingress side (PAUSE when an ingress holds more than XOFF,
//! RESUME below XON), which makes congestion spread hop by hop.

use super::{Sim, View};
use crate::events::{Ev, Packet, PortId};
use crate::forward::{PacketInfo, Route};
use crate::net::Node;

/// Bytes of a PAUSE frame on the wire.
const PAUSE_FRAME_BYTES: u64 = 64;

impl Sim<'_> {
    pub(super) fn switch_arrive(&mut self, s: u32, in_port: PortId, p: Packet) {
        if self.fwd.is_pipeline() {
            self.pipeline_arrive(s, in_port, p);
            return;
        }
        let egress = if p.dst_leaf == s {
            self.ports.to_host(p.dst_host as usize)
        } else {
            let (group, total) = self.ports.group(s, p.dest);
            if group.is_empty() {
                // No route: the topology's validation makes this rare, but a
                // partitioned fabric must not crash the run.
                self.stats.drops += 1;
                self.gone();
                return;
            }
            let info = PacketInfo {
                tuple_hash: p.tuple_hash,
                src: p.src_host as usize,
                dst: p.dst_host as usize,
                sport: p.sport,
                bytes: p.bytes,
            };
            let i = self.fwd.choose(self.now, s, group, total, &info, &View(&self.st));
            let port = group[i.min(group.len() - 1)].port;
            if !self.watch.is_empty() {
                self.check_moved(s, p.dest, port);
            }
            port
        };
        if self.st[egress as usize].down {
            // Routed into a dead link: lost until routing moves off it.
            self.stats.blackholed += 1;
            self.gone();
            return;
        }
        self.enqueue(egress, in_port, p);
    }

    /// A switch whose forwarding is a whole pipeline (the served twin).
    fn pipeline_arrive(&mut self, s: u32, in_port: PortId, p: Packet) {
        let arrived_on = self.ports.arrival_number(in_port);
        let route = self.fwd.route(self.now, s, arrived_on, &p).unwrap_or(Route::Drop);
        let end = metaroce_topo::Endpoint { switch: s as usize, port: 0 };
        match route {
            Route::Port(no) => match self.ports.by_end(metaroce_topo::Endpoint { port: no, ..end }) {
                Some(egress) if !self.st[egress as usize].down => self.enqueue(egress, in_port, p),
                _ => {
                    self.stats.blackholed += 1;
                    self.gone();
                }
            },
            Route::Drop => {
                self.stats.drops += 1;
                self.gone();
            }
        }
    }

    fn enqueue(&mut self, egress: PortId, in_port: PortId, mut p: Packet) {
        let e = egress as usize;
        let bytes = u64::from(p.bytes);
        let depth = self.st[e].qbytes;
        let spec = &self.ports.specs[e];
        if !self.net.lossless && depth + bytes > spec.buffer {
            self.stats.drops += 1;
            self.gone();
            return;
        }
        if let Some(ecn) = self.net.ecn {
            if depth > ecn.kmin_bytes {
                let prob = if depth >= ecn.kmax_bytes {
                    1.0
                } else {
                    ecn.pmax * (depth - ecn.kmin_bytes) as f64 / (ecn.kmax_bytes - ecn.kmin_bytes) as f64
                };
                if self.rng.unit() < prob && !p.ce {
                    p.ce = true;
                    self.stats.ecn_marks += 1;
                }
            }
        }
        self.stats.enqueued(e, usize::from(spec.class), self.now, depth, depth + bytes);
        p.in_port = in_port;
        let st = &mut self.st[e];
        st.queue.push_back(p);
        st.qbytes += bytes;
        if self.net.lossless {
            self.ingress_add(in_port, bytes);
        }
        self.try_send(egress);
    }

    /// Accounts bytes held from `in_port`; sends PAUSE upstream past XOFF.
    fn ingress_add(&mut self, in_port: PortId, bytes: u64) {
        let i = in_port as usize;
        let spec = &self.ports.specs[i];
        let st = &mut self.st[i];
        st.ingress += bytes;
        if st.ingress > spec.xoff.saturating_add(spec.headroom) {
            // Headroom too small for what was in flight: a real switch would
            // drop here. Counted, so lossless runs can prove it never happens.
            self.stats.headroom_overflows += 1;
        }
        if st.ingress >= spec.xoff && !st.pause_sent {
            st.pause_sent = true;
            self.stats.pause_frames += 1;
            let t = self.now + spec.delay_ps + spec.ser_ps(PAUSE_FRAME_BYTES);
            self.q.push(t, Ev::Pause { port: in_port, on: true });
        }
    }

    pub(super) fn ingress_release(&mut self, in_port: PortId, bytes: u64) {
        let i = in_port as usize;
        let spec = &self.ports.specs[i];
        let st = &mut self.st[i];
        st.ingress = st.ingress.saturating_sub(bytes);
        if st.pause_sent && st.ingress <= spec.xon {
            st.pause_sent = false;
            self.stats.pause_frames += 1;
            let t = self.now + spec.delay_ps + spec.ser_ps(PAUSE_FRAME_BYTES);
            self.q.push(t, Ev::Pause { port: in_port, on: false });
        }
    }

    /// Starts the next queued packet on a switch port, if it may send.
    pub(super) fn try_send(&mut self, port: PortId) {
        if self.st[port as usize].queue.is_empty() || !self.port_ready(port) {
            return;
        }
        let st = &mut self.st[port as usize];
        let Some(mut p) = st.queue.pop_front() else { return };
        st.qbytes -= u64::from(p.bytes);
        if self.fwd.is_pipeline() {
            if let Node::Switch(s) = self.ports.specs[port as usize].from {
                let (left, was_ce) = (self.st[port as usize].queue.len(), p.ce);
                self.fwd.egress(self.now, s, self.ports.number[port as usize], left, &mut p);
                self.stats.ecn_marks += u64::from(p.ce && !was_ce);
            }
        }
        if self.net.lossless {
            self.ingress_release(p.in_port, u64::from(p.bytes));
        }
        self.start_tx(port, p);
        if self.control.is_some() {
            self.sense_dequeue(port);
        }
    }

    /// A PAUSE or RESUME frame reaches the sender of `port`.
    pub(super) fn pause(&mut self, port: PortId, on: bool) {
        let p = port as usize;
        // A dead link carries no PAUSE frames.
        if self.st[p].paused == on || self.st[p].down {
            return;
        }
        self.st[p].paused = on;
        if on {
            self.stats.pauses[p] += 1;
            self.stats.paused_since[p] = self.now;
            self.measure_tree(port);
        } else {
            self.stats.paused_ps[p] += self.now - self.stats.paused_since[p];
            match self.ports.specs[p].from {
                Node::Host(h) => self.nic_kick(h as usize),
                Node::Switch(_) => self.try_send(port),
            }
        }
    }

    fn node_index(&self, n: Node) -> usize {
        match n {
            Node::Switch(s) => s as usize,
            Node::Host(h) => self.topo.switches.len() + h as usize,
        }
    }

    /// Size of the congestion tree `port` now belongs to: the paused links
    /// connected to it through the nodes they join.
    fn measure_tree(&mut self, port: PortId) {
        self.generation = self.generation.wrapping_add(1).max(1);
        let g = self.generation;
        let nodes = self.topo.switches.len() + self.topo.hosts.len();
        let start = self.node_index(self.ports.specs[port as usize].from);
        let mut stack = vec![start];
        let mut node_seen = vec![false; nodes];
        node_seen[start] = true;
        let (mut links, mut switches, mut hosts) = (0u32, 0u32, 0u32);
        while let Some(n) = stack.pop() {
            if n < self.topo.switches.len() {
                switches += 1;
            } else {
                hosts += 1;
            }
            for &p in &self.node_ports[n] {
                if !self.st[p as usize].paused || self.stamp[p as usize] == g {
                    continue;
                }
                self.stamp[p as usize] = g;
                links += 1;
                let spec = &self.ports.specs[p as usize];
                for m in [self.node_index(spec.from), self.node_index(spec.to)] {
                    if !node_seen[m] {
                        node_seen[m] = true;
                        stack.push(m);
                    }
                }
            }
        }
        if links > self.stats.largest_tree.links {
            self.stats.largest_tree = crate::stats::Tree { links, switches, hosts, at_ps: self.now };
        }
    }
}
