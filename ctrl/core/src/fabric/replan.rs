//! Re-planning one switch's routes in place, after a decision that
//! re-weighted a few destinations.

use std::collections::BTreeMap;
use std::sync::Arc;

use metaroce_pipeline::Entry;
use metaroce_topo::{Routing, SwitchId};

use crate::plan::{self, SwitchPlan};

/// Re-plans the routes of `s` toward the leaves `leaves` selects, in
/// `plan` itself; true when the plan changed. A decision re-weights a few
/// destinations of a switch that holds routes toward every leaf: only the
/// routes the update may rewrite are compared, and nothing is cloned.
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
    plan::update_routes(routing, overrides, s, leaves, &mut plan.routes);
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
