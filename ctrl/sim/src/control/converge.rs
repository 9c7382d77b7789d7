//! Routing convergence of the baseline modes after a link failure, as a
//! [`Control`]: every switch keeps forwarding into the dead link (and
//! losing what it sends there) until the routing protocol has converged,
//! `convergence` after the failure; then every group is what the routing
//! computes without the link. There is no local fast reroute: a stated,
//! simple model of a BGP Clos whose detection, withdrawal and FIB
//! programming together take the convergence delay.
//!
//! Also home of [`Groups`]: desired groups from a routing and the diff
//! against what the switches hold, shared with the controller in the loop.

use std::collections::BTreeMap;

use metaroce_topo::{LinkId, NextHop, Routing, SwitchId, Topology};

use crate::control::{Control, ControlSummary, Ctx, Dist};

/// Members `(port, weight)` per (switch, destination leaf).
pub(crate) type Weights = Vec<(u16, u32)>;

/// What each switch holds, as the control believes it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Groups(pub BTreeMap<(SwitchId, SwitchId), Weights>);

impl Groups {
    /// The groups the engine starts with: the routing's, switch next hops
    /// only, weights at least 1.
    pub fn of(topo: &Topology, routing: &Routing) -> Self {
        let mut g = BTreeMap::new();
        for s in 0..topo.switches.len() {
            for &leaf in routing.destinations() {
                if let Some(w) = baseline(routing, s, leaf) {
                    g.insert((s, leaf), w);
                }
            }
        }
        Groups(g)
    }

    /// Records `desired` and returns the groups that differ from what is
    /// held. A group the routing no longer has is left alone: there is
    /// nothing to route over, and a group is never emptied.
    pub fn update(&mut self, desired: Groups) -> Vec<((SwitchId, SwitchId), Weights)> {
        let mut out = Vec::new();
        for (key, w) in desired.0 {
            if self.0.get(&key) != Some(&w) {
                self.0.insert(key, w.clone());
                out.push((key, w));
            }
        }
        out
    }
}

/// The baseline group of `s` toward `leaf`, as the engine forwards over it.
pub(crate) fn baseline(routing: &Routing, s: SwitchId, leaf: SwitchId) -> Option<Weights> {
    if s == leaf {
        return None;
    }
    let (_, group) = routing.group_toward(s, leaf)?;
    let w: Weights = group
        .members
        .iter()
        .filter(|m| matches!(m.next, NextHop::Switch(_)))
        .map(|m| (m.port, m.weight.max(1)))
        .collect();
    (!w.is_empty()).then_some(w)
}

/// Applies a link's new state to `routing`.
pub(crate) fn set_link(routing: &mut Routing, topo: &Topology, link: LinkId, up: bool) {
    let res = if up { routing.restore_link(topo, link) } else { routing.fail_link(topo, link) };
    if let Err(e) = res {
        // Links come from the validated scenario; say so if one did not fit.
        tracing::warn!(link, error = %e, "routing refused a link change");
    }
}

/// The baselines' control: a failure is routed around after the
/// convergence delay.
#[derive(Debug)]
pub(crate) struct Convergence<'a> {
    topo: &'a Topology,
    routing: Routing,
    held: Groups,
    delay_ps: u64,
    /// Per wake-up token: (link, up, when it happened).
    changes: Vec<(LinkId, bool, u64)>,
    writes: u64,
    refused: u64,
    reaction: Vec<u64>,
}

impl<'a> Convergence<'a> {
    pub fn new(topo: &'a Topology, routing: &Routing, delay_ps: u64) -> Self {
        Convergence {
            topo,
            routing: routing.clone(),
            held: Groups::of(topo, routing),
            delay_ps,
            changes: Vec::new(),
            writes: 0,
            refused: 0,
            reaction: Vec::new(),
        }
    }
}

impl Control for Convergence<'_> {
    fn start(&mut self, _: &mut Ctx<'_>) {}

    fn on_link(&mut self, ctx: &mut Ctx<'_>, link: LinkId, up: bool) {
        ctx.wake_at(ctx.now_ps() + self.delay_ps, self.changes.len() as u64);
        self.changes.push((link, up, ctx.now_ps()));
    }

    fn on_wake(&mut self, ctx: &mut Ctx<'_>, token: u64) {
        let Some(&(link, up, at)) = self.changes.get(token as usize) else { return };
        set_link(&mut self.routing, self.topo, link, up);
        let desired = Groups::of(self.topo, &self.routing);
        for ((s, leaf), w) in self.held.update(desired) {
            match ctx.set_group(s, leaf, &w, token) {
                Ok(()) => self.writes += 1,
                Err(_) => self.refused += 1,
            }
        }
        if !up {
            self.reaction.push(ctx.now_ps() - at);
        }
    }

    fn summary(&self) -> ControlSummary {
        ControlSummary {
            kind: "routing convergence".into(),
            group_writes: self.writes,
            failover: Dist::of(self.reaction.clone()),
            refused: self.refused,
            ..Default::default()
        }
    }
}
