//! Egress (`p4src/v1model/egress.p4`, `congestion.p4`, `int_egress.p4`):
//! per-port settings, the max-depth and congested registers, ECN marking,
//! threshold crossings with rate-limited digests, and INT source, transit
//! and sink. The clone copies (digest, Telemetry Report) are made here.

use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_pipeline::names::{DIGEST_SESSION, REPORT_SESSION};

use super::headers::{Headers, Int, IntHop, IntMd, IntShim, INT_DSCP_BIT, INT_HOP_ML, INT_INSTRUCTIONS};
use super::headers::{INT_TYPE_MD, INT_VERSION};
use super::ids::{encode, masked};
use super::report::SinkSave;
use super::{Output, Twin, TwinError, CPU_PORT, TIME_MASK};

/// Words a received stack may hold, plus the shim's 3 of INT-MD.
const INT_MAX_SHIM_LEN: u16 = 24 + 3;

/// `egress_port_config` of one port; all zero without an entry.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PortCfg {
    pub edge: bool,
    pub mtu: u16,
    pub queue_high: u32,
    pub queue_low: u32,
    pub ecn_threshold: u32,
}

/// `egress_config`.
#[derive(Debug, Clone, Copy)]
pub(super) struct EgressCfg {
    pub digest_interval: u64,
    pub report_period: u64,
    pub latency_shift: u8,
}

/// What one packet's egress pass knows besides its headers.
pub(super) struct Pass {
    pub port: u32,
    pub depth: u32,
    pub now: u64,
    pub pc: PortCfg,
    pub cfg: Option<EgressCfg>,
    /// The ECN field as received, when this hop marked CE.
    pub ecn_received: Option<u8>,
    /// This packet raised a threshold digest (one clone per packet).
    pub digest: bool,
}

impl Twin {
    /// Runs egress on a packet leaving on `port` at `now_us`, with
    /// `depth` packets left in its queue. Returns the clone copies.
    pub fn egress(
        &mut self,
        port: u32,
        h: &mut Headers,
        depth: u32,
        now_us: u64,
    ) -> Result<Vec<Output>, TwinError> {
        self.check_pipeline()?;
        if port > 511 {
            return Err(TwinError::BadPort { port });
        }
        if port == CPU_PORT || h.ipv4.is_none() {
            return Ok(vec![]);
        }
        let pc = self.port_cfg(port)?;
        let mut pass =
            Pass { port, depth, now: now_us & TIME_MASK, pc, cfg: None, ecn_received: None, digest: false };
        self.queue_sensing(h, &mut pass)?;
        // The drain rule's mark ends where the packet leaves for a host.
        if let (Some(b), true) = (h.bth.as_mut(), pass.pc.edge) {
            b.reserved0 &= !3;
        }
        let save = self.int_egress(h, &mut pass)?;
        match save {
            Some(s) => self.reports(h, &s),
            None => Ok(vec![]),
        }
    }

    fn port_cfg(&self, port: u32) -> Result<PortCfg, TwinError> {
        let hit = self.lookup(&self.ids.egress_port_config, &[u128::from(port)], 0)?;
        Ok(match hit.params(&self.ids.set_port).as_deref() {
            Some([edge, mtu, high, low, ecn]) => PortCfg {
                edge: *edge == 1,
                mtu: *mtu as u16,
                queue_high: *high as u32,
                queue_low: *low as u32,
                ecn_threshold: *ecn as u32,
            },
            _ => PortCfg::default(),
        })
    }

    fn egress_cfg(&self) -> Result<EgressCfg, TwinError> {
        let hit = self.lookup(&self.ids.egress_config, &[], 0)?;
        Ok(match hit.params(&self.ids.configure_egress).as_deref() {
            Some([d, r, s]) => {
                EgressCfg { digest_interval: *d as u64, report_period: *r as u64, latency_shift: *s as u8 }
            }
            _ => EgressCfg { digest_interval: 1000, report_period: 1_000_000, latency_shift: 8 },
        })
    }

