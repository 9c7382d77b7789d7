//! When the core decides: the rule every caller (the daemon, the replay,
//! the simulator) runs, so that none of them keeps its own copy.
//!
//! - After inputs that are not ticks: a decision when one of them changed
//!   the heat or the fabric (the policy and the placement decide), or when
//!   only the placement's inputs changed (a job, a new large flow: the
//!   placement decides alone, and its entries do not wait for a policy
//!   decision nobody asked for). A storm of digests that only repeat
//!   known state costs no decision.
//! - After a tick: a decision when a policy timer may fire (hot or derated
//!   ports, held-back changes) or the placement is due (re-plan interval,
//!   idle flows to sweep, flows stuck off their paths).
//! - [`Core::next_timer`] says when the next tick can change anything, so
//!   a caller in virtual time ticks only then, and a caller in real time
//!   may tick on a fixed period.

use super::{Core, Input, Step};

/// Ticks at one instant at most ([`Core::run_timers`]).
pub const MAX_TICKS_PER_INSTANT: usize = 64;

/// The decision an instant calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    None,
    /// The placement alone: only its inputs changed.
    Placement,
    /// The policy and the placement.
    All,
}

impl Core {
    /// The decision due now. `after_tick`: the inputs since the last
    /// decision include a timer tick.
    pub fn due(&self, now_ns: u64, after_tick: bool) -> Due {
        if after_tick {
            if self.wants_decision() || self.placement_due(now_ns) {
                return Due::All;
            }
            return Due::None;
        }
        if self.only_placement_changed() {
            Due::Placement
        } else if self.input_changed() {
            Due::All
        } else {
            Due::None
        }
    }

    /// Runs the decision [`Core::due`] asks for, if any. The step's notes
    /// are added by [`Core::conclude`], once its plans are out.
    pub fn decide_due(&mut self, now_ns: u64, after_tick: bool) -> Step {
        match self.due(now_ns, after_tick) {
            Due::None => Step::default(),
            Due::Placement => self.decide_placement(now_ns),
            Due::All => self.decide_plans(now_ns),
        }
    }

    /// One input and the decision it calls for, concluded: its notes, the
    /// plans that changed.
    pub fn handle(&mut self, now_ns: u64, input: &Input) -> Step {
        self.handle_all(now_ns, std::slice::from_ref(input))
    }

    /// A burst of inputs at one instant (a digest storm, a poll's
    /// snapshots), then at most one decision, concluded. The notes of the
    /// inputs come first, then the decision's.
    pub fn handle_all(&mut self, now_ns: u64, inputs: &[Input]) -> Step {
        let mut observed = Vec::new();
        let mut tick = false;
        for input in inputs {
            observed.extend(self.observe(now_ns, input));
            tick |= matches!(input, Input::Tick);
        }
        let mut step = self.decide_due(now_ns, tick);
        observed.append(&mut step.notes);
        step.notes = observed;
        self.conclude(&mut step);
        step
    }

    /// Adds a step's decision notes and completes its placement figures
    /// (the daemon calls it after the plans went out to the switches).
    pub fn conclude(&mut self, step: &mut Step) {
        if let Some(d) = &step.decision {
            let notes = self.notes(d);
            step.notes.extend(notes);
        }
        if let Some(p) = step.placement.as_mut() {
            self.place.conclude(&self.topo, p);
            let notes = self.placement_notes(p);
            step.notes.extend(notes);
        }
    }

    /// Ticks the core at each instant [`Core::next_timer`] names after
    /// `from_ns`, up to and including `until_ns`: what a caller that
    /// holds no ticks of its own (a recording, virtual time without
    /// latencies) runs between two inputs. Returns each tick's instant and
    /// step. At most [`MAX_TICKS_PER_INSTANT`] ticks at one instant: a
    /// policy whose held-back changes never drain would tick forever.
    pub fn run_timers(&mut self, from_ns: u64, until_ns: u64) -> Vec<(u64, Step)> {
        let mut out = Vec::new();
        let (mut now, mut ticks) = (from_ns, 0);
        while let Some(at) = self.next_timer(now).filter(|&at| at <= until_ns) {
            ticks = if at == now { ticks + 1 } else { 0 };
            if ticks > MAX_TICKS_PER_INSTANT {
                break;
            }
            now = at;
            let step = self.handle(at, &Input::Tick);
            out.push((at, step));
        }
        out
    }

    /// The earliest instant after `now_ns` at which a tick may change
    /// something: a policy timer (hold-up of a hot port, hold-down of a
    /// derated one, the step interval), the placement's next due time, or
    /// `now_ns` itself when changes are held back by the per-decision
    /// budget. None: nothing is waiting for time.
    pub fn next_timer(&self, now_ns: u64) -> Option<u64> {
        if self.state.pending().next().is_some() {
            return Some(now_ns);
        }
        [
            self.policy_timer(now_ns),
            self.place.next_due(now_ns),
            self.switch_timer(),
            self.pairs.next_expiry(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn policy_timer(&self, now: u64) -> Option<u64> {
        // No congested port and no port in the policy's state: no timer,
        // and no heat to rebuild to learn it (a caller asks each round).
        if !self.view.any_hot() && self.state.ports().next().is_none() {
            return None;
        }
        let cfg = self.policy.config();
        let mut next: Option<u64> = None;
        // The heat as the next decision will read it.
        let fresh;
        let heat = if self.heat_stale {
            fresh = self.view.heat();
            &fresh
        } else {
            &self.heat
        };
        let mut consider = |t: u64| {
            if t > now {
                next = Some(next.map_or(t, |n: u64| n.min(t)));
            }
        };
        for (key, h) in heat {
            if !h.congested {
                continue;
            }
            let st = self.state.ports().find(|(k, _)| k == key).map(|(_, s)| s);
            let step_ok = st.and_then(|s| s.last_step_ns).map_or(0, |t| t + cfg.step_interval_ns);
            if st.map_or(0, |s| s.level) < self.policy.max_level() {
                consider((h.since_ns + cfg.hold_up_ns).max(step_ok));
            }
        }
        for (key, st) in self.state.ports() {
            let step_ok = st.last_step_ns.map_or(0, |t| t + cfg.step_interval_ns);
            let cool_since = match heat.get(&key) {
                Some(h) if h.congested => continue,
                Some(h) => h.since_ns,
                None => st.absent_since_ns.unwrap_or(now),
            };
            consider((cool_since + cfg.hold_down_ns).max(step_ok));
        }
        next
    }

    /// When the first switch lost and not yet routed around is.
    fn switch_timer(&self) -> Option<u64> {
        self.down_since.values().map(|t| t.saturating_add(self.switch_down_after_ns)).min()
    }
}
