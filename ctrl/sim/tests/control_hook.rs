//! The control hook on its own: thresholds and crossings, wake-ups, group
//! rewrites (and the errors for bad ones), a link failure, and the moment
//! a rewrite moves traffic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use metaroce_sim::control::forward::Flowlet;
use metaroce_sim::control::{Control, ControlError, ControlSummary, Crossing, Ctx, Thresholds};
use metaroce_topo::{Routing, SwitchId, Topology};

const PKT: u64 = 4096 + 62;

#[derive(Debug, Default)]
struct Log {
    crossings: Vec<(u64, Crossing)>,
    wakes: Vec<(u64, u64)>,
    links: Vec<(u64, usize, bool)>,
    moved: Vec<(u64, u64)>,
    errors: Vec<ControlError>,
    groups: Vec<Vec<(u16, u32)>>,
}

/// Incast h1-1, h1-2 → h2-1 on two leaves and two spines: watches the
/// receiver's port, at 20 µs puts leaf1's traffic toward leaf2 on one
/// uplink, at 40 µs fails that uplink, at 41 µs moves to the other one.
#[derive(Debug)]
struct Script {
    log: Arc<Mutex<Log>>,
    leaf1: SwitchId,
    leaf2: SwitchId,
    host_port: u16,
    uplinks: Vec<(u16, usize)>,
}

impl Control for Script {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        let t = Thresholds { high_bytes: 8 * PKT, low_bytes: 2 * PKT, min_interval_ps: 0 };
        ctx.set_thresholds(self.leaf2, self.host_port, Some(t)).unwrap();
        let bad = Thresholds { high_bytes: 1, low_bytes: 2, min_interval_ps: 0 };
        let mut log = self.log.lock().unwrap();
        log.errors.push(ctx.set_thresholds(self.leaf2, self.host_port, Some(bad)).unwrap_err());
        log.errors.push(ctx.set_thresholds(self.leaf2, 999, None).unwrap_err());
        for (t, token) in [(20_000_000, 1), (40_000_000, 2), (41_000_000, 3)] {
            ctx.wake_at(t, token);
        }
    }

    fn on_crossing(&mut self, ctx: &mut Ctx<'_>, c: &Crossing) {
        self.log.lock().unwrap().crossings.push((ctx.now_ps(), *c));
    }

    fn on_wake(&mut self, ctx: &mut Ctx<'_>, token: u64) {
        let mut log = self.log.lock().unwrap();
        log.wakes.push((ctx.now_ps(), token));
        let (a, b) = (self.uplinks[0].0, self.uplinks[1].0);
        match token {
            1 => {
                log.groups.push(ctx.group(self.leaf1, self.leaf2).unwrap());
                ctx.set_group(self.leaf1, self.leaf2, &[(a, 1), (b, 0)], 1).unwrap();
                log.groups.push(ctx.group(self.leaf1, self.leaf2).unwrap());
                log.errors.push(ctx.set_group(self.leaf1, self.leaf2, &[(a, 0)], 0).unwrap_err());
                log.errors
                    .push(ctx.set_group(self.leaf1, self.leaf2, &[(self.host_port, 1)], 0).unwrap_err());
                log.errors.push(ctx.set_group(99, self.leaf2, &[(a, 1)], 0).unwrap_err());
            }
            2 => ctx.set_link(self.uplinks[0].1, false).unwrap(),
            _ => ctx.set_group(self.leaf1, self.leaf2, &[(b, 1)], 2).unwrap(),
        }
    }

    fn on_link(&mut self, ctx: &mut Ctx<'_>, link: usize, up: bool) {
        self.log.lock().unwrap().links.push((ctx.now_ps(), link, up));
        assert_eq!(ctx.link_is_up(link), Ok(up));
    }

    fn on_moved(&mut self, ctx: &mut Ctx<'_>, tag: u64) {
        self.log.lock().unwrap().moved.push((ctx.now_ps(), tag));
    }

    fn summary(&self) -> ControlSummary {
        ControlSummary { kind: "script".into(), ..Default::default() }
    }
}

fn uplinks(topo: &Topology, leaf: SwitchId) -> Vec<(u16, usize)> {
    topo.adjacency(leaf).iter().map(|a| (a.port, a.link)).collect()
}

