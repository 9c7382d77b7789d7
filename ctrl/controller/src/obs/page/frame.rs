//! One frame of the live page: what every link looks like now, the mode,
//! the sessions, the last events and the recommendations, built from the
//! published [`Snapshot`] (the same documents the `GET /api/v1/*`
//! endpoints serve) and the event log. Pure: the hub decides when.
//!
//! Links are listed sparsely (only those with load, queue or a mark), as
//! `[link index, utilisation %, queue depth, flags]`, so a quiet 2,048-switch
//! fabric costs a few hundred bytes a frame.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use metaroce_topo::Topology;
use serde_json::{json, Value};

use crate::obs::{Recent, Snapshot};

/// Flag bits of a link in a frame (the page's legend names them).
pub const HOT: u8 = 1;
/// A weight below its group's largest: the policy routes around it.
pub const DERATED: u8 = 2;
pub const FAILED: u8 = 4;
/// In a congestion tree the view found.
pub const TREE: u8 = 8;
/// A steered flow's path crosses it.
pub const STEERED: u8 = 16;

/// Events a frame carries (the newest).
pub const FRAME_EVENTS: usize = 25;
/// Recommendations a frame carries (the count is always given).
const FRAME_RECOMMENDATIONS: usize = 20;
/// Fabrics up to this many switches get every session in each frame;
/// larger ones get counts and the switches with a problem.
const LISTED_SWITCHES: usize = 64;
/// Problem switches listed in a frame of a large fabric.
const LISTED_PROBLEMS: usize = 50;
/// Event details longer than this (as JSON) are left out of frames.
const MAX_DETAILS_CHARS: usize = 400;

/// The fabric as the frames name it: links by their ends.
#[derive(Debug)]
pub struct Fabric {
    pub topo: Arc<Topology>,
    /// `(switch, port)` of either end → link index.
    by_port: HashMap<(usize, u16), usize>,
}

impl Fabric {
    pub fn new(topo: Arc<Topology>) -> Self {
        let mut by_port = HashMap::with_capacity(topo.links.len() * 2);
        for (i, l) in topo.links.iter().enumerate() {
            by_port.insert((l.a.switch, l.a.port), i);
            by_port.insert((l.b.switch, l.b.port), i);
        }
        Fabric { topo, by_port }
    }

    /// The link leaving `switch` (an index) by `port`, and whether that
    /// is its `a` end.
    fn link_at(&self, switch: usize, port: u16) -> Option<(usize, bool)> {
        let &i = self.by_port.get(&(switch, port))?;
        Some((i, self.topo.links[i].a.switch == switch && self.topo.links[i].a.port == port))
    }

    fn link_named(&self, switch: &str, port: u16) -> Option<(usize, bool)> {
        self.link_at(self.topo.switch_id(switch)?, port)
    }

    /// `"leaf1:3"` → its link.
    fn link_of_end(&self, end: &str) -> Option<usize> {
        let (name, port) = end.rsplit_once(':')?;
        Some(self.link_named(name, port.parse().ok()?)?.0)
    }
}

/// One link's state, per direction where it has one.
#[derive(Debug, Default, Clone, Copy)]
struct LinkState {
    /// Bits per second placed on it, from its `a` end and from its `b` end.
    bps: [f64; 2],
    depth: u32,
    flags: u8,
}

fn port_key(v: &Value) -> Option<(usize, u16)> {
    Some((usize::try_from(v["switch"].as_u64()?).ok()?, u16::try_from(v["port"].as_u64()?).ok()?))
}

fn items<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v[key].as_array().into_iter().flatten()
}

