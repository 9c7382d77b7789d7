//! The state task's side of the election: it follows the role for the
//! status document, the metrics and the event log, measures takeovers,
//! and refuses the API's writes while this controller is a standby.

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::info;

use super::{HaState, Role};
use crate::obs::{Command, CommandError, EventLog, Metrics, Refusal};
use crate::status::SwitchStatus;

/// What the state task knows of the election.
#[derive(Debug)]
pub struct Follower {
    rx: Option<watch::Receiver<HaState>>,
    /// The state last acted on (`None` without an election).
    seen: Option<HaState>,
    /// Elected and not yet primary on every switch: since when.
    taking_over: Option<Instant>,
    /// The last takeover's duration, seconds.
    last_takeover: Option<f64>,
    /// Sharded ([`crate::shard`]): the leader plans but is the primary of
    /// its own switches only, so no takeover is measured here (the shard
    /// owners' takeovers are per switch, in their logs and `bench-shard`).
    sharded: bool,
}

impl Follower {
    /// Follows `rx` (`None`: no election, alone and always writing).
    pub fn new(rx: Option<watch::Receiver<HaState>>, metrics: &Metrics) -> Self {
        let seen = rx.as_ref().map(|r| r.borrow().clone());
        metrics.set_ha_role(seen.as_ref().map_or(Role::Alone, |s| s.role).as_str());
        Follower { rx, seen, taking_over: None, last_takeover: None, sharded: false }
    }

    /// Under sharding: no "primary on every switch" takeover to wait for.
    pub fn sharded(mut self, sharded: bool) -> Self {
        self.sharded = sharded;
        self
    }

    pub fn role(&self) -> Role {
        self.seen.as_ref().map_or(Role::Alone, |s| s.role)
    }

    /// What writes to etcd are fenced on, while we lead.
    pub fn fence(&self) -> Option<super::jobs::Fence> {
        let s = self.seen.as_ref().filter(|s| s.role == Role::Leader)?;
        Some(super::jobs::Fence { key: s.leader_key.clone()?, revision: s.revision? })
    }

    /// True when decisions reach the switches (leader or alone).
    pub fn writes(&self) -> bool {
        self.role().writes()
    }

    /// Waits for the next change of the election; never returns without one.
    pub async fn changed(&mut self) -> HaState {
        match self.rx.as_mut() {
            Some(rx) => match rx.changed().await {
                Ok(()) => rx.borrow_and_update().clone(),
                Err(_) => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    }

    /// Records a change: metrics and an event when the role changed.
    pub fn on_change(&mut self, new: HaState, metrics: &Metrics, events: &EventLog) {
        let old = self.seen.replace(new.clone());
        let old_role = old.as_ref().map_or(Role::Alone, |s| s.role);
        metrics.set_ha_role(new.role.as_str());
        if old_role == new.role {
            return;
        }
        metrics.ha_leadership_change();
        let details = json!({"from": old_role, "to": new.role, "name": new.name, "leader": new.leader,
            "revision": new.revision, "election_id": new.term.election_id.to_string()});
        events.record("ha_role", None, &new.reason, details);
        self.taking_over = match new.role {
            Role::Leader if !self.sharded => new.elected_at.or_else(|| Some(Instant::now())),
            _ => None,
        };
    }

    /// Elected and waiting for every switch to take us as its primary
    /// ([`Follower::check_takeover`] looks at each tick).
    pub fn taking_over(&self) -> bool {
        self.taking_over.is_some()
    }

    /// Once elected: when every switch has us as its primary, the takeover
    /// is over; its duration goes to the metrics and the event log. True
    /// when it just ended.
    pub fn check_takeover(
        &mut self,
        switches: &[SwitchStatus],
        metrics: &Metrics,
        events: &EventLog,
    ) -> bool {
        let Some(since) = self.taking_over else { return false };
        if !switches.iter().all(|s| s.connected && s.primary) {
            return false;
        }
        self.taking_over = None;
        let took = since.elapsed().as_secs_f64();
        self.last_takeover = Some(took);
        metrics.set_ha_takeover(took);
        info!(took_ms = took * 1e3, switches = switches.len(), "takeover done: primary on every switch");
        events.record(
            "ha_takeover",
            None,
            "primary on every switch",
            json!({"takeover_ms": took * 1e3, "switches": switches.len()}),
        );
        true
    }

    /// The `ha` object of the status document.
    pub fn status(&self) -> Value {
        match &self.seen {
            None => json!({"role": "alone"}),
            Some(s) => {
                json!({"role": s.role, "name": s.name, "leader": s.leader, "leader_url": s.leader_url, "revision": s.revision,
                "election_id": s.term.election_id.to_string(), "leadership_changes": s.changes,
                "taking_over": self.taking_over.is_some(), "last_takeover_ms": self.last_takeover.map(|t| t * 1e3),
                "reason": s.reason})
            }
        }
    }

    /// Passes a command through, or answers it with a refusal that names
    /// the leader while this controller is a standby. Link reports pass:
    /// they are what a monitor saw, not a change to make, and a standby
    /// needs them to take over with the right view.
    pub fn gate(&self, cmd: Command) -> Option<Command> {
        if self.writes() || matches!(cmd, Command::SetLink { .. }) {
            return Some(cmd);
        }
        let leader = self.seen.as_ref().and_then(|s| s.leader.clone());
        let url = self.seen.as_ref().and_then(|s| s.leader_url.clone());
        let refused = CommandError::Standby { leader: leader.clone(), leader_url: url.clone() };
        let refusal = || Refusal {
            status: refused.status(),
            body: json!({"error": refused.to_string(), "leader": leader, "leader_url": url}),
        };
        match cmd {
            Command::SetMode { reply, .. } | Command::Rollback { reply, .. } => {
                let _ = reply.send(Err(refused.clone()));
            }
            Command::SetLink { .. } => {}
            Command::RegisterJob { reply, .. } | Command::RemoveJob { reply, .. } => {
                let _ = reply.send(Err(refusal()));
            }
        }
        None
    }
}
