//! The election task: hold a lease, campaign, lead while the lease holds,
//! and step down the moment it may not.
//!
//! The leader counts its lease from when it *sent* the last renewal that
//! was answered: etcd received it later, so the lease cannot lapse at etcd
//! before it lapses here. A leader that cannot renew (etcd gone, or this
//! process paused) therefore stops writing no later than a standby can be
//! elected; the switches refuse its writes anyway (its election id is
//! below the new leader's).

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use super::{leader_election_id, Elector, HaState, Leadership, Role, Term};

/// The task's timing.
#[derive(Debug, Clone)]
pub struct TaskConfig {
    pub name: String,
    /// This controller's API URL, campaigned with the name.
    pub url: Option<String>,
    pub lease_ttl: Duration,
    /// How often the lease is renewed (a fraction of its time to live).
    pub renew_every: Duration,
    /// How often a standby asks who leads (for its API's refusals).
    pub look_every: Duration,
    /// Wait before trying again after etcd failed.
    pub retry: Duration,
}

impl TaskConfig {
    pub fn new(name: &str, lease_ttl: Duration) -> Self {
        TaskConfig {
            name: name.to_string(),
            url: None,
            lease_ttl,
            renew_every: (lease_ttl / 5).max(Duration::from_millis(20)),
            look_every: Duration::from_millis(500),
            retry: Duration::from_millis(250),
        }
    }
}

/// When a lease lapses, as far as its holder can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseClock {
    ttl: Duration,
    /// When the last answered renewal (or the grant) was sent.
    renewed_at: Instant,
}

impl LeaseClock {
    pub fn new(ttl: Duration, sent_at: Instant) -> Self {
        LeaseClock { ttl, renewed_at: sent_at }
    }

    /// A renewal sent at `sent_at` was answered.
    pub fn renewed(&mut self, sent_at: Instant) {
        self.renewed_at = self.renewed_at.max(sent_at);
    }

    /// From this instant on the lease may have lapsed at etcd.
    pub fn deadline(&self) -> Instant {
        self.renewed_at + self.ttl
    }

    pub fn lapsed(&self, now: Instant) -> bool {
        now >= self.deadline()
    }
}

/// Why a lease ended for us.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Lost {
    /// etcd says the lease is gone.
    Gone,
    /// No renewal was answered for a whole time to live.
    Lapsed(String),
    /// The campaign failed.
    Campaign(String),
}

impl Lost {
    fn reason(&self) -> String {
        match self {
            Lost::Gone => "the lease expired at etcd".into(),
            Lost::Lapsed(e) => format!("no lease renewal answered for a whole lease ({e})"),
            Lost::Campaign(e) => format!("campaign failed ({e})"),
        }
    }
}

/// Runs until `stop` turns true; publishes every change of role on `tx`.
pub async fn run<E: Elector>(
    mut el: E,
    cfg: TaskConfig,
    tx: watch::Sender<HaState>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        let sent = Instant::now();
        let lease = match el.grant(cfg.lease_ttl).await {
            Ok(l) => l,
            Err(e) => {
                warn!(error = %e, retry_in = ?cfg.retry, "etcd: cannot get a lease; staying standby");
                if pause(cfg.retry, &mut stop).await {
                    return;
                }
                continue;
            }
        };
        if lease.ttl > cfg.lease_ttl {
            warn!(asked = ?cfg.lease_ttl, granted = ?lease.ttl, "etcd raised the lease's time to live (its minimum is 1.5 election timeouts): takeovers take that long");
        }
        let mut clock = LeaseClock::new(lease.ttl, sent);
        let Some(elected) = standby(&mut el, &cfg, lease.id, &mut clock, &tx, &mut stop).await else {
            let _ = el.revoke(lease.id).await;
            return;
        };
        // etcd's campaign can answer for a key whose lease just lapsed
        // (it waits for the keys ahead, not for its own): lead only on a
        // lease that is still ours.
        let elected = match elected {
            Ok(won) => renew(&mut el, lease.id, &mut clock, cfg.renew_every).await.map(|()| won),
            Err(lost) => Err(lost),
        };
        let lost = match elected {
            Ok(won) => {
                lead(&tx, &cfg, won);
                match leading(&mut el, &cfg, lease.id, &mut clock, &mut stop).await {
                    None => {
                        // Shutting down: give the leadership away at once.
                        let _ = el.revoke(lease.id).await;
                        info!("resigned: lease revoked, a standby takes over now");
                        return;
                    }
                    Some(lost) => lost,
                }
            }
            Err(lost) => lost,
        };
        step_down(&tx, &lost);
        // Best effort: the lease may be gone already, or etcd unreachable.
        let _ = tokio::time::timeout(cfg.retry, el.revoke(lease.id)).await;
        if pause(cfg.retry, &mut stop).await {
            return;
        }
    }
}

/// Sleeps `d`; true when stopped meanwhile.
async fn pause(d: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = stopped(stop) => return true,
    }
    *stop.borrow()
}

