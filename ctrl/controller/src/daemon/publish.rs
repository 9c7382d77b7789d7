//! The state task's output side: a decision's plans go to the agents
//! (staged so downstream steer entries are acknowledged before upstream
//! ones are sent), and the status documents and group metrics are
//! published for the API.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use metaroce_pipeline::{Entry, Key};
use tokio::time::Instant;

use super::State;
use crate::agent::{Desired, Goal, Wanted};
use crate::core::Core;
use crate::obs::{LazyJson, Snapshot};
use crate::plan::SwitchPlan;
use crate::status;

impl State {
    /// Decides, publishes the plans that changed, logs and counts; returns
    /// what the placement did, if it decided.
    pub(super) async fn decide_and_publish(&mut self, force_status: bool) -> Option<serde_json::Value> {
        self.decide_with(force_status, Core::decide_plans).await
    }

    /// Like [`State::decide_and_publish`], for an input only the placement
    /// reads (a job, a new large flow): the placement decides alone and
    /// only the switches it touched are re-planned
    /// ([`Core::decide_placement`]), so their steer entries go out without
    /// waiting for a policy decision that nothing asked for.
    pub(super) async fn decide_placement_and_publish(
        &mut self,
        force_status: bool,
    ) -> Option<serde_json::Value> {
        self.decide_with(force_status, Core::decide_placement).await
    }

    /// After inputs that are not ticks: the decision the core's rule asks
    /// for ([`Core::decide_due`]), if any.
    pub(super) async fn decide_due_and_publish(&mut self, force_status: bool) -> Option<serde_json::Value> {
        if self.core.due(self.now_ns(), false) == crate::core::Due::None {
            return None;
        }
        self.decide_with(force_status, |core, now| core.decide_due(now, false)).await
    }

    pub(super) async fn decide_with(
        &mut self,
        force_status: bool,
        decide: fn(&mut Core, u64) -> crate::core::Step,
    ) -> Option<serde_json::Value> {
        let started = std::time::Instant::now();
        let now = self.now_ns();
        let mut step = decide(&mut self.core, now);
        let deciding = started.elapsed();
        self.decisions += 1;
        let mut caused = self.obs.reactions.causes(step.decision.as_ref(), self.core.view(), Instant::now());
        if let Some(p) = &step.placement {
            self.obs.reactions.placement_causes(p.touched.iter().copied(), Instant::now(), &mut caused);
        }
        let published = !step.plans.is_empty();
        // The targets replaced (the agents are done with them): freed after
        // the new ones are out.
        let mut replaced = Vec::with_capacity(step.plans.len());
        for (s, plan) in std::mem::take(&mut step.plans) {
            let cause = self.obs.reactions.carry(s, caused.get(&s).copied());
            replaced.push(self.send_plan(s, plan, cause));
        }
        if published {
            // The agents just woken are queued behind the state task on
            // this worker thread: let them start their passes (and the
            // switches their writes) before the notes are built and logged.
            tokio::task::yield_now().await;
        }
        let noting = std::time::Instant::now();
        self.core.conclude(&mut step);
        let notes = std::mem::take(&mut step.notes);
        let placed = step.placement.as_ref().map(|p| self.placement_metrics(p));
        self.obs.metrics.observe_decision((deciding + noting.elapsed()).as_secs_f64());
        if published || !notes.is_empty() {
            self.publish.dirty_status = true;
        }
        self.log(notes);
        drop(replaced);
        self.maybe_publish(force_status);
        placed
    }

    /// Publishes switch `s`'s plan, less the steer entries whose downstream
    /// entries its neighbours have not acknowledged yet; those follow from
    /// [`State::restage`] once they have. A dry run writes nothing, so it
    /// waits for nothing.
    pub(super) fn send_plan(
        &mut self,
        s: usize,
        plan: SwitchPlan,
        cause: Option<crate::agent::Cause>,
    ) -> Desired {
        let gated = if self.fleet.dry_run || plan.steer.is_empty() {
            None
        } else {
            let switches = &self.fleet.switches;
            crate::stage::gate(s, &plan, |d, f| {
                switches.get(d).and_then(|st| crate::plan::steer_port(&st.installed, f))
            })
        };
        let sent = match gated {
            Some(now) => {
                self.fleet.staged.insert(s, (plan, cause));
                now
            }
            None => {
                self.fleet.staged.remove(&s);
                plan
            }
        };
        let wanted = Wanted { target: Goal::Plan(sent), caused_at: cause };
        self.fleet.desired_tx[s].send_replace(Some(Arc::new(wanted)))
    }

    /// A switch acknowledged writes: the staged plans whose entries it was
    /// the downstream of go out (or as much of them as is ready).
    pub(super) fn restage(&mut self) {
        if self.fleet.staged.is_empty() {
            return;
        }
        let staged: Vec<usize> = self.fleet.staged.keys().copied().collect();
        for s in staged {
            let Some((plan, cause)) = self.fleet.staged.get(&s).cloned() else { continue };
            let switches = &self.fleet.switches;
            let gated = crate::stage::gate(s, &plan, |d, f| {
                switches.get(d).and_then(|st| crate::plan::steer_port(&st.installed, f))
            });
            let held = gated.is_some();
            let sent = gated.unwrap_or(plan);
            let unchanged = matches!(self.fleet.desired_tx[s].borrow().as_deref(),
                Some(Wanted { target: Goal::Plan(p), .. }) if *p == sent);
            if !held {
                self.fleet.staged.remove(&s);
            }
            if unchanged {
                continue;
            }
            let wanted = Wanted { target: Goal::Plan(sent), caused_at: cause };
            drop(self.fleet.desired_tx[s].send_replace(Some(Arc::new(wanted))));
        }
    }

