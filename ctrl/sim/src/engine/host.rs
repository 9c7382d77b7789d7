//! Hosts: RoCEv2-like senders (queue pairs scheduled round-robin on the
//! NIC, paced by DCQCN), receivers that count bytes, mark completion and
//! return CNPs, and go-back-N recovery in lossy mode.

use std::cmp::Reverse;

use super::{Packet, Sim};
use crate::engine::events::{Ev, FlowId, PortId, QpId};
use crate::engine::flows::{Send, NONE};
use crate::engine::net::Ports;
use crate::scenario::config::ROCE_HEADER_BYTES;

impl Sim<'_> {
    /// A message is posted: it joins the end of its queue pair.
    pub(super) fn post(&mut self, f: FlowId) {
        self.w.flows[f as usize].start_ps = self.now;
        let qp = self.w.flows[f as usize].qp as usize;
        let q = &mut self.w.qps[qp];
        if q.head == NONE {
            q.tail = f;
            self.set_head(qp as QpId, f);
            self.activate(qp as QpId);
        } else {
            let tail = q.tail as usize;
            q.tail = f;
            self.w.flows[tail].next_on_qp = f;
        }
    }

    /// Makes `f` the message the queue pair sends (NONE for none).
    fn set_head(&mut self, qp: QpId, f: FlowId) {
        let q = &mut self.w.qps[qp as usize];
        q.head = f;
        q.snd = match self.w.flows.get(f as usize) {
            Some(fl) => Send {
                snd_next: 0,
                snd_max: 0,
                npkts: fl.npkts,
                bytes: fl.bytes,
                tuple_hash: fl.tuple_hash,
                sport: fl.sport,
            },
            None => Send::default(),
        };
    }

    fn active(&self, qp: QpId) -> bool {
        let q = &self.w.qps[qp as usize];
        q.head != NONE && q.snd.snd_next < q.snd.npkts
    }

    fn activate(&mut self, qp: QpId) {
        let q = &mut self.w.qps[qp as usize];
        if q.in_sched {
            return;
        }
        q.in_sched = true;
        let (h, tc) = (q.src as usize, q.tc);
        self.nics[h].ready[usize::from(tc)].push_back(qp);
        self.nic_kick(h);
    }

    /// The NIC of host `h` sends its next packet if it is free: from the
    /// next class round-robin that has a queue pair ready and is not
    /// paused, the next queue pair of that class.
    pub(super) fn nic_kick(&mut self, h: usize) {
        let port = Ports::nic(h) as usize;
        let st = &self.st[port];
        let all = ((1u16 << self.ntc) - 1) as u8;
        if st.paused == all || self.now < st.free_at || st.txdone_pending {
            return;
        }
        let paused = st.paused;
        loop {
            let nic = &mut self.nics[h];
            while let Some(&Reverse((t, qp, tc))) = nic.waiting.peek() {
                if t > self.now {
                    break;
                }
                nic.waiting.pop();
                nic.ready[usize::from(tc)].push_back(qp);
            }
            let Some(c) = self.nic_class(h, paused) else { break };
            let Some(qp) = self.nics[h].ready[c].pop_front() else { break };
            if !self.active(qp) {
                self.w.qps[qp as usize].in_sched = false;
                continue;
            }
            let next_ok = self.w.qps[qp as usize].next_ok_ps;
            if next_ok > self.now {
                self.nics[h].waiting.push(Reverse((next_ok, qp, c as u8)));
                continue;
            }
            self.nics[h].rr = c as u8;
            self.send_one(h, qp);
            return;
        }
        let nic = &mut self.nics[h];
        if let Some(&Reverse((t, _, _))) = nic.waiting.peek() {
            if t < nic.wake_at {
                nic.wake_at = t;
                self.q.push(t, Ev::NicWake { host: h as u32 });
            }
        }
    }

    /// The class host `h` sends from next: round-robin after the one served
    /// last, among those with a queue pair ready and not paused.
    fn nic_class(&self, h: usize, paused: u8) -> Option<usize> {
        let nic = &self.nics[h];
        if self.ntc == 1 {
            return (paused == 0 && !nic.ready[0].is_empty()).then_some(0);
        }
        let last = usize::from(nic.rr);
        (1..=self.ntc)
            .map(|k| (last + k) % self.ntc)
            .find(|&c| paused & (1 << c) == 0 && !nic.ready[c].is_empty())
    }

    fn send_one(&mut self, h: usize, qp: QpId) {
        let q = &mut self.w.qps[qp as usize];
        let fid = q.head;
        let f = &mut q.snd;
        let psn = f.snd_next;
        let mtu = u64::from(self.net.mtu);
        let payload = (f.bytes - u64::from(psn) * mtu).min(mtu) as u32;
        if psn < f.snd_max {
            self.stats.retransmits += 1;
            self.stats.retransmits_by_tc[usize::from(q.tc)] += 1;
        }
        f.snd_next += 1;
        f.snd_max = f.snd_max.max(f.snd_next);
        let all_sent = f.snd_next == f.npkts;
        let (tuple_hash, sport) = (f.tuple_hash, f.sport);
        let (src, dst, tc) = (q.src, q.dst, q.tc);
        let bytes = payload + ROCE_HEADER_BYTES;
        let rate = match &self.net.dcqcn {
            // At line rate the DCQCN state stays cold: its timers are
            // caught up when the next CNP arrives.
            Some(p) if q.rate_limited => {
                q.rate.advance(p, self.now);
                q.rate.on_sent(p, u64::from(bytes));
                q.rate_limited = q.rate.limited();
                q.rate.rate().min(q.rate_cap_bps as f64)
            }
            _ => q.rate_cap_bps as f64,
        };
        q.next_ok_ps = self.now + (f64::from(bytes) * 8e12 / rate.max(1.0)) as u64;
        let pkt = Packet {
            flow: fid,
            psn,
            bytes,
            in_port: PortId::MAX,
            dst_host: dst,
            tuple_hash,
            src_host: src,
            sport,
            ce: false,
            tc,
            tx: self.stats.packets_sent as u32,
        };
        self.born();
        self.stats.packets_sent += 1;
        self.start_tx(Ports::nic(h), pkt);
        if all_sent {
            if !self.tc_go_back_n[usize::from(tc)] {
                self.next_message(qp);
            } else {
                let una = self.w.flows[fid as usize].snd_una;
                self.q.push(self.now + self.net.rto_ps, Ev::Rto { flow: fid, una });
            }
        }
        self.reschedule(h, qp);
    }

    /// Puts a queue pair back in its NIC's ready or waiting set.
    fn reschedule(&mut self, h: usize, qp: QpId) {
        if !self.active(qp) {
            self.w.qps[qp as usize].in_sched = false;
            return;
        }
        let q = &self.w.qps[qp as usize];
        let (next_ok, tc) = (q.next_ok_ps, q.tc);
        let ser = self.ports.specs[h].ser_ps(u64::from(self.net.mtu + ROCE_HEADER_BYTES));
        if next_ok <= self.now + ser {
            self.nics[h].ready[usize::from(tc)].push_back(qp);
        } else {
            self.nics[h].waiting.push(Reverse((next_ok, qp, tc)));
        }
    }

    /// The head message is done with the sender; the next one takes over.
    fn next_message(&mut self, qp: QpId) {
        let head = self.w.qps[qp as usize].head;
        let next = self.w.flows[head as usize].next_on_qp;
        self.set_head(qp, next);
        if next == NONE {
            self.w.qps[qp as usize].tail = NONE;
        }
    }

    pub(super) fn host_receive(&mut self, h: usize, p: Packet) {
        self.gone();
        if h != p.dst_host as usize {
            // Only a switch pipeline's own routes can do this (serve mode).
            self.stats.misdelivered += 1;
            return;
        }
        let fid = p.flow as usize;
        let accepted = !self.tc_go_back_n[usize::from(p.tc)] || self.go_back_n_receive(&p);
        if p.ce {
            self.notify_congestion(self.w.flows[fid].qp);
        }
        if accepted {
            // Each packet is accepted once (no retransmission without
            // go-back-N, which accepts in order only).
            let left = &mut self.w.rcv_left[fid];
            let before = *left;
            *left = left.saturating_sub(1);
            if before > 0 && *left == 0 {
                self.complete(p.flow);
            }
        }
    }

    /// Go-back-N receiver: accepts only the next expected packet; a gap
    /// sends one NACK per expected PSN. Returns whether `p` was accepted.
    fn go_back_n_receive(&mut self, p: &Packet) -> bool {
        let f = &mut self.w.flows[p.flow as usize];
        let delay = self.w.qps[f.qp as usize].ctrl_delay_ps;
        if p.psn == f.rcv_next {
            f.rcv_next += 1;
            if f.rcv_next == f.npkts || f.rcv_next.is_multiple_of(self.net.ack_every) {
                self.q.push(self.now + delay, Ev::Ack { flow: p.flow, psn: f.rcv_next });
            }
            return true;
        }
        if p.psn > f.rcv_next && f.nack_for != f.rcv_next {
            f.nack_for = f.rcv_next;
            self.q.push(self.now + delay, Ev::Nack { flow: p.flow, psn: f.rcv_next });
        }
        false
    }

    /// The receiver (DCQCN notification point) saw ECN-CE: at most one CNP
    /// per queue pair per interval.
    fn notify_congestion(&mut self, qp: QpId) {
        let Some(dc) = &self.net.dcqcn else { return };
        let q = &mut self.w.qps[qp as usize];
        if q.last_cnp_ps.is_some_and(|t| self.now < t + dc.cnp_interval_ps) {
            return;
        }
        q.last_cnp_ps = Some(self.now);
        self.stats.cnps += 1;
        self.q.push(self.now + q.ctrl_delay_ps, Ev::Cnp { qp });
    }

    fn complete(&mut self, f: FlowId) {
        self.w.flows[f as usize].done_ps = self.now;
        self.flows_done += 1;
        let dep = self.w.flows[f as usize].dependent;
        if dep != NONE {
            self.post(dep);
        }
    }

    pub(super) fn cnp(&mut self, qp: QpId) {
        if let Some(p) = &self.net.dcqcn {
            let q = &mut self.w.qps[qp as usize];
            q.rate.on_cnp(p, self.now);
            q.rate_limited = q.rate.limited();
        }
    }

    pub(super) fn ack(&mut self, flow: FlowId, psn: u32) {
        let f = &mut self.w.flows[flow as usize];
        if psn <= f.snd_una {
            return;
        }
        f.snd_una = psn;
        if f.snd_una == f.npkts {
            let qp = f.qp;
            if self.w.qps[qp as usize].head == flow {
                self.next_message(qp);
                self.activate(qp);
            }
        }
    }

    pub(super) fn nack(&mut self, flow: FlowId, psn: u32) {
        let f = &mut self.w.flows[flow as usize];
        f.snd_una = f.snd_una.max(psn);
        let qp = f.qp;
        let q = &mut self.w.qps[qp as usize];
        if q.head != flow {
            return;
        }
        if q.snd.snd_next > psn {
            q.snd.snd_next = psn;
        }
        self.activate(qp);
    }

    pub(super) fn rto(&mut self, flow: FlowId, una: u32) {
        let f = &self.w.flows[flow as usize];
        let (qp, snd_una, npkts) = (f.qp, f.snd_una, f.npkts);
        let q = &mut self.w.qps[qp as usize];
        // Done, moved on, or still sending (a new timer starts after the last packet).
        if snd_una == npkts || q.head != flow || q.snd.snd_next < npkts {
            return;
        }
        if snd_una == una {
            q.snd.snd_next = snd_una;
            self.activate(qp);
        } else {
            self.q.push(self.now + self.net.rto_ps, Ev::Rto { flow, una: snd_una });
        }
    }
}
