//! The agent's last assignment of routes and groups ([`plan::assign_routes`]),
//! kept with the plan parts it came from. Most new plans move only steer
//! entries (a job registered, a large flow placed): their routes, groups
//! and fixed entries are those of the plan before, so the pass reuses the
//! assignment and adds the steer entries, instead of assigning every route
//! of the switch again on the path of a placement's first Write.
//!
//! The assignment stays valid while the installed state only moves by the
//! agent's own writes toward it; whatever else changes what the agent
//! believes installed (a re-read, a rollback's exact target) forgets it.

use std::collections::BTreeMap;
use std::sync::Arc;

use metaroce_pipeline::{Entry, Key};

use crate::plan::{self, PlanError, Routes, SwitchPlan};

/// The routes and groups assigned for a plan's fixed entries and routes.
#[derive(Debug, Default)]
pub(super) struct Assigned {
    last: Option<Last>,
}

#[derive(Debug)]
struct Last {
    fixed: Arc<Vec<Entry>>,
    routes: Arc<Routes>,
    /// Shared with the pass's desired state when the plan has no steer
    /// or pair entries, and so with the installed state once the switch
    /// holds exactly that (see `Live::sync`).
    assigned: Arc<BTreeMap<Key, Entry>>,
}

impl Assigned {
    /// Everything `plan` asks of the switch, group ids assigned against
    /// `installed` (or reused from the last plan with the same routes).
    pub(super) fn desired(
        &mut self,
        p: &SwitchPlan,
        installed: &BTreeMap<Key, Entry>,
    ) -> Result<Arc<BTreeMap<Key, Entry>>, PlanError> {
        let same = self.last.as_ref().is_some_and(|l| {
            (Arc::ptr_eq(&l.fixed, &p.fixed) || l.fixed == p.fixed)
                && (Arc::ptr_eq(&l.routes, &p.routes) || l.routes == p.routes)
        });
        let last = match self.last.as_mut().filter(|_| same) {
            Some(last) => {
                // Assigning again gives the same: routes keep their
                // installed entries and groups are found by content.
                #[cfg(debug_assertions)]
                debug_assert_eq!(
                    plan::assign_routes(p, installed).as_ref().ok(),
                    Some(last.assigned.as_ref()),
                    "a reused assignment differs from a fresh one"
                );
                last
            }
            None => {
                self.last = None;
                let assigned = Arc::new(plan::assign_routes(p, installed)?);
                self.last.insert(Last { fixed: p.fixed.clone(), routes: p.routes.clone(), assigned })
            }
        };
        let mut out = last.assigned.clone();
        if !p.steer.is_empty() || !p.pairs.is_empty() {
            let out = Arc::make_mut(&mut out);
            plan::add_steer(out, &p.steer);
            plan::add_pairs(out, &p.pairs);
        }
        Ok(out)
    }

    /// What the switch holds changed by other means than the agent's
    /// writes: the next plan is assigned afresh.
    pub(super) fn forget(&mut self) {
        self.last = None;
    }
}
