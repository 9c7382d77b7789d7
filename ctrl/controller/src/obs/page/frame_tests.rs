//! Frames from hand-made snapshot documents on a two-by-two fabric.

#![allow(clippy::unwrap_used)]

use metaroce_topo::gen::{self, Common};
use metaroce_topo::units::Bandwidth;

use super::*;
use crate::obs::{EventLog, LazyJson};

pub(crate) fn two_by_two() -> Arc<Topology> {
    Arc::new(gen::leaf_spine(&Common::new("two by two", Bandwidth::gbps(100)), 2, 2, 2, 1).unwrap())
}

/// The link between `a` and `b`, and the ports of its ends on each.
fn link(t: &Topology, a: &str, b: &str) -> (usize, u16, u16) {
    let (sa, sb) = (t.switch_id(a).unwrap(), t.switch_id(b).unwrap());
    t.links
        .iter()
        .enumerate()
        .find_map(|(i, l)| {
            let (ea, eb) = l.ends_from(sa)?;
            (eb.switch == sb).then_some((i, ea.port, eb.port))
        })
        .unwrap()
}

fn row(frame: &Value, link: usize) -> Option<Vec<f64>> {
    frame["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0] == link)
        .map(|r| r.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect())
}

#[test]
fn page_frame_marks_hot_derated_failed_tree_and_steered_links() {
    let t = two_by_two();
    let fab = Fabric::new(Arc::clone(&t));
    let (up, l1_port, _) = link(&t, "leaf1", "spine1");
    let (other, l1_port2, _) = link(&t, "leaf1", "spine2");
    let (down, s2_port, _) = link(&t, "spine2", "leaf2");
    let leaf1 = t.switch_id("leaf1").unwrap();
    let snap = Snapshot {
        status: std::sync::Arc::new(json!({
            "mode": "act", "pinned_to_snapshot": false, "decisions": 3,
            "switches": [{"name": "leaf1", "connected": true, "primary": true, "programmed": true, "last_error": null},
                         {"name": "spine1", "connected": false, "primary": false, "programmed": false, "last_error": "refused"}],
            "failed_links": [{"a": format!("spine2:{s2_port}"), "b": "leaf2:9"}],
        })),
        congestion: LazyJson::ready(json!({
            "ports": [{"port": {"switch": leaf1, "port": l1_port}, "heat": {"congested": true, "depth": 42, "max_depth": 50}}],
            "hot_ports": [],
            "trees": [{"root": {"switch": leaf1, "port": l1_port}, "members": [], "depth": 0}],
            "hosts": [{"host": "h1", "pfc_alarm": false, "devices": {"mlx5_0": {"pfc_per_s": 3.0}}},
                      {"host": "h2", "pfc_alarm": false, "devices": {"mlx5_0": {"pfc_per_s": 0.0}}}],
        })),
        recommendations: LazyJson::ready(json!({"mode": "act", "recommendations": [
            {"switch": "leaf1", "toward": "leaf2", "weights": [{"port": l1_port, "weight": 1}, {"port": l1_port2, "weight": 4}]}
        ]})),
        flows: LazyJson::ready(json!({"flows": [
            {"flow": {"kind": "pair", "src": "10.0.1.1", "dst": "10.0.2.1"}, "job": "j", "rate_bps": 25e9,
             "path": [{"switch": "leaf1", "port": l1_port2, "next": "spine2", "steered": 1}]}
        ]})),
        jobs: LazyJson::ready(json!({"jobs": [{"name": "j"}]})),
        ..Snapshot::default()
    };
    let log = EventLog::new(100);
    for i in 0..30 {
        log.record("reroute", Some("leaf1"), "congestion", json!({ "i": i }));
    }
    let f = build(&fab, &snap, &log.recent(30 - FRAME_EVENTS as u64, FRAME_EVENTS), 7);
    assert_eq!(f["seq"], 7);
    assert_eq!(f["mode"], "act");
    assert_eq!(row(&f, up).unwrap(), vec![up as f64, 0.0, 42.0, f64::from(HOT | DERATED | TREE)]);
    assert_eq!(row(&f, other).unwrap(), vec![other as f64, 25.0, 0.0, f64::from(STEERED)]);
    assert_eq!(row(&f, down).unwrap()[3], f64::from(FAILED));
    assert_eq!(f["links"].as_array().unwrap().len(), 3, "quiet links are left out: {f}");
    assert_eq!(f["trees"][0]["root"], up);
    assert_eq!(f["paused_hosts"], json!(["h1"]));
    assert_eq!(f["sessions"]["connected"], 1);
    assert_eq!(f["sessions"]["listed"][1]["last_error"], "refused");
    assert_eq!(f["events"].as_array().unwrap().len(), FRAME_EVENTS);
    assert_eq!(f["events"][0]["id"], 30, "newest first");
    assert_eq!(f["jobs"], json!(["j"]));
    assert_eq!(f["recommended"], 1);
}

#[test]
fn page_frame_puts_periodic_jobs_on_one_time_axis() {
    let t = two_by_two();
    let fab = Fabric::new(Arc::clone(&t));
    let rec = |offset: f64| {
        json!({"recommended_offset_ms": offset, "period_ms": 2.0, "communication_ms": 0.5,
               "common_period_ms": 2.0, "verdict": "staggered"})
    };
    let snap = Snapshot {
        jobs: LazyJson::ready(json!({"jobs": [
            {"name": "a", "recommendation": rec(0.0)},
            {"name": "b", "recommendation": rec(1.0)},
            {"name": "no-period"},
        ]})),
        ..Snapshot::default()
    };
    let f = build(&fab, &snap, &EventLog::new(4).recent(0, 10), 1);
    let p = &f["job_phases"];
    assert_eq!(p["common_period_ms"], 2.0);
    assert_eq!(p["verdict"], "staggered");
    assert_eq!(p["jobs"].as_array().unwrap().len(), 2, "a job without a period has no phase: {p}");
    assert_eq!(
        p["jobs"][1],
        json!({"name": "b", "offset_ms": 1.0, "period_ms": 2.0, "communication_ms": 0.5})
    );
    assert_eq!(f["jobs"], json!(["a", "b", "no-period"]));
}

#[test]
fn page_frame_of_an_empty_snapshot_is_quiet() {
    let fab = Fabric::new(two_by_two());
    let f = build(&fab, &Snapshot::default(), &EventLog::new(4).recent(0, 10), 1);
    assert_eq!(f["links"], json!([]));
    assert_eq!(f["events"], json!([]));
    assert_eq!(f["sessions"]["total"], 0);
}

#[test]
fn page_frame_ignores_ports_and_links_it_does_not_know() {
    let fab = Fabric::new(two_by_two());
    let snap = Snapshot {
        status: std::sync::Arc::new(
            json!({"failed_links": [{"a": "nope:1"}, {"a": "leaf1"}, {"a": "leaf1:99999"}]}),
        ),
        congestion: LazyJson::ready(
            json!({"ports": [{"port": {"switch": 99, "port": 1}, "heat": {"depth": 5}}],
                                            "trees": [{"root": {"switch": -1}}]}),
        ),
        flows: LazyJson::ready(json!({"flows": [{"path": [{"switch": "x", "port": 1}, {"port": "y"}]}]})),
        ..Snapshot::default()
    };
    let f = build(&fab, &snap, &EventLog::new(4).recent(0, 10), 1);
    assert_eq!(f["links"], json!([]));
}
