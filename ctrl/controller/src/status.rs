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
use metaroce_topo::Topology;

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

/// Everything the status shows that can change while the controller runs
/// (the rest is the topology's). The status is published every second but
/// rebuilt only when its key differs from the last one's: on an idle
/// fabric it never does, and building it (a JSON object per switch) was a
/// tenth of the idle controller's instructions. The status is built from
/// the key alone, so nothing it shows can change without the key changing.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusKey {
    mode: Mode,
    pinned: bool,
    decisions: u64,
    overrides: usize,
    failed_links: Vec<usize>,
    failed_switches: Vec<usize>,
    switches: Vec<SwitchKey>,
    ha: Value,
}

/// What the status shows of one switch.
#[derive(Debug, Clone, PartialEq)]
struct SwitchKey {
    connected: bool,
    primary: bool,
    programmed: bool,
    installed_entries: usize,
    syncs: u64,
    last_error: Option<String>,
    failed_attempts: u32,
    refused_entries: usize,
    refused: Option<Value>,
    foreign: bool,
}

impl StatusKey {
    pub fn of(core: &Core, switches: &[SwitchStatus], decisions: u64, ha: Value) -> Self {
        StatusKey {
            mode: core.mode(),
            pinned: core.pinned(),
            decisions,
            overrides: core.policy_state().override_count(),
            failed_links: core.failed_links().iter().copied().collect(),
            failed_switches: core.failed_switches().iter().copied().collect(),
            switches: switches
                .iter()
                .map(|st| SwitchKey {
                    connected: st.connected,
                    primary: st.primary,
                    programmed: st.programmed,
                    installed_entries: st.installed.len(),
                    syncs: st.syncs,
                    last_error: st.last_error.clone(),
                    failed_attempts: st.failed_attempts,
                    refused_entries: st.refused_entries,
                    refused: st.refused.clone(),
                    foreign: st.foreign,
                })
                .collect(),
            ha,
        }
    }
}

/// `GET /api/v1/status`: the fabric, its mode, every switch's session and
/// what failed.
pub fn status(topo: &Topology, key: &StatusKey) -> Value {
    let sw: Vec<Value> = topo
        .switches
        .iter()
        .zip(&key.switches)
        .map(|(s, st)| {
            json!({
                "name": s.name, "role": s.role.as_str(), "p4rt": s.p4rt,
                "connected": st.connected, "primary": st.primary, "programmed": st.programmed,
                "installed_entries": st.installed_entries, "syncs": st.syncs, "last_error": st.last_error,
                "failed_attempts": st.failed_attempts, "refused_entries": st.refused_entries, "refused": st.refused,
                "foreign": st.foreign,
            })
        })
        .collect();
    let links: Vec<Value> = key
        .failed_links
        .iter()
        .filter_map(|&l| topo.links.get(l))
        .map(|l| json!({"a": topo.endpoint_name(l.a), "b": topo.endpoint_name(l.b)}))
        .collect();
    let failed: Vec<Value> = key
        .failed_switches
        .iter()
        .filter_map(|&s| topo.switches.get(s))
        .map(|s| Value::from(s.name.as_str()))
        .collect();
    let mut out = json!({
        "fabric": topo.name, "mode": key.mode.as_str(), "pinned_to_snapshot": key.pinned,
        "decisions": key.decisions, "overrides": key.overrides,
    });
    // The arrays are moved in: `json!` serializes what it is given, so a
    // `Vec<Value>` in it became a copy of every element (and the originals
    // were dropped), which doubled the cost of building the status.
    if let Value::Object(m) = &mut out {
        m.insert("switches".into(), Value::Array(sw));
        m.insert("failed_links".into(), Value::Array(links));
        m.insert("failed_switches".into(), Value::Array(failed));
        m.insert("ha".into(), key.ha.clone());
    }
    out
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
    use crate::core::Input;

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

    fn core() -> Core {
        let text = include_str!("../../../topologies/mininet-2x2.yaml");
        let topo = metaroce_topo::load_str(text, "mininet-2x2").unwrap();
        Core::new(topo, Default::default(), Mode::Act).unwrap()
    }

    /// Every field the status shows is in its key: a change of any of
    /// them is a new key, and the status built from it shows the change.
    #[test]
    fn the_status_changes_only_with_its_key() {
        let mut core = core();
        let n = core.topology().switches.len();
        let mut switches = vec![SwitchStatus::default(); n];
        let key = |core: &Core, sw: &[SwitchStatus]| StatusKey::of(core, sw, 3, json!({"role": "alone"}));
        let first = key(&core, &switches);
        assert_eq!(first, key(&core, &switches), "the same inputs, the same key");
        type Change = fn(&mut SwitchStatus);
        let changes: Vec<(&str, Change)> = vec![
            ("connected", |s| s.connected = true),
            ("primary", |s| s.primary = true),
            ("programmed", |s| s.programmed = true),
            ("installed_entries", |s| s.installed = Arc::new(state(&[(1, &[(1, 1)])], &[]))),
            ("syncs", |s| s.syncs += 1),
            ("last_error", |s| s.last_error = Some("connect: refused".into())),
            ("failed_attempts", |s| s.failed_attempts += 1),
            ("refused_entries", |s| s.refused_entries += 1),
            ("refused", |s| s.refused = Some(json!({"first": []}))),
            ("foreign", |s| s.foreign = true),
        ];
        for (field, change) in changes {
            let mut changed = switches.clone();
            change(&mut changed[1]);
            let k = key(&core, &changed);
            assert_ne!(k, first, "{field}");
            let (was, now) = (status(core.topology(), &first), status(core.topology(), &k));
            assert_ne!(was["switches"][1][field], now["switches"][1][field], "{field}");
            assert_eq!(was["switches"][0], now["switches"][0], "{field}: only switch 1 changed");
        }
        assert_ne!(StatusKey::of(&core, &switches, 4, json!({"role": "alone"})), first, "decisions");
        assert_ne!(StatusKey::of(&core, &switches, 3, json!({"role": "leader"})), first, "ha");
        core.observe(0, &Input::LinkDown { link: 0 });
        let k = key(&core, &switches);
        assert_ne!(k, first, "a failed link");
        assert_eq!(status(core.topology(), &k)["failed_links"].as_array().map(Vec::len), Some(1));
        switches[0].connected = true;
        let st = status(core.topology(), &key(&core, &switches));
        assert_eq!(
            (st["switches"][0]["connected"].as_bool(), st["decisions"].as_u64()),
            (Some(true), Some(3))
        );
        assert_eq!((st["mode"].as_str(), st["ha"]["role"].as_str()), (Some("act"), Some("alone")));
    }
}
