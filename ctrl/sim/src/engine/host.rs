//! Hosts: RoCEv2-like senders (queue pairs scheduled round-robin on the
//! NIC, paced by DCQCN), receivers that count bytes, mark completion and
//! return CNPs, and recovery by resending from the first unacknowledged
//! PSN.
//!
//! The receiver follows the scenario's NIC ordering model:
//! - go-back-n (RC queue pairs): only the next expected PSN is accepted; a
//!   later one is dropped and answered with one NAK per expected PSN, and
//!   the sender resends from it; the sender keeps a message until it is
//!   acknowledged, on every priority;
//! - out-of-order: packets are placed as they arrive. Where the sender
//!   keeps packets for recovery (lossy priorities, failing links) the
//!   receiver remembers which PSNs beyond the next expected one it holds,
//!   acknowledges cumulatively and sends no NAK: a loss is resent after the
//!   timeout.

use std::cmp::Reverse;

use super::{Packet, Sim};
use crate::engine::events::{Ev, FlowId, PortId, QpId};
use crate::engine::flows::{Flow, QpHot, NONE};
use crate::engine::net::Ports;
use crate::report::stats::Reorder;
use crate::scenario::config::{Ordering, ROCE_HEADER_BYTES};

/// Packet `psn` of message `f` in its queue pair's PSN sequence (the drain
/// rule masks it to 24 bits): RC queue pairs start anywhere in the 24-bit
/// space and run on across messages, so the rule meets wrapped PSNs.
pub(super) fn qp_psn(f: &Flow, psn: u32) -> u32 {
    let isn = crate::rng::mix64(u64::from(f.qp) ^ 0x1513_0000) as u32 & crate::twin::drain::PSN_MASK;
    isn.wrapping_add(f.psn_base).wrapping_add(psn)
}

