//! The flows of a collective pattern over a list of ranks. One function
//! for the job API and the simulator, so both agree on who sends to whom.

use metaroce_topo::HostId;
use serde::Serialize;

/// A traffic pattern over ranks (hosts, in rank order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "pattern", rename_all = "kebab-case")]
pub enum Pattern {
    /// Every rank sends to every other rank.
    AllToAll,
    /// Rank i sends to rank i+1 (and the last to the first).
    RingAllReduce,
    /// Every rank sends to `target`, which is not one of the ranks.
    Incast { target: HostId },
    /// Rank i sends to rank `perm[i]`.
    Permutation { perm: Vec<usize> },
}

impl Pattern {
    pub fn name(&self) -> &'static str {
        match self {
            Pattern::AllToAll => "all-to-all",
            Pattern::RingAllReduce => "ring-allreduce",
            Pattern::Incast { .. } => "incast",
            Pattern::Permutation { .. } => "permutation",
        }
    }

    /// The permutation that shifts every rank by `shift` (mod `ranks`).
    pub fn shift(ranks: usize, shift: usize) -> Pattern {
        Pattern::Permutation { perm: (0..ranks).map(|i| (i + shift) % ranks.max(1)).collect() }
    }

    /// How many flows `pairs` yields for `ranks` ranks, without building them.
    pub fn flow_count(&self, ranks: usize) -> usize {
        match self {
            Pattern::AllToAll => ranks.saturating_mul(ranks.saturating_sub(1)),
            Pattern::RingAllReduce if ranks == 2 => 2,
            Pattern::RingAllReduce => {
                if ranks < 2 {
                    0
                } else {
                    ranks
                }
            }
            Pattern::Incast { .. } => ranks,
            Pattern::Permutation { perm } => {
                perm.iter().enumerate().filter(|&(i, &p)| p != i && p < ranks).count()
            }
        }
    }

    /// `(source, destination)` hosts of every flow, in the simulator's
    /// order: all-to-all source-major with destinations ascending;
    /// incast and permutation by rank; the ring by rank. Rank pairs that
    /// map a rank to itself are left out.
    pub fn pairs(&self, ranks: &[HostId]) -> Vec<(HostId, HostId)> {
        let n = ranks.len();
        match self {
            Pattern::AllToAll => (0..n)
                .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (ranks[i], ranks[j])))
                .collect(),
            Pattern::RingAllReduce if n < 2 => Vec::new(),
            Pattern::RingAllReduce => (0..n).map(|i| (ranks[i], ranks[(i + 1) % n])).collect(),
            Pattern::Incast { target } => ranks.iter().map(|&h| (h, *target)).collect(),
            Pattern::Permutation { perm } => perm
                .iter()
                .enumerate()
                .filter(|&(i, &p)| p != i && p < n)
                .map(|(i, &p)| (ranks[i], ranks[p]))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_expand_as_the_simulator_does() {
        let r = [10, 11, 12];
        assert_eq!(
            Pattern::AllToAll.pairs(&r),
            vec![(10, 11), (10, 12), (11, 10), (11, 12), (12, 10), (12, 11)]
        );
        assert_eq!(Pattern::RingAllReduce.pairs(&r), vec![(10, 11), (11, 12), (12, 10)]);
        assert_eq!(Pattern::Incast { target: 9 }.pairs(&r), vec![(10, 9), (11, 9), (12, 9)]);
        assert_eq!(Pattern::shift(3, 2).pairs(&r), vec![(10, 12), (11, 10), (12, 11)]);
        for p in
            [Pattern::AllToAll, Pattern::RingAllReduce, Pattern::Incast { target: 9 }, Pattern::shift(3, 1)]
        {
            assert_eq!(p.flow_count(3), p.pairs(&r).len(), "{}", p.name());
        }
        assert_eq!(Pattern::RingAllReduce.pairs(&r[..2]), vec![(10, 11), (11, 10)]);
        assert_eq!(Pattern::RingAllReduce.flow_count(2), 2);
    }
}
