//! Downstream first across switches: a flow's steer entry at a switch is
//! written only once the entries it leads into (the choice hops after it on
//! the flow's path, [`SteerHop::downstream`]) are acknowledged by their
//! switches. Each agent reconciles its own switch on its own, so the order
//! is kept here, in what the state task publishes: a plan's entries whose
//! downstream is not in place yet are held back (the switch keeps what it
//! holds for that flow, if that is still a member of the route's group, or
//! nothing: the route's group forwards it), and published once the
//! downstream switches acknowledge.
//!
//! So a packet never meets half of a new path: upstream of the first new
//! entry it takes the old path; past it, every switch already holds its
//! new entry. Removals are not staged: a packet that reaches a switch
//! whose entry went follows the route's group, which is a valid
//! valley-free path (never one into a failure), only not the planned one.

use std::sync::Arc;

use metaroce_te::FlowKey;
use metaroce_topo::SwitchId;

use crate::place::{Steer, SteerHop};
use crate::plan::{nhop_id, SwitchPlan};

/// The plan switch `s` may be sent now when some of its steer entries must
/// wait; `None` when the whole plan may go (the common case, with no copy).
/// `installed(d, flow)` is the egress port of the steer entry switch `d`
/// acknowledged for `flow`, if any.
pub fn gate(
    s: SwitchId,
    plan: &SwitchPlan,
    installed: impl Fn(SwitchId, &FlowKey) -> Option<u16>,
) -> Option<SwitchPlan> {
    let mut held = false;
    let mut out = Steer::new();
    for (flow, hop) in plan.steer.iter() {
        let have = installed(s, flow);
        let ready =
            have == Some(hop.port) || hop.downstream.iter().all(|&(d, p)| installed(d, flow) == Some(p));
        if ready {
            out.insert(*flow, hop.clone());
            continue;
        }
        held = true;
        // Keep what the switch holds while it is still a member of the
        // route toward the flow's destination; else let the group forward.
        if let Some(port) = have.filter(|&p| member_of_route(plan, flow, p)) {
            out.insert(*flow, SteerHop { port, nhop_id: nhop_id(port), downstream: Vec::new() });
        }
    }
    held.then(|| SwitchPlan {
        fixed: plan.fixed.clone(),
        routes: plan.routes.clone(),
        steer: Arc::new(out),
        pairs: plan.pairs.clone(),
    })
}

/// True when `port` is a member of the plan's longest route to the flow's
/// destination.
fn member_of_route(plan: &SwitchPlan, flow: &FlowKey, port: u16) -> bool {
    let dst = u32::from(flow.dst());
    plan.routes
        .iter()
        .filter(|((addr, len), _)| {
            let mask = if *len == 0 { 0 } else { u32::MAX << (32 - u32::from(*len)) };
            dst & mask == u32::from(*addr) & mask
        })
        .max_by_key(|((_, len), _)| *len)
        .is_some_and(|(_, members)| members.iter().any(|&(n, _)| n == nhop_id(port)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::net::Ipv4Addr;

    fn flow() -> FlowKey {
        FlowKey::pair(Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 9, 1))
    }

    /// Switch 0 pins the flow to port 3, leading to switch 5, which pins it to port 7.
    fn plans() -> (SwitchPlan, SwitchPlan) {
        let mut routes = BTreeMap::new();
        routes.insert((Ipv4Addr::new(10, 0, 9, 0), 24), vec![(nhop_id(3), 1), (nhop_id(4), 1)].into());
        let routes = Arc::new(routes);
        let up = SwitchPlan {
            routes: routes.clone(),
            steer: Arc::new(
                [(flow(), SteerHop { port: 3, nhop_id: nhop_id(3), downstream: vec![(5, 7)] })].into(),
            ),
            ..Default::default()
        };
        let down = SwitchPlan {
            routes,
            steer: Arc::new([(flow(), SteerHop { port: 7, nhop_id: nhop_id(7), downstream: vec![] })].into()),
            ..Default::default()
        };
        (up, down)
    }

    #[test]
    fn an_upstream_entry_waits_for_its_downstream_one() {
        let (up, down) = plans();
        // Nothing installed: the downstream switch may write at once, the upstream one waits.
        assert_eq!(gate(5, &down, |_, _| None), None);
        let u = gate(0, &up, |_, _| None).unwrap();
        assert!(u.steer.is_empty(), "{u:?}");
        // The downstream switch acknowledged: the upstream entry goes out.
        assert_eq!(gate(0, &up, |s, _| (s == 5).then_some(7)), None);
        // A downstream entry to another port is not the one it waits for.
        assert!(gate(0, &up, |s, _| (s == 5).then_some(8)).is_some());
    }

    #[test]
    fn a_held_move_keeps_the_installed_entry_while_it_is_a_member() {
        let (up, _) = plans();
        // Switch 0 holds port 4 (a member): kept until switch 5 is ready.
        let u = gate(0, &up, |s, _| (s == 0).then_some(4)).unwrap();
        assert_eq!(u.steer.get(&flow()).map(|h| h.port), Some(4));
        // Port 9 is no member of the route (its link failed): not kept.
        let u = gate(0, &up, |s, _| (s == 0).then_some(9)).unwrap();
        assert!(u.steer.is_empty());
        // Already installed as planned: nothing to wait for.
        assert_eq!(gate(0, &up, |s, _| (s == 0).then_some(3)), None);
    }
}
