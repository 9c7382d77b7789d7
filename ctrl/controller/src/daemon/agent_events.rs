//! The state task's handling of what the switch agents report: sessions
//! coming and going, digests and register reads (the sensing inputs, with
//! the reaction bookkeeping of ports they make hot), and finished passes.

use std::collections::BTreeMap;
use std::sync::Arc;

use metaroce_pipeline::{Entry, Key, LargeFlowDigest, QueueDigest};
use metaroce_telemetry::view::{PortRegisters, RegisterSnapshot, ThresholdCrossing};
use metaroce_telemetry::PortKey;
use serde_json::json;
use tokio::time::Instant;
use tracing::{info, warn};

use super::State;
use crate::agent::{AgentEvent, Failure, Recovered, SyncOutcome};
use crate::core::Input;
use crate::place::LargeFlowReport;
use metaroce_core::pair::{PairKind, PairReport};

impl State {
    pub(super) fn on_agent(&mut self, ev: AgentEvent) {
        match ev {
            AgentEvent::Up { switch, installed, recovered } => self.on_up(switch, installed, recovered),
            AgentEvent::Down { switch, kind, reason, attempts, opened } => {
                let name = self.name(switch);
                self.obs.metrics.set_switch_connected(&name, false);
                self.obs.metrics.set_switch_primary(&name, false);
                self.obs.metrics.session_failed(&name);
                let st = &mut self.fleet.switches[switch];
                st.connected = false;
                st.primary = false;
                st.programmed = false;
                st.last_error = Some(reason.clone());
                st.failed_attempts = attempts;
                let foreign = kind == Failure::Identity;
                let newly_foreign = foreign && !st.foreign;
                st.foreign = foreign;
                self.obs.metrics.set_switch_foreign(&name, foreign);
                // Refused for another fabric's cookie: said once, loudly,
                // whether or not the outage began with it.
                if newly_foreign {
                    tracing::error!(switch = %name, %reason, "switch refused: it does not belong to this fabric");
                    self.obs.events.record(
                        "switch_foreign",
                        Some(&name),
                        &reason,
                        json!({"failure": kind.as_str()}),
                    );
                }
                // One event per outage: its retries only count.
                if opened {
                    self.obs.events.record(
                        "switch_down",
                        Some(&name),
                        &reason,
                        json!({"failure": kind.as_str()}),
                    );
                    self.input(&Input::SwitchDown { switch });
                }
                self.publish.dirty_status = true;
            }
            AgentEvent::Primary { switch, primary } => {
                self.obs.metrics.set_switch_primary(&self.name(switch), primary);
                self.fleet.switches[switch].primary = primary;
            }
            AgentEvent::Digests { switch, digests, received } => self.on_digests(switch, digests, received),
            AgentEvent::Registers { switch, ports, ecn_marks, received, reason } => {
                self.obs.metrics.register_poll(&self.name(switch), reason.as_str());
                self.on_registers(switch, &ports, received);
                for (port, total) in ecn_marks.unwrap_or_default() {
                    self.show_ecn_marks(switch, port, total);
                }
            }
            AgentEvent::LargeFlows { switch, flows, received } => {
                self.on_large_flows(switch, &flows, received)
            }
            AgentEvent::DrainPairs { switch, reports } => self.on_drain_pairs(switch, &reports),
            AgentEvent::Report { switch, frame } => self.on_report(Some(switch), &frame, true),
            AgentEvent::Synced { switch, outcome, installed } => self.on_synced(switch, &outcome, installed),
            AgentEvent::Installed { switch, installed } => {
                self.fleet.switches[switch].installed = installed;
                self.publish.metrics_dirty.insert(switch);
                self.publish.dirty_status = true;
            }
            AgentEvent::Settled { switch, cause } => self.obs.reactions.settled(switch, cause),
            AgentEvent::Programmed { switch } => {
                self.fleet.switches[switch].programmed = true;
                self.announce_loop();
            }
        }
    }

    fn on_up(&mut self, switch: usize, installed: Arc<BTreeMap<Key, Entry>>, recovered: Option<Recovered>) {
        let name = self.name(switch);
        self.obs.metrics.set_switch_connected(&name, true);
        let st = &mut self.fleet.switches[switch];
        st.connected = true;
        st.installed = installed;
        st.last_error = None;
        st.failed_attempts = 0;
        st.foreign = false;
        self.obs.metrics.set_switch_foreign(&name, false);
        let mut details = json!({"installed_entries": st.installed.len()});
        let reason = match recovered {
            None => "connected, pipeline in place".to_owned(),
            Some(r) => {
                details["attempts"] = r.attempts.into();
                details["down_ms"] = (r.down_for.as_secs_f64() * 1e3).into();
                format!("back after {} failed attempt(s) in {:.1} s", r.attempts, r.down_for.as_secs_f64())
            }
        };
        self.obs.events.record("switch_up", Some(&name), &reason, details);
        self.input(&Input::SwitchUp { switch });
        // What it holds may be what a staged plan waits for.
        self.restage();
    }

