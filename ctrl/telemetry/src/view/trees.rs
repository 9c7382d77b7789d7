//! Congestion trees: which congested ports feed a congested port. A port
//! feeds a switch when its link leads into that switch, so a congested
//! port's tree is the congested ports on neighbors whose links lead into
//! its switch, and theirs, transitively. This is how congestion spreads
//! upstream under PFC: the root is where it starts, and relieving the
//! root relieves the tree.
//!
//! A hop never goes back to the switch it came from (valley-free, no
//! U-turns), so a feeder on the switch the congested port leads to is not
//! part of its tree. Trees may share members: a port feeding a switch with
//! two congested roots feeds both.

use std::collections::{BTreeMap, BTreeSet};

use crate::heat::PortKey;
use crate::view::types::CongestionTree;

/// The fabric's links, indexed both ways.
#[derive(Debug, Clone, Default)]
pub(crate) struct Links {
    /// Switch → ports on neighbors whose link leads into it.
    feeders: BTreeMap<usize, BTreeSet<PortKey>>,
    /// Port → the switch its link leads to.
    peer: BTreeMap<PortKey, usize>,
}

impl Links {
    /// `links` as ((switch, port), (peer switch, peer port)); each link
    /// carries traffic both ways, listing it once or twice is the same.
    pub(crate) fn new(links: &[(PortKey, PortKey)]) -> Self {
        let mut l = Links::default();
        for &(a, b) in links {
            l.feeders.entry(b.switch).or_default().insert(a);
            l.feeders.entry(a.switch).or_default().insert(b);
            l.peer.insert(a, b.switch);
            l.peer.insert(b, a.switch);
        }
        l
    }

    /// Congested ports that `port`'s traffic may enter next (not U-turns).
    fn downstream<'a>(
        &'a self,
        port: PortKey,
        congested: &'a BTreeSet<PortKey>,
    ) -> impl Iterator<Item = PortKey> + 'a {
        let next = self.peer.get(&port).copied();
        let on_next = next
            .map(|s| congested.range(PortKey { switch: s, port: 0 }..=PortKey { switch: s, port: u16::MAX }));
        on_next.into_iter().flatten().copied().filter(move |q| self.peer.get(q) != Some(&port.switch))
    }

    /// The tree of congested ports feeding `root`, breadth first.
    pub(crate) fn tree(&self, root: PortKey, congested: &BTreeSet<PortKey>) -> CongestionTree {
        let mut seen = BTreeSet::from([root]);
        let mut frontier = vec![root];
        let mut depth = 0;
        while !frontier.is_empty() {
            let mut next = vec![];
            for p in frontier {
                let back = self.peer.get(&p).copied();
                let Some(feeders) = self.feeders.get(&p.switch) else { continue };
                for &f in feeders {
                    // Traffic from f's switch does not turn back into it.
                    if Some(f.switch) != back && congested.contains(&f) && seen.insert(f) {
                        next.push(f);
                    }
                }
            }
            if !next.is_empty() {
                depth += 1;
            }
            frontier = next;
        }
        seen.remove(&root);
        CongestionTree { root, members: seen.into_iter().collect(), depth }
    }

    /// One tree per root: a congested port that feeds no other congested
    /// port. Congested ports left over (a cycle, which a valley-free fabric
    /// does not have) get trees rooted at their smallest port, so every
    /// congested port is in some tree.
    pub(crate) fn trees(&self, congested: &BTreeSet<PortKey>) -> Vec<CongestionTree> {
        let mut covered = BTreeSet::new();
        let mut out = vec![];
        for &p in congested {
            if self.downstream(p, congested).next().is_none() {
                let t = self.tree(p, congested);
                covered.insert(p);
                covered.extend(t.members.iter().copied());
                out.push(t);
            }
        }
        while let Some(&p) = congested.iter().find(|p| !covered.contains(p)) {
            let t = self.tree(p, congested);
            covered.insert(p);
            covered.extend(t.members.iter().copied());
            out.push(t);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(switch: usize, port: u16) -> PortKey {
        PortKey { switch, port }
    }

    /// Leaves 0, 1, 2 (hosts on ports 1, 2), spines 10, 11. Leaf l port 3
    /// goes to spine 10 port l+1, port 4 to spine 11 port l+1.
    fn clos() -> Links {
        let mut links = vec![];
        for leaf in 0..3u16 {
            links.push((k(usize::from(leaf), 3), k(10, leaf + 1)));
            links.push((k(usize::from(leaf), 4), k(11, leaf + 1)));
        }
        Links::new(&links)
    }

    #[test]
    fn incast_tree_roots_at_the_host_port_and_climbs_two_levels() {
        let l = clos();
        // Host port 1 of leaf 2 is hot; spine 10's port to leaf 2 feeds it,
        // and leaves 0 and 1's uplinks to spine 10 feed that.
        let congested: BTreeSet<_> = [k(2, 1), k(10, 3), k(0, 3), k(1, 3)].into();
        let trees = l.trees(&congested);
        assert_eq!(
            trees,
            vec![CongestionTree { root: k(2, 1), members: vec![k(0, 3), k(1, 3), k(10, 3)], depth: 2 }]
        );
        // The tree of an inner port is its own subtree.
        assert_eq!(l.tree(k(10, 3), &congested).members, vec![k(0, 3), k(1, 3)]);
    }

    #[test]
    fn a_u_turn_is_not_a_feeder() {
        let l = clos();
        // Spine 10's port back down to leaf 0 does not feed leaf 0's uplink to spine 10.
        let congested: BTreeSet<_> = [k(0, 3), k(10, 1)].into();
        let trees = l.trees(&congested);
        assert_eq!(trees.len(), 2);
        assert!(trees.iter().all(|t| t.members.is_empty() && t.depth == 0));
    }

    #[test]
    fn unrelated_hot_ports_are_separate_trees_and_cycles_are_covered() {
        let l = clos();
        let congested: BTreeSet<_> = [k(0, 1), k(1, 2)].into();
        assert_eq!(l.trees(&congested).len(), 2);
        // A ring 0 -> 1 -> 2 -> 0 (not a Clos): no root, still covered.
        let ring = Links::new(&[(k(0, 1), k(1, 2)), (k(1, 1), k(2, 2)), (k(2, 1), k(0, 2))]);
        let congested: BTreeSet<_> = [k(0, 1), k(1, 1), k(2, 1)].into();
        let trees = ring.trees(&congested);
        let covered: BTreeSet<_> = trees.iter().flat_map(|t| t.members.iter().chain([&t.root])).collect();
        assert_eq!(covered.len(), 3);
    }
}
