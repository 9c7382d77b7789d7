//! Ingress (`p4src/v1model/ingress.p4`, `routing.p4`): switch settings,
//! LPM to a next hop or a weighted group, flowlet pinning in registers,
//! steer entries for new flowlets (failover first), the drain rule's mark
//! and slots (`drain_step.rs`), the next hop's rewrite and TTL, a drop
//! reason counted for every drop; then, for UDP from an edge port, the INT
//! watchlist and the large-flow detector.

use super::drain_step::MARK_FRESH;
use super::hash::{flow_hash, selector_hash};
use super::headers::{Bridged, Headers, ETHERTYPE_ARP};
use super::{DropReason, Twin, TwinError, Verdict, TIME_MASK};
use metaroce_pipeline::names::{FLOW_SLOTS, PACKET_IN_ARP, PORT_NONE};

/// `flowlet_timeout_us` until the controller writes `config`.
const DEFAULT_FLOWLET_TIMEOUT_US: u64 = 50_000;

/// A group-routed packet's flowlet: its next hop, whether it starts a
/// new flowlet, and whether that follows a steer entry.
#[derive(Default)]
struct Flowlet {
    nhop: u16,
    new: bool,
    steered: bool,
}

/// Where LPM sent the packet.
enum Route {
    Group(u16),
    NextHop(u16),
    Drop(DropReason),
}

impl Twin {
    /// Runs ingress on a parsed packet that arrived on `in_port` at
    /// `now_us`. Fills `h.meta` for egress and counts drops.
    pub fn ingress(&mut self, in_port: u32, h: &mut Headers, now_us: u64) -> Result<Verdict, TwinError> {
        self.check_pipeline()?;
        if in_port > 511 {
            return Err(TwinError::BadPort { port: in_port });
        }
        let now = now_us & TIME_MASK;
        h.meta = Bridged { ingress_port: in_port, ingress_ts: now, ..Default::default() };
        let verdict = if h.ipv4.is_some() {
            self.ingress_ipv4(h, now)?
        } else if h.eth.ether_type == ETHERTYPE_ARP {
            Verdict::ToCpu { reason: PACKET_IN_ARP }
        } else {
            Verdict::Drop(DropReason::UnsupportedEtherType)
        };
        if let Verdict::Drop(r) = verdict {
            self.count_reason(r);
            tracing::trace!(device = self.switch.device_id(), in_port, reason = r.code(), "drop");
        }
        Ok(verdict)
    }

    fn ingress_ipv4(&mut self, h: &mut Headers, now: u64) -> Result<Verdict, TwinError> {
        let cfg = self.lookup(&self.ids.config, &[], 0)?;
        let (switch_id, timeout) = match cfg.params(&self.ids.configure).as_deref() {
            Some([id, t]) => (*id as u32, *t as u64),
            _ => (0, DEFAULT_FLOWLET_TIMEOUT_US),
        };
        h.meta.switch_id = switch_id;
        // Only UDP from a host-facing port can become an INT source, have
        // its RoCEv2 data marked by the drain rule, or be watched for large
        // flows (those routed to a group).
        let edge = h.udp().is_some()
            && h.int.is_none()
            && self.lookup(&self.ids.port_role, &[u128::from(h.meta.ingress_port)], 0)?.hit;
        let (verdict, group) = self.routing(h, now, timeout, edge)?;
        let Verdict::Forward { port: out } = verdict else { return Ok(verdict) };
        if edge {
            self.watchlist(h)?;
            if group != 0 {
                self.large_flows(h, out, now)?;
            }
        }
        Ok(verdict)
    }

    fn watchlist(&self, h: &mut Headers) -> Result<(), TwinError> {
        let Some(ip) = h.ipv4 else { return Ok(()) };
        let key = [u128::from(ip.src), u128::from(ip.dst), u128::from(h.l4_ports().1)];
        let hit = self.lookup(&self.ids.int_watchlist, &key, 0)?;
        if let Some([max_hops]) = hit.params(&self.ids.int_source).as_deref() {
            h.meta.int_source = Some(*max_hops as u8);
        }
        Ok(())
    }

