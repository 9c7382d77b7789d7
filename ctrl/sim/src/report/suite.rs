//! A family suite's figures: every drawn case on every seed and mode,
//! each job judged by its slowest iteration over the larger of the ideal
//! bound and its floor (the job alone with no fabric in the way) — from the second
//! iteration on for jobs the controller learns, every iteration for
//! announced jobs and single iterations — grouped by the job's role and
//! reduced to median, p90 and worst, as markdown, JSON and a box plot.

use std::fmt::Write as _;

use serde::Serialize;

use crate::report::sweep::{median, quantile, sorted};
use crate::report::{JobSummary, Summary};
use crate::suite::{Case, CaseJob};

/// What a job is judged on: completion over max(ideal, floor).
pub const TARGET_WORST: f64 = 1.05;

/// The mode name of the reference runs (`sim suite --reference`): spray on
/// NICs that place packets out of order, the even spreading the bound
/// assumes, without go-back-N's price for reordering.
pub const REFERENCE: &str = "spray-ooo";

/// A job is with the reference when its judged value is at most this
/// factor of the reference's, on the same case, seed and job.
pub const REFERENCE_SLACK: f64 = 1.02;

/// One (group, mode) over every case and seed.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteRow {
    pub group: String,
    pub mode: String,
    /// Judged values, sorted, one per (case, seed, job) that finished.
    pub values: Vec<f64>,
    pub unfinished: usize,
    pub median: f64,
    pub p90: f64,
    pub worst: f64,
    /// Values at or under [`TARGET_WORST`].
    pub within_target: usize,
    /// Out-of-order arrivals over the runs of the group's cases: largest.
    pub out_of_order_max: u64,
}

/// One drawn case, as the tables list it.
#[derive(Debug, Clone, Serialize)]
pub struct CaseRow {
    pub case: usize,
    pub shape: String,
    pub hosts: usize,
    pub pattern: String,
    pub jobs: Vec<String>,
    /// Per mode, the worst judged value of the case over its seeds and
    /// jobs (infinite when a job did not finish).
    pub worst: Vec<(String, f64)>,
}

/// One (group, mode) against the reference, job by job: same case, seed
/// and job on both sides.
#[derive(Debug, Clone, Serialize)]
pub struct VsReference {
    pub group: String,
    pub mode: String,
    /// Jobs that finished on both sides.
    pub compared: usize,
    /// Of those, jobs at or under [`REFERENCE_SLACK`] of the reference.
    pub within: usize,
    /// The largest judged value over the reference's (0 when none compared).
    pub worst_ratio: f64,
    /// The case of that largest ratio.
    pub worst_case: Option<usize>,
}