    fn is_hot(&self, key: PortKey) -> bool {
        self.core.view().port_heat(key).is_some_and(|h| h.congested)
    }

    fn on_digests(&mut self, switch: usize, digests: Vec<QueueDigest>, received: Instant) {
        let name = self.name(switch);
        let node = self.core.topology().switches[switch].int_node_id;
        for d in digests {
            if d.switch_id != node || !self.core.topology_has_port(switch, d.port) {
                warn!(switch = %name, digest_switch_id = d.switch_id, port = d.port, "digest for another switch or an unknown port dropped");
                self.obs.events.record(
                    "input_rejected",
                    Some(&name),
                    "digest names another switch id or an unknown port",
                    json!({"switch_id": d.switch_id, "port": d.port}),
                );
                continue;
            }
            self.obs.metrics.digest_received(&name);
            self.show_queue_depth(switch, d.port, u64::from(d.depth));
            let c = ThresholdCrossing {
                switch,
                port: d.port,
                depth: d.depth,
                switch_ts: d.timestamp,
                seq: d.seq,
                congested: d.congested,
            };
            let key = PortKey { switch, port: d.port };
            let was_hot = self.is_hot(key);
            let lost_before = self.core.view().counters().digests.lost;
            self.input(&Input::Crossing(c));
            let lost = self.core.view().counters().digests.lost.saturating_sub(lost_before);
            if lost > 0 {
                self.obs.metrics.digests_lost(&name, lost);
            }
            // Reaction time runs from the digest that made the port hot,
            // not from later ones that only repeat it.
            if !was_hot && self.is_hot(key) {
                self.obs.reactions.port_hot(key, received, Instant::now());
            }
        }
    }

    /// Large-flow digests: each joins the placement's input. A digest that
    /// makes a decision due (a flow not seen before) is the cause of the
    /// steer writes it leads to.
    fn on_large_flows(&mut self, switch: usize, flows: &[LargeFlowDigest], received: Instant) {
        let name = self.name(switch);
        let node = self.core.topology().switches[switch].int_node_id;
        let unit_ns = self.core.settings().time_unit_ns();
        for d in flows {
            if d.switch_id != node || d.window_us == 0 {
                warn!(switch = %name, digest_switch_id = d.switch_id, window = d.window_us, "large-flow digest for another switch or with an empty window dropped");
                continue;
            }
            self.obs.metrics.large_flow_digest(&name);
            let report = LargeFlowReport {
                switch,
                src: d.flow.src,
                dst: d.flow.dst,
                sport: d.flow.sport,
                qp: d.flow.qp,
                egress_port: d.egress_port,
                bytes: u64::from(d.bytes),
                window_ns: u64::from(d.window_us).saturating_mul(unit_ns),
                collision: d.collision,
            };
            let was_due = self.core.placement().input_changed();
            self.input(&Input::LargeFlow(report));
            if !was_due && self.core.placement().input_changed() {
                self.obs.reactions.placement_due(received, Instant::now());
            }
        }
    }

    /// The drain rule's pairing digests: each goes to the core, which
    /// learns `qp_pair` from them.
    fn on_drain_pairs(&mut self, switch: usize, reports: &[metaroce_pipeline::DrainPairDigest]) {
        let unit_ns = self.core.settings().time_unit_ns();
        for d in reports {
            let kind = match d.kind {
                metaroce_pipeline::DrainPairKind::Data => PairKind::Data,
                metaroce_pipeline::DrainPairKind::Ack => PairKind::Ack,
            };
            let switch_ns = d.timestamp.saturating_mul(unit_ns);
            let report = PairReport { switch, src: d.src, dst: d.dst, qp: d.qp, psn: d.psn, switch_ns, kind };
            self.input(&Input::DrainPair(report));
        }
        let pairing = self.core.pairing();
        self.obs.metrics.set_drain_pairing(pairing.len(), &pairing.counters);
    }

