//! The controller's metrics: typed methods the core calls, one registry
//! behind them, rendered as OpenMetrics for `GET /metrics`.
//!
//! Cardinality is bounded by the topology: labels are switch names, port
//! numbers and group ids from the topology YAML, the roll-out mode, and
//! reroute reasons from the fixed [`REROUTE_REASONS`] set (anything else is
//! counted as `other`). No label ever carries a flow, host address or time.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use super::openmetrics::{Kind, Registry, Spec};
use crate::mode::Mode;

/// The reasons a reroute may be counted under. Other strings count as
/// `other`, so a typo cannot grow the label set.
pub const REROUTE_REASONS: [&str; 9] = [
    "congestion",
    "recovery",
    "link_down",
    "link_up",
    "switch_down",
    "switch_up",
    "rollback",
    "operator",
    "other",
];

/// Histogram bounds from 50 µs (a fast decision) to 10 s (a stuck write).
const LATENCY_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0,
];

const QUEUE_DEPTH: usize = 0;
const ECN_MARKS: usize = 1;
const DIGESTS: usize = 2;
const DIGESTS_LOST: usize = 3;
const INT_REPORTS: usize = 4;
const INT_REPORTS_LOST: usize = 5;
const REROUTES: usize = 6;
const GROUP_WEIGHT: usize = 7;
const PATH_SHARE: usize = 8;
const DECISION: usize = 9;
const WRITE: usize = 10;
const CONNECTED: usize = 11;
const PRIMARY: usize = 12;
const MODE: usize = 13;
const REACTION: usize = 14;
const HOST_RATE: usize = 15;
const HOST_UP: usize = 16;
const UNREACHABLE: usize = 17;
const STEERED: usize = 18;
const FLOW_MOVES: usize = 19;
const PLANNED_MAX: usize = 20;
const OBSERVED_MAX: usize = 21;
const PLACEMENT: usize = 22;
const JOBS: usize = 23;
const PLACED: usize = 24;
const LARGE_FLOW_DIGESTS: usize = 25;
const HA_ROLE: usize = 26;
const HA_CHANGES: usize = 27;
const HA_TAKEOVER: usize = 28;
const UNPLACED: usize = 29;
const REFUSED_STEER: usize = 30;
const WRITE_FAILURES: usize = 31;
const REFUSED_ENTRIES: usize = 32;
const SESSION_FAILURES: usize = 33;
const FOREIGN: usize = 34;
const DRAIN_PAIRS: usize = 35;
const DRAIN_PAIR_REPORTS: usize = 36;
const DRAIN_PAIRING: usize = 37;
const REGISTER_POLLS: usize = 38;

/// Why a register poll round ran (`metaroce_register_polls_total`; see
/// `crate::agent::poll`).
pub const POLL_REASONS: [&str; 3] = ["audit", "hot", "lost"];

/// What a drain pairing report came to (`metaroce_drain_pairing_total`).
pub const PAIRING_OUTCOMES: [&str; 5] = ["paired", "unmatched", "ambiguous", "expired", "evicted"];

/// The roles of [`Metrics::set_ha_role`] (see `crate::ha::Role`).
pub const HA_ROLES: [&str; 3] = ["alone", "leader", "standby"];

/// The reasons a flow move is counted under (the planner's).
pub const MOVE_REASONS: [&str; 8] =
    ["new", "rebalance", "link_failed", "route_changed", "ended", "stayed", "replaced", "batch"];

