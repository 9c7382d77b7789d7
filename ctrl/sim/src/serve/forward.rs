//! The data path of a served fabric: every simulated switch forwards
//! with its pipeline twin, on the tables, groups and registers the
//! controller wrote over P4Runtime, and the run is paced against the wall
//! clock so that the controller sees the fabric in (dilated) real time.
//!
//! The simulator's packets carry no bytes, so the headers a twin needs
//! are built from the packet's flow at its first hop and then travel with
//! it hop by hop (INT stacks grow, ECN marks stay) in a table keyed by the
//! packet's transmission (a resent PSN is a new packet with fresh
//! headers), until the packet leaves the fabric. Switch clocks start at
//! 1 s when traffic starts: the program reads a zero timestamp register
//! as "never". The destination QP is
//! a stable 24-bit value per (source, destination) host pair, as one
//! reliable connection has; TTL starts at 64 at the sending host.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use metaroce_topo::Topology;
use tokio::sync::mpsc::UnboundedSender;

use super::LinkChange;
use crate::control::forward::{Forwarder, NetView, PacketInfo, Route};
use crate::engine::events::Packet;
use crate::engine::net::FibMember;
use crate::rng::mix64;
use crate::twin::{Aeth, Bth, Ethernet, Headers, Ipv4, Twin, Udp, Verdict, L4};

/// The data's (responder's) QP of the connection from host `src` to host
/// `dst`: a stable 24-bit value per host pair, as one reliable connection
/// has.
fn data_qp(src: u32, dst: u32) -> u32 {
    (mix64(u64::from(src) << 32 | u64::from(dst)) & 0xFF_FFFF) as u32
}

/// The IPv4 header a host puts on a UDP packet of `len` bytes (TTL 64,
/// its checksum computed).
fn udp_ipv4(src: u32, dst: u32, len: u16, ecn: u8) -> Ipv4 {
    let mut ip =
        Ipv4 { version: 4, ihl: 5, ecn, total_len: len, ttl: 64, protocol: 17, src, dst, ..Ipv4::default() };
    ip.checksum = ip.computed_checksum();
    ip
}

/// The requester's QP of that connection: what its ACKs carry.
fn ack_qp(src: u32, dst: u32) -> u32 {
    (mix64(u64::from(dst) << 32 | u64::from(src) ^ 0xAC4_0000_0000) & 0xFF_FFFF) as u32
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const UDP_PORT_ROCEV2: u16 = 4791;
/// Headers of packets lost inside the fabric (dropped at a full buffer,
/// or on a dead link) stay behind in the table; past this many entries,
/// those older than [`STALE_PS`] are swept.
const SWEEP_AT: usize = 1 << 16;
const STALE_PS: u64 = 1_000_000_000_000;
/// Counters a served run shares with whoever shows its progress.
#[derive(Debug, Default)]
pub struct Counters {
    /// Packets a twin forwarded (one per hop).
    pub forwarded: AtomicU64,
    /// Packets a twin dropped, or that hit an error in its ingress.
    pub dropped: AtomicU64,
    /// Of those, by the program's drop reason code (0: an error in the
    /// twin, or a code past 7).
    pub drop_reasons: [AtomicU64; 8],
    /// Errors in a twin's egress (the packet still leaves).
    pub egress_errors: AtomicU64,
    /// Packets a twin marked CE.
    pub ecn_marks: AtomicU64,
    /// Digest items and packet-ins the twins handed to the controller.
    pub digests: AtomicU64,
    pub packet_ins: AtomicU64,
    /// Frames the controller sent as packet-out: the twin runs them
    /// through egress, but the simulator cannot carry bytes, so they end
    /// there (our controller sends none).
    pub packet_outs: AtomicU64,
    /// Simulated time reached, picoseconds.
    pub now_ps: AtomicU64,
    /// How far the simulation lags the wall clock, microseconds (it cannot
    /// keep up when this grows).
    pub lag_us: AtomicU64,
}

/// Keeps simulated time from running ahead of the (dilated) wall clock.
#[derive(Debug, Clone)]
pub struct Pace {
    pub start: Instant,
    /// Wall seconds per simulated second (1: real time).
    pub dilation: f64,
}

impl Pace {
    fn wall_of(&self, now_ps: u64) -> Duration {
        Duration::from_secs_f64(now_ps as f64 * 1e-12 * self.dilation)
    }
}

/// A switch's clock for the twin, µs: simulated time plus 1 s.
fn switch_us(now_ps: u64) -> u64 {
    now_ps / 1_000_000 + 1_000_000
}

/// Host addressing the twins see.
#[derive(Debug, Clone, Copy)]
struct HostAddr {
    ip: u32,
    mac: [u8; 6],
}

/// The forwarder of a served run: one twin per switch.
pub struct TwinFabric {
    twins: Vec<Twin>,
    hosts: Vec<HostAddr>,
    /// `(switch, port)` pairs that lead to a host: a packet leaving there
    /// leaves the fabric.
    host_ports: std::collections::HashSet<(u32, u16)>,
    /// Headers of packets inside the fabric, by transmission, and when
    /// they last moved.
    in_flight: HashMap<u32, (Headers, u64)>,
    egresses: u64,
    last_sweep_ps: u64,
    pace: Pace,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    errors_logged: u32,
    /// Where link failures and repairs go (the control plane's link watcher).
    links: Option<UnboundedSender<LinkChange>>,
}

impl std::fmt::Debug for TwinFabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwinFabric").field("switches", &self.twins.len()).finish_non_exhaustive()
    }
}

