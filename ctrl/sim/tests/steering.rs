//! Steer entries and the large-flow detector through the control hook: an
//! entry written while a flow runs takes effect only at the flow's next
//! flowlet, a port outside the group is refused, the next flowlet takes an
//! entry on the port in use too, and a large flow is reported by its first
//! switch at its threshold crossing, then once per window.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use metaroce_sim::control::forward::Flowlet;
use metaroce_sim::control::{Control, ControlError, ControlSummary, Ctx, Detector, LargeFlow, SteerKey};
use metaroce_topo::{NodeRef, Routing, SwitchId, Topology};

#[derive(Debug, Default)]
struct Log {
    moved: Vec<(u64, u64)>,
    errors: Vec<ControlError>,
    large: Vec<(u64, LargeFlow)>,
}

/// At `at_ps`, pins h1-1 → h2-1 at leaf1 to `port` (a pair entry, tag 7).
#[derive(Debug)]
struct Pin {
    log: Arc<Mutex<Log>>,
    leaf1: SwitchId,
    src: u32,
    dst: u32,
    port: u16,
    host_port: u16,
    at_ps: u64,
}

impl Control for Pin {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        ctx.wake_at(self.at_ps, 0);
        ctx.set_large_flow_detector(Some(Detector { window_ps: 10_000_000, threshold_bytes: 64 * 1024 }));
    }

    fn on_wake(&mut self, ctx: &mut Ctx<'_>, _: u64) {
        let pair = SteerKey { src: self.src, dst: self.dst, sport: None };
        let mut log = self.log.lock().unwrap();
        log.errors.push(ctx.set_steer(self.leaf1, pair, Some(self.host_port), 1).unwrap_err());
        log.errors.push(ctx.set_steer(99, pair, Some(self.port), 1).unwrap_err());
        log.errors
            .push(ctx.set_steer(self.leaf1, SteerKey { dst: 999, ..pair }, Some(self.port), 1).unwrap_err());
        ctx.set_steer(self.leaf1, pair, Some(self.port), 7).unwrap();
    }

    fn on_moved(&mut self, ctx: &mut Ctx<'_>, tag: u64) {
        self.log.lock().unwrap().moved.push((ctx.now_ps(), tag));
    }

    fn on_large_flow(&mut self, ctx: &mut Ctx<'_>, f: &LargeFlow) {
        self.log.lock().unwrap().large.push((ctx.now_ps(), *f));
    }

    fn summary(&self) -> ControlSummary {
        ControlSummary { kind: "pin".into(), ..Default::default() }
    }
}

/// Utilization of the switch egress port labelled `label`.
fn util(run: &metaroce_sim::ModeRun, label: &str) -> f64 {
    run.port_util.iter().find(|p| p.0 == label).map_or_else(|| panic!("no port {label}"), |p| p.2)
}

fn host(topo: &Topology, name: &str) -> usize {
    match topo.lookup(name) {
        Some(NodeRef::Host(h)) => h,
        other => panic!("{other:?}"),
    }
}

/// Two messages each way between h1-1 and h2-1, the second pair 200 µs
/// after the first started (a flowlet gap); the entry (h1-1 → h2-1 only)
/// is written 20 µs into the first.
fn run_pinned(pin_other_port: bool) -> (Log, metaroce_sim::ModeRun, u16) {
    let topo = leaf_spine(2, 2, 1, 100);
    let sc = scenario(
        &topo,
        "jobs: [{name: a, pattern: permutation, hosts: [h1-1, h2-1], shift: 1, size: 512KiB},\n\
                {name: b, pattern: permutation, hosts: [h1-1, h2-1], shift: 1, size: 512KiB, start: 200us}]\n\
         network: {dcqcn: false}",
    );
    let leaf1 = topo.switch_id("leaf1").unwrap();
    let (src, dst) = (host(&topo, "h1-1"), host(&topo, "h2-1"));
    let ups: Vec<u16> = topo.adjacency(leaf1).iter().map(|a| a.port).collect();
    let log = Arc::new(Mutex::new(Log::default()));
    let routing = Routing::compute(&topo);
    // Find the uplink the first message takes without steering.
    let plain = metaroce_sim::run_controlled(
        &topo,
        &routing,
        &sc,
        "flowlet",
        Box::new(Flowlet::new(1, topo.switches.len(), 50_000_000)),
        None,
        &mut |_| {},
    )
    .unwrap();
    let first = *ups
        .iter()
        .max_by(|&&a, &&b| {
            util(&plain, &format!("leaf1:{a}")).total_cmp(&util(&plain, &format!("leaf1:{b}")))
        })
        .unwrap();
    let target = if pin_other_port { *ups.iter().find(|&&p| p != first).unwrap() } else { first };
    let pin = Pin {
        log: log.clone(),
        leaf1,
        src: src as u32,
        dst: dst as u32,
        port: target,
        host_port: topo.hosts[src].port,
        at_ps: 20_000_000,
    };
    let run = metaroce_sim::run_controlled(
        &topo,
        &routing,
        &sc,
        "pin",
        Box::new(Flowlet::new(1, topo.switches.len(), 50_000_000)),
        Some(Box::new(pin)),
        &mut |_| {},
    )
    .unwrap();
    let log = std::mem::take(&mut *log.lock().unwrap());
    (log, run, target)
}