const fn family(name: &'static str, kind: Kind, labels: &'static [&'static str], help: &'static str) -> Spec {
    Spec { name, help, kind, unit: None, labels, buckets: &[] }
}

/// Every family, in the order of the index constants above.
static SPECS: [Spec; 39] = [
    family(
        "metaroce_port_queue_depth",
        Kind::Gauge,
        &["switch", "port"],
        "Latest egress queue depth, in the target's units (packets on BMv2, 80-byte cells on Tofino).",
    ),
    family("metaroce_ecn_marks", Kind::Counter, &["switch", "port"], "Packets ECN-marked at an egress port."),
    family("metaroce_digests", Kind::Counter, &["switch"], "Queue-crossing digests received from a switch."),
    family(
        "metaroce_digests_lost",
        Kind::Counter,
        &["switch"],
        "Digests a switch dropped or we failed to read.",
    ),
    family(
        "metaroce_int_reports",
        Kind::Counter,
        &["switch"],
        "INT Telemetry Reports received from a sink switch.",
    ),
    family("metaroce_int_reports_lost", Kind::Counter, &["switch"], "INT reports lost (sequence gaps)."),
    family("metaroce_reroutes", Kind::Counter, &["reason"], "Group weight changes decided, by reason."),
    family("metaroce_group_weight", Kind::Gauge, &["switch", "group", "port"], "Installed next-hop weight."),
    Spec {
        name: "metaroce_path_share_ratio",
        help: "Share of a switch's upstream traffic a port carries (0 to 1).",
        kind: Kind::Gauge,
        unit: Some("ratio"),
        labels: &["switch", "port"],
        buckets: &[],
    },
    Spec {
        name: "metaroce_decision_duration_seconds",
        help: "Time from an input event to the policy's decision.",
        kind: Kind::Histogram,
        unit: Some("seconds"),
        labels: &[],
        buckets: LATENCY_BUCKETS,
    },
    Spec {
        name: "metaroce_switch_write_duration_seconds",
        help: "Duration of a P4Runtime write batch to a switch.",
        kind: Kind::Histogram,
        unit: Some("seconds"),
        labels: &["switch"],
        buckets: LATENCY_BUCKETS,
    },
    family("metaroce_switch_connected", Kind::Gauge, &["switch"], "1 while the P4Runtime session is up."),
    family("metaroce_switch_primary", Kind::Gauge, &["switch"], "1 while this controller is the primary."),
    family("metaroce_mode", Kind::Gauge, &["mode"], "1 for the current roll-out mode, 0 for the others."),
    Spec {
        name: "metaroce_reaction_duration_seconds",
        help: "Time from a threshold digest reaching the controller to the group rewrite it caused being acknowledged by a switch.",
        kind: Kind::Histogram,
        unit: Some("seconds"),
        labels: &[],
        buckets: LATENCY_BUCKETS,
    },
    family(
        "metaroce_host_congestion_rate",
        Kind::Gauge,
        &["host", "device", "signal"],
        "Per-second rate of a RoCE NIC congestion counter scraped from a host exporter (signals: pfc_tx, pfc_rx, pause_tx, pause_rx, cnp_sent, cnp_handled, ecn_marked).",
    ),
    family("metaroce_host_exporter_up", Kind::Gauge, &["host"], "1 when the host's counter exporter answered the last scrape."),
    family(
        "metaroce_unreachable_leaf_pairs",
        Kind::Gauge,
        &[],
        "Ordered pairs of working leaves with no path between them (0 unless failures partition the fabric).",
    ),
    family("metaroce_steered_flows", Kind::Gauge, &[], "Flows (or host pairs) the placement pins with steer entries."),
    family("metaroce_flow_moves", Kind::Counter, &["reason"], "Flow placement changes decided, by reason (new, rebalance, link_failed, route_changed, ended)."),
    Spec {
        name: "metaroce_planned_max_utilisation_ratio",
        help: "Highest link utilisation the placement plans for (placed demands over capacity; 1 = a full link).",
        kind: Kind::Gauge,
        unit: Some("ratio"),
        labels: &[],
        buckets: &[],
    },
    Spec {
        name: "metaroce_observed_max_utilisation_ratio",
        help: "Highest link utilisation the large-flow reports show (reported rates on the ports they left by, over capacity).",
        kind: Kind::Gauge,
        unit: Some("ratio"),
        labels: &[],
        buckets: &[],
    },
    Spec {
        name: "metaroce_placement_duration_seconds",
        help: "Time the placement planner takes for one decision.",
        kind: Kind::Histogram,
        unit: Some("seconds"),
        labels: &[],
        buckets: LATENCY_BUCKETS,
    },
    family("metaroce_jobs", Kind::Gauge, &[], "Jobs registered through the job API."),
    family("metaroce_placed_flows", Kind::Gauge, &[], "Flows the planner knows (announced and reported large)."),
    family("metaroce_large_flow_digests", Kind::Counter, &["switch"], "Large-flow digests received from a switch."),
    family("metaroce_ha_role", Kind::Gauge, &["role"], "1 for this controller's high-availability role (alone, leader, standby), 0 for the others."),
    family("metaroce_ha_leadership_changes", Kind::Counter, &[], "Times this controller was elected leader or stood down."),
    Spec {
        name: "metaroce_ha_takeover_seconds",
        help: "The controller's share of the last takeover: from being elected to being primary on every switch (0 before any). The outage is longer: the old leader's lease must lapse first.",
        kind: Kind::Gauge,
        unit: Some("seconds"),
        labels: &[],
        buckets: &[],
    },
    family(
        "metaroce_unplaced_flows",
        Kind::Gauge,
        &[],
        "Flows the last placement decision could not place (each keeps its previous path; see the flow_unplaced events).",
    ),
    family(
        "metaroce_refused_steer_entries",
        Kind::Gauge,
        &[],
        "Steer entries the last placement decision refused to build (a port outside the route's group; see the steer_refused events).",
    ),
    family(
        "metaroce_switch_write_failures",
        Kind::Counter,
        &["switch"],
        "Write passes to a switch that ended with an error (the switch does not hold the desired state; see the write_failed events).",
    ),
    family(
        "metaroce_switch_refused_entries",
        Kind::Gauge,
        &["switch"],
        "Entry changes the switch refused (a full table, a value it does not take), held back and retried with backoff; the rest of its state is written (see the entries_refused events).",
    ),
    family(
        "metaroce_switch_session_failures",
        Kind::Counter,
        &["switch"],
        "Failed attempts of a switch's P4Runtime session (connect, arbitration, pipeline, stream drops); an outage is one switch_down event however many.",
    ),
    family(
        "metaroce_switch_foreign",
        Kind::Gauge,
        &["switch"],
        "1 while the switch is refused: its pipeline cookie names another fabric or switch (a wrong p4rt address?), so nothing is changed on it (see the switch_foreign event; --adopt takes it over).",
    ),
    family(
        "metaroce_drain_pairs",
        Kind::Gauge,
        &[],
        "qp_pair entries for the drain rule (learnt from pairing digests, or announced by jobs with src_qp), over all switches: a flow is moved only once its ACKs are paired with its data.",
    ),
    family(
        "metaroce_drain_pair_reports",
        Kind::Counter,
        &["kind"],
        "Drain pairing digests received: data (a queue pair's PSN at its first leaf) or ack (an ACK no entry pairs).",
    ),
    family(
        "metaroce_drain_pairing",
        Kind::Counter,
        &["outcome"],
        "What ACK reports and pairs came to: paired, unmatched (no data report fits), ambiguous (two fit: nothing paired), expired, evicted (table full).",
    ),
    family(
        "metaroce_register_polls",
        Kind::Counter,
        &["switch", "reason"],
        "Register poll rounds (one batched Read each): audit (every port, slowly), hot (hot ports, fast), lost (every port fast after a gap in the switch's digests).",
    ),
];

/// The host signals [`Metrics::set_host_rate`] accepts; others are ignored.
pub const HOST_SIGNALS: [&str; 7] =
    ["pfc_tx", "pfc_rx", "pause_tx", "pause_rx", "cnp_sent", "cnp_handled", "ecn_marked"];

/// Cheap to clone, shared by every task; each method takes one short lock.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").field("families", &SPECS.len()).finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn sw(switch: &str) -> Vec<String> {
    vec![switch.to_string()]
}

