//! ACKs and NAKs in band: a receiver's acknowledgement crosses the fabric
//! hop by hop toward the sender, on its own strict-priority class, as RoCE
//! NICs send them. At each port it waits for the packet being serialized
//! (strict priority does not preempt), then takes its own 64 bytes of
//! serialization and the link's delay; it never waits behind queued data
//! and is never paused (the class is not PFC-enabled), and its own few
//! bytes do not delay the data (one per `ack_every` packets). Switches
//! route it by ECMP over the reverse path's groups. The sender's first
//! leaf sees it pass (the drain rule, `twin/drain.rs`), then the sender
//! gets it. One that meets a dead link is lost (the sender's timeout
//! recovers). In serve mode, where the switches are pipeline twins,
//! acknowledgements stay out of band (`Flow`'s path delay); CNPs are out
//! of band in every mode.

use super::Sim;
use crate::control::forward::weighted;
use crate::engine::events::{Ev, FlowId, PortId, QpId};
use crate::engine::flows::NONE;
use crate::engine::net::{Node, Ports};
use crate::rng::mix64;

/// Bytes of an ACK or NAK on the wire (Ethernet, IPv4, UDP, BTH, AETH,
/// ICRC, FCS, padded to the minimum frame).
pub const CTL_BYTES: u64 = 64;

/// Bit 31 of an [`Ev::Ctl`] word: a NAK (else an ACK); bits 0-30: the PSN.
const NAK: u32 = 1 << 31;

impl Sim<'_> {
    /// The receiver of message `flow` acknowledges every PSN below `psn`
    /// (or, `nak`, asks for `psn` again).
    pub(super) fn send_ctl(&mut self, flow: FlowId, psn: u32, nak: bool) {
        let qp = self.w.flows[flow as usize].qp;
        if self.pipeline {
            let delay = self.w.qps[qp as usize].ctrl_delay_ps;
            let ev = if nak { Ev::Nack { flow, psn } } else { Ev::Ack { flow, psn } };
            self.q.push(self.now + delay, ev);
            return;
        }
        let receiver = self.w.qps[qp as usize].dst as usize;
        self.ctl_hop(Ports::nic(receiver), flow, psn.min(NAK - 1) | if nak { NAK } else { 0 });
    }

    /// Sends a control packet over `port`, behind the packet it is
    /// serializing.
    fn ctl_hop(&mut self, port: PortId, flow: FlowId, word: u32) {
        let p = port as usize;
        if self.st[p].down {
            self.stats.ctl_lost += 1;
            return;
        }
        let spec = &self.ports.specs[p];
        let depart = self.now.max(self.st[p].free_at) + spec.ser_ps(CTL_BYTES);
        self.q.push(depart + spec.delay_ps, Ev::Ctl { port, flow, word });
    }

    /// A control packet reaches the far end of `port`.
    pub(super) fn ctl_arrive(&mut self, port: PortId, flow: FlowId, word: u32) {
        if self.st[port as usize].down {
            // The link died under it.
            self.stats.ctl_lost += 1;
            return;
        }
        let (psn, nak) = (word & !NAK, word & NAK != 0);
        let s = match self.ports.to(port) {
            Node::Host(_) => {
                if nak {
                    self.nack(flow, psn);
                } else {
                    self.ack(flow, psn);
                }
                return;
            }
            Node::Switch(s) => s,
        };
        let f = &self.w.flows[flow as usize];
        let (qp, tuple) = (f.qp, f.tuple_hash);
        let sender = self.w.qps[qp as usize].src as usize;
        let (leaf, dest) = self.host_dest[sender];
        let egress = if leaf == s {
            self.leaf_sees_ctl(qp, flow, psn, nak);
            self.ports.to_host(sender)
        } else {
            let (group, total) = self.ports.group(s, dest);
            if group.is_empty() {
                self.stats.ctl_lost += 1;
                return;
            }
            let h = mix64(tuple ^ 0xAC4 ^ u64::from(s) << 40);
            group[weighted(group, (h % u64::from(total.max(1))) as u32).min(group.len() - 1)].port
        };
        self.ctl_hop(egress, flow, word);
    }

    /// An out-of-band ACK or NAK of message `flow` reaches its sender in
    /// serve mode: the twin of the sender's leaf sees it as it would have
    /// passed ([`crate::control::forward::Forwarder::leaf_sees_ack`]).
    pub(super) fn pipeline_leaf_sees_ctl(&mut self, flow: FlowId, psn: u32, nak: bool) {
        if !self.pipeline {
            return;
        }
        let Some(qp) = self.w.flows.get(flow as usize).map(|f| f.qp) else { return };
        let Some(cum) = self.leaf_cumulative(qp, flow, psn) else { return };
        let q = &self.w.qps[qp as usize];
        let (src, dst) = (q.src, q.dst);
        let leaf = self.host_dest[src as usize].0;
        self.fwd.leaf_sees_ack(self.now, leaf, src, dst, cum, nak);
    }

    /// An ACK or NAK of message `flow` (queue pair `qp`) passes the
    /// sender's leaf: what the leaf has seen of the message moves on, and
    /// the drain table there learns the queue pair's cumulative
    /// acknowledgement as the leaf has seen it (the oldest message not
    /// wholly acknowledged, up to its first unacknowledged packet).
    fn leaf_sees_ctl(&mut self, qp: QpId, flow: FlowId, psn: u32, nak: bool) {
        if self.drain.is_none() {
            let f = &mut self.w.flows[flow as usize];
            f.leaf_una = f.leaf_una.max(psn.min(f.npkts));
            return;
        }
        let Some(cum) = self.leaf_cumulative(qp, flow, psn) else { return };
        let leaf = self.host_dest[self.w.qps[qp as usize].src as usize].0 as usize;
        let Some(d) = self.drain.as_mut() else { return };
        if nak {
            d.on_nak(leaf, u64::from(qp), cum);
        } else {
            d.on_ack(leaf, u64::from(qp), cum);
        }
    }

    /// What the sender's leaf learns from an ACK or NAK of message `flow`
    /// at `psn`: the queue pair's cumulative acknowledgement in its 24-bit
    /// sequence, or `None` within one leaf (no path to move, no state).
    fn leaf_cumulative(&mut self, qp: QpId, flow: FlowId, psn: u32) -> Option<u32> {
        let f = &mut self.w.flows[flow as usize];
        f.leaf_una = f.leaf_una.max(psn.min(f.npkts));
        let q = &self.w.qps[qp as usize];
        if self.host_dest[q.src as usize].0 == self.host_dest[q.dst as usize].0 {
            return None;
        }
        let mut m = q.una_msg;
        while let Some(f) = self.w.flows.get(m as usize) {
            if f.leaf_una < f.npkts || f.next_on_qp == NONE {
                break;
            }
            m = f.next_on_qp;
        }
        self.w.qps[qp as usize].una_msg = m;
        let f = self.w.flows.get(m as usize)?;
        Some(super::host::qp_psn(f, f.leaf_una))
    }
}
