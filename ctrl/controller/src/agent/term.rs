//! An agent under an election ([`crate::ha`]): a standby holds a backup
//! session that reads; when elected it arbitrates again on the same
//! session with the leader's election id, becomes primary, reads back what
//! the switch holds and writes only the difference (the pipeline is pushed
//! only if the switch lost it). Demoted, it steps back to its standby id
//! and writes nothing; the switch keeps what it holds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use metaroce_p4rt::session::PipelineOutcome;
use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tracing::{debug, info};

use metaroce_pipeline::{Entry, Key};

use super::{read_installed, AgentConfig, AgentError, AgentEvent, Desired, Live};
use crate::ha::{HaState, Role, Term};

/// A standby reads the switch's entries back every this many register poll
/// intervals ([`Live::refresh_installed`]).
const REFRESH_EVERY: u32 = 10;

/// The term to open a session with.
pub(super) fn current(cfg: &AgentConfig, ha: Option<&mut watch::Receiver<HaState>>) -> Term {
    match ha {
        Some(rx) => rx.borrow_and_update().term,
        None => Term { election_id: cfg.session.election_id, writes: true },
    }
}

/// Whether an arbitration answer makes us the primary that writes: a
/// standby may be a switch's primary by rank (no one higher is connected),
/// but it writes nothing; and an answer for an id we held before is stale.
pub(super) fn ours(term: Term, primary: bool, election_id: Option<u128>) -> bool {
    primary && term.writes && election_id.is_none_or(|e| e == term.election_id)
}

/// A standby that finds no pipeline on a switch (no leader has programmed
/// it yet) holds nothing of ours there.
pub(super) fn read_or_empty(
    read: Result<BTreeMap<Key, Entry>, AgentError>,
    term: Term,
) -> Result<BTreeMap<Key, Entry>, AgentError> {
    match read {
        Err(AgentError::Session(e)) if !term.writes && e.code() == Some(tonic::Code::FailedPrecondition) => {
            Ok(BTreeMap::new())
        }
        other => other,
    }
}

/// Waits for a term other than `held`; never returns without an election.
pub(super) async fn changed(ha: Option<&mut watch::Receiver<HaState>>, held: Term) -> Term {
    let Some(rx) = ha else { return std::future::pending().await };
    loop {
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
        let t = rx.borrow_and_update().term;
        if t != held {
            return t;
        }
    }
}

