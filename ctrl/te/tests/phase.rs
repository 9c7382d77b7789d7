//! Properties of the phase planner (`metaroce_te::phase`): staggering
//! where only time separates two jobs, no delay where space suffices, and
//! no job slower for an offset, checked against a model of our own here
//! (each job's stretch recomputed by sampling time, not from the
//! planner's profile).

use metaroce_te::phase::{plan_phases, PhaseConfig, PhaseJob, PhasePlan, Verdict};
use proptest::prelude::*;

const CAP: u64 = 100_000_000_000;

fn job(period_ns: u64, comm_ns: u64, loads: Vec<(usize, u64)>) -> PhaseJob {
    PhaseJob { period_ns, comm_ns, phase_ns: 0, shiftable: true, loads }
}

/// Is job `j` communicating at time `t`, with its offset applied?
fn active(job: &PhaseJob, offset: u64, t: u64) -> bool {
    let start = (job.phase_ns + offset) % job.period_ns;
    let into = (t + job.period_ns - start % job.period_ns) % job.period_ns;
    into < job.comm_ns
}

/// Each job's stretch at the offsets, by sampling the common period at
/// every `step` and summing the rates of the jobs active on each link.
fn sampled_stretch(jobs: &[PhaseJob], caps: &[u64], offsets: &[u64], common: u64, step: u64) -> Vec<f64> {
    let mut out = vec![1.0f64; jobs.len()];
    let mut t = step / 2;
    while t < common {
        for (j, job) in jobs.iter().enumerate() {
            if !active(job, offsets[j], t) {
                continue;
            }
            for &(l, _) in &job.loads {
                let load: u64 = jobs
                    .iter()
                    .enumerate()
                    .filter(|(k, other)| active(other, offsets[*k], t))
                    .flat_map(|(_, other)| other.loads.iter().filter(|&&(m, _)| m == l).map(|&(_, r)| r))
                    .sum();
                out[j] = out[j].max(load as f64 / caps[l] as f64);
            }
        }
        t += step;
    }
    out
}

fn offsets(p: &PhasePlan) -> Vec<u64> {
    p.advice.iter().map(|a| a.offset_ns).collect()
}

#[test]
fn the_issue_case_is_staggered_by_one_communication_phase() {
    // Two permutations on the same two uplinks, each filling them alone;
    // 170 µs of communication, 400 µs of compute.
    let loads = vec![(0, CAP), (1, CAP)];
    let jobs = vec![job(570_000, 170_000, loads.clone()), job(570_000, 170_000, loads)];
    let p = plan_phases(&jobs, &[CAP, CAP], &PhaseConfig::default());
    assert_eq!(p.verdict, Verdict::Staggered, "{}", p.why);
    assert_eq!(p.advice[0].offset_ns, 0);
    assert!(p.advice[1].offset_ns >= 170_000 && p.advice[1].offset_ns + 170_000 <= 570_000 + 10_000);
    assert!((p.peak_without - 2.0).abs() < 1e-9 && (p.peak_with - 1.0).abs() < 1e-9);
    assert_eq!(p.advice[1].iteration_ns_with, 570_000);
    assert_eq!(p.advice[1].iteration_ns_without, 740_000);
}

#[test]
fn communication_all_the_time_cannot_be_helped() {
    let loads = vec![(0, CAP)];
    let jobs = vec![job(500_000, 500_000, loads.clone()), job(500_000, 500_000, loads)];
    let p = plan_phases(&jobs, &[CAP], &PhaseConfig::default());
    assert_eq!(p.verdict, Verdict::CannotHelp, "{}", p.why);
    assert_eq!(offsets(&p), vec![0, 0]);
}

#[test]
fn unrelated_periods_get_no_offset_and_say_why() {
    let loads = vec![(0, CAP)];
    let jobs = vec![job(1_000_000, 300_000, loads.clone()), job(1_370_001, 300_000, loads)];
    let p = plan_phases(&jobs, &[CAP], &PhaseConfig::default());
    assert_eq!(p.verdict, Verdict::NoCommonPeriod);
    assert!(p.why.contains("no common multiple"), "{}", p.why);
    assert_eq!(offsets(&p), vec![0, 0]);
}

#[test]
fn fixed_jobs_keep_their_phase() {
    let loads = vec![(0, CAP)];
    let mut a = job(1_000_000, 300_000, loads.clone());
    a.shiftable = false;
    a.phase_ns = 200_000;
    let jobs = vec![a, job(1_000_000, 300_000, loads)];
    let p = plan_phases(&jobs, &[CAP], &PhaseConfig::default());
    assert_eq!(p.verdict, Verdict::Staggered, "{}", p.why);
    assert_eq!(p.advice[0].offset_ns, 0);
    let b = p.advice[1].offset_ns;
    // b's window [b, b+300 µs) stays clear of a's [200, 500) µs.
    assert!(b + 300_000 <= 200_000 + 16_000 || b >= 500_000, "offset {b}");
}

