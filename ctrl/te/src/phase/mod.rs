//! Planning in time: phase offsets for periodic jobs.
//!
//! A training job alternates compute and communication. Two jobs whose
//! communication phases do not overlap may share links that neither
//! could share at the same time, so where placement in space cannot
//! separate two jobs (a bottleneck both must cross) a delay of one job's
//! start by part of its period can. This module finds such delays:
//!
//! ```text
//! (jobs: period, communication time alone, current phase, shiftable?,
//!  the rate each puts on each link while it communicates; link capacities)
//!      → PhasePlan { offset per job, expected iteration with and without,
//!                    highest utilisation over time with and without, verdict }
//! ```
//!
//! Pure and deterministic like the rest of the crate: no clock (phases are
//! arguments, relative to one origin the caller chooses), no hashing
//! order. The jobs' common period (the least common multiple of their
//! periods on a grid of slots, [`grid`]) is cut into slots; each job puts
//! its rates on its links during its communication slots. Fixed jobs are
//! laid down first, then shiftable ones, largest first, each at the offset
//! whose busiest link-slot (counting the job) is least loaded, ties to the
//! smallest offset; then each shiftable job is moved again while that
//! lowers what it sees. Nothing above capacity means nothing slows, so a
//! delay is only chosen when it lowers a utilisation above 1: jobs that
//! fit in space keep offset 0.
//!
//! The expected iteration of a job is its period with its communication
//! stretched by the highest utilisation it meets while it communicates (a
//! fluid model: a link at 2.0 halves every flow's rate on it). Offsets are
//! recommended only when they lower the highest such stretch and make no
//! job's iteration longer than without them; otherwise every offset is 0
//! and the verdict says why.

mod grid;
mod profile;

use serde::Serialize;

use profile::Profile;

/// Least utilisation difference that counts as a change.
const EPS: f64 = 1e-9;

/// One periodic job as the phase planner sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseJob {
    /// Iteration period: communication plus compute.
    pub period_ns: u64,
    /// The communication phase, the job alone on the fabric.
    pub comm_ns: u64,
    /// When one of its communication phases starts, relative to the
    /// caller's origin (its planned start, or the phase measured).
    pub phase_ns: u64,
    /// The scheduler may delay the job's start.
    pub shiftable: bool,
    /// `(link index, bits per second)` while it communicates; a link
    /// index is a position in the capacities passed to [`plan_phases`].
    pub loads: Vec<(usize, u64)>,
}

/// The planner's tunables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PhaseConfig {
    /// Slots per shortest period on the finest grid tried.
    pub slots_per_period: u64,
    /// Most slots in the common period: past this the periods have no
    /// useful common multiple.
    pub max_slots: u64,
    /// Rounds of re-placing each shiftable job after the first pass.
    pub rounds: u32,
}

impl Default for PhaseConfig {
    fn default() -> Self {
        PhaseConfig { slots_per_period: 64, max_slots: 1024, rounds: 3 }
    }
}

/// Why the plan recommends what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Offsets lower the highest utilisation over time.
    Staggered,
    /// Nothing is over capacity without offsets: none needed.
    FitsWithout,
    /// No offsets lower the highest stretch (the jobs' phases cannot be
    /// kept apart, or a job communicates all the time).
    CannotHelp,
    /// The periods have no common multiple short enough to plan over.
    NoCommonPeriod,
    /// The offsets found would make some job's iteration longer.
    WouldSlow,
    /// Fewer than two jobs, or none the scheduler may shift.
    NothingToShift,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Staggered => "staggered",
            Verdict::FitsWithout => "fits_without",
            Verdict::CannotHelp => "cannot_help",
            Verdict::NoCommonPeriod => "no_common_period",
            Verdict::WouldSlow => "would_slow",
            Verdict::NothingToShift => "nothing_to_shift",
        }
    }
}

/// The advice for one job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    /// Delay the job's start (its next communication phase) by this much.
    pub offset_ns: u64,
    /// Highest utilisation the job meets while it communicates, at least 1.
    pub stretch_with: f64,
    pub stretch_without: f64,
    /// Expected iteration time with the offsets and with none.
    pub iteration_ns_with: u64,
    pub iteration_ns_without: u64,
}

/// The planner's answer; `advice` is in the order of the jobs given.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhasePlan {
    pub verdict: Verdict,
    /// One sentence saying why, for the API and the event log.
    pub why: String,
    pub advice: Vec<Advice>,
    /// The grid planned on (0 without one).
    pub slot_ns: u64,
    pub common_period_ns: u64,
    /// Highest utilisation over the common period, with the offsets and with none.
    pub peak_with: f64,
    pub peak_without: f64,
}

fn iteration(job: &PhaseJob, stretch: f64) -> u64 {
    let extra = job.comm_ns as f64 * (stretch - 1.0).max(0.0);
    job.period_ns.saturating_add(extra.round() as u64)
}