/// Queue depths, hot ports and congestion trees of the view.
fn congestion(fab: &Fabric, doc: &Value, links: &mut BTreeMap<usize, LinkState>) -> Vec<Value> {
    for p in items(doc, "ports") {
        let Some((i, _)) = port_key(&p["port"]).and_then(|(s, q)| fab.link_at(s, q)) else { continue };
        let st = links.entry(i).or_default();
        let depth = p["heat"]["depth"].as_u64().unwrap_or(0);
        st.depth = st.depth.max(u32::try_from(depth).unwrap_or(u32::MAX));
        if p["heat"]["congested"].as_bool() == Some(true) {
            st.flags |= HOT;
        }
    }
    for p in items(doc, "hot_ports") {
        if let Some((i, _)) = port_key(p).and_then(|(s, q)| fab.link_at(s, q)) {
            links.entry(i).or_default().flags |= HOT;
        }
    }
    let mut trees = Vec::new();
    for t in items(doc, "trees") {
        let Some((root, _)) = port_key(&t["root"]).and_then(|(s, q)| fab.link_at(s, q)) else { continue };
        let members: Vec<usize> = items(t, "members")
            .filter_map(|m| port_key(m).and_then(|(s, q)| fab.link_at(s, q)).map(|(i, _)| i))
            .collect();
        for &i in members.iter().chain([&root]) {
            links.entry(i).or_default().flags |= TREE;
        }
        trees.push(json!({ "root": root, "members": members, "depth": t["depth"] }));
    }
    trees
}

/// Hosts whose NICs report PFC or pause frames.
fn paused_hosts(doc: &Value) -> Vec<Value> {
    items(doc, "hosts")
        .filter(|h| {
            h["pfc_alarm"].as_bool() == Some(true)
                || h["devices"].as_object().is_some_and(|d| {
                    d.values().any(|x| {
                        x["pfc_per_s"].as_f64().unwrap_or(0.0) > 0.0
                            || x["pause_per_s"].as_f64().unwrap_or(0.0) > 0.0
                    })
                })
        })
        .map(|h| h["host"].clone())
        .collect()
}

/// Placed flows' rates on their paths; steered hops marked.
fn placement(fab: &Fabric, doc: &Value, links: &mut BTreeMap<usize, LinkState>) {
    for f in items(doc, "flows") {
        let rate = f["rate_bps"].as_f64().unwrap_or(0.0);
        for hop in items(f, "path") {
            let (Some(sw), Some(port)) = (hop["switch"].as_str(), hop["port"].as_u64()) else { continue };
            let Some((i, from_a)) = u16::try_from(port).ok().and_then(|p| fab.link_named(sw, p)) else {
                continue;
            };
            let st = links.entry(i).or_default();
            st.bps[usize::from(!from_a)] += rate;
            if !hop["steered"].is_null() && hop["steered"] != false {
                st.flags |= STEERED;
            }
        }
    }
}

/// Ports the policy weighs below the largest weight of their group.
fn derated(fab: &Fabric, doc: &Value, links: &mut BTreeMap<usize, LinkState>) -> (usize, Vec<Value>) {
    let recs: Vec<&Value> = items(doc, "recommendations").collect();
    for r in &recs {
        let Some(sw) = r["switch"].as_str() else { continue };
        let ws: Vec<(u64, u64)> =
            items(r, "weights").filter_map(|w| Some((w["port"].as_u64()?, w["weight"].as_u64()?))).collect();
        let top = ws.iter().map(|w| w.1).max().unwrap_or(0);
        for (port, _) in ws.iter().filter(|w| w.1 < top) {
            if let Some((i, _)) = u16::try_from(*port).ok().and_then(|p| fab.link_named(sw, p)) {
                links.entry(i).or_default().flags |= DERATED;
            }
        }
    }
    (recs.len(), recs.into_iter().take(FRAME_RECOMMENDATIONS).cloned().collect())
}