fn two_that_fit_only_staggered() -> impl Strategy<Value = (Vec<PhaseJob>, Vec<u64>)> {
    (1u64..=10, 5u64..=45, 5u64..=45, 1usize..=4, 51u64..=100, 51u64..=100).prop_map(
        |(ms, ca, cb, links, ra, rb)| {
            let period = ms * 1_000_000;
            let loads = |r: u64| (0..links).map(|l| (l, CAP / 100 * r)).collect::<Vec<_>>();
            let jobs =
                vec![job(period, period * ca / 100, loads(ra)), job(period, period * cb / 100, loads(rb))];
            (jobs, vec![CAP; links])
        },
    )
}

/// Random periodic jobs on a few links: periods from one harmonic family,
/// any communication time, any rates, some fixed with a phase.
fn random_jobs() -> impl Strategy<Value = (Vec<PhaseJob>, Vec<u64>)> {
    let one = (
        0usize..3,
        1u64..=95,
        proptest::collection::vec((0usize..4, 1u64..=100), 1..4),
        any::<bool>(),
        0u64..100,
    );
    proptest::collection::vec(one, 2..6).prop_map(|js| {
        let jobs = js
            .into_iter()
            .map(|(p, comm, loads, fixed, phase)| {
                let period = 1_000_000u64 << p;
                PhaseJob {
                    period_ns: period,
                    comm_ns: period * comm / 100,
                    phase_ns: if fixed { period * phase / 100 } else { 0 },
                    shiftable: !fixed,
                    loads: loads.into_iter().map(|(l, r)| (l, CAP / 100 * r)).collect(),
                }
            })
            .collect();
        (jobs, vec![CAP; 4])
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn two_jobs_that_fit_only_when_staggered_are_staggered((jobs, caps) in two_that_fit_only_staggered()) {
        let p = plan_phases(&jobs, &caps, &PhaseConfig::default());
        prop_assert_eq!(p.verdict, Verdict::Staggered, "{}", p.why);
        prop_assert!(p.advice.iter().any(|a| a.offset_ns > 0));
        let s = sampled_stretch(&jobs, &caps, &offsets(&p), p.common_period_ns, p.slot_ns / 4);
        for (j, v) in s.iter().enumerate() {
            prop_assert!(*v <= 1.0 + 1e-9, "job {} meets {} with offsets {:?}", j, v, offsets(&p));
        }
    }

    #[test]
    fn jobs_that_fit_in_space_are_not_delayed((mut jobs, caps) in random_jobs()) {
        // Scale every rate so each link's total fits: nothing to gain.
        let mut per_link = [0u64; 4];
        for j in &jobs {
            for &(l, r) in &j.loads {
                per_link[l] += r;
            }
        }
        for j in &mut jobs {
            for (l, r) in &mut j.loads {
                if per_link[*l] > CAP {
                    *r = (u128::from(*r) * u128::from(CAP) / u128::from(per_link[*l])) as u64;
                }
            }
        }
        let p = plan_phases(&jobs, &caps, &PhaseConfig::default());
        prop_assert!(p.advice.iter().all(|a| a.offset_ns == 0), "{:?}: {}", offsets(&p), p.why);
        prop_assert!(matches!(p.verdict, Verdict::FitsWithout | Verdict::NothingToShift), "{:?}", p.verdict);
    }

    #[test]
    fn an_offset_never_lengthens_an_iteration((jobs, caps) in random_jobs()) {
        let p = plan_phases(&jobs, &caps, &PhaseConfig::default());
        prop_assert_eq!(p.advice.len(), jobs.len());
        if p.verdict != Verdict::Staggered {
            prop_assert!(p.advice.iter().all(|a| a.offset_ns == 0));
            return Ok(());
        }
        // The stretch each job meets, sampled independently of the
        // planner, with the offsets and without.
        let step = p.slot_ns / 4;
        let with = sampled_stretch(&jobs, &caps, &offsets(&p), p.common_period_ns, step);
        let without = sampled_stretch(&jobs, &caps, &vec![0; jobs.len()], p.common_period_ns, step);
        for j in 0..jobs.len() {
            // The planner rounds a communication phase up to whole slots,
            // so its stretch may only be higher than the sampled one.
            prop_assert!(p.advice[j].stretch_with + 1e-9 >= with[j], "job {}: {} < sampled {}", j, p.advice[j].stretch_with, with[j]);
            prop_assert!(p.advice[j].iteration_ns_with <= p.advice[j].iteration_ns_without);
            prop_assert!(with[j] <= without[j].max(p.advice[j].stretch_without) + 1e-9,
                "job {} slower with offsets {:?}: {} against {}", j, offsets(&p), with[j], without[j]);
        }
    }

    #[test]
    fn the_plan_is_deterministic((jobs, caps) in random_jobs()) {
        prop_assert_eq!(plan_phases(&jobs, &caps, &PhaseConfig::default()), plan_phases(&jobs, &caps, &PhaseConfig::default()));
    }
}
