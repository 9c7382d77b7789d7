//! One reconcile pass of a switch's agent: the difference between the
//! desired state and what the switch holds, written batch by batch in
//! phase order. A batch the switch refuses in part is applied for the
//! rest: each refused entry is recorded ([`super::refused`]) and held
//! back, and the pass goes on. A batch that fails as a whole (no
//! connection, not primary) or shows the agent's view is stale ends the
//! pass: the switch is read again and the pass retried with backoff.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::{SessionError, WriteFailure};
use metaroce_pipeline::{Entry, Key};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::refused::{self, Refused};
use super::{AgentError, AgentEvent, Desired, Goal, Live, SyncOutcome};
use crate::reconcile::{self, Change};

/// Updates per Write (the switch answers each with per-update errors).
const BATCH: usize = 1000;

/// What the writes of a pass did.
#[derive(Default)]
struct Written {
    error: Option<String>,
    refused: Vec<Refused>,
    sent_at: Option<Instant>,
    moved_at: Option<Instant>,
    /// The batches the switch took whole, not yet applied to the
    /// installed state (see [`Live::settle`]).
    whole: Vec<usize>,
}

impl Live<'_> {
    /// One reconcile pass: write the difference in phase order; refused
    /// entries are held back, a failed batch ends the pass and it is
    /// retried later with backoff. With `defer_deletes`, deletes that
    /// follow writes wait for `cleanup_delay`.
    pub(super) async fn sync(&mut self, desired: &Desired, defer_deletes: bool) {
        let Some(wanted) = desired else { return };
        if !self.term.writes {
            return;
        }
        let started_at = Instant::now();
        let desired = match &wanted.target {
            Goal::Plan(p) => match self.assigned.desired(p, &self.installed) {
                Ok(d) => d,
                Err(e) => return warn!(error = %e, "desired state cannot be installed"),
            },
            Goal::Exact(m) => {
                self.assigned.forget();
                Arc::new(m.clone())
            }
        };
        let mut desired = self.keep_steer(desired);
        self.refusals.hold_back(&mut desired, &self.installed, started_at);
        let mut batches = reconcile::diff(&desired, &self.installed);
        // Deletes wait while traffic-moving writes go (see `cleanup_delay`),
        // unless they are all there is to do.
        let moves = batches.iter().take_while(|b| b.iter().any(|c| !matches!(c, Change::Delete(_)))).count();
        let mut whole_diff = true;
        if defer_deletes && moves > 0 && moves < batches.len() && !self.cfg.cleanup_delay.is_zero() {
            whole_diff = false;
            batches.truncate(moves);
            self.cleanup_at.get_or_insert(started_at + self.cfg.cleanup_delay);
        } else if moves < batches.len() {
            self.cleanup_at = None;
        }
        if batches.is_empty() {
            if let Some(cause) = wanted.caused_at {
                let _ = self.events.send(AgentEvent::Settled { switch: self.cfg.switch, cause }).await;
            }
            self.announce(0).await;
            return;
        }
        let (inserts, modifies, deletes) = reconcile::counts(&batches);
        let started = Instant::now();
        let mut written = if self.cfg.dry_run {
            for c in batches.iter().flatten() {
                info!(change = ?c, "dry run: would write");
            }
            Written::default()
        } else {
            self.write_all(&batches).await
        };
        self.settle(&desired, &batches, std::mem::take(&mut written.whole), whole_diff);
        let write_time = started.elapsed();
        match &written.error {
            None => {
                self.backoff = self.cfg.retry_initial;
                debug!(
                    inserts,
                    modifies,
                    deletes,
                    refused = written.refused.len(),
                    ?write_time,
                    "switch in sync"
                );
            }
            Some(e) => {
                warn!(error = %e, retry_in = ?self.backoff, "write failed; will re-read and retry");
                self.retry_at = Some(Instant::now() + self.backoff);
                self.backoff = (self.backoff * 2).min(self.cfg.retry_max);
            }
        }
        if written.refused.iter().any(|r| r.code == tonic::Code::ResourceExhausted)
            && self.cleanup_at.is_some()
        {
            // A table is full: the deletes that make room go now.
            self.cleanup_at = Some(Instant::now());
        }
        let held_back = self.refusals.len();
        let outcome = SyncOutcome {
            inserts,
            modifies,
            deletes,
            batches: batches.len(),
            write_time,
            error: written.error,
            held_summary: (!written.refused.is_empty()).then(|| self.refusals.summary(8)),
            refused: written.refused,
            held_back,
            caused_at: wanted.caused_at,
            started_at,
            sent_at: written.sent_at,
            moved_at: written.moved_at,
        };
        let ok = outcome.error.is_none();
        if ok && !Arc::ptr_eq(&self.installed, &desired) && *self.installed == *desired {
            // The switch holds exactly the desired state: keep one map for
            // both (with the agent's assignment, when the plan has no steer
            // entries), not a copy built write by write. A fabric's switches
            // hold thousands of routes and group members each.
            self.installed = desired;
        }
        let installed = self.installed.clone();
        let _ = self.events.send(AgentEvent::Synced { switch: self.cfg.switch, outcome, installed }).await;
        if ok {
            // Programmed: everything it took, with the refused held back.
            self.announce(inserts + modifies + deletes).await;
        }
    }

    /// Applies the batches the switch took whole to the installed state.
    /// When that is every batch of the whole difference, the switch now
    /// holds exactly `desired` (but for defaults of keyless tables, which
    /// are never deleted, so one `desired` leaves out stays): the agent
    /// then keeps `desired` itself as its view, instead of applying a
    /// fabric's worth of entries one by one and comparing the two maps.
    fn settle(
        &mut self,
        desired: &Arc<BTreeMap<Key, Entry>>,
        batches: &[Vec<Change>],
        whole: Vec<usize>,
        whole_diff: bool,
    ) {
        if !self.refusals.is_empty() {
            for c in whole.iter().filter_map(|&i| batches.get(i)).flatten() {
                self.refusals.accepted(&c.entry().key());
            }
        }
        let stray_default =
            || Key::DEFAULTS.iter().any(|k| self.installed.contains_key(k) && !desired.contains_key(k));
        if whole_diff && whole.len() == batches.len() && !stray_default() {
            self.installed = desired.clone();
            return;
        }
        if whole.is_empty() {
            // Nothing taken (a dry run, a first batch that failed): the
            // view is shared with the state task; copy it for nothing.
            return;
        }
        let installed = Arc::make_mut(&mut self.installed);
        for &i in &whole {
            if let Some(batch) = batches.get(i) {
                reconcile::apply(installed, batch);
            }
        }
    }

    /// Writes the batches in order; see the module doc for what ends it.
    async fn write_all(&mut self, batches: &[Vec<Change>]) -> Written {
        let mut w = Written::default();
        for (i, batch) in batches.iter().enumerate() {
            w.sent_at.get_or_insert_with(Instant::now);
            let failed = match self.write(batch).await {
                Ok(()) => None,
                Err(AgentError::Session(SessionError::Write { failure, .. })) => Some(failure),
                Err(e) => {
                    w.error = Some(format!("{}: {e}", super::Failure::of(&e).as_str()));
                    break;
                }
            };
            let stale = match failed {
                None => {
                    w.whole.push(i);
                    0
                }
                Some(failure) => self.took(batch, &failure, &mut w),
            };
            if batch.iter().any(|c| !matches!(c, Change::Delete(_))) {
                w.moved_at = Some(Instant::now());
            }
            if stale > 0 {
                w.error = Some(format!(
                    "write: {stale} entries were not as the controller believed (already there, or gone); re-reading the switch"
                ));
                break;
            }
        }
        w
    }

    /// Applies what the switch took of a batch it refused in part, records
    /// what it refused; returns how many failed because the agent's view
    /// is stale.
    fn took(&mut self, batch: &[Change], failure: &WriteFailure, w: &mut Written) -> usize {
        let failed: BTreeSet<usize> = failure.failed_indexes().into_iter().collect();
        let now = Instant::now();
        let mut stale = 0;
        for (i, c) in batch.iter().enumerate() {
            if !failed.contains(&i) {
                reconcile::apply(Arc::make_mut(&mut self.installed), std::slice::from_ref(c));
                self.refusals.accepted(&c.entry().key());
            }
        }
        for f in &failure.failures {
            let Some(c) = batch.get(f.index) else { continue };
            if refused::stale(f.code) {
                stale += 1;
            } else {
                w.refused.push(self.refusals.refused(c, f.code, &f.message, now));
            }
        }
        if !w.refused.is_empty() {
            let first = &w.refused[0];
            warn!(refused = w.refused.len(), code = ?first.code, message = %first.message, "the switch refused entries; held back, the rest is written");
        }
        stale
    }

    async fn write(&self, batch: &[Change]) -> Result<(), AgentError> {
        let updates = batch
            .iter()
            .map(|c| {
                let kind = match c {
                    Change::Insert(_) => p4::update::Type::Insert,
                    Change::Modify(_) => p4::update::Type::Modify,
                    Change::Delete(_) => p4::update::Type::Delete,
                };
                self.pipeline.update(kind, c.entry())
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.session.write_batched(updates, BATCH).await?;
        Ok(())
    }
}
