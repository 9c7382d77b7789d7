//! The scenario's `control:` and `events:` sections: the modelled control
//! plane (latencies, queue thresholds, policy timers, the baselines'
//! convergence delay) and link failures during the run.
//!
//! ```yaml
//! control:
//!   digest_latency: 50us     # crossing at the switch -> the controller has it
//!   decision_time: 100us     # one policy decision
//!   write_latency: 500us     # decision -> new weights in force in the switches
//!   queue_high: 48pkt        # default: the topology's fabric.queue_high
//!   queue_low: 16pkt
//!   digest_interval: 0us     # least time between two crossings of a port
//!   poll_interval: 1ms       # register snapshots (window maximum, congested flag)
//!   convergence: 10ms        # ecmp/flowlet/spray: routing convergence after a failure
//!   policy: {hold_up: 200us, hold_down: 5ms, step_interval: 200us, derate_step: 50%,
//!            min_factor: 12.5%, warm_discount: 50%, max_changed_groups: 256}
//!   te: {min_gain: 5%, max_moves: 64, hold_down: 2ms,   # flow placement (metaroce-te)
//!        confine_incasts: true, rearrange_jobs: true}
//!   large_flow: {window: 100us, threshold: 512KiB}     # default: the flowlet timeout, and
//!                                                      # 1/64 of the slowest NIC over it
//! events:
//!   - {at: 400us, link_down: leaf1:1}
//!   - {at: 3ms, link_up: leaf1:1}
//! ```

use metaroce_policy::PolicyConfig;
use metaroce_topo::yaml::Node;
use metaroce_topo::Topology;

use crate::scenario::config::{ControlConfig, LinkEvent, Repick, PS_PER_NS, ROCE_HEADER_BYTES};
use crate::scenario::decode::Diags;

const CONTROL: &[&str] = &[
    "digest_latency",
    "decision_time",
    "write_latency",
    "queue_high",
    "queue_low",
    "digest_interval",
    "poll_interval",
    "convergence",
    "policy",
    "te",
    "large_flow",
    "repick",
];
const TE: &[&str] = &["min_gain", "max_moves", "hold_down", "confine_incasts", "rearrange_jobs"];
const LARGE_FLOW: &[&str] = &["window", "threshold"];
const POLICY: &[&str] = &[
    "hold_up",
    "hold_down",
    "step_interval",
    "derate_step",
    "min_factor",
    "warm_discount",
    "max_share_growth",
    "max_changed_groups",
];

/// Defaults, and why:
/// - digest 50 µs: a data-plane digest is batched by the switch driver
///   (tens of µs on Tofino), then crosses the P4Runtime stream to the
///   controller over the management network;
/// - decision 100 µs: the policy's decision on fabrics of tens of switches
///   (the controller's benchmark puts it at p50 ≤ 0.25 ms under a digest
///   storm on 64 switches);
/// - write 500 µs: P4Runtime writes of a new group and the route moving to
///   it, make-before-break, acknowledged by the switch agent: a few hundred
///   µs on hardware, and the dominant part of the reaction;
/// - poll 1 ms: reading a few registers per switch is cheap; the
///   controller's own 100 ms default is paced for BMv2;
/// - convergence 10 ms: a tuned BGP Clos (link-down detection, withdraw,
///   FIB programming) takes milliseconds to hundreds of ms; 10 ms is
///   optimistic for the baselines.
pub(crate) fn default_control(topo: &Topology, mtu: u32) -> ControlConfig {
    let pkt = u64::from(mtu + ROCE_HEADER_BYTES);
    let bytes = |q: metaroce_topo::units::QueueDepth| match q {
        metaroce_topo::units::QueueDepth::Packets(p) => p * pkt,
        metaroce_topo::units::QueueDepth::Bytes(b) => b,
    };
    // The detector's window is the flowlet timeout (a flow is known within
    // about one timeout of becoming large); large means 1/64 of the
    // slowest NIC's line rate over the window: a queue pair of an
    // All-to-All among 64 ranks is large, a control-plane trickle is not.
    let window_ps = (topo.fabric.flowlet_timeout.ns() * PS_PER_NS).max(1_000_000);
    let nic_bps = topo.hosts.iter().map(|h| h.nic_rate.bps()).min().unwrap_or(0);
    let threshold = (u128::from(nic_bps) * u128::from(window_ps) / 8 / 64 / 1_000_000_000_000) as u64;
    ControlConfig {
        digest_latency_ps: 50_000_000,
        decision_ps: 100_000_000,
        write_latency_ps: 500_000_000,
        queue_high_bytes: bytes(topo.fabric.queue_high),
        queue_low_bytes: bytes(topo.fabric.queue_low),
        digest_interval_ps: 0,
        poll_interval_ps: 1_000_000_000,
        convergence_ps: 10_000_000_000,
        policy: PolicyConfig::default(),
        te: scaled_te(),
        large_flow_window_ps: window_ps,
        large_flow_bytes: threshold,
        repick: Repick::default(),
    }
}

