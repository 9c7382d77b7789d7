//! The balanced assignment, as a pure decision over one read of etcd: which
//! switches this instance tries to take and which one it gives up.
//!
//! With `n` switches and `m` live instances each instance aims at between
//! `low = n / m` and `high = ceil(n / m)` switches. An instance below `low`
//! is *needy*. An instance takes unowned switches (a dead owner's, whose
//! lease lapsed, or released ones) while it is needy, or while it is below
//! `high` and nobody else is needy; it gives one switch up while it is above
//! `high`, or above `low` while someone else is needy. So a newcomer gets
//! its share, and a released switch goes to the needy instance rather than
//! back to the one that released it. Contention is harmless: the claim is
//! a transaction, and the lease decides.

use std::collections::BTreeMap;

/// One read of the shard keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// Live instances (their member keys exist), by name.
    pub members: Vec<String>,
    /// Switch index → (owner name, creation revision of the owner key).
    pub owners: BTreeMap<usize, (String, i64)>,
}

/// What to do after a read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Moves {
    /// Unowned switches to claim, in order, at most as many as wanted.
    pub take: Vec<usize>,
    /// One owned switch to give up (a newcomer or a needy instance wants it).
    pub release: Option<usize>,
}

/// The decision for instance `me` over `n` switches.
pub fn decide(n: usize, seen: &Seen, me: &str) -> Moves {
    let mut live: Vec<&str> = seen.members.iter().map(String::as_str).collect();
    if !live.contains(&me) {
        // Our member key is on its way: count us.
        live.push(me);
    }
    let m = live.len().max(1);
    let (low, high) = (n / m, n.div_ceil(m));
    let count = |who: &str| seen.owners.values().filter(|(o, _)| o == who).count();
    let mine = count(me);
    let other_needy = live.iter().any(|&o| o != me && count(o) < low);
    let wanted = if mine < low || (mine < high && !other_needy) { high - mine } else { 0 };
    let free: Vec<usize> = (0..n).filter(|s| !seen.owners.contains_key(s)).collect();
    let take = spread(&free, me).into_iter().take(wanted).collect();
    let release = if mine > high || (mine > low && other_needy) {
        // The most recently claimed: the others have been stable longest.
        seen.owners.iter().filter(|(_, (o, _))| o == me).max_by_key(|(_, (_, rev))| *rev).map(|(s, _)| *s)
    } else {
        None
    };
    Moves { take, release }
}

/// `free` rotated by a hash of the name, so that instances starting
/// together try different switches first instead of all racing for one.
fn spread(free: &[usize], me: &str) -> Vec<usize> {
    if free.is_empty() {
        return Vec::new();
    }
    let h =
        me.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let at = usize::try_from(h % free.len() as u64).unwrap_or(0);
    free[at..].iter().chain(&free[..at]).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(members: &[&str], owners: &[(usize, &str)]) -> Seen {
        Seen {
            members: members.iter().map(|s| s.to_string()).collect(),
            owners: owners
                .iter()
                .enumerate()
                .map(|(i, (s, o))| (*s, (o.to_string(), i as i64 + 1)))
                .collect(),
        }
    }

    /// Plays rounds of every instance in turn against one shared view,
    /// applying its moves, until nothing moves.
    fn settle(n: usize, members: &[&str], mut owners: BTreeMap<usize, (String, i64)>) -> Seen {
        let mut rev = 100;
        for _ in 0..100 {
            let mut moved = false;
            for me in members {
                let s =
                    Seen { members: members.iter().map(|x| x.to_string()).collect(), owners: owners.clone() };
                let mv = decide(n, &s, me);
                for t in mv.take {
                    rev += 1;
                    owners.insert(t, (me.to_string(), rev));
                    moved = true;
                }
                if let Some(r) = mv.release {
                    owners.remove(&r);
                    moved = true;
                }
            }
            if !moved {
                return Seen { members: members.iter().map(|x| x.to_string()).collect(), owners };
            }
        }
        panic!("no settling in 100 rounds: {owners:?}");
    }

    fn counts(s: &Seen) -> Vec<usize> {
        s.members.iter().map(|m| s.owners.values().filter(|(o, _)| o == m).count()).collect()
    }

    #[test]
    fn shard_a_lone_instance_takes_every_switch() {
        let mv = decide(4, &seen(&[], &[]), "a");
        let mut t = mv.take.clone();
        t.sort_unstable();
        assert_eq!(t, [0, 1, 2, 3]);
        assert_eq!(mv.release, None);
    }

    #[test]
    fn shard_instances_settle_balanced_from_any_start_and_every_switch_has_an_owner() {
        for n in [1usize, 2, 4, 5, 7, 16, 33] {
            for m in 1..=5usize {
                let names: Vec<String> = (0..m).map(|i| format!("ctl{i}")).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                // Start: the first instance holds everything (it came up alone).
                let all = (0..n).map(|s| (s, (names[0].clone(), s as i64 + 1))).collect();
                let end = settle(n, &refs, all);
                assert_eq!(end.owners.len(), n, "n={n} m={m}: every switch owned");
                let c = counts(&end);
                let (lo, hi) = (c.iter().min().unwrap(), c.iter().max().unwrap());
                assert!(hi - lo <= 1, "n={n} m={m}: balanced {c:?}");
                // And from nothing at all.
                let end = settle(n, &refs, BTreeMap::new());
                assert_eq!(end.owners.len(), n);
                let c = counts(&end);
                assert!(c.iter().max().unwrap() - c.iter().min().unwrap() <= 1, "n={n} m={m}: {c:?}");
            }
        }
    }

    #[test]
    fn shard_a_dead_instance_s_switches_are_adopted_by_the_survivors() {
        // c died: its member key and owner keys lapsed with its lease.
        let owners = [(0, "a"), (1, "a"), (2, "b"), (3, "b")];
        let end = settle(6, &["a", "b"], seen(&[], &owners).owners);
        assert_eq!(end.owners.len(), 6);
        assert_eq!(counts(&end), [3, 3]);
        // The survivors kept what they had.
        for (s, o) in owners {
            assert_eq!(end.owners[&s].0, o);
        }
    }

    #[test]
    fn shard_a_full_instance_gives_one_switch_to_a_newcomer_and_does_not_take_it_back() {
        let s = seen(&["a", "b", "c"], &[(0, "a"), (1, "a"), (2, "b"), (3, "b")]);
        // c holds nothing (below low = 1): a and b are above low.
        let a = decide(4, &s, "a");
        assert_eq!(a.release, Some(1), "the most recently claimed");
        let s = seen(&["a", "b", "c"], &[(0, "a"), (2, "b"), (3, "b")]);
        assert!(decide(4, &s, "a").take.is_empty(), "c is needy: a leaves switch 1 to it");
        assert_eq!(decide(4, &s, "c").take, [1]);
    }
}
