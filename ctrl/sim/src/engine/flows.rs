//! Expanding jobs into queue pairs and messages (flows), with the
//! dependencies that chain the steps of a ring AllReduce. A job of several
//! iterations gets every iteration's messages up front, on the same queue
//! pairs; the engine posts an iteration when the one before has finished.

use metaroce_topo::{HostId, Routing, Topology};

use crate::engine::dcqcn::RateState;
use crate::engine::events::{FlowId, QpId};
use crate::rng::mix64;
use crate::scenario::config::{Job, NetConfig, Pattern, Scenario};

/// Marks "none" in u32 links.
pub const NONE: u32 = u32::MAX;
/// Most flows in one run: beyond this the state no longer fits comfortably.
pub const MAX_FLOWS: usize = 8 << 20;
/// RoCEv2's UDP destination port.
pub const ROCE_PORT: u16 = 4791;

/// A queue pair's hot part: what the NIC scheduler reads and writes for
/// every packet it sends, in 32 bytes, so that two queue pairs share a
/// cache line (a host's queue pairs are numbered one after another and
/// its NIC serves them round-robin in that order). On a 1,024-host
/// All-to-All there are a million queue pairs and the first touch of each
/// per packet is a cache miss. The rest is in [`Qp`].
#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
pub struct QpHot {
    /// When DCQCN (or the rate cap) lets it send again.
    pub next_ok_ps: u64,
    /// Current message (head); messages link via `Flow::next_on_qp`.
    pub head: u32,
    pub dst: u32,
    /// The head message's next PSN to send (from its start).
    pub snd_next: u32,
    /// Highest PSN sent plus one: below it, a send is a retransmission.
    pub snd_max: u32,
    /// The head message's packets.
    pub npkts: u32,
    /// The head message's UDP source port.
    pub sport: u16,
    /// Traffic class: index into the run's priorities (`Scenario::priorities`).
    pub tc: u8,
    /// [`QpHot::IN_SCHED`], [`QpHot::RATE_LIMITED`], [`QpHot::CAPPED`].
    pub flags: u8,
}

// Two to a cache line; the cold record's DCQCN state fills one alone.
const _: () = assert!(std::mem::size_of::<QpHot>() == 32);
const _: () = assert!(std::mem::size_of::<RateState>() == 64);

impl QpHot {
    /// In its NIC's ready or waiting set.
    pub const IN_SCHED: u8 = 1;
    /// DCQCN holds the rate below line rate (mirrors `rate.limited()`, so
    /// a queue pair at line rate never touches its DCQCN state).
    pub const RATE_LIMITED: u8 = 2;
    /// Its job's rate cap is below the NIC's line rate: the cold record's
    /// DCQCN state, made with the cap as its line ([`RateState::line`]),
    /// gives its pace.
    pub const CAPPED: u8 = 4;

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    pub fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }
}

/// A queue pair's cold part: a sender, a receiver, its messages in order
/// and its DCQCN state (the per-packet part is [`QpHot`]). The DCQCN state
/// fills the first cache line alone: a rate-limited queue pair's sends
/// touch that line and its hot record, nothing else.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct Qp {
    pub rate: RateState,
    pub src: u32,
    pub dst: u32,
    /// Last queued message.
    pub tail: u32,
    pub job: u32,
    pub sport_base: u16,
    /// Messages posted so far (they rotate source ports).
    pub msgs: u16,
    /// One-way delay of CNPs, ACKs and NACKs back to the sender.
    pub ctrl_delay_ps: u64,
    /// Last CNP the receiver sent for this queue pair.
    pub last_cnp_ps: Option<u64>,
    /// Packets of the messages built so far: the next message's first
    /// packet number in the queue pair's sequence.
    pub psn_total: u32,
    /// The oldest message not wholly acknowledged as the sender's leaf has
    /// seen the ACKs pass (NONE before the first post): the queue pair's
    /// cumulative acknowledgement there is in it.
    pub una_msg: u32,
}

