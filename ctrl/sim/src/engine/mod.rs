//! The discrete-event engine: state of one run and its event loop.
//!
//! Time is a u64 of picoseconds, advanced only by events; ties run in the
//! order they were scheduled; every random choice comes from generators
//! seeded by the scenario. So a run is a pure function of its inputs.

mod ahead;
mod control;
mod ctl;
pub(crate) mod dcqcn;
pub mod events;
pub mod flows;
mod host;
pub mod net;
mod pfc;
mod queue;
pub mod steer;
mod switch;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use metaroce_topo::{Routing, Topology};
use serde::Serialize;

use crate::control::forward::{Forwarder, NetView};
use crate::control::{Control, ControlSummary, Sense, Watch};
pub use crate::engine::events::Packet;
use crate::engine::events::{Ev, FlowId, PortId, Queue};
use crate::engine::flows::{TooManyFlows, Workload};
use crate::engine::net::{Node, Ports};
use crate::report::pcap::Pcap;
use crate::report::stats::{PortTally, Stats, Tallies};
use crate::rng::Rng;
use crate::scenario::config::{Limits, NetConfig, Scenario};
pub use pfc::TcState;

/// Dynamic state of one port (its queues are per traffic class, in
/// [`TcState`]). One cache line each, so that reading ahead
/// (`ahead.rs`) names all of it with one hint.
#[derive(Debug, Clone, Default)]
#[repr(align(64))]
pub struct PortState {
    /// Bytes queued, all classes.
    pub qbytes: u64,
    /// The port is serializing until then.
    pub free_at: u64,
    /// A TxDone event is scheduled. A switch port schedules one only when
    /// packets wait behind the one it sends, which saves an event per hop
    /// on uncongested links.
    pub txdone_pending: bool,
    /// Bit c: traffic class c is paused (PFC) at this port's sender.
    pub paused: u8,
    /// Bit c: class c has packets queued.
    pub backlog: u8,
    /// The class the scheduler served last.
    pub rr: u8,
    /// The link is down: nothing is sent, what is queued for it is lost.
    pub down: bool,
    /// The report's counts for this port (bytes sent, deepest queue, the
    /// queue series' open bucket): in this line, which every hop touches,
    /// rather than in arrays of their own.
    pub tally: PortTally,
}

// One cache line: reading ahead names it with one hint.
const _: () = assert!(std::mem::size_of::<PortState>() == 64);

impl Tallies for [PortState] {
    fn tally(&mut self, port: usize) -> &mut PortTally {
        &mut self[port].tally
    }

    fn ports(&self) -> usize {
        self.len()
    }
}

struct View<'a>(&'a [PortState], &'a steer::Steering);

impl NetView for View<'_> {
    fn queue_bytes(&self, port: PortId) -> u64 {
        self.0.get(port as usize).map_or(0, |p| p.qbytes)
    }

    fn steer(
        &self,
        switch: u32,
        pkt: &crate::control::forward::PacketInfo,
    ) -> Option<(PortId, steer::SteerKey)> {
        if self.1.is_empty() {
            return None;
        }
        self.1.lookup(switch, pkt.src as u32, pkt.dst as u32, pkt.sport)
    }
}

/// A host NIC's scheduler: queue pairs ready now, and rate-limited ones by
/// the time they may send again.
///
/// The ready sets first, each 32 bytes, cache-line aligned: reading ahead
/// hints the line of the one a NIC sends from next.
#[derive(Debug, Clone, Default)]
#[repr(C, align(64))]
struct Nic {
    /// Per traffic class.
    ready: [VecDeque<u32>; 8],
    /// (when, queue pair, its class).
    waiting: BinaryHeap<Reverse<(u64, u32, u8)>>,
    wake_at: u64,
    /// The class served last.
    rr: u8,
}

/// Why a run ended before every message completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// Simulated time passed the scenario's limit.
    TimeLimit,
    /// The scenario's event budget ran out.
    EventLimit,
    /// Nothing was left to happen but messages were unfinished (a deadlock,
    /// or packets with no route).
    Stalled,
    /// Stopped from outside (serve mode's Ctrl-C).
    Interrupted,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stop::TimeLimit => "it reached the scenario's time limit",
            Stop::EventLimit => "it used up the scenario's event budget",
            Stop::Stalled => "nothing could move any more (a deadlock, or packets with no route)",
            Stop::Interrupted => "it was interrupted",
        })
    }
}