    fn queue_sensing(&mut self, h: &mut Headers, p: &mut Pass) -> Result<(), TwinError> {
        let ids = &self.ids;
        let depth = u128::from(p.depth);
        if depth > self.reg(ids.port_max_depth, p.port)? {
            self.set_reg(ids.port_max_depth, p.port, depth)?;
        }
        if let Some(ip) = h.ipv4.as_mut() {
            if p.pc.ecn_threshold != 0 && (ip.ecn == 1 || ip.ecn == 2) && p.depth >= p.pc.ecn_threshold {
                p.ecn_received = Some(ip.ecn);
                ip.ecn = 3;
                self.count(ids.ecn_marks, p.port);
            }
        }
        let mut state = 0;
        let mut crossing = false;
        if p.pc.queue_high != 0 {
            state = self.reg(ids.port_congested, p.port)?;
            crossing =
                (state == 0 && p.depth >= p.pc.queue_high) || (state == 1 && p.depth <= p.pc.queue_low);
        }
        if crossing || (h.int.is_some() && p.pc.edge) {
            p.cfg = Some(self.egress_cfg()?);
        }
        if !crossing {
            return Ok(());
        }
        let interval = p.cfg.map(|c| c.digest_interval).unwrap_or(0);
        let last = self.reg(ids.port_last_digest, p.port)? as u64;
        if last != 0 && p.now.wrapping_sub(last) & TIME_MASK < interval {
            // Held back, and not recorded: the next packet raises it again.
            return Ok(());
        }
        let seq = self.reg(ids.digest_seq, 0)?;
        let congested = state ^ 1;
        self.set_reg(ids.digest_seq, 0, seq + 1)?;
        self.set_reg(ids.port_congested, p.port, congested)?;
        self.set_reg(ids.port_last_digest, p.port, u128::from(p.now))?;
        p.digest = true;
        let values =
            [u128::from(h.meta.switch_id), u128::from(p.port), depth, u128::from(p.now), seq, congested];
        self.digest(&values);
        tracing::debug!(device = self.switch.device_id(), port = p.port, depth = p.depth, congested = %congested, "threshold digest");
        Ok(())
    }

    /// The digest clone: one per replica of session 501, none without it.
    fn digest(&mut self, values: &[u128]) {
        let Some(replicas) = self.switch.clone_session_ports(DIGEST_SESSION) else { return };
        let widths = self.ids.digest_widths.clone();
        for _ in replicas {
            self.emit_digest(self.ids.digest, &widths, values);
        }
    }

    /// One digest item of `digest` (members of `widths`) to the switch's
    /// client.
    pub(super) fn emit_digest(&mut self, digest: u32, widths: &[i32], values: &[u128]) {
        let members: Vec<p4::P4Data> = widths
            .iter()
            .zip(values)
            .map(|(w, v)| p4::P4Data { data: Some(p4::p4_data::Data::Bitstring(encode(*v, *w))) })
            .collect();
        let data = p4::P4Data { data: Some(p4::p4_data::Data::Struct(p4::P4StructLike { members })) };
        if self.switch.emit_digest(digest, data) {
            self.digests_sent += 1;
        }
    }

    fn int_egress(&mut self, h: &mut Headers, p: &mut Pass) -> Result<Option<SinkSave>, TwinError> {
        match (h.int.is_some(), p.pc.edge) {
            (false, false) => {
                if let Some(max_hops) = h.meta.int_source {
                    insert_int_headers(h, max_hops);
                    self.transit_hop(h, p);
                }
                Ok(None)
            }
            (false, true) => Ok(None),
            (true, false) => {
                self.transit_hop(h, p);
                Ok(None)
            }
            (true, true) => self.sink(h, p),
        }
    }

    fn this_hop(&self, h: &Headers, p: &Pass) -> IntHop {
        IntHop {
            node_id: h.meta.switch_id,
            ingress_port: h.meta.ingress_port as u16,
            egress_port: p.port as u16,
            hop_latency: hop_latency(h, p),
            queue_id: 0,
            occupancy: p.depth & 0xff_ffff,
            egress_ts: p.now,
        }
    }

    /// Pushes this hop, or sets E (hop limit, full stack) or M (MTU).
    fn transit_hop(&self, h: &mut Headers, p: &Pass) {
        let hop = self.this_hop(h, p);
        let total_len = h.ipv4.map(|ip| ip.total_len).unwrap_or(0);
        let Some(int) = h.int.as_mut() else { return };
        if int.md.remaining_hops == 0 || u16::from(int.shim.len) + u16::from(INT_HOP_ML) > INT_MAX_SHIM_LEN {
            int.md.hop_exceeded = true;
        } else if p.pc.mtu != 0 && u32::from(total_len) + 24 > u32::from(p.pc.mtu) {
            int.md.mtu_exceeded = true;
        } else {
            int.hops.insert(0, hop);
            int.md.remaining_hops -= 1;
            int.shim.len = int.shim.len.wrapping_add(INT_HOP_ML);
            add_int_bytes(h, 24);
        }
    }

