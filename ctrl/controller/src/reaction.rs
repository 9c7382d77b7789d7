//! Reaction-time bookkeeping for the state task: which digest made a port
//! hot (or which large-flow digest or job registration made the placement
//! move flows), which switch rewrites it caused, and when each switch acknowledged
//! the first of them. A reaction counts once per (cause, switch); later
//! steps of the same episode are the policy's pacing, not reaction time.
//! Each reaction is split into stages (queue, decide, dispatch, write) so
//! that a benchmark can say where the time went.

use std::collections::BTreeMap;
use std::time::Duration;

use metaroce_policy::{ChangeKind, Decision};
use metaroce_telemetry::view::CongestionView;
use metaroce_telemetry::PortKey;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::agent::{Cause, SyncOutcome};

/// One measured reaction of one switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reaction {
    pub cause: Cause,
    /// The pass that moved the routes began.
    pub started: Instant,
    /// Its first Write was sent.
    pub sent: Option<Instant>,
    /// Its last insert/modify batch was acknowledged.
    pub moved: Instant,
}

impl Reaction {
    /// Digest received → routes on the new groups acknowledged.
    pub fn total(&self) -> Duration {
        self.moved.saturating_duration_since(self.cause.received)
    }

    /// The controller's own share: cause received → first Write sent
    /// (without the switch's acknowledgement).
    pub fn controller(&self) -> Option<Duration> {
        self.sent.map(|t| t.saturating_duration_since(self.cause.received))
    }

    /// The stages in milliseconds: waiting for the state task, deciding and
    /// planning, waiting for the agent (and any pass it was still in), and
    /// the agent's pass up to the acknowledgement; of which `prepare` is
    /// the part before its first Write was sent (desired state and diff).
    pub fn stages_json(&self) -> Value {
        let ms = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1e3;
        let c = &self.cause;
        json!({
            "queue": ms(c.received, c.handled),
            "decide": ms(c.handled, c.published),
            "dispatch": ms(c.published, self.started),
            "prepare": self.sent.map(|s| ms(self.started, s)),
            "write": ms(self.started, self.moved),
        })
    }
}

/// The state task's reaction bookkeeping.
#[derive(Debug)]
pub struct Reactions {
    /// (received, handled) of the latest up-crossing per (switch, port) not yet acted on.
    up_at: BTreeMap<(usize, u16), (Instant, Instant)>,
    /// Per switch: the cause of a published target the switch has not
    /// acknowledged yet; a newer target that replaces it inherits it.
    unacked: Vec<Option<Cause>>,
    /// Per switch: the cause whose reaction was last recorded.
    reacted: Vec<Option<Cause>>,
    /// (received, handled) of the input that made the placement due.
    place_at: Option<(Instant, Instant)>,
}

impl Reactions {
    pub fn new(switches: usize) -> Self {
        Reactions {
            up_at: BTreeMap::new(),
            unacked: vec![None; switches],
            reacted: vec![None; switches],
            place_at: None,
        }
    }

    /// A digest received at `received` and applied at `handled` made the port hot.
    pub fn port_hot(&mut self, key: PortKey, received: Instant, handled: Instant) {
        self.up_at.insert((key.switch, key.port), (received, handled));
    }

    /// The cause of each switch's rewrite in `decision` (the earliest digest
    /// that made a port it derates around hot), published at `published`.
    /// Crossings the policy never acted on and that cooled are forgotten.
    pub fn causes(
        &mut self,
        decision: Option<&Decision>,
        view: &CongestionView,
        published: Instant,
    ) -> BTreeMap<usize, Cause> {
        let mut caused: BTreeMap<usize, Cause> = BTreeMap::new();
        if let Some(d) = decision {
            let mut used = Vec::new();
            for c in d.changes.iter().filter(|c| c.kind == ChangeKind::Derate) {
                let Some(h) = c.cause else { continue };
                let Some(&(received, handled)) = self.up_at.get(&(h.switch, h.port)) else { continue };
                let new = Cause { received, handled, published };
                caused.entry(c.switch).and_modify(|e| *e = (*e).min_by_received(new)).or_insert(new);
                used.push((h.switch, h.port));
            }
            for k in used {
                self.up_at.remove(&k);
            }
        }
        if !self.up_at.is_empty() {
            self.up_at.retain(|&(switch, port), _| {
                view.port_heat(PortKey { switch, port }).is_some_and(|h| h.congested)
            });
        }
        caused
    }

    /// The cause of a placement decision's rewrites: the large-flow digest
    /// or job registration that made it due, received and handled then.
    pub fn placement_due(&mut self, received: Instant, handled: Instant) {
        if self.place_at.is_none() {
            self.place_at = Some((received, handled));
        }
    }

    /// The placement's cause for the switches its decision touched; taken once.
    pub fn placement_causes(
        &mut self,
        touched: impl Iterator<Item = usize>,
        published: Instant,
        caused: &mut BTreeMap<usize, Cause>,
    ) {
        let Some((received, handled)) = self.place_at.take() else { return };
        let new = Cause { received, handled, published };
        for s in touched {
            caused.entry(s).and_modify(|e| *e = (*e).min_by_received(new)).or_insert(new);
        }
    }

