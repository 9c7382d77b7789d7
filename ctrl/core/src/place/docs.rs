//! What the placement shows: the documents of `GET /api/v1/flows` and
//! `GET /api/v1/jobs`, the last decision's summary, and the event-log
//! lines of its moves.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use metaroce_te::job::{self, JobRegistry};
use metaroce_te::{FlowKey, Move, Path};
use metaroce_topo::{SwitchId, Topology};
use serde_json::{json, Value};

use super::{PlaceStep, Placement};
use crate::note::{Note, NoteKind};

impl Placement {
    pub(super) fn last_json(&self, step: &PlaceStep, topo: &Topology) -> Value {
        let name = |s: SwitchId| topo.switches.get(s).map_or("?", |x| x.name.as_str());
        let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
        for m in &step.moves {
            *by_reason.entry(m.reason.as_str()).or_default() += 1;
        }
        let hottest = step
            .hottest
            .map(|h| json!({"switch": name(h.switch), "port": h.port, "utilisation": h.utilisation}));
        json!({
            "t_ns": step.t_ns,
            "moves": by_reason,
            "moves_listed": step.moves.iter().take(self.cfg.max_move_notes).map(|m| move_json(topo, &self.jobs, m)).collect::<Vec<_>>(),
            "unplaced": step.unplaced.iter().take(self.cfg.max_move_notes).map(|u| json!({"flow": u.flow, "why": u.why, "kept": u.kept.as_ref().map(|p| path_json(topo, p)), "broken": u.broken})).collect::<Vec<_>>(),
            "refused": step.refused,
            "planned_max_utilisation": step.max_utilisation,
            "observed_max_utilisation": step.observed_max_utilisation,
            "lower_bound": step.lower_bound,
            "hottest": hottest,
            "budget_hit": step.budget_hit,
            "exact": step.exact,
        })
    }

    /// What `GET /api/v1/flows` needs, as cheap copies: the placement (as
    /// of the last decision that moved a flow) and the last decision.
    pub fn view(&mut self) -> FlowsView {
        if self.placement_stale {
            self.placement = Arc::new(self.planner.placement());
            self.placement_stale = false;
        }
        let owners = self
            .placement
            .iter()
            .filter_map(|(k, _)| self.jobs.owner(k).map(|o| (*k, o.to_string())))
            .collect();
        let rates = self.placement.iter().filter_map(|(k, _)| Some((*k, self.planner.rate(k)?))).collect();
        let incasts =
            self.placement.iter().filter_map(|(k, _)| Some((*k, self.planner.incast(k)?))).collect();
        FlowsView {
            placement: self.placement.clone(),
            owners,
            rates,
            incasts,
            last: self.last.clone(),
            steered: self.steered(),
        }
    }

    /// The event-log lines of a decision (see [`crate::fabric::Core::placement_notes`]).
    pub fn notes(&self, topo: &Topology, p: &PlaceStep, applied: bool) -> Vec<Note> {
        let max = self.cfg.max_move_notes;
        let name = |s: SwitchId| topo.switches.get(s).map(|x| x.name.clone());
        let mut notes = Vec::new();
        for m in p.moves.iter().take(max) {
            let at = m.to.as_ref().or(m.from.as_ref()).and_then(|p| p.hops.first()).map(|h| h.switch);
            let mut details = move_json(topo, &self.jobs, m);
            details["applied"] = json!(applied);
            let reason = format!("{} {}", m.reason.as_str(), m.flow);
            notes.push(Note { kind: NoteKind::FlowMove, switch: at.and_then(name), reason, details });
        }
        if p.moves.len() > max {
            let reason = format!("{} more moves not listed", p.moves.len() - max);
            notes.push(Note {
                kind: NoteKind::FlowMoves,
                switch: None,
                reason,
                details: json!({"moves": p.moves.len()}),
            });
        }
        for u in p.unplaced.iter().take(max) {
            let details = json!({"flow": u.flow, "why": u.why, "kept": u.kept.as_ref().map(|k| path_json(topo, k)), "broken": u.broken});
            let reason = format!("no path for {}; previous placement kept: {}", u.flow, u.why);
            notes.push(Note { kind: NoteKind::FlowUnplaced, switch: None, reason, details });
        }
        notes.extend(p.phase.clone());
        for r in &p.refused {
            notes.push(Note {
                kind: NoteKind::SteerRefused,
                switch: None,
                reason: r.clone(),
                details: json!({}),
            });
        }
        notes
    }