impl Sim<'_> {
    /// A message is posted: it joins the end of its queue pair. The chain
    /// of a queue pair's messages is never cut, so that a go-back to an
    /// older message finds every later one after it.
    pub(super) fn post(&mut self, f: FlowId) {
        self.w.flows[f as usize].start_ps = self.now;
        let qp = self.w.flows[f as usize].qp as usize;
        let q = &mut self.w.qps[qp];
        let tail = q.tail;
        q.tail = f;
        if q.una_msg == NONE {
            q.una_msg = f;
        }
        if let Some(t) = self.w.flows.get_mut(tail as usize) {
            t.next_on_qp = f;
        }
        if self.w.hot[qp].head == NONE {
            self.set_head(qp as QpId, f);
            self.activate(qp as QpId);
        }
    }

    /// Makes `f` the message the queue pair sends (NONE for none), from
    /// its first unacknowledged PSN.
    fn set_head(&mut self, qp: QpId, f: FlowId) {
        let q = &mut self.w.hot[qp as usize];
        if let Some(old) = self.w.flows.get_mut(q.head as usize) {
            old.snd_max = old.snd_max.max(q.snd_max);
        }
        q.head = f;
        (q.snd_next, q.snd_max, q.npkts, q.sport) = match self.w.flows.get(f as usize) {
            Some(fl) => (fl.snd_una, fl.snd_max, fl.npkts, fl.sport),
            None => (0, 0, 0, 0),
        };
    }

    fn active(&self, qp: QpId) -> bool {
        let q = &self.w.hot[qp as usize];
        q.head != NONE && q.snd_next < q.npkts
    }

    fn activate(&mut self, qp: QpId) {
        let q = &mut self.w.hot[qp as usize];
        if q.has(QpHot::IN_SCHED) {
            return;
        }
        q.set(QpHot::IN_SCHED, true);
        let (h, tc) = (self.w.qps[qp as usize].src as usize, q.tc);
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
                self.w.hot[qp as usize].set(QpHot::IN_SCHED, false);
                continue;
            }
            let next_ok = self.w.hot[qp as usize].next_ok_ps;
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
        let mtu = u64::from(self.net.mtu);
        let q = &mut self.w.hot[qp as usize];
        let fid = q.head;
        let psn = q.snd_next;
        // Every packet but the last carries a full MTU: only the last
        // needs the message's size, from its (cold) record.
        let payload = if psn + 1 < q.npkts {
            mtu as u32
        } else {
            (self.w.flows[fid as usize].bytes - u64::from(psn) * mtu).min(mtu) as u32
        };
        if psn < q.snd_max {
            self.stats.retransmits += 1;
            self.stats.retransmits_by_tc[usize::from(q.tc)] += 1;
            self.stats.retransmit_bytes += u64::from(payload + ROCE_HEADER_BYTES);
        }
        q.snd_next += 1;
        q.snd_max = q.snd_max.max(q.snd_next);
        let all_sent = q.snd_next == q.npkts;
        let (dst, tc, sport) = (q.dst, q.tc, q.sport);
        let src = h as u32;
        let bytes = payload + ROCE_HEADER_BYTES;
        let rate = if q.flags & (QpHot::RATE_LIMITED | QpHot::CAPPED) == 0 {
            // At line rate the cold record, DCQCN's state with it, stays
            // cold: its timers are caught up when the next CNP arrives.
            self.w.hosts[h].line_bps as f64
        } else {
            let c = &mut self.w.qps[qp as usize];
            match &self.net.dcqcn {
                Some(p) if q.has(QpHot::RATE_LIMITED) => {
                    c.rate.advance(p, self.now);
                    c.rate.on_sent(p, u64::from(bytes));
                    q.set(QpHot::RATE_LIMITED, c.rate.limited());
                    // `line()` is the queue pair's cap (its job's rate, at
                    // most the NIC's), in the same cache line.
                    c.rate.rate().min(c.rate.line())
                }
                _ => c.rate.line(),
            }
        };
        q.next_ok_ps = self.now + (f64::from(bytes) * 8e12 / rate.max(1.0)) as u64;
        let pkt = Packet {
            flow: fid,
            psn,
            // At most 9,000 + headers: the scenario's MTU limit.
            bytes: u16::try_from(bytes).unwrap_or(u16::MAX),
            in_port: PortId::MAX,
            dst_host: dst,
            src_host: src,
            sport,
            ce: false,
            fresh: false,
            route: 0,
            tc,
            tx: self.stats.packets_sent as u32,
        };
        self.born();
        self.stats.packets_sent += 1;
        self.start_tx(Ports::nic(h), pkt);
        if all_sent {
            // The queue pair goes on with its next message at once, as an
            // RC queue pair does; a reliable one keeps this one until it is
            // acknowledged, and goes back to it on a NAK or a timeout.
            if self.tc_reliable[usize::from(tc)] {
                let una = self.w.flows[fid as usize].snd_una;
                self.q.push(self.now + self.net.rto_ps, Ev::Rto { flow: fid, una });
            }
            self.next_message(qp);
        }
        self.reschedule(h, qp);
    }

    /// Puts a queue pair back in its NIC's ready or waiting set.
    fn reschedule(&mut self, h: usize, qp: QpId) {
        if !self.active(qp) {
            self.w.hot[qp as usize].set(QpHot::IN_SCHED, false);
            return;
        }
        let q = &self.w.hot[qp as usize];
        let (next_ok, tc) = (q.next_ok_ps, q.tc);
        let ser = self.ports.specs[h].ser_ps(u64::from(self.net.mtu + ROCE_HEADER_BYTES));
        if next_ok <= self.now + ser {
            self.nics[h].ready[usize::from(tc)].push_back(qp);
        } else {
            self.nics[h].waiting.push(Reverse((next_ok, qp, tc)));
        }
    }

    /// The head message is done with the sender; the next one not yet
    /// acknowledged takes over.
    fn next_message(&mut self, qp: QpId) {
        let mut next = self.w.flows[self.w.hot[qp as usize].head as usize].next_on_qp;
        while let Some(f) = self.w.flows.get(next as usize) {
            if f.snd_una < f.npkts {
                break;
            }
            next = f.next_on_qp;
        }
        self.set_head(qp, next);
    }

    /// Whether message `later` was posted after `earlier` on their queue
    /// pair (messages chain in posting order, which is not the order of
    /// their ids: a ring's next step can be posted before an earlier one).
    fn posted_after(&self, earlier: FlowId, later: FlowId) -> bool {
        let mut f = self.w.flows[earlier as usize].next_on_qp;
        while let Some(fl) = self.w.flows.get(f as usize) {
            if f == later {
                return true;
            }
            f = fl.next_on_qp;
        }
        false
    }

    /// Go-back-N: the queue pair resends from `psn` of message `flow`, and
    /// then every later message from its first unacknowledged PSN. Returns
    /// false when an older message being sent will reach `flow` after it
    /// (from its first unacknowledged PSN, which the NAK or timeout set).
    fn go_back(&mut self, flow: FlowId, psn: u32) -> bool {
        let qp = self.w.flows[flow as usize].qp;
        let head = self.w.hot[qp as usize].head;
        if head != NONE && head != flow && self.posted_after(head, flow) {
            return false;
        }
        if head != flow {
            self.set_head(qp, flow);
        }
        let q = &mut self.w.hot[qp as usize];
        if q.snd_next > psn {
            q.snd_next = psn;
        }
        self.activate(qp);
        true
    }

    pub(super) fn host_receive(&mut self, h: usize, p: Packet) {
        self.gone();
        if h != p.dst_host as usize {
            // Only a switch pipeline's own routes can do this (serve mode).
            self.stats.misdelivered += 1;
            return;
        }
        let fid = p.flow as usize;
        let accepted = match (self.net.ordering, self.tc_reliable[usize::from(p.tc)]) {
            (Ordering::GoBackN, _) => self.go_back_n_receive(&p),
            (Ordering::OutOfOrder, true) => self.placed_reliable(&p),
            (Ordering::OutOfOrder, false) => {
                // Nothing is ever resent: every packet is new.
                if p.psn != self.w.rcv[fid].next {
                    self.count_reorder(&p);
                } else {
                    self.w.rcv[fid].route = p.route;
                }
                let r = &mut self.w.rcv[fid];
                r.next = r.next.max(p.psn + 1);
                true
            }
        };
        if p.ce {
            self.notify_congestion(self.w.flows[fid].qp);
        }
        if accepted {
            let left = &mut self.w.rcv[fid].left;
            let before = *left;
            *left = left.saturating_sub(1);
            if before > 0 && *left == 0 {
                self.complete(p.flow);
            }
        }
    }

    /// Go-back-N receiver: accepts only the next expected packet; a gap
    /// sends one NAK per expected PSN. Returns whether `p` was accepted.
    fn go_back_n_receive(&mut self, p: &Packet) -> bool {
        let r = &mut self.w.rcv[p.flow as usize];
        if p.psn == r.next {
            r.next += 1;
            r.route = p.route;
            let next = r.next;
            if r.left == 1 || next.is_multiple_of(self.net.ack_every) {
                self.send_ack(p.flow, next);
            }
            return true;
        }
        if p.psn < r.next {
            self.ack_duplicate(p);
            return false;
        }
        if p.psn > r.next {
            let next = r.next;
            self.count_reorder(p);
            let f = &mut self.w.flows[p.flow as usize];
            if f.nack_for != next {
                f.nack_for = next;
                self.stats.naks += 1;
                self.send_ctl(p.flow, next, true);
            }
        }
        false
    }

    /// Out-of-order placement with recovery: a packet is new unless it is
    /// below the next expected PSN or already held beyond it. Returns
    /// whether `p` was new.
    fn placed_reliable(&mut self, p: &Packet) -> bool {
        let fid = p.flow;
        let r = self.w.rcv[fid as usize];
        if p.psn < r.next {
            self.ack_duplicate(p);
            return false;
        }
        if p.psn > r.next {
            let bits = self.held.entry(fid).or_default();
            let (word, bit) = ((p.psn - r.next) as usize / 64, (p.psn - r.next) % 64);
            if bits.words.len() <= word {
                bits.words.resize(word + 1, 0);
            }
            if bits.words[word] & (1 << bit) != 0 {
                return false;
            }
            bits.words[word] |= 1 << bit;
            self.count_reorder(p);
            return true;
        }
        // The next expected one: it and every held one after it are in order now.
        let mut next = r.next + 1;
        if let Some(bits) = self.held.get_mut(&fid) {
            next += bits.shift_out();
            if bits.words.is_empty() {
                self.held.remove(&fid);
            }
        }
        let crossed = next / self.net.ack_every != r.next / self.net.ack_every;
        self.w.rcv[fid as usize].next = next;
        self.w.rcv[fid as usize].route = p.route;
        if r.left == 1 || crossed {
            self.send_ack(fid, next);
        }
        true
    }

    /// A packet reached its receiver out of order: counted, with its
    /// cause. It took another path than the last packet taken in order
    /// (or, before any, its message was moved): the message's last move
    /// says why, and without one the forwarder's own kind of move does;
    /// on the same path, a packet ahead of it was lost or is being resent.
    fn count_reorder(&mut self, p: &Packet) {
        self.stats.out_of_order += 1;
        let fid = p.flow as usize;
        let r = self.w.rcv[fid];
        let moved = Reorder::from_u8(self.w.flows[fid].move_cause);
        let other_path = if r.next == 0 { moved.is_some() } else { p.route != r.route };
        let cause = match (other_path, moved) {
            (false, _) => Reorder::Loss,
            (true, Some(c)) => c,
            (true, None) => self.fwd.path_change_cause(),
        };
        self.stats.out_of_order_by_cause[cause as usize] += 1;
    }

    /// A resent packet the receiver already has: the resend of a
    /// message's last packet is acknowledged again (with everything the
    /// receiver holds), as an RC responder answers a duplicate, so that a
    /// sender whose ACK was lost on a dead link learns the message arrived.
    fn ack_duplicate(&mut self, p: &Packet) {
        let npkts = self.w.flows[p.flow as usize].npkts;
        if p.psn + 1 == npkts {
            let next = self.w.rcv[p.flow as usize].next;
            self.send_ack(p.flow, next);
        }
    }

    fn send_ack(&mut self, flow: FlowId, psn: u32) {
        self.send_ctl(flow, psn, false);
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
        if dep != NONE && self.w.flows[dep as usize].start_ps == u64::MAX {
            let acked = self.w.flows[f as usize].snd_una == self.w.flows[f as usize].npkts;
            if acked || !self.posted_on_ack(f, dep) {
                self.post(dep);
            }
        }
        let job = self.w.qps[self.w.flows[f as usize].qp as usize].job as usize;
        let run = &mut self.w.jobs[job];
        let k = run.iter_of(f);
        let it = &mut run.iters[k];
        it.left -= 1;
        if it.left == 0 {
            it.done_ps = self.now;
            // The next step starts when every rank is done, after the compute phase.
            if k + 1 < run.iters.len() {
                let at = self.now + run.computes.get(k).copied().unwrap_or(0);
                self.q.push(at, Ev::Iteration { job: job as u32, iter: (k + 1) as u32 });
            }
            self.mark_tree_span();
        }
    }

    /// Iteration `iter` of `job` starts: its first messages are posted.
    pub(super) fn start_iteration(&mut self, job: u32, iter: u32) {
        self.mark_tree_span();
        let it = &mut self.w.jobs[job as usize].iters[iter as usize];
        it.start_ps = self.now;
        let roots = std::mem::take(&mut it.roots);
        for &f in &roots {
            self.post(f);
        }
        self.w.jobs[job as usize].iters[iter as usize].roots = roots;
    }

    pub(super) fn cnp(&mut self, qp: QpId) {
        if let Some(p) = &self.net.dcqcn {
            let q = &mut self.w.qps[qp as usize];
            q.rate.on_cnp(p, self.now);
            self.w.hot[qp as usize].set(QpHot::RATE_LIMITED, q.rate.limited());
        }
    }

    pub(super) fn ack(&mut self, flow: FlowId, psn: u32) {
        let f = &mut self.w.flows[flow as usize];
        if psn <= f.snd_una {
            return;
        }
        f.snd_una = psn;
        let (qp, done, dep, arrived) = (f.qp, f.snd_una == f.npkts, f.dependent, f.done_ps != u64::MAX);
        if done {
            // Acknowledged while being resent: nothing of it is left to send.
            if self.w.hot[qp as usize].head == flow {
                self.next_message(qp);
                self.activate(qp);
            }
            // The sender learns the message is complete: its next chunk.
            if dep != NONE && arrived && self.w.flows[dep as usize].start_ps == u64::MAX {
                self.post(dep);
            }
        }
    }

    /// The message that `f`'s completion enables is posted by `f`'s
    /// sender when the ACK of `f`'s last packet reaches it (the same
    /// sender, on a class whose receivers acknowledge), not at the instant
    /// `f` arrives: a sender learns of completion from the ACK.
    fn posted_on_ack(&self, f: FlowId, dep: FlowId) -> bool {
        let (fl, dl) = (&self.w.flows[f as usize], &self.w.flows[dep as usize]);
        let (q, dq) = (&self.w.qps[fl.qp as usize], &self.w.qps[dl.qp as usize]);
        let tc = self.w.hot[fl.qp as usize].tc;
        let acked = self.net.ordering == Ordering::GoBackN || self.tc_reliable[usize::from(tc)];
        acked && q.src == dq.src
    }

    pub(super) fn nack(&mut self, flow: FlowId, psn: u32) {
        let f = &mut self.w.flows[flow as usize];
        f.snd_una = f.snd_una.max(psn);
        if f.snd_una < f.npkts {
            let _ = self.go_back(flow, psn);
        }
    }

    pub(super) fn rto(&mut self, flow: FlowId, una: u32) {
        let f = &self.w.flows[flow as usize];
        let (qp, snd_una, npkts) = (f.qp, f.snd_una, f.npkts);
        let q = &self.w.hot[qp as usize];
        // Done, or being sent again (a new timer starts after its last packet).
        if snd_una == npkts || (q.head == flow && q.snd_next < npkts) {
            return;
        }
        // Progress since the timer was set, or an older message being sent
        // that will reach this one after it: the timer runs on, so no
        // unacknowledged message is ever left without one.
        if snd_una != una || !self.go_back(flow, snd_una) {
            self.q.push(self.now + self.net.rto_ps, Ev::Rto { flow, una: snd_una });
        }
    }
}