/// Where a long run is, for progress displays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub now_ps: u64,
    pub events: u64,
    pub flows_done: usize,
    pub flows_total: usize,
}

/// Events between progress callbacks.
pub const PROGRESS_EVERY: u64 = 1 << 21;

/// Everything a finished run leaves behind.
#[derive(Debug)]
pub struct Outcome {
    pub stop: Option<Stop>,
    pub end_ps: u64,
    pub events: u64,
    pub stats: Stats,
    pub workload: Workload,
    pub ports: Ports,
    pub pcap: Option<Pcap>,
    pub max_packets: usize,
    pub max_pending_events: usize,
    pub control: Option<ControlSummary>,
    /// Flowlets that started on a steer entry.
    pub steered_flowlets: u64,
    /// From each steer write to the first packet that took it, and the
    /// writes no packet took before the run ended.
    pub steer_landed_ps: Vec<u64>,
    /// Per landed write, the packets forwarded for it before it landed.
    pub steer_landed_after_pkts: Vec<u64>,
    pub steer_unlanded: usize,
    /// The drain rule's counters, when the forwarder moves drained flows only.
    pub drain: Option<crate::twin::drain::DrainCounters>,
}

/// The state of one run.
pub struct Sim<'a> {
    topo: &'a Topology,
    net: NetConfig,
    limits: Limits,
    ports: Ports,
    st: Vec<PortState>,
    /// Traffic classes per port (the scenario's priorities).
    ntc: usize,
    /// Per (port, class): `[port * ntc + class]`.
    tcs: Vec<TcState>,
    /// Per (port, class), as `tcs`: PFC's accounting of what arrived over
    /// the port.
    ingress: Vec<pfc::Ingress>,
    /// Per class: lossless (PFC) or lossy.
    tc_lossless: [bool; 8],
    /// Per class: senders keep messages until acknowledged and resend.
    tc_reliable: [bool; 8],
    /// Out-of-order receivers with recovery: the PSNs held beyond the
    /// next expected one, per message that has any.
    held: std::collections::HashMap<FlowId, host::Held>,
    /// DWRR quantum: one full packet.
    quantum: u32,
    /// Per host: its leaf, and that leaf's destination index in the FIB.
    host_dest: Vec<(u32, u32)>,
    in_flight: usize,
    max_in_flight: usize,
    w: Workload,
    nics: Vec<Nic>,
    q: Queue,
    now: u64,
    fwd: Box<dyn Forwarder>,
    /// `fwd.is_pipeline()`, asked once (it is asked at every hop).
    pipeline: bool,
    rng: Rng,
    stats: Stats,
    pcap: Option<(Pcap, Vec<bool>)>,
    flows_done: usize,
    events: u64,
    max_pending: usize,
    /// Congestion trees: the state of their walks.
    trees: TreeWalk,
    /// Messages with a start time, by time.
    posts: Vec<(u64, FlowId)>,
    /// The control plane, when the run has one, and what it watches.
    ctl: ControlLink<'a>,
    /// Per topology link: up or down.
    link_up: Vec<bool>,
    /// The scenario's link failures and repairs.
    link_events: Vec<(u64, u32, bool)>,
    /// Steer entries and the large-flow detector (`steer.rs`).
    steer: steer::Steering,
    /// Drain state at first leaves, when the forwarder moves flows only
    /// once they are drained (`twin/drain.rs`).
    drain: Option<crate::twin::drain::DrainTable>,
    /// What reading ahead worked out for its next stage (`ahead.rs`).
    ahead: ahead::Ahead,
}

/// The walks that find congestion trees (`pfc.rs`).
struct TreeWalk {
    /// Per (node, class), `[node * ntc + class]`: the ports paused in that
    /// class that touch the node (nodes: switches, then hosts).
    paused_at: Vec<Vec<PortId>>,
    /// Per port and per node: the walk that last saw it.
    stamp: Vec<u32>,
    node_stamp: Vec<u32>,
    generation: u32,
    /// The walk's stack, kept to save an allocation per pause.
    tree_stack: Vec<usize>,
}