impl TwinFabric {
    /// `twins[i]` plays switch `i` of `topo`.
    pub fn new(
        topo: &Topology,
        twins: Vec<Twin>,
        pace: Pace,
        stop: Arc<AtomicBool>,
        counters: Arc<Counters>,
    ) -> Self {
        let hosts = topo.hosts.iter().map(|h| HostAddr { ip: u32::from(h.ip), mac: h.mac.0 }).collect();
        let host_ports = topo.hosts.iter().map(|h| (h.leaf as u32, h.port)).collect();
        TwinFabric {
            twins,
            hosts,
            host_ports,
            in_flight: HashMap::new(),
            egresses: 0,
            last_sweep_ps: 0,
            pace,
            stop,
            counters,
            errors_logged: 0,
            links: None,
        }
    }

    /// Sends every link failure and repair of the run to `tx`, when the
    /// wall clock reaches it.
    pub fn report_links(mut self, tx: UnboundedSender<LinkChange>) -> Self {
        self.links = Some(tx);
        self
    }

    /// Waits until the wall clock reaches `now_ps`; false once stopped.
    fn pace(&self, now_ps: u64) -> bool {
        self.counters.now_ps.store(now_ps, Ordering::Relaxed);
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        let due = self.pace.wall_of(now_ps);
        let elapsed = self.pace.start.elapsed();
        match due.checked_sub(elapsed) {
            Some(wait) => {
                self.counters.lag_us.store(0, Ordering::Relaxed);
                std::thread::sleep(wait);
            }
            None => {
                let lag = elapsed.saturating_sub(due).as_micros();
                self.counters.lag_us.store(u64::try_from(lag).unwrap_or(u64::MAX), Ordering::Relaxed);
            }
        }
        true
    }

    /// The headers a sending host puts on a packet (its IP length is the
    /// packet's simulated length less Ethernet and FCS; see [`wire_bytes`]).
    fn first_hop(&self, p: &Packet, wire_psn: u32) -> Headers {
        let (src, dst) = (self.hosts[p.src_host as usize], self.hosts[p.dst_host as usize]);
        // Ethernet (14) and FCS (4) are not in the IP length.
        let ip_len = p.bytes.saturating_sub(18);
        let ip = udp_ipv4(src.ip, dst.ip, ip_len, if p.ce { 3 } else { 2 });
        let qp = data_qp(p.src_host, p.dst_host);
        Headers {
            eth: Ethernet { dst: [0; 6], src: src.mac, ether_type: ETHERTYPE_IPV4 },
            ipv4: Some(ip),
            l4: Some(L4::Udp(Udp {
                src_port: p.sport,
                dst_port: UDP_PORT_ROCEV2,
                len: ip_len.saturating_sub(20),
                checksum: 0,
            })),
            int: None,
            bth: Some(Bth { head: 0, reserved0: 0, dest_qp: qp, psn_word: wire_psn & 0xFF_FFFF }),
            aeth: None,
            payload: Vec::new(),
            meta: Default::default(),
        }
    }