/// PSNs an out-of-order receiver holds beyond the next expected one: bit i
/// of the set is PSN `next + i` (bit 0, the next expected PSN itself, is
/// never held).
#[derive(Debug, Clone, Default)]
pub(super) struct Held {
    words: Vec<u64>,
}

impl Held {
    /// The next expected PSN has arrived: counts the held PSNs right after
    /// it and moves the set past them, so bit 0 is the new next expected.
    fn shift_out(&mut self) -> u32 {
        let mut run = 0u32;
        loop {
            let i = run as usize + 1;
            match self.words.get(i / 64) {
                Some(w) if w & (1 << (i % 64)) != 0 => run += 1,
                _ => break,
            }
        }
        self.shift(run as usize + 1);
        run
    }

    fn shift(&mut self, n: usize) {
        let (words, bits) = (n / 64, n % 64);
        self.words.drain(..words.min(self.words.len()));
        if bits > 0 {
            for i in 0..self.words.len() {
                let hi = self.words.get(i + 1).map_or(0, |w| w << (64 - bits));
                self.words[i] = (self.words[i] >> bits) | hi;
            }
        }
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Held;

    #[test]
    fn held_psns_shift_out_in_order() {
        // Next expected is 10; 11, 12 and 75 are held.
        let mut h = Held { words: vec![0b110, 1 << 1] };
        assert_eq!(h.shift_out(), 2, "11 and 12 follow 10");
        // Next expected is 13 now: 75 is bit 62.
        assert_eq!(h.words, vec![1 << 62]);
        assert_eq!(h.shift_out(), 0);
        assert_eq!(h.words, vec![1 << 61]);
        let mut empty = Held::default();
        assert_eq!(empty.shift_out(), 0);
        assert!(empty.words.is_empty());
    }
}
