//! The ownership task: hold the instance's lease, keep its member key,
//! read the owner keys, claim and release switches by [`super::assign`],
//! and publish each switch's term to its agent.
//!
//! The lease is counted as the HA election counts its own
//! ([`crate::ha::task::LeaseClock`]): from when the last answered renewal
//! was sent. When it may have lapsed (etcd unreachable, or this process
//! paused), every switch stands down at once and the switches keep what
//! they hold; the instance then gets a new lease and claims again, with
//! new owner keys and so higher election ids.

use std::collections::BTreeMap;

use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use super::assign::{self, Seen};
use super::contract::Contract;
use super::{owner_election_id, Timing};
use crate::ha::elector::RPC_TIMEOUT;
use crate::ha::task::LeaseClock;
use crate::ha::{Elector, EtcdElector, HaError, HaState, Role, Term};

/// One term channel per switch: what its agent arbitrates with.
pub fn terms(name: &str, n: usize) -> (Vec<watch::Sender<HaState>>, Vec<watch::Receiver<HaState>>) {
    (0..n)
        .map(|_| {
            let mut st = HaState::standby(name);
            st.reason = "sharded: not this instance's switch (yet)".into();
            watch::channel(st)
        })
        .unzip()
}

/// The ownership of one instance.
pub struct Owner {
    el: EtcdElector,
    client: Client,
    fabric: String,
    contract: Contract,
    n: usize,
    timing: Timing,
    /// Switches we own: the creation revision of our owner key.
    owned: BTreeMap<usize, i64>,
    /// Switches another instance won when we tried: said once per owner.
    told: BTreeMap<usize, String>,
    /// Another lease holds our name: said once.
    name_taken: bool,
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner")
            .field("fabric", &self.fabric)
            .field("n", &self.n)
            .field("owned", &self.owned)
            .finish_non_exhaustive()
    }
}

impl Owner {
    pub fn new(el: EtcdElector, fabric: &str, contract: Contract, n: usize, timing: Timing) -> Self {
        let client = el.client();
        Owner {
            el,
            client,
            fabric: fabric.to_string(),
            contract,
            n,
            timing,
            owned: BTreeMap::new(),
            told: BTreeMap::new(),
            name_taken: false,
        }
    }

    fn name(&self) -> &str {
        &self.contract.name
    }

    fn owner_key(&self, s: usize) -> String {
        format!("{}{s}", super::owners_prefix(&self.fabric))
    }

    /// Runs until `stop`.
    pub async fn run(mut self, terms: Vec<watch::Sender<HaState>>, mut stop: watch::Receiver<bool>) {
        loop {
            let sent = Instant::now();
            let lease = match self.el.grant(self.timing.lease_ttl).await {
                Ok(l) => l,
                Err(e) => {
                    warn!(error = %e, "shard: cannot get a lease; owning nothing");
                    if pause(self.timing.retry, &mut stop).await {
                        return;
                    }
                    continue;
                }
            };
            let mut clock = LeaseClock::new(lease.ttl, sent);
            let why = self.held(lease.id, &mut clock, &terms, &mut stop).await;
            self.stand_down_all(&terms, why.as_deref().unwrap_or("shutting down"));
            // Best effort: gives the switches to the others at once.
            let _ = tokio::time::timeout(self.timing.retry, self.el.revoke(lease.id)).await;
            if why.is_none() || pause(self.timing.retry, &mut stop).await {
                return;
            }
        }
    }

