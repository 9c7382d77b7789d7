//! An in-memory election service for the tests: leases that lapse in
//! (virtual) time, keys ordered by creation revision like etcd's election
//! API, and a switch per client to cut it off from the service.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::{Elector, HaError, Leadership, Lease};

#[derive(Debug, Default)]
struct Inner {
    revision: i64,
    next_lease: i64,
    /// Lease → (time to live, expiry).
    leases: BTreeMap<i64, (Duration, Instant)>,
    /// Creation revision → (lease, value): the election's queue.
    keys: BTreeMap<i64, (i64, String)>,
}

impl Inner {
    fn purge(&mut self, now: Instant) {
        self.leases.retain(|_, (_, exp)| *exp > now);
        let leases = &self.leases;
        self.keys.retain(|_, (l, _)| leases.contains_key(l));
    }
}

/// The shared service.
#[derive(Debug, Clone, Default)]
pub struct FakeEtcd(Arc<Mutex<Inner>>);

impl FakeEtcd {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A client of this service.
    pub fn client(&self) -> FakeElector {
        FakeElector { etcd: self.clone(), cut: Arc::new(AtomicBool::new(false)) }
    }
}

/// One controller's client; clones share its connection (and its cut).
#[derive(Debug, Clone)]
pub struct FakeElector {
    etcd: FakeEtcd,
    cut: Arc<AtomicBool>,
}

impl FakeElector {
    /// Cuts this client off from the service (or reconnects it).
    pub fn cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
    }

    fn reach(&self, op: &'static str) -> Result<MutexGuard<'_, Inner>, HaError> {
        if self.cut.load(Ordering::SeqCst) {
            return Err(HaError::Answer { op, what: "unreachable".into() });
        }
        let mut g = self.etcd.lock();
        g.purge(Instant::now());
        Ok(g)
    }
}

impl Elector for FakeElector {
    async fn grant(&mut self, ttl: Duration) -> Result<Lease, HaError> {
        let mut g = self.reach("lease grant")?;
        g.next_lease += 1;
        let id = g.next_lease;
        g.leases.insert(id, (ttl, Instant::now() + ttl));
        Ok(Lease { id, ttl })
    }

    async fn keep_alive(&mut self, lease: i64) -> Result<bool, HaError> {
        let mut g = self.reach("lease keep-alive")?;
        match g.leases.get_mut(&lease) {
            Some((ttl, exp)) => {
                *exp = Instant::now() + *ttl;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn campaign(self, lease: i64, value: String) -> Result<Leadership, HaError> {
        loop {
            {
                let mut g = self.reach("campaign")?;
                if !g.leases.contains_key(&lease) {
                    return Err(HaError::Answer { op: "campaign", what: "lease not found".into() });
                }
                let mine = g.keys.iter().find(|(_, (l, _))| *l == lease).map(|(r, _)| *r);
                let mine = match mine {
                    Some(r) => r,
                    None => {
                        g.revision += 1;
                        let r = g.revision;
                        g.keys.insert(r, (lease, value.clone()));
                        r
                    }
                };
                if g.keys.keys().next() == Some(&mine) {
                    return Ok(Leadership { revision: mine, key: fake_key(lease) });
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn leader(&mut self) -> Result<Option<String>, HaError> {
        let g = self.reach("leader")?;
        Ok(g.keys.values().next().map(|(_, v)| v.clone()))
    }

    async fn revoke(&mut self, lease: i64) -> Result<(), HaError> {
        let mut g = self.reach("lease revoke")?;
        g.leases.remove(&lease);
        g.keys.retain(|_, (l, _)| *l != lease);
        Ok(())
    }
}

/// The campaign key of a lease, as etcd names it (prefix, then the lease).
pub fn fake_key(lease: i64) -> Vec<u8> {
    format!("election/{lease:x}").into_bytes()
}