    /// The sink: reports when the flow's path latency changed bucket or
    /// the report period passed, then strips INT.
    fn sink(&mut self, h: &mut Headers, p: &Pass) -> Result<Option<SinkSave>, TwinError> {
        let Some(int) = h.int.clone() else { return Ok(None) };
        let ids = &self.ids;
        let cfg =
            p.cfg.unwrap_or(EgressCfg { digest_interval: 1000, report_period: 1_000_000, latency_shift: 8 });
        let latency = int.hops.iter().fold(hop_latency(h, p), |a, hop| a.wrapping_add(hop.hop_latency));
        let bucket = if cfg.latency_shift >= 32 { 0 } else { latency >> cfg.latency_shift };
        let slot = h.meta.flow_slot;
        let last_bucket = self.reg(ids.report_last_bucket, slot)?;
        let last_time = self.reg(ids.report_last_time, slot)? as u64;
        let encap = self.report_encap()?;
        let due = last_time == 0
            || u128::from(bucket) != last_bucket
            || p.now.wrapping_sub(last_time) & TIME_MASK >= cfg.report_period;
        let mut save = None;
        if due && encap.dst_ip != 0 && !p.digest {
            self.set_reg(ids.report_last_bucket, slot, u128::from(bucket))?;
            self.set_reg(ids.report_last_time, slot, u128::from(p.now))?;
            let ecn = h.ipv4.map(|ip| ip.ecn).unwrap_or(0);
            save = Some(SinkSave {
                hop: self.this_hop(h, p),
                congested: p.pc.queue_high != 0 && p.depth >= p.pc.queue_high,
                int,
                ecn: p.ecn_received.unwrap_or(ecn),
                encap,
            });
        }
        strip_int(h);
        Ok(save)
    }
}

/// This hop's latency: egress minus ingress time, 32 bits.
fn hop_latency(h: &Headers, p: &Pass) -> u32 {
    (p.now.wrapping_sub(h.meta.ingress_ts) & TIME_MASK) as u32
}

fn add_int_bytes(h: &mut Headers, bytes: u16) {
    if let Some(ip) = h.ipv4.as_mut() {
        ip.total_len = ip.total_len.wrapping_add(bytes);
    }
    if let Some(u) = h.udp_mut() {
        u.len = u.len.wrapping_add(bytes);
        // RoCEv2 relies on its ICRC; a zero UDP checksum stays valid for IPv4.
        u.checksum = 0;
    }
}

fn insert_int_headers(h: &mut Headers, max_hops: u8) {
    let Some(ip) = h.ipv4.as_mut() else { return };
    let shim = IntShim { int_type: INT_TYPE_MD, len: 3, original_dscp: ip.dscp, ..Default::default() };
    let md = IntMd {
        version: INT_VERSION,
        hop_ml: INT_HOP_ML,
        remaining_hops: max_hops,
        instructions: INT_INSTRUCTIONS,
        ..Default::default()
    };
    ip.dscp |= INT_DSCP_BIT;
    h.int = Some(Int { shim, md, hops: vec![] });
    add_int_bytes(h, 16);
}

fn strip_int(h: &mut Headers) {
    let Some(int) = h.int.take() else { return };
    let bytes = 4u16.wrapping_add(u16::from(int.shim.len) << 2);
    if let Some(ip) = h.ipv4.as_mut() {
        ip.total_len = ip.total_len.wrapping_sub(bytes);
        ip.dscp = int.shim.original_dscp;
    }
    if let Some(u) = h.udp_mut() {
        u.len = u.len.wrapping_sub(bytes);
        u.checksum = 0;
    }
}

/// `report_config`: where Telemetry Reports go.
#[derive(Debug, Clone, Copy)]
pub(super) struct Encap {
    pub src_mac: u64,
    pub dst_mac: u64,
    pub src_ip: u32,
    pub dst_ip: u32,
    pub dst_port: u16,
}

impl Twin {
    fn report_encap(&self) -> Result<Encap, TwinError> {
        let hit = self.lookup(&self.ids.report_config, &[], 0)?;
        Ok(match hit.params(&self.ids.set_report_encap).as_deref() {
            Some([sm, dm, si, di, dp]) => Encap {
                src_mac: masked(*sm, 48) as u64,
                dst_mac: masked(*dm, 48) as u64,
                src_ip: *si as u32,
                dst_ip: *di as u32,
                dst_port: *dp as u16,
            },
            _ => Encap { src_mac: 0, dst_mac: 0, src_ip: 0, dst_ip: 0, dst_port: 32766 },
        })
    }

    /// The report clone: one per replica of session 500.
    fn reports(&mut self, h: &Headers, s: &SinkSave) -> Result<Vec<Output>, TwinError> {
        let Some(ports) = self.switch.clone_session_ports(REPORT_SESSION) else { return Ok(vec![]) };
        let mut out = vec![];
        for port in ports {
            let seq = self.reg(self.ids.report_seq, 0)?;
            self.set_reg(self.ids.report_seq, 0, seq + 1)?;
            let frame = s.report(h, seq as u32);
            self.count(self.ids.reports_sent, 0);
            out.push(if port == CPU_PORT {
                self.packet_in(h.meta.ingress_port, metaroce_pipeline::names::PACKET_IN_REPORT, frame)
            } else {
                Output::Packet { port, bytes: frame, at_us: s.hop.egress_ts }
            });
        }
        Ok(out)
    }
}
