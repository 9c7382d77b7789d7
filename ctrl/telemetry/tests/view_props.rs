//! Property tests of the congestion view: against a simple model of the
//! threshold semantics, and bounds under arbitrary input.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use metaroce_telemetry::{
    CongestionView, PortKey, PortRegisters, RegisterSnapshot, ThresholdCrossing, ViewConfig,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
    /// (switch, port, up, digests lost before this one)
    Crossing(usize, u16, bool, u32),
    /// (switch, ports with their congested flag)
    Snapshot(usize, Vec<(u16, bool)>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0usize..3, 1u16..5, any::<bool>(), prop_oneof![4 => Just(0u32), 1 => 1u32..3])
            .prop_map(|(s, p, up, lost)| Step::Crossing(s, p, up, lost)),
        1 => (0usize..3, proptest::collection::vec((1u16..5, any::<bool>()), 0..4))
            .prop_map(|(s, ports)| Step::Snapshot(s, ports)),
    ]
}

fn k(switch: usize, port: u16) -> PortKey {
    PortKey { switch, port }
}

proptest! {
    /// In-order crossings (some lost) and snapshots: a port's congested
    /// flag is whatever the last applied crossing or snapshot said, and
    /// since is when that flag last changed.
    #[test]
    fn heat_follows_the_last_crossing_or_snapshot(steps in proptest::collection::vec(step(), 1..80)) {
        let mut v = CongestionView::new(ViewConfig::default(), BTreeMap::new(), &[]);
        let mut model: BTreeMap<PortKey, (bool, u64)> = BTreeMap::new();
        let mut seq = [0u32; 3];
        let mut lost = 0u64;
        for (i, s) in steps.iter().enumerate() {
            let now = (i as u64 + 1) * 1000;
            let mut set = |key: PortKey, flag: bool| {
                let e = model.entry(key).or_insert((false, now));
                if e.0 != flag {
                    *e = (flag, now);
                }
            };
            match s {
                Step::Crossing(sw, port, up, skip) => {
                    seq[*sw] += skip;
                    lost += u64::from(*skip);
                    let c = ThresholdCrossing {
                        switch: *sw, port: *port, depth: 1, switch_ts: now, seq: seq[*sw], congested: *up,
                    };
                    seq[*sw] += 1;
                    v.on_crossing(now, &c);
                    set(k(*sw, *port), *up);
                }
                Step::Snapshot(sw, ports) => {
                    let ports = ports
                        .iter()
                        .map(|&(port, congested)| PortRegisters { port, max_depth: 3, congested })
                        .collect();
                    let snap = RegisterSnapshot { switch: *sw, ports };
                    v.on_snapshot(now, &snap);
                    for p in &snap.ports {
                        set(k(*sw, p.port), p.congested);
                    }
                }
            }
        }
        let heat = v.heat();
        prop_assert_eq!(heat.len(), model.len());
        // any_hot keeps a count instead of scanning: it agrees with one.
        prop_assert_eq!(v.any_hot(), model.values().any(|(flag, _)| *flag));
        for (key, (flag, since)) in &model {
            prop_assert_eq!(heat[key].congested, *flag, "{:?}", key);
            prop_assert_eq!(heat[key].since_ns, *since, "{:?}", key);
        }
        let c = v.counters();
        prop_assert_eq!(c.stale_crossings, 0);
        // Losses are confirmed only once 64 newer digests arrived; never more than were lost.
        prop_assert!(c.digests.lost <= lost);
        prop_assert_eq!(c.digests.restarts, 0);
    }

    /// Any crossings and snapshots, with tiny caps: nothing panics and
    /// every bound holds.
    #[test]
    fn arbitrary_input_stays_within_bounds(
        crossings in proptest::collection::vec(
            (0usize..50, any::<u16>(), any::<u32>(), any::<u64>(), any::<u32>(), any::<bool>(), any::<u64>()), 0..200),
        samples in 0usize..4,
        max_ports in 0usize..10,
        max_sources in 0usize..4,
    ) {
        let cfg = ViewConfig { samples_per_port: samples, max_ports, max_paths: 2, max_sources, ewma_weight: 0.5 };
        let links = [(k(0, 1), k(1, 1)), (k(1, 2), k(2, 1))];
        let mut v = CongestionView::new(cfg, BTreeMap::new(), &links);
        for (switch, port, depth, switch_ts, seq, congested, now) in crossings {
            let c = ThresholdCrossing { switch, port, depth, switch_ts, seq, congested };
            v.on_crossing(now, &c);
            if seq % 7 == 0 {
                let ports = vec![PortRegisters { port, max_depth: depth, congested: !congested }];
                v.on_snapshot(now, &RegisterSnapshot { switch, ports });
            }
            prop_assert_eq!(v.any_hot(), v.heat().values().any(|h| h.congested));
        }
        let c = v.counters();
        prop_assert!(c.ports <= max_ports);
        prop_assert!(v.needs_snapshot().len() <= max_sources);
        prop_assert!(v.congestion_map(usize::MAX).iter().all(|p| p.samples.len() <= samples));
        let trees = v.congestion_trees();
        let hot = v.hot_ports();
        // Every hot port is in some tree.
        for p in &hot {
            prop_assert!(trees.iter().any(|t| t.root == *p || t.members.contains(p)));
        }
    }
}
