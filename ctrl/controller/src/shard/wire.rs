//! Desired state and forwarded events as JSON, for etcd.
//!
//! A plan travels as its parts before group ids are assigned (fixed
//! entries, routes, steer entries, pairs): the owner assigns ids against
//! what its switch holds, as a single controller does. The times a
//! reaction is measured by (`Wanted::caused_at`, digests' arrival) are
//! this process's clock and do not travel.

use std::net::Ipv4Addr;
use std::sync::Arc;

use metaroce_pipeline::{DrainPairDigest, DrainPairKind, Entry, FlowKey, LargeFlowDigest, QueueDigest};
use metaroce_te::FlowKey as TeFlowKey;
use metaroce_topo::SwitchId;
use serde::{Deserialize, Serialize};

use crate::agent::{Goal, Wanted};
use crate::place::SteerHop;
use crate::plan::SwitchPlan;

/// A route: prefix and members `(nhop id, weight)`.
pub type WireRoute = ((Ipv4Addr, u8), Vec<(u16, u32)>);
/// A steer entry: flow, port, next hop id, downstream `(switch, port)`s.
pub type WireSteer = (TeFlowKey, u16, u16, Vec<(SwitchId, u16)>);
/// A large-flow digest: `(switch_id, flow, egress_port, bytes, window_us,
/// slot, collision, timestamp)`.
pub type WireLargeFlow = (u32, FlowKey, u16, u32, u32, u16, bool, u64);

/// A switch's desired state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireGoal {
    Plan { fixed: Vec<Entry>, routes: Vec<WireRoute>, steer: Vec<WireSteer>, pairs: Vec<Entry> },
    Exact(Vec<Entry>),
}

impl WireGoal {
    pub fn of(w: &Wanted) -> Self {
        match &w.target {
            Goal::Plan(p) => WireGoal::Plan {
                fixed: p.fixed.as_ref().clone(),
                routes: p.routes.iter().map(|(k, v)| (*k, v.to_vec())).collect(),
                steer: p.steer.iter().map(|(f, h)| (*f, h.port, h.nhop_id, h.downstream.clone())).collect(),
                pairs: p.pairs.as_ref().clone(),
            },
            Goal::Exact(m) => WireGoal::Exact(m.values().cloned().collect()),
        }
    }

    pub fn wanted(self) -> Wanted {
        let target = match self {
            WireGoal::Plan { fixed, routes, steer, pairs } => Goal::Plan(SwitchPlan {
                fixed: Arc::new(fixed),
                routes: Arc::new(crate::plan::routes_from(routes)),
                steer: Arc::new(
                    steer
                        .into_iter()
                        .map(|(f, port, nhop_id, downstream)| (f, SteerHop { port, nhop_id, downstream }))
                        .collect(),
                ),
                pairs: Arc::new(pairs),
            }),
            WireGoal::Exact(v) => Goal::Exact(v.into_iter().map(|e| (e.key(), e)).collect()),
        };
        Wanted { target, caused_at: None }
    }
}

/// The pushed events of one switch that its owner forwards to the planner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pushed {
    /// `(switch_id, port, depth, timestamp, seq, congested)`.
    Digests(Vec<(u32, u16, u32, u64, u32, bool)>),
    LargeFlows(Vec<WireLargeFlow>),
    /// `(src, dst, qp, psn, timestamp, ack)`.
    DrainPairs(Vec<(Ipv4Addr, Ipv4Addr, u32, u32, u64, bool)>),
    Report(Vec<u8>),
}

