//! Jobs in time: each periodic job's communication phases on a shared
//! time axis, one panel per mode (the timeline plot), and the report's
//! table of what the start offsets the scheduler took cost.

use std::fmt::Write as _;

use super::plot::{esc, tick_step, COLORS};
use super::{JobSummary, ModeRun};

const W: f64 = 860.0;
const LEFT: f64 = 150.0;
const RIGHT: f64 = 30.0;
const ROW: f64 = 18.0;
const PANEL_GAP: f64 = 34.0;
const TOP: f64 = 46.0;
const BOTTOM: f64 = 44.0;

/// Jobs with several iterations (their phases are what staggering moves).
fn periodic(runs: &[ModeRun]) -> Vec<usize> {
    let Some(first) = runs.first() else { return Vec::new() };
    (0..first.summary.jobs.len()).filter(|&j| first.summary.jobs[j].iterations.len() > 1).collect()
}

/// `(start, end)` of each iteration's communication phase, µs.
fn phases(job: &JobSummary) -> Vec<(f64, f64)> {
    job.iterations
        .iter()
        .filter_map(|it| {
            let s = it.start_us?;
            Some((s, s + it.completion_us?))
        })
        .collect()
}

/// The timeline plot: per mode a panel, per periodic job a row, a bar
/// per iteration's communication phase (from its start to its last
/// message); None unless two jobs or more run several iterations.
pub fn plot(runs: &[ModeRun]) -> Option<String> {
    let jobs = periodic(runs);
    if jobs.len() < 2 {
        return None;
    }
    let xmax = runs
        .iter()
        .flat_map(|r| jobs.iter().flat_map(|&j| phases(&r.summary.jobs[j])))
        .map(|(_, e)| e)
        .fold(1.0, f64::max);
    let panel = jobs.len() as f64 * ROW;
    let h = TOP + BOTTOM + runs.len() as f64 * (panel + PANEL_GAP);
    let x = |v: f64| LEFT + v / xmax * (W - LEFT - RIGHT);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" viewBox="0 0 {W} {h}" font-family="sans-serif" font-size="12">
<rect width="{W}" height="{h}" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="15" font-weight="bold">Communication phases of each job per mode (bars: iterations)</text>
"#,
        W / 2.0
    );
    for (m, r) in runs.iter().enumerate() {
        let top = TOP + m as f64 * (panel + PANEL_GAP);
        let _ = writeln!(
            out,
            r#"<text x="10" y="{}" font-weight="bold">{}</text>"#,
            top - 6.0,
            esc(&r.summary.mode)
        );
        for (row, &j) in jobs.iter().enumerate() {
            let job = &r.summary.jobs[j];
            let y = top + row as f64 * ROW;
            let offset =
                if job.offset_us > 0.0 { format!(" (+{:.0} µs)", job.offset_us) } else { String::new() };
            let _ = writeln!(
                out,
                r#"<text x="{}" y="{}" text-anchor="end">{}{}</text>"#,
                LEFT - 6.0,
                y + ROW * 0.7,
                esc(&job.name),
                esc(&offset)
            );
            let colour = COLORS[row % COLORS.len()];
            for (s, e) in phases(job) {
                let _ = writeln!(
                    out,
                    r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{colour}" fill-opacity="0.8"/>"#,
                    x(s),
                    y + 2.0,
                    (x(e) - x(s)).max(0.5),
                    ROW - 4.0
                );
            }
        }
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{0}" x2="{1}" y2="{0}" stroke="#888"/>"##,
            top + panel,
            W - RIGHT
        );
    }
    let axis = h - BOTTOM + 4.0;
    let step = tick_step(xmax, 8.0);
    let mut t = 0.0;
    while t <= xmax * 1.0001 {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x(t),
            axis + 14.0,
            t
        );
        t += step;
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">time (µs)</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        h - 8.0
    );
    out.push_str("</svg>\n");
    Some(out)
}

/// The report's section: per periodic job and mode, the start offset
/// the scheduler took, the first phase, the mean iteration from the
/// second on (what an offset must not lengthen) and the completion
/// counted from the start the job asked for (what the offset costs).
pub fn markdown(out: &mut String, runs: &[ModeRun]) {
    let jobs = periodic(runs);
    if jobs.len() < 2 {
        return;
    }
    out.push_str("\n## Jobs in time: phases and start offsets\n\n");
    out.push_str(
        "Per mode: `+` the start offset the scheduler took from the controller (only announced periodic \
         jobs in mode metaroce get one), `1st` the first communication phase (µs into the run), `2+` the \
         mean collective time from the second iteration on (µs), `done` the completion counted from the \
         start the job asked for (µs; the offset's cost is in it). `timeline.svg` draws every phase.\n\n",
    );
    let _ = write!(out, "| job |");
    for r in runs {
        let _ = write!(out, " {} |", r.summary.mode);
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(runs.len()));
    out.push('\n');
    for &j in &jobs {
        let _ = write!(out, "| {} |", runs[0].summary.jobs[j].name);
        for r in runs {
            let job = &r.summary.jobs[j];
            let ph = phases(job);
            let first = ph.first().map_or("-".to_string(), |(s, e)| format!("{s:.0}-{e:.0}"));
            let later: Vec<f64> = job.iterations.iter().skip(1).filter_map(|i| i.completion_us).collect();
            let mean = if later.is_empty() { 0.0 } else { later.iter().sum::<f64>() / later.len() as f64 };
            let asked = job.completion_us.map_or("-".to_string(), |c| format!("{:.1}", c + job.offset_us));
            let _ = write!(out, " +{:.0}; 1st {first}; 2+ {mean:.1}; done {asked} |", job.offset_us);
        }
        out.push('\n');
    }
}