    fn failed(&mut self, switch: u32, what: &str, e: &dyn std::fmt::Display) {
        self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        self.counters.drop_reasons[0].fetch_add(1, Ordering::Relaxed);
        self.log_error(switch, what, e);
    }

    fn log_error(&mut self, switch: u32, what: &str, e: &dyn std::fmt::Display) {
        // The first few are enough to see what is wrong.
        if self.errors_logged < 10 {
            self.errors_logged += 1;
            tracing::warn!(switch, error = %e, "twin {what} failed");
        }
    }

    fn drain_packet_outs(&mut self, now_ps: u64) {
        let mut n = 0;
        for t in &mut self.twins {
            n += t.packet_outs(switch_us(now_ps)).map_or(0, |o| o.len() as u64);
        }
        if n > 0 && self.counters.packet_outs.fetch_add(n, Ordering::Relaxed) == 0 {
            tracing::warn!(
                frames = n,
                "packet-outs reach a served switch's egress but not the simulated wire"
            );
        }
    }

    fn sync_counters(&self) {
        let (d, p) = self.twins.iter().fold((0, 0), |(d, p), t| {
            let (a, b) = t.sent_to_controller();
            (d + a, p + b)
        });
        self.counters.digests.store(d, Ordering::Relaxed);
        self.counters.packet_ins.store(p, Ordering::Relaxed);
    }
}

impl Drop for TwinFabric {
    /// The run is over: the last digests and packet-ins count too.
    fn drop(&mut self) {
        self.sync_counters();
    }
}

/// A packet's simulated length (Ethernet, IP and FCS) as its headers now
/// say: the IP total length plus 18. A packet without IPv4 keeps `was`.
fn wire_bytes(h: &Headers, was: u16) -> u16 {
    h.ipv4.map_or(was, |ip| ip.total_len.saturating_add(18))
}

impl Forwarder for TwinFabric {
    /// Never called: the twins route by themselves ([`Forwarder::route`]).
    fn choose(&mut self, _: u64, _: u32, _: &[FibMember], _: u32, _: &PacketInfo, _: &dyn NetView) -> usize {
        0
    }

    fn link(&mut self, now_ps: u64, link: usize, up: bool) {
        if self.pace(now_ps) {
            if let Some(tx) = &self.links {
                // A closed receiver means nobody listens any more: nothing to tell.
                let _ = tx.send(LinkChange { at_ps: now_ps, link, up });
            }
        }
    }

    fn is_pipeline(&self) -> bool {
        true
    }

