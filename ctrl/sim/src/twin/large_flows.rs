//! The large-flow detector (`p4src/v1model/large_flows.p4`): per flow
//! slot, a window of IPv4 bytes opened by one flow's signature; the first
//! packet after a window's end reports it in one `large_flow_digest_t`
//! when it counted at least the threshold (with a collision flag when
//! another signature used the slot meanwhile, or closed it), then opens
//! the next; a new flow's packet that brings an armed window to the
//! threshold reports it at once (`twin/window.rs`). Run for UDP from an
//! edge port that is routed to a group.

use super::headers::Headers;
use super::window::{self, Count, Window};
use super::{Twin, TwinError, TIME_MASK};

/// `configure(window_us, threshold_bytes)` until the controller writes
/// the detector's `config`: off.
const DEFAULT_CONFIG: (u64, u32) = (10_000, 0);

impl Twin {
    /// Counts the packet, leaving on `port` at `now`, in its slot's window.
    pub(super) fn large_flows(&mut self, h: &Headers, port: u32, now: u64) -> Result<(), TwinError> {
        let hit = self.lookup(&self.ids.large_flow_config, &[], 0)?;
        let (window, threshold) = match hit.params(&self.ids.configure_large_flows).as_deref() {
            Some([w, t]) => (*w as u64, *t as u32),
            _ => DEFAULT_CONFIG,
        };
        let Some(ip) = h.ipv4 else { return Ok(()) };
        if threshold == 0 {
            return Ok(());
        }
        let ids = &self.ids;
        let slot = h.meta.flow_slot;
        let sig = u64::from(h.meta.flow_hash >> 16);
        let len = u64::from(ip.total_len);
        let start = self.reg(ids.window_start, slot)? as u64;
        let mut w = Window {
            open: start != 0,
            sig: self.reg(ids.window_sig, slot)? as u64,
            start,
            bytes: u64::from(self.reg(ids.window_bytes, slot)? as u32),
            collided: self.reg(ids.window_collision, slot)? != 0,
            early_done: self.reg(ids.window_early, slot)? != 0,
        };
        let elapsed = now.wrapping_sub(start) & TIME_MASK;
        let (report, opened) =
            match window::count(&mut w, sig, len, now, elapsed, window, u64::from(threshold)) {
                Count::Counted => (None, false),
                Count::Crossed(c) => (Some(c), false),
                Count::Opened(closed) => (closed, true),
            };
        if let Some(c) = report {
            let (bytes, elapsed, collision) = (c.bytes as u32, c.elapsed, c.collision);
            let (sport, qp) = (h.l4_ports().0, h.bth.map(|b| b.dest_qp).unwrap_or(0));
            let flow = (u128::from(ip.src) << 72)
                | (u128::from(ip.dst) << 40)
                | (u128::from(sport) << 24)
                | u128::from(qp & 0xff_ffff);
            let values = [
                u128::from(h.meta.switch_id),
                flow,
                u128::from(port),
                u128::from(bytes),
                u128::from(elapsed.min(u64::from(u32::MAX))),
                u128::from(slot & 0xffff),
                u128::from(collision),
                u128::from(now),
            ];
            let (digest, widths) = (self.ids.large_flow_digest, self.ids.large_flow_digest_widths.clone());
            self.emit_digest(digest, &widths, &values);
            tracing::debug!(
                device = self.switch.device_id(),
                port,
                slot,
                bytes,
                collision,
                "large-flow digest"
            );
        }
        let ids = &self.ids;
        if opened {
            self.set_reg(ids.window_sig, slot, u128::from(w.sig))?;
            self.set_reg(ids.window_start, slot, u128::from(w.start))?;
        }
        self.set_reg(ids.window_bytes, slot, u128::from(w.bytes as u32))?;
        self.set_reg(ids.window_collision, slot, u128::from(w.collided))?;
        self.set_reg(ids.window_early, slot, u128::from(w.early_done))
    }
}
