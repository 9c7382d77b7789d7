//! Snapshot documents: the installed state of every switch, written by
//! `metaroce controller snapshot` and the status API, and restored by
//! `rollback` (CLI or `POST /api/v1/rollback`).

use std::collections::BTreeMap;

use metaroce_pipeline::{Entry, Key};
use serde::{Deserialize, Serialize};

/// Format version of the document.
pub const SNAPSHOT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotDoc {
    pub version: u32,
    /// The topology's `name`; a rollback onto another fabric is refused.
    pub topology: String,
    pub taken_at_unix_ms: u64,
    /// Switch name → its entries.
    pub switches: BTreeMap<String, Vec<Entry>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error("the snapshot is not a valid document: {0}")]
    Format(String),
    #[error("the snapshot has version {0}; this controller reads version {SNAPSHOT_VERSION}")]
    Version(u32),
    #[error("the snapshot is of fabric {found:?}, not {expected:?}")]
    Fabric { found: String, expected: String },
    #[error("the snapshot names switch {0:?}, which the topology does not have")]
    UnknownSwitch(String),
    #[error("switch {switch}: entry {key} appears twice")]
    Duplicate { switch: String, key: String },
}

impl SnapshotDoc {
    /// Parses and checks a document against the topology's switch names.
    pub fn from_value(
        v: serde_json::Value,
        topology: &str,
        switches: &[&str],
    ) -> Result<Self, SnapshotError> {
        let mut doc: SnapshotDoc =
            serde_json::from_value(v).map_err(|e| SnapshotError::Format(e.to_string()))?;
        doc.switches.values_mut().flatten().for_each(Entry::normalize);
        if doc.version != SNAPSHOT_VERSION {
            return Err(SnapshotError::Version(doc.version));
        }
        if doc.topology != topology {
            return Err(SnapshotError::Fabric { found: doc.topology, expected: topology.to_owned() });
        }
        for (name, entries) in &doc.switches {
            if !switches.contains(&name.as_str()) {
                return Err(SnapshotError::UnknownSwitch(name.clone()));
            }
            let mut seen = std::collections::BTreeSet::new();
            for e in entries {
                if !seen.insert(e.key()) {
                    return Err(SnapshotError::Duplicate {
                        switch: name.clone(),
                        key: format!("{:?}", e.key()),
                    });
                }
            }
        }
        Ok(doc)
    }

    /// The entries of one switch as a desired-state map.
    pub fn entries(&self, switch: &str) -> Option<BTreeMap<Key, Entry>> {
        self.switches.get(switch).map(|v| v.iter().map(|e| (e.key(), e.clone())).collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A snapshot taken before routes had `nhop_group` entries of their own
    /// names no selector group: the entry used the group of its own id,
    /// and a rollback restores exactly that.
    #[test]
    fn snapshot_group_entries_without_a_selector_group_use_their_own_id() {
        let v = serde_json::json!({
            "version": SNAPSHOT_VERSION, "topology": "t", "taken_at_unix_ms": 1,
            "switches": {"leaf1": [
                {"kind": "group_entry", "id": 7},
                {"kind": "group_entry", "id": 8, "group": 3},
            ]},
        });
        let doc = SnapshotDoc::from_value(v, "t", &["leaf1"]).unwrap();
        let e = doc.entries("leaf1").unwrap();
        assert_eq!(e[&Key::GroupEntry(7)], Entry::GroupEntry { id: 7, group: 7 });
        assert_eq!(e[&Key::GroupEntry(8)], Entry::GroupEntry { id: 8, group: 3 });
    }

    /// Steer entries are part of what a snapshot holds and a rollback
    /// restores: they read back and key as the switch keys them.
    #[test]
    fn snapshots_carry_steer_entries() {
        let v = serde_json::json!({
            "version": SNAPSHOT_VERSION, "topology": "t", "taken_at_unix_ms": 1,
            "switches": {"leaf1": [
                {"kind": "steer_pair", "src": "10.0.1.1", "dst": "10.0.2.1", "nhop_id": 4, "port": 3},
                {"kind": "steer_flow", "flow": {"src": "10.0.1.1", "dst": "10.0.2.1", "sport": 49152, "qp": 17},
                 "nhop_id": 5, "port": 4},
            ]},
        });
        let doc = SnapshotDoc::from_value(v, "t", &["leaf1"]).unwrap();
        let e = doc.entries("leaf1").unwrap();
        let flow = metaroce_te::FlowKey::flow([10, 0, 1, 1].into(), [10, 0, 2, 1].into(), 49152, 17);
        assert_eq!(crate::plan::steer_port(&e, &flow), Some(4));
        let pair = metaroce_te::FlowKey::pair([10, 0, 1, 1].into(), [10, 0, 2, 1].into());
        assert_eq!(crate::plan::steer_port(&e, &pair), Some(3));
        let back = serde_json::to_value(&doc).unwrap();
        assert_eq!(SnapshotDoc::from_value(back, "t", &["leaf1"]).unwrap(), doc);
    }
}
