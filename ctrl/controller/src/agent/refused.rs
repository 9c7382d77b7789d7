//! Entries the switch refused. A refusal (a full table, a value it does
//! not take) is an error of that entry, not of the session: the rest of
//! the pass goes on and the switch stays programmed for everything else.
//! The refused change is held back from the passes that follow, so the
//! switch is not sent the same refused write on every pass: it is tried
//! again after a per-entry backoff (doubling up to a cap), and at once
//! when its desired state changes. Pure: time is an argument.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use metaroce_pipeline::{Entry, Key};
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::reconcile::Change;

/// One held-back change.
#[derive(Debug, Clone, PartialEq)]
struct Held {
    /// What the change wanted the key to be (`None`: deleted).
    wanted: Option<Entry>,
    code: tonic::Code,
    message: String,
    attempts: u32,
    retry_at: Instant,
}

/// The refused changes of one switch.
#[derive(Debug)]
pub(super) struct Refusals {
    held: BTreeMap<Key, Held>,
    initial: Duration,
    max: Duration,
    /// When the last pass began ([`Refusals::hold_back`]).
    last_pass: Option<Instant>,
}

/// A refusal as the state task reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub key: Key,
    pub code: tonic::Code,
    pub message: String,
    pub attempts: u32,
}

impl Refused {
    pub fn to_json(&self) -> Value {
        json!({"entry": format!("{:?}", self.key), "code": format!("{:?}", self.code),
            "message": self.message, "attempts": self.attempts})
    }
}

/// Per-update codes that mean the agent's view of the switch is stale
/// (not a refusal): re-read the switch and try again.
pub(super) fn stale(code: tonic::Code) -> bool {
    matches!(code, tonic::Code::AlreadyExists | tonic::Code::NotFound)
}

impl Refusals {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Refusals {
            held: BTreeMap::new(),
            initial: initial.max(Duration::from_millis(1)),
            max: max.max(initial),
            last_pass: None,
        }
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Drops the refusals whose desired state changed, then holds back
    /// the rest that are not due for another try: `desired` is set to
    /// what `installed` holds for their keys, so the diff leaves them be.
    /// `desired` is copied only when an entry is held back from it.
    pub fn hold_back(
        &mut self,
        desired: &mut Arc<BTreeMap<Key, Entry>>,
        installed: &BTreeMap<Key, Entry>,
        now: Instant,
    ) {
        self.last_pass = Some(now);
        self.held.retain(|k, h| desired.get(k) == h.wanted.as_ref());
        for (k, h) in &self.held {
            if h.retry_at <= now {
                continue;
            }
            let desired = Arc::make_mut(desired);
            match installed.get(k) {
                Some(have) => desired.insert(*k, have.clone()),
                None => desired.remove(k),
            };
        }
    }

    /// The switch refused `change` at `now`: held back for a while longer
    /// each time it is refused again.
    pub fn refused(&mut self, change: &Change, code: tonic::Code, message: &str, now: Instant) -> Refused {
        let key = change.entry().key();
        let wanted = match change {
            Change::Insert(e) | Change::Modify(e) => Some(e.clone()),
            Change::Delete(_) => None,
        };
        let attempts = self.held.get(&key).filter(|h| h.wanted == wanted).map_or(0, |h| h.attempts) + 1;
        let wait = self.initial.saturating_mul(1 << (attempts - 1).min(20)).min(self.max);
        let held = Held { wanted, code, message: message.to_owned(), attempts, retry_at: now + wait };
        self.held.insert(key, held);
        Refused { key, code, message: message.to_owned(), attempts }
    }

    /// The switch took a change of `key`.
    pub fn accepted(&mut self, key: &Key) {
        self.held.remove(key);
    }

    /// The switch's entries were read again or replaced (a reconnect, a
    /// rollback): every change is tried afresh.
    pub fn clear(&mut self) {
        self.held.clear();
    }

    /// When the next held-back change is due for another try. Only
    /// those that fall due after the last pass began count: one due
    /// before it that the pass did not write (its deletes deferred, the
    /// pass ended by an error) waits for the pass that the deferral or
    /// the error schedules, instead of waking the agent over and over.
    pub fn next_retry(&self) -> Option<Instant> {
        self.held.values().map(|h| h.retry_at).filter(|t| self.last_pass.is_none_or(|p| *t > p)).min()
    }

