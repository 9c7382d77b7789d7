//! Re-planning: the switches a decision touched get their new plans, and
//! one switch's routes are re-planned in place after a decision that
//! re-weighted a few destinations.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use metaroce_pipeline::Entry;
use metaroce_topo::{Routing, SwitchId};

use super::Core;
use crate::plan::{self, SwitchPlan};

impl Core {
    /// Re-plans the switches `touched` (every switch when a re-plan of
    /// everything is due); `changed` holds the (switch, leaf) routes whose
    /// weights the policy changed. Returns the plans that moved.
    pub(super) fn replan(
        &mut self,
        touched: BTreeSet<SwitchId>,
        changed: &BTreeSet<(SwitchId, SwitchId)>,
    ) -> Vec<(SwitchId, SwitchPlan)> {
        let mut out = Vec::new();
        if self.pinned {
            return out;
        }
        let all = std::mem::take(&mut self.replan_all);
        // Learnt pairs are written in every mode, like the fixed entries.
        let paired = self.pairs.take_dirty();
        let switches: Vec<SwitchId> = if all {
            (0..self.topo.switches.len()).collect()
        } else if self.mode.writes() {
            touched.union(&paired).copied().collect()
        } else {
            paired.into_iter().collect()
        };
        if switches.is_empty() {
            return out;
        }
        if all {
            self.fixed = vec![None; self.topo.switches.len()];
        }
        let writes = self.mode.writes();
        let state = &self.state;
        // The weights in force: the policy's overrides in `act` mode, none otherwise.
        let overrides = |s: SwitchId, leaf: SwitchId| {
            let w = state.desired(s, leaf).filter(|_| writes)?;
            Some(w.iter().map(|pw| (pw.port, pw.weight)).collect())
        };
        for s in switches {
            // The placement's entries in force: in `act` mode only.
            let steer = if writes { self.place.steer(s) } else { Arc::default() };
            let pairs = self.pairs.entries(s);
            let fixed = self.fixed[s]
                .get_or_insert_with(|| {
                    Arc::new(plan::fixed_entries(&self.topo, &self.routing, &self.settings, s))
                })
                .clone();
            let moved = match self.plans[s].as_mut().filter(|_| !all) {
                Some(old) => {
                    let leaves = |leaf| changed.contains(&(s, leaf));
                    let steer_moved = !Arc::ptr_eq(&old.steer, &steer) && old.steer != steer;
                    let pairs_moved = !Arc::ptr_eq(&old.pairs, &pairs) && old.pairs != pairs;
                    old.steer = steer;
                    old.pairs = pairs;
                    update_in_place(&self.routing, overrides, s, leaves, fixed, old)
                        | steer_moved
                        | pairs_moved
                }
                None => {
                    let routes = Arc::new(plan::routes(&self.routing, overrides, s));
                    let p = SwitchPlan { fixed, routes, steer, pairs };
                    let moved = self.plans[s].as_ref() != Some(&p);
                    self.plans[s] = Some(p);
                    moved
                }
            };
            if let Some(p) = self.plans[s].as_ref().filter(|_| moved) {
                out.push((s, p.clone()));
            }
        }
        out
    }
}

/// Re-plans the routes of `s` toward the leaves `leaves` selects, in
/// `plan` itself; true when the plan changed. A decision re-weights a few
/// destinations of a switch that holds routes toward every leaf: only the
/// routes the update may rewrite are compared, and the routes are copied
/// only when one of them may change while the map is shared (with the
/// agent that holds the plan before).
pub(super) fn update_in_place(
    routing: &Routing,
    overrides: impl Fn(SwitchId, SwitchId) -> Option<Vec<(u16, u32)>>,
    s: SwitchId,
    leaves: impl Fn(SwitchId) -> bool,
    fixed: Arc<Vec<Entry>>,
    plan: &mut SwitchPlan,
) -> bool {
    let fixed_moved = !Arc::ptr_eq(&plan.fixed, &fixed) && plan.fixed != fixed;
    plan.fixed = fixed;
    #[cfg(debug_assertions)]
    let whole = plan.routes.clone();
    // The routes the update may rewrite, as they are.
    let before: BTreeMap<_, _> = routing
        .routes(s)
        .into_iter()
        .filter(|r| leaves(r.leaf))
        .map(|r| {
            let key = (r.prefix.addr, r.prefix.len);
            (key, plan.routes.get(&key).cloned())
        })
        .collect();
    let len = plan.routes.len();
    // A switch that went down loses all its routes; otherwise only the
    // routes toward the selected leaves may change.
    if !before.is_empty() || (!routing.switch_is_up(s) && !plan.routes.is_empty()) {
        plan::update_routes(routing, overrides, s, leaves, Arc::make_mut(&mut plan.routes));
    }
    // Among those, routes that changed, appeared or went; a count that
    // moved otherwise (a switch that went down loses all) is a change too.
    let mut moved = fixed_moved;
    let mut expect = len;
    for (key, was) in &before {
        let now = plan.routes.get(key);
        moved |= now != was.as_ref();
        expect = expect + usize::from(now.is_some()) - usize::from(was.is_some());
    }
    moved |= plan.routes.len() != expect;
    #[cfg(debug_assertions)]
    debug_assert_eq!(moved, fixed_moved || plan.routes != whole, "switch {s}");
    moved
}
