//! Bytes in, bytes out: the parser, ingress, the egress queue of each
//! port in virtual time, egress and the deparser. A port with a [`Queue`]
//! drains at `rate_pps` and holds `depth_pkts` packets (a full queue drops
//! the arriving packet, as BMv2's does); egress runs when a packet is
//! dequeued and sees the packets still queued behind it, like BMv2's
//! `deq_qdepth`. A port without one sends at once with an empty queue.

use std::collections::{BTreeMap, VecDeque};

use super::headers::{Bridged, Headers};
use super::{ids, Output, Twin, TwinError, Verdict, CPU_PORT};

/// BMv2's default egress queue capacity (packets).
const DEFAULT_DEPTH_PKTS: u32 = 64;

/// An egress queue: drain rate and capacity (`None`: unlimited rate, and
/// BMv2's 64 packets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Queue {
    pub rate_pps: Option<u64>,
    pub depth_pkts: Option<u32>,
}

#[derive(Debug)]
struct Pending {
    headers: Headers,
    /// When it leaves the queue (ns of virtual time).
    dequeue_ns: u128,
    seq: u64,
}

#[derive(Debug, Default)]
struct PortQueue {
    cfg: Queue,
    /// When the port can dequeue its next packet.
    next_free_ns: u128,
    pending: VecDeque<Pending>,
}

#[derive(Debug, Default)]
pub(super) struct Queues {
    ports: BTreeMap<u32, PortQueue>,
    seq: u64,
    tail_drops: u64,
}

fn ns(us: u64) -> u128 {
    u128::from(us) * 1000
}

impl Twin {
    /// Models port `port`'s egress queue (replacing an earlier setting;
    /// packets already queued keep their departure times).
    pub fn set_queue(&mut self, port: u32, q: Queue) -> Result<(), TwinError> {
        if port > 511 || port == CPU_PORT {
            return Err(TwinError::BadPort { port });
        }
        if q.rate_pps == Some(0) || q.depth_pkts == Some(0) {
            return Err(TwinError::BadQueue { port, message: "rate and depth must be at least 1".into() });
        }
        self.queues.ports.entry(port).or_default().cfg = q;
        Ok(())
    }

    /// Packets dropped because their egress queue was full.
    pub fn tail_drops(&self) -> u64 {
        self.queues.tail_drops
    }

    /// A frame arriving on `in_port` at `now_us`, after everything due
    /// before it has left. Returns every frame that left meanwhile. On the
    /// CPU port the frame starts with its packet_out header (P4Runtime
    /// packet-outs come through [`Twin::packet_outs`] instead).
    pub fn process(&mut self, in_port: u32, bytes: &[u8], now_us: u64) -> Result<Vec<Output>, TwinError> {
        let mut out = self.advance(now_us)?;
        if in_port == CPU_PORT {
            // The CPU port's frames start with the packet_out header
            // (egress_port 16, flags 8, reserved 8), as the parser sees them.
            let Some((head, frame)) = bytes.split_first_chunk::<4>() else {
                self.count_drop(super::DropReason::ParserError)?;
                return Ok(out);
            };
            let port = u32::from(u16::from_be_bytes([head[0], head[1]])) & 0x1ff;
            self.packet_out(port, frame.to_vec(), now_us, &mut out)?;
            return Ok(out);
        }
        let mut h = match Headers::parse(bytes) {
            Ok(h) => h,
            Err(reason) => {
                self.count_drop(reason)?;
                tracing::trace!(
                    device = self.switch.device_id(),
                    in_port,
                    reason = reason.code(),
                    "parser drop"
                );
                return Ok(out);
            }
        };
        match self.ingress(in_port, &mut h, now_us)? {
            Verdict::Forward { port } => self.enqueue(port, h, now_us, &mut out)?,
            Verdict::ToCpu { reason } => out.push(self.packet_in(in_port, reason, h.deparse())),
            Verdict::Drop(_) => {}
        }
        Ok(out)
    }

