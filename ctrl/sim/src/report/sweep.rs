//! A seed sweep's figures: every mode of a scenario on many seeds, reduced
//! to median, p90 and worst completion over the ideal bound per job and
//! mode, with PFC pauses and out-of-order packets, as markdown, JSON and a
//! box plot. A claim about a mode is a sweep result, not one seed's luck.

use std::fmt::Write as _;

use serde::Serialize;

use crate::report::{IterSummary, JobSummary, Summary};

/// One (mode, job) over every seed.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    pub mode: String,
    pub job: String,
    /// Runs where the job finished.
    pub finished: usize,
    /// Runs where it did not (a limit or a stall).
    pub unfinished: usize,
    /// Completion over ideal, sorted, one per finished run.
    pub slowdowns: Vec<f64>,
    pub median: f64,
    pub p90: f64,
    pub worst: f64,
    pub best: f64,
    /// Per run, the slowest iteration from the second on (jobs of several
    /// iterations: what a controller that learns from iteration 1 is
    /// judged on), sorted; empty for single-iteration jobs.
    pub later_iterations: Vec<f64>,
    pub later_median: f64,
    pub later_worst: f64,
    /// The same over the larger of the ideal and the job's floor (the job
    /// alone with no fabric in the way), when the runs computed floors: median, worst.
    pub later_vs_floor: Option<(f64, f64)>,
    /// PFC pauses of the mode's runs (all jobs): median and largest.
    pub pfc_pauses_median: f64,
    pub pfc_pauses_max: u64,
    /// Out-of-order arrivals of the mode's runs: median and largest.
    pub out_of_order_median: f64,
    pub out_of_order_max: u64,
    /// Links of the largest congestion tree of the mode's runs (whole
    /// run, all jobs): median.
    pub tree_links_median: f64,
    /// Per iteration of the job, the median over runs of the links of the
    /// largest tree that stood while it ran.
    pub iteration_tree_links: Vec<f64>,
    /// Per run, the largest tree (links) that stood during the job's
    /// iterations from the second on: median (0 for one iteration).
    pub later_tree_links_median: f64,
    /// Per run, the PFC pauses (any job's traffic) that began during the
    /// job's iterations from the second on: median and largest (0 for one
    /// iteration).
    pub later_pauses_median: f64,
    pub later_pauses_max: u64,
}

/// The whole sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    pub scenario: String,
    pub seeds: Vec<u64>,
    pub modes: Vec<String>,
    pub nic_ordering: String,
    pub rows: Vec<SweepRow>,
}

/// Nearest-rank quantile of sorted values (0 when empty).
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The median, halfway between the middle two of an even count.
pub(crate) fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

pub(crate) fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// Reduces the runs (any order; each names its mode and seed) to rows by
/// mode, in the order of `modes`, then by job.
pub fn aggregate(scenario: &str, seeds: &[u64], modes: &[String], runs: &[Summary]) -> Sweep {
    let mut rows = Vec::new();
    for mode in modes {
        let of_mode: Vec<&Summary> = runs.iter().filter(|s| &s.mode == mode).collect();
        let Some(first) = of_mode.first() else { continue };
        let pauses = sorted(of_mode.iter().map(|s| s.pfc.pauses as f64).collect());
        let ooo = sorted(of_mode.iter().map(|s| s.out_of_order.packets as f64).collect());
        let trees = sorted(of_mode.iter().map(|s| f64::from(s.pfc.largest_tree.links)).collect());
        for (j, job) in first.jobs.iter().enumerate() {
            let all: Vec<Option<f64>> =
                of_mode.iter().map(|s| s.jobs.get(j).and_then(|x| x.slowdown)).collect();
            let done = sorted(all.iter().flatten().copied().collect());
            let multi = || of_mode.iter().filter_map(|s| s.jobs.get(j)).filter(|x| x.iterations.len() > 1);
            // Per run, the slowest iteration from the second on (unfinished
            // counts as infinitely slow); over max(ideal, floor) only where
            // every run computed floors.
            let later = sorted(
                multi()
                    .map(|x| worst_later(x, |i| Some(i.slowdown.unwrap_or(f64::INFINITY))))
                    .map(Option::unwrap_or_default)
                    .collect(),
            );
            let vs_floor: Option<Vec<f64>> = multi()
                .map(|x| {
                    worst_later(
                        x,
                        |i| if i.completion_us.is_none() { Some(f64::INFINITY) } else { i.vs_floor },
                    )
                })
                .collect();
            let later_vs_floor = vs_floor.filter(|v| !v.is_empty()).map(|v| {
                let v = sorted(v);
                (median(&v), v.last().copied().unwrap_or(0.0))
            });
            let iters = of_mode.iter().filter_map(|s| s.jobs.get(j)).map(|x| x.iterations.len()).max();
            let iteration_tree_links = (0..iters.unwrap_or(0))
                .map(|k| {
                    let links = of_mode.iter().filter_map(|s| s.jobs.get(j)?.iterations.get(k));
                    median(&sorted(links.map(|i| f64::from(i.largest_tree.links)).collect()))
                })
                .collect();
            let later_trees = of_mode.iter().filter_map(|s| s.jobs.get(j)).filter(|x| x.iterations.len() > 1);
            let later_trees = later_trees.map(|x| {
                x.iterations[1..].iter().map(|i| f64::from(i.largest_tree.links)).fold(0.0, f64::max)
            });
            let later_pauses: Vec<u64> = of_mode
                .iter()
                .filter_map(|s| s.jobs.get(j))
                .filter(|x| x.iterations.len() > 1)
                .map(|x| x.iterations[1..].iter().map(|i| i.pfc_pauses).sum())
                .collect();
            rows.push(SweepRow {
                mode: mode.clone(),
                job: job.name.clone(),
                finished: done.len(),
                unfinished: all.len() - done.len(),
                median: median(&done),
                p90: quantile(&done, 0.9),
                worst: done.last().copied().unwrap_or(0.0),
                best: done.first().copied().unwrap_or(0.0),
                later_median: median(&later),
                later_worst: later.last().copied().unwrap_or(0.0),
                later_vs_floor,
                later_iterations: later,
                slowdowns: done,
                pfc_pauses_median: median(&pauses),
                pfc_pauses_max: of_mode.iter().map(|s| s.pfc.pauses).max().unwrap_or(0),
                out_of_order_median: median(&ooo),
                out_of_order_max: of_mode.iter().map(|s| s.out_of_order.packets).max().unwrap_or(0),
                tree_links_median: median(&trees),
                iteration_tree_links,
                later_tree_links_median: median(&sorted(later_trees.collect())),
                later_pauses_median: median(&sorted(later_pauses.iter().map(|&p| p as f64).collect())),
                later_pauses_max: later_pauses.iter().copied().max().unwrap_or(0),
            });
        }
    }
    let nic_ordering = runs.first().map_or_else(String::new, |s| s.nic_ordering.clone());
    Sweep { scenario: scenario.to_string(), seeds: seeds.to_vec(), modes: modes.to_vec(), nic_ordering, rows }
}