fn sw_port(switch: &str, port: u16) -> Vec<String> {
    vec![switch.to_string(), port.to_string()]
}

fn flag(on: bool) -> f64 {
    if on {
        1.0
    } else {
        0.0
    }
}

impl Metrics {
    /// A registry with every reroute reason at 0 and the default mode set,
    /// so rates and the mode panel work from the first scrape.
    pub fn new() -> Self {
        let m = Metrics { registry: Arc::new(Mutex::new(Registry::new(&SPECS))) };
        {
            let mut r = m.lock();
            for reason in REROUTE_REASONS {
                r.add(REROUTES, vec![reason.to_string()], 0);
            }
            for reason in MOVE_REASONS {
                r.add(FLOW_MOVES, vec![reason.to_string()], 0);
            }
            for id in [STEERED, PLANNED_MAX, OBSERVED_MAX, JOBS, PLACED, HA_TAKEOVER, UNPLACED, REFUSED_STEER]
            {
                r.set(id, Vec::new(), 0.0);
            }
            r.add(HA_CHANGES, Vec::new(), 0);
        }
        m.set_mode(Mode::default());
        m.set_ha_role("alone");
        m.set_drain_pairing(0, &Default::default());
        m
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        // A panic while holding the lock leaves counters consistent enough.
        self.registry.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn set_queue_depth(&self, switch: &str, port: u16, depth: u64) {
        self.lock().set(QUEUE_DEPTH, sw_port(switch, port), depth as f64);
    }

    pub fn add_ecn_marks(&self, switch: &str, port: u16, n: u64) {
        self.lock().add(ECN_MARKS, sw_port(switch, port), n);
    }

    /// The switch's own count of packets ECN-marked at `port` (its
    /// `ecn_marks` counter, read with the registers).
    pub fn set_ecn_marks(&self, switch: &str, port: u16, total: u64) {
        self.lock().set_counter(ECN_MARKS, sw_port(switch, port), total);
    }

    /// Every per-switch counter at 0 and the session gauges down, for each
    /// switch of the topology: every family a dashboard shows has samples
    /// from the first scrape, and rates work from the first event.
    pub fn init_switches<'a>(&self, switches: impl IntoIterator<Item = &'a str>) {
        let mut r = self.lock();
        for name in switches {
            for family in [
                DIGESTS,
                DIGESTS_LOST,
                INT_REPORTS,
                INT_REPORTS_LOST,
                LARGE_FLOW_DIGESTS,
                WRITE_FAILURES,
                SESSION_FAILURES,
            ] {
                r.add(family, sw(name), 0);
            }
            for reason in POLL_REASONS {
                r.add(REGISTER_POLLS, vec![name.to_string(), reason.to_string()], 0);
            }
            r.set(REFUSED_ENTRIES, sw(name), 0.0);
            r.set(FOREIGN, sw(name), 0.0);
            r.set(CONNECTED, sw(name), 0.0);
            r.set(PRIMARY, sw(name), 0.0);
        }
        r.set(UNREACHABLE, Vec::new(), 0.0);
    }