    /// Sends what the controller sent as packet-out since the last call:
    /// each leaves on its `egress_port` through egress.
    pub fn packet_outs(&mut self, now_us: u64) -> Result<Vec<Output>, TwinError> {
        self.check_pipeline()?;
        let mut out = self.advance(now_us)?;
        let (id, width) = self.ids.packet_out_port;
        while let Ok(p) = self.packet_outs.try_recv() {
            let port = p
                .metadata
                .iter()
                .find(|m| m.metadata_id == id)
                .and_then(|m| metaroce_p4rt::codec::decode_u128(&m.value, width).ok())
                .map(|v| ids::masked(v, 9) as u32)
                .unwrap_or(0);
            self.packet_out(port, p.payload, now_us, &mut out)?;
        }
        Ok(out)
    }

    /// A frame from the controller, to leave on `port` through egress.
    fn packet_out(
        &mut self,
        port: u32,
        frame: Vec<u8>,
        now_us: u64,
        out: &mut Vec<Output>,
    ) -> Result<(), TwinError> {
        match Headers::parse_unverified(&frame) {
            Ok(mut h) => {
                let ingress_ts = now_us & super::TIME_MASK;
                h.meta = Bridged { ingress_port: CPU_PORT, ingress_ts, ..Default::default() };
                self.enqueue(port, h, now_us, out)
            }
            // The packet-out branch comes before the parser's checks: a
            // frame that does not parse leaves as it is.
            Err(_) => {
                out.push(Output::Packet { port, bytes: frame, at_us: now_us });
                Ok(())
            }
        }
    }

    fn enqueue(
        &mut self,
        port: u32,
        mut h: Headers,
        now_us: u64,
        out: &mut Vec<Output>,
    ) -> Result<(), TwinError> {
        if port == CPU_PORT {
            out.push(self.packet_in(h.meta.ingress_port, 0, h.deparse()));
            return Ok(());
        }
        let Some(q) = self.queues.ports.get_mut(&port).filter(|q| q.cfg.rate_pps.is_some()) else {
            let copies = self.egress(port, &mut h, 0, now_us)?;
            out.push(Output::Packet { port, bytes: h.deparse(), at_us: now_us });
            out.extend(copies);
            return Ok(());
        };
        let cap = q.cfg.depth_pkts.unwrap_or(DEFAULT_DEPTH_PKTS);
        if q.pending.len() >= cap as usize {
            self.queues.tail_drops += 1;
            tracing::trace!(device = self.switch.device_id(), port, "egress queue full: tail drop");
            return Ok(());
        }
        let interval = 1_000_000_000 / u128::from(q.cfg.rate_pps.unwrap_or(1).max(1));
        let dequeue_ns = ns(now_us).max(q.next_free_ns);
        q.next_free_ns = dequeue_ns + interval;
        self.queues.seq += 1;
        q.pending.push_back(Pending { headers: h, dequeue_ns, seq: self.queues.seq });
        out.extend(self.advance(now_us)?);
        Ok(())
    }

    /// Dequeues, in time order over all ports, every packet due by
    /// `now_us`, running egress on each.
    pub fn advance(&mut self, now_us: u64) -> Result<Vec<Output>, TwinError> {
        let mut out = vec![];
        let limit = ns(now_us);
        loop {
            let next = self
                .queues
                .ports
                .iter()
                .filter_map(|(port, q)| q.pending.front().map(|p| (p.dequeue_ns, p.seq, *port)))
                .filter(|(at, _, _)| *at <= limit)
                .min();
            let Some((at, _, port)) = next else { break };
            let Some(q) = self.queues.ports.get_mut(&port) else { break };
            let Some(mut p) = q.pending.pop_front() else { break };
            let depth = q.pending.len() as u32;
            let at_us = (at / 1000) as u64;
            let copies = self.egress(port, &mut p.headers, depth, at_us)?;
            out.push(Output::Packet { port, bytes: p.headers.deparse(), at_us });
            out.extend(copies);
        }
        Ok(out)
    }

    /// When the next queued packet leaves (µs), if any is queued.
    pub fn next_departure_us(&self) -> Option<u64> {
        self.queues
            .ports
            .values()
            .filter_map(|q| q.pending.front())
            .map(|p| p.dequeue_ns.div_ceil(1000) as u64)
            .min()
    }
}