    fn route(&self, dst: u32) -> Result<Route, TwinError> {
        let hit = self.lookup(&self.ids.ipv4_lpm, &[u128::from(dst)], 0)?;
        if let Some([reason]) = hit.params(&self.ids.routing_drop).as_deref() {
            return Ok(Route::Drop(DropReason::from_code(*reason as u8)));
        }
        if !hit.hit {
            // The table's default is const: drop(NO_ROUTE).
            return Ok(Route::Drop(DropReason::NoRoute));
        }
        if let Some([g]) = hit.params(&self.ids.set_group).as_deref() {
            return Ok(Route::Group(*g as u16));
        }
        if let Some([n]) = hit.params(&self.ids.set_nhop).as_deref() {
            return Ok(Route::NextHop(*n as u16));
        }
        Ok(Route::Drop(DropReason::NoRoute))
    }

    /// The verdict and the route's group (0: none).
    fn routing(
        &mut self,
        h: &mut Headers,
        now: u64,
        timeout: u64,
        edge: bool,
    ) -> Result<(Verdict, u16), TwinError> {
        let Some(ip) = h.ipv4 else { return Ok((Verdict::Drop(DropReason::Ipv4Invalid), 0)) };
        if ip.ttl <= 1 {
            return Ok((Verdict::Drop(DropReason::TtlExpired), 0));
        }
        let (group, mut nhop) = match self.route(ip.dst)? {
            Route::Drop(r) => return Ok((Verdict::Drop(r), 0)),
            Route::Group(g) => (g, 0),
            Route::NextHop(n) => (0, n),
        };
        if group != 0 || h.int.is_some() {
            h.meta.flow_hash = flow_hash(h);
            h.meta.flow_slot = h.meta.flow_hash & (FLOW_SLOTS - 1);
        }
        // RoCEv2 data entering the fabric gets its mark; an ACK routed
        // straight to its host (the sender's leaf) updates its data's slot.
        if h.bth.is_some() && ((edge && group != 0) || (group == 0 && h.aeth.is_some())) {
            self.drain(h, group, edge, now)?;
        }
        let mut flowlet = Flowlet::default();
        if group != 0 {
            flowlet = self.flowlet(h, group, now, timeout)?;
            nhop = flowlet.nhop;
        }
        let verdict = self.next_hop(h, nhop)?;
        if let (true, Verdict::Forward { port }) = (flowlet.new, verdict) {
            self.set_reg(self.ids.flowlet_port, h.meta.flow_slot, u128::from(port))?;
            self.count(self.ids.new_flowlets, port);
            if flowlet.steered {
                self.count(self.ids.steered, port);
            }
        }
        Ok((verdict, group))
    }

