//! Pure, deterministic rerouting decisions: (topology, baseline routing,
//! congestion heat, time, policy state) → desired group weights, with
//! hysteresis and a bounded rate of change.
//!
//! The controller sees the whole fabric, so when an egress port stays
//! congested it lowers that port's weight in every upstream group that can
//! route around it: per destination leaf, each switch's weights follow the
//! capacity each member leads to, with hot ports derated and warm ones
//! discounted, so displaced load spreads by spare capacity. It only re-weights
//! members of the baseline's valley-free groups, never adds one, never
//! empties a group, and never keeps a member on a failed link.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use metaroce_policy::{Input, Policy, PolicyConfig, PolicyState};
//! let topo = metaroce_topo::load_file("topologies/leaf-spine-4x4.yaml".as_ref())?;
//! let routing = metaroce_topo::Routing::compute(&topo);
//! let policy = Policy::new(PolicyConfig::default())?;
//! let mut state = PolicyState::default();
//! let heat = metaroce_telemetry::Heat::new();
//! let decision = policy.decide(Input { topo: &topo, routing: &routing, heat: &heat, now_ns: 0 }, &mut state);
//! for change in &decision.changes {
//!     println!("{} {}→{} {:?}", change.kind.as_str(), change.switch, change.leaf, change.new);
//! }
//! # Ok(()) }
//! ```
//!
//! No clock, no I/O, no async: time is an argument, state is a value.
//! The desired weights that differ from the baseline live in the state
//! ([`PolicyState::overrides`]); each [`Decision`] lists what changed and
//! why. See `README.md` for the model and the defaults.

mod config;
mod decision;
mod failover;
mod index;
mod levels;
mod reweight;
mod state;

use std::collections::{BTreeMap, BTreeSet};

use metaroce_telemetry::{Heat, PortHeat, PortKey};
use metaroce_topo::{Routing, SwitchId, Topology};

pub use config::{ConfigError, PolicyConfig};
pub use decision::{Change, ChangeKind, Decision, HotLink, PortLevel};
pub use state::{override_members, Override, PolicyState, PortState, PortWeight};

use index::{Factors, Perturb, PortIndex};
use levels::LevelChange;
use reweight::{Ctx, Work};

/// Destinations to recompute from which the work is split over two threads.
const PARALLEL_FROM: usize = 64;

/// What one decision reads.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub topo: &'a Topology,
    /// The baseline routing of `topo`, with every known failure already
    /// applied (`fail_link` / `fail_switch`): the policy only re-weights
    /// its groups. Keep passing the same lineage of routing: held-back
    /// changes are checked against its groups before reuse.
    pub routing: &'a Routing,
    pub heat: &'a Heat,
    /// Nanoseconds on the controller's clock (the same clock as the heat's
    /// `since_ns`).
    pub now_ns: u64,
}

/// A validated configuration and the derate levels it implies.
#[derive(Debug, Clone)]
pub struct Policy {
    config: PolicyConfig,
    factors: Vec<u32>,
}

impl Policy {
    pub fn new(config: PolicyConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let factors = config.factors();
        Ok(Policy { config, factors })
    }

    pub fn config(&self) -> &PolicyConfig {
        &self.config
    }

    /// Highest derate level.
    pub fn max_level(&self) -> u8 {
        u8::try_from(self.factors.len().saturating_sub(1)).unwrap_or(u8::MAX)
    }

    /// Counted capacity per mille at `level` (1000 at level 0).
    pub fn factor_permille(&self, level: u8) -> u32 {
        let last = self.factors.last().copied().unwrap_or(1000);
        self.factors.get(usize::from(level)).copied().unwrap_or(last)
    }

    /// One decision: steps derate levels, replaces overrides that point
    /// into failures, recomputes the destinations whose weights may move,
    /// and applies at most `max_changed_groups` derate/restore changes.
    pub fn decide(&self, input: Input<'_>, state: &mut PolicyState) -> Decision {
        self.decide_in(input, state, PARALLEL_FROM)
    }

