//! Ingress (`p4src/v1model/ingress.p4`, `routing.p4`): switch settings,
//! the INT watchlist at edge ports, LPM to a next hop or a weighted group,
//! flowlet pinning in registers, the next hop's rewrite and TTL, and a
//! drop reason counted for every drop.

use super::hash::{flow_hash, selector_hash};
use super::headers::{Bridged, Headers, ETHERTYPE_ARP};
use super::{DropReason, Twin, TwinError, Verdict, TIME_MASK};
use metaroce_pipeline::names::{FLOW_SLOTS, PACKET_IN_ARP};

/// `flowlet_timeout_us` until the controller writes `config`.
const DEFAULT_FLOWLET_TIMEOUT_US: u64 = 50_000;

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
        // Only UDP from a host-facing port can become an INT source.
        if h.udp().is_some() && h.int.is_none() {
            let port = u128::from(h.meta.ingress_port);
            if self.lookup(&self.ids.port_role, &[port], 0)?.hit {
                self.watchlist(h)?;
            }
        }
        self.routing(h, now, timeout)
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

    fn routing(&mut self, h: &mut Headers, now: u64, timeout: u64) -> Result<Verdict, TwinError> {
        let Some(ip) = h.ipv4 else { return Ok(Verdict::Drop(DropReason::Ipv4Invalid)) };
        if ip.ttl <= 1 {
            return Ok(Verdict::Drop(DropReason::TtlExpired));
        }
        let (group, mut nhop) = match self.route(ip.dst)? {
            Route::Drop(r) => return Ok(Verdict::Drop(r)),
            Route::Group(g) => (g, 0),
            Route::NextHop(n) => (0, n),
        };
        let mut hash = 0;
        if group != 0 || h.int.is_some() {
            hash = flow_hash(h);
            h.meta.flow_slot = hash & (FLOW_SLOTS - 1);
        }
        let mut new_flowlet = false;
        if group != 0 {
            let (n, new) = self.flowlet(h, group, hash, now, timeout)?;
            nhop = n;
            new_flowlet = new;
        }
        let verdict = self.next_hop(h, nhop)?;
        if let (true, Verdict::Forward { port }) = (new_flowlet, verdict) {
            self.set_reg(self.ids.flowlet_port, h.meta.flow_slot, u128::from(port))?;
            self.count(self.ids.new_flowlets, port);
        }
        Ok(verdict)
    }

    /// The next hop of the packet's flowlet and whether it starts a new one:
    /// the same flow (signature) within the timeout on a port in service
    /// keeps its pinned next hop, whatever happened to the group since.
    fn flowlet(
        &self,
        h: &Headers,
        group: u16,
        hash: u32,
        now: u64,
        timeout: u64,
    ) -> Result<(u16, bool), TwinError> {
        let ids = &self.ids;
        let slot = h.meta.flow_slot;
        let sig = u128::from(hash >> 16);
        let last = self.reg(ids.flowlet_last_seen, slot)? as u64;
        let mut nhop = 0;
        let mut new = true;
        if self.reg(ids.flowlet_sig, slot)? == sig && now.wrapping_sub(last) & TIME_MASK <= timeout {
            let pinned = self.reg(ids.flowlet_port, slot)?;
            if !self.lookup(&ids.port_down, &[pinned], 0)?.hit {
                nhop = self.reg(ids.flowlet_nhop, slot)? as u16;
                new = false;
            }
        }
        if new {
            let id = (self.reg(ids.flowlet_id, slot)? as u16).wrapping_add(1);
            let hit = self.lookup(&ids.nhop_group, &[u128::from(group)], u64::from(selector_hash(h, id)))?;
            if let Some([n]) = hit.params(&ids.select_nhop).as_deref() {
                nhop = *n as u16;
            }
            self.set_reg(ids.flowlet_sig, slot, sig)?;
            self.set_reg(ids.flowlet_nhop, slot, u128::from(nhop))?;
            self.set_reg(ids.flowlet_id, slot, u128::from(id))?;
        }
        self.set_reg(ids.flowlet_last_seen, slot, u128::from(now))?;
        Ok((nhop, new))
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
