//! The JSON the status API serves, built from the core and the switches'
//! installed state.

use std::collections::BTreeMap;
use std::sync::Arc;

use metaroce_pipeline::{Entry, Key, RouteTarget};
use serde_json::{json, Value};

use crate::core::Core;
use crate::mode::Mode;
use crate::obs::Metrics;
use crate::plan::Overrides;
use metaroce_telemetry::view::ViewSummary;

/// What the state task knows of one switch's session.
#[derive(Debug, Clone, Default)]
pub struct SwitchStatus {
    pub connected: bool,
    pub primary: bool,
    /// It has held its desired state since its session came up.
    pub programmed: bool,
    pub installed: Arc<BTreeMap<Key, Entry>>,
    /// What failed last, named by kind ("connect: ...", "write refused: ...");
    /// `None` while all is well.
    pub last_error: Option<String>,
    pub syncs: u64,
    /// Failed attempts of the outage the switch is in (0 when up).
    pub failed_attempts: u32,
    /// Entry changes the switch refused, held back, and their summary.
    pub refused_entries: usize,
    pub refused: Option<Value>,
    /// Refused: its pipeline cookie names another fabric or switch.
    pub foreign: bool,
}

impl SwitchStatus {
    /// The error the held-back refusals amount to, if there are any.
    pub fn refused_error(&self) -> Option<String> {
        let r = self.refused.as_ref().filter(|_| self.refused_entries > 0)?;
        let first = &r["first"][0];
        Some(format!(
            "write refused: {} entries held back (first: {} {}: {})",
            self.refused_entries,
            first["entry"].as_str().unwrap_or("?"),
            first["code"].as_str().unwrap_or("?"),
            first["message"].as_str().unwrap_or("?")
        ))
    }
}

pub fn status(core: &Core, switches: &[SwitchStatus], decisions: u64) -> Value {
    let topo = core.topology();
    let sw: Vec<Value> = topo
        .switches
        .iter()
        .zip(switches)
        .map(|(s, st)| {
            json!({
                "name": s.name, "role": s.role.as_str(), "p4rt": s.p4rt,
                "connected": st.connected, "primary": st.primary, "programmed": st.programmed,
                "installed_entries": st.installed.len(), "syncs": st.syncs, "last_error": st.last_error,
                "failed_attempts": st.failed_attempts, "refused_entries": st.refused_entries, "refused": st.refused,
                "foreign": st.foreign,
            })
        })
        .collect();
    let links: Vec<Value> = core
        .failed_links()
        .iter()
        .map(|&l| json!({"a": topo.endpoint_name(topo.links[l].a), "b": topo.endpoint_name(topo.links[l].b)}))
        .collect();
    let failed: Vec<&str> = core.failed_switches().iter().map(|&s| topo.switches[s].name.as_str()).collect();
    json!({
        "fabric": topo.name, "mode": core.mode().as_str(), "pinned_to_snapshot": core.pinned(),
        "switches": sw, "failed_links": links, "failed_switches": failed,
        "decisions": decisions, "overrides": core.policy_state().override_count(),
    })
}

/// Installed groups of every switch (members by port) and its route count.
pub fn groups(names: &[String], installed: &[Arc<BTreeMap<Key, Entry>>]) -> Value {
    let mut out = serde_json::Map::new();
    for (name, inst) in names.iter().zip(installed) {
        let port_of = |member: u32| -> Option<u16> {
            match inst.get(&Key::Member(member)) {
                Some(Entry::Member { nhop, .. }) => match inst.get(&Key::Nhop(*nhop)) {
                    Some(Entry::Nhop { port, .. }) => Some(*port),
                    _ => None,
                },
                _ => None,
            }
        };
        let mut groups = Vec::new();
        let mut routes = 0usize;
        let mut to_groups = 0usize;
        for e in inst.values() {
            match e {
                Entry::Group { id, members } => groups.push(json!({
                    "id": id,
                    "members": members.iter().map(|(m, w)| json!({"port": port_of(*m), "weight": w})).collect::<Vec<_>>(),
                })),
                Entry::Route { target, .. } => {
                    routes += 1;
                    to_groups += usize::from(matches!(target, RouteTarget::Group(_)));
                }
                _ => {}
            }
        }
        out.insert(name.clone(), json!({"groups": groups, "routes": routes, "routes_to_groups": to_groups}));
    }
    Value::Object(out)
}

/// What the policy recommends (its overrides), named.
pub fn recommendations(names: &[String], recs: &Overrides, mode: Mode, pinned: bool) -> Value {
    let name = |s: usize| names.get(s).map_or("?", String::as_str);
    let list: Vec<Value> = recs
        .iter()
        .map(|((s, leaf), w)| {
            json!({
                "switch": name(*s), "toward": name(*leaf),
                "weights": w.iter().map(|(p, w)| json!({"port": p, "weight": w})).collect::<Vec<_>>(),
                "applied": mode.writes() && !pinned,
            })
        })
        .collect();
    json!({"mode": mode.as_str(), "recommendations": list})
}

