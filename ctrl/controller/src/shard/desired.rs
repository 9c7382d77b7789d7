//! Desired state through etcd: the planner publishes each switch's, every
//! instance follows all of them.
//!
//! Why etcd and not the planner's HTTP API: etcd is already the one place
//! every instance trusts, a put fenced on the leadership (the job store's
//! transaction, [`crate::ha::jobs`]) keeps a deposed planner from
//! overwriting its successor's decisions, and a watch hands a new owner the
//! latest desired state of a switch it adopts without asking anyone. The
//! desired state is a level, not a command: an owner that applies it twice
//! writes nothing the second time.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, EventType, GetOptions, Txn, TxnOp, WatchOptions};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use super::wire::WireGoal;
use crate::agent::Desired;
use crate::ha::elector::RPC_TIMEOUT;
use crate::ha::jobs::Fence;
use crate::ha::{HaState, Role};

/// Most switches' desired states in one transaction (etcd allows 128
/// operations per transaction by default, and 1.5 MB per request).
const TXN_SWITCHES: usize = 32;

/// Wait before watching again after the watch failed.
const RETRY: Duration = Duration::from_millis(250);

/// Follows `metaroce/<fabric>/desired/` into the agents' desired state.
pub async fn watch(
    mut client: Client,
    fabric: String,
    agents: Vec<watch::Sender<Desired>>,
    mut stop: watch::Receiver<bool>,
) {
    let prefix = super::desired_prefix(&fabric);
    loop {
        tokio::select! {
            r = follow(&mut client, &prefix, &agents) => warn!(error = %r, "shard: desired-state watch ended; watching again"),
            _ = stop.wait_for(|s| *s) => return,
        }
        tokio::select! {
            _ = tokio::time::sleep(RETRY) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Reads every switch's desired state, then follows the changes; returns
/// why it stopped.
async fn follow(client: &mut Client, prefix: &str, agents: &[watch::Sender<Desired>]) -> String {
    let get = client.get(prefix, Some(GetOptions::new().with_prefix()));
    let r = match tokio::time::timeout(RPC_TIMEOUT, get).await {
        Err(_) => return "read unanswered".into(),
        Ok(Err(e)) => return e.to_string(),
        Ok(Ok(r)) => r,
    };
    for kv in r.kvs() {
        apply(kv.key(), kv.value(), prefix, agents);
    }
    let from = r.header().map_or(0, |h| h.revision()) + 1;
    let opts = WatchOptions::new().with_prefix().with_start_revision(from);
    let mut stream = match client.watch(prefix, Some(opts)).await {
        Ok(s) => s,
        Err(e) => return e.to_string(),
    };
    loop {
        match stream.message().await {
            Ok(Some(resp)) => {
                if resp.canceled() {
                    return format!("watch canceled: {}", resp.cancel_reason());
                }
                for ev in resp.events() {
                    if let (EventType::Put, Some(kv)) = (ev.event_type(), ev.kv()) {
                        apply(kv.key(), kv.value(), prefix, agents);
                    }
                }
            }
            Ok(None) => return "the watch stream ended".into(),
            Err(e) => return e.to_string(),
        }
    }
}

/// One key's desired state to its switch's agent (unless unchanged).
fn apply(key: &[u8], value: &[u8], prefix: &str, agents: &[watch::Sender<Desired>]) {
    let Some(tx) = super::switch_of(key, prefix).and_then(|s| agents.get(s)) else {
        return warn!(key = %String::from_utf8_lossy(key), "shard: desired state for no switch of this topology; ignored");
    };
    let goal: WireGoal = match serde_json::from_slice(value) {
        Ok(g) => g,
        Err(e) => {
            return warn!(key = %String::from_utf8_lossy(key), error = %e, "shard: desired state is not ours; ignored")
        }
    };
    let wanted = goal.wanted();
    tx.send_if_modified(|d| {
        let same = d.as_deref().is_some_and(|w| w.target == wanted.target);
        if !same {
            *d = Some(Arc::new(wanted));
        }
        !same
    });
}

/// The planner's side: the state task's desired state to etcd, while this
/// instance leads.
pub struct Publisher {
    client: Client,
    prefix: String,
    core: Vec<watch::Receiver<Desired>>,
    ha: watch::Receiver<HaState>,
    /// What every instance follows: the predecessor's last desired state
    /// when this instance is elected ([`super::grace`]).
    previous: Vec<watch::Receiver<Desired>>,
    grace: Duration,
    held: Option<super::grace::Held>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

impl Publisher {
    /// Publishes `core` (the state task's desired state) while `ha` says
    /// this instance leads; `previous` and `grace` as in [`super::grace`].
    pub fn new(
        client: Client,
        fabric: &str,
        core: Vec<watch::Receiver<Desired>>,
        ha: watch::Receiver<HaState>,
        previous: Vec<watch::Receiver<Desired>>,
        grace: Duration,
    ) -> Self {
        Publisher { client, prefix: super::desired_prefix(fabric), core, ha, previous, grace, held: None }
    }

    /// Runs until `stop`.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        // One small task per switch turns its channel's changes into its index.
        let (dirty_tx, mut dirty_rx) = mpsc::unbounded_channel::<usize>();
        for (s, rx) in self.core.iter().enumerate() {
            let (tx, mut rx) = (dirty_tx.clone(), rx.clone());
            let mut stop = stop.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        r = rx.changed() => if r.is_err() || tx.send(s).is_err() { return },
                        _ = stop.wait_for(|s| *s) => return,
                    }
                }
            });
        }
        let mut dirty = BTreeSet::new();
        let mut fence = self.fence();
        loop {
            if fence.is_some() && !dirty.is_empty() {
                self.flush(&mut dirty, &mut fence).await;
            }
            let retry = if dirty.is_empty() || fence.is_none() { Duration::MAX } else { RETRY };
            tokio::select! {
                Some(s) = dirty_rx.recv() => {
                    dirty.insert(s);
                    while let Ok(s) = dirty_rx.try_recv() { dirty.insert(s); }
                }
                r = self.ha.changed() => {
                    if r.is_err() { return }
                    let was = fence.is_some();
                    fence = self.fence();
                    if fence.is_some() && !was {
                        // Elected: publish every switch's desired state.
                        self.held = super::grace::Held::at_election(&self.previous, self.grace);
                        info!(held_steer = self.held.is_some(), "shard: planning for every shard; publishing desired state to etcd");
                        dirty.extend(0..self.core.len());
                    }
                }
                _ = grace_end(self.held.as_ref().map(|h| h.until)) => {
                    self.held = None;
                    dirty.extend(0..self.core.len());
                }
                _ = tokio::time::sleep(retry.min(Duration::from_secs(3600))) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }

    fn fence(&self) -> Option<Fence> {
        let s = self.ha.borrow();
        (s.role == Role::Leader)
            .then(|| Some(Fence { key: s.leader_key.clone()?, revision: s.revision? }))
            .flatten()
    }

    /// Writes the dirty switches' desired state, fenced, a batch at a time
    /// (etcd bounds the operations of one transaction); keeps what failed.
    async fn flush(&mut self, dirty: &mut BTreeSet<usize>, fence: &mut Option<Fence>) {
        while fence.is_some() && !dirty.is_empty() {
            let batch: Vec<usize> = dirty.iter().copied().take(TXN_SWITCHES).collect();
            if !self.flush_batch(&batch, dirty, fence).await {
                return;
            }
        }
    }

    /// One transaction; false when it failed (the rest waits for a retry).
    async fn flush_batch(
        &mut self,
        batch: &[usize],
        dirty: &mut BTreeSet<usize>,
        fence: &mut Option<Fence>,
    ) -> bool {
        let Some(f) = fence.clone() else { return false };
        let mut ops = Vec::new();
        let mut sent = Vec::new();
        for &s in batch {
            dirty.remove(&s);
            let Some(w) = self.core.get(s).and_then(|rx| rx.borrow().clone()) else { continue };
            let goal = match &self.held {
                Some(h) => WireGoal::of(&h.merge(s, &w)),
                None => WireGoal::of(&w),
            };
            let value = match serde_json::to_string(&goal) {
                Ok(v) => v,
                Err(e) => {
                    warn!(switch = s, error = %e, "shard: desired state cannot be written as JSON");
                    continue;
                }
            };
            ops.push(TxnOp::put(format!("{}{s}", self.prefix), value, None));
            sent.push(s);
        }
        if ops.is_empty() {
            return true;
        }
        let txn = Txn::new()
            .when([Compare::create_revision(f.key.clone(), CompareOp::Equal, f.revision)])
            .and_then(ops);
        match tokio::time::timeout(RPC_TIMEOUT, self.client.txn(txn)).await {
            Ok(Ok(r)) if r.succeeded() => {
                debug!(switches = sent.len(), "shard: desired state published");
                return true;
            }
            Ok(Ok(_)) => {
                warn!(
                    "shard: no longer the planner (etcd refused the desired state: our campaign key is gone)"
                );
                *fence = None;
            }
            Ok(Err(e)) => warn!(error = %e, "shard: cannot publish desired state; retrying"),
            Err(_) => warn!("shard: publishing desired state unanswered; retrying"),
        }
        dirty.extend(sent);
        false
    }
}

/// Fires when the held steer entries' grace ends; never without one.
async fn grace_end(until: Option<tokio::time::Instant>) {
    match until {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
