//! Hysteresis on each egress port: step its derate level up while it stays
//! congested past the hold-up time, down while it stays cool past the
//! hold-down time, never more than one step per step interval.

use std::collections::BTreeMap;

use metaroce_telemetry::{Heat, PortHeat, PortKey};
use metaroce_topo::{LinkId, Routing};

use crate::config::PolicyConfig;
use crate::index::PortIndex;
use crate::state::PortState;

/// A level step taken this decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LevelChange {
    pub key: PortKey,
    pub link: LinkId,
    pub from: u8,
    pub to: u8,
}

/// What the snapshot says about a port right now.
enum Phase {
    /// Congested long enough to act.
    Hot,
    /// Congested, but not yet for the hold-up time.
    Warming,
    /// Not congested since the given time.
    Cool(u64),
}

/// Steps every port's level; returns the steps in port order. Ports on a
/// failed link or switch are forgotten: if the link returns, it starts at
/// full capacity.
pub(crate) fn update(
    cfg: &PolicyConfig,
    max_level: u8,
    index: &PortIndex,
    routing: &Routing,
    heat: &Heat,
    now: u64,
    ports: &mut BTreeMap<PortKey, PortState>,
) -> Vec<LevelChange> {
    // The tracked ports and the congested ones, in port order, each with
    // its heat: one walk over both maps (the heat holds every port the
    // view knows) instead of a set and a lookup per port.
    let mut todo: Vec<(PortKey, Option<&PortHeat>)> = Vec::with_capacity(ports.len());
    let mut tracked = ports.keys().copied().peekable();
    for (&key, h) in heat {
        while let Some(t) = tracked.next_if(|t| *t < key) {
            todo.push((t, None));
        }
        let is_tracked = tracked.next_if_eq(&key).is_some();
        if is_tracked || h.congested {
            todo.push((key, Some(h)));
        }
    }
    todo.extend(tracked.map(|t| (t, None)));
    let mut changes = Vec::new();
    for (key, h) in todo {
        let Some(link) = index.live(routing, key) else {
            // The baseline moved with the failure, so every leaf with
            // overrides is rechecked anyway (see `Policy::decide`).
            ports.remove(&key);
            continue;
        };
        let phase = phase(cfg, h, ports.get_mut(&key), now);
        if let Some(change) = step(cfg, max_level, key, link, phase, now, ports) {
            changes.push(change);
        }
    }
    changes
}

fn phase(cfg: &PolicyConfig, heat: Option<&PortHeat>, state: Option<&mut PortState>, now: u64) -> Phase {
    match (heat, state) {
        (Some(h), state) => {
            if let Some(s) = state {
                s.absent_since_ns = None;
            }
            if !h.congested {
                Phase::Cool(h.since_ns)
            } else if now.saturating_sub(h.since_ns) >= cfg.hold_up_ns {
                Phase::Hot
            } else {
                Phase::Warming
            }
        }
        (None, Some(s)) => Phase::Cool(*s.absent_since_ns.get_or_insert(now)),
        (None, None) => Phase::Cool(now),
    }
}

/// One port's step, if its phase and timers allow one.
fn step(
    cfg: &PolicyConfig,
    max_level: u8,
    key: PortKey,
    link: LinkId,
    phase: Phase,
    now: u64,
    ports: &mut BTreeMap<PortKey, PortState>,
) -> Option<LevelChange> {
    if matches!(phase, Phase::Warming) {
        return None;
    }
    let state =
        ports.entry(key).or_insert(PortState { link, level: 0, last_step_ns: None, absent_since_ns: None });
    let may_step = state.last_step_ns.is_none_or(|t| now.saturating_sub(t) >= cfg.step_interval_ns);
    let from = state.level;
    let to = match phase {
        Phase::Hot if may_step && from < max_level => from + 1,
        Phase::Cool(since) if may_step && from > 0 && now.saturating_sub(since) >= cfg.hold_down_ns => {
            from - 1
        }
        Phase::Cool(_) if from == 0 && may_step => {
            // Idle at full capacity and its step timer has run out: nothing
            // left to remember.
            ports.remove(&key);
            return None;
        }
        _ => return None,
    };
    state.level = to;
    state.last_step_ns = Some(now);
    Some(LevelChange { key, link, from, to })
}

#[cfg(test)]
mod tests {
    use super::*;
    use metaroce_topo::gen::{self, Common};
    use metaroce_topo::units::Bandwidth;

    const MS: u64 = 1_000_000;

    fn run(heat: &[(u64, Option<bool>)]) -> Vec<(u64, u8)> {
        let t = gen::leaf_spine(&Common::new("t", Bandwidth::gbps(100)), 2, 2, 1, 1).unwrap();
        let r = Routing::compute(&t);
        let index = PortIndex::new(&t, &r);
        let a = t.adjacency(0)[0];
        let key = PortKey { switch: 0, port: a.port };
        let cfg = PolicyConfig::default();
        let mut ports = BTreeMap::new();
        let mut since = 0;
        let mut was = false;
        let mut out = Vec::new();
        for &(now, congested) in heat {
            let mut h = Heat::new();
            if let Some(c) = congested {
                if c != was {
                    since = now;
                    was = c;
                }
                h.insert(key, PortHeat { congested: c, since_ns: since, depth: 0, max_depth: 0 });
            }
            for ch in update(&cfg, 3, &index, &r, &h, now, &mut ports) {
                out.push((now, ch.to));
            }
        }
        out
    }

    #[test]
    fn hot_steps_once_per_interval_after_hold_up() {
        let steps: Vec<_> = (0..40).map(|i| (i * MS, Some(i >= 1))).collect();
        assert_eq!(run(&steps), vec![(3 * MS, 1), (13 * MS, 2), (23 * MS, 3)]);
    }

    #[test]
    fn restore_waits_for_hold_down_then_steps() {
        let mut steps: Vec<_> = (0..5).map(|i| (i * MS, Some(true))).collect();
        steps.extend((5..200).map(|i| (i * MS, Some(false))));
        assert_eq!(run(&steps), vec![(2 * MS, 1), (55 * MS, 0)]);
    }

    #[test]
    fn an_absent_port_cools_from_when_it_went_missing() {
        let mut steps: Vec<_> = (0..5).map(|i| (i * MS, Some(true))).collect();
        steps.extend((5..100).map(|i| (i * MS, None)));
        assert_eq!(run(&steps), vec![(2 * MS, 1), (55 * MS, 0)]);
    }

    #[test]
    fn flapping_faster_than_hold_up_never_steps() {
        let steps: Vec<_> = (0..100).map(|i| (i * MS, Some(i % 2 == 0))).collect();
        assert_eq!(run(&steps), vec![]);
    }
}