    /// When the state task ticks next, the last tick having been at
    /// `last`: one `tick` after it while a tick may change something (a
    /// hot or derated port, held-back changes, a placement, switch or
    /// drain-pair timer within reach, a takeover to see through), so that
    /// timers fire as they did with a fixed tick; otherwise at the next
    /// timer or status publication, whichever comes first. An idle
    /// controller thus wakes about once a second, not 200 times. Inputs
    /// wake the task on their own; each round re-reads this, so a digest
    /// that heats a port brings the regular tick back at once.
    pub(super) fn next_tick(&self, last: Instant, tick: Duration) -> Instant {
        let regular = last + tick;
        if self.ha.taking_over() || self.core.wants_decision() {
            return regular;
        }
        let now = Instant::now();
        let now_ns = self.now_ns();
        let timer =
            self.core.next_timer(now_ns).map(|t| now + Duration::from_nanos(t.saturating_sub(now_ns)));
        let publish = self.publish_due_at().unwrap_or(now);
        timer.map_or(publish, |t| t.min(publish)).max(regular)
    }

    /// When [`State::maybe_publish`] publishes without being forced: 500 ms
    /// after the last publication if something changed, else a second
    /// after it. None: never published yet (due now).
    fn publish_due_at(&self) -> Option<Instant> {
        let wait =
            if self.publish.dirty_status { Duration::from_millis(500) } else { Duration::from_secs(1) };
        self.publish.last_publish.map(|t| t + wait)
    }

    /// Status JSON and group metrics cover the whole fabric: refresh them
    /// at most every 500 ms (a change shows within that) and at least every
    /// second, or at once when forced, so a storm costs decisions, not JSON.
    /// A forced publication that is not due otherwise (a job registered, a
    /// mode set) refreshes the status only: the group metrics follow with
    /// the next regular one (or this one, if they waited a second), so that
    /// their refresh, on a thread of its own, does not compete for the CPU
    /// with the agents writing the change.
    pub(super) fn maybe_publish(&mut self, force_status: bool) {
        let due = self.publish.last_publish.is_none_or(|t| t.elapsed() >= Duration::from_millis(500));
        let regular = (due && self.publish.dirty_status)
            || self.publish.last_publish.is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if force_status || regular {
            let stale = self.publish.last_refresh.is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
            self.publish(regular || stale);
            self.publish.dirty_status = false;
        }
    }

    pub(super) fn publish(&mut self, refresh_metrics: bool) {
        self.publish.last_publish = Some(Instant::now());
        // Cheap copies here. The fabric-wide documents are built when the
        // API is first asked for them, off the state task; group metrics
        // (the scrape must see them) on a blocking thread, one at a time.
        let key = status::StatusKey::of(&self.core, &self.fleet.switches, self.decisions, self.ha.status());
        let status = match self.publish.status.take() {
            Some((was, status)) if was == key => status,
            _ => Arc::new(status::status(self.core.topology(), &key)),
        };
        self.publish.status = Some((key, status.clone()));
        let names = self.publish.names.clone();
        let installed: Arc<Vec<Arc<BTreeMap<Key, Entry>>>> =
            Arc::new(self.fleet.switches.iter().map(|s| s.installed.clone()).collect());
        let (view_version, policy_version) = self.core.versions();
        let recs = match self.publish.recommended.take() {
            Some((v, recs)) if v == policy_version => recs,
            _ => Arc::new(self.core.recommended()),
        };
        self.publish.recommended = Some((policy_version, recs.clone()));
        let (mode, pinned) = (self.core.mode(), self.core.pinned());
        let summary = match self.publish.summary.take() {
            Some((v, summary)) if v == view_version => summary,
            _ => Arc::new(self.core.view().summary(8)),
        };
        self.publish.summary = Some((view_version, summary.clone()));
        let hosts = self.hosts.status();
        let jobs = self.core.jobs_doc();
        let flows = self.core.placement_mut().view();
        let topo = self.topo.clone();
        let snap = Snapshot {
            status,
            topology: self.publish.topology_json.clone(),
            congestion: LazyJson::later({
                let names = names.clone();
                move || status::congestion(&summary, &names, hosts)
            }),
            groups: LazyJson::later({
                let (names, installed) = (names.clone(), installed.clone());
                move || status::groups(&names, &installed)
            }),
            recommendations: LazyJson::later({
                let names = names.clone();
                move || status::recommendations(&names, &recs, mode, pinned)
            }),
            jobs: LazyJson::later(move || (*jobs).clone()),
            flows: LazyJson::later(move || flows.to_json(&topo, mode, pinned)),
        };
        let old = self.publish.snap_tx.send_replace(Arc::new(snap));
        if !refresh_metrics
            || self.publish.metrics_dirty.is_empty()
            || self.publish.publishing.swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            // Nothing to refresh, or a refresh still runs: the switches
            // stay marked for the next publication.
            tokio::task::spawn_blocking(move || drop(old));
            return;
        }
        self.publish.last_refresh = Some(Instant::now());
        // Each switch's metrics move from what they show (the state of the
        // last refresh, which has finished: refreshes run one at a time).
        let work: Vec<_> = std::mem::take(&mut self.publish.metrics_dirty)
            .into_iter()
            .filter_map(|s| {
                let now = installed.get(s)?.clone();
                let before = self.publish.metrics_shown.get_mut(s)?.replace(now.clone());
                Some((s, before, now))
            })
            .collect();
        let metrics = self.obs.metrics.clone();
        let busy = self.publish.publishing.clone();
        tokio::task::spawn_blocking(move || {
            drop(old);
            for (s, before, now) in work {
                status::update_group_metrics(&metrics, &names[s], before.as_deref(), &now);
            }
            busy.store(false, std::sync::atomic::Ordering::Release);
        });
    }
}
