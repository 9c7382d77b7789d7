//! Switches: forwarding, and egress queues per (port, traffic class) with
//! ECN marking and buffer limits; PFC and the scheduler between classes
//! are in `pfc.rs`.

use super::{Sim, View};
use crate::control::forward::{PacketInfo, Route};
use crate::engine::events::{Packet, PortId};
use crate::engine::flows::tuple_hash;
use crate::engine::net::Node;

impl Sim<'_> {
    pub(super) fn switch_arrive(&mut self, s: u32, in_port: PortId, mut p: Packet) {
        if self.pipeline {
            self.pipeline_arrive(s, in_port, p);
            return;
        }
        let (dst_leaf, dest) = self.host_dest[p.dst_host as usize];
        let from_host = (in_port as usize) < self.ports.hosts;
        if from_host && self.drain.is_some() && dst_leaf != s {
            p.fresh = self.drain_data(s, &p);
        }
        let egress = if dst_leaf == s {
            self.ports.to_host(p.dst_host as usize)
        } else {
            let (group, total) = self.ports.group(s, dest);
            if group.is_empty() {
                // No route: the topology's validation makes this rare, but a
                // partitioned fabric must not crash the run.
                self.drop_packet(p.tc);
                return;
            }
            let hosts = &self.w.hosts;
            let info = PacketInfo {
                tuple_hash: tuple_hash(hosts[p.src_host as usize].ip, hosts[p.dst_host as usize].ip, p.sport),
                src: p.src_host as usize,
                dst: p.dst_host as usize,
                sport: p.sport,
                bytes: u32::from(p.bytes),
                fresh: p.fresh,
            };
            let i = self.fwd.choose(self.now, s, group, total, &info, &View(&self.st, &self.steer));
            let port = group[i.min(group.len() - 1)].port;
            if let Some(cause) = self.fwd.moved() {
                if let Some(f) = self.w.flows.get_mut(p.flow as usize) {
                    f.move_cause = cause as u8;
                }
            }
            if !self.ctl.watch.is_empty() {
                self.check_moved(s, dest, port);
            }
            if let Some(key) = self.fwd.steered() {
                self.steer_used(s, key);
            } else {
                self.steer.passed(s, p.src_host, p.dst_host, p.sport);
            }
            // The detector counts what enters the fabric from a host and is
            // routed to a group, as the P4 program does.
            if from_host && self.steer.detecting() {
                self.detect(s, port, &p);
            }
            port
        };
        p.route = p.route.rotate_left(3) ^ (egress ^ egress >> 8 ^ egress >> 16) as u8;
        if self.st[egress as usize].down {
            // Routed into a dead link: lost until routing moves off it.
            self.stats.blackholed += 1;
            self.gone();
            return;
        }
        self.enqueue(egress, in_port, p);
    }

    /// The drain rule at the flow's first leaf `s` (`twin/drain.rs`): true
    /// when nothing of the packet's queue pair is in flight.
    fn drain_data(&mut self, s: u32, p: &Packet) -> bool {
        let Some(f) = self.w.flows.get(p.flow as usize) else { return false };
        let psn = super::host::qp_psn(f, p.psn);
        let Some(d) = self.drain.as_mut() else { return false };
        d.on_data(s as usize, u64::from(f.qp), psn) == crate::twin::drain::Drain::Fresh
    }

    /// A switch whose forwarding is a whole pipeline (the served twin).
    fn pipeline_arrive(&mut self, s: u32, in_port: PortId, mut p: Packet) {
        let arrived_on = self.ports.arrival_number(in_port);
        let wire_psn = self.w.flows.get(p.flow as usize).map_or(p.psn, |f| super::host::qp_psn(f, p.psn));
        let route = self.fwd.route(self.now, s, arrived_on, &p, wire_psn).unwrap_or(Route::Drop);
        match route {
            Route::Port(port) => {
                match self.ports.by_end(metaroce_topo::Endpoint { switch: s as usize, port }) {
                    Some(egress) if !self.st[egress as usize].down => {
                        p.route = p.route.rotate_left(3) ^ (egress ^ egress >> 8 ^ egress >> 16) as u8;
                        self.enqueue(egress, in_port, p)
                    }
                    _ => {
                        self.stats.blackholed += 1;
                        self.gone();
                    }
                }
            }
            Route::Drop => self.drop_packet(p.tc),
        }
    }

    /// A switch lost a packet (no route, lossy queue full, pipeline drop).
    pub(super) fn drop_packet(&mut self, tc: u8) {
        self.stats.drops += 1;
        self.stats.drops_by_tc[usize::from(tc)] += 1;
        self.gone();
    }

    /// Queues `p` on `egress` in its traffic class. A lossy class drops
    /// past the port's buffer; ECN marks on the class's own queue depth.
    fn enqueue(&mut self, egress: PortId, in_port: PortId, mut p: Packet) {
        let e = egress as usize;
        let c = usize::from(p.tc);
        let bytes = u64::from(p.bytes);
        let ti = e * self.ntc + c;
        let depth = self.tcs[ti].qbytes;
        let spec = &self.ports.specs[e];
        let lossless = self.tc_lossless[c];
        if !lossless && depth + bytes > spec.buffer {
            self.drop_packet(p.tc);
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
        let st = &mut self.st[e];
        let port_depth = st.qbytes;
        st.qbytes += bytes;
        st.backlog |= 1 << c;
        let class = usize::from(spec.class);
        self.stats.enqueued(&mut self.st[..], e, class, self.now, port_depth, port_depth + bytes);
        p.in_port = in_port;
        let t = &mut self.tcs[ti];
        t.queue.push_back(p);
        t.qbytes += bytes;
        if lossless {
            self.ingress_add(in_port, p.tc, bytes);
        }
        self.try_send(egress);
    }

    /// Starts the next queued packet on a switch port, if it may send:
    /// from the class the scheduler picks among those queued and not paused.
    pub(super) fn try_send(&mut self, port: PortId) {
        let st = &self.st[port as usize];
        let eligible = st.backlog & !st.paused;
        if eligible == 0 || !self.port_ready(port) {
            return;
        }
        let c = if self.ntc == 1 { 0 } else { self.dwrr(port, eligible) };
        let ti = port as usize * self.ntc + c;
        let t = &mut self.tcs[ti];
        let Some(mut p) = t.queue.pop_front() else { return };
        let bytes = u64::from(p.bytes);
        t.qbytes -= bytes;
        let emptied = t.queue.is_empty();
        if emptied {
            t.deficit = 0;
            // Back to the start of its ring, which the last packets made
            // hot: a ring walked round its whole capacity misses the
            // cache at nearly every packet.
            t.queue.clear();
        }
        let st = &mut self.st[port as usize];
        st.qbytes -= bytes;
        if emptied {
            st.backlog &= !(1 << c);
        }
        if self.pipeline {
            if let Node::Switch(s) = self.ports.specs[port as usize].from {
                let (left, was_ce) = (self.queued_packets(port), p.ce);
                self.fwd.egress(self.now, s, self.ports.number[port as usize], left, &mut p);
                self.stats.ecn_marks += u64::from(p.ce && !was_ce);
            }
        }
        if self.tc_lossless[c] {
            self.ingress_release(p.in_port, p.tc, bytes);
        }
        self.start_tx(port, p);
        if self.ctl.control.is_some() {
            self.sense_dequeue(port);
        }
    }

    /// Packets queued on `port`, all classes.
    fn queued_packets(&self, port: PortId) -> usize {
        let base = port as usize * self.ntc;
        self.tcs[base..base + self.ntc].iter().map(|t| t.queue.len()).sum()
    }
}