/// The control plane of a run (`control.rs`), and what it watches.
struct ControlLink<'a> {
    control: Option<Box<dyn Control + 'a>>,
    /// Per port: the control's queue thresholds and crossing state.
    sense: Vec<Sense>,
    /// Group rewrites waiting to move traffic, by (switch, destination).
    watch: std::collections::HashMap<(u32, u32), Watch>,
    /// Control wake-ups pending in the queue.
    wakes: usize,
}

impl std::fmt::Debug for Sim<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim").field("now", &self.now).field("events", &self.events).finish_non_exhaustive()
    }
}

impl<'a> Sim<'a> {
    pub fn new(
        topo: &'a Topology,
        routing: &Routing,
        sc: &Scenario,
        fwd: Box<dyn Forwarder>,
    ) -> Result<Self, TooManyFlows> {
        let ports = Ports::build(topo, routing, &sc.net);
        let w = Workload::build(topo, routing, sc)?;
        let n = ports.specs.len();
        let nodes = topo.switches.len() + topo.hosts.len();
        let pcap = (!sc.pcap.is_empty()).then(|| {
            let mut on = vec![false; n];
            for e in &sc.pcap {
                if let Some(p) = ports.by_end(*e) {
                    on[p as usize] = true;
                }
            }
            (Pcap::new(), on)
        });
        let prios = sc.priorities();
        let (ntc, (tc_lossless, tc_reliable)) = (prios.len(), class_modes(sc, &prios));
        let fwd_drains = fwd.moves_when_drained();
        let stats = Stats::new(n, ports.classes.len(), 100_000, prios);
        Ok(Sim {
            topo,
            net: sc.net.clone(),
            limits: sc.limits,
            st: vec![PortState::default(); n],
            ntc,
            tcs: vec![TcState::default(); n * ntc],
            ingress: ports
                .specs
                .iter()
                .flat_map(|s| std::iter::repeat_n(pfc::Ingress::new(s), ntc))
                .collect(),
            tc_lossless,
            tc_reliable,
            held: std::collections::HashMap::new(),
            quantum: sc.net.mtu + crate::scenario::config::ROCE_HEADER_BYTES,
            host_dest: topo
                .hosts
                .iter()
                .map(|h| (h.leaf as u32, ports.dest_of[h.leaf].unwrap_or(0)))
                .collect(),
            ports,
            in_flight: 0,
            max_in_flight: 0,
            w,
            nics: vec![Nic { wake_at: u64::MAX, ..Nic::default() }; topo.hosts.len()],
            q: Queue::default(),
            now: 0,
            pipeline: fwd.is_pipeline(),
            fwd,
            rng: Rng::new(sc.seed ^ 0xEC4),
            stats,
            pcap,
            flows_done: 0,
            events: 0,
            max_pending: 0,
            trees: TreeWalk {
                paused_at: vec![Vec::new(); nodes * ntc],
                stamp: vec![0; n],
                node_stamp: vec![0; nodes],
                tree_stack: Vec::new(),
                generation: 0,
            },
            posts: Vec::new(),
            ctl: ControlLink {
                control: None,
                sense: vec![Sense::default(); n],
                watch: std::collections::HashMap::new(),
                wakes: 0,
            },
            link_up: vec![true; topo.links.len()],
            link_events: sc.events.iter().map(|e| (e.at_ps, e.link as u32, e.up)).collect(),
            steer: steer::Steering::default(),
            drain: fwd_drains.then(|| crate::twin::drain::DrainTable::new(topo.switches.len())),
            ahead: ahead::Ahead::default(),
        })
    }

    /// Attaches the control plane (see [`crate::control`]).
    pub fn with_control(mut self, control: Box<dyn Control + 'a>) -> Self {
        self.ctl.control = Some(control);
        self
    }

