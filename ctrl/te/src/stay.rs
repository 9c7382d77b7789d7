//! Counting flows where they are, not only where they were sent.
//!
//! A steer entry is consulted only when a flowlet starts, so a placed flow
//! moves at its next gap. A long-lived flow that never pauses (an elephant,
//! a queue pair streaming a whole iteration) keeps its old path for
//! milliseconds after its entries are in place, while the planner counts
//! it on the new one: flows placed meanwhile are sent onto links it still
//! loads, and meet it there.
//!
//! [`Stays`] notices such a flow from its large-flow reports, which name
//! the port the flow left its first switch by: seen off its planned path
//! two report windows after its entries landed, it has not moved. Before
//! the planner next places *new* flows, each such flow still reporting is
//! counted where it is seen ([`Planner::adopt`]) and its entries follow it
//! there (the caller writes them, as for a move with [`Reason::Stayed`]),
//! so the new flows go around it. Once it has paused (no report for two
//! windows) it is removed and upserted again, so the next decision places
//! it afresh and it takes that path at its next flowlet.
//!
//! Only new flows trigger the adoption: flows that all run without a gap
//! and pause together (a training job's iteration) keep the paths planned
//! for their next iteration.
//!
//! Times are in one unit of the caller's choosing (the controller's ns,
//! the simulator's ps), the window in the same unit; calls that reach the
//! planner also take its `now_ns`.

use std::collections::{HashMap, HashSet};

use metaroce_topo::SwitchId;

use crate::{Demand, FlowKey, Path, Planner};

/// A flow counted where it was seen: its entries move from `from` to `to`.
#[derive(Debug, Clone, PartialEq)]
pub struct Stay {
    pub flow: FlowKey,
    pub from: Option<Path>,
    pub to: Path,
}

/// The flows that have not moved onto their planned paths (see the module doc).
#[derive(Debug, Clone)]
pub struct Stays {
    window: u64,
    /// When each flow's entries for its planned path landed.
    landed: HashMap<FlowKey, u64>,
    /// Seen off its planned path after its entries landed: the pins of the
    /// path it is seen on.
    stuck: HashMap<FlowKey, Vec<(SwitchId, u16)>>,
    /// Counted where seen, until it pauses.
    stayed: HashSet<FlowKey>,
    /// Flows counted where seen, in all.
    adopted: u64,
}

impl Stays {
    /// `window`: the large-flow report window (a flow reported off its
    /// entries two windows after they landed has not moved; one not
    /// reported for two windows has paused).
    pub fn new(window: u64) -> Self {
        Stays {
            window: window.max(1),
            landed: HashMap::new(),
            stuck: HashMap::new(),
            stayed: HashSet::new(),
            adopted: 0,
        }
    }

    fn quiet(&self, last_seen: Option<u64>, now: u64) -> bool {
        last_seen.is_none_or(|t| now.saturating_sub(t) >= 2 * self.window)
    }

    /// The entries of `flow`'s planned path are in place from `at`.
    pub fn landed(&mut self, flow: FlowKey, at: u64) {
        self.landed.insert(flow, at);
    }

    /// A report saw a placed `flow` leave switch `seen.0` by port `seen.1`
    /// at `now`. Notes it if it has not moved: it is counted there at its
    /// first switch, and beyond it where its planned entries pin it.
    pub fn seen(&mut self, planner: &Planner, flow: FlowKey, seen: (SwitchId, u16), now: u64) {
        let Some(path) = planner.path(&flow) else { return };
        let Some(first) = path.hops.first() else { return };
        if (first.switch, first.port) == seen {
            self.stuck.remove(&flow);
            return;
        }
        if self.landed.get(&flow).is_none_or(|&t| now < t.saturating_add(2 * self.window)) {
            return;
        }
        let mut pins = vec![seen];
        pins.extend(path.steer_hops().filter(|h| h.switch != seen.0).map(|h| (h.switch, h.port)));
        self.stuck.insert(flow, pins);
    }

    /// Before new flows are placed: counts each flow noted as not moved,
    /// and still reporting (`last_seen`), where it is seen. Returns the
    /// entries to move; `now_ns` is the planner's clock.
    pub fn adopt(
        &mut self,
        planner: &mut Planner,
        last_seen: impl Fn(&FlowKey) -> Option<u64>,
        now: u64,
        now_ns: u64,
    ) -> Vec<Stay> {
        let mut stuck: Vec<(FlowKey, Vec<(SwitchId, u16)>)> = self.stuck.drain().collect();
        // In key order, so a replay decides the same.
        stuck.sort_unstable_by_key(|(k, _)| *k);
        let mut out = Vec::new();
        for (flow, pins) in stuck {
            if self.quiet(last_seen(&flow), now) {
                continue; // paused since: it takes its entries
            }
            let from = planner.path(&flow);
            // `adopt` refuses pins that no longer make a path in service
            // (a failure since the report): the flow keeps its planned path.
            if let Ok(to) = planner.adopt(&flow, &pins, now_ns) {
                self.stayed.insert(flow);
                self.adopted += 1;
                out.push(Stay { flow, from, to });
            }
        }
        out
    }

    /// Flows counted where seen that went quiet (paused) are placed afresh
    /// by the next decision, as new flows with `demand`. Returns them.
    pub fn requeue_quiet(
        &mut self,
        planner: &mut Planner,
        last_seen: impl Fn(&FlowKey) -> Option<u64>,
        demand: impl Fn(&FlowKey) -> Demand,
        now: u64,
    ) -> Vec<FlowKey> {
        let mut quiet: Vec<FlowKey> =
            self.stayed.iter().filter(|k| self.quiet(last_seen(k), now)).copied().collect();
        quiet.sort_unstable();
        for key in &quiet {
            self.stayed.remove(key);
            // Removed, it frees its table slot, so upserting it again
            // cannot run out of room.
            if planner.remove(key) {
                let _ = planner.upsert(*key, demand(key));
            }
        }
        quiet
    }

