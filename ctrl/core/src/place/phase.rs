//! Jobs in time: the phase plan over the announced periodic jobs
//! ([`metaroce_te::phase`]) and what the placement learns of their real
//! phase from the large-flow reports.
//!
//! After a decision in which a periodic job came or went, each such job
//! is described to the phase planner by where its flows are placed: the
//! rate each flow sends at while the job communicates (its NICs shared
//! among the job's own flows; an announced job offers line rate) on every
//! link of its path, its communication time alone (its largest flow at
//! that rate, stretched by the job's own busiest link), and its period
//! (declared, or compute plus that communication). The recommendation of
//! each job is kept for the API and the simulator.
//!
//! Phase learning: a job's flows that report again after a quiet spell
//! (longer than `2 x report_window`) start a communication phase. When a
//! started phase falls further than a tenth of the period (or a slot)
//! from where the plan put it, the plan is made again from the measured
//! phases and the job's offset re-issued, with a note.

use std::collections::{BTreeMap, HashMap};

use metaroce_te::job::{Job, Offset};
use metaroce_te::phase::{plan_phases, Advice, PhaseConfig, PhaseJob, PhasePlan};
use metaroce_topo::{HostId, Topology};
use serde_json::{json, Value};

use super::Placement;
use crate::note::{Note, NoteKind};

/// Phases kept per job.
const KEEP: usize = 8;

/// What the placement knows of one periodic job in time.
#[derive(Debug, Clone, Default)]
pub(super) struct JobPhase {
    /// Last large-flow report of any of its flows.
    last_report_ns: Option<u64>,
    /// When its communication phases started, as reported, oldest first.
    starts: Vec<u64>,
    /// A drift seen since the plan was made.
    drifted: bool,
}

/// The plan and the order of its jobs.
#[derive(Debug, Clone, Default)]
pub(super) struct Phases {
    pub names: Vec<String>,
    pub jobs: Vec<PhaseJob>,
    pub plan: Option<PhasePlan>,
    pub seen: BTreeMap<String, JobPhase>,
    /// A periodic job came or went, or a phase drifted.
    pub stale: bool,
    /// Plans made (the first, and each re-issue).
    pub issued: u64,
}

impl Placement {
    /// The directed links as the phase planner numbers them, with capacities.
    fn phase_links(&self) -> (HashMap<(usize, u16), usize>, Vec<u64>) {
        let mut keys: Vec<(&(usize, u16), &u64)> = self.capacity.iter().collect();
        keys.sort_unstable();
        let index = keys.iter().enumerate().map(|(i, (k, _))| (**k, i)).collect();
        (index, keys.into_iter().map(|(_, &c)| c).collect())
    }

    /// A periodic job as the phase planner sees it, from its placement.
    fn phase_job(
        &self,
        topo: &Topology,
        job: &Job,
        index: &HashMap<(usize, u16), usize>,
        caps: &[u64],
    ) -> PhaseJob {
        let nic = |h: HostId| topo.hosts.get(h).map_or(1, |x| x.nic_rate.bps()).max(1);
        let mut out: HashMap<HostId, u64> = HashMap::new();
        let mut inn: HashMap<HostId, u64> = HashMap::new();
        for f in &job.flows {
            *out.entry(f.src).or_default() += 1;
            *inn.entry(f.dst).or_default() += 1;
        }
        let mut loads: BTreeMap<usize, u64> = BTreeMap::new();
        let mut slowest = 0u64;
        let mut rated = Vec::with_capacity(job.flows.len());
        for f in &job.flows {
            let rate = (nic(f.src) / out[&f.src].max(1)).min(nic(f.dst) / inn[&f.dst].max(1)).max(1);
            let links: Vec<usize> = self
                .planner
                .path(&f.key)
                .map(|p| p.hops.iter().filter_map(|h| index.get(&(h.switch, h.port)).copied()).collect())
                .unwrap_or_default();
            for &l in &links {
                *loads.entry(l).or_default() += rate;
            }
            rated.push((f.bytes, rate, links));
        }
        for (bytes, rate, links) in &rated {
            let own = links
                .iter()
                .map(|&l| loads[&l] as f64 / caps.get(l).copied().unwrap_or(1).max(1) as f64)
                .fold(1.0f64, f64::max);
            let ns = (*bytes as f64 * 8e9 / *rate as f64 * own).ceil() as u64;
            slowest = slowest.max(ns);
        }
        let comm_ns = slowest.max(1);
        let period_ns = job
            .period_ns
            .unwrap_or_else(|| job.timing.compute_ns.unwrap_or(0).saturating_add(comm_ns))
            .max(comm_ns);
        let registered = self.meta.get(&job.name).map_or(0, |m| m.registered_ns);
        let measured = self.phases.seen.get(&job.name).and_then(|s| s.starts.last().copied());
        PhaseJob {
            period_ns,
            comm_ns,
            phase_ns: measured.unwrap_or(registered.saturating_add(job.timing.start_ns)),
            shiftable: job.timing.offset == Offset::Shiftable,
            loads: loads.into_iter().collect(),
        }
    }

