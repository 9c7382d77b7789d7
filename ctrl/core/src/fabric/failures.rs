//! Switches and links going down and coming back: the routing is rebuilt
//! or patched, the placement follows the route changes, and every event
//! says which leaf pairs lost their last path.

use serde_json::{json, Value};

use metaroce_topo::{Routing, SwitchId};

use super::{Core, Note, NoteKind};
use crate::reach;

impl Core {
    pub(super) fn on_switch_up(&mut self, switch: SwitchId) -> Option<Note> {
        self.down_since.remove(&switch);
        // Its digest sequence may have restarted with it.
        self.view.switch_restarted(switch);
        self.view_version += 1;
        if !self.failed_switches.remove(&switch) {
            return None;
        }
        self.rebuild_routing();
        Some(self.note(
            NoteKind::SwitchUp,
            Some(switch),
            "switch reachable again; routing through it",
            json!({}),
        ))
    }

    pub(super) fn on_link_down(&mut self, link: usize) -> Option<Note> {
        if !self.failed_links.insert(link) {
            return None;
        }
        match self.routing.fail_link(&self.topo, link) {
            Ok(changes) => self.place.routing_changed(&self.routing, &changes),
            Err(_) => self.place.reset_routing(&self.routing),
        }
        self.replan_all = true;
        let cut = self.refresh_reach();
        let reason = if cut.is_empty() {
            "link down; routed around at once".to_owned()
        } else {
            format!(
                "link down; routed around where a path is left, but {} cut off: {}",
                reach::count_text(cut.len()),
                reach::describe(&self.topo, &cut)
            )
        };
        let mut note = self.link_note(NoteKind::LinkDown, link, &reason);
        self.add_reach(&mut note.details, &cut);
        Some(note)
    }

    pub(super) fn on_link_up(&mut self, link: usize) -> Option<Note> {
        if !self.failed_links.remove(&link) {
            return None;
        }
        self.rebuild_routing();
        let mut note = self.link_note(NoteKind::LinkUp, link, "link up; back in the groups");
        self.add_reach(&mut note.details, &[]);
        Some(note)
    }

    /// Switches lost for `switch_down_after_ns` are routed around.
    pub(super) fn expire_switches(&mut self, now_ns: u64, notes: &mut Vec<Note>) {
        let expired: Vec<SwitchId> = self
            .down_since
            .iter()
            .filter(|(s, &t)| {
                now_ns.saturating_sub(t) >= self.switch_down_after_ns && !self.failed_switches.contains(s)
            })
            .map(|(s, _)| *s)
            .collect();
        for s in expired {
            self.failed_switches.insert(s);
            match self.routing.fail_switch(&self.topo, s) {
                Ok(changes) => self.place.routing_changed(&self.routing, &changes),
                Err(_) => self.place.reset_routing(&self.routing),
            }
            self.replan_all = true;
            let cut = self.refresh_reach();
            let mut reason = "switch unreachable; routing around it".to_owned();
            if !cut.is_empty() {
                let names = reach::describe(&self.topo, &cut);
                reason = format!("{reason}, but {} cut off: {names}", reach::count_text(cut.len()));
            }
            let mut note = self.note(NoteKind::SwitchDown, Some(s), &reason, json!({}));
            self.add_reach(&mut note.details, &cut);
            notes.push(note);
        }
    }

    pub(super) fn rebuild_routing(&mut self) {
        let links: Vec<usize> = self.failed_links.iter().copied().collect();
        let switches: Vec<SwitchId> = self.failed_switches.iter().copied().collect();
        self.routing = Routing::with_failures(&self.topo, self.routing.options(), &links, &switches);
        self.place.reset_routing(&self.routing);
        self.replan_all = true;
        self.refresh_reach();
    }

    /// Recomputes the leaf pairs without a path; returns those that were
    /// not cut before.
    fn refresh_reach(&mut self) -> Vec<(SwitchId, SwitchId)> {
        let after = reach::cut_pairs(&self.routing);
        let new = reach::newly_cut(&self.unreachable, &after);
        self.unreachable = after;
        new
    }

    /// Adds the partition to an event's details: the pairs this change cut
    /// off and every pair without a path now.
    fn add_reach(&self, details: &mut Value, cut: &[(SwitchId, SwitchId)]) {
        if let Some(obj) = details.as_object_mut() {
            obj.insert("cut_off".into(), reach::pairs_json(&self.topo, cut));
            obj.insert("unreachable_pairs".into(), json!(self.unreachable.len()));
        }
    }

    /// Leaf pairs without a path now: `(from, to)`, sorted.
    pub fn unreachable(&self) -> &[(SwitchId, SwitchId)] {
        &self.unreachable
    }

    /// The leaf pairs that taking link `link` down would cut off (none if
    /// it is down already).
    pub fn would_cut(&self, link: usize) -> Vec<(SwitchId, SwitchId)> {
        if self.failed_links.contains(&link) || link >= self.topo.links.len() {
            return Vec::new();
        }
        let mut r = self.routing.clone();
        let _ = r.fail_link(&self.topo, link);
        reach::newly_cut(&self.unreachable, &reach::cut_pairs(&r))
    }
}