/// How often a mode's planner ended at its lower bound.
#[derive(Debug, Clone, Serialize)]
pub struct Planned {
    pub mode: String,
    /// Runs whose planner placed flows.
    pub runs: usize,
    /// Of those, runs whose last plan's highest utilisation equals its
    /// lower bound.
    pub at_bound: usize,
    /// The cases of the others, each once.
    pub above: Vec<usize>,
    /// Cases whose lower bound is above 100% on some run, each with its
    /// largest bound (a fraction): the fabric cannot carry the flows at
    /// their rates there. A job's ideal and floor count its own bytes on
    /// a cut, not another job's beside it, so where jobs share such a cut
    /// this is the figure that bounds them together.
    pub over_full: Vec<(usize, f64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Suite {
    pub family: String,
    /// The family's own description of what it draws.
    pub description: String,
    pub seeds: Vec<u64>,
    pub modes: Vec<String>,
    pub nic_ordering: String,
    pub cases: Vec<CaseRow>,
    /// By group, then mode; the group `all` holds every job.
    pub rows: Vec<SuiteRow>,
    /// Per mode with a planner: how often it planned at its lower bound.
    pub planned: Vec<Planned>,
    /// With reference runs (mode [`REFERENCE`]): every other mode against
    /// them, by group; empty without.
    pub vs_reference: Vec<VsReference>,
}

/// The slowest iteration a job is judged on, over max(ideal, floor)
/// (over ideal where the floor was not computed); `None` if one of them
/// did not finish.
pub fn judged(job: &JobSummary, announced: bool) -> Option<f64> {
    let from = if announced || job.iterations.len() <= 1 { 0 } else { 1 };
    let mut worst: f64 = 0.0;
    for it in job.iterations.iter().skip(from) {
        it.completion_us?;
        worst = worst.max(it.vs_floor.or(it.slowdown)?);
    }
    (!job.iterations.is_empty()).then_some(worst)
}

/// Reduces runs to the suite of `family`. `runs` holds, per run, the
/// index of its case in `cases` and its summary.
pub fn aggregate(
    family: &crate::suite::Family,
    seeds: &[u64],
    modes: &[String],
    cases: &[Case],
    runs: &[(usize, Summary)],
) -> Suite {
    // (group, mode) → (values, unfinished, ooo max)
    let mut groups: Vec<String> = vec!["all".into()];
    for c in cases {
        for j in &c.jobs {
            if !groups.contains(&j.role) {
                groups.push(j.role.clone());
            }
        }
    }
    groups[1..].sort();
    let mut acc: Vec<(Vec<f64>, usize, u64)> = vec![(Vec::new(), 0, 0); groups.len() * modes.len()];
    let mut case_worst: Vec<Vec<f64>> = vec![vec![0.0; modes.len()]; cases.len()];
    for (ci, s) in runs {
        let Some(m) = modes.iter().position(|m| *m == s.mode) else { continue };
        for (role, meta, job) in jobs_of(&groups, cases, *ci, s) {
            let Some(job) = job else { continue };
            let v = judged(job, meta.announced);
            case_worst[*ci][m] = case_worst[*ci][m].max(v.unwrap_or(f64::INFINITY));
            for g in counted_in(role) {
                let a = &mut acc[g * modes.len() + m];
                match v {
                    Some(v) => a.0.push(v),
                    None => a.1 += 1,
                }
                a.2 = a.2.max(s.out_of_order.packets);
            }
        }
    }
    let mut rows = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        for (m, mode) in modes.iter().enumerate() {
            let (values, unfinished, ooo) = std::mem::take(&mut acc[g * modes.len() + m]);
            if values.is_empty() && unfinished == 0 {
                continue;
            }
            let values = sorted(values);
            rows.push(SuiteRow {
                group: group.clone(),
                mode: mode.clone(),
                unfinished,
                median: median(&values),
                p90: quantile(&values, 0.9),
                worst: if unfinished > 0 { f64::INFINITY } else { values.last().copied().unwrap_or(0.0) },
                within_target: values.iter().filter(|&&v| v <= TARGET_WORST).count(),
                out_of_order_max: ooo,
                values,
            });
        }
    }
    let vs_reference = against_reference(&groups, modes, cases, runs);
    let case_rows = cases
        .iter()
        .enumerate()
        .map(|(i, c)| CaseRow {
            case: c.number,
            shape: c.shape.clone(),
            hosts: c.topology.hosts.len(),
            pattern: c.pattern.clone(),
            jobs: c
                .jobs
                .iter()
                .map(|j| {
                    let chunk = j.chunk.map_or(String::new(), |c| format!(" in {} KiB chunks", c >> 10));
                    format!(
                        "{}: {} ranks, {} KiB{chunk}, {} iterations, {} µs compute{}",
                        j.name,
                        j.ranks,
                        j.size >> 10,
                        j.iterations,
                        j.compute_ps / 1_000_000,
                        if j.announced { ", announced" } else { "" }
                    )
                })
                .collect(),
            worst: modes.iter().cloned().zip(case_worst[i].iter().copied()).collect(),
        })
        .collect();
    let planned = tally_planned(runs.iter().filter_map(|(ci, s)| {
        let p = s.control.as_ref().and_then(|c| c.placement.as_ref())?;
        let case = cases.get(*ci)?.number;
        Some((case, s.mode.as_str(), p.planned_max_utilisation?, p.planned_lower_bound?))
    }));
    let nic_ordering = runs.first().map(|(_, s)| s.nic_ordering.clone()).unwrap_or_default();
    Suite {
        family: family.name.clone(),
        description: family.description.clone(),
        seeds: seeds.to_vec(),
        modes: modes.to_vec(),
        nic_ordering,
        cases: case_rows,
        rows,
        planned,
        vs_reference,
    }
}

/// Each job of case `ci` as run `s` reports it: the index of its role in
/// `groups` (0, `all`, for one not listed), the case's record of it, and
/// its summary if the run has one (found by name, else by position).
fn jobs_of<'a>(
    groups: &'a [String],
    cases: &'a [Case],
    ci: usize,
    s: &'a Summary,
) -> impl Iterator<Item = (usize, &'a CaseJob, Option<&'a JobSummary>)> + 'a {
    cases.get(ci).into_iter().flat_map(|case| case.jobs.iter().enumerate()).map(move |(j, meta)| {
        let job = s.jobs.iter().find(|x| x.name == meta.name).or_else(|| s.jobs.get(j));
        (groups.iter().position(|g| *g == meta.role).unwrap_or(0), meta, job)
    })
}

