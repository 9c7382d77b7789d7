//! Jobs outlive their leader: the leader keeps every job it registers in
//! etcd beside the election, and a newly elected leader registers them
//! again before a scheduler has to.
//!
//! Why etcd and not the event log or a snapshot: the standby that takes
//! over has neither, and etcd is already the one place both controllers
//! trust. Each job is one key, `metaroce/<fabric>/jobs/<name>`, holding
//! the body the scheduler posted, so a restored job goes through the same
//! validation as a new one.
//!
//! Every write is fenced on the leadership: a transaction that puts or
//! deletes only if our campaign key still exists with the revision we won
//! it at. A leader that has lost its lease without noticing (paused, cut
//! off) cannot overwrite what its successor keeps, just as the switches
//! refuse its election id.
//!
//! One task does the etcd calls, in the order the state task asked for
//! them, so a job removed right after it was registered is never put back;
//! the state task never waits on etcd. The API's answer waits for the
//! write, so a scheduler that hears 201 knows whether the job was kept.

use std::future::Future;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::elector::RPC_TIMEOUT;
use super::HaError;
use crate::obs::JobReply;

/// Where a fabric's jobs are kept.
pub fn jobs_prefix(fabric: &str) -> String {
    format!("metaroce/{fabric}/jobs/")
}

/// Proof of leadership a write is fenced on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// Our campaign key.
    pub key: Vec<u8>,
    /// Its creation revision, as won.
    pub revision: i64,
}

/// Why a job could not be kept or read back.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Etcd(#[from] HaError),
    /// The fence failed: another controller leads now.
    #[error("no longer the leader (etcd refused the write: our campaign key is gone)")]
    Fenced,
    #[error("job {name:?} in etcd is not JSON: {why}")]
    Corrupt { name: String, why: String },
}

/// The kept jobs by name: each body, or why it cannot be read (a value
/// that is not JSON is reported, not dropped silently).
pub type KeptJobs = Vec<(String, Result<Value, StoreError>)>;

