//! A resolved scenario: what to run, on which hosts, with which network
//! settings. Every name is already an index into the topology and every
//! quantity is in base units (bytes, bits per second, picoseconds).

use std::fmt;
use std::str::FromStr;

use metaroce_topo::{Endpoint, HostId};
use serde::Serialize;

/// Picoseconds per nanosecond: simulated time is kept in picoseconds so
/// that serialization at 400 Gbps is exact to well under a percent.
pub const PS_PER_NS: u64 = 1_000;

/// Bytes a RoCEv2 packet carries besides its payload: Ethernet (14) + IPv4
/// (20) + UDP (8) + BTH (12) + ICRC (4) + FCS (4).
pub const ROCE_HEADER_BYTES: u32 = 62;

/// How switches choose among the members of a next-hop group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutingMode {
    /// Static ECMP: a hash of the 5-tuple picks the member.
    Ecmp,
    /// LetFlow-like: a new flowlet (gap over the flowlet timeout) picks a
    /// random member; a running flowlet keeps its path.
    Flowlet,
    /// Per-packet weighted round-robin: the even spreading that the
    /// analytic bound assumes, at the cost of reordering.
    Spray,
    /// Flowlets over weighted groups, with the controller's own policy in
    /// the loop (virtual time, modelled digest, decision and write latency)
    /// rewriting the weights.
    Metaroce,
}

impl RoutingMode {
    pub const ALL: [RoutingMode; 4] =
        [RoutingMode::Ecmp, RoutingMode::Flowlet, RoutingMode::Spray, RoutingMode::Metaroce];

    /// The mode runs a controller (which announced jobs are told to).
    pub fn has_controller(self) -> bool {
        self == RoutingMode::Metaroce
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RoutingMode::Ecmp => "ecmp",
            RoutingMode::Flowlet => "flowlet",
            RoutingMode::Spray => "spray",
            RoutingMode::Metaroce => "metaroce",
        }
    }
}

impl fmt::Display for RoutingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RoutingMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RoutingMode::ALL.into_iter().find(|m| m.as_str() == s).ok_or_else(|| {
            let known: Vec<&str> = RoutingMode::ALL.iter().map(|m| m.as_str()).collect();
            format!("unknown routing mode \"{s}\"; use one of {}", known.join(", "))
        })
    }
}

/// The communication pattern of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Pattern {
    /// Every rank sends `size` bytes to every other rank at once.
    AllToAll,
    /// Ring AllReduce of a `size`-byte buffer: 2(N-1) steps of size/N bytes,
    /// each step starting when the previous chunk has arrived.
    RingAllReduce,
    /// Every rank sends `size` bytes to `target`.
    Incast { target: HostId },
    /// Rank i sends `size` bytes to rank `perm[i]`.
    Permutation { perm: Vec<usize> },
    /// A data-centre workload: every rank starts flows at Poisson instants
    /// (mean rate: `load` of its NIC over the mean flow size) toward a
    /// uniformly drawn other rank, sizes drawn from `sizes`, for
    /// `duration_ps` from the job's start; one queue pair per flow, as the
    /// RDMA simulators of the published load-balancing studies open them.
    Poisson {
        /// Offered load per sender, in millionths of its NIC rate (0, 1e6].
        load_ppm: u32,
        sizes: crate::scenario::sizes::SizeCdf,
        duration_ps: u64,
        /// The flows the seed drew: (source rank, destination rank, bytes,
        /// start), by start.
        #[serde(skip)]
        flows: Vec<PoissonFlow>,
    },
}

/// One flow of a [`Pattern::Poisson`] job, as the seed drew it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoissonFlow {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
    pub at_ps: u64,
}

impl Pattern {
    pub fn name(&self) -> &'static str {
        match self {
            Pattern::AllToAll => "all-to-all",
            Pattern::RingAllReduce => "ring-allreduce",
            Pattern::Incast { .. } => "incast",
            Pattern::Permutation { .. } => "permutation",
            Pattern::Poisson { .. } => "poisson",
        }
    }
}

