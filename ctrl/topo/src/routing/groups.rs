//! Per-switch tables of weighted next-hop groups, shared by every route
//! whose next hops and weights are the same.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use serde::Serialize;

use crate::model::{HostId, SwitchId};

pub type GroupId = u32;

/// Where a member sends packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NextHop {
    Switch(SwitchId),
    Host(HostId),
}

/// One member of a group: an egress port and its share of traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Member {
    pub port: u16,
    pub next: NextHop,
    /// Integer weight, proportional to the capacity this port leads to
    /// (reduced by the gcd and capped at the routing's `max_weight`). A
    /// group may serve several destinations whose capacities differ but
    /// whose weights agree; [`super::Routing::member_capacities`] gives the
    /// capacities toward one destination.
    pub weight: u32,
}

/// A weighted next-hop group. Never empty: a destination with no next hop
/// has no route at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    pub members: Vec<Member>,
}

impl Group {
    /// `(port, weight)` pairs: what identifies the group on the switch.
    pub fn key(&self) -> Vec<(u16, u32)> {
        self.members.iter().map(|m| (m.port, m.weight)).collect()
    }
}

#[derive(Debug, Clone)]
struct Entry {
    group: Group,
    refs: u32,
}

/// A fast, non-cryptographic hasher for group keys: they come from our own
/// computation, not from an adversary, and hashing them is a hot path.
#[derive(Debug, Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u16(&mut self, v: u16) {
        self.write_u64(u64::from(v));
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// The groups of one switch, deduplicated by `(port, weight)` content.
#[derive(Debug, Clone, Default)]
pub struct GroupTable {
    by_key: HashMap<Vec<(u16, u32)>, GroupId, BuildHasherDefault<KeyHasher>>,
    groups: BTreeMap<GroupId, Entry>,
    next_id: GroupId,
    /// The group most recently acquired: consecutive destinations usually
    /// need the same group, and a comparison is cheaper than a hash.
    last: Option<GroupId>,
}

impl GroupTable {
    /// Takes a reference on the group with these members, creating it if
    /// needed. `key` must be `(port, weight)` of `members`, sorted by port.
    pub fn acquire(&mut self, key: &[(u16, u32)], members: impl FnOnce() -> Vec<Member>) -> (GroupId, bool) {
        if let Some(id) = self.last {
            if let Some(e) = self.groups.get_mut(&id).filter(|e| same(&e.group, key)) {
                e.refs += 1;
                return (id, false);
            }
        }
        if let Some(&id) = self.by_key.get(key) {
            self.last = Some(id);
            if let Some(e) = self.groups.get_mut(&id) {
                e.refs += 1;
                return (id, false);
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.by_key.insert(key.to_vec(), id);
        self.groups.insert(id, Entry { group: Group { members: members() }, refs: 1 });
        self.last = Some(id);
        (id, true)
    }

    /// Drops a reference; returns true when the group is gone.
    pub fn release(&mut self, id: GroupId) -> bool {
        let Some(e) = self.groups.get_mut(&id) else { return false };
        e.refs = e.refs.saturating_sub(1);
        if e.refs > 0 {
            return false;
        }
        if let Some(e) = self.groups.remove(&id) {
            self.by_key.remove(&e.group.key());
        }
        true
    }

    /// Takes over every group of `other` (with its references), reusing
    /// groups that already exist here; returns other's ids to ours.
    pub fn absorb(&mut self, other: GroupTable) -> HashMap<GroupId, GroupId> {
        let mut map = HashMap::with_capacity(other.groups.len());
        for (theirs, entry) in other.groups {
            let key = entry.group.key();
            let mine = match self.by_key.get(&key) {
                Some(&id) => {
                    if let Some(e) = self.groups.get_mut(&id) {
                        e.refs += entry.refs;
                    }
                    id
                }
                None => {
                    let id = self.next_id;
                    self.next_id += 1;
                    self.by_key.insert(key, id);
                    self.groups.insert(id, entry);
                    id
                }
            };
            map.insert(theirs, mine);
        }
        map
    }

    pub fn get(&self, id: GroupId) -> Option<&Group> {
        self.groups.get(&id).map(|e| &e.group)
    }

    /// True when group `id` has exactly these `(port, weight)` pairs.
    pub fn has_key(&self, id: GroupId, key: &[(u16, u32)]) -> bool {
        self.groups.get(&id).is_some_and(|e| same(&e.group, key))
    }

    pub fn iter(&self) -> impl Iterator<Item = (GroupId, &Group)> {
        self.groups.iter().map(|(id, e)| (*id, &e.group))
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

fn same(g: &Group, key: &[(u16, u32)]) -> bool {
    g.members.len() == key.len() && g.members.iter().zip(key).all(|(m, k)| (m.port, m.weight) == *k)
}

/// Integer weights proportional to `caps`: divided by their gcd, and scaled
/// down (never to zero) when the largest would exceed `max_weight`.
pub fn weights(caps: &[u64], max_weight: u32, out: &mut Vec<u32>) {
    out.clear();
    if caps.windows(2).all(|w| w[0] == w[1]) {
        out.resize(caps.len(), 1);
        return;
    }
    let g = caps.iter().copied().fold(0u64, gcd).max(1);
    let top = caps.iter().copied().max().unwrap_or(1).max(1);
    let max_weight = u64::from(max_weight.max(1));
    if top / g <= max_weight {
        out.extend(caps.iter().map(|c| u32::try_from(c / g).unwrap_or(u32::MAX)));
    } else {
        out.extend(caps.iter().map(|&c| {
            let w = (u128::from(c) * u128::from(max_weight) + u128::from(top) / 2) / u128::from(top);
            u32::try_from(w.max(1)).unwrap_or(u32::MAX)
        }));
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(caps: &[u64], max: u32) -> Vec<u32> {
        let mut out = Vec::new();
        weights(caps, max, &mut out);
        out
    }

    #[test]
    fn weights_reduce_by_gcd() {
        assert_eq!(w(&[400, 400, 200], 64), vec![2, 2, 1]);
        assert_eq!(w(&[100, 100], 64), vec![1, 1]);
        assert_eq!(w(&[7], 64), vec![1]);
    }

    #[test]
    fn weights_scale_but_never_vanish() {
        assert_eq!(w(&[1000, 1], 16), vec![16, 1]);
        assert_eq!(w(&[97, 89], 16), vec![16, 15]);
    }

    #[test]
    fn table_dedupes_and_counts_references() {
        let mut t = GroupTable::default();
        let m = || vec![Member { port: 1, next: NextHop::Switch(0), weight: 1 }];
        let (a, new_a) = t.acquire(&[(1, 1)], m);
        let (b, new_b) = t.acquire(&[(1, 1)], m);
        assert_eq!((a, new_a, new_b), (b, true, false));
        assert!(!t.release(a));
        assert!(t.release(a));
        assert!(t.is_empty());
        let (c, _) = t.acquire(&[(1, 1)], m);
        assert_ne!(c, a, "ids are not reused, so a stale id never names a new group");
    }
}