/// What a sender needs of a host for every packet: its address (the
/// packets' hash is recomputed from it, not stored per queue pair) and
/// its NIC's line rate.
#[derive(Debug, Clone, Copy)]
pub struct HostWire {
    pub ip: u32,
    pub line_bps: u64,
}

/// The hash of a message's 5-tuple (source and destination address, UDP
/// with source port `sport` to RoCEv2's port) that switches hash on.
#[inline]
pub fn tuple_hash(src_ip: u32, dst_ip: u32, sport: u16) -> u64 {
    let ips = u64::from(src_ip) << 32 | u64::from(dst_ip);
    let ports = 17u64 << 32 | u64::from(sport) << 16 | u64::from(ROCE_PORT);
    mix64(ips) ^ mix64(ports).rotate_left(17)
}

/// One message on a queue pair.
#[derive(Debug, Clone)]
pub struct Flow {
    pub qp: QpId,
    pub bytes: u64,
    pub npkts: u32,
    pub sport: u16,
    pub tuple_hash: u64,
    /// When the message is posted, if known in advance (else a dependency posts it).
    pub post_ps: Option<u64>,
    pub start_ps: u64,
    pub done_ps: u64,
    /// The message that this one's arrival enables.
    pub dependent: u32,
    pub next_on_qp: u32,
    pub snd_una: u32,
    /// Highest PSN sent plus one, saved when the message stops being its
    /// queue pair's head (a go-back to it counts resends from it).
    pub snd_max: u32,
    /// The receiver's last NAK asked for this PSN (NONE: none yet).
    pub nack_for: u32,
    /// The message's first packet in its queue pair's sequence (PSNs of a
    /// queue pair run on across its messages, as RC queue pairs' do).
    pub psn_base: u32,
    /// The highest cumulative acknowledgement of this message that passed
    /// its sender's leaf (what the drain rule there has seen).
    pub leaf_una: u32,
    /// Why a switch last moved this message to another path
    /// ([`crate::report::stats::Reorder`] as u8; NONE_CAUSE for never).
    pub move_cause: u8,
}

/// [`Flow::move_cause`] of a message never moved.
pub const NONE_CAUSE: u8 = u8::MAX;

/// A message's receiver, kept apart from [`Flow`] so that the per-packet
/// receive path touches 8 bytes, not a whole cold record.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rcv {
    /// The next PSN expected: every PSN below it has arrived (out-of-order
    /// NICs without retransmission: the highest PSN seen, plus one).
    pub next: u32,
    /// Packets still to arrive.
    pub left: u32,
    /// [`crate::engine::Packet::route`] of the last packet taken in order.
    pub route: u8,
}

/// One iteration of a job: its messages and when it ran.
#[derive(Debug, Clone)]
pub struct IterRun {
    pub flows: std::ops::Range<usize>,
    /// The messages posted when the iteration starts (the others wait for
    /// a message before them).
    pub roots: Vec<FlowId>,
    /// When it started; u64::MAX until then.
    pub start_ps: u64,
    /// When its last message arrived; u64::MAX until then.
    pub done_ps: u64,
    /// Messages still to arrive.
    pub left: u32,
}

/// A job's share of the flows.
#[derive(Debug, Clone)]
pub struct JobRun {
    pub name: String,
    pub pattern: &'static str,
    pub ranks: usize,
    pub start_ps: u64,
    pub flows: std::ops::Range<usize>,
    /// Compute time after each iteration (the scenario's `compute`,
    /// varied by its `compute_jitter` with the run's seed).
    pub computes: Vec<u64>,
    pub iters: Vec<IterRun>,
}