/// One job of the workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Job {
    pub name: String,
    pub pattern: Pattern,
    /// Hosts of the ranks, rank order.
    pub ranks: Vec<HostId>,
    /// Bytes, as the pattern defines them.
    pub size: u64,
    pub start_ps: u64,
    /// Sending-rate cap per queue pair, bits per second (the NIC rate if none).
    pub rate_bps: Option<u64>,
    /// Messages of all-to-all, incast and permutation go as chunks of this
    /// many bytes, each posted when the previous one has arrived (as a
    /// collective library's pipeline does); each chunk is a message, so it
    /// takes the queue pair's next source port.
    pub chunk: Option<u64>,
    /// 802.1p priority (0..=7) of the job's packets; whether it is lossless
    /// is the network's [`NetConfig::lossless_priorities`].
    pub priority: u8,
    /// Training steps: the collective runs this many times (at least 1) on
    /// the same queue pairs; each iteration starts when every rank has
    /// finished the previous one, plus `compute_ps`.
    pub iterations: u32,
    /// The compute phase between two iterations.
    pub compute_ps: u64,
    /// The job is announced to the controller before it starts (the job
    /// API); only meaningful in a mode with a controller.
    pub announce: bool,
    /// `offset: fixed`: the scheduler does not take the controller's
    /// recommended start offset for this (announced) job.
    pub offset_fixed: bool,
    /// Each compute phase lasts `compute_ps` times a factor drawn
    /// uniformly in 1 ± this many parts per million (from the run's seed).
    pub compute_jitter_ppm: u32,
    /// The start offset the scheduler took from the controller (mode
    /// `metaroce`, announced periodic jobs not `offset: fixed`), already
    /// added to `start_ps`. 0 in the scenario file.
    #[serde(skip)]
    pub offset_ps: u64,
    /// What the seed draws for this job (see [`Scenario::reseed`]).
    #[serde(skip)]
    pub draw: Draw,
}

/// The random parts of a job, kept undrawn so that a new seed redraws
/// them: the rank order of `placement: shuffled`, a permutation without
/// `shift`, a Poisson job's flows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Draw {
    /// The job's index in the scenario (each job has its own stream).
    pub index: usize,
    /// The selected hosts before any shuffle.
    pub hosts: Vec<HostId>,
    pub shuffled: bool,
    /// The permutation is drawn (a random single cycle), not a shift.
    pub random_perm: bool,
}

/// How the receiving NIC treats a packet whose PSN is not the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ordering {
    /// RC queue pairs without adaptive-routing support (ConnectX default):
    /// an out-of-order PSN is dropped and answered with a NAK; the sender
    /// resends from the missing PSN.
    #[default]
    GoBackN,
    /// NICs built for spraying: packets are placed as they arrive.
    OutOfOrder,
}

impl FromStr for Ordering {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "go-back-n" => Ok(Ordering::GoBackN),
            "out-of-order" => Ok(Ordering::OutOfOrder),
            _ => Err(format!("unknown NIC ordering \"{s}\"; use go-back-n or out-of-order")),
        }
    }
}

impl Ordering {
    pub const NAMES: [&'static str; 2] = ["go-back-n", "out-of-order"];

    pub fn as_str(self) -> &'static str {
        match self {
            Ordering::GoBackN => "go-back-n",
            Ordering::OutOfOrder => "out-of-order",
        }
    }
}

/// RED-style ECN marking on egress queue depth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ecn {
    pub kmin_bytes: u64,
    pub kmax_bytes: u64,
    /// Marking probability at `kmax` (1.0 above it).
    pub pmax: f64,
}

/// DCQCN reaction-point parameters (Zhu et al., SIGCOMM 2015).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Dcqcn {
    /// Alpha gain `g`.
    pub g: f64,
    /// Rate-increase and alpha-update timer period.
    pub timer_ps: u64,
    /// Bytes sent between byte-counter increase events.
    pub byte_counter: u64,
    /// Additive and hyper increase steps, as fractions of the line rate.
    pub rai: f64,
    pub rhai: f64,
    /// Fast-recovery stages before additive increase.
    pub fast_recovery: u32,
    /// Lowest rate, as a fraction of the line rate.
    pub min_rate: f64,
    /// The receiver sends at most one CNP per queue pair per interval.
    pub cnp_interval_ps: u64,
    /// When a cut also lowers the target rate (the rate fast recovery
    /// returns to).
    pub clamp: Clamp,
}

