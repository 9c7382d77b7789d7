//! The JSON the status API serves, built from the core and the switches'
//! installed state.

use std::collections::BTreeMap;
use std::sync::Arc;

use metaroce_pipeline::{Entry, Key, RouteTarget};
use serde_json::{json, Value};

use crate::core::Core;
use crate::plan::nhop_id;

/// What the state task knows of one switch's session.
#[derive(Debug, Clone, Default)]
pub struct SwitchStatus {
    pub connected: bool,
    pub primary: bool,
    pub installed: Arc<BTreeMap<Key, Entry>>,
    pub last_error: Option<String>,
    pub syncs: u64,
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
                "connected": st.connected, "primary": st.primary,
                "installed_entries": st.installed.len(), "syncs": st.syncs, "last_error": st.last_error,
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

/// Installed groups and routes of every switch, with ports for members.
pub fn groups(core: &Core, switches: &[SwitchStatus]) -> Value {
    let topo = core.topology();
    let mut out = serde_json::Map::new();
    for (s, st) in topo.switches.iter().zip(switches) {
        let port_of = |member: u32| -> Option<u16> {
            match st.installed.get(&Key::Member(member)) {
                Some(Entry::Member { nhop, .. }) => match st.installed.get(&Key::Nhop(*nhop)) {
                    Some(Entry::Nhop { port, .. }) => Some(*port),
                    _ => None,
                },
                _ => None,
            }
        };
        let mut groups = Vec::new();
        let mut routes = Vec::new();
        for e in st.installed.values() {
            match e {
                Entry::Group { id, members } => groups.push(json!({
                    "id": id,
                    "members": members.iter().map(|(m, w)| json!({"port": port_of(*m), "weight": w})).collect::<Vec<_>>(),
                })),
                Entry::Route { prefix, len, target } => routes.push(json!({
                    "prefix": format!("{prefix}/{len}"),
                    "target": match target { RouteTarget::Group(g) => json!({"group": g}), RouteTarget::Nhop(h) => json!({"port": h.saturating_sub(nhop_id(0))}) },
                })),
                _ => {}
            }
        }
        out.insert(s.name.clone(), json!({"groups": groups, "routes": routes}));
    }
    Value::Object(out)
}

/// What the policy recommends (its overrides), named.
pub fn recommendations(core: &Core) -> Value {
    let topo = core.topology();
    let recs: Vec<Value> = core
        .recommended()
        .into_iter()
        .map(|((s, leaf), w)| {
            json!({
                "switch": topo.switches[s].name, "toward": topo.switches[leaf].name,
                "weights": w.iter().map(|(p, w)| json!({"port": p, "weight": w})).collect::<Vec<_>>(),
                "applied": core.mode().writes() && !core.pinned(),
            })
        })
        .collect();
    json!({"mode": core.mode().as_str(), "recommendations": recs})
}

/// The congestion view, with switch names next to indices.
pub fn congestion(core: &Core) -> Value {
    let mut v = serde_json::to_value(core.view().summary(32)).unwrap_or(Value::Null);
    let names: Vec<&str> = core.topology().switches.iter().map(|s| s.name.as_str()).collect();
    if let Value::Object(m) = &mut v {
        m.insert("switch_names".into(), json!(names));
    }
    v
}