/// The compute phase after each of `job`'s iterations: `compute_ps`,
/// or with jitter a factor in 1 ± jitter drawn from a stream of its own
/// (seed and job index), so the other draws of the run do not change.
fn computes(job: &crate::scenario::config::Job, seed: u64, index: usize) -> Vec<u64> {
    let n = job.iterations.max(1) as usize;
    if job.compute_jitter_ppm == 0 {
        return vec![job.compute_ps; n];
    }
    let mut rng =
        crate::rng::Rng::new(crate::rng::mix64(seed ^ 0x7173_6a69_7474_6572 ^ (index as u64) << 32));
    let j = f64::from(job.compute_jitter_ppm) / 1e6;
    (0..n).map(|_| (job.compute_ps as f64 * (1.0 + j * (2.0 * rng.unit() - 1.0))).round() as u64).collect()
}

impl JobRun {
    /// The iteration message `f` (of this job) belongs to.
    pub fn iter_of(&self, f: FlowId) -> usize {
        self.iters.partition_point(|it| it.flows.end <= f as usize)
    }
}

/// Every queue pair, flow and job of a run.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    pub qps: Vec<Qp>,
    /// Each queue pair's hot part, by the same index as `qps`.
    pub hot: Vec<QpHot>,
    /// Per host.
    pub hosts: Vec<HostWire>,
    pub flows: Vec<Flow>,
    pub jobs: Vec<JobRun>,
    /// Each message's receiver.
    pub rcv: Vec<Rcv>,
}

/// Why the workload could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the workload has {flows} messages, more than the limit of {limit}")]
pub struct TooManyFlows {
    pub flows: usize,
    pub limit: usize,
}

impl Workload {
    pub fn build(topo: &Topology, routing: &Routing, sc: &Scenario) -> Result<Self, TooManyFlows> {
        let count: usize = sc.jobs.iter().map(flow_count).sum();
        if count > MAX_FLOWS {
            return Err(TooManyFlows { flows: count, limit: MAX_FLOWS });
        }
        let hosts =
            topo.hosts.iter().map(|h| HostWire { ip: u32::from(h.ip), line_bps: h.nic_rate.bps() }).collect();
        let mut w = Workload {
            qps: Vec::new(),
            hot: Vec::new(),
            hosts,
            flows: Vec::with_capacity(count),
            jobs: Vec::new(),
            rcv: Vec::new(),
        };
        let prios = sc.priorities();
        for (j, job) in sc.jobs.iter().enumerate() {
            let first = w.flows.len();
            let tc = prios.iter().position(|&p| p == job.priority).unwrap_or(0) as u8;
            let mut b = Builder {
                w: &mut w,
                topo,
                routing,
                net: &sc.net,
                seed: sc.seed,
                job: j as u32,
                rate: job.rate_bps,
                tc,
                qps: Vec::new(),
                reuse: None,
            };
            let mut iters = Vec::new();
            for k in 0..job.iterations.max(1) {
                // Iteration 0 opens the queue pairs; later ones reuse them, in
                // the same order, so the same QP numbers and source ports live on.
                b.reuse = (k > 0).then_some(0);
                let start = b.w.flows.len();
                b.job(job);
                let end = b.w.flows.len();
                let roots: Vec<FlowId> =
                    (start..end).filter(|&f| b.w.flows[f].post_ps.is_some()).map(|f| f as FlowId).collect();
                if k > 0 {
                    // Posted by the iteration barrier, not by the clock.
                    for &f in &roots {
                        b.w.flows[f as usize].post_ps = None;
                    }
                }
                iters.push(IterRun {
                    flows: start..end,
                    roots,
                    start_ps: if k == 0 { job.start_ps } else { u64::MAX },
                    done_ps: u64::MAX,
                    left: (end - start) as u32,
                });
            }
            let flows = first..w.flows.len();
            w.jobs.push(JobRun {
                name: job.name.clone(),
                pattern: job.pattern.name(),
                ranks: job.ranks.len(),
                start_ps: job.start_ps,
                flows,
                computes: computes(job, sc.seed, j),
                iters,
            });
        }
        w.rcv = w.flows.iter().map(|f| Rcv { next: 0, left: f.npkts, route: 0 }).collect();
        Ok(w)
    }
}