#[test]
fn a_steer_entry_moves_a_flow_only_at_its_next_flowlet() {
    let (log, run, _) = run_pinned(true);
    assert!(run.summary.stopped.is_none(), "{:?}", run.summary.stopped);
    assert_eq!(run.summary.fct.count, 4, "both jobs, both directions");
    assert!(matches!(log.errors[0], ControlError::NotInGroup { .. }), "{:?}", log.errors);
    assert!(matches!(log.errors[1], ControlError::UnknownSwitch(99)));
    assert!(matches!(log.errors[2], ControlError::UnknownHost(999)));
    // The running message never moved; the second one, after the gap,
    // started its flowlet on the entry.
    assert_eq!(log.moved.len(), 1, "{:?}", log.moved);
    let (t, tag) = log.moved[0];
    assert_eq!(tag, 7);
    assert!(t >= 200_000_000, "moved at {t} ps, before the gap");
    assert_eq!(run.summary.steered_flowlets, 1);
}

#[test]
fn a_pair_entry_on_the_port_in_use_is_taken_by_the_next_flowlet() {
    let (log, run, target) = run_pinned(false);
    assert_eq!(run.summary.fct.count, 4, "both jobs, both directions");
    // The second message took its entry (the port the first one used).
    assert_eq!(log.moved.iter().map(|m| m.1).collect::<Vec<_>>(), vec![7]);
    assert!(util(&run, &format!("leaf1:{target}")) > 0.0);
}

#[test]
fn the_first_switch_reports_a_new_large_flow_at_its_crossing_then_once_per_window() {
    let (log, _, _) = run_pinned(false);
    assert!(!log.large.is_empty());
    let topo = leaf_spine(2, 2, 1, 100);
    let leaf_of = |h: u32| topo.hosts[h as usize].leaf;
    for (t, f) in &log.large {
        assert_eq!(f.switch, leaf_of(f.src), "reported by the first switch: {f:?} at {t}");
        assert_eq!(f.dst, 1 - f.src);
        assert!(f.bytes >= 64 * 1024 && f.window_ps > 0, "{f:?}");
        assert!(!f.collision);
    }
    assert!(log.large.iter().any(|l| l.1.src == 0) && log.large.iter().any(|l| l.1.src == 1));
    let first = log.large.iter().find(|l| l.1.src == 0).map(|l| l.1.sport);
    let reports: Vec<_> = log.large.iter().filter(|l| l.1.src == 0 && Some(l.1.sport) == first).collect();
    assert!(reports.len() >= 3, "{reports:?}");
    // The first at the crossing, within the window it opened; the rest at
    // a window's close, once per window.
    assert!(reports[0].1.window_ps < 10_000_000, "{:?}", reports[0]);
    assert!(reports[1..].iter().all(|r| r.1.window_ps >= 10_000_000), "{reports:?}");
    let times: Vec<u64> = reports[1..].iter().map(|l| l.0).collect();
    assert!(times.windows(2).all(|w| w[1] - w[0] >= 10_000_000), "once per window: {times:?}");
}
