//! What the core tells the event log: one [`Note`] per change worth a
//! line, typed by [`NoteKind`]. A kind knows its event-log name and, when
//! it is a reroute, its metric label; callers never match on strings.

use serde::{Serialize, Serializer};
use serde_json::Value;

/// Every kind of note the core writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NoteKind {
    /// The policy moved weight away from a hot link.
    Derate,
    /// The policy moved weight back as a link cooled.
    Restore,
    /// An override lost a member: replaced at once.
    Failover,
    LinkDown,
    LinkUp,
    SwitchDown,
    SwitchUp,
    /// The placement moved a flow (one note per move, up to a limit).
    FlowMove,
    /// The moves past the per-decision limit, counted in one note.
    FlowMoves,
    /// A flow the planner could not place.
    FlowUnplaced,
    /// A steer entry not built (its port is outside the route's group).
    SteerRefused,
    /// A large-flow report the placement could not use.
    LargeFlowIgnored,
    /// A job body (or removal) refused.
    JobRefused,
    /// An input that names an unknown switch or link.
    InputRejected,
    /// The phase plan of the periodic jobs was made (a job came or went).
    JobPhasePlan,
    /// A periodic job's measured phase drifted from the plan: offsets re-issued.
    JobPhaseDrift,
}

impl NoteKind {
    pub const ALL: [NoteKind; 16] = [
        NoteKind::Derate,
        NoteKind::Restore,
        NoteKind::Failover,
        NoteKind::LinkDown,
        NoteKind::LinkUp,
        NoteKind::SwitchDown,
        NoteKind::SwitchUp,
        NoteKind::FlowMove,
        NoteKind::FlowMoves,
        NoteKind::FlowUnplaced,
        NoteKind::SteerRefused,
        NoteKind::LargeFlowIgnored,
        NoteKind::JobRefused,
        NoteKind::InputRejected,
        NoteKind::JobPhasePlan,
        NoteKind::JobPhaseDrift,
    ];

    /// The name in the event log (`kind` of a line) and on the page.
    pub fn event_name(self) -> &'static str {
        match self {
            NoteKind::Derate => "derate",
            NoteKind::Restore => "restore",
            NoteKind::Failover => "failover",
            NoteKind::LinkDown => "link_down",
            NoteKind::LinkUp => "link_up",
            NoteKind::SwitchDown => "switch_down",
            NoteKind::SwitchUp => "switch_up",
            NoteKind::FlowMove => "flow_move",
            NoteKind::FlowMoves => "flow_moves",
            NoteKind::FlowUnplaced => "flow_unplaced",
            NoteKind::SteerRefused => "steer_refused",
            NoteKind::LargeFlowIgnored => "large_flow_ignored",
            NoteKind::JobRefused => "job_refused",
            NoteKind::InputRejected => "input_rejected",
            NoteKind::JobPhasePlan => "job_phase_plan",
            NoteKind::JobPhaseDrift => "job_phase_drift",
        }
    }

    /// The `reason` label of `metaroce_reroutes_total` this note counts
    /// under, if any. `applied`: the decision was written to the switches
    /// (act mode, not pinned, allowed to write); a policy change that was
    /// not written is a recommendation, not a reroute.
    pub fn reroute_label(self, applied: bool) -> Option<&'static str> {
        match self {
            NoteKind::Derate if applied => Some("congestion"),
            NoteKind::Restore if applied => Some("recovery"),
            NoteKind::Failover if applied => Some("link_down"),
            NoteKind::LinkDown => Some("link_down"),
            NoteKind::LinkUp => Some("link_up"),
            NoteKind::SwitchUp => Some("switch_up"),
            NoteKind::SwitchDown => Some("switch_down"),
            _ => None,
        }
    }

    /// The note kind of a policy change.
    pub fn of_change(kind: metaroce_policy::ChangeKind) -> Self {
        match kind {
            metaroce_policy::ChangeKind::Failover => NoteKind::Failover,
            metaroce_policy::ChangeKind::Derate => NoteKind::Derate,
            metaroce_policy::ChangeKind::Restore => NoteKind::Restore,
        }
    }
}

impl std::fmt::Display for NoteKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.event_name())
    }
}

impl Serialize for NoteKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.event_name())
    }
}

/// A change worth an event-log line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Note {
    pub kind: NoteKind,
    pub switch: Option<String>,
    pub reason: String,
    pub details: Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_serialize_as_the_event_name() {
        let names: std::collections::BTreeSet<_> = NoteKind::ALL.iter().map(|k| k.event_name()).collect();
        assert_eq!(names.len(), NoteKind::ALL.len());
        for k in NoteKind::ALL {
            assert_eq!(serde_json::to_value(k).ok(), Some(Value::from(k.event_name())));
        }
    }

    #[test]
    fn policy_changes_count_as_reroutes_only_when_applied() {
        assert_eq!(NoteKind::Derate.reroute_label(true), Some("congestion"));
        assert_eq!(NoteKind::Derate.reroute_label(false), None);
        assert_eq!(NoteKind::LinkDown.reroute_label(false), Some("link_down"));
        assert_eq!(NoteKind::FlowMove.reroute_label(true), None);
    }
}