    /// Makes the phase plan again if a periodic job came or went or a
    /// phase drifted; the note says what it recommends. Runs after a
    /// decision, so the jobs' flows are placed.
    pub(super) fn replan_phases(&mut self, topo: &Topology) -> Option<Note> {
        if !std::mem::take(&mut self.phases.stale) {
            return None;
        }
        let (index, caps) = self.phase_links();
        let periodic: Vec<&Job> = self.jobs.list().filter(|j| j.periodic()).collect();
        let jobs: Vec<PhaseJob> = periodic.iter().map(|j| self.phase_job(topo, j, &index, &caps)).collect();
        let names: Vec<String> = periodic.iter().map(|j| j.name.clone()).collect();
        self.phases.jobs = jobs;
        self.phases.names = names;
        if self.phases.jobs.is_empty() {
            self.phases.plan = None;
            return None;
        }
        let plan = plan_phases(&self.phases.jobs, &caps, &PhaseConfig::default());
        let reissue = self.phases.seen.values().any(|s| s.drifted);
        for s in self.phases.seen.values_mut() {
            s.drifted = false;
        }
        self.phases.issued += 1;
        let offsets: BTreeMap<&str, u64> = self
            .phases
            .names
            .iter()
            .map(String::as_str)
            .zip(plan.advice.iter().map(|a| a.offset_ns))
            .collect();
        let reason = format!(
            "{} for {} periodic jobs: {}",
            if reissue { "phase drift: offsets re-issued" } else { "phase plan" },
            self.phases.names.len(),
            plan.why
        );
        let note = Note {
            kind: if reissue { NoteKind::JobPhaseDrift } else { NoteKind::JobPhasePlan },
            switch: None,
            reason,
            details: json!({"verdict": plan.verdict, "offsets_ns": offsets, "peak_with": plan.peak_with, "peak_without": plan.peak_without}),
        };
        self.phases.plan = Some(plan);
        self.jobs_doc = None;
        // One periodic job alone has nothing to be kept apart from: its
        // recommendation is kept, with no event.
        (reissue || self.phases.names.len() > 1).then_some(note)
    }

    /// The recommendation for job `name`: offset, expected iteration and
    /// first completion with and without it, and the plan's verdict.
    pub fn job_timing(&self, name: &str) -> Option<Value> {
        let i = self.phases.names.iter().position(|n| n == name)?;
        let plan = self.phases.plan.as_ref()?;
        let a: &Advice = plan.advice.get(i)?;
        let job = &self.phases.jobs[i];
        let ms = |ns: u64| ns as f64 / 1e6;
        let first_with = a.offset_ns as f64 + job.comm_ns as f64 * a.stretch_with;
        let first_without = job.comm_ns as f64 * a.stretch_without;
        let seen = self.phases.seen.get(name);
        Some(json!({
            "recommended_offset_ms": ms(a.offset_ns),
            "period_ms": ms(job.period_ns),
            "communication_ms": ms(job.comm_ns),
            "expected_iteration_ms": {"with_offset": ms(a.iteration_ns_with), "without": ms(a.iteration_ns_without)},
            "expected_first_iteration_done_ms": {"with_offset": first_with / 1e6, "without": first_without / 1e6},
            "verdict": plan.verdict,
            "why": plan.why,
            "common_period_ms": ms(plan.common_period_ns),
            "measured_phase_starts_ns": seen.map(|s| s.starts.clone()).unwrap_or_default(),
            "plans_issued": self.phases.issued,
        }))
    }

    /// The verdict of the phase plan, once one was made.
    pub fn phase_verdict(&self) -> Option<metaroce_te::phase::Verdict> {
        self.phases.plan.as_ref().map(|p| p.verdict)
    }

    /// Every periodic job's recommended offset, by name (the simulator's
    /// scheduler takes them).
    pub fn recommended_offsets(&self) -> BTreeMap<String, u64> {
        let Some(plan) = &self.phases.plan else { return BTreeMap::new() };
        self.phases.names.iter().cloned().zip(plan.advice.iter().map(|a| a.offset_ns)).collect()
    }

    /// A report of one of job `name`'s flows at `now_ns`: a report after a
    /// quiet spell starts a communication phase; one far from where the
    /// plan put it marks a drift.
    pub(super) fn job_flow_seen(&mut self, name: &str, now_ns: u64) {
        let quiet = 2 * self.cfg.report_window_ns.max(1);
        let planned = self.planned_phase(name);
        let s = self.phases.seen.entry(name.to_string()).or_default();
        let starts = s.last_report_ns.is_none_or(|t| now_ns.saturating_sub(t) > quiet);
        s.last_report_ns = Some(now_ns);
        if !starts {
            return;
        }
        // The report comes a window into the phase.
        let start = now_ns.saturating_sub(self.cfg.report_window_ns);
        s.starts.push(start);
        if s.starts.len() > KEEP {
            s.starts.remove(0);
        }
        let Some((phase, period, slot)) = planned else { return };
        let off = (start + period - phase % period) % period;
        let drift = off.min(period - off);
        let tolerance = (period / 10).max(slot).max(2 * self.cfg.report_window_ns);
        if drift > tolerance {
            s.drifted = true;
            self.phases.stale = true;
            // A decision makes the plan again at once.
            self.dirty = true;
        }
    }

    /// Where the plan puts job `name`'s communication phases: (a start,
    /// the period, the slot).
    fn planned_phase(&self, name: &str) -> Option<(u64, u64, u64)> {
        let i = self.phases.names.iter().position(|n| n == name)?;
        let plan = self.phases.plan.as_ref()?;
        let j = &self.phases.jobs[i];
        Some((j.phase_ns + plan.advice[i].offset_ns, j.period_ns.max(1), plan.slot_ns))
    }
}