/// When a rate cut sets the target rate to the rate it cuts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clamp {
    /// At every cut, as the DCQCN paper's algorithm does: cuts in a row
    /// lower the target each time.
    #[default]
    Always,
    /// Only at a cut after the rate-increase timer has raised the rate
    /// since the cut before: the default of HPCC's public ns-3 model of
    /// ConnectX's rate limiter (`ClampTargetRate` false; ConnectX names
    /// the choice `clamp_tgt_rate` and `clamp_tgt_rate_ati`). Cuts in a
    /// row keep the target of the first, so fast recovery returns to the
    /// rate before the congestion.
    AfterTimer,
}

impl Clamp {
    pub const ALL: [Clamp; 2] = [Clamp::Always, Clamp::AfterTimer];

    pub fn as_str(self) -> &'static str {
        match self {
            Clamp::Always => "always",
            Clamp::AfterTimer => "after-timer",
        }
    }

    /// The rule named `s` as a scenario writes it.
    pub fn from_name(s: &str) -> Option<Clamp> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl Default for Dcqcn {
    fn default() -> Self {
        Dcqcn {
            g: 1.0 / 256.0,
            timer_ps: 55_000_000,
            byte_counter: 10 << 20,
            rai: 0.005,
            rhai: 0.05,
            fast_recovery: 5,
            min_rate: 0.001,
            cnp_interval_ps: 50_000_000,
            clamp: Clamp::default(),
        }
    }
}

/// Priorities of 802.1Q (PCP values 0..=7).
pub const PRIORITIES: u8 = 8;
/// The priority jobs use unless they name one: RoCE's usual lossless one.
pub const DEFAULT_PRIORITY: u8 = 3;

/// Priority flow control (802.1Qbb), per (ingress port, lossless priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pfc {
    /// Bytes buffered from one ingress port in one priority that send a
    /// PAUSE for that priority upstream.
    pub xoff_bytes: u64,
    /// Bytes below which RESUME is sent.
    pub xon_bytes: u64,
    /// Extra bytes reserved per (ingress, priority) for what is in flight
    /// when PAUSE is sent; `None` computes it per link from bandwidth,
    /// delay and MTU.
    pub headroom_bytes: Option<u64>,
}

/// Network-wide settings of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetConfig {
    /// Payload bytes per packet.
    pub mtu: u32,
    /// Some priority is lossless (PFC runs); false: every priority is lossy
    /// (drops at the egress buffer, go-back-N).
    pub lossless: bool,
    /// The lossless priorities, ascending; the others drop and recover.
    pub lossless_priorities: Vec<u8>,
    /// The priority of jobs that name none.
    pub priority: u8,
    /// Senders on every priority keep packets until acknowledged and
    /// resend from the first unacknowledged PSN when a timer or NAK says
    /// so: when nothing is lossless, or when links can fail (an RNIC's
    /// transport is reliable; PFC only makes it rare that recovery is
    /// needed). Senders on a lossy priority always do, and so does every
    /// sender when the NICs' `ordering` is go-back-n.
    pub reliable: bool,
    pub pfc: Pfc,
    pub ecn: Option<Ecn>,
    pub dcqcn: Option<Dcqcn>,
    pub flowlet_timeout_ps: u64,
    /// UDP source ports a queue pair uses (messages rotate through them).
    pub sports_per_qp: u16,
    /// Go-back-N retransmission timeout (lossy priorities).
    pub rto_ps: u64,
    /// The receiver acknowledges every this many packets (lossy mode).
    pub ack_every: u32,
    /// The NICs' tolerance of reordering (the scenario's `nic.ordering`).
    pub ordering: Ordering,
    /// 1 in a run. A job's floor (`report/floor.rs`) runs on a fabric
    /// whose switch-to-switch links are this many times as fast, yet each
    /// data packet still reaches the next hop as late as a full packet
    /// serialized at the real rate would: capacity without store-and-
    /// forward shortcuts. Not a scenario setting.
    #[serde(skip)]
    pub core_speedup: u64,
}