/// "1-20", "1,3,5" or "1-4,9" as written back for people.
pub fn seeds_text(seeds: &[u64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < seeds.len() {
        let mut j = i;
        while j + 1 < seeds.len() && seeds[j + 1] == seeds[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", seeds[i], seeds[j]) } else { seeds[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

/// The markdown table: one row per (mode, job).
pub fn markdown(s: &Sweep) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Seed sweep: {}\n\nSeeds {} ({} runs per mode), NICs {}. Completion over the ideal bound per job; \
         PFC pauses, out-of-order arrivals and the largest congestion tree's links per run (all jobs' \
         traffic), and per iteration of the job the largest tree that stood while it ran (medians); \
         the pauses of iterations 2+ are those (any job's traffic) that began while the job's later \
         iterations ran.\n",
        s.scenario,
        seeds_text(&s.seeds),
        s.seeds.len(),
        s.nic_ordering
    );
    out.push_str(
        "| mode | job | median | p90 | worst | iterations 2+: median / worst | PFC pauses (median / max) | PFC pauses in iterations 2+ (median / max) | out-of-order packets (median / max) | tree links: run / iterations 2+ / each iteration |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in &s.rows {
        let unfinished =
            if r.unfinished > 0 { format!(" ({} unfinished)", r.unfinished) } else { String::new() };
        let cell = |v: f64| if r.finished == 0 { "unfinished".to_string() } else { format!("{v:.2}×") };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {}{unfinished} | {} | {:.0} / {} | {} | {:.0} / {} | {} |",
            r.mode,
            r.job,
            cell(r.median),
            cell(r.p90),
            cell(r.worst),
            match (r.later_iterations.is_empty(), r.later_vs_floor) {
                (true, _) => "-".to_string(),
                (false, None) => format!("{:.2}× / {:.2}×", r.later_median, r.later_worst),
                (false, Some((m, w))) => {
                    format!(
                        "{:.2}× / {:.2}× ({m:.2}× / {w:.2}× of max(ideal, floor))",
                        r.later_median, r.later_worst
                    )
                }
            },
            r.pfc_pauses_median,
            r.pfc_pauses_max,
            if r.later_iterations.is_empty() {
                "-".to_string()
            } else {
                format!("{:.0} / {}", r.later_pauses_median, r.later_pauses_max)
            },
            r.out_of_order_median,
            r.out_of_order_max,
            tree_cell(r)
        );
    }
    out
}

/// The largest of `f` over a job's iterations from the second on; None
/// if `f` is None for one of them.
fn worst_later(x: &JobSummary, f: impl Fn(&IterSummary) -> Option<f64>) -> Option<f64> {
    x.iterations[1..].iter().try_fold(0.0f64, |m, i| f(i).map(|v| m.max(v)))
}

/// "29 / 24 / 29, 24, 24": the run's tree, iterations 2+, each iteration.
fn tree_cell(r: &SweepRow) -> String {
    let each: Vec<String> = r.iteration_tree_links.iter().map(|v| format!("{v}")).collect();
    if each.len() > 1 {
        format!("{} / {} / {}", r.tree_links_median, r.later_tree_links_median, each.join(", "))
    } else {
        format!("{}", r.tree_links_median)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_seed_ranges() {
        let v = sorted(vec![3.0, 1.0, 2.0, 10.0]);
        assert_eq!(median(&v), 2.5);
        assert_eq!(quantile(&v, 0.9), 10.0);
        assert_eq!(quantile(&v, 0.5), 2.0);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(seeds_text(&[1, 2, 3, 5, 7, 8]), "1-3,5,7-8");
    }
}