/// The job operations, behind a trait so the ordering and fencing are
/// tested without etcd.
pub trait JobStore: Send + 'static {
    fn put(
        &mut self,
        name: &str,
        body: &Value,
        fence: &Fence,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
    fn delete(&mut self, name: &str, fence: &Fence) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Every kept job, by name (a key that is not JSON is reported, not
    /// dropped silently: it comes back as an error entry).
    fn list(&mut self) -> impl Future<Output = Result<KeptJobs, StoreError>> + Send;
}

/// Jobs in etcd.
pub struct EtcdJobs {
    client: Client,
    prefix: String,
}

impl std::fmt::Debug for EtcdJobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdJobs").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

impl EtcdJobs {
    pub fn new(client: Client, fabric: &str) -> Self {
        EtcdJobs { client, prefix: jobs_prefix(fabric) }
    }

    async fn fenced(&mut self, op: &'static str, then: TxnOp, fence: &Fence) -> Result<(), StoreError> {
        let txn = Txn::new()
            .when([Compare::create_revision(fence.key.clone(), CompareOp::Equal, fence.revision)])
            .and_then([then]);
        let r = match tokio::time::timeout(RPC_TIMEOUT, self.client.txn(txn)).await {
            Err(_) => return Err(HaError::Timeout { op, after: RPC_TIMEOUT }.into()),
            Ok(Err(source)) => return Err(HaError::Etcd { op, source }.into()),
            Ok(Ok(r)) => r,
        };
        if r.succeeded() {
            Ok(())
        } else {
            Err(StoreError::Fenced)
        }
    }
}

impl JobStore for EtcdJobs {
    async fn put(&mut self, name: &str, body: &Value, fence: &Fence) -> Result<(), StoreError> {
        let key = format!("{}{name}", self.prefix);
        self.fenced("job put", TxnOp::put(key, body.to_string(), None), fence).await
    }

    async fn delete(&mut self, name: &str, fence: &Fence) -> Result<(), StoreError> {
        let key = format!("{}{name}", self.prefix);
        self.fenced("job delete", TxnOp::delete(key, None), fence).await
    }

    async fn list(&mut self) -> Result<KeptJobs, StoreError> {
        let get = self.client.get(self.prefix.clone(), Some(GetOptions::new().with_prefix()));
        let r = match tokio::time::timeout(RPC_TIMEOUT, get).await {
            Err(_) => return Err(HaError::Timeout { op: "job list", after: RPC_TIMEOUT }.into()),
            Ok(Err(source)) => return Err(HaError::Etcd { op: "job list", source }.into()),
            Ok(Ok(r)) => r,
        };
        Ok(r.kvs()
            .iter()
            .map(|kv| {
                let key = String::from_utf8_lossy(kv.key());
                let name = key.strip_prefix(&self.prefix).unwrap_or(&key).to_string();
                let body = serde_json::from_slice::<Value>(kv.value())
                    .map_err(|e| StoreError::Corrupt { name: name.clone(), why: e.to_string() });
                (name, body)
            })
            .collect())
    }
}

/// What the state task asks of the job task.
#[derive(Debug)]
pub enum Op {
    /// Keep a registered job, then send `answer` (with the outcome) on `reply`.
    Put { name: String, body: Value, fence: Fence, answer: Value, reply: JobReply },
    /// Forget a removed job, then answer.
    Delete { name: String, fence: Fence, answer: Value, reply: JobReply },
    /// Read every kept job back for the leadership won at `revision`.
    Load { revision: i64 },
}

/// The jobs read back after an election.
#[derive(Debug)]
pub struct Restored {
    /// The leadership they were read for: the state task ignores them if
    /// it has lost that leadership meanwhile.
    pub revision: i64,
    /// The jobs' bodies by name, or why they could not be read.
    pub jobs: Result<KeptJobs, StoreError>,
}

/// Adds the outcome of keeping the job to the API's answer.
fn with_outcome(mut answer: Value, r: &Result<(), StoreError>) -> Value {
    answer["replicated"] = json!(r.is_ok());
    if let Err(e) = r {
        answer["replication_error"] = json!(e.to_string());
    }
    answer
}

/// How often reading the kept jobs is tried after an election, and the
/// pause between tries.
const LOAD_TRIES: u32 = 3;
const LOAD_RETRY: Duration = Duration::from_millis(500);

/// Runs until the state task drops its sender.
pub async fn run<S: JobStore>(
    mut store: S,
    mut ops: mpsc::UnboundedReceiver<Op>,
    restored: mpsc::Sender<Restored>,
) {
    while let Some(op) = ops.recv().await {
        match op {
            Op::Put { name, body, fence, answer, reply } => {
                let r = store.put(&name, &body, &fence).await;
                match &r {
                    Ok(()) => info!(job = %name, "job kept in etcd"),
                    Err(e) => {
                        warn!(job = %name, error = %e, "job not kept in etcd: a new leader will not know it")
                    }
                }
                let _ = reply.send(Ok(with_outcome(answer, &r)));
            }
            Op::Delete { name, fence, answer, reply } => {
                let r = store.delete(&name, &fence).await;
                if let Err(e) = &r {
                    warn!(job = %name, error = %e, "job not removed from etcd: a new leader will register it again");
                }
                let _ = reply.send(Ok(with_outcome(answer, &r)));
            }
            Op::Load { revision } => {
                // A new leader is often elected because etcd was briefly
                // out of reach: try a few times before giving up.
                let mut jobs = store.list().await;
                for _ in 1..LOAD_TRIES {
                    if jobs.is_ok() {
                        break;
                    }
                    tokio::time::sleep(LOAD_RETRY).await;
                    jobs = store.list().await;
                }
                if restored.send(Restored { revision, jobs }).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// An in-memory store for tests: fenced like etcd against a shared
/// "current leader" and able to fail every call.
#[cfg(test)]
#[derive(Debug, Clone, Default)]
pub struct MemoryJobs {
    inner: std::sync::Arc<std::sync::Mutex<MemoryInner>>,
}

#[cfg(test)]
#[derive(Debug, Default)]
struct MemoryInner {
    jobs: std::collections::BTreeMap<String, Value>,
    leader: Option<Fence>,
    down: bool,
}

#[cfg(test)]
impl MemoryJobs {
    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Who leads now (the fence that passes).
    pub fn set_leader(&self, fence: Option<Fence>) {
        self.lock().leader = fence;
    }

    /// Makes every call fail (or work again).
    pub fn set_down(&self, down: bool) {
        self.lock().down = down;
    }

    /// The jobs kept, by name.
    pub fn names(&self) -> Vec<String> {
        self.lock().jobs.keys().cloned().collect()
    }

    fn check(
        &self,
        op: &'static str,
        fence: Option<&Fence>,
    ) -> Result<std::sync::MutexGuard<'_, MemoryInner>, StoreError> {
        let g = self.lock();
        if g.down {
            return Err(HaError::Answer { op, what: "unreachable".into() }.into());
        }
        if fence.is_some_and(|f| g.leader.as_ref() != Some(f)) {
            return Err(StoreError::Fenced);
        }
        Ok(g)
    }
}

#[cfg(test)]
impl JobStore for MemoryJobs {
    async fn put(&mut self, name: &str, body: &Value, fence: &Fence) -> Result<(), StoreError> {
        self.check("job put", Some(fence))?.jobs.insert(name.to_string(), body.clone());
        Ok(())
    }

    async fn delete(&mut self, name: &str, fence: &Fence) -> Result<(), StoreError> {
        self.check("job delete", Some(fence))?.jobs.remove(name);
        Ok(())
    }

    async fn list(&mut self) -> Result<KeptJobs, StoreError> {
        let g = self.check("job list", None)?;
        Ok(g.jobs.iter().map(|(k, v)| (k.clone(), Ok(v.clone()))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    fn fence(rev: i64) -> Fence {
        Fence { key: format!("election/{rev:x}").into_bytes(), revision: rev }
    }

    async fn started(store: MemoryJobs) -> (mpsc::UnboundedSender<Op>, mpsc::Receiver<Restored>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (rtx, rrx) = mpsc::channel(4);
        tokio::spawn(run(store, rx, rtx));
        (tx, rrx)
    }

    fn put(
        tx: &mpsc::UnboundedSender<Op>,
        name: &str,
        f: Fence,
    ) -> oneshot::Receiver<Result<Value, crate::obs::Refusal>> {
        let (reply, rx) = oneshot::channel();
        let body = json!({"name": name, "pattern": "all-to-all", "hosts": ["a", "b"], "bytes": 1});
        tx.send(Op::Put { name: name.into(), body, fence: f, answer: json!({"ok": true}), reply }).ok();
        rx
    }

    fn delete(
        tx: &mpsc::UnboundedSender<Op>,
        name: &str,
        f: Fence,
    ) -> oneshot::Receiver<Result<Value, crate::obs::Refusal>> {
        let (reply, rx) = oneshot::channel();
        tx.send(Op::Delete { name: name.into(), fence: f, answer: json!({"ok": true}), reply }).ok();
        rx
    }

    #[tokio::test]
    async fn ha_jobs_are_kept_and_removed_in_the_order_asked() {
        let store = MemoryJobs::default();
        store.set_leader(Some(fence(7)));
        let (tx, mut restored) = started(store.clone()).await;
        let a = put(&tx, "a", fence(7));
        let b = put(&tx, "b", fence(7));
        // Removed before the put above has even run: it stays removed.
        let gone = delete(&tx, "a", fence(7));
        for r in [a, b, gone] {
            assert_eq!(r.await.unwrap().unwrap()["replicated"], true);
        }
        assert_eq!(store.names(), ["b"]);
        tx.send(Op::Load { revision: 7 }).unwrap();
        let r = restored.recv().await.unwrap();
        assert_eq!(r.revision, 7);
        let jobs = r.jobs.unwrap();
        assert_eq!(jobs.len(), 1);
        assert_eq!(jobs[0].1.as_ref().unwrap()["name"], "b");
    }

    #[tokio::test]
    async fn ha_a_deposed_leader_cannot_overwrite_its_successor_s_jobs() {
        let store = MemoryJobs::default();
        store.set_leader(Some(fence(9)));
        let (tx, _restored) = started(store.clone()).await;
        let answer = put(&tx, "late", fence(7)).await.unwrap().unwrap();
        assert_eq!(answer["replicated"], false);
        assert!(answer["replication_error"].as_str().unwrap().contains("no longer the leader"), "{answer}");
        assert!(store.names().is_empty());
    }

    #[tokio::test]
    async fn ha_an_unreachable_store_is_said_in_the_answer_and_the_next_call_works() {
        let store = MemoryJobs::default();
        store.set_leader(Some(fence(3)));
        store.set_down(true);
        let (tx, mut restored) = started(store.clone()).await;
        let answer = put(&tx, "j", fence(3)).await.unwrap().unwrap();
        assert_eq!(answer["replicated"], false);
        assert!(answer["replication_error"].as_str().unwrap().contains("unreachable"), "{answer}");
        tx.send(Op::Load { revision: 3 }).unwrap();
        assert!(restored.recv().await.unwrap().jobs.is_err());
        store.set_down(false);
        assert_eq!(put(&tx, "j", fence(3)).await.unwrap().unwrap()["replicated"], true);
        assert_eq!(store.names(), ["j"]);
    }
}