/// The groups a job of group `role` counts in: `all`, and its own.
fn counted_in(role: usize) -> impl Iterator<Item = usize> {
    std::iter::once(0).chain((role != 0).then_some(role))
}

/// A job's group (index into the groups) and its judged value.
type RoleJudged = (usize, Option<f64>);

/// Every mode but the reference against the reference runs, job by job
/// (empty when no run is the reference's).
fn against_reference(
    groups: &[String],
    modes: &[String],
    cases: &[Case],
    runs: &[(usize, Summary)],
) -> Vec<VsReference> {
    let judged_jobs = |ci: usize, s: &Summary| -> Vec<RoleJudged> {
        jobs_of(groups, cases, ci, s)
            .map(|(role, meta, job)| (role, job.and_then(|job| judged(job, meta.announced))))
            .collect()
    };
    let reference: std::collections::HashMap<(usize, u64), Vec<RoleJudged>> = runs
        .iter()
        .filter(|(_, s)| s.mode == REFERENCE)
        .map(|(ci, s)| ((*ci, s.seed), judged_jobs(*ci, s)))
        .collect();
    if reference.is_empty() {
        return Vec::new();
    }
    let others: Vec<&String> = modes.iter().filter(|m| *m != REFERENCE).collect();
    let mut out: Vec<VsReference> = groups
        .iter()
        .flat_map(|g| {
            others.iter().map(move |m| VsReference {
                group: g.clone(),
                mode: (*m).clone(),
                compared: 0,
                within: 0,
                worst_ratio: 0.0,
                worst_case: None,
            })
        })
        .collect();
    for (ci, s) in runs.iter().filter(|(_, s)| s.mode != REFERENCE) {
        let (Some(m), Some(refs)) =
            (others.iter().position(|m| **m == s.mode), reference.get(&(*ci, s.seed)))
        else {
            continue;
        };
        for ((role, v), (_, r)) in judged_jobs(*ci, s).into_iter().zip(refs) {
            let (Some(v), Some(r)) = (v, *r) else { continue };
            let ratio = v / r;
            for g in counted_in(role) {
                let row = &mut out[g * others.len() + m];
                row.compared += 1;
                if ratio <= REFERENCE_SLACK {
                    row.within += 1;
                }
                if ratio > row.worst_ratio {
                    row.worst_ratio = ratio;
                    row.worst_case = cases.get(*ci).map(|c| c.number);
                }
            }
        }
    }
    out.retain(|r| r.compared > 0);
    out
}

fn x(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}")
    } else {
        "unfinished".into()
    }
}

/// How often each mode's planner ended at its lower bound, from (case
/// number, mode, planned highest utilisation, lower bound) per run that
/// placed flows, in run order.
fn tally_planned<'a>(runs: impl Iterator<Item = (usize, &'a str, f64, f64)>) -> Vec<Planned> {
    let mut planned: Vec<Planned> = Vec::new();
    for (case, mode, u, b) in runs {
        let at = match planned.iter().position(|x| x.mode == mode) {
            Some(i) => i,
            None => {
                planned.push(Planned {
                    mode: mode.to_string(),
                    runs: 0,
                    at_bound: 0,
                    above: Vec::new(),
                    over_full: Vec::new(),
                });
                planned.len() - 1
            }
        };
        let row = &mut planned[at];
        row.runs += 1;
        if u <= b + 1e-6 {
            row.at_bound += 1;
        } else if !row.above.contains(&case) {
            row.above.push(case);
        }
        if b > 1.0 + 1e-6 {
            match row.over_full.iter_mut().find(|(c, _)| *c == case) {
                Some((_, most)) => *most = most.max(b),
                None => row.over_full.push((case, b)),
            }
        }
    }
    for p in &mut planned {
        p.above.sort_unstable();
        p.over_full.sort_unstable_by_key(|&(c, _)| c);
    }
    planned
}