    /// Per port: (max depth since the last read, congested).
    fn on_registers(&mut self, switch: usize, ports: &[(u16, u32, bool)], received: Instant) {
        for &(p, depth, _) in ports {
            self.show_queue_depth(switch, p, u64::from(depth));
        }
        let was_hot: Vec<bool> = ports.iter().map(|p| self.is_hot(PortKey { switch, port: p.0 })).collect();
        let regs = ports
            .iter()
            .map(|&(port, max_depth, congested)| PortRegisters { port, max_depth, congested })
            .collect();
        self.input(&Input::Snapshot(RegisterSnapshot { switch, ports: regs }));
        // A port that a register read finds hot first: the read is the cause.
        for (p, was) in ports.iter().zip(was_hot) {
            let key = PortKey { switch, port: p.0 };
            if !was && self.is_hot(key) {
                self.obs.reactions.port_hot(key, received, Instant::now());
            }
        }
    }

    /// Sets a port's queue-depth gauge, unless it already shows `depth`.
    fn show_queue_depth(&mut self, switch: usize, port: u16, depth: u64) {
        let shown = self.obs.shown.entry((switch, port)).or_default();
        if shown.depth.replace(depth) != Some(depth) {
            self.obs.metrics.set_queue_depth(&self.name(switch), port, depth);
        }
    }

    /// Sets a port's ECN-mark total (the switch's own counter), unless it
    /// already shows `total`.
    fn show_ecn_marks(&mut self, switch: usize, port: u16, total: u64) {
        let shown = self.obs.shown.entry((switch, port)).or_default();
        if shown.ecn_marks.replace(total) != Some(total) {
            self.obs.metrics.set_ecn_marks(&self.name(switch), port, total);
        }
    }

    fn on_synced(&mut self, switch: usize, outcome: &SyncOutcome, installed: Arc<BTreeMap<Key, Entry>>) {
        let name = self.name(switch);
        self.obs.metrics.observe_write(&name, outcome.write_time.as_secs_f64());
        let reaction = self.obs.reactions.on_synced(switch, outcome);
        if let Some(r) = &reaction {
            self.obs.metrics.observe_reaction(r.total().as_secs_f64());
        }
        let st = &mut self.fleet.switches[switch];
        st.installed = installed;
        st.syncs += 1;
        if let Some(summary) = &outcome.held_summary {
            st.refused = Some(summary.clone());
        }
        if outcome.held_back == 0 {
            st.refused = None;
        }
        st.refused_entries = outcome.held_back;
        st.last_error = outcome.error.clone().or_else(|| st.refused_error());
        self.obs.metrics.set_refused_entries(&name, outcome.held_back);
        if !outcome.refused.is_empty() {
            let first: Vec<_> = outcome.refused.iter().take(8).map(|r| r.to_json()).collect();
            let msg = format!(
                "{} entries refused by the switch; held back, the rest written",
                outcome.refused.len()
            );
            let details =
                json!({"refused": outcome.refused.len(), "held_back": outcome.held_back, "first": first});
            self.obs.events.record("entries_refused", Some(&name), &msg, details);
        }
        let details = json!({"inserts": outcome.inserts, "modifies": outcome.modifies, "deletes": outcome.deletes,
            "batches": outcome.batches, "write_ms": outcome.write_time.as_secs_f64() * 1e3, "error": outcome.error,
            "refused": outcome.refused.len(),
            "reaction_ms": reaction.map(|r| r.total().as_secs_f64() * 1e3),
            // When the pass began (unix µs): orders passes across switches.
            "started_unix_us": unix_us_of(outcome.started_at),
            // Cause in → first Write sent: the controller's own share.
            "controller_ms": reaction.and_then(|r| r.controller()).map(|d| d.as_secs_f64() * 1e3),
            "reaction_stages_ms": reaction.map(|r| r.stages_json()),
            // When the causing digest arrived (unix µs): groups the writes one digest caused.
            "cause_unix_us": reaction.map(|r| unix_us_of(r.cause.received))});
        let kind = if outcome.error.is_some() { "write_failed" } else { "write" };
        if outcome.error.is_some() {
            self.obs.metrics.write_failed(&name);
        }
        self.obs.events.record(kind, Some(&name), "reconciled to the desired state", details);
        self.publish.metrics_dirty.insert(switch);
        if outcome.error.is_none() {
            self.restage();
        }
    }

    /// One info line when every switch holds its desired state for the
    /// first time: from then on the loop is closed on the whole fabric.
    fn announce_loop(&mut self) {
        let all = self.fleet.switches.iter().all(|s| s.connected && s.programmed);
        if self.fleet.loop_announced || !all {
            return;
        }
        self.fleet.loop_announced = true;
        let mode = self.core.mode();
        info!(switches = self.fleet.switches.len(), %mode, "the control loop runs: every switch holds its desired state");
    }
}

/// The wall-clock time (unix µs) of a monotonic instant in the past.
fn unix_us_of(t: Instant) -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(now.saturating_sub(t.elapsed()).as_micros()).unwrap_or(u64::MAX)
}