/// Mode and switch sessions from the status document.
fn sessions(status: &Value) -> Value {
    let all: Vec<&Value> = items(status, "switches").collect();
    let count = |key: &str| all.iter().filter(|s| s[key].as_bool() == Some(true)).count();
    let slim = |s: &&Value| {
        json!({ "name": s["name"], "connected": s["connected"], "primary": s["primary"],
                "programmed": s["programmed"], "last_error": s["last_error"] })
    };
    let listed: Vec<Value> = if all.len() <= LISTED_SWITCHES {
        all.iter().map(slim).collect()
    } else {
        all.iter()
            .filter(|s| {
                s["connected"].as_bool() != Some(true)
                    || s["primary"].as_bool() != Some(true)
                    || !s["last_error"].is_null()
            })
            .take(LISTED_PROBLEMS)
            .map(slim)
            .collect()
    };
    json!({
        "total": all.len(), "connected": count("connected"), "primary": count("primary"),
        "programmed": count("programmed"), "listed": listed, "all_listed": all.len() <= LISTED_SWITCHES,
    })
}

fn slim_events(recent: &Recent) -> Vec<Value> {
    recent
        .events
        .iter()
        .rev()
        .map(|e| {
            let details = serde_json::to_string(&e.details).map_or(0, |s| s.len());
            json!({
                "id": e.id, "ts": e.ts, "kind": e.kind, "switch": e.switch, "reason": e.reason,
                "details": if details <= MAX_DETAILS_CHARS { e.details.clone() } else { Value::Null },
            })
        })
        .collect()
}

/// The frame numbered `seq`.
pub fn build(fab: &Fabric, snap: &Snapshot, recent: &Recent, seq: u64) -> Value {
    let mut links: BTreeMap<usize, LinkState> = BTreeMap::new();
    let congestion_doc = snap.congestion.get();
    let trees = congestion(fab, congestion_doc, &mut links);
    placement(fab, snap.flows.get(), &mut links);
    let (recommended, recommendations) = derated(fab, snap.recommendations.get(), &mut links);
    for l in items(&snap.status, "failed_links") {
        if let Some(i) = l["a"].as_str().and_then(|a| fab.link_of_end(a)) {
            links.entry(i).or_default().flags |= FAILED;
        }
    }
    let rows: Vec<Value> = links
        .iter()
        .filter_map(|(&i, st)| {
            let bw = fab.topo.links[i].bandwidth.bps().max(1) as f64;
            let util = (st.bps[0].max(st.bps[1]) / bw * 1000.0).round() / 10.0;
            (util > 0.0 || st.depth > 0 || st.flags != 0).then(|| json!([i, util, st.depth, st.flags]))
        })
        .collect();
    let jobs: Vec<&Value> = items(snap.jobs.get(), "jobs").map(|j| &j["name"]).collect();
    let phases = job_phases(snap.jobs.get());
    json!({
        "seq": seq,
        "mode": snap.status["mode"],
        "pinned": snap.status["pinned_to_snapshot"],
        "decisions": snap.status["decisions"],
        "failed_switches": snap.status["failed_switches"],
        "sessions": sessions(&snap.status),
        "links": rows,
        "trees": trees,
        "paused_hosts": paused_hosts(congestion_doc),
        "recommended": recommended,
        "recommendations": recommendations,
        "jobs": jobs,
        "job_phases": phases,
        "events": slim_events(recent),
        "last_event": recent.last_id,
    })
}

/// The periodic jobs' phases on one time axis, for the page's timeline:
/// per job its period, communication time and recommended start offset
/// (ms), and the plan's common period and verdict. Jobs without a
/// recommendation (no period announced) are left out.
fn job_phases(doc: &Value) -> Value {
    let mut common = 0.0f64;
    let mut verdict = Value::Null;
    let rows: Vec<Value> = items(doc, "jobs")
        .filter_map(|j| {
            let r = j.get("recommendation")?;
            common = common.max(r["common_period_ms"].as_f64().unwrap_or(0.0));
            verdict = r["verdict"].clone();
            Some(json!({
                "name": j["name"],
                "offset_ms": r["recommended_offset_ms"],
                "period_ms": r["period_ms"],
                "communication_ms": r["communication_ms"],
            }))
        })
        .collect();
    json!({"jobs": rows, "common_period_ms": common, "verdict": verdict})
}

#[cfg(test)]
#[path = "frame_tests.rs"]
pub(super) mod tests;