/// The congestion view, with switch names next to indices.
pub fn congestion(summary: &ViewSummary, names: &[String], hosts: Value) -> Value {
    let mut v = serde_json::to_value(summary).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("switch_names".into(), json!(names));
        m.insert("hosts".into(), hosts);
    }
    v
}

/// Group weights and path shares of one switch, from what it holds.
/// `before` is what it held at its last update (what the metrics show
/// now), if known: then, while the group members are the same, only the
/// groups that changed are rewritten. A reaction replaces a group or two
/// of a switch holding dozens, and every switch's update runs on a
/// blocking thread that competes with the switch writes for the cores.
pub fn update_group_metrics(
    metrics: &Metrics,
    name: &str,
    before: Option<&BTreeMap<Key, Entry>>,
    installed: &BTreeMap<Key, Entry>,
) {
    let member_keys = Key::Member(0)..=Key::Member(u32::MAX);
    let group_keys = Key::Group(0)..=Key::Group(u32::MAX);
    let port_of = |m: u32| match installed.get(&Key::Member(m)) {
        Some(Entry::Member { nhop, .. }) => nhop.saturating_sub(1),
        _ => 0,
    };
    let same_members =
        |b: &&BTreeMap<Key, Entry>| b.range(member_keys.clone()).eq(installed.range(member_keys.clone()));
    match before.filter(same_members) {
        Some(before) => {
            for (k, e) in before.range(group_keys.clone()) {
                if let (Entry::Group { id, members }, false) = (e, installed.get(k) == Some(e)) {
                    for (m, _) in members {
                        metrics.remove_group_weight(name, *id, port_of(*m));
                    }
                }
            }
            for (k, e) in installed.range(group_keys.clone()) {
                if let (Entry::Group { id, members }, false) = (e, before.get(k) == Some(e)) {
                    for (m, w) in members {
                        metrics.set_group_weight(name, *id, port_of(*m), *w);
                    }
                }
            }
        }
        None => {
            metrics.clear_groups(name);
            for e in installed.range(group_keys.clone()).map(|(_, e)| e) {
                if let Entry::Group { id, members } = e {
                    for (m, w) in members {
                        metrics.set_group_weight(name, *id, port_of(*m), *w);
                    }
                }
            }
        }
    }
    metrics.clear_path_shares(name);
    let mut share: BTreeMap<u16, f64> = BTreeMap::new();
    let mut groups = 0.0;
    for e in installed.range(group_keys).map(|(_, e)| e) {
        if let Entry::Group { members, .. } = e {
            let total: u32 = members.iter().map(|(_, w)| *w).sum();
            groups += 1.0;
            for (m, w) in members {
                *share.entry(port_of(*m)).or_default() += f64::from(*w) / f64::from(total.max(1));
            }
        }
    }
    for (port, s) in share {
        metrics.set_path_share(name, port, s / f64::max(groups, 1.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(groups: &[(u32, &[(u32, u32)])], members: &[(u32, u16)]) -> BTreeMap<Key, Entry> {
        let mut m: BTreeMap<Key, Entry> = BTreeMap::new();
        for &(id, nhop) in members {
            let e = Entry::Member { id, nhop };
            m.insert(e.key(), e);
        }
        for &(id, ms) in groups {
            let e = Entry::Group { id, members: ms.to_vec() };
            m.insert(e.key(), e);
        }
        m
    }

    /// Rewriting only the groups that changed leaves the metrics exactly
    /// as rewriting them all does, and so does a change of members.
    #[test]
    fn updating_the_changed_groups_equals_rewriting_all() {
        let members = [(1, 4), (2, 5), (3, 6)];
        let a = state(&[(1, &[(1, 1), (2, 1)]), (2, &[(1, 1), (3, 2)]), (3, &[(2, 5)])], &members);
        // Group 1 kept, group 2 re-weighted, group 3 gone, group 7 new.
        let b = state(&[(1, &[(1, 1), (2, 1)]), (2, &[(1, 3), (3, 1)]), (7, &[(2, 1), (3, 1)])], &members);
        let c = state(&[(1, &[(1, 1), (2, 1)])], &[(1, 9), (2, 5)]);
        for (before, after) in [(&a, &b), (&b, &a), (&b, &c), (&c, &a), (&a, &a)] {
            let (full, diff) = (Metrics::new(), Metrics::new());
            for m in [&full, &diff] {
                update_group_metrics(m, "leaf1", None, before);
                update_group_metrics(m, "leaf2", None, &a);
            }
            update_group_metrics(&full, "leaf1", None, after);
            update_group_metrics(&diff, "leaf1", Some(before), after);
            assert_eq!(full.encode(), diff.encode());
        }
    }
}
