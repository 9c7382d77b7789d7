//! SVG plots written by hand: queue depth over time on the hottest links,
//! the FCT CDF per mode, a link-utilization heatmap (modes × links), the
//! completion of each iteration per mode, and a seed sweep's box plot.

use std::fmt::Write as _;

use crate::report::ModeRun;

const W: f64 = 760.0;
const H: f64 = 360.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
pub(super) const COLORS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"];

pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A "nice" step for about `n` ticks over `0..max`.
pub(super) fn tick_step(max: f64, n: f64) -> f64 {
    let raw = (max / n).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag)
}

/// Where an axis up to `max` has ticks: about `n` round steps from 0, or
/// 1-2-5 per decade from `log_min` on a log axis.
fn ticks(log_min: Option<f64>, max: f64, n: f64) -> Vec<f64> {
    let Some(lo) = log_min else {
        let step = tick_step(max, n);
        return (0..).map(|k| k as f64 * step).take_while(|t| *t <= max * 1.0001).collect();
    };
    let mut out = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= max {
        for m in [1.0, 2.0, 5.0] {
            let t = decade * m;
            if t >= lo * 0.9999 && t <= max * 1.0001 {
                out.push(t);
            }
        }
        decade *= 10.0;
    }
    out
}

struct Frame {
    out: String,
    xmax: f64,
    ymax: f64,
    /// A log x axis from this value (None: linear from 0).
    log_xmin: Option<f64>,
    /// A log y axis from this value (None: linear from 0).
    log_ymin: Option<f64>,
}

impl Frame {
    fn new(title: &str, xlabel: &str, ylabel: &str, xmax: f64, ymax: f64) -> Self {
        Self::with_x_ticks(title, xlabel, ylabel, xmax, ymax, true)
    }

    fn with_x_ticks(title: &str, xlabel: &str, ylabel: &str, xmax: f64, ymax: f64, x_ticks: bool) -> Self {
        Self::build(title, xlabel, ylabel, (None, xmax), (None, ymax), x_ticks)
    }

    /// A frame whose x axis is logarithmic over `xmin..xmax`.
    fn log_x(title: &str, xlabel: &str, ylabel: &str, xmin: f64, xmax: f64, ymax: f64) -> Self {
        let xmin = xmin.max(1e-9);
        Self::build(title, xlabel, ylabel, (Some(xmin), xmax.max(xmin * 10.0)), (None, ymax), true)
    }

