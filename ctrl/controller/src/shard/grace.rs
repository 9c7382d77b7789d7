//! A new planner's steer grace. When the planner changes, the owners stay:
//! no agent takes a new term, so the agent's own grace after a takeover
//! ([`crate::agent`]) does not apply. The new planner has not yet
//! registered the jobs it restores from etcd, nor seen the large-flow
//! digests its predecessor placed flows for; its first plans lack their
//! steer entries, and the owners would delete them and write them again a
//! moment later. So for `--flow-idle-ms` after its election the planner
//! publishes, beside its own plan, the steer entries its predecessor last
//! published that its plan lacks, as long as the next hop they point at is
//! still in the plan (never onto a failed link). An entry its plan has
//! claimed since is the plan's. Then it publishes its plans alone.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use metaroce_pipeline::{Entry, Key};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::agent::{Desired, Goal, Wanted};
use crate::place::Steer;
use crate::plan::SwitchPlan;

/// The predecessor's steer entries, kept until `until`.
#[derive(Debug)]
pub struct Held {
    pub until: Instant,
    steer: BTreeMap<usize, Arc<Steer>>,
}

impl Held {
    /// At the election: what the predecessor last published (the desired
    /// state every instance follows), kept for `grace`.
    pub fn at_election(previous: &[watch::Receiver<Desired>], grace: Duration) -> Option<Held> {
        let mut steer = BTreeMap::new();
        for (s, rx) in previous.iter().enumerate() {
            if let Some(Wanted { target: Goal::Plan(p), .. }) = rx.borrow().as_deref() {
                if !p.steer.is_empty() {
                    steer.insert(s, p.steer.clone());
                }
            }
        }
        (!steer.is_empty() && !grace.is_zero()).then(|| Held { until: Instant::now() + grace, steer })
    }

    /// Switch `s`'s desired state with the held steer entries added.
    pub fn merge(&self, s: usize, w: &Wanted) -> Wanted {
        match (&w.target, self.steer.get(&s)) {
            (Goal::Plan(p), Some(old)) => Wanted { target: Goal::Plan(keep(p, old)), caused_at: w.caused_at },
            _ => w.clone(),
        }
    }
}

/// `plan` with the entries of `old` it lacks whose next hop it has.
pub fn keep(plan: &SwitchPlan, old: &Steer) -> SwitchPlan {
    let has_nhop = |id: u16| plan.fixed.iter().any(|e| nhop_key(e) == Some(id));
    let mut extra = Vec::new();
    for (flow, hop) in old.iter() {
        if !plan.steer.contains_key(flow) && has_nhop(hop.nhop_id) {
            extra.push((*flow, hop.clone()));
        }
    }
    if extra.is_empty() {
        return plan.clone();
    }
    let mut steer = plan.steer.as_ref().clone();
    steer.extend(extra);
    SwitchPlan { steer: Arc::new(steer), ..plan.clone() }
}

/// The next-hop id of a next-hop entry.
fn nhop_key(e: &Entry) -> Option<u16> {
    match e.key() {
        Key::Nhop(n) => Some(n),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::place::SteerHop;
    use metaroce_te::FlowKey;
    use std::net::Ipv4Addr;

    fn flow(n: u8) -> FlowKey {
        FlowKey::pair(Ipv4Addr::new(10, 0, 0, n), Ipv4Addr::new(10, 0, 1, n))
    }

    fn hop(port: u16) -> SteerHop {
        SteerHop { port, nhop_id: crate::plan::nhop_id(port), downstream: vec![] }
    }

    /// A plan whose fixed entries are those of a real switch (its next hops).
    fn real_plan() -> SwitchPlan {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../topologies/mininet-2x2.yaml"
        ))
        .unwrap();
        let topo = metaroce_topo::load_str(&text, "t").unwrap();
        let routing = metaroce_topo::Routing::compute(&topo);
        let settings = crate::plan::Settings::default();
        crate::plan::switch_plan(&topo, &routing, &Default::default(), &settings, 0)
    }

    #[test]
    fn shard_a_new_planner_keeps_its_predecessor_s_steer_entries_onto_live_next_hops() {
        let plan = real_plan();
        let ports: Vec<u16> = plan.fixed.iter().filter_map(nhop_key).map(|id| id - 1).collect();
        assert!(!ports.is_empty());
        let mut old = Steer::new();
        old.insert(flow(1), hop(ports[0]));
        // A next hop the plan does not have (a failed link): not kept.
        old.insert(flow(2), hop(999));
        // A flow the new plan steers itself: the plan's choice wins.
        old.insert(flow(3), hop(ports[0]));
        let mut mine = Steer::new();
        mine.insert(flow(3), hop(*ports.last().unwrap()));
        let plan = SwitchPlan { steer: Arc::new(mine), ..plan };
        let kept = keep(&plan, &old);
        assert_eq!(kept.steer.get(&flow(1)), Some(&hop(ports[0])));
        assert_eq!(kept.steer.get(&flow(2)), None);
        assert_eq!(kept.steer.get(&flow(3)), Some(&hop(*ports.last().unwrap())));
        assert_eq!(kept.routes, plan.routes);
    }
}