    /// Owns switches under `lease` until it may have lapsed (the reason)
    /// or `stop` (`None`).
    async fn held(
        &mut self,
        lease: i64,
        clock: &mut LeaseClock,
        terms: &[watch::Sender<HaState>],
        stop: &mut watch::Receiver<bool>,
    ) -> Option<String> {
        let mut tick = tokio::time::interval(self.timing.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut registered = false;
        // The shard keys' changes wake a round at once (a lapsed owner's
        // keys vanish, a newcomer registers); the tick is the fallback.
        let mut changes: Option<etcd_client::WatchStream> = None;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                got = next_change(changes.as_mut()) => if !got { changes = None },
                _ = stop.wait_for(|s| *s) => return None,
            }
            if changes.is_none() {
                let opts = etcd_client::WatchOptions::new().with_prefix();
                let prefix = format!("metaroce/{}/shard/", self.fabric);
                changes = tokio::time::timeout(RPC_TIMEOUT, self.client.watch(prefix, Some(opts)))
                    .await
                    .ok()
                    .and_then(Result::ok);
            }
            let sent = Instant::now();
            match tokio::time::timeout(self.timing.every, self.el.keep_alive(lease)).await {
                Ok(Ok(true)) => clock.renewed(sent),
                Ok(Ok(false)) => return Some("the lease expired at etcd".into()),
                Ok(Err(e)) => tracing::debug!(error = %e, "shard: lease renewal failed"),
                Err(_) => tracing::debug!("shard: lease renewal unanswered"),
            }
            if clock.lapsed(Instant::now()) {
                return Some("no lease renewal answered for a whole lease".into());
            }
            if !registered {
                registered = self.register(lease).await;
                if !registered {
                    continue;
                }
            }
            match self.read().await {
                Ok(seen) => self.round(lease, &seen, terms).await,
                Err(e) => tracing::debug!(error = %e, "shard: cannot read the owner keys"),
            }
        }
    }

    /// Our member key, with our contract, on `lease`: created only if no
    /// other lease holds our name (a second instance started with the same
    /// name, or our previous run, whose lease has not lapsed yet). Until
    /// then we own nothing, and say so once.
    async fn register(&mut self, lease: i64) -> bool {
        let key = format!("{}{}", super::members_prefix(&self.fabric), self.name());
        let value = serde_json::to_string(&self.contract).unwrap_or_default();
        let txn = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value, Some(PutOptions::new().with_lease(lease)))]);
        match tokio::time::timeout(RPC_TIMEOUT, self.client.txn(txn)).await {
            Ok(Ok(r)) if r.succeeded() => {
                info!(name = %self.name(), switches = self.n, "shard: member of the fabric's instances");
                self.name_taken = false;
                true
            }
            Ok(Ok(_)) => {
                if !std::mem::replace(&mut self.name_taken, true) {
                    warn!(name = %self.name(), "shard: another lease holds this instance's name (another instance with the same --ha-name, or this one's previous run until its lease lapses): owning nothing meanwhile");
                }
                false
            }
            Ok(Err(e)) => {
                warn!(error = %e, "shard: cannot register");
                false
            }
            Err(_) => false,
        }
    }

    /// The members and owner keys.
    async fn read(&mut self) -> Result<Seen, HaError> {
        let prefix = format!("metaroce/{}/shard/", self.fabric);
        let get = self.client.get(prefix, Some(GetOptions::new().with_prefix()));
        let r = match tokio::time::timeout(RPC_TIMEOUT, get).await {
            Err(_) => return Err(HaError::Timeout { op: "shard read", after: RPC_TIMEOUT }),
            Ok(Err(source)) => return Err(HaError::Etcd { op: "shard read", source }),
            Ok(Ok(r)) => r,
        };
        let (members, owners) = (super::members_prefix(&self.fabric), super::owners_prefix(&self.fabric));
        let mut seen = Seen::default();
        for kv in r.kvs() {
            let key = String::from_utf8_lossy(kv.key());
            if let Some(m) = key.strip_prefix(&members) {
                seen.members.push(m.to_string());
            } else if let Some(s) = super::switch_of(kv.key(), &owners).filter(|&s| s < self.n) {
                seen.owners
                    .insert(s, (String::from_utf8_lossy(kv.value()).into_owned(), kv.create_revision()));
            }
        }
        Ok(seen)
    }

    /// One round: follow what etcd says we own, then claim and release.
    async fn round(&mut self, lease: i64, seen: &Seen, terms: &[watch::Sender<HaState>]) {
        // Keys of ours that are gone (or were never ours) stand down first.
        let lost: Vec<usize> = self
            .owned
            .iter()
            .filter(|(s, rev)| seen.owners.get(s).is_none_or(|(o, r)| o != self.name() || r != *rev))
            .map(|(s, _)| *s)
            .collect();
        for s in lost {
            self.owned.remove(&s);
            warn!(switch = s, "shard: standing down on this switch: our owner key is gone (our lease lapsed, or the key was taken); it keeps what it holds");
            set(&terms[s], self.name(), None, "sharded: our owner key is gone");
        }
        let moves = assign::decide(self.n, seen, self.name());
        if let Some(s) = moves.release {
            self.release(s, terms).await;
        }
        for s in moves.take {
            self.claim(s, lease, terms).await;
        }
    }

    /// Creates the switch's owner key if absent; on success we own it.
    async fn claim(&mut self, s: usize, lease: i64, terms: &[watch::Sender<HaState>]) {
        let key = self.owner_key(s);
        let txn = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key.clone(), self.name(), Some(PutOptions::new().with_lease(lease)))])
            .or_else([TxnOp::get(key, None)]);
        let r = match tokio::time::timeout(RPC_TIMEOUT, self.client.txn(txn)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return warn!(switch = s, error = %e, "shard: claim failed"),
            Err(_) => return warn!(switch = s, "shard: claim unanswered"),
        };
        if !r.succeeded() {
            let winner = r.op_responses().into_iter().find_map(|op| match op {
                etcd_client::TxnOpResponse::Get(g) => {
                    g.kvs().first().map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
                }
                _ => None,
            });
            let winner = winner.unwrap_or_else(|| "another instance".into());
            if self.told.insert(s, winner.clone()).as_ref() != Some(&winner) {
                info!(switch = s, owner = %winner, "shard: switch claimed by another instance first; the lease decides: writing nothing to it");
            }
            return;
        }
        let Some(rev) = r.header().map(|h| h.revision()) else { return };
        self.owned.insert(s, rev);
        self.told.remove(&s);
        info!(switch = s, revision = rev, election_id = %owner_election_id(rev), "shard: switch owned; taking it over");
        set(&terms[s], self.name(), Some(rev), &format!("sharded: owner since etcd revision {rev}"));
    }

    /// Stands down on switch `s`, then deletes our owner key (if it is
    /// still ours), so that the instance that wants it can claim it.
    async fn release(&mut self, s: usize, terms: &[watch::Sender<HaState>]) {
        let Some(rev) = self.owned.remove(&s) else { return };
        set(&terms[s], self.name(), None, "sharded: given to a less loaded instance");
        let key = self.owner_key(s);
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, rev)])
            .and_then([TxnOp::delete(key, None)]);
        match tokio::time::timeout(RPC_TIMEOUT, self.client.txn(txn)).await {
            Ok(Ok(_)) => info!(switch = s, "shard: switch released for balance"),
            Ok(Err(e)) => {
                warn!(switch = s, error = %e, "shard: release failed; the key lapses with the lease")
            }
            Err(_) => warn!(switch = s, "shard: release unanswered"),
        }
    }

    fn stand_down_all(&mut self, terms: &[watch::Sender<HaState>], why: &str) {
        if !self.owned.is_empty() {
            warn!(reason = %why, switches = self.owned.len(), "shard: standing down on every switch; they keep what they hold");
        }
        for (s, _) in std::mem::take(&mut self.owned) {
            set(&terms[s], self.name(), None, &format!("sharded: {why}"));
        }
    }
}

/// Publishes a switch's term: owner at `rev`, or a backup that reads.
fn set(tx: &watch::Sender<HaState>, name: &str, rev: Option<i64>, reason: &str) {
    tx.send_modify(|st| {
        let (role, term) = match rev {
            Some(r) => (Role::Leader, Term { election_id: owner_election_id(r), writes: true }),
            None => {
                (Role::Standby, Term { election_id: crate::ha::standby_election_id(name), writes: false })
            }
        };
        st.role = role;
        st.term = term;
        st.revision = rev;
        st.leader = rev.map(|_| name.to_string());
        st.changes += 1;
        st.elected_at = rev.map(|_| Instant::now());
        st.reason = reason.to_string();
    });
}

/// Sleeps `d`; true when stopped meanwhile.
async fn pause(d: std::time::Duration, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = stop.wait_for(|s| *s) => return true,
    }
    *stop.borrow()
}

/// Waits for the next change on the shard keys: false when the watch
/// ended (it is opened again); never returns without a watch.
async fn next_change(w: Option<&mut etcd_client::WatchStream>) -> bool {
    match w {
        Some(w) => matches!(w.message().await, Ok(Some(r)) if !r.canceled()),
        None => std::future::pending().await,
    }
}