    /// Runs to completion or to a limit, calling `progress` now and then.
    pub fn run(mut self, progress: &mut dyn FnMut(&Progress)) -> Outcome {
        let mut posts: Vec<(u64, FlowId)> = self
            .w
            .flows
            .iter()
            .enumerate()
            .filter_map(|(i, f)| f.post_ps.map(|t| (t, i as FlowId)))
            .collect();
        posts.sort_unstable();
        self.posts = posts;
        if let Some(&(t, _)) = self.posts.first() {
            self.q.push(t, Ev::Posts { next: 0 });
        }
        for &(t, link, up) in &self.link_events {
            self.q.push(t, Ev::Link { link, up });
        }
        self.call_control(|c, ctx| c.start(ctx));
        let total = self.w.flows.len();
        let stop = loop {
            if self.flows_done == total {
                break None;
            }
            let Some((t, ev)) = self.q.pop() else { break Some(Stop::Stalled) };
            if t > self.limits.time_ps {
                break Some(Stop::TimeLimit);
            }
            if self.events >= self.limits.events {
                break Some(Stop::EventLimit);
            }
            self.now = t;
            self.events += 1;
            if self.events.is_multiple_of(1024) && self.fwd.halted() {
                break Some(Stop::Interrupted);
            }
            let wake = matches!(ev, Ev::Wake { .. });
            self.read_ahead();
            self.dispatch(ev);
            if wake && self.q.len() == self.ctl.wakes {
                // Only the control's own wake-ups are left: no packet, pause
                // or timer can move again, however long the control ticks.
                break Some(Stop::Stalled);
            }
            if self.events.is_multiple_of(65536) {
                self.max_pending = self.max_pending.max(self.q.len());
            }
            if self.events.is_multiple_of(PROGRESS_EVERY) {
                self.max_pending = self.max_pending.max(self.q.len());
                progress(&Progress {
                    now_ps: t,
                    events: self.events,
                    flows_done: self.flows_done,
                    flows_total: total,
                });
            }
        };
        self.finish(stop)
    }

