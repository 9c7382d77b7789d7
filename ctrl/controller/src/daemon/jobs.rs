//! The state task's side of the job API: register or remove a job (the
//! input is recorded, so a replay sees it), place at once, answer the API
//! with what the placement did; and the placement's metrics. Under an
//! election, the leader keeps its jobs in etcd ([`crate::ha::jobs`]) and a
//! new leader registers them again.

use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{info, warn};

use super::State;
use crate::core::Input;
use crate::ha::jobs::{Op, Restored};
use crate::ha::HaState;
use crate::obs::{Claim, JobReply, Refusal};
use crate::place::PlaceStep;

/// The next jobs read back from etcd; never ready without an election.
pub(super) async fn restored(rx: &mut Option<mpsc::Receiver<Restored>>) -> Restored {
    match rx.as_mut() {
        Some(rx) => match rx.recv().await {
            Some(r) => r,
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

impl State {
    /// Registers a job and places its flows before answering: by the time
    /// the scheduler hears 201, the steer entries are published to the
    /// switches' agents (in `act`), ahead of the job's traffic.
    pub(super) async fn on_register_job(
        &mut self,
        body: Value,
        received: Instant,
        claim: Claim,
        reply: JobReply,
    ) {
        if !claimed(claim, "register") {
            return;
        }
        let now = self.now_ns();
        // Refused for want of room: nothing reaches the core, so nothing
        // is recorded either (a replay has no tables to check against).
        if let Some(refusal) = self.admit(now, &body) {
            let _ = reply.send(Err(refusal));
            return;
        }
        self.record(now, &Input::JobRegister { body: body.clone() });
        match self.core.register_job(now, &body) {
            Err(e) => {
                let shown = body.get("name").and_then(Value::as_str).unwrap_or("").chars().take(64);
                let name: String = shown.collect();
                self.obs.events.record(
                    "job_refused",
                    None,
                    &format!("job {name:?} refused: {} problem(s)", e.problems.len()),
                    json!({"job": name, "problems": e.problems}),
                );
                let body = crate::obs::job_problems_body(&e.problems);
                // A name already registered conflicts with the state (409);
                // anything else is a bad body (400). Both list every problem.
                let taken = self.core.placement().jobs().get(&name).is_some();
                let _ = reply.send(Err(Refusal { status: if taken { 409 } else { 400 }, body }));
            }
            Ok(summary) => {
                let name = summary["name"].as_str().unwrap_or_default().to_string();
                let flows = summary["flows"].as_u64().unwrap_or(0);
                self.obs.events.record(
                    "job_registered",
                    None,
                    &format!("job {name} registered with {flows} flows"),
                    summary.clone(),
                );
                self.obs.metrics.set_jobs(self.core.placement().jobs().len());
                self.obs.reactions.placement_due(received, Instant::now());
                let placement = self.decide_placement_and_publish(true).await;
                // A periodic job's recommended start offset, from the phase
                // plan the decision made (null for other jobs).
                let timing = self.core.placement().job_timing(&name);
                let answer =
                    json!({"ok": true, "job": summary, "placement": placement, "recommendation": timing});
                self.keep_job(Keep::Put { name, body }, answer, reply);
            }
        }
    }

    /// Places the job on a trial copy and checks every switch's steer
    /// tables ([`crate::admission`]): the 400 to answer if they cannot
    /// hold it. A body with problems passes here (the registration names
    /// them).
    fn admit(&self, now: u64, body: &Value) -> Option<Refusal> {
        let (core, topo) = (&self.core, self.core.topology());
        let installed: Vec<_> = self.fleet.switches.iter().map(|s| s.installed.clone()).collect();
        if let Some(bound) = crate::admission::flows_bound(body) {
            let steer = (0..topo.switches.len()).map(|s| core.placement().steer(s).len());
            if crate::admission::surely_fits(&self.fleet.steer_tables, bound, steer, &installed) {
                return None;
            }
        }
        let trial = core.placement().trial(now, topo, core.routing(), body).ok()?;
        let short = crate::admission::check(
            &self.fleet.steer_tables,
            &self.publish.names,
            &trial.keys,
            &trial.steer,
            &installed,
        );
        if short.is_empty() {
            return None;
        }
        let name: String = body.get("name").and_then(Value::as_str).unwrap_or("").chars().take(64).collect();
        let refused = crate::admission::refusal_body(&name, &short);
        let reason = refused["error"].as_str().unwrap_or_default().to_owned();
        warn!(job = %name, tables = short.len(), "{reason}");
        self.obs.events.record("job_refused", None, &reason, json!({"job": name, "capacity": short}));
        Some(Refusal { status: 400, body: refused })
    }

    /// Removes a job; its flows leave the planner and the decision run at
    /// once removes their steer entries.
    ///
    /// An unknown job is answered 404 before it is taken on (a retry after
    /// a 202 finds it gone); a known one is removed at once after.
    pub(super) async fn on_remove_job(
        &mut self,
        name: String,
        received: Instant,
        claim: Claim,
        reply: JobReply,
    ) {
        if self.core.placement().jobs().get(&name).is_none() {
            let body = json!({"error": format!("no job named {name:?}; GET /api/v1/jobs lists them")});
            let _ = reply.send(Err(Refusal { status: 404, body }));
            return;
        }
        if !claimed(claim, "remove") {
            return;
        }
        let now = self.now_ns();
        self.record(now, &Input::JobRemove { name: name.clone() });
        match self.core.remove_job(&name) {
            None => {
                let body = json!({"error": format!("no job named {name:?}; GET /api/v1/jobs lists them")});
                let _ = reply.send(Err(Refusal { status: 404, body }));
            }
            Some(summary) => {
                self.obs.events.record("job_removed", None, &format!("job {name} removed"), summary.clone());
                self.obs.metrics.set_jobs(self.core.placement().jobs().len());
                self.obs.reactions.placement_due(received, Instant::now());
                let placement = self.decide_placement_and_publish(true).await;
                let answer = json!({"ok": true, "removed": summary, "placement": placement});
                self.keep_job(Keep::Delete { name }, answer, reply);
            }
        }
    }

    /// Answers the API, after keeping the change in etcd when there is an
    /// election (the answer then says whether it was kept).
    fn keep_job(&self, keep: Keep, answer: Value, reply: JobReply) {
        let (Some(ops), Some(fence)) = (&self.job_ops, self.ha.fence()) else {
            let _ = reply.send(Ok(answer));
            return;
        };
        let op = match keep {
            Keep::Put { name, body } => Op::Put { name, body, fence, answer, reply },
            Keep::Delete { name } => Op::Delete { name, fence, answer, reply },
        };
        // The job task is gone (shutting down): answer without it.
        if let Err(mpsc::error::SendError(Op::Put { answer, reply, .. } | Op::Delete { answer, reply, .. })) =
            ops.send(op)
        {
            let _ = reply.send(Ok(answer));
        }
    }

    /// Follows the election; on winning it, reads the jobs kept by the
    /// leaders before.
    pub(super) fn on_election(&mut self, st: HaState) {
        let before = self.ha.fence();
        self.ha.on_change(st, &self.obs.metrics, &self.obs.events);
        let Some(now) = self.ha.fence() else { return };
        if before.as_ref() == Some(&now) {
            return;
        }
        if let Some(ops) = &self.job_ops {
            info!(revision = now.revision, "elected: reading the jobs kept in etcd");
            let _ = ops.send(Op::Load { revision: now.revision });
        }
    }

    /// Registers the jobs a former leader kept, unless this controller
    /// lost the leadership meanwhile or already has a job of that name.
    pub(super) async fn on_restored(&mut self, r: Restored) {
        if self.ha.fence().map(|f| f.revision) != Some(r.revision) {
            info!(revision = r.revision, "jobs read back for a leadership since lost: ignored");
            return;
        }
        let jobs = match r.jobs {
            Ok(jobs) => jobs,
            Err(e) => {
                warn!(error = %e, "cannot read the jobs kept in etcd: running without them until they are posted again");
                self.obs.events.record(
                    "jobs_restore_failed",
                    None,
                    &format!("jobs kept in etcd not read: {e}"),
                    json!({"error": e.to_string()}),
                );
                return;
            }
        };
        let (mut restored, mut refused, mut present) = (vec![], vec![], vec![]);
        for (name, body) in jobs {
            if self.core.placement().jobs().get(&name).is_some() {
                present.push(name);
                continue;
            }
            let body = match body {
                Ok(b) => b,
                Err(e) => {
                    refused.push(json!({"job": name, "error": e.to_string()}));
                    continue;
                }
            };
            let now = self.now_ns();
            self.record(now, &Input::JobRegister { body: body.clone() });
            match self.core.register_job(now, &body) {
                Ok(_) => restored.push(name),
                Err(e) => refused.push(json!({"job": name, "problems": e.problems})),
            }
        }
        info!(
            restored = restored.len(),
            refused = refused.len(),
            already = present.len(),
            "jobs kept in etcd registered again"
        );
        self.obs.events.record(
            "jobs_restored",
            None,
            &format!("{} job(s) kept by the former leader registered again", restored.len()),
            json!({"restored": restored, "refused": refused, "already_registered": present}),
        );
        if !restored.is_empty() {
            self.obs.metrics.set_jobs(self.core.placement().jobs().len());
            self.decide_and_publish(true).await;
        }
    }

    /// Counts a placement decision; returns its summary for the API.
    pub(super) fn placement_metrics(&self, p: &PlaceStep) -> Value {
        let mut by_reason: std::collections::BTreeMap<&str, u64> = Default::default();
        for m in &p.moves {
            *by_reason.entry(m.reason.as_str()).or_default() += 1;
        }
        for (reason, n) in &by_reason {
            self.obs.metrics.flow_moves(reason, *n);
        }
        self.obs.metrics.set_placement(p.steered, p.flows, p.max_utilisation, p.observed_max_utilisation);
        self.obs.metrics.set_placement_failures(p.unplaced.len(), p.refused.len());
        self.obs.metrics.observe_placement(p.plan_seconds);
        json!({
            "moves": by_reason,
            "unplaced": p.unplaced.len(),
            "refused": p.refused.len(),
            "flows": p.flows,
            "steered": p.steered,
            "planned_max_utilisation": p.max_utilisation,
            "lower_bound": p.lower_bound,
            "applied": self.core.mode().writes() && !self.core.pinned(),
        })
    }
}

/// Takes a command on; false when the API gave up waiting for it (it
/// answered 503 saying nothing changed, so nothing may change).
pub(super) fn claimed(claim: Claim, what: &'static str) -> bool {
    if claim.send(()).is_ok() {
        return true;
    }
    warn!(command = what, "API command dropped: the API stopped waiting before it was taken on");
    false
}

/// A change to keep in etcd.
enum Keep {
    Put { name: String, body: Value },
    Delete { name: String },
}