    /// The packet's flowlet: the same flow (signature) keeps its pinned
    /// next hop, whatever happened to the group or the steer tables since,
    /// until a packet marked fresh if the drain rule governs the flow (the
    /// BTH mark), else until an idle gap past the timeout; a new one takes
    /// its flow's steer entry, else its host pair's, else draws from the
    /// group. `port_down` is checked once,
    /// on the port at stake (the pinned one, the steer entry's, or
    /// PORT_NONE): a hit makes the flowlet a new, drawn one.
    fn flowlet(&self, h: &Headers, group: u16, now: u64, timeout: u64) -> Result<Flowlet, TwinError> {
        let ids = &self.ids;
        let slot = h.meta.flow_slot;
        let sig = u128::from(h.meta.flow_hash >> 16);
        let last = self.reg(ids.flowlet_last_seen, slot)? as u64;
        let mark = h.bth.map(|b| b.reserved0 & 3);
        let governed = mark.is_some_and(|m| m & 2 != 0);
        let running = self.reg(ids.flowlet_sig, slot)? == sig
            && mark != Some(MARK_FRESH)
            && (governed || now.wrapping_sub(last) & TIME_MASK <= timeout);
        let mut steer = None;
        let check = if running {
            self.reg(ids.flowlet_port, slot)?
        } else {
            steer = self.steer_entry(h)?;
            steer.map_or(u128::from(PORT_NONE), |(_, port)| port)
        };
        let down = self.lookup(&ids.port_down, &[check], 0)?.hit;
        let nhop = match (running, steer, down) {
            (true, _, false) => {
                self.set_reg(ids.flowlet_last_seen, slot, u128::from(now))?;
                return Ok(Flowlet {
                    nhop: self.reg(ids.flowlet_nhop, slot)? as u16,
                    new: false,
                    steered: false,
                });
            }
            (false, Some((n, _)), false) => n,
            _ => {
                let id = (self.reg(ids.flowlet_id, slot)? as u16).wrapping_add(1);
                let hit =
                    self.lookup(&ids.nhop_group, &[u128::from(group)], u64::from(selector_hash(h, id)))?;
                self.set_reg(ids.flowlet_id, slot, u128::from(id))?;
                match hit.params(&ids.select_nhop).as_deref() {
                    Some([n]) => *n as u16,
                    // No member: what the slot held (mark_port_down made it 0).
                    _ if down => 0,
                    _ => self.reg(ids.flowlet_nhop, slot)? as u16,
                }
            }
        };
        self.set_reg(ids.flowlet_sig, slot, sig)?;
        self.set_reg(ids.flowlet_nhop, slot, u128::from(nhop))?;
        self.set_reg(ids.flowlet_last_seen, slot, u128::from(now))?;
        Ok(Flowlet { nhop, new: true, steered: steer.is_some() && !down })
    }

    /// The `steer(nhop_id, port)` of the flow's `steer_flow` entry, else of
    /// its host pair's `steer_pair` entry. An empty table is not looked up
    /// (a miss either way; neither table has a direct counter).
    fn steer_entry(&self, h: &Headers) -> Result<Option<(u16, u128)>, TwinError> {
        let Some(ip) = h.ipv4 else { return Ok(None) };
        let (src, dst) = (u128::from(ip.src), u128::from(ip.dst));
        let ids = &self.ids;
        let mut hit = None;
        if self.switch.table_len(ids.steer_flow.id) != Some(0) {
            let qp = u128::from(h.bth.map(|b| b.dest_qp).unwrap_or(0));
            let flow = self.lookup(&ids.steer_flow, &[src, dst, u128::from(h.l4_ports().0), qp], 0)?;
            hit = flow.hit.then_some(flow);
        }
        if hit.is_none() && self.switch.table_len(ids.steer_pair.id) != Some(0) {
            hit = Some(self.lookup(&ids.steer_pair, &[src, dst], 0)?);
        }
        Ok(match hit.and_then(|x| x.params(&ids.steer)).as_deref() {
            Some([n, port]) => Some((*n as u16, *port & 0x1ff)),
            _ => None,
        })
    }

    fn next_hop(&self, h: &mut Headers, nhop: u16) -> Result<Verdict, TwinError> {
        let hit = self.lookup(&self.ids.nhop, &[u128::from(nhop)], 0)?;
        if let Some([port, src, dst]) = hit.params(&self.ids.forward).as_deref() {
            h.eth.src = mac(*src);
            h.eth.dst = mac(*dst);
            if let Some(ip) = h.ipv4.as_mut() {
                ip.ttl = ip.ttl.wrapping_sub(1);
            }
            return Ok(Verdict::Forward { port: *port as u32 & 0x1ff });
        }
        if let Some([reason]) = hit.params(&self.ids.routing_drop).as_deref() {
            return Ok(Verdict::Drop(DropReason::from_code(*reason as u8)));
        }
        Ok(Verdict::Drop(DropReason::NoNextHop))
    }
}

fn mac(v: u128) -> [u8; 6] {
    let b = (v as u64).to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}