impl NetConfig {
    pub fn is_lossless(&self, priority: u8) -> bool {
        self.lossless_priorities.contains(&priority)
    }
}

/// Where a run stops at the latest, so runaway scenarios end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    pub time_ps: u64,
    pub events: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { time_ps: 1_000_000_000_000, events: 2_000_000_000 }
    }
}

/// The modelled control plane: the controller in the loop (mode
/// `metaroce`) and the baselines' routing convergence after a failure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlConfig {
    /// A threshold crossing (or a port going down) reaches the controller
    /// this long after it happened at the switch.
    pub digest_latency_ps: u64,
    /// One policy decision keeps the controller busy this long.
    pub decision_ps: u64,
    /// Written weights are in force in the switches this long after the
    /// decision that chose them.
    pub write_latency_ps: u64,
    /// Egress queue thresholds of the data plane's crossing digests.
    pub queue_high_bytes: u64,
    pub queue_low_bytes: u64,
    /// Least time between two crossings of one port (0: every one).
    pub digest_interval_ps: u64,
    /// The controller reads (and resets) every port's queue-sensing
    /// registers this often; the snapshot reaches it `digest_latency` later.
    pub poll_interval_ps: u64,
    /// Baseline modes: a failed link leaves every switch's groups this
    /// long after it failed (routing protocol convergence).
    pub convergence_ps: u64,
    pub policy: metaroce_policy::PolicyConfig,
    /// The flow placement planner's tunables (`metaroce-te`).
    pub te: metaroce_te::TeConfig,
    /// Large-flow detector: a flow is reported when its first switch counts
    /// at least `large_flow_bytes` of it in a window of this length (0: off).
    pub large_flow_window_ps: u64,
    pub large_flow_bytes: u64,
    /// On in-order NICs, what a drained flow without a steer entry does
    /// (`control/drained.rs`).
    pub repick: Repick,
}

/// What metaroce's forwarder does with a drained flow that has no steer
/// entry, on in-order NICs (`control.repick`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Repick {
    /// Draws a member by the current weights: re-weighting reaches running
    /// flows at their drained points.
    #[default]
    Drained,
    /// Keeps its port: weights place new flows only.
    Never,
}

impl Repick {
    pub fn as_str(self) -> &'static str {
        match self {
            Repick::Drained => "drained",
            Repick::Never => "never",
        }
    }
}

/// A link going down or coming back at a time of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkEvent {
    pub at_ps: u64,
    pub link: metaroce_topo::LinkId,
    pub up: bool,
    /// The link end it was named by, for people.
    pub name: String,
}

/// A validated scenario, resolved against its topology.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scenario {
    pub name: String,
    pub description: Option<String>,
    pub seed: u64,
    pub modes: Vec<RoutingMode>,
    pub limits: Limits,
    pub net: NetConfig,
    pub jobs: Vec<Job>,
    pub control: ControlConfig,
    /// Link failures and repairs, by time.
    pub events: Vec<LinkEvent>,
    /// Link ends whose egress is written to a pcap file.
    #[serde(skip)]
    pub pcap: Vec<Endpoint>,
    /// The seed the jobs' random parts were drawn with: when `seed` is
    /// set directly, runs redraw them (see [`Scenario::drawn`]).
    #[serde(skip)]
    pub drawn_seed: u64,
}

impl Scenario {
    /// The priorities the jobs use, ascending (the network's default if
    /// there are no jobs): the engine keeps one traffic class per entry.
    pub fn priorities(&self) -> Vec<u8> {
        let mut p: Vec<u8> = self.jobs.iter().map(|j| j.priority).collect();
        if p.is_empty() {
            p.push(self.net.priority);
        }
        p.sort_unstable();
        p.dedup();
        p
    }
}