impl Pushed {
    /// The forwardable part of an agent's event (`None` for the rest).
    pub fn of(ev: &crate::agent::AgentEvent) -> Option<(usize, Pushed)> {
        use crate::agent::AgentEvent as E;
        Some(match ev {
            E::Digests { switch, digests, .. } => (
                *switch,
                Pushed::Digests(
                    digests
                        .iter()
                        .map(|d| (d.switch_id, d.port, d.depth, d.timestamp, d.seq, d.congested))
                        .collect(),
                ),
            ),
            E::LargeFlows { switch, flows, .. } => (
                *switch,
                Pushed::LargeFlows(
                    flows
                        .iter()
                        .map(|f| {
                            (
                                f.switch_id,
                                f.flow,
                                f.egress_port,
                                f.bytes,
                                f.window_us,
                                f.slot,
                                f.collision,
                                f.timestamp,
                            )
                        })
                        .collect(),
                ),
            ),
            E::DrainPairs { switch, reports } => (
                *switch,
                Pushed::DrainPairs(
                    reports
                        .iter()
                        .map(|r| (r.src, r.dst, r.qp, r.psn, r.timestamp, r.kind == DrainPairKind::Ack))
                        .collect(),
                ),
            ),
            E::Report { switch, frame } => (*switch, Pushed::Report(frame.clone())),
            _ => return None,
        })
    }

    /// The event the planner's state task takes, received now.
    pub fn event(self, switch: usize) -> crate::agent::AgentEvent {
        use crate::agent::AgentEvent as E;
        let received = tokio::time::Instant::now();
        match self {
            Pushed::Digests(v) => E::Digests {
                switch,
                received,
                digests: v
                    .into_iter()
                    .map(|(switch_id, port, depth, timestamp, seq, congested)| QueueDigest {
                        switch_id,
                        port,
                        depth,
                        timestamp,
                        seq,
                        congested,
                    })
                    .collect(),
            },
            Pushed::LargeFlows(v) => E::LargeFlows {
                switch,
                received,
                flows: v
                    .into_iter()
                    .map(|(switch_id, flow, egress_port, bytes, window_us, slot, collision, timestamp)| {
                        LargeFlowDigest {
                            switch_id,
                            flow,
                            egress_port,
                            bytes,
                            window_us,
                            slot,
                            collision,
                            timestamp,
                        }
                    })
                    .collect(),
            },
            Pushed::DrainPairs(v) => E::DrainPairs {
                switch,
                reports: v
                    .into_iter()
                    .map(|(src, dst, qp, psn, timestamp, ack)| DrainPairDigest {
                        src,
                        dst,
                        qp,
                        psn,
                        timestamp,
                        kind: if ack { DrainPairKind::Ack } else { DrainPairKind::Data },
                    })
                    .collect(),
            },
            Pushed::Report(frame) => E::Report { switch, frame },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentEvent;

    #[test]
    fn shard_a_plan_survives_the_trip_through_json() {
        let flow = TeFlowKey::pair(Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 2, 1));
        let mut steer = crate::place::Steer::new();
        steer.insert(flow, SteerHop { port: 3, nhop_id: 4, downstream: vec![(2, 1)] });
        let plan = SwitchPlan {
            fixed: Arc::new(vec![]),
            routes: Arc::new(
                [((Ipv4Addr::new(10, 0, 2, 0), 24), vec![(3, 100), (4, 50)].into())].into_iter().collect(),
            ),
            steer: Arc::new(steer),
            pairs: Arc::new(vec![]),
        };
        let w = Wanted { target: Goal::Plan(plan), caused_at: None };
        let text = serde_json::to_string(&WireGoal::of(&w)).unwrap();
        let back: WireGoal = serde_json::from_str(&text).unwrap();
        assert_eq!(back.wanted(), w);
    }

    #[test]
    fn shard_forwarded_digests_are_the_digests_the_owner_saw() {
        let d = QueueDigest { switch_id: 3, port: 2, depth: 70, timestamp: 12345, seq: 9, congested: true };
        let ev = AgentEvent::Digests { switch: 2, digests: vec![d], received: tokio::time::Instant::now() };
        let (s, p) = Pushed::of(&ev).unwrap();
        let text = serde_json::to_string(&p).unwrap();
        let back: Pushed = serde_json::from_str(&text).unwrap();
        match back.event(s) {
            AgentEvent::Digests { switch, digests, .. } => {
                assert_eq!(switch, 2);
                assert_eq!(digests, [d]);
            }
            other => panic!("{other:?}"),
        }
        assert!(Pushed::of(&AgentEvent::Programmed { switch: 1 }).is_none());
    }
}