/// Plans phase offsets (see the module doc). `capacity_bps[l]` is link
/// `l`'s capacity; loads on a link without one (or of capacity 0) are
/// ignored.
pub fn plan_phases(jobs: &[PhaseJob], capacity_bps: &[u64], cfg: &PhaseConfig) -> PhasePlan {
    let mut plan = PhasePlan {
        verdict: Verdict::NothingToShift,
        why: String::new(),
        advice: Vec::new(),
        slot_ns: 0,
        common_period_ns: 0,
        peak_with: 0.0,
        peak_without: 0.0,
    };
    let periods: Vec<u64> = jobs.iter().map(|j| j.period_ns.max(1)).collect();
    let Some(g) = grid::grid(&periods, cfg.slots_per_period, cfg.max_slots) else {
        let ms: Vec<String> = periods.iter().map(|&p| format!("{:.3}", p as f64 / 1e6)).collect();
        plan.verdict = Verdict::NoCommonPeriod;
        plan.why = format!(
            "periods of {} ms have no common multiple within {} slots of {} of the shortest: no offset recommended",
            ms.join(", "),
            cfg.max_slots,
            cfg.slots_per_period
        );
        plan.advice = unshifted(jobs);
        return plan;
    };
    plan.slot_ns = g.slot_ns;
    plan.common_period_ns = g.slots * g.slot_ns;
    let mut prof = Profile::new(jobs, capacity_bps, &g);
    let zero = vec![0u64; jobs.len()];
    prof.fill(&zero);
    let without: Vec<f64> = (0..jobs.len()).map(|j| prof.stretch(j, 0)).collect();
    plan.peak_without = prof.peak();
    let offsets = choose(jobs, &mut prof, cfg.rounds);
    prof.fill(&offsets);
    let with: Vec<f64> = (0..jobs.len()).map(|j| prof.stretch(j, offsets[j])).collect();
    plan.peak_with = prof.peak();
    plan.advice = jobs
        .iter()
        .enumerate()
        .map(|(j, job)| Advice {
            offset_ns: offsets[j] * g.slot_ns,
            stretch_with: with[j],
            stretch_without: without[j],
            iteration_ns_with: iteration(job, with[j]),
            iteration_ns_without: iteration(job, without[j]),
        })
        .collect();
    let worst = |v: &[f64]| v.iter().copied().fold(1.0f64, f64::max);
    let slower = plan.advice.iter().position(|a| a.iteration_ns_with > a.iteration_ns_without);
    let (verdict, why) = if jobs.len() < 2 || !jobs.iter().any(|j| j.shiftable) {
        (Verdict::NothingToShift, "fewer than two periodic jobs, or none the scheduler may shift".to_string())
    } else if worst(&without) <= 1.0 + EPS {
        (
            Verdict::FitsWithout,
            format!("every link stays within capacity without offsets (peak {:.2})", plan.peak_without),
        )
    } else if let Some(j) = slower {
        (
            Verdict::WouldSlow,
            format!("the offsets found would lengthen job {j}'s iteration: none recommended"),
        )
    } else if worst(&with) + EPS >= worst(&without) {
        (
            Verdict::CannotHelp,
            format!(
                "no offsets keep the communication phases apart: the highest stretch stays {:.2}",
                worst(&without)
            ),
        )
    } else {
        (
            Verdict::Staggered,
            format!(
                "offsets lower the highest utilisation over the common period from {:.2} to {:.2}",
                plan.peak_without, plan.peak_with
            ),
        )
    };
    plan.verdict = verdict;
    plan.why = why;
    if verdict != Verdict::Staggered {
        for a in &mut plan.advice {
            a.offset_ns = 0;
            a.stretch_with = a.stretch_without;
            a.iteration_ns_with = a.iteration_ns_without;
        }
        plan.peak_with = plan.peak_without;
    }
    plan
}

/// Advice of offset 0 when there is no grid to plan on: the stretches
/// are not known, so the iterations are the periods.
fn unshifted(jobs: &[PhaseJob]) -> Vec<Advice> {
    jobs.iter()
        .map(|j| Advice {
            offset_ns: 0,
            stretch_with: 1.0,
            stretch_without: 1.0,
            iteration_ns_with: j.period_ns,
            iteration_ns_without: j.period_ns,
        })
        .collect()
}

/// The offsets, in slots: fixed jobs at 0, shiftable ones greedily,
/// largest first, then improved in rounds.
fn choose(jobs: &[PhaseJob], prof: &mut Profile, rounds: u32) -> Vec<u64> {
    let mut offsets = vec![0u64; jobs.len()];
    prof.clear();
    let mut order: Vec<usize> = (0..jobs.len()).filter(|&j| jobs[j].shiftable).collect();
    for j in (0..jobs.len()).filter(|&j| !jobs[j].shiftable) {
        prof.add(j, 0, 1.0);
    }
    let weight = |j: usize| {
        let bits: u128 = jobs[j].loads.iter().map(|&(_, r)| u128::from(r)).sum();
        bits * u128::from(jobs[j].comm_ns)
    };
    order.sort_by(|&a, &b| weight(b).cmp(&weight(a)).then(a.cmp(&b)));
    for &j in &order {
        let (o, _) = prof.best(j);
        offsets[j] = o;
        prof.add(j, o, 1.0);
    }
    for _ in 0..rounds {
        let mut changed = false;
        for &j in &order {
            let now = prof.seen(j, offsets[j]);
            prof.add(j, offsets[j], -1.0);
            let (o, cost) = prof.best(j);
            if o != offsets[j] && cost + EPS < now.max(1.0) {
                offsets[j] = o;
                changed = true;
            }
            prof.add(j, offsets[j], 1.0);
        }
        if !changed {
            break;
        }
    }
    offsets
}
