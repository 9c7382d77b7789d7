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
    use std::cmp::Ordering;
    let mut adds: BTreeMap<Phase, Vec<Change>> = BTreeMap::new();
    let mut dels: BTreeMap<Phase, Vec<Change>> = BTreeMap::new();
    let mut add = |want: &Entry, change: fn(Entry) -> Change| {
        adds.entry(want.phase()).or_default().push(change(want.clone()))
    };
    let mut del = |k: &Key, have: &Entry| {
        if !k.is_default() {
            dels.entry(have.phase()).or_default().push(Change::Delete(have.clone()));
        }
    };
    // Both maps are sorted by key: one walk side by side, not a lookup
    // per key (a switch holds thousands of entries).
    let (mut want, mut have) = (desired.iter().peekable(), installed.iter().peekable());
    loop {
        let order = match (want.peek(), have.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some((kw, _)), Some((kh, _))) => kw.cmp(kh),
        };
        match order {
            Ordering::Less => {
                let Some((_, w)) = want.next() else { break };
                add(w, if w.is_default() { Change::Modify } else { Change::Insert });
            }
            Ordering::Greater => {
                let Some((k, h)) = have.next() else { break };
                del(k, h);
            }
            Ordering::Equal => {
                let (Some((_, w)), Some((_, h))) = (want.next(), have.next()) else { break };
                if w != h {
                    add(w, Change::Modify);
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The difference by a lookup per desired key, as it was computed
    /// before the side-by-side walk: the reference the walk must match.
    fn by_lookup(desired: &BTreeMap<Key, Entry>, installed: &BTreeMap<Key, Entry>) -> Vec<Vec<Change>> {
        let mut adds: BTreeMap<Phase, Vec<Change>> = BTreeMap::new();
        for (k, want) in desired {
            let change = match installed.get(k) {
                Some(have) if have == want => continue,
                Some(_) => Change::Modify(want.clone()),
                None if want.is_default() => Change::Modify(want.clone()),
                None => Change::Insert(want.clone()),
            };
            adds.entry(want.phase()).or_default().push(change);
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

    /// A small state drawn from `seed`: next hops, members, a keyless
    /// default, each present or not and with one of two values.
    fn state(seed: &mut u64) -> BTreeMap<Key, Entry> {
        let mut next = || {
            *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (*seed >> 33) as u32
        };
        let mut out = BTreeMap::new();
        for id in 0..12u16 {
            match next() % 3 {
                0 => {}
                v => {
                    let e = Entry::Nhop { id, port: v as u16, src_mac: [0; 6], dst_mac: [1; 6] };
                    out.insert(e.key(), e);
                }
            }
            if next() % 2 == 0 {
                let e = Entry::Member { id: u32::from(id), nhop: (next() % 2) as u16 };
                out.insert(e.key(), e);
            }
        }
        if next() % 2 == 0 {
            let e = Entry::Config { switch_id: next() % 2, flowlet_timeout_us: 100 };
            out.insert(e.key(), e);
        }
        out
    }

    #[test]
    fn the_side_by_side_walk_matches_a_lookup_per_key() {
        let mut seed = 7;
        for _ in 0..2000 {
            let (desired, installed) = (state(&mut seed), state(&mut seed));
            let walk = diff(&desired, &installed);
            assert_eq!(walk, by_lookup(&desired, &installed));
            let mut applied = installed.clone();
            for batch in &walk {
                apply(&mut applied, batch);
            }
            // What the writes leave: the desired state, and a keyless
            // default the desired state leaves out, never deleted.
            applied.retain(|k, _| desired.contains_key(k) || !k.is_default());
            assert_eq!(applied, desired);
            assert!(diff(&desired, &desired).is_empty());
        }
    }
}