    fn finish(mut self, stop: Option<Stop>) -> Outcome {
        let end_ps = if stop.is_none() {
            self.w.flows.iter().map(|f| f.done_ps).filter(|&d| d != u64::MAX).max().unwrap_or(self.now)
        } else {
            self.now
        };
        for (p, st) in self.st.iter().enumerate() {
            for c in (0..self.ntc).filter(|c| st.paused & (1 << c) != 0) {
                let k = p * self.ntc + c;
                self.stats.paused_ps[k] += end_ps.saturating_sub(self.stats.paused_since[k]);
            }
        }
        self.stats.finish_ports(&mut self.st[..]);
        tracing::debug!(events = self.events, end_ps, stopped = ?stop, "run finished");
        Outcome {
            stop,
            end_ps,
            events: self.events,
            stats: self.stats,
            workload: self.w,
            ports: self.ports,
            pcap: self.pcap.map(|(p, _)| p),
            max_packets: self.max_in_flight,
            max_pending_events: self.max_pending.max(self.q.len()),
            control: self.ctl.control.as_ref().map(|c| c.summary()),
            steered_flowlets: self.steer.steered_flowlets,
            steer_landed_ps: std::mem::take(&mut self.steer.landed_ps),
            steer_landed_after_pkts: std::mem::take(&mut self.steer.landed_after_pkts),
            steer_unlanded: self.steer.unlanded(),
            drain: self.drain.as_ref().map(|d| d.counters),
        }
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::TxDone { port } => {
                self.st[port as usize].txdone_pending = false;
                if (port as usize) < self.ports.hosts {
                    self.nic_kick(port as usize);
                } else {
                    self.try_send(port);
                }
            }
            Ev::Arrive { port, pkt } => {
                // None: the packet was lost when its link went down.
                let Some(pkt) = self.q.packet(pkt) else { return };
                self.arrive(port, pkt);
            }
            Ev::NicWake { host } => {
                self.nics[host as usize].wake_at = u64::MAX;
                self.nic_kick(host as usize);
            }
            Ev::Pause { port, tc, on } => self.pause(port, tc, on),
            Ev::Posts { next } => self.post_batch(next as usize),
            Ev::Cnp { qp } => self.cnp(qp),
            Ev::Ack { flow, psn } => {
                self.pipeline_leaf_sees_ctl(flow, psn, false);
                self.ack(flow, psn)
            }
            Ev::Nack { flow, psn } => {
                self.pipeline_leaf_sees_ctl(flow, psn, true);
                self.nack(flow, psn)
            }
            Ev::Ctl { port, flow, word } => self.ctl_arrive(port, flow, word),
            Ev::Rto { flow, una } => self.rto(flow, una),
            Ev::Wake { token } => {
                self.ctl.wakes -= 1;
                self.call_control(|c, ctx| c.on_wake(ctx, token));
            }
            Ev::Link { link, up } => self.link_event(link as usize, up),
            Ev::Iteration { job, iter } => self.start_iteration(job, iter),
        }
    }

    /// Posts every message scheduled for now, then schedules the next batch.
    fn post_batch(&mut self, mut i: usize) {
        // Only first iterations have start times: a batch is a job starting.
        self.mark_tree_span();
        while let Some(&(t, f)) = self.posts.get(i) {
            if t > self.now {
                self.q.push(t, Ev::Posts { next: i as u32 });
                return;
            }
            self.post(f);
            i += 1;
        }
    }

    fn arrive(&mut self, port: PortId, pkt: Packet) {
        match self.ports.to(port) {
            Node::Switch(s) => self.switch_arrive(s, port, pkt),
            Node::Host(h) => self.host_receive(h as usize, pkt),
        }
    }

    /// A packet is created by a sender.
    fn born(&mut self) {
        self.in_flight += 1;
        self.max_in_flight = self.max_in_flight.max(self.in_flight);
    }

    /// A packet is delivered or dropped.
    fn gone(&mut self) {
        self.in_flight -= 1;
    }

    /// True when `port` (up; the caller knows a class may send) may start a
    /// packet now; otherwise makes sure a TxDone will come when it is free.
    fn port_ready(&mut self, port: PortId) -> bool {
        let now = self.now;
        let st = &mut self.st[port as usize];
        if st.down {
            return false;
        }
        if now >= st.free_at {
            // A pending TxDone at this very instant frees the port itself.
            return !st.txdone_pending;
        }
        if !st.txdone_pending {
            st.txdone_pending = true;
            let t = st.free_at;
            self.q.push(t, Ev::TxDone { port });
        }
        false
    }

    /// Starts serializing packet `id` on `port`.
    fn start_tx(&mut self, port: PortId, p: Packet) {
        let spec = &self.ports.specs[port as usize];
        let ser = spec.ser_ps(u64::from(p.bytes));
        let delay = spec.delay_ps + spec.data_lag_ps;
        let st = &mut self.st[port as usize];
        st.free_at = self.now + ser;
        // Host NICs always pull their next packet; switch ports only when
        // one is waiting (see `wake_port`).
        if (port as usize) < self.ports.hosts || st.backlog != 0 {
            st.txdone_pending = true;
            self.q.push(self.now + ser, Ev::TxDone { port });
        }
        st.tally.tx_bytes += u64::from(p.bytes);
        self.q.push_packet(self.now + ser + delay, port, p);
        if let Some((_, on)) = &self.pcap {
            if on[port as usize] {
                self.capture(p);
            }
        }
    }

    fn capture(&mut self, p: Packet) {
        let f = &self.w.flows[p.flow as usize];
        let qp = &self.w.qps[f.qp as usize];
        let (hs, hd) = (&self.topo.hosts[qp.src as usize], &self.topo.hosts[qp.dst as usize]);
        let frame = crate::report::pcap::Frame {
            time_ps: self.now,
            src_mac: hs.mac,
            dst_mac: hd.mac,
            src_ip: hs.ip,
            dst_ip: hd.ip,
            sport: f.sport,
            dest_qp: f.qp,
            psn: p.psn,
            first: p.psn == 0,
            last: p.psn + 1 == f.npkts,
            ce: p.ce,
            wire_bytes: u32::from(p.bytes),
        };
        if let Some((pcap, _)) = &mut self.pcap {
            pcap.record(&frame);
        }
    }
}

/// Per traffic class: lossless, and reliable (senders keep what they sent
/// until it is acknowledged). Go-back-N NICs are reliable on every class:
/// a reordered packet is resent like a lost one.
fn class_modes(sc: &Scenario, prios: &[u8]) -> ([bool; 8], [bool; 8]) {
    let (mut lossless, mut reliable) = ([false; 8], [false; 8]);
    let gbn = sc.net.ordering == crate::scenario::config::Ordering::GoBackN;
    for (c, &p) in prios.iter().enumerate() {
        lossless[c] = sc.net.is_lossless(p);
        reliable[c] = gbn || sc.net.reliable || !lossless[c];
    }
    (lossless, reliable)
}

/// Bytes of simulator state per packet in flight: on a link, its Arrive
/// event (an entry and the packet it carries) and at most one TxDone event
/// of the link; in a queue, its FIFO slot alone.
pub fn bytes_per_packet() -> usize {
    std::mem::size_of::<Packet>() + 2 * Queue::ENTRY_BYTES
}