#[test]
fn a_control_sees_crossings_rewrites_groups_and_fails_links() {
    let topo = leaf_spine(2, 2, 2, 100);
    let mut sc = scenario(
        &topo,
        "jobs: [{name: in, pattern: incast, hosts: [h1-1, h1-2], target: h2-1, size: 1MiB}]\n\
         network: {dcqcn: false, rto: 20us}",
    );
    sc.net.reliable = true;
    let (leaf1, leaf2) = (topo.switch_id("leaf1").unwrap(), topo.switch_id("leaf2").unwrap());
    let h21 = match topo.lookup("h2-1") {
        Some(metaroce_topo::NodeRef::Host(h)) => h,
        other => panic!("{other:?}"),
    };
    let log = Arc::new(Mutex::new(Log::default()));
    let script = Script {
        log: log.clone(),
        leaf1,
        leaf2,
        host_port: topo.hosts[h21].port,
        uplinks: uplinks(&topo, leaf1),
    };
    let routing = Routing::compute(&topo);
    let fwd = Box::new(Flowlet::new(1, topo.switches.len(), 5_000_000));
    let run = metaroce_sim::run_controlled(
        &topo,
        &routing,
        &sc,
        "script",
        fwd,
        Some(Box::new(script)),
        &mut |_| {},
    )
    .unwrap();
    let s = &run.summary;
    let log = log.lock().unwrap();
    assert!(s.stopped.is_none(), "{:?}", s.stopped);
    assert_eq!(s.fct.count, 2, "go-back-N recovers what the failure lost");
    assert_eq!(s.control.as_ref().map(|c| c.kind.as_str()), Some("script"));
    // Two senders into one 100G port: the queue crosses up, and down when it drains.
    let ups: Vec<bool> = log.crossings.iter().map(|(_, c)| c.congested).collect();
    assert!(ups.len() >= 2 && ups[0] && !ups[ups.len() - 1], "{ups:?}");
    assert!(ups.windows(2).all(|w| w[0] != w[1]), "crossings alternate: {ups:?}");
    let (t, first) = log.crossings[0];
    assert!(first.depth_bytes >= 8 * PKT && first.switch == leaf2, "{first:?} at {t}");
    assert_eq!(log.wakes.iter().map(|w| w.1).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(log.wakes[0].0, 20_000_000);
    let (a, b) = (log.groups[0].clone(), log.groups[1].clone());
    assert_eq!(a.len(), 2, "{a:?}");
    assert_eq!(b, vec![(uplinks(&topo, leaf1)[0].0, 1)], "weight 0 leaves a member out");
    assert!(matches!(log.errors[0], ControlError::Thresholds { .. }), "{:?}", log.errors);
    assert!(matches!(log.errors[1], ControlError::UnknownPort { .. }));
    assert!(matches!(log.errors[2], ControlError::EmptyGroup { .. }));
    assert!(matches!(log.errors[3], ControlError::NotFabricPort { .. }));
    assert!(matches!(log.errors[4], ControlError::UnknownSwitch(99)));
    assert_eq!(log.links, vec![(40_000_000, uplinks(&topo, leaf1)[0].1, false)]);
    assert!(s.lost_on_failure + s.blackholed > 0, "the failed uplink carried the traffic");
    assert!(s.retransmits > 0);
    // The failed member's flowlets must move at the next packet: tag 2 at once.
    assert!(
        log.moved.iter().any(|&(t, tag)| tag == 2 && (41_000_000..45_000_000).contains(&t)),
        "{:?}",
        log.moved
    );
}

/// Fails every uplink of leaf1 at 5 µs and then only ticks: what was in
/// flight is lost and nothing retransmits (out-of-order NICs on a lossless
/// fabric without scripted failures keep no copies), so the run must
/// end as stalled, not tick on to the time limit.
#[derive(Debug)]
struct Cut {
    uplinks: Vec<usize>,
    ticks: Arc<Mutex<u64>>,
}

impl Control for Cut {
    fn start(&mut self, ctx: &mut Ctx<'_>) {
        ctx.wake_at(5_000_000, 0);
    }

    fn on_wake(&mut self, ctx: &mut Ctx<'_>, token: u64) {
        if token == 0 {
            for &l in &self.uplinks {
                ctx.set_link(l, false).unwrap();
            }
        }
        *self.ticks.lock().unwrap() += 1;
        ctx.wake_at(ctx.now_ps() + 10_000_000, 1);
    }

    fn summary(&self) -> ControlSummary {
        ControlSummary { kind: "cut".into(), ..Default::default() }
    }
}

#[test]
fn a_run_only_the_control_keeps_ticking_ends_as_stalled() {
    let topo = leaf_spine(2, 2, 2, 100);
    let sc =
        scenario(&topo, "nic: {ordering: out-of-order}\njobs: [{name: x, pattern: permutation, hosts: [h1-1, h2-1], shift: 1, size: 1MiB}]");
    let leaf1 = topo.switch_id("leaf1").unwrap();
    let ticks = Arc::new(Mutex::new(0));
    let cut = Cut { uplinks: uplinks(&topo, leaf1).into_iter().map(|u| u.1).collect(), ticks: ticks.clone() };
    let routing = Routing::compute(&topo);
    let fwd = Box::new(Flowlet::new(1, topo.switches.len(), 5_000_000));
    let run =
        metaroce_sim::run_controlled(&topo, &routing, &sc, "cut", fwd, Some(Box::new(cut)), &mut |_| {})
            .unwrap();
    assert_eq!(run.summary.stopped, Some(metaroce_sim::Stop::Stalled), "{:?}", run.summary.stopped);
    assert!(run.summary.unfinished_messages > 0);
    let ticks = *ticks.lock().unwrap();
    assert!(
        (2..1000).contains(&ticks),
        "stopped soon after the traffic did, not at the time limit: {ticks} ticks"
    );
}