fn flow_count(job: &Job) -> usize {
    let n = job.ranks.len();
    let chunks = job.chunk.map_or(1, |c| job.size.div_ceil(c.max(1))) as usize;
    let one = match &job.pattern {
        Pattern::AllToAll => n * n.saturating_sub(1) * chunks,
        Pattern::RingAllReduce => n * 2 * n.saturating_sub(1),
        Pattern::Incast { .. } | Pattern::Permutation { .. } => n * chunks,
        Pattern::Poisson { flows, .. } => flows.len(),
    };
    one.saturating_mul(job.iterations.max(1) as usize)
}

struct Builder<'a> {
    w: &'a mut Workload,
    topo: &'a Topology,
    routing: &'a Routing,
    net: &'a NetConfig,
    seed: u64,
    job: u32,
    rate: Option<u64>,
    tc: u8,
    /// The job's queue pairs, in the order iteration 0 opened them.
    qps: Vec<QpId>,
    /// Later iterations: the next of `qps` to hand out.
    reuse: Option<usize>,
}

impl Builder<'_> {
    fn job(&mut self, job: &Job) {
        let r = &job.ranks;
        let n = r.len();
        let at = Some(job.start_ps);
        match &job.pattern {
            Pattern::AllToAll => {
                for i in 0..n {
                    for j in (0..n).filter(|&j| j != i) {
                        let qp = self.qp(r[i], r[j]);
                        self.message(qp, job, at);
                    }
                }
            }
            Pattern::Incast { target } => {
                for &h in r {
                    let qp = self.qp(h, *target);
                    self.message(qp, job, at);
                }
            }
            Pattern::Permutation { perm } => {
                for (i, &p) in perm.iter().enumerate() {
                    let qp = self.qp(r[i], r[p]);
                    self.message(qp, job, at);
                }
            }
            Pattern::RingAllReduce => self.ring(job),
            Pattern::Poisson { flows, .. } => {
                // One queue pair per flow, as the published studies' RDMA
                // simulators open them: flows of a host pair do not queue
                // behind each other.
                for f in flows {
                    let qp = self.qp(r[f.src as usize], r[f.dst as usize]);
                    self.flow(qp, f.bytes, Some(f.at_ps));
                }
            }
        }
    }

    /// One message of `job.size` bytes, or its chunks, each posted when
    /// the one before has arrived.
    fn message(&mut self, qp: QpId, job: &Job, at: Option<u64>) {
        let Some(chunk) = job.chunk else {
            self.flow(qp, job.size, at);
            return;
        };
        let mut left = job.size;
        let mut prev: Option<FlowId> = None;
        while left > 0 {
            let bytes = left.min(chunk);
            left -= bytes;
            let id = self.flow(qp, bytes, if prev.is_none() { at } else { None });
            if let Some(p) = prev {
                self.w.flows[p as usize].dependent = id;
            }
            prev = Some(id);
        }
    }

    /// Step k of rank i sends one chunk to rank i+1; it may start once the
    /// chunk of step k-1 from rank i-1 has arrived at rank i.
    fn ring(&mut self, job: &Job) {
        let n = job.ranks.len();
        let chunk = job.size.div_ceil(n as u64);
        let steps = 2 * (n - 1);
        let qps: Vec<QpId> = (0..n).map(|i| self.qp(job.ranks[i], job.ranks[(i + 1) % n])).collect();
        let base = self.w.flows.len();
        for k in 0..steps {
            for (i, &qp) in qps.iter().enumerate() {
                let id = self.flow(qp, chunk, (k == 0).then_some(job.start_ps));
                debug_assert_eq!(id as usize, base + k * n + i);
            }
        }
        for k in 0..steps - 1 {
            for i in 0..n {
                self.w.flows[base + k * n + i].dependent = (base + (k + 1) * n + (i + 1) % n) as u32;
            }
        }
    }

    fn qp(&mut self, src: HostId, dst: HostId) -> QpId {
        if let Some(i) = self.reuse.as_mut() {
            if let Some(&qp) = self.qps.get(*i) {
                *i += 1;
                return qp;
            }
        }
        let id = self.w.qps.len() as u32;
        self.qps.push(id);
        let line = self.topo.hosts[src].nic_rate.bps();
        let cap = self.rate.unwrap_or(line).min(line);
        // RNICs derive the UDP source port from the QP number: 0xC000 | (qpn & 0x3FFF).
        let qpn = mix64(self.seed ^ (u64::from(id) << 8 | 0x11)) as u16;
        self.w.qps.push(Qp {
            src: src as u32,
            dst: dst as u32,
            job: self.job,
            sport_base: 0xC000 | (qpn & 0x3FFF),
            ctrl_delay_ps: ctrl_delay(self.topo, self.routing, src, dst),
            tail: NONE,
            rate: RateState::new(cap),
            last_cnp_ps: None,
            msgs: 0,
            psn_total: 0,
            una_msg: NONE,
        });
        self.w.hot.push(QpHot {
            next_ok_ps: 0,
            head: NONE,
            dst: dst as u32,
            snd_next: 0,
            snd_max: 0,
            npkts: 0,
            sport: 0,
            tc: self.tc,
            flags: if cap < line { QpHot::CAPPED } else { 0 },
        });
        id
    }

    fn flow(&mut self, qp: QpId, bytes: u64, post_ps: Option<u64>) -> FlowId {
        let id = self.w.flows.len() as FlowId;
        let q = &self.w.qps[qp as usize];
        // Messages of a queue pair rotate through its few source ports.
        let k = q.msgs % self.net.sports_per_qp.max(1);
        let sport = 0xC000 | (q.sport_base.wrapping_add(k) & 0x3FFF);
        self.w.qps[qp as usize].msgs = q.msgs.wrapping_add(1);
        let q = &self.w.qps[qp as usize];
        let (hs, hd) = (&self.w.hosts[q.src as usize], &self.w.hosts[q.dst as usize]);
        let tuple_hash = tuple_hash(hs.ip, hd.ip, sport);
        let mtu = u64::from(self.net.mtu);
        let npkts = u32::try_from(bytes.div_ceil(mtu)).unwrap_or(u32::MAX);
        let psn_base = q.psn_total;
        self.w.qps[qp as usize].psn_total = psn_base.wrapping_add(npkts);
        self.w.flows.push(Flow {
            qp,
            bytes,
            npkts,
            sport,
            tuple_hash,
            post_ps,
            start_ps: u64::MAX,
            done_ps: u64::MAX,
            dependent: NONE,
            next_on_qp: NONE,
            snd_una: 0,
            snd_max: 0,
            nack_for: NONE,
            psn_base,
            leaf_una: 0,
            move_cause: NONE_CAUSE,
        });
        id
    }
}

/// One-way latency of a small control packet from `dst` back to `src`:
/// propagation on every hop plus serializing 64 bytes. Control packets ride
/// a strict-priority class, so they are modeled as never queueing.
fn ctrl_delay(topo: &Topology, routing: &Routing, src: HostId, dst: HostId) -> u64 {
    let (hs, hd) = (&topo.hosts[src], &topo.hosts[dst]);
    let hops = u64::from(routing.distance(hs.leaf, hd.leaf).unwrap_or(0));
    let link_ps = topo.defaults.link_delay.ns() * 1_000;
    let ser = |bps: u64| (64 * 8_000_000_000_000u64).div_ceil(bps.max(1));
    let nic = ser(hs.nic_rate.bps());
    (hs.delay.ns() + hd.delay.ns()) * 1_000
        + hops * (link_ps + ser(topo.defaults.link_bandwidth.bps()))
        + 2 * nic
}