    /// How many are held back with each code, and the first few, for the status.
    pub fn summary(&self, first: usize) -> Value {
        let mut by_code: BTreeMap<String, usize> = BTreeMap::new();
        for h in self.held.values() {
            *by_code.entry(format!("{:?}", h.code)).or_default() += 1;
        }
        let some: Vec<Value> = self
            .held
            .iter()
            .take(first)
            .map(|(k, h)| {
                Refused { key: *k, code: h.code, message: h.message.clone(), attempts: h.attempts }.to_json()
            })
            .collect();
        json!({"held_back": self.held.len(), "by_code": by_code, "first": some})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steer(src: u32, port: u16) -> Entry {
        Entry::SteerPair { src: src.into(), dst: 9.into(), nhop_id: port + 1, port }
    }

    #[test]
    fn a_refused_insert_is_held_back_with_a_growing_wait_until_its_desire_changes() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        let mut r = Refusals::new(100 * ms, 400 * ms);
        let installed = BTreeMap::from([(steer(1, 3).key(), steer(1, 3))]);
        let want = BTreeMap::from([(steer(1, 3).key(), steer(1, 3)), (steer(2, 3).key(), steer(2, 3))]);
        let full = "table steer_pair is full (1024)";
        let first = r.refused(&Change::Insert(steer(2, 3)), tonic::Code::ResourceExhausted, full, t0);
        assert_eq!(first.attempts, 1);
        // Held back until its retry: the diff has nothing to write.
        let mut d = Arc::new(want.clone());
        r.hold_back(&mut d, &installed, t0 + 99 * ms);
        assert_eq!(*d, installed);
        assert_eq!(r.next_retry(), Some(t0 + 100 * ms));
        // A pass that began after it fell due and did not write it (its
        // deletes deferred, say) leaves no wake-up for it behind.
        let mut d = Arc::new(want.clone());
        r.hold_back(&mut d, &installed, t0 + 150 * ms);
        assert_eq!(r.next_retry(), None);
        // Due: tried again; refused again, it waits twice as long, then the cap.
        let mut d = Arc::new(want.clone());
        r.hold_back(&mut d, &installed, t0 + 100 * ms);
        assert_eq!(*d, want);
        let again =
            r.refused(&Change::Insert(steer(2, 3)), tonic::Code::ResourceExhausted, full, t0 + 100 * ms);
        assert_eq!(again.attempts, 2);
        assert_eq!(r.next_retry(), Some(t0 + 300 * ms));
        r.refused(&Change::Insert(steer(2, 3)), tonic::Code::ResourceExhausted, full, t0 + 300 * ms);
        r.refused(&Change::Insert(steer(2, 3)), tonic::Code::ResourceExhausted, full, t0 + 700 * ms);
        assert_eq!(r.next_retry(), Some(t0 + 1100 * ms), "capped at 400 ms");
        // Its desired state changes (another port): the refusal is dropped at once.
        let mut d = Arc::new(want.clone());
        Arc::make_mut(&mut d).insert(steer(2, 4).key(), steer(2, 4));
        r.hold_back(&mut d, &installed, t0 + 701 * ms);
        assert_eq!(r.len(), 0);
        assert_eq!(d.get(&steer(2, 4).key()), Some(&steer(2, 4)));
        assert_eq!(r.summary(4)["held_back"], 0);
    }

    #[test]
    fn a_refused_delete_or_modify_keeps_what_the_switch_holds() {
        let t0 = Instant::now();
        let mut r = Refusals::new(Duration::from_secs(1), Duration::from_secs(8));
        let installed = BTreeMap::from([(steer(1, 3).key(), steer(1, 3)), (steer(2, 3).key(), steer(2, 3))]);
        r.refused(&Change::Delete(steer(1, 3)), tonic::Code::FailedPrecondition, "in use", t0);
        r.refused(&Change::Modify(steer(2, 4)), tonic::Code::InvalidArgument, "bad port", t0);
        let mut d = Arc::new(BTreeMap::from([(steer(2, 4).key(), steer(2, 4))]));
        r.hold_back(&mut d, &installed, t0);
        assert_eq!(*d, installed);
        assert_eq!(r.summary(1)["by_code"]["FailedPrecondition"], 1);
        r.accepted(&steer(1, 3).key());
        assert_eq!(r.len(), 1);
        assert!(stale(tonic::Code::AlreadyExists) && !stale(tonic::Code::ResourceExhausted));
    }
}