    /// `decide`, splitting the recomputation over two threads from
    /// `parallel_from` destinations.
    fn decide_in(&self, input: Input<'_>, state: &mut PolicyState, parallel_from: usize) -> Decision {
        let index = PortIndex::new(input.topo, input.routing);
        let steps = levels::update(
            &self.config,
            self.max_level(),
            &index,
            input.routing,
            input.heat,
            input.now_ns,
            &mut state.ports,
        );
        let baseline = failover::baseline_fingerprint(input.topo, input.routing);
        let moved = state.baseline != Some(baseline);
        state.baseline = Some(baseline);
        let stale = if moved { failover::check(input.routing, &state.overrides) } else { Default::default() };
        // Leaves whose inputs changed: recomputed. Other pending leaves
        // reuse the changes the rate limit held back last time.
        let mut fresh: BTreeSet<SwitchId> = stale.leaves.iter().copied().collect();
        mark_dirty(input.routing, &steps, &mut fresh, &mut state.dirty);
        if moved {
            // The baseline moved (a failure or a repair): a port may have
            // left the paths toward a leaf whose overrides it shaped, and
            // its level changes would no longer find them. Recheck them all.
            fresh.extend(state.overrides.keys().copied());
        }
        for &leaf in &fresh {
            state.dirty.entry(leaf).or_default();
        }
        let proposals = self.propose(input, &index, (&fresh, moved, parallel_from), state);
        let budget = self.config.max_changed_groups;
        let (changes, held) =
            decision::apply(proposals, &stale.forced, budget, (input.routing, &index), state);
        let deferred = held.len();
        state.pending.clear();
        for p in held {
            state.pending.entry(p.leaf).or_default().push(p);
        }
        let pending = &state.pending;
        state.dirty.retain(|leaf, _| pending.contains_key(leaf));
        Decision {
            now_ns: input.now_ns,
            changes,
            levels: self.levels(state),
            deferred,
            overrides: state.override_count(),
        }
    }