    fn halted(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn route(&mut self, now_ps: u64, switch: u32, in_port: u16, p: &Packet, wire_psn: u32) -> Option<Route> {
        let key = p.tx;
        let mut h = self.in_flight.remove(&key).map_or_else(|| self.first_hop(p, wire_psn), |(h, _)| h);
        if !self.pace(now_ps) {
            return Some(Route::Drop);
        }
        let Some(twin) = self.twins.get_mut(switch as usize) else { return Some(Route::Drop) };
        match twin.ingress(u32::from(in_port), &mut h, switch_us(now_ps)) {
            Ok(Verdict::Forward { port }) => match u16::try_from(port) {
                Ok(port) => {
                    self.counters.forwarded.fetch_add(1, Ordering::Relaxed);
                    self.in_flight.insert(key, (h, now_ps));
                    Some(Route::Port(port))
                }
                Err(e) => {
                    self.failed(switch, "ingress", &e);
                    Some(Route::Drop)
                }
            },
            Ok(Verdict::Drop(reason)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                let i = match usize::from(reason.code()) {
                    c @ 1..=7 => c,
                    _ => 0,
                };
                self.counters.drop_reasons[i].fetch_add(1, Ordering::Relaxed);
                Some(Route::Drop)
            }
            Ok(Verdict::ToCpu { .. }) => {
                // The twin has handed it to the controller.
                Some(Route::Drop)
            }
            Err(e) => {
                self.failed(switch, "ingress", &e);
                Some(Route::Drop)
            }
        }
    }

    fn leaf_sees_ack(
        &mut self,
        now_ps: u64,
        leaf: u32,
        src_host: u32,
        dst_host: u32,
        wire_psn: u32,
        nak: bool,
    ) {
        let (src, dst) = (self.hosts[src_host as usize], self.hosts[dst_host as usize]);
        // The ACK flows from the receiver to the sender. Its BTH PSN is the
        // last one it acknowledges; a NAK's is the one it asks for.
        let psn = if nak { wire_psn } else { wire_psn.wrapping_sub(1) } & 0xFF_FFFF;
        let ip = udp_ipv4(dst.ip, src.ip, 20 + 8 + 12 + 4, 0);
        let mut h = Headers {
            eth: Ethernet { dst: [0; 6], src: dst.mac, ether_type: ETHERTYPE_IPV4 },
            ipv4: Some(ip),
            l4: Some(L4::Udp(Udp {
                src_port: 0xC000,
                dst_port: UDP_PORT_ROCEV2,
                len: 8 + 12 + 4,
                checksum: 0,
            })),
            int: None,
            bth: Some(Bth {
                head: 0x11 << 24 | 0xFFFF,
                reserved0: 0,
                dest_qp: ack_qp(src_host, dst_host),
                psn_word: psn,
            }),
            aeth: Some(Aeth { syndrome: if nak { 0x60 } else { 0 }, msn: 0 }),
            payload: Vec::new(),
            meta: Default::default(),
        };
        if !self.pace(now_ps) {
            return;
        }
        let Some(twin) = self.twins.get_mut(leaf as usize) else { return };
        // Only the drain rule's part matters: the ACK itself reaches the
        // sender out of band, so the verdict is not acted on.
        if let Err(e) = twin.ingress(0, &mut h, switch_us(now_ps)) {
            self.failed(leaf, "ingress (ACK)", &e);
        }
    }

    fn egress(&mut self, now_ps: u64, switch: u32, port: u16, depth_pkts: usize, p: &mut Packet) {
        let key = p.tx;
        let Some((mut h, _)) = self.in_flight.remove(&key) else { return };
        let Some(twin) = self.twins.get_mut(switch as usize) else { return };
        let depth = u32::try_from(depth_pkts).unwrap_or(u32::MAX);
        if let Err(e) = twin.egress(u32::from(port), &mut h, depth, switch_us(now_ps)) {
            self.counters.egress_errors.fetch_add(1, Ordering::Relaxed);
            self.log_error(switch, "egress", &e);
        }
        let ce = h.ipv4.is_some_and(|ip| ip.ecn == 3);
        if ce && !p.ce {
            self.counters.ecn_marks.fetch_add(1, Ordering::Relaxed);
        }
        p.ce = ce;
        // INT pushed (or stripped at the sink) changes what the link carries.
        p.bytes = wire_bytes(&h, p.bytes);
        if !self.host_ports.contains(&(switch, port)) {
            self.in_flight.insert(key, (h, now_ps));
        }
        self.egresses += 1;
        if self.egresses.is_multiple_of(256) {
            self.sync_counters();
            self.drain_packet_outs(now_ps);
        }
        if self.in_flight.len() > SWEEP_AT && now_ps.saturating_sub(self.last_sweep_ps) > STALE_PS {
            self.last_sweep_ps = now_ps;
            self.in_flight.retain(|_, (_, t)| now_ps.saturating_sub(*t) < STALE_PS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_is_as_long_as_its_ip_header_says() {
        let mut h = Headers::default();
        assert_eq!(wire_bytes(&h, 1042), 1042, "no IPv4: unchanged");
        h.ipv4 = Some(Ipv4 { total_len: 1000 + 16 + 48, ..Ipv4::default() });
        assert_eq!(wire_bytes(&h, 1018), 1082, "INT of two hops adds 64 bytes");
    }
}