/// The suite as markdown: the judged values by group and mode, then every case.
pub fn markdown(s: &Suite) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Suite: {}\n", s.family);
    if !s.description.is_empty() {
        let _ = writeln!(out, "{}\n", s.description);
    }
    let _ = writeln!(
        out,
        "{} cases, each on seeds {} (the seed redraws rank placement, permutations and the run's randomness); NICs {}{}.\n",
        s.cases.len(),
        crate::report::sweep::seeds_text(&s.seeds),
        s.nic_ordering,
        if s.modes.iter().any(|m| m == REFERENCE) {
            format!(" ({REFERENCE}, the reference: out-of-order)")
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "Each job is judged by its slowest iteration over max(ideal, the job's floor alone with no fabric in the way): from the second iteration on when the controller must learn the job, every iteration when it is announced (or runs once). Cells: median / p90 / worst (runs at or under {TARGET_WORST}× of all runs).\n"
    );
    let modes: Vec<&str> = s.modes.iter().map(String::as_str).collect();
    group_table(&mut out, &modes, s.rows.iter().map(|r| r.group.as_str()), |g, m| {
        let r = s.rows.iter().find(|r| r.group == g && r.mode == m)?;
        let n = r.values.len() + r.unfinished;
        Some(format!("{} / {} / {} ({}/{n})", x(r.median), x(r.p90), x(r.worst), r.within_target))
    });
    for p in &s.planned {
        let above = if p.above.is_empty() {
            String::new()
        } else {
            format!(
                "; above it in case{} {}",
                if p.above.len() == 1 { "" } else { "s" },
                p.above.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            )
        };
        let _ = writeln!(
            out,
            "\n{}'s planner ended at its lower bound (planned highest utilisation = bound) in {} of {} runs{above}.",
            p.mode, p.at_bound, p.runs
        );
        if !p.over_full.is_empty() {
            let list: Vec<String> =
                p.over_full.iter().map(|(c, b)| format!("{c} ({:.0}%)", b * 100.0)).collect();
            let _ = writeln!(
                out,
                "Its lower bound is above 100% in case{} {}: there the fabric cannot carry the flows at their rates, and where jobs share the cut that sets it, each job's ideal and floor count its own bytes on that cut but not the other's.",
                if list.len() == 1 { "" } else { "s" },
                list.join(", ")
            );
        }
    }
    reference_table(&mut out, s);
    let _ = writeln!(out, "\n## Cases\n");
    let mut head = String::from("| case | fabric | hosts | jobs |");
    let mut rule = String::from("|---:|---|---:|---|");
    for m in &s.modes {
        let _ = write!(head, " {m} worst |");
        rule.push_str("---:|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    for c in &s.cases {
        let mut line = format!("| {} | {} | {} | {} |", c.case, c.shape, c.hosts, c.jobs.join("; "));
        for (_, w) in &c.worst {
            let _ = write!(line, " {} |", x(*w));
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

/// The modes against the reference, if it ran.
fn reference_table(out: &mut String, s: &Suite) {
    if s.vs_reference.is_empty() {
        return;
    }
    let modes: Vec<&str> = s.modes.iter().map(String::as_str).filter(|m| *m != REFERENCE).collect();
    let _ = writeln!(
        out,
        "\n## Against the reference\n\n{REFERENCE}: spray on NICs that place packets out of order, on the same cases and seeds (`--reference`). Cells: jobs judged at most {REFERENCE_SLACK}× of the reference's value for the same case, seed and job, of the jobs that finished on both sides; then the largest ratio and its case.\n"
    );
    group_table(out, &modes, s.vs_reference.iter().map(|r| r.group.as_str()), |g, m| {
        let r = s.vs_reference.iter().find(|r| r.group == g && r.mode == m)?;
        let case = r.worst_case.map_or(String::new(), |c| format!(", case {c}"));
        Some(format!("{}/{}; {:.2}×{case}", r.within, r.compared, r.worst_ratio))
    });
}

/// A table with a row per group (in first-seen order, each once) and a
/// column per mode; `cell(group, mode)` fills a cell, `–` where it is None.
fn group_table<'a>(
    out: &mut String,
    modes: &[&str],
    groups: impl Iterator<Item = &'a str>,
    cell: impl Fn(&str, &str) -> Option<String>,
) {
    let mut head = String::from("| jobs |");
    let mut rule = String::from("|---|");
    for m in modes {
        let _ = write!(head, " {m} |");
        rule.push_str("---:|");
    }
    let _ = writeln!(out, "{head}\n{rule}");
    let mut seen: Vec<&str> = Vec::new();
    for g in groups {
        if seen.contains(&g) {
            continue;
        }
        seen.push(g);
        let mut line = format!("| {g} |");
        for m in modes {
            let _ = write!(line, " {} |", cell(g, m).unwrap_or_else(|| "–".into()));
        }
        let _ = writeln!(out, "{line}");
    }
}

/// The box plot: one group of boxes per job role, a box per mode.
pub fn box_plot(s: &Suite) -> String {
    let boxes: Vec<crate::report::plot::BoxOf<'_>> = s
        .rows
        .iter()
        .map(|r| crate::report::plot::BoxOf {
            group: &r.group,
            mode: &r.mode,
            sorted: &r.values,
            median: r.median,
            p90: r.p90,
        })
        .collect();
    let title = format!(
        "{}: {} cases x seeds {}",
        s.family,
        s.cases.len(),
        crate::report::sweep::seeds_text(&s.seeds)
    );
    crate::report::plot::box_plot(
        &title,
        "jobs (one box per mode)",
        "slowest judged iteration / max(ideal, floor)",
        &s.modes,
        &boxes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planner_runs_are_tallied_by_mode_with_the_cases_above_and_over_full() {
        let runs = [
            (1, "metaroce", 1.0, 1.0),
            (2, "metaroce", 1.2, 1.0),
            (2, "metaroce", 1.3, 1.0),
            (4, "metaroce", 2.0, 2.0),
            (4, "metaroce", 2.1, 2.05),
            (3, "other", 0.5, 0.5),
        ];
        let p = tally_planned(runs.into_iter());
        assert_eq!(p.len(), 2);
        let m = &p[0];
        assert_eq!((m.mode.as_str(), m.runs, m.at_bound), ("metaroce", 5, 2));
        assert_eq!(m.above, vec![2, 4], "each case once, sorted");
        assert_eq!(
            m.over_full,
            vec![(4, 2.05)],
            "the case's largest bound; a bound of 100% is not over full"
        );
        assert_eq!((p[1].runs, p[1].at_bound), (1, 1));
        assert!(p[1].over_full.is_empty() && p[1].above.is_empty());
    }

    #[test]
    fn the_markdown_names_the_cases_whose_bound_is_over_full() {
        let suite = |over_full: Vec<(usize, f64)>| Suite {
            family: "f".into(),
            description: String::new(),
            seeds: vec![1],
            modes: vec!["metaroce".into()],
            nic_ordering: "go-back-n".into(),
            cases: Vec::new(),
            rows: Vec::new(),
            planned: vec![Planned {
                mode: "metaroce".into(),
                runs: 3,
                at_bound: 2,
                above: vec![18],
                over_full,
            }],
            vs_reference: Vec::new(),
        };
        let md = markdown(&suite(vec![(4, 2.0), (18, 2.214)]));
        assert!(md.contains("in 2 of 3 runs; above it in case 18."), "{md}");
        assert!(md.contains("above 100% in cases 4 (200%), 18 (221%): "), "{md}");
        assert!(!markdown(&suite(Vec::new())).contains("above 100%"));
    }
}