/// Waits for a change of the instance's election (sharding only: see
/// [`AgentConfig::plans`]); never returns without one.
pub(super) async fn plans_changed(plans: Option<&mut watch::Receiver<HaState>>) {
    let Some(rx) = plans else { return std::future::pending().await };
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The standby's timer for [`Live::refresh_installed`]: first after
/// [`REFRESH_EVERY`] poll intervals, then every as many. Under sharding,
/// where the planner reads back the switches other instances own (its
/// status, its admission of jobs), every [`REFRESH_EVERY`] audits instead,
/// and soon after each new desired state ([`refresh_soon`]): the owner
/// writes only what the planner asked, so between those a read back finds
/// what the last one found.
pub(super) fn refresh_timer(cfg: &AgentConfig) -> Interval {
    let every = match cfg.forwarded_focus {
        Some(_) => cfg.audit_interval.max(cfg.poll_interval),
        None => cfg.poll_interval,
    }
    .saturating_mul(REFRESH_EVERY);
    let mut t = tokio::time::interval_at(Instant::now() + every, every);
    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    t
}

/// Under sharding, a new desired state for a switch this instance reads but
/// does not write: read it back once its owner has had the time to write
/// it (a poll interval), not only at the next slow refresh.
pub(super) fn refresh_soon(cfg: &AgentConfig, refresh: &mut Interval) {
    if cfg.forwarded_focus.is_some() {
        refresh.reset_after(cfg.poll_interval);
    }
}

/// The keys of the steer entries `installed` holds.
pub(super) fn steer_keys(installed: &BTreeMap<Key, Entry>) -> BTreeSet<Key> {
    installed.keys().filter(|k| matches!(k, Key::SteerFlow(_) | Key::SteerPair(..))).copied().collect()
}

/// `desired` with the `found` steer entries of `installed` whose next hop
/// it holds. The desired map is shared with the assignment (and, once
/// held, the installed state): it is copied only when an entry is kept,
/// not for every switch a new leader takes while nothing was found.
fn with_found_steer(
    mut desired: Arc<BTreeMap<Key, Entry>>,
    found: &BTreeSet<Key>,
    installed: &BTreeMap<Key, Entry>,
) -> Arc<BTreeMap<Key, Entry>> {
    let kept: Vec<(Key, Entry)> = found
        .iter()
        .filter(|k| !desired.contains_key(k))
        .filter_map(|k| {
            let e = installed.get(k)?;
            let (Entry::SteerFlow { nhop_id, .. } | Entry::SteerPair { nhop_id, .. }) = e else {
                return None;
            };
            desired.contains_key(&Key::Nhop(*nhop_id)).then(|| (*k, e.clone()))
        })
        .collect();
    if !kept.is_empty() {
        Arc::make_mut(&mut desired).extend(kept);
    }
    desired
}

/// Fires when the steer grace ends; never without one.
pub(super) async fn grace_end(until: Option<Instant>) {
    match until {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

impl Live<'_> {
    /// During the steer grace after a takeover: the steer entries the
    /// switch held when it began that `desired` lacks stay, as long as the
    /// next hop they point at does (never onto a failed link). A new
    /// leader has not seen the large-flow digests (they go to the primary
    /// only) nor the jobs announced to its predecessor; without this it
    /// would delete their entries at once, and write them again when it
    /// learns of the flows. An entry the plan has claimed since is the
    /// plan's: when the plan drops it (a flow ended or moved), it goes.
    pub(super) fn keep_steer(&mut self, desired: Arc<BTreeMap<Key, Entry>>) -> Arc<BTreeMap<Key, Entry>> {
        if self.steer_grace_until.is_none() {
            return desired;
        }
        self.steer_found.retain(|k| !desired.contains_key(k));
        with_found_steer(desired, &self.steer_found, &self.installed)
    }

    /// Whether this session reads the switch: as its writer, without
    /// sharding, or while this instance plans ([`AgentConfig::plans`]).
    pub(super) fn observes(&self) -> bool {
        self.term.writes || self.cfg.plans.as_ref().is_none_or(|p| p.borrow().role == Role::Leader)
    }

    /// The instance's election changed: a backup starts reading its
    /// switch when the instance comes to plan, and stops when it no longer
    /// does (its poll held the session alone, so stopping it is enough).
    pub(super) async fn on_plans(&mut self) {
        if self.term.writes {
            return;
        }
        match (self.observes(), self.poller.is_some()) {
            (true, false) => {
                debug!("this instance plans: reading the switch on its backup session");
                self.start_polling();
            }
            (false, true) => {
                if let Some(p) = self.poller.take() {
                    p.stop().await;
                }
                debug!("this instance no longer plans: the backup session reads nothing");
            }
            _ => {}
        }
    }

    /// A standby's periodic read of what the leader installed, so that its
    /// status and groups show the switch as it is.
    pub(super) async fn refresh_installed(&mut self) {
        let Ok(now) = read_or_empty(read_installed(&self.session, self.pipeline).await, self.term) else {
            return;
        };
        if now != *self.installed {
            self.assigned.forget();
            self.installed = Arc::new(now);
            let installed = self.installed.clone();
            let _ = self.events.send(AgentEvent::Installed { switch: self.cfg.switch, installed }).await;
        }
    }

    /// Takes a new term on the open session. An error ends the session;
    /// the agent then reconnects with the new term. The register poll
    /// stops meanwhile (the session's election id changes only while the
    /// agent alone holds it) and starts again with the new term, which
    /// says whether it resets registers.
    pub(super) async fn on_term(
        &mut self,
        t: Term,
        desired: &watch::Receiver<Desired>,
    ) -> Result<(), AgentError> {
        self.term = t;
        if let Some(poller) = self.poller.take() {
            poller.stop().await;
        }
        Arc::get_mut(&mut self.session).ok_or(AgentError::SessionShared)?.set_election_id(t.election_id)?;
        let switch = self.cfg.switch;
        if !t.writes {
            self.retry_at = None;
            self.cleanup_at = None;
            self.refusals.clear();
            self.steer_grace_until = None;
            self.steer_found.clear();
            let _ = self.events.send(AgentEvent::Primary { switch, primary: false }).await;
            info!(election_id = %t.election_id, "standing down: a backup on this switch, writing nothing");
            self.start_polling();
            return Ok(());
        }
        let started = Instant::now();
        self.session.wait_primary().await?;
        let primary_after = started.elapsed();
        let _ = self.events.send(AgentEvent::Primary { switch, primary: true }).await;
        if !self.cfg.dry_run {
            let p = self.pipeline;
            let outcome = self
                .session
                .set_pipeline(p.info(), p.device().as_ref(), Some(super::our_cookie(self.cfg, p)))
                .await?;
            self.session.configure_digest(p.digest_entry(self.cfg.digest)?).await?;
            self.session.configure_digest(p.large_flow_digest_entry(self.cfg.digest)?).await?;
            if let Some(entry) = p.drain_pair_digest_entry(self.cfg.digest) {
                self.session.configure_digest(entry?).await?;
            }
            self.program = match outcome {
                PipelineOutcome::Pushed => "pushed (the switch had lost it)",
                PipelineOutcome::AlreadyInstalled => "already running",
            };
            self.fresh_registers = outcome == PipelineOutcome::Pushed;
        }
        self.assigned.forget();
        self.refusals.clear();
        self.installed = Arc::new(read_installed(&self.session, self.pipeline).await?);
        self.programmed = false;
        self.steer_grace_until = Some(Instant::now() + self.cfg.steer_grace);
        self.steer_found = steer_keys(&self.installed);
        info!(election_id = %t.election_id, entries = self.installed.len(), primary_ms = primary_after.as_secs_f64() * 1e3,
            pipeline = self.program, "elected: primary on this switch; reconciling what it holds");
        let installed = self.installed.clone();
        let recovered = self.episode.up(Instant::now());
        let _ = self.events.send(AgentEvent::Up { switch, installed, recovered }).await;
        let d = desired.borrow().clone();
        self.sync(&d, true).await;
        self.start_polling();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_answer_for_the_id_we_lead_with_makes_us_the_writing_primary() {
        let leader = Term { election_id: 7 << 64, writes: true };
        let standby = Term { election_id: 5, writes: false };
        assert!(ours(leader, true, Some(7 << 64)));
        assert!(ours(leader, true, None));
        // The standing answer for the standby id we held before.
        assert!(!ours(leader, true, Some(5)));
        assert!(!ours(leader, false, Some(8 << 64)));
        // Primary by rank, but a standby writes nothing.
        assert!(!ours(standby, true, Some(5)));
    }

    #[test]
    fn found_steer_entries_stay_and_copy_the_desired_map_only_when_kept() {
        let nhop = Entry::Nhop { id: 4, port: 4, src_mac: [0; 6], dst_mac: [0; 6] };
        let desired: Arc<BTreeMap<Key, Entry>> = Arc::new([(nhop.key(), nhop)].into());
        let flow = |qp| metaroce_pipeline::FlowKey {
            src: [10, 0, 1, 1].into(),
            dst: [10, 0, 2, 1].into(),
            sport: 1,
            qp,
        };
        let onto = |qp, nhop_id| Entry::SteerFlow { flow: flow(qp), nhop_id, port: nhop_id };
        // One entry onto the desired next hop, one onto a next hop that is gone.
        let installed: BTreeMap<Key, Entry> =
            [onto(1, 4), onto(2, 9)].into_iter().map(|e| (e.key(), e)).collect();
        let none = with_found_steer(desired.clone(), &BTreeSet::new(), &installed);
        assert!(Arc::ptr_eq(&none, &desired), "nothing found: the shared map, not a copy");
        let gone = BTreeSet::from([onto(2, 9).key()]);
        assert!(Arc::ptr_eq(&with_found_steer(desired.clone(), &gone, &installed), &desired));
        let found = steer_keys(&installed);
        let kept = with_found_steer(desired.clone(), &found, &installed);
        assert_eq!(kept.get(&onto(1, 4).key()), Some(&onto(1, 4)));
        assert!(!kept.contains_key(&onto(2, 9).key()), "never onto a next hop the plan dropped");
        assert_eq!(desired.len(), 1, "the shared map is left as it was");
    }
}