    /// `GET /api/v1/jobs`: every job's summary, in name order.
    pub fn jobs_doc(&mut self, topo: &Topology) -> Arc<Value> {
        if self.jobs_doc.is_none() {
            self.jobs_doc = Some(Arc::new(self.build_jobs_doc(topo)));
        }
        self.jobs_doc.clone().unwrap_or_default()
    }

    fn build_jobs_doc(&self, topo: &Topology) -> Value {
        let list: Vec<Value> = self
            .jobs
            .list()
            .map(|j| {
                let mut v = job_summary(topo, j, self.meta.get(&j.name).map_or(0, |m| m.registered_ns));
                if let Some(t) = self.job_timing(&j.name) {
                    v["recommendation"] = t;
                }
                v
            })
            .collect();
        json!({"jobs": list, "flows": self.jobs.flow_count()})
    }
}

/// The placement as the flows endpoint shows it.
#[derive(Debug, Clone, Default)]
pub struct FlowsView {
    placement: Arc<Vec<(FlowKey, Path)>>,
    owners: HashMap<FlowKey, String>,
    rates: HashMap<FlowKey, u64>,
    /// The receiver of the incast a flow is confined with.
    incasts: HashMap<FlowKey, std::net::Ipv4Addr>,
    last: Arc<Value>,
    steered: usize,
}

impl FlowsView {
    /// The document of `GET /api/v1/flows`.
    pub fn to_json(&self, topo: &Topology, mode: crate::mode::Mode, pinned: bool) -> Value {
        let flows: Vec<Value> = self
            .placement
            .iter()
            .map(|(k, p)| {
                let incast = self.incasts.get(k).map(|ip| {
                    topo.hosts.iter().find(|h| h.ip == *ip).map_or_else(|| ip.to_string(), |h| h.name.clone())
                });
                json!({
                    "flow": k,
                    "job": self.owners.get(k),
                    "rate_bps": self.rates.get(k),
                    "incast": incast,
                    "path": path_json(topo, p),
                })
            })
            .collect();
        json!({
            "mode": mode.as_str(),
            "applied": mode.writes() && !pinned,
            "placed": flows.len(),
            "steered": self.steered,
            "flows": flows,
            "last_decision": *self.last,
        })
    }
}

/// A path as `[{"switch", "port", "next", "steered"}]`.
pub fn path_json(topo: &Topology, p: &Path) -> Value {
    let name = |s: SwitchId| topo.switches.get(s).map_or("?", |x| x.name.as_str());
    Value::Array(
        p.hops
            .iter()
            .map(|h| json!({"switch": name(h.switch), "port": h.port, "next": name(h.next), "steered": h.choice}))
            .collect(),
    )
}

/// One move for the event log and the API.
pub fn move_json(topo: &Topology, jobs: &JobRegistry, m: &Move) -> Value {
    json!({
        "flow": m.flow,
        "job": jobs.owner(&m.flow),
        "reason": m.reason.as_str(),
        "from": m.from.as_ref().map(|p| path_json(topo, p)),
        "to": m.to.as_ref().map(|p| path_json(topo, p)),
        "bottleneck_before": m.bottleneck_before,
        "bottleneck_after": m.bottleneck_after,
    })
}

/// A job as the API lists it (its flows counted, not listed).
pub(super) fn job_summary(topo: &Topology, job: &job::Job, registered_ns: u64) -> Value {
    let host = |h: usize| topo.hosts.get(h).map_or("?", |x| x.name.as_str());
    let bytes: BTreeSet<u64> = job.flows.iter().map(|f| f.bytes).collect();
    let pairs = job.flows.iter().filter(|f| matches!(f.key, FlowKey::Pair { .. })).count();
    json!({
        "name": job.name,
        "pattern": job.pattern.as_ref().map(|p| p.name()),
        "hosts": job.ranks.iter().map(|&h| host(h)).collect::<Vec<_>>(),
        "flows": job.flows.len(),
        "host_pair_flows": pairs,
        "bytes": if bytes.len() == 1 { bytes.first().copied() } else { None },
        "period_ms": job.period_ns.map(|p| p as f64 / 1e6),
        "compute_ms": job.timing.compute_ns.map(|p| p as f64 / 1e6),
        "offset": job.periodic().then_some(job.timing.offset.as_str()),
        "start_ms": job.periodic().then_some(job.timing.start_ns as f64 / 1e6),
        "registered_t_ns": registered_ns,
    })
}