    /// A decision moved `flow` (its own plan supersedes where it was seen).
    pub fn moved(&mut self, flow: &FlowKey) {
        self.stayed.remove(flow);
        self.stuck.remove(flow);
    }

    /// `flow` ended.
    pub fn forget(&mut self, flow: &FlowKey) {
        self.moved(flow);
        self.landed.remove(flow);
    }

    /// True while some flow is counted where it was seen.
    pub fn has_stays(&self) -> bool {
        !self.stayed.is_empty()
    }

    /// Flows counted where they were seen, since the start.
    pub fn adopted(&self) -> u64 {
        self.adopted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TeConfig;
    use metaroce_topo::{Routing, Topology};

    fn fabric() -> (Topology, Routing) {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies/leaf-spine-4x4.yaml");
        let topo = metaroce_topo::load_file(&dir).unwrap();
        let routing = Routing::compute(&topo);
        (topo, routing)
    }

    #[test]
    fn a_flow_that_keeps_its_old_path_is_counted_there_when_new_flows_come_and_placed_afresh_once_quiet() {
        let (topo, routing) = fabric();
        let mut p = Planner::new(&topo, &routing, TeConfig::default()).unwrap();
        let (a, b) = (topo.hosts[0].ip, topo.hosts[topo.hosts.len() - 1].ip);
        let elephant = FlowKey::pair(a, b);
        p.upsert(elephant, Demand::default()).unwrap();
        p.plan(0);
        let planned = p.path(&elephant).unwrap();
        let first = planned.hops[0];
        // Another uplink of the same leaf: where the flow still runs.
        let other = routing
            .group_toward(first.switch, planned.hops.last().unwrap().next)
            .and_then(|(_, g)| g.members.iter().map(|m| m.port).find(|&port| port != first.port))
            .unwrap();
        let mut s = Stays::new(10);
        s.landed(elephant, 100);
        // Within two windows of landing: it may not have had a gap yet.
        s.seen(&p, elephant, (first.switch, other), 110);
        assert!(s.adopt(&mut p, |_| Some(110), 110, 110).is_empty());
        // Two windows on and still off its path: it has not moved.
        s.seen(&p, elephant, (first.switch, other), 125);
        let stays = s.adopt(&mut p, |_| Some(125), 125, 125);
        assert_eq!(stays.len(), 1);
        assert_eq!(stays[0].from.as_ref(), Some(&planned));
        assert_eq!(stays[0].to.hops[0].port, other, "counted where it is seen");
        assert_eq!(p.path(&elephant).unwrap().hops[0].port, other);
        assert!(s.has_stays() && s.adopted() == 1);
        // Still reporting: stays. Quiet for two windows: placed afresh.
        assert!(s.requeue_quiet(&mut p, |_| Some(130), |_| Demand::default(), 135).is_empty());
        assert_eq!(s.requeue_quiet(&mut p, |_| Some(130), |_| Demand::default(), 150), [elephant]);
        assert!(!s.has_stays());
        assert!(p.path(&elephant).is_none(), "new again: the next decision places it");
        // One move from where it stayed to its new path: it did not end.
        let plan = p.plan(150);
        let moves: Vec<_> = plan.moves.iter().filter(|m| m.flow == elephant).collect();
        assert_eq!(moves.len(), 1, "{moves:?}");
        assert_eq!(moves[0].reason, crate::Reason::Replaced);
        assert_eq!(moves[0].from.as_ref().map(|p| p.hops[0].port), Some(other));
        assert_eq!(moves[0].to, p.path(&elephant));
    }

    #[test]
    fn a_flow_removed_and_added_again_onto_the_same_path_moves_nothing() {
        let (topo, routing) = fabric();
        let mut p = Planner::new(&topo, &routing, TeConfig::default()).unwrap();
        let f = FlowKey::pair(topo.hosts[0].ip, topo.hosts[topo.hosts.len() - 1].ip);
        p.upsert(f, Demand::default()).unwrap();
        p.plan(0);
        assert!(p.remove(&f));
        p.upsert(f, Demand::default()).unwrap();
        let plan = p.plan(1);
        assert!(plan.moves.is_empty(), "{:?}", plan.moves);
        assert!(p.path(&f).is_some());
    }

    #[test]
    fn a_flow_seen_on_its_path_or_quiet_is_left_alone() {
        let (topo, routing) = fabric();
        let mut p = Planner::new(&topo, &routing, TeConfig::default()).unwrap();
        let f = FlowKey::pair(topo.hosts[0].ip, topo.hosts[topo.hosts.len() - 1].ip);
        p.upsert(f, Demand::default()).unwrap();
        p.plan(0);
        let first = p.path(&f).unwrap().hops[0];
        let mut s = Stays::new(10);
        s.landed(f, 0);
        s.seen(&p, f, (first.switch, first.port), 100);
        assert!(s.adopt(&mut p, |_| Some(100), 100, 100).is_empty(), "on its path");
        s.seen(&p, f, (first.switch, first.port.wrapping_add(1)), 100);
        assert!(s.adopt(&mut p, |_| Some(50), 100, 100).is_empty(), "paused since the report");
    }
}
