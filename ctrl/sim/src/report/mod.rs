//! Turning a finished run into figures: per-job completion against the
//! ideal bound, FCT percentiles, utilization imbalance and queue depth per
//! tier, PFC, ECN and loss counters; as JSON and as a markdown comparison.

pub mod floor;
mod heatmap;
pub mod ideal;
mod markdown;
pub mod pcap;
pub mod plot;
pub mod slowdown;
pub mod stats;
pub mod suite;
pub mod sweep;
pub mod timeline;

use metaroce_topo::{Routing, Topology};
use serde::Serialize;

use crate::engine::net::Node;
use crate::engine::{Outcome, Stop};
use crate::report::stats::{LogHist, Tree};
use crate::scenario::config::Scenario;

/// A job's figures. With several iterations, the job-level figures are
/// those of the whole training run: `completion_us` from the job's start
/// to the end of its last iteration (compute phases included), `ideal_us`
/// the ideal collective times the iterations plus the compute phases in
/// between, `slowdown` their ratio; `iterations` has each one alone.
#[derive(Debug, Clone, Serialize)]
pub struct JobSummary {
    pub name: String,
    pub pattern: String,
    pub ranks: usize,
    pub messages: usize,
    pub start_us: f64,
    /// From the job's start to its last message's arrival; None if unfinished.
    pub completion_us: Option<f64>,
    pub ideal_us: f64,
    pub ideal_bottleneck: String,
    /// Completion over the ideal bound (1.0 is perfect).
    pub slowdown: Option<f64>,
    /// The job alone with no fabric in the way (`floor.rs`), when computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_us: Option<f64>,
    /// Completion over the larger of the ideal bound and the floor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_floor: Option<f64>,
    /// Compute time between iterations.
    pub compute_us: f64,
    /// The start offset the scheduler took from the controller (already
    /// in `start_us`): what staggering cost the job's completion, counted
    /// from the start it asked for. Absent when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub offset_us: f64,
    /// Each iteration's collective, in order.
    pub iterations: Vec<IterSummary>,
    /// (sender, receiver) host names of a permutation or incast job, in
    /// rank order, so another simulator can replay the same pairs
    /// (`tests/htsim/`); absent for all-to-all and rings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<[String; 2]>,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// One iteration's collective: from its start (every rank done with the
/// previous one, plus the compute time) to its last message's arrival.
#[derive(Debug, Clone, Serialize)]
pub struct IterSummary {
    /// When it started (every rank done with the previous one, plus the
    /// compute phase), µs into the run; None if it never started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_us: Option<f64>,
    /// None if it did not finish (or start).
    pub completion_us: Option<f64>,
    /// The ideal bound of one collective.
    pub ideal_us: f64,
    pub slowdown: Option<f64>,
    /// This iteration alone with no fabric in the way, and completion over the larger
    /// of it and the ideal, when the floor was computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vs_floor: Option<f64>,
    /// The largest congestion tree (any priority, any job's traffic) that
    /// stood while the iteration ran, to the run's end if it did not
    /// finish; zero if it never started. `at_ps` is when it was measured:
    /// a tree standing when the iteration started counts, measured then.
    pub largest_tree: Tree,
    /// PFC pauses (any priority, any job's traffic) that began while the
    /// iteration ran.
    pub pfc_pauses: u64,
}

/// What reordering cost: packets that arrived out of order, the NAKs
/// go-back-N receivers sent, and the bytes resent (for any reason: NAK,
/// timeout).
#[derive(Debug, Clone, Default, Serialize)]
pub struct OutOfOrder {
    pub packets: u64,
    /// The same packets by cause: `spray`, `flowlet` (a re-pick), `steer`
    /// (a steer entry moved the flow), `failover`, `loss` (the same path as
    /// the packet before: one ahead was lost or is being resent).
    pub by_cause: std::collections::BTreeMap<String, u64>,
    pub naks: u64,
    pub retransmitted_bytes: u64,
}

/// How the controller's moves reached the traffic: from a steer write to
/// the first packet that took it, and the writes no packet took.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MovesLanded {
    pub landed: Option<crate::control::Dist>,
    /// Per write that landed, the packets its switch forwarded for the
    /// flow after the write and before the one that took it (on in-order
    /// NICs: what was still to send of the message in flight when the
    /// entry arrived). Min / p50 / max.
    pub packets_before_landing: Option<[u64; 3]>,
    /// Steer writes no packet took before the run ended (the flow ended,
    /// or never drained).
    pub never_landed: usize,
    /// The drain rule at first leaves, when it ran (in-order NICs).
    pub drain: Option<crate::twin::drain::DrainCounters>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Fct {
    pub count: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TierUtil {
    pub tier: String,
    pub links: usize,
    pub mean: f64,
    pub max: f64,
    /// max / mean: 1.0 is perfectly balanced.
    pub imbalance: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TierQueue {
    pub tier: String,
    pub samples: u64,
    pub p50_kib: f64,
    pub p99_kib: f64,
    pub p999_kib: f64,
    pub max_kib: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PfcSummary {
    /// PAUSE and RESUME frames sent.
    pub frames: u64,
    /// Times a link went from sending to paused.
    pub pauses: u64,
    pub paused_links: usize,
    pub paused_time_us: f64,
    pub largest_tree: Tree,
    pub headroom_overflows: u64,
    /// The same figures (and drops) per priority the jobs use.
    pub by_priority: Vec<crate::report::stats::PriorityFigures>,
}

/// The figures of one mode's run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub scenario: String,
    pub topology: String,
    pub seed: u64,
    pub mode: String,
    pub stopped: Option<Stop>,
    pub unfinished_messages: usize,
    pub sim_time_us: f64,
    pub events: u64,
    pub packets: u64,
    pub jobs: Vec<JobSummary>,
    pub fct: Fct,
    pub utilization: Vec<TierUtil>,
    pub queues: Vec<TierQueue>,
    pub pfc: PfcSummary,
    pub ecn_marks: u64,
    pub cnps: u64,
    pub drops: u64,
    pub retransmits: u64,
    /// The NICs' ordering model: go-back-n or out-of-order.
    pub nic_ordering: String,
    pub out_of_order: OutOfOrder,
    /// Packets lost because their link went down under them.
    pub lost_on_failure: u64,
    /// ACKs and NAKs (in band) lost on a dead link.
    pub acks_lost: u64,
    /// Packets routed into a dead link before routing moved off it.
    pub blackholed: u64,
    /// Packets a switch pipeline delivered to a host they were not for.
    pub misdelivered: u64,
    pub max_packets_in_flight: usize,
    /// The control plane's figures (reroutes, reaction time), if one ran.
    pub control: Option<crate::control::ControlSummary>,
    /// Flowlets that started on a steer entry (the controller's placement
    /// moving traffic).
    pub steered_flowlets: u64,
    /// Steer writes reaching the traffic.
    pub moves: MovesLanded,
    /// FCT slowdown by flow size of the Poisson jobs' flows, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fct_slowdown: Option<slowdown::FctSlowdown>,
}

/// A port's queue-depth series, for plots.
#[derive(Debug, Clone)]
pub struct HotPort {
    pub label: String,
    pub max_bytes: u64,
    pub series: Vec<u32>,
}

/// One mode's run: its figures and the raw data plots need.
#[derive(Debug, Clone)]
pub struct ModeRun {
    pub summary: Summary,
    /// Every finished message's completion time, sorted.
    pub fcts_ps: Vec<u64>,
    pub hot: Vec<HotPort>,
    pub series_interval_ps: u64,
    /// (label, tier, utilization) of every switch egress port.
    pub port_util: Vec<(String, String, f64)>,
    pub pcap: Option<Vec<u8>>,
    /// Most events pending at once (sampled).
    pub max_pending_events: usize,
}

/// The host pairs of a permutation or incast job (see `JobSummary::pairs`).
fn job_pairs(topo: &Topology, job: &crate::scenario::config::Job) -> Vec<[String; 2]> {
    use crate::scenario::config::Pattern;
    let name = |h: usize| topo.hosts[h].name.clone();
    match &job.pattern {
        Pattern::Permutation { perm } => job
            .ranks
            .iter()
            .zip(perm)
            .filter_map(|(&s, &d)| Some([name(s), name(*job.ranks.get(d)?)]))
            .collect(),
        Pattern::Incast { target } => job.ranks.iter().map(|&s| [name(s), name(*target)]).collect(),
        // All-to-all and rings (every pair of ranks, or neighbours), and
        // any pattern added later: none listed.
        _ => Vec::new(),
    }
}

fn us(ps: u64) -> f64 {
    ps as f64 / 1e6
}

pub(crate) fn summarize(
    topo: &Topology,
    routing: &Routing,
    sc: &Scenario,
    mode: &str,
    o: Outcome,
) -> ModeRun {
    let w = &o.workload;
    let mut fcts: Vec<u64> =
        w.flows.iter().filter(|f| f.done_ps != u64::MAX).map(|f| f.done_ps - f.start_ps).collect();
    fcts.sort_unstable();
    let pct = |q: f64| -> f64 {
        if fcts.is_empty() {
            return 0.0;
        }
        let i = ((q * fcts.len() as f64).ceil() as usize).clamp(1, fcts.len()) - 1;
        us(fcts[i])
    };
    let fct = Fct {
        count: fcts.len(),
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        max_us: fcts.last().map_or(0.0, |&v| us(v)),
    };
    let jobs = sc.jobs.iter().zip(&w.jobs).map(|(job, run)| {
        let flows = &w.flows[run.flows.clone()];
        let done = flows.iter().all(|f| f.done_ps != u64::MAX);
        let end = flows.iter().map(|f| f.done_ps).max().unwrap_or(run.start_ps);
        let bound = ideal::job_bound(topo, routing, &sc.net, job);
        let n = run.iters.len().max(1) as u64;
        let compute: u64 = run.computes.iter().take(n as usize - 1).sum();
        let ideal_total = us(bound.ps * n + compute);
        let completion = done.then(|| us(end - run.start_ps));
        let iterations = run
            .iters
            .iter()
            .map(|it| {
                let c =
                    (it.done_ps != u64::MAX && it.start_ps != u64::MAX).then(|| us(it.done_ps - it.start_ps));
                let (largest_tree, pfc_pauses) = if it.start_ps == u64::MAX {
                    (Tree::default(), 0)
                } else {
                    let end = it.done_ps.min(o.end_ps.saturating_add(1));
                    (o.stats.largest_tree_within(it.start_ps, end), o.stats.pauses_within(it.start_ps, end))
                };
                IterSummary {
                    start_us: (it.start_ps != u64::MAX).then(|| us(it.start_ps)),
                    completion_us: c,
                    ideal_us: us(bound.ps),
                    slowdown: c.map(|c| c / us(bound.ps).max(1e-9)),
                    largest_tree,
                    pfc_pauses,
                    floor_us: None,
                    vs_floor: None,
                }
            })
            .collect();
        JobSummary {
            name: run.name.clone(),
            pattern: run.pattern.to_string(),
            ranks: run.ranks,
            messages: flows.len(),
            start_us: us(run.start_ps),
            completion_us: completion,
            ideal_us: ideal_total,
            ideal_bottleneck: bound.bottleneck,
            slowdown: completion.map(|c| c / ideal_total.max(1e-9)),
            floor_us: None,
            vs_floor: None,
            compute_us: us(job.compute_ps),
            offset_us: us(job.offset_ps),
            iterations,
            pairs: job_pairs(topo, job),
        }
    });
    let jobs: Vec<JobSummary> = jobs.collect();
    let start = w.jobs.iter().map(|j| j.start_ps).min().unwrap_or(0);
    let span = o.end_ps.saturating_sub(start).max(1);
    let port_util: Vec<(String, String, f64)> = o
        .ports
        .specs
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.from, Node::Switch(_)))
        .map(|(i, s)| {
            let capacity = s.bw_bps as f64 * span as f64 / 8e12;
            (
                s.label.clone(),
                o.ports.classes[usize::from(s.class)].clone(),
                o.stats.tx_bytes[i] as f64 / capacity,
            )
        })
        .collect();
    let utilization = tier_util(&o, span);
    let queues = tier_queues(&o);
    let hot = hot_ports(&o, 4);
    let pfc = PfcSummary {
        frames: o.stats.pause_frames,
        pauses: o.stats.pauses.iter().map(|&p| u64::from(p)).sum(),
        paused_links: o.stats.paused_links(),
        paused_time_us: us(o.stats.paused_ps.iter().sum()),
        largest_tree: o.stats.largest_tree,
        headroom_overflows: o.stats.headroom_overflows,
        by_priority: o.stats.by_priority(|p| sc.net.is_lossless(p)),
    };
    let summary = Summary {
        scenario: sc.name.clone(),
        topology: topo.name.clone(),
        seed: sc.seed,
        mode: mode.to_string(),
        stopped: o.stop,
        unfinished_messages: w.flows.len() - fcts.len(),
        sim_time_us: us(o.end_ps),
        events: o.events,
        packets: o.stats.packets_sent,
        jobs,
        fct,
        utilization,
        queues,
        pfc,
        ecn_marks: o.stats.ecn_marks,
        cnps: o.stats.cnps,
        drops: o.stats.drops,
        retransmits: o.stats.retransmits,
        nic_ordering: sc.net.ordering.as_str().to_string(),
        out_of_order: OutOfOrder {
            packets: o.stats.out_of_order,
            by_cause: crate::report::stats::Reorder::ALL
                .iter()
                .map(|&c| (c.as_str().to_string(), o.stats.out_of_order_by_cause[c as usize]))
                .collect(),
            naks: o.stats.naks,
            retransmitted_bytes: o.stats.retransmit_bytes,
        },
        lost_on_failure: o.stats.lost_on_failure,
        acks_lost: o.stats.ctl_lost,
        blackholed: o.stats.blackholed,
        misdelivered: o.stats.misdelivered,
        max_packets_in_flight: o.max_packets,
        control: o.control.clone(),
        steered_flowlets: o.steered_flowlets,
        moves: MovesLanded {
            landed: crate::control::Dist::of(o.steer_landed_ps.clone()),
            packets_before_landing: crate::control::min_p50_max(o.steer_landed_after_pkts.clone()),
            never_landed: o.steer_unlanded,
            drain: o.drain,
        },
        fct_slowdown: slowdown::compute(topo, routing, &sc.net, w),
    };
    let pcap = o.pcap.map(crate::report::pcap::Pcap::into_bytes);
    ModeRun {
        summary,
        fcts_ps: fcts,
        hot,
        series_interval_ps: o.stats.series.interval_ps,
        port_util,
        pcap,
        max_pending_events: o.max_pending_events,
    }
}

fn tier_util(o: &Outcome, span: u64) -> Vec<TierUtil> {
    let mut out = Vec::new();
    for (c, name) in o.ports.classes.iter().enumerate() {
        let utils: Vec<f64> = o
            .ports
            .specs
            .iter()
            .enumerate()
            .filter(|(_, s)| usize::from(s.class) == c)
            .map(|(i, s)| o.stats.tx_bytes[i] as f64 * 8e12 / (s.bw_bps as f64 * span as f64))
            .collect();
        if utils.is_empty() {
            continue;
        }
        let mean = utils.iter().sum::<f64>() / utils.len() as f64;
        let max = utils.iter().copied().fold(0.0, f64::max);
        let imbalance = if mean > 0.0 { max / mean } else { 0.0 };
        out.push(TierUtil { tier: name.clone(), links: utils.len(), mean, max, imbalance });
    }
    out
}

fn tier_queues(o: &Outcome) -> Vec<TierQueue> {
    let kib = |b: u64| b as f64 / 1024.0;
    let mut all = LogHist::default();
    let mut out: Vec<TierQueue> = Vec::new();
    let push = |tier: &str, h: &LogHist| TierQueue {
        tier: tier.to_string(),
        samples: h.count(),
        p50_kib: kib(h.quantile(0.5)),
        p99_kib: kib(h.quantile(0.99)),
        p999_kib: kib(h.quantile(0.999)),
        max_kib: kib(h.quantile(1.0)),
    };
    for (c, h) in o.stats.queue_hist.iter().enumerate() {
        if h.count() > 0 {
            all.merge(h);
            out.push(push(&o.ports.classes[c], h));
        }
    }
    out.push(push("all switch ports", &all));
    out
}

fn hot_ports(o: &Outcome, n: usize) -> Vec<HotPort> {
    let mut idx: Vec<usize> = (0..o.ports.specs.len()).filter(|&i| o.stats.max_queue[i] > 0).collect();
    idx.sort_by_key(|&i| (std::cmp::Reverse(o.stats.max_queue[i]), i));
    idx.truncate(n);
    idx.into_iter()
        .map(|i| HotPort {
            label: o.ports.specs[i].label.clone(),
            max_bytes: o.stats.max_queue[i],
            series: o.stats.series.data[i].clone(),
        })
        .collect()
}

/// The JSON report of runs side by side.
pub fn json(runs: &[ModeRun]) -> serde_json::Value {
    serde_json::json!({ "modes": runs.iter().map(|r| &r.summary).collect::<Vec<_>>() })
}

/// The markdown report of runs side by side.
pub fn markdown(sc: &Scenario, runs: &[ModeRun]) -> String {
    crate::report::markdown::render(sc, runs)
}