    fn build(
        title: &str,
        xlabel: &str,
        ylabel: &str,
        x: (Option<f64>, f64),
        y: (Option<f64>, f64),
        x_ticks: bool,
    ) -> Self {
        let ((log_xmin, xmax), (log_ymin, ymax)) = (x, y);
        let (xmax, ymax) = (xmax.max(1e-9), ymax.max(1e-9));
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="{W}" height="{H}" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>
"#,
            W / 2.0,
            esc(title)
        );
        let f = Frame { out, xmax, ymax, log_xmin, log_ymin };
        f.axes(xlabel, ylabel, x_ticks)
    }

    /// A frame with a linear x axis without ticks (the caller labels it)
    /// and a logarithmic y axis over `ymin..ymax`.
    fn log_y(title: &str, xlabel: &str, ylabel: &str, xmax: f64, ymin: f64, ymax: f64) -> Self {
        let ymin = ymin.max(1e-9);
        Self::build(title, xlabel, ylabel, (None, xmax), (Some(ymin), ymax.max(ymin * 10.0)), false)
    }

    fn x(&self, v: f64) -> f64 {
        let frac = match self.log_xmin {
            Some(lo) => (v.max(lo) / lo).log10() / (self.xmax / lo).log10(),
            None => v / self.xmax,
        };
        LEFT + frac * (W - LEFT - RIGHT)
    }

    fn x_ticks(&self) -> Vec<f64> {
        ticks(self.log_xmin, self.xmax, 6.0)
    }

    fn y(&self, v: f64) -> f64 {
        let frac = match self.log_ymin {
            Some(lo) => (v.max(lo) / lo).log10() / (self.ymax / lo).log10(),
            None => v / self.ymax,
        };
        H - BOTTOM - frac * (H - TOP - BOTTOM)
    }

    fn y_ticks(&self) -> Vec<f64> {
        ticks(self.log_ymin, self.ymax, 5.0)
    }

    fn axes(mut self, xlabel: &str, ylabel: &str, x_ticks: bool) -> Self {
        let (x0, y0, x1, y1) = (LEFT, H - BOTTOM, W - RIGHT, TOP);
        let _ = writeln!(self.out, r##"<path d="M{x0},{y1} V{y0} H{x1}" stroke="#333" fill="none"/>"##);
        let ticks = if x_ticks { self.x_ticks() } else { Vec::new() };
        for t in ticks {
            let x = self.x(t);
            let _ = writeln!(
                self.out,
                r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{}" stroke="#333"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
                y0 + 5.0,
                y0 + 18.0,
                fmt_num(t)
            );
        }
        for t in self.y_ticks() {
            let y = self.y(t);
            let _ = writeln!(
                self.out,
                r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                x0 - 6.0,
                y + 4.0,
                fmt_num(t)
            );
        }
        let _ = writeln!(
            self.out,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            (x0 + x1) / 2.0,
            H - 12.0,
            esc(xlabel)
        );
        let _ = writeln!(
            self.out,
            r#"<text x="16" y="{}" text-anchor="middle" transform="rotate(-90 16 {})">{}</text>"#,
            (y0 + y1) / 2.0,
            (y0 + y1) / 2.0,
            esc(ylabel)
        );
        self
    }

    fn line(&mut self, i: usize, label: &str, pts: &[(f64, f64)]) {
        self.styled_line(i, i, label, pts, "");
    }

    /// A line in colour `color_of`, legend entry `slot`, with an SVG dash
    /// pattern (empty: solid) and a marker at each point when dashed.
    fn styled_line(&mut self, color_of: usize, slot: usize, label: &str, pts: &[(f64, f64)], dash: &str) {
        let color = COLORS[color_of % COLORS.len()];
        let dash_attr =
            if dash.is_empty() { String::new() } else { format!(r#" stroke-dasharray="{dash}""#) };
        let mut d = String::new();
        for (k, (x, y)) in pts.iter().enumerate() {
            let _ = write!(d, "{}{:.1},{:.1} ", if k == 0 { "M" } else { "L" }, self.x(*x), self.y(*y));
        }
        let _ = writeln!(
            self.out,
            r#"<path d="{d}" stroke="{color}" stroke-width="1.6" fill="none"{dash_attr}/>"#
        );
        let ly = TOP + 10.0 + 18.0 * slot as f64;
        let lx = W - RIGHT + 12.0;
        let _ = writeln!(
            self.out,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="3"{dash_attr}/><text x="{}" y="{}">{}</text>"#,
            lx + 18.0,
            lx + 24.0,
            ly + 4.0,
            esc(label)
        );
    }

    /// A legend entry without a line.
    fn legend(&mut self, i: usize, label: &str) {
        let color = COLORS[i % COLORS.len()];
        let (lx, ly) = (W - RIGHT + 12.0, TOP + 10.0 + 18.0 * i as f64);
        let _ = writeln!(
            self.out,
            r#"<rect x="{lx}" y="{}" width="18" height="10" fill="{color}" fill-opacity="0.4" stroke="{color}"/><text x="{}" y="{}">{}</text>"#,
            ly - 5.0,
            lx + 24.0,
            ly + 4.0,
            esc(label)
        );
    }

    /// A dashed reference line across the plot at `y`.
    fn hline(&mut self, y: f64, label: &str) {
        let (x0, x1, yy) = (LEFT, W - RIGHT, self.y(y));
        let _ = writeln!(
            self.out,
            r##"<line x1="{x0}" y1="{yy:.1}" x2="{x1}" y2="{yy:.1}" stroke="#888" stroke-dasharray="4 3"/><text x="{}" y="{:.1}" fill="#666">{}</text>"##,
            x1 - 4.0,
            yy - 4.0,
            esc(label)
        );
    }

    fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}

fn fmt_num(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 || v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Queue depth over time on one mode's hottest ports (largest maximum).
pub fn queue_depth(run: &ModeRun) -> String {
    let dt_us = run.series_interval_ps as f64 / 1e6;
    // The whole run, so that a stall after the last queue shows as one.
    let series_end = run.hot.iter().map(|h| h.series.len()).max().unwrap_or(1) as f64 * dt_us;
    let xmax = series_end.max(run.summary.sim_time_us);
    let ymax = run.hot.iter().map(|h| h.max_bytes).max().unwrap_or(1) as f64 / 1024.0;
    let title = format!("Queue depth on the hottest links ({})", run.summary.mode);
    let mut f = Frame::new(&title, "time (µs)", "queue depth, max per interval (KiB)", xmax, ymax * 1.05);
    for (i, h) in run.hot.iter().enumerate() {
        let pts: Vec<(f64, f64)> = h
            .series
            .iter()
            .enumerate()
            .flat_map(|(k, &v)| {
                let y = f64::from(v) / 1024.0;
                [(k as f64 * dt_us, y), ((k + 1) as f64 * dt_us, y)]
            })
            .chain([(h.series.len() as f64 * dt_us, 0.0), (xmax, 0.0)])
            .collect();
        f.line(i, &h.label, &pts);
    }
    f.finish()
}

/// The CDF of message completion times, one line per mode.
pub fn fct_cdf(runs: &[ModeRun]) -> String {
    // Log time axis: the body (short messages) and the tail both show.
    let xmax = runs.iter().filter_map(|r| r.fcts_ps.last()).max().copied().unwrap_or(1) as f64 / 1e6;
    let xmin = runs.iter().filter_map(|r| r.fcts_ps.first()).min().copied().unwrap_or(1) as f64 / 1e6;
    let xmin = 10f64.powf(xmin.max(1e-3).log10().floor());
    let mut f = Frame::log_x(
        "Message completion time CDF",
        "completion time (µs, log scale)",
        "fraction of messages",
        xmin,
        xmax * 1.1,
        1.0,
    );
    for (i, r) in runs.iter().enumerate() {
        let n = r.fcts_ps.len();
        let step = (n / 400).max(1);
        // A step function: at each (sampled) completion time the fraction
        // rises from k/n to (k+1)/n.
        let mut pts = Vec::new();
        for k in (0..n).step_by(step).chain(n.checked_sub(1)) {
            let x = r.fcts_ps[k] as f64 / 1e6;
            pts.push((x, k as f64 / n as f64));
            pts.push((x, (k + 1) as f64 / n as f64));
        }
        f.line(i, &r.summary.mode, &pts);
    }
    f.finish()
}

/// FCT slowdown by flow size of the Poisson flows: p50 (solid) and p99
/// (dashed) per mode over the size buckets, log y axis (the tail spans
/// decades); None without Poisson flows.
pub fn fct_slowdown(runs: &[ModeRun]) -> Option<String> {
    let first = runs.first()?.summary.fct_slowdown.as_ref()?;
    let labels: Vec<&str> = first.by_size.iter().map(|b| b.label.as_str()).collect();
    let values = || {
        runs.iter()
            .filter_map(|r| r.summary.fct_slowdown.as_ref())
            .flat_map(|s| s.by_size.iter().flat_map(|b| [b.p50, b.p99]))
            .flatten()
    };
    let ymax = values().fold(1.0, f64::max);
    let ymin = values().fold(f64::INFINITY, f64::min).min(1.0);
    let ymin = 10f64.powf(ymin.max(1e-3).log10().floor());
    let ymax = 10f64.powf((ymax * 1.2).log10().ceil());
    let n = labels.len() as f64;
    let mut f = Frame::log_y(
        "FCT slowdown by flow size (p50 solid, p99 dashed)",
        "flow size",
        "FCT / FCT alone on an idle fabric (log scale)",
        n + 0.5,
        ymin,
        ymax,
    );
    for (k, l) in labels.iter().enumerate() {
        let (x, y0) = (f.x(k as f64 + 1.0), H - BOTTOM);
        let _ =
            writeln!(f.out, r#"<text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#, y0 + 18.0, esc(l));
    }
    for (i, r) in runs.iter().enumerate() {
        let Some(s) = &r.summary.fct_slowdown else { continue };
        for (j, (name, dash)) in [("p50", ""), ("p99", "6 4")].into_iter().enumerate() {
            let pts: Vec<(f64, f64)> = s
                .by_size
                .iter()
                .enumerate()
                .filter_map(|(k, b)| Some((k as f64 + 1.0, if j == 0 { b.p50 } else { b.p99 }?)))
                .collect();
            f.styled_line(i, 2 * i + j, &format!("{} {name}", r.summary.mode), &pts, dash);
        }
    }
    f.hline(1.0, "ideal");
    Some(f.finish())
}

/// Utilization of every switch egress port: a panel per tier, a matrix
/// per mode (rows: switches, columns: ports), a colour scale.
pub fn utilization_heatmap(runs: &[ModeRun]) -> String {
    crate::report::heatmap::render(runs)
}

/// Completion over the ideal bound per iteration, one line per (mode,
/// job) with several iterations; None when no job has several.
pub fn iterations(runs: &[ModeRun]) -> Option<String> {
    let first = runs.first()?;
    let jobs: Vec<usize> =
        (0..first.summary.jobs.len()).filter(|&j| first.summary.jobs[j].iterations.len() > 1).collect();
    if jobs.is_empty() {
        return None;
    }
    let n = jobs.iter().map(|&j| first.summary.jobs[j].iterations.len()).max().unwrap_or(1) as f64;
    let ymax = runs
        .iter()
        .flat_map(|r| r.summary.jobs.iter().flat_map(|j| j.iterations.iter().filter_map(|i| i.slowdown)))
        .fold(1.0, f64::max);
    let mut f = Frame::new(
        "Completion per iteration over the ideal bound",
        "iteration",
        "completion / ideal",
        n + 0.5,
        ymax * 1.1,
    );
    let mut i = 0;
    for r in runs {
        for &j in &jobs {
            let job = &r.summary.jobs[j];
            let pts: Vec<(f64, f64)> = job
                .iterations
                .iter()
                .enumerate()
                .filter_map(|(k, it)| Some(((k + 1) as f64, it.slowdown?)))
                .collect();
            let label = if jobs.len() > 1 {
                format!("{} {}", r.summary.mode, job.name)
            } else {
                r.summary.mode.clone()
            };
            f.line(i, &label, &pts);
            i += 1;
        }
    }
    f.hline(1.0, "ideal");
    Some(f.finish())
}

/// One box of a box plot: a group's values (sorted) under one mode.
#[derive(Debug, Clone, Copy)]
pub struct BoxOf<'a> {
    pub group: &'a str,
    pub mode: &'a str,
    pub sorted: &'a [f64],
    pub median: f64,
    pub p90: f64,
}

/// A box plot of a sweep: per job, one box per mode of completion over
/// ideal across the seeds (whiskers: best and worst; box: p25 to p75;
/// bar: median).
pub fn sweep_box(s: &crate::report::sweep::Sweep) -> String {
    let title = format!(
        "{}: completion / ideal over seeds {}",
        s.scenario,
        crate::report::sweep::seeds_text(&s.seeds)
    );
    let boxes: Vec<BoxOf<'_>> = s
        .rows
        .iter()
        .map(|r| BoxOf { group: &r.job, mode: &r.mode, sorted: &r.slowdowns, median: r.median, p90: r.p90 })
        .collect();
    box_plot(&title, "job (one box per mode)", "completion / ideal", &s.modes, &boxes)
}

/// Boxes grouped along x (in the order groups first appear), the modes
/// side by side in each group, coloured by mode; whiskers are the best
/// and worst values, the box p25 to p75, the bar the median. The y axis
/// is logarithmic (from just under the smallest value, at most 0.9) when
/// the values span more than a factor of 3, so that 1.02 and 1.10 stay
/// apart beside an 8; when the groups' names would not fit under them,
/// the groups are numbered and keyed beside the plot.
pub fn box_plot(title: &str, xlabel: &str, ylabel: &str, modes: &[String], rows: &[BoxOf<'_>]) -> String {
    let boxes = rows.len().max(1) as f64;
    let finite = || rows.iter().flat_map(|r| r.sorted.iter().copied()).filter(|v| v.is_finite() && *v > 0.0);
    let ymax = finite().fold(1.0, f64::max) * 1.08;
    let ymin = finite().fold(0.9, f64::min) * 0.95;
    let mut f = if ymax / ymin > 3.0 {
        Frame::log_y(title, xlabel, ylabel, boxes, ymin, ymax)
    } else {
        Frame::with_x_ticks(title, xlabel, ylabel, boxes, ymax, false)
    };
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if !names.contains(&r.group) {
            names.push(r.group);
        }
    }
    let per_group = (W - LEFT - RIGHT) / names.len().max(1) as f64;
    let numbered = names.iter().any(|n| n.chars().count() as f64 * 6.5 > per_group);
    let slot = (W - LEFT - RIGHT) / boxes;
    let q =
        |v: &[f64], p: f64| v.get(((p * (v.len() as f64 - 1.0)).round()) as usize).copied().unwrap_or(0.0);
    let mut groups: Vec<(String, f64, f64)> = Vec::new();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    let group_index = |name: &str| rows.iter().position(|r| r.group == name).unwrap_or(0);
    order.sort_by_key(|&k| (group_index(rows[k].group), modes.iter().position(|m| m == rows[k].mode)));
    for (slot_i, &k) in order.iter().enumerate() {
        let r = &rows[k];
        let m = modes.iter().position(|m| m == r.mode).unwrap_or(0);
        let color = COLORS[m % COLORS.len()];
        let cx = LEFT + (slot_i as f64 + 0.5) * slot;
        let half = (slot * 0.3).min(30.0);
        if let (Some(&lo), Some(&hi)) = (r.sorted.first(), r.sorted.last()) {
            let hi = hi.min(ymax);
            let (p25, med, p75) = (q(r.sorted, 0.25), r.median.min(ymax), q(r.sorted, 0.75).min(ymax));
            let _ = writeln!(
                f.out,
                r#"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="{color}"/><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}" fill-opacity="0.25" stroke="{color}"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2.5"/><title>{} {}: median {med:.2}, p90 {:.2}, worst {hi:.2}</title>"#,
                f.y(lo),
                f.y(hi),
                cx - half,
                f.y(p75),
                2.0 * half,
                (f.y(p25) - f.y(p75)).max(1.0),
                cx - half,
                f.y(med),
                cx + half,
                f.y(med),
                esc(r.mode),
                esc(r.group),
                r.p90
            );
        }
        match groups.last_mut() {
            Some((name, _, end)) if name == r.group => *end = cx,
            _ => groups.push((r.group.to_owned(), cx, cx)),
        }
    }
    for (k, (name, a, b)) in groups.iter().enumerate() {
        let label = if numbered { (k + 1).to_string() } else { name.clone() };
        let _ = writeln!(
            f.out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle" font-weight="bold" font-size="11">{}</text>"#,
            (a + b) / 2.0,
            H - BOTTOM + 16.0,
            esc(&label)
        );
    }
    for (m, mode) in modes.iter().enumerate() {
        f.legend(m, mode);
    }
    if numbered {
        let (x, y0) = (W - RIGHT + 12.0, TOP + 18.0 * modes.len() as f64 + 16.0);
        let step = ((H - y0 - 8.0) / groups.len().max(1) as f64).min(14.0);
        for (k, (name, _, _)) in groups.iter().enumerate() {
            let _ = writeln!(
                f.out,
                r#"<text x="{x}" y="{:.1}" font-size="9">{} {}</text>"#,
                y0 + step * k as f64,
                k + 1,
                esc(name)
            );
        }
    }
    f.hline(1.0, "ideal");
    f.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(100.0, 5.0), 20.0);
        assert_eq!(tick_step(7.0, 6.0), 2.0);
        assert_eq!(tick_step(0.3, 6.0), 0.05);
        assert_eq!(esc("a<b&\"c\""), "a&lt;b&amp;&quot;c&quot;");
    }
}