/// The planner's defaults, with the hold-down scaled like the policy's for
/// runs of milliseconds (the controller's own 100 ms is paced for BMv2).
fn scaled_te() -> metaroce_te::TeConfig {
    metaroce_te::TeConfig { hold_down_ns: 2_000_000, ..Default::default() }
}

pub(crate) fn control(d: &mut Diags, v: &Node, mtu: u32, c: &mut ControlConfig) {
    let pkt = u64::from(mtu + ROCE_HEADER_BYTES);
    for (key, n) in d.map(v, "control", CONTROL) {
        let path = format!("control.{key}");
        match key {
            "policy" => policy(d, n, &mut c.policy),
            "te" => te(d, n, &mut c.te),
            "large_flow" => large_flow(d, n, c),
            "repick" => match n.as_str() {
                Some("drained") => c.repick = Repick::Drained,
                Some("never") => c.repick = Repick::Never,
                _ => d.err(&path, n.pos, "expected `drained` (re-draw by weight) or `never` (keep the port)"),
            },
            "queue_high" => c.queue_high_bytes = d.depth(n, &path, pkt).unwrap_or(c.queue_high_bytes),
            "queue_low" => c.queue_low_bytes = d.depth(n, &path, pkt).unwrap_or(c.queue_low_bytes),
            _ => {
                let Some(t) = d.duration_ps(n, &path) else { continue };
                match key {
                    "digest_latency" => c.digest_latency_ps = t,
                    "decision_time" => c.decision_ps = t,
                    "write_latency" => c.write_latency_ps = t,
                    "digest_interval" => c.digest_interval_ps = t,
                    "poll_interval" if t == 0 => d.err(&path, n.pos, "the poll interval must be above zero"),
                    "poll_interval" => c.poll_interval_ps = t,
                    _ => c.convergence_ps = t,
                }
            }
        }
    }
    if c.queue_high_bytes == 0 || c.queue_low_bytes >= c.queue_high_bytes {
        d.err(
            "control",
            v.pos,
            format!(
                "queue_low ({} B) must be below queue_high ({} B), and queue_high above zero",
                c.queue_low_bytes, c.queue_high_bytes
            ),
        );
    }
}

fn policy(d: &mut Diags, v: &Node, p: &mut PolicyConfig) {
    let permille = |d: &mut Diags, n: &Node, path: &str, old: u32| {
        d.fraction(n, path, 0.0, 1.0).map_or(old, |f| (f * 1000.0).round() as u32)
    };
    for (key, n) in d.map(v, "control.policy", POLICY) {
        let path = format!("control.policy.{key}");
        let ns = |d: &mut Diags| d.duration_ps(n, &path).map(|ps| ps / 1_000);
        match key {
            "hold_up" => p.hold_up_ns = ns(d).unwrap_or(p.hold_up_ns),
            "hold_down" => p.hold_down_ns = ns(d).unwrap_or(p.hold_down_ns),
            "step_interval" => p.step_interval_ns = ns(d).unwrap_or(p.step_interval_ns),
            "derate_step" => p.derate_step_permille = permille(d, n, &path, p.derate_step_permille),
            "min_factor" => p.min_factor_permille = permille(d, n, &path, p.min_factor_permille),
            "warm_discount" => p.warm_discount_permille = permille(d, n, &path, p.warm_discount_permille),
            // A growth factor: 1.334 (or 133.4%) lets a member's share grow by a third.
            "max_share_growth" => {
                p.max_share_growth_permille = d
                    .fraction(n, &path, 1.0, 10.0)
                    .map_or(p.max_share_growth_permille, |f| (f * 1000.0).round() as u32)
            }
            _ => {
                p.max_changed_groups =
                    d.u64(n, &path, 1, 1 << 20).map_or(p.max_changed_groups, |v| v as usize)
            }
        }
    }
    if let Err(e) = p.validate() {
        d.err("control.policy", v.pos, e.to_string());
    }
}

