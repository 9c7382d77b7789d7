//! Which planner flow a large-flow report is.
//!
//! A report names a flow as the `steer_flow` table matches it: addresses,
//! UDP source port and destination QP. A NIC that rotates its source port
//! per message (for entropy) shows one queue pair as several such flows,
//! each active in turn; planned apart they would count its load twice,
//! and an entry for one port would not steer the next message. So a queue
//! pair seen under a second source port is steered as its host pair: one
//! `steer_pair` entry carries every port (and any other queue pair
//! between the same two hosts).

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

use metaroce_te::FlowKey;

use super::LargeFlowReport;

/// What [`QpKeys::resolve`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Resolved {
    /// The planner's key for the report.
    pub key: FlowKey,
    /// A per-port flow the host pair now replaces, if this report
    /// revealed the rotation.
    pub replaces: Option<FlowKey>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct QpKeys {
    /// The first source port each queue pair was seen with.
    first_sport: HashMap<(Ipv4Addr, Ipv4Addr, u32), u16>,
    /// Host pairs steered as pairs.
    pairs: HashSet<(Ipv4Addr, Ipv4Addr)>,
}

impl QpKeys {
    pub fn resolve(&mut self, r: &LargeFlowReport) -> Resolved {
        let pair = (r.src, r.dst);
        if self.pairs.contains(&pair) {
            return Resolved { key: FlowKey::pair(r.src, r.dst), replaces: None };
        }
        match self.first_sport.get(&(r.src, r.dst, r.qp)) {
            Some(&sport) if sport != r.sport => {
                self.pairs.insert(pair);
                self.first_sport.retain(|&(s, d, _), _| (s, d) != pair);
                let replaces = Some(FlowKey::flow(r.src, r.dst, sport, r.qp));
                Resolved { key: FlowKey::pair(r.src, r.dst), replaces }
            }
            Some(_) => Resolved { key: r.key(), replaces: None },
            None => {
                self.first_sport.insert((r.src, r.dst, r.qp), r.sport);
                Resolved { key: r.key(), replaces: None }
            }
        }
    }

    /// A flow was forgotten: its port (or its pair) may be seen afresh.
    pub fn forget(&mut self, key: &FlowKey) {
        match *key {
            FlowKey::Flow { src, dst, qp, .. } => _ = self.first_sport.remove(&(src, dst, qp)),
            FlowKey::Pair { src, dst } => _ = self.pairs.remove(&(src, dst)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(sport: u16, qp: u32) -> LargeFlowReport {
        LargeFlowReport {
            switch: 0,
            src: Ipv4Addr::new(10, 0, 1, 1),
            dst: Ipv4Addr::new(10, 0, 2, 1),
            sport,
            qp,
            egress_port: 3,
            bytes: 1 << 20,
            window_ns: 100_000,
            collision: false,
        }
    }

    #[test]
    fn a_queue_pair_under_a_second_port_becomes_its_host_pair() {
        let mut k = QpKeys::default();
        let a = k.resolve(&report(49152, 7));
        assert_eq!(a, Resolved { key: report(49152, 7).key(), replaces: None });
        assert_eq!(k.resolve(&report(49152, 7)).key, a.key, "the same port: the same flow");
        let other_qp = k.resolve(&report(49153, 8));
        assert_eq!(other_qp.key, report(49153, 8).key(), "another queue pair is another flow");
        let b = k.resolve(&report(49160, 7));
        let pair = FlowKey::pair(report(0, 0).src, report(0, 0).dst);
        assert_eq!(b, Resolved { key: pair, replaces: Some(a.key) });
        assert_eq!(k.resolve(&report(49152, 7)).key, pair, "every port of the pair");
        k.forget(&pair);
        assert_eq!(k.resolve(&report(49152, 7)).key, a.key, "forgotten: seen afresh");
    }
}
