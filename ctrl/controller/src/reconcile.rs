//! Desired against installed: the difference as ordered write batches.
//!
//! Inserts and modifications go in ascending [`Phase`] (next hops, then
//! members, groups, group entries, and routes last), deletions afterwards in
//! descending phase (routes first). So a route only ever points at a group
//! that is complete, and a group is removed only once nothing points at it:
//! no packet meets an empty or half-written group, and nothing black-holes
//! in between. Each batch is one P4Runtime Write; the next batch is sent
//! only after the previous one is acknowledged.

use std::collections::BTreeMap;

use metaroce_pipeline::{Entry, Key, Phase};

/// One change to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Insert(Entry),
    Modify(Entry),
    Delete(Entry),
}

impl Change {
    pub fn entry(&self) -> &Entry {
        match self {
            Change::Insert(e) | Change::Modify(e) | Change::Delete(e) => e,
        }
    }
}

/// The changes that turn `installed` into `desired`, in write order, one
/// batch per step. Empty when nothing differs.
pub fn diff(desired: &BTreeMap<Key, Entry>, installed: &BTreeMap<Key, Entry>) -> Vec<Vec<Change>> {
    let mut adds: BTreeMap<Phase, Vec<Change>> = BTreeMap::new();
    for (k, want) in desired {
        match installed.get(k) {
            Some(have) if have == want => {}
            Some(_) => adds.entry(want.phase()).or_default().push(Change::Modify(want.clone())),
            None if want.is_default() => {
                adds.entry(want.phase()).or_default().push(Change::Modify(want.clone()))
            }
            None => adds.entry(want.phase()).or_default().push(Change::Insert(want.clone())),
        }
    }
    let mut dels: BTreeMap<Phase, Vec<Change>> = BTreeMap::new();
    for (k, have) in installed {
        if !desired.contains_key(k) && !k.is_default() {
            dels.entry(have.phase()).or_default().push(Change::Delete(have.clone()));
        }
    }
    let mut out: Vec<Vec<Change>> = adds.into_values().collect();
    out.extend(dels.into_values().rev());
    out
}

/// Applies a successful batch to the installed state.
pub fn apply(installed: &mut BTreeMap<Key, Entry>, batch: &[Change]) {
    for c in batch {
        match c {
            Change::Insert(e) | Change::Modify(e) => {
                installed.insert(e.key(), e.clone());
            }
            Change::Delete(e) => {
                installed.remove(&e.key());
            }
        }
    }
}

/// Counts of a set of batches: (inserts, modifies, deletes).
pub fn counts(batches: &[Vec<Change>]) -> (usize, usize, usize) {
    let mut c = (0, 0, 0);
    for ch in batches.iter().flatten() {
        match ch {
            Change::Insert(_) => c.0 += 1,
            Change::Modify(_) => c.1 += 1,
            Change::Delete(_) => c.2 += 1,
        }
    }
    c
}