    /// Each host that runs an exporter: `metaroce_host_exporter_up` 0 until
    /// its first answer, so an exporter that never answers is seen (and
    /// alerted on) from the first scrape. Hosts without one have no sample.
    pub fn init_hosts<'a>(&self, hosts: impl IntoIterator<Item = &'a str>) {
        let mut r = self.lock();
        for name in hosts {
            r.set(HOST_UP, sw(name), 0.0);
        }
    }

    /// Ordered leaf pairs with no path between them (a partition).
    pub fn set_unreachable_pairs(&self, n: usize) {
        self.lock().set(UNREACHABLE, Vec::new(), n as f64);
    }

    pub fn digest_received(&self, switch: &str) {
        self.lock().add(DIGESTS, sw(switch), 1);
    }

    pub fn large_flow_digest(&self, switch: &str) {
        self.lock().add(LARGE_FLOW_DIGESTS, sw(switch), 1);
    }

    /// A register poll round of `switch`, for `reason` (one of [`POLL_REASONS`]).
    pub fn register_poll(&self, switch: &str, reason: &str) {
        self.lock().add(REGISTER_POLLS, vec![switch.to_string(), reason.to_string()], 1);
    }

    pub fn digests_lost(&self, switch: &str, n: u64) {
        self.lock().add(DIGESTS_LOST, sw(switch), n);
    }

    pub fn int_report_received(&self, switch: &str) {
        self.lock().add(INT_REPORTS, sw(switch), 1);
    }

    pub fn int_reports_lost(&self, switch: &str, n: u64) {
        self.lock().add(INT_REPORTS_LOST, sw(switch), n);
    }

    /// Counts one reroute; `reason` should be one of [`REROUTE_REASONS`].
    pub fn reroute(&self, reason: &str) {
        let known = REROUTE_REASONS.iter().find(|r| **r == reason);
        if known.is_none() {
            tracing::warn!(reason, "reroute reason not in the fixed set; counted as other");
        }
        self.lock().add(REROUTES, vec![known.copied().unwrap_or("other").to_string()], 1);
    }

    pub fn set_group_weight(&self, switch: &str, group: u32, port: u16, weight: u32) {
        let labels = vec![switch.to_string(), group.to_string(), port.to_string()];
        self.lock().set(GROUP_WEIGHT, labels, f64::from(weight));
    }

    /// Forgets one member's weight in a group (the group went or changed).
    pub fn remove_group_weight(&self, switch: &str, group: u32, port: u16) {
        let labels = [switch.to_string(), group.to_string(), port.to_string()];
        self.lock().remove(GROUP_WEIGHT, &labels);
    }

    /// Forgets a switch's group weights; call before setting the new ones
    /// when its groups are replaced, so removed members do not linger.
    pub fn clear_groups(&self, switch: &str) {
        self.lock().remove_where(GROUP_WEIGHT, "switch", switch);
    }

    pub fn set_path_share(&self, switch: &str, port: u16, share: f64) {
        self.lock().set(PATH_SHARE, sw_port(switch, port), share);
    }

    /// Forgets a switch's path shares (e.g. when it goes away).
    pub fn clear_path_shares(&self, switch: &str) {
        self.lock().remove_where(PATH_SHARE, "switch", switch);
    }

    /// A host NIC's congestion counter rate; `signal` from [`HOST_SIGNALS`].
    pub fn set_host_rate(&self, host: &str, device: &str, signal: &str, per_second: f64) {
        if HOST_SIGNALS.contains(&signal) {
            self.lock().set(
                HOST_RATE,
                vec![host.to_string(), device.to_string(), signal.to_string()],
                per_second,
            );
        }
    }

    pub fn set_host_up(&self, host: &str, up: bool) {
        self.lock().set(HOST_UP, sw(host), flag(up));
    }

    /// Digest in to write acknowledged, for a rewrite a digest caused.
    pub fn observe_reaction(&self, seconds: f64) {
        self.lock().observe(REACTION, vec![], seconds);
    }

    pub fn observe_decision(&self, seconds: f64) {
        self.lock().observe(DECISION, Vec::new(), seconds);
    }

    pub fn observe_write(&self, switch: &str, seconds: f64) {
        self.lock().observe(WRITE, sw(switch), seconds);
    }

    /// A write pass to `switch` ended with an error.
    pub fn write_failed(&self, switch: &str) {
        self.lock().add(WRITE_FAILURES, sw(switch), 1);
    }

    /// The entry changes `switch` refused that are held back now.
    pub fn set_refused_entries(&self, switch: &str, n: usize) {
        self.lock().set(REFUSED_ENTRIES, sw(switch), n as f64);
    }

    /// A failed attempt of `switch`'s session.
    pub fn session_failed(&self, switch: &str) {
        self.lock().add(SESSION_FAILURES, sw(switch), 1);
    }

    /// The switch is refused (or no longer) for another fabric's cookie.
    pub fn set_switch_foreign(&self, switch: &str, foreign: bool) {
        self.lock().set(FOREIGN, sw(switch), flag(foreign));
    }

    pub fn set_switch_connected(&self, switch: &str, connected: bool) {
        self.lock().set(CONNECTED, sw(switch), flag(connected));
    }

    pub fn set_switch_primary(&self, switch: &str, primary: bool) {
        self.lock().set(PRIMARY, sw(switch), flag(primary));
    }

    pub fn set_mode(&self, mode: Mode) {
        let mut r = self.lock();
        for m in Mode::ALL {
            r.set(MODE, vec![m.as_str().to_string()], flag(m == mode));
        }
    }

    /// Counts flow moves; `reason` is one of [`MOVE_REASONS`] (the
    /// planner's reasons; anything else is ignored).
    pub fn flow_moves(&self, reason: &str, n: u64) {
        if let Some(r) = MOVE_REASONS.iter().find(|r| **r == reason) {
            self.lock().add(FLOW_MOVES, vec![r.to_string()], n);
        }
    }

    /// The placement's figures after a decision.
    pub fn set_placement(&self, steered: usize, placed: usize, planned_max: f64, observed_max: f64) {
        let mut r = self.lock();
        r.set(STEERED, Vec::new(), steered as f64);
        r.set(PLACED, Vec::new(), placed as f64);
        r.set(PLANNED_MAX, Vec::new(), planned_max);
        r.set(OBSERVED_MAX, Vec::new(), observed_max);
    }

    /// What the last decision could not do: flows left on their previous
    /// path, and steer entries it refused to build.
    pub fn set_placement_failures(&self, unplaced: usize, refused: usize) {
        let mut r = self.lock();
        r.set(UNPLACED, Vec::new(), unplaced as f64);
        r.set(REFUSED_STEER, Vec::new(), refused as f64);
    }

    pub fn observe_placement(&self, seconds: f64) {
        self.lock().observe(PLACEMENT, Vec::new(), seconds);
    }

    /// The drain rule's pairing, as the core counts it.
    pub fn set_drain_pairing(&self, pairs: usize, c: &metaroce_core::pair::PairCounters) {
        let mut r = self.lock();
        r.set(DRAIN_PAIRS, Vec::new(), pairs as f64);
        r.set_counter(DRAIN_PAIR_REPORTS, vec!["data".into()], c.data_reports);
        r.set_counter(DRAIN_PAIR_REPORTS, vec!["ack".into()], c.ack_reports);
        let totals = [c.paired, c.unmatched, c.ambiguous, c.expired, c.evicted];
        for (outcome, total) in PAIRING_OUTCOMES.iter().zip(totals) {
            r.set_counter(DRAIN_PAIRING, vec![outcome.to_string()], total);
        }
    }

    pub fn set_jobs(&self, jobs: usize) {
        self.lock().set(JOBS, Vec::new(), jobs as f64);
    }

    /// This controller's high-availability role, one of [`HA_ROLES`].
    pub fn set_ha_role(&self, role: &str) {
        let mut r = self.lock();
        for x in HA_ROLES {
            r.set(HA_ROLE, vec![x.to_string()], flag(x == role));
        }
    }

    pub fn ha_leadership_change(&self) {
        self.lock().add(HA_CHANGES, Vec::new(), 1);
    }

    /// The last takeover's duration (elected → primary on every switch).
    pub fn set_ha_takeover(&self, seconds: f64) {
        self.lock().set(HA_TAKEOVER, Vec::new(), seconds);
    }

    /// The OpenMetrics text exposition, ending with `# EOF`.
    pub fn encode(&self) -> String {
        self.lock().encode()
    }

    /// Every sample name a scrape can show (`_total`, `_bucket`, … included);
    /// the dashboard test checks its queries against this list.
    pub fn sample_names() -> Vec<String> {
        SPECS.iter().flat_map(Spec::sample_names).collect()
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
pub(crate) mod tests;
