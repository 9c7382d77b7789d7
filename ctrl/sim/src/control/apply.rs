//! The core's plans as the engine's writes: what the controller in the
//! loop lands in the simulated switches when a decision's writes arrive.
//!
//! The core ([`metaroce_core`]) plans each switch's whole desired state,
//! target-neutral: weighted routes per prefix, steer entries per flow.
//! The engine holds groups per (switch, destination leaf) and steer
//! entries per (switch, flow); this module keeps what was last planned
//! and turns each new plan into the difference, as the daemon's
//! reconciler turns it into P4Runtime writes.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;

use metaroce_core::place::Steer;
use metaroce_core::plan::SwitchPlan;
use metaroce_core::{Core, CoreConfig, CoreError, Input, Mode};
use metaroce_te::FlowKey;
use metaroce_topo::{Routing, SwitchId, Topology};

use crate::control::converge::{Groups, Weights};
use crate::control::SteerKey;

/// One group write: the members `(port, weight)` of `switch` toward `leaf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupWrite {
    pub switch: SwitchId,
    pub leaf: SwitchId,
    pub weights: Weights,
}

/// One steer write: install (`Some(port)`) or remove an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SteerWrite {
    pub switch: SwitchId,
    pub flow: FlowKey,
    pub key: SteerKey,
    pub port: Option<u16>,
}

/// The writes one decision's plans ask for.
#[derive(Debug, Clone, Default)]
pub(crate) struct Writes {
    pub groups: Vec<GroupWrite>,
    pub steer: Vec<SteerWrite>,
}

impl Writes {
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.steer.is_empty()
    }
}

/// What was last planned for the switches, and the names to translate.
#[derive(Debug)]
pub(crate) struct Applier {
    /// Destination leaf of every routed prefix.
    leaf_of: HashMap<(Ipv4Addr, u8), SwitchId>,
    /// Per switch, the ports that lead to another switch.
    fabric_ports: Vec<Vec<u16>>,
    host_of: HashMap<Ipv4Addr, u32>,
    groups: BTreeMap<(SwitchId, SwitchId), Weights>,
    steer: Vec<Arc<Steer>>,
}

impl Applier {
    /// `groups`: what the engine's switches hold at the start.
    pub fn new(topo: &Topology, routing: &Routing, groups: BTreeMap<(SwitchId, SwitchId), Weights>) -> Self {
        let mut leaf_of = HashMap::new();
        for s in 0..topo.switches.len() {
            for r in routing.routes(s) {
                leaf_of.insert((r.prefix.addr, r.prefix.len), r.leaf);
            }
        }
        let fabric_ports =
            (0..topo.switches.len()).map(|s| topo.adjacency(s).iter().map(|a| a.port).collect()).collect();
        let host_of = topo.hosts.iter().enumerate().map(|(i, h)| (h.ip, i as u32)).collect();
        Applier { leaf_of, fabric_ports, host_of, groups, steer: vec![Arc::default(); topo.switches.len()] }
    }

    /// The engine's name of a flow's steer entry, if its hosts are known.
    pub fn steer_key(&self, flow: &FlowKey) -> Option<SteerKey> {
        let src = *self.host_of.get(&flow.src())?;
        let dst = *self.host_of.get(&flow.dst())?;
        let sport = match *flow {
            FlowKey::Flow { sport, .. } => Some(sport),
            FlowKey::Pair { .. } => None,
        };
        Some(SteerKey { src, dst, sport })
    }

    /// The writes that take the switches from the last plans to `plans`.
    pub fn diff(&mut self, plans: &[(SwitchId, SwitchPlan)]) -> Writes {
        let mut out = Writes::default();
        for (s, plan) in plans {
            self.diff_groups(*s, plan, &mut out);
            self.diff_steer(*s, &plan.steer, &mut out);
        }
        out
    }

    fn diff_groups(&mut self, s: SwitchId, plan: &SwitchPlan, out: &mut Writes) {
        let fabric = self.fabric_ports.get(s).map_or(&[][..], Vec::as_slice);
        let mut seen: BTreeMap<SwitchId, Weights> = BTreeMap::new();
        for (prefix, members) in plan.routes.iter() {
            let Some(&leaf) = self.leaf_of.get(prefix) else { continue };
            if leaf == s || seen.contains_key(&leaf) {
                continue;
            }
            // Next-hop id = port + 1 (`plan::nhop_id`).
            let w: Weights = members
                .iter()
                .map(|&(nhop, weight)| (nhop.saturating_sub(1), weight))
                .filter(|(port, _)| fabric.contains(port))
                .collect();
            if !w.is_empty() {
                seen.insert(leaf, w);
            }
        }
        for (leaf, w) in seen {
            if self.groups.get(&(s, leaf)) != Some(&w) {
                self.groups.insert((s, leaf), w.clone());
                out.groups.push(GroupWrite { switch: s, leaf, weights: w });
            }
        }
    }

    fn diff_steer(&mut self, s: SwitchId, new: &Arc<Steer>, out: &mut Writes) {
        let Some(old) = self.steer.get(s).cloned() else { return };
        if Arc::ptr_eq(&old, new) {
            return;
        }
        for (flow, hop) in new.iter() {
            if old.get(flow).map(|h| h.port) != Some(hop.port) {
                if let Some(key) = self.steer_key(flow) {
                    out.steer.push(SteerWrite { switch: s, flow: *flow, key, port: Some(hop.port) });
                }
            }
        }
        for flow in old.keys().filter(|f| !new.contains_key(f)) {
            if let Some(key) = self.steer_key(flow) {
                out.steer.push(SteerWrite { switch: s, flow: *flow, key, port: None });
            }
        }
        self.steer[s] = new.clone();
    }
}

/// The controller in the loop's decision path without the engine and its
/// latencies: `inputs` (a recording: instant in ns and input) through
/// [`Core::handle`], ticked at [`Core::next_timer`] as the loop ticks it,
/// each step's plans turned into writes by [`Applier`] and applied to a
/// model of the switches' steer tables. Returns per switch the steer
/// entries held at the end (flow → egress port). The daemon's path gives
/// the same entries for the same inputs (the parity test,
/// `ctrl/controller/tests/jobs.rs`).
pub fn replay_steer(
    topo: &Topology,
    cfg: CoreConfig,
    inputs: &[(u64, Input)],
) -> Result<Vec<BTreeMap<FlowKey, u16>>, CoreError> {
    let routing = Routing::compute(topo);
    let mut core = Core::new(topo.clone(), cfg, Mode::Act)?;
    let mut apply = Applier::new(topo, &routing, Groups::of(topo, &routing).0);
    let mut held: Vec<BTreeMap<FlowKey, u16>> = vec![BTreeMap::new(); topo.switches.len()];
    let mut land = |writes: Writes| {
        for w in writes.steer {
            let Some(table) = held.get_mut(w.switch) else { continue };
            match w.port {
                Some(p) => _ = table.insert(w.flow, p),
                None => _ = table.remove(&w.flow),
            }
        }
    };
    land(apply.diff(&core.decide(0).plans));
    let mut now = 0;
    for (t, input) in inputs {
        for (_, step) in core.run_timers(now, *t) {
            land(apply.diff(&step.plans));
        }
        now = *t;
        land(apply.diff(&core.handle(*t, input).plans));
    }
    Ok(held)
}
