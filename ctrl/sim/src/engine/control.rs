//! The engine's side of the control hook (`crate::control`): lending a
//! [`Ctx`] to the control, threshold crossings at dequeue, link failures,
//! and noticing when a group rewrite has moved traffic.

use super::Sim;
use crate::control::{Control, Crossing, Ctx};
use crate::engine::events::{Packet, PortId};
use crate::engine::net::Node;
use crate::engine::steer::{PacketFlow, SteerKey};

impl<'a> Sim<'a> {
    /// Runs `f` on the control, if there is one, with the engine lent out.
    pub(super) fn call_control(&mut self, f: impl FnOnce(&mut dyn Control, &mut Ctx<'_>)) {
        let Some(control) = self.ctl.control.as_deref_mut() else { return };
        let mut ctx = Ctx {
            now_ps: self.now,
            switches: self.topo.switches.len(),
            ports: &mut self.ports,
            st: &self.st,
            sense: &mut self.ctl.sense,
            q: &mut self.q,
            watch: &mut self.ctl.watch,
            link_up: &self.link_up,
            wakes: &mut self.ctl.wakes,
            steer: &mut self.steer,
            host_dest: &self.host_dest,
        };
        f(control, &mut ctx);
    }

    /// After a dequeue from switch port `port`: a crossing of the port's
    /// thresholds, as the P4 program sees it (on the depth it leaves
    /// behind, at most once per digest interval).
    pub(super) fn sense_dequeue(&mut self, port: PortId) {
        let p = port as usize;
        let s = &mut self.ctl.sense[p];
        let depth = self.st[p].qbytes;
        s.max_bytes = s.max_bytes.max(depth);
        let Some(t) = s.on else { return };
        let up = if !s.congested && t.high_bytes > 0 && depth >= t.high_bytes {
            true
        } else if s.congested && depth <= t.low_bytes {
            false
        } else {
            return;
        };
        if s.last_ps.is_some_and(|last| self.now.saturating_sub(last) < t.min_interval_ps) {
            return;
        }
        s.congested = up;
        s.last_ps = Some(self.now);
        let Node::Switch(switch) = self.ports.specs[p].from else { return };
        let c = Crossing {
            switch: switch as usize,
            port: self.ports.number[p],
            depth_bytes: depth,
            congested: up,
        };
        self.call_control(|control, ctx| control.on_crossing(ctx, &c));
    }

    /// After switch `s` sent a packet toward destination `dest` over
    /// `port`: if a rewrite of that group waits to move traffic and this
    /// packet began a new flowlet on a member whose share rose, it has.
    pub(super) fn check_moved(&mut self, s: u32, dest: u32, port: PortId) {
        if !self.fwd.started_flowlet() {
            return;
        }
        let Some(w) = self.ctl.watch.get(&(s, dest)) else { return };
        if !w.raised.contains(&port) {
            return;
        }
        let tag = w.tag;
        self.ctl.watch.remove(&(s, dest));
        self.call_control(|control, ctx| control.on_moved(ctx, tag));
    }

    /// A flowlet at switch `s` started on the steer entry `key`: the first
    /// one since the entry was written tells the control its traffic moved.
    pub(super) fn steer_used(&mut self, s: u32, key: SteerKey) {
        if let Some(tag) = self.steer.used(self.now, s, key) {
            self.call_control(|control, ctx| control.on_moved(ctx, tag));
        }
    }

    /// The large-flow detector of the flow's first switch `s` (the packet
    /// came from a host NIC and leaves by `egress`).
    pub(super) fn detect(&mut self, s: u32, egress: PortId, p: &Packet) {
        let port = self.ports.number[egress as usize];
        let qp = self.w.flows.get(p.flow as usize).map_or(0, |f| f.qp);
        let flow = PacketFlow { src: p.src_host, dst: p.dst_host, sport: p.sport, qp };
        let r = self.steer.observe(self.now, s as usize, flow, port, u32::from(p.bytes));
        if let Some(r) = r {
            self.call_control(|control, ctx| control.on_large_flow(ctx, &r));
        }
    }

    /// A topology link goes down or comes back.
    pub(super) fn link_event(&mut self, link: usize, up: bool) {
        if self.link_up.get(link).is_none_or(|&u| u == up) {
            return;
        }
        self.link_up[link] = up;
        let (a, b) = self.ports.link_ports[link];
        for port in [a, b] {
            self.st[port as usize].down = !up;
            if up {
                self.try_send(port);
            } else {
                self.flush(port);
            }
        }
        self.stats.link_events += 1;
        self.fwd.link(self.now, link, up);
        self.call_control(|control, ctx| control.on_link(ctx, link, up));
    }

    /// The link of `port` died: what waits in its queue and what is on its
    /// wire is lost; a pause it was under no longer holds.
    fn flush(&mut self, port: PortId) {
        let p = port as usize;
        for c in 0..self.ntc {
            let t = &mut self.tcs[p * self.ntc + c];
            let queued = std::mem::take(&mut t.queue);
            (t.qbytes, t.deficit) = (0, 0);
            for pkt in &queued {
                self.stats.lost_on_failure += 1;
                self.gone();
                if self.tc_lossless[c] {
                    self.ingress_release(pkt.in_port, pkt.tc, u64::from(pkt.bytes));
                }
            }
        }
        self.st[p].qbytes = 0;
        self.st[p].backlog = 0;
        // What is on the wire: the pending arrivals over the port, which
        // find no packet now (an arrival need not touch its port's state).
        let lost = self.q.lose_arrivals(port);
        for _ in 0..lost {
            self.stats.lost_on_failure += 1;
            self.gone();
        }
        self.unpause_all(port);
    }
}