    /// Proposed changes of every pending leaf: recomputed where its inputs
    /// changed (`fresh`) or its held-back changes no longer fit the
    /// baseline, reused otherwise.
    fn propose(
        &self,
        input: Input<'_>,
        index: &PortIndex,
        (fresh, moved, parallel_from): (&BTreeSet<SwitchId>, bool, usize),
        state: &mut PolicyState,
    ) -> Vec<reweight::Proposal> {
        if state.dirty.is_empty() {
            // Nothing to recompute (most tick decisions): skip the port
            // factors, which look at every port of the heat.
            return Vec::new();
        }
        let factors = self.port_factors(input, index, state);
        let ctx = Ctx {
            topo: input.topo,
            routing: input.routing,
            index,
            factors: &factors,
            max_weight: input.routing.options().max_weight,
            max_growth_permille: self.config.max_share_growth_permille,
        };
        let mut proposals = Vec::new();
        let mut todo = Vec::new();
        for (&leaf, causes) in &state.dirty {
            match state.pending.remove(&leaf) {
                Some(held)
                    if !fresh.contains(&leaf)
                        && (!moved || held.iter().all(|p| p.still_fits(input.routing))) =>
                {
                    proposals.extend(held)
                }
                _ => todo.push((leaf, causes)),
            }
        }
        let compute = |part: &[(SwitchId, &BTreeSet<PortKey>)]| {
            let mut work = Work::default();
            let mut out = Vec::new();
            for &(leaf, causes) in part {
                out.extend(reweight::destination(&ctx, leaf, causes, state.overrides.get(&leaf), &mut work));
            }
            out
        };
        // Destinations are independent: many of them are split over two
        // threads, at a fixed point, so the result never depends on timing.
        if todo.len() < parallel_from {
            proposals.extend(compute(&todo));
        } else {
            let (first, second) = todo.split_at(todo.len() / 2);
            let (a, b) = std::thread::scope(|scope| {
                let worker = scope.spawn(|| compute(second));
                (compute(first), worker.join())
            });
            proposals.extend(a);
            match b {
                Ok(b) => proposals.extend(b),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        proposals
    }

    /// Every port that counts for less than its bandwidth: derated ones by
    /// their level, warm ones by their queue.
    fn port_factors(&self, input: Input<'_>, index: &PortIndex, state: &PolicyState) -> Factors {
        let mut entries: Vec<(PortKey, u32, Perturb)> = state
            .ports
            .iter()
            .filter(|(_, p)| p.level > 0)
            .map(|(k, p)| (*k, self.factor_permille(p.level), Perturb::Derated))
            .collect();
        let high = input.topo.fabric.queue_high.value();
        for (key, h) in input.heat {
            // Most ports are idle: the cheap test first.
            let Some(f) = self.warm_factor(h, high) else { continue };
            if state.level(*key) > 0 || index.live(input.routing, *key).is_none() {
                continue;
            }
            entries.push((*key, f, Perturb::Warm));
        }
        Factors::new(input.topo.switches.len(), entries)
    }

    /// A warm queue's factor, in quarters of the high threshold (so queue
    /// noise does not move weights); None for an idle one.
    fn warm_factor(&self, h: &PortHeat, high: u64) -> Option<u32> {
        if high == 0 || self.config.warm_discount_permille == 0 {
            return None;
        }
        let depth = if h.congested { high } else { u64::from(h.depth.max(h.max_depth)) };
        let quarters = u32::try_from((depth.min(high) * 4) / high).unwrap_or(4);
        (quarters > 0).then(|| 1000 - self.config.warm_discount_permille * quarters / 4)
    }

    fn levels(&self, state: &PolicyState) -> Vec<PortLevel> {
        state
            .ports
            .iter()
            .filter(|(_, p)| p.level > 0)
            .map(|(k, p)| PortLevel {
                switch: k.switch,
                port: k.port,
                link: p.link,
                level: p.level,
                factor_permille: self.factor_permille(p.level),
            })
            .collect()
    }
}

/// Marks every destination whose routing crosses a port that changed
/// level, remembering the port as a cause.
fn mark_dirty(
    routing: &Routing,
    steps: &[LevelChange],
    fresh: &mut BTreeSet<SwitchId>,
    dirty: &mut BTreeMap<SwitchId, BTreeSet<PortKey>>,
) {
    for run in steps.chunk_by(|a, b| a.key.switch == b.key.switch) {
        let s = run[0].key.switch;
        for &leaf in routing.destinations() {
            let Some((_, g)) = routing.group_toward(s, leaf) else { continue };
            for step in run {
                if g.members.iter().any(|m| m.port == step.key.port) {
                    dirty.entry(leaf).or_default().insert(step.key);
                    fresh.insert(leaf);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metaroce_telemetry::PortHeat;
    use metaroce_topo::gen::{self, Common};
    use metaroce_topo::units::Bandwidth;

    #[test]
    fn two_threads_decide_exactly_as_one() {
        let t = gen::leaf_spine(&Common::new("split", Bandwidth::gbps(100)), 40, 3, 1, 1).unwrap();
        let r = Routing::compute(&t);
        let p = Policy::new(PolicyConfig { max_changed_groups: 5, ..Default::default() }).unwrap();
        let mut heat = Heat::new();
        for (i, s) in (0..t.switches.len()).enumerate().filter(|(i, _)| i % 7 == 0) {
            let a = t.adjacency(s)[i % t.adjacency(s).len()];
            heat.insert(
                PortKey { switch: s, port: a.port },
                PortHeat { congested: true, since_ns: 0, depth: 9, max_depth: 9 },
            );
        }
        let (mut one, mut two) = (PolicyState::default(), PolicyState::default());
        for ms in 0..40 {
            let input = Input { topo: &t, routing: &r, heat: &heat, now_ns: ms * 1_000_000 };
            let a = p.decide_in(input, &mut one, usize::MAX);
            let b = p.decide_in(input, &mut two, 2);
            assert_eq!(a, b, "at {ms} ms");
            assert_eq!(one, two);
        }
        assert!(one.override_count() > 0);
    }
}