    /// The cause a new target of switch `s` carries: its own, or the one of
    /// a target it replaces before the switch acknowledged it.
    pub fn carry(&mut self, s: usize, fresh: Option<Cause>) -> Option<Cause> {
        let cause = fresh.or(self.unacked.get(s).copied().flatten());
        if let Some(u) = self.unacked.get_mut(s) {
            *u = cause;
        }
        cause
    }

    /// A pass of switch `s` ended: its reaction, when it is the first
    /// successful pass that moved routes for its cause.
    pub fn on_synced(&mut self, s: usize, outcome: &SyncOutcome) -> Option<Reaction> {
        let cause = outcome.caused_at?;
        if outcome.error.is_some() {
            return None;
        }
        let Some(moved) = outcome.moved_at else {
            // Taken without moving a route: the cause needs nothing more.
            self.settled(s, cause);
            return None;
        };
        if self.reacted.get(s).copied().flatten() == Some(cause) {
            return None;
        }
        if let Some(r) = self.reacted.get_mut(s) {
            *r = Some(cause);
        }
        self.settled(s, cause);
        Some(Reaction { cause, started: outcome.started_at, sent: outcome.sent_at, moved })
    }

    /// Switch `s` holds what the target of `cause` asks without moving a
    /// route (its pass wrote nothing, or only deletes): the cause is done
    /// there, and a later target of that switch does not inherit it. Without
    /// this, a decision that asked nothing of a switch handed its cause on
    /// to the switch's next target, which could come a second later for
    /// another reason, and that write read as a second-long reaction.
    pub fn settled(&mut self, s: usize, cause: Cause) {
        if let Some(u) = self.unacked.get_mut(s).filter(|u| **u == Some(cause)) {
            *u = None;
        }
    }
}

impl Cause {
    fn min_by_received(self, other: Cause) -> Cause {
        if other.received < self.received {
            other
        } else {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(cause: Option<Cause>, started: Instant, moved: Option<Instant>) -> SyncOutcome {
        SyncOutcome {
            inserts: 1,
            modifies: 1,
            deletes: 0,
            batches: 2,
            write_time: Duration::ZERO,
            error: None,
            refused: vec![],
            held_back: 0,
            held_summary: None,
            caused_at: cause,
            started_at: started,
            sent_at: moved.map(|_| started + Duration::from_millis(1)),
            moved_at: moved,
        }
    }

    #[test]
    fn one_reaction_per_cause_and_switch_with_its_stages() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let cause = Cause { received: ms(0), handled: ms(1), published: ms(3) };
        let mut r = Reactions::new(2);
        assert_eq!(r.carry(1, Some(cause)), Some(cause));
        // A newer target before the ack inherits the cause.
        assert_eq!(r.carry(1, None), Some(cause));
        let first = r.on_synced(1, &outcome(Some(cause), ms(6), Some(ms(10)))).unwrap();
        assert_eq!(first.total(), Duration::from_millis(10));
        assert_eq!(first.controller(), Some(Duration::from_millis(7)));
        let st = first.stages_json();
        assert_eq!((st["queue"].as_f64(), st["decide"].as_f64()), (Some(1.0), Some(2.0)));
        assert_eq!((st["dispatch"].as_f64(), st["write"].as_f64()), (Some(3.0), Some(4.0)));
        assert_eq!(st["prepare"].as_f64(), Some(1.0));
        // The same cause again (a pass published before the ack) is not a reaction.
        assert_eq!(r.on_synced(1, &outcome(Some(cause), ms(11), Some(ms(12)))), None);
        // Acknowledged: a later target carries no cause.
        assert_eq!(r.carry(1, None), None);
        // A pass that moved nothing is not a reaction either.
        assert_eq!(r.on_synced(0, &outcome(Some(cause), ms(11), None)), None);
    }

    #[test]
    fn a_target_that_moves_nothing_hands_its_cause_to_no_later_target() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let cause = Cause { received: ms(0), handled: ms(1), published: ms(3) };
        let mut r = Reactions::new(2);
        // Switch 0's pass wrote only deletes; switch 1 needed no write at all.
        r.carry(0, Some(cause));
        r.carry(1, Some(cause));
        assert_eq!(r.on_synced(0, &outcome(Some(cause), ms(5), None)), None);
        r.settled(1, cause);
        // A second later, new targets for another reason carry no cause.
        assert_eq!(r.carry(0, None), None);
        assert_eq!(r.carry(1, None), None);
        // Settling an older cause leaves a newer one in place.
        let newer = Cause { received: ms(7), handled: ms(8), published: ms(9) };
        r.carry(1, Some(newer));
        r.settled(1, cause);
        assert_eq!(r.carry(1, None), Some(newer));
    }
}
