//! The state task's side of the job API: register or remove a job (the
//! input is recorded, so a replay sees it), place at once, answer the API
//! with what the placement did; and the placement's metrics.

use serde_json::{json, Value};
use tokio::time::Instant;

use super::State;
use crate::core::Input;
use crate::obs::{JobReply, Refusal};
use crate::place::PlaceStep;

impl State {
    /// Registers a job and places its flows before answering: by the time
    /// the scheduler hears 201, the steer entries are published to the
    /// switches' agents (in `act`), ahead of the job's traffic.
    pub(super) async fn on_register_job(&mut self, body: Value, received: Instant, reply: JobReply) {
        let now = self.now_ns();
        self.record(now, &Input::JobRegister { body: body.clone() });
        match self.core.register_job(now, &body) {
            Err(e) => {
                let shown = body.get("name").and_then(Value::as_str).unwrap_or("").chars().take(64);
                let name: String = shown.collect();
                self.events.record(
                    "job_refused",
                    None,
                    &format!("job {name:?} refused: {} problem(s)", e.problems.len()),
                    json!({"job": name, "problems": e.problems}),
                );
                let body = crate::obs::job_problems_body(&e.problems);
                let _ = reply.send(Err(Refusal { status: 400, body }));
            }
            Ok(summary) => {
                let name = summary["name"].as_str().unwrap_or_default().to_string();
                let flows = summary["flows"].as_u64().unwrap_or(0);
                self.events.record(
                    "job_registered",
                    None,
                    &format!("job {name} registered with {flows} flows"),
                    summary.clone(),
                );
                self.metrics.set_jobs(self.core.placement().jobs().len());
                self.reactions.placement_due(received, Instant::now());
                let placement = self.decide_and_publish(true).await;
                let _ = reply.send(Ok(json!({"ok": true, "job": summary, "placement": placement})));
            }
        }
    }

    /// Removes a job; its flows leave the planner and the decision run at
    /// once removes their steer entries.
    pub(super) async fn on_remove_job(&mut self, name: String, received: Instant, reply: JobReply) {
        let now = self.now_ns();
        self.record(now, &Input::JobRemove { name: name.clone() });
        match self.core.remove_job(&name) {
            None => {
                let body = json!({"error": format!("no job named {name:?}; GET /api/v1/jobs lists them")});
                let _ = reply.send(Err(Refusal { status: 404, body }));
            }
            Some(summary) => {
                self.events.record("job_removed", None, &format!("job {name} removed"), summary.clone());
                self.metrics.set_jobs(self.core.placement().jobs().len());
                self.reactions.placement_due(received, Instant::now());
                let placement = self.decide_and_publish(true).await;
                let _ = reply.send(Ok(json!({"ok": true, "removed": summary, "placement": placement})));
            }
        }
    }

    /// Counts a placement decision; returns its summary for the API.
    pub(super) fn placement_metrics(&self, p: &PlaceStep) -> Value {
        let mut by_reason: std::collections::BTreeMap<&str, u64> = Default::default();
        for m in &p.moves {
            *by_reason.entry(m.reason.as_str()).or_default() += 1;
        }
        for (reason, n) in &by_reason {
            self.metrics.flow_moves(reason, *n);
        }
        self.metrics.set_placement(p.steered, p.flows, p.max_utilisation, p.observed_max_utilisation);
        self.metrics.observe_placement(p.plan_seconds);
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