/// Returns once `stop` is true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// One renewal; `Err` when the lease is lost.
async fn renew<E: Elector>(
    el: &mut E,
    lease: i64,
    clock: &mut LeaseClock,
    within: Duration,
) -> Result<(), Lost> {
    let sent = Instant::now();
    let why = match tokio::time::timeout(within, el.keep_alive(lease)).await {
        Ok(Ok(true)) => {
            clock.renewed(sent);
            return Ok(());
        }
        Ok(Ok(false)) => return Err(Lost::Gone),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {within:?}"),
    };
    if clock.lapsed(Instant::now()) {
        return Err(Lost::Lapsed(why));
    }
    tracing::debug!(error = %why, "lease renewal failed; retrying until the lease would lapse");
    Ok(())
}

/// Campaigns while renewing the lease; `None` when stopped, else the
/// leadership won or why the lease or campaign was lost.
async fn standby<E: Elector>(
    el: &mut E,
    cfg: &TaskConfig,
    lease: i64,
    clock: &mut LeaseClock,
    tx: &watch::Sender<HaState>,
    stop: &mut watch::Receiver<bool>,
) -> Option<Result<Leadership, Lost>> {
    let campaign = el.clone().campaign(lease, super::campaign_value(&cfg.name, cfg.url.as_deref()));
    tokio::pin!(campaign);
    let mut renew_tick = tokio::time::interval(cfg.renew_every);
    renew_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut look = tokio::time::interval(cfg.look_every);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            r = &mut campaign => return Some(r.map_err(|e| Lost::Campaign(e.to_string()))),
            _ = renew_tick.tick() => {
                if let Err(lost) = renew(el, lease, clock, cfg.renew_every).await {
                    return Some(Err(lost));
                }
            }
            _ = look.tick() => {
                if let Ok(Ok(value)) = tokio::time::timeout(cfg.look_every, el.leader()).await {
                    let (leader, url) = match value.as_deref().map(super::parse_campaign_value) {
                        Some((name, url)) => (Some(name), url),
                        None => (None, None),
                    };
                    tx.send_if_modified(|s| {
                        let changed = (s.leader != leader || s.leader_url != url) && s.role == Role::Standby;
                        if changed {
                            info!(leader = leader.as_deref().unwrap_or("none"), url = url.as_deref().unwrap_or("none"), "standby: the leader is");
                            s.leader = leader;
                            s.leader_url = url;
                        }
                        changed
                    });
                }
            }
            _ = stopped(stop) => return None,
        }
    }
}

/// Leads while the lease holds; `None` when stopped, else why it ended.
async fn leading<E: Elector>(
    el: &mut E,
    cfg: &TaskConfig,
    lease: i64,
    clock: &mut LeaseClock,
    stop: &mut watch::Receiver<bool>,
) -> Option<Lost> {
    let mut renew_tick = tokio::time::interval(cfg.renew_every);
    renew_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let deadline = clock.deadline();
        tokio::select! {
            _ = renew_tick.tick() => {
                if let Err(lost) = renew(el, lease, clock, cfg.renew_every).await {
                    return Some(lost);
                }
            }
            // A renewal stuck past the lease (or a paused process that
            // resumes): the lease may be someone else's now.
            _ = tokio::time::sleep_until(deadline) => {
                if clock.lapsed(Instant::now()) {
                    return Some(Lost::Lapsed("renewals stalled".into()));
                }
            }
            _ = stopped(stop) => return None,
        }
    }
}

fn lead(tx: &watch::Sender<HaState>, cfg: &TaskConfig, won: Leadership) {
    let rev = won.revision;
    let election_id = leader_election_id(rev);
    info!(revision = rev, election_id = %election_id, name = %cfg.name, "elected leader: taking over every switch");
    tx.send_modify(|s| {
        s.role = Role::Leader;
        s.leader = Some(cfg.name.clone());
        s.leader_url = cfg.url.clone();
        s.revision = Some(rev);
        s.leader_key = Some(won.key.clone());
        s.term = Term { election_id, writes: true };
        s.changes += 1;
        s.elected_at = Some(Instant::now());
        s.reason = format!("elected at etcd revision {rev}");
    });
}

fn step_down(tx: &watch::Sender<HaState>, lost: &Lost) {
    let was_leader = tx.borrow().role == Role::Leader;
    let reason = lost.reason();
    if was_leader {
        warn!(%reason, "leadership lost: standing down, the switches keep what they hold");
    } else {
        warn!(%reason, "standby: campaigning again");
    }
    tx.send_if_modified(|s| {
        if s.role != Role::Leader {
            return false;
        }
        s.role = Role::Standby;
        s.leader = None;
        s.leader_url = None;
        s.revision = None;
        s.leader_key = None;
        s.term = Term { election_id: super::standby_election_id(&s.name), writes: false };
        s.changes += 1;
        s.reason = reason;
        true
    });
}