/// `control.te`: the flow placement planner's tunables.
fn te(d: &mut Diags, v: &Node, t: &mut metaroce_te::TeConfig) {
    for (key, n) in d.map(v, "control.te", TE) {
        let path = format!("control.te.{key}");
        match key {
            "min_gain" => {
                t.min_gain_permille = d
                    .fraction(n, &path, 0.0, 1.0)
                    .map_or(t.min_gain_permille, |f| (f * 1000.0).round() as u32)
            }
            "max_moves" => t.max_moves = d.u64(n, &path, 1, 1 << 20).map_or(t.max_moves, |v| v as usize),
            "confine_incasts" => t.confine_incasts = d.bool(n, &path).unwrap_or(t.confine_incasts),
            "rearrange_jobs" => t.rearrange_jobs = d.bool(n, &path).unwrap_or(t.rearrange_jobs),
            _ => t.hold_down_ns = d.duration_ps(n, &path).map_or(t.hold_down_ns, |ps| ps / 1_000),
        }
    }
    if let Err(e) = t.validate() {
        d.err("control.te", v.pos, e.to_string());
    }
}

/// `control.large_flow`: the data plane's large-flow detector.
fn large_flow(d: &mut Diags, v: &Node, c: &mut ControlConfig) {
    for (key, n) in d.map(v, "control.large_flow", LARGE_FLOW) {
        let path = format!("control.large_flow.{key}");
        match key {
            "window" => match d.duration_ps(n, &path) {
                Some(0) => d.err(&path, n.pos, "the window must be above zero"),
                Some(t) => c.large_flow_window_ps = t,
                None => {}
            },
            _ => match d.bytes(n, &path) {
                Some(0) => d.err(&path, n.pos, "the threshold must be above zero bytes"),
                Some(b) => c.large_flow_bytes = b,
                None => {}
            },
        }
    }
}

/// The `events:` list; times are checked against the limit by the caller.
pub(crate) fn events(d: &mut Diags, v: &Node, topo: &Topology) -> Vec<LinkEvent> {
    let mut out = Vec::new();
    for (i, item) in d.list(v, "events").iter().enumerate() {
        let path = format!("events[{i}]");
        let entries = d.map(item, &path, &["at", "link_down", "link_up"]);
        let mut at = None;
        let mut link = None;
        for (key, n) in &entries {
            let p = format!("{path}.{key}");
            match *key {
                "at" => at = d.duration_ps(n, &p),
                _ => {
                    if link.is_some() {
                        d.err(&path, n.pos, "an event is either link_down or link_up, not both");
                    }
                    link = Some((*key == "link_up", *n, p));
                }
            }
        }
        let Some((up, n, p)) = link else {
            d.err(&path, item.pos, "an event needs link_down or link_up: a link end like \"leaf1:1\"");
            continue;
        };
        let Some(at_ps) = at else {
            if !entries.iter().any(|(k, _)| *k == "at") {
                d.err(&path, item.pos, "an event needs \"at\": when it happens, like 400us");
            }
            continue;
        };
        let Some(name) = d.str(n, &p) else { continue };
        match topo.fabric_link(name) {
            Ok(link) => out.push(LinkEvent { at_ps, link, up, name: name.to_string() }),
            Err(e) => d.err(&p, n.pos, e.to_string()),
        }
    }
    out.sort_by_key(|e| e.at_ps);
    out
}
