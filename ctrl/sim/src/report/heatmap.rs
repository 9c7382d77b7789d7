//! The link-utilization heatmap, readable from a handful of links to a
//! thousand: one panel per tier (leaf→spine, spine→leaf, leaf→host, ...),
//! and in it one matrix per mode whose rows are the sending switches
//! (labelled by name) and whose columns are their ports in that tier
//! (labelled by port number), coloured on a scale with a legend.

use std::fmt::Write as _;

use crate::report::ModeRun;

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 110.0;
const GAP: f64 = 24.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// White (idle) through yellow and orange to dark red (saturated).
fn colour(u: f64) -> String {
    let u = u.clamp(0.0, 1.0);
    let (r, g, b) = if u < 0.5 {
        let t = u / 0.5;
        (255.0, 255.0 - 60.0 * t, 255.0 - 200.0 * t)
    } else {
        let t = (u - 0.5) / 0.5;
        (255.0 - 120.0 * t, 195.0 - 195.0 * t, 55.0 - 55.0 * t)
    };
    format!("rgb({:.0},{:.0},{:.0})", r, g, b)
}

/// One tier: sending switches in topology order, each with its ports in
/// that tier (ascending), and where each port's figure is in `port_util`.
struct Tier {
    name: String,
    rows: Vec<(String, Vec<(u32, usize)>)>,
}

fn tiers(run: &ModeRun) -> Vec<Tier> {
    let mut out: Vec<Tier> = Vec::new();
    for (i, (label, tier, _)) in run.port_util.iter().enumerate() {
        let (switch, port) = label.rsplit_once(':').unwrap_or((label.as_str(), "0"));
        let port: u32 = port.parse().unwrap_or(0);
        let t = match out.iter().position(|t| t.name == *tier) {
            Some(k) => &mut out[k],
            None => {
                out.push(Tier { name: tier.clone(), rows: Vec::new() });
                let k = out.len() - 1;
                &mut out[k]
            }
        };
        match t.rows.iter_mut().find(|(s, _)| s == switch) {
            Some((_, ports)) => ports.push((port, i)),
            None => t.rows.push((switch.to_string(), vec![(port, i)])),
        }
    }
    for t in &mut out {
        for (_, ports) in &mut t.rows {
            ports.sort_unstable();
        }
    }
    out
}

/// Every `step`-th of `n` labels, so that labels stay `min_px` apart.
fn label_step(n: usize, cell: f64, min_px: f64) -> usize {
    ((min_px / cell.max(0.01)).ceil() as usize).clamp(1, n.max(1))
}

/// The heatmap of every mode's switch egress ports.
pub fn render(runs: &[ModeRun]) -> String {
    let Some(first) = runs.first() else { return String::new() };
    let tiers = tiers(first);
    let modes = runs.len().max(1) as f64;
    let mut body = String::new();
    let mut y = 60.0;
    for t in &tiers {
        let cols = t.rows.iter().map(|(_, p)| p.len()).max().unwrap_or(1).max(1);
        let rows = t.rows.len().max(1);
        let panel_w = (WIDTH - LEFT - 20.0 - GAP * (modes - 1.0)) / modes;
        let cw = (panel_w / cols as f64).min(24.0);
        let ch = (480.0 / rows as f64).clamp(2.0, 16.0);
        let _ = writeln!(
            body,
            r#"<text x="{LEFT}" y="{y}" font-size="13" font-weight="bold">{} ({} links: rows are the sending switches, columns their ports)</text>"#,
            esc(&t.name),
            t.rows.iter().map(|(_, p)| p.len()).sum::<usize>()
        );
        y += 26.0;
        let row_step = label_step(rows, ch, 11.0);
        for (r, (name, _)) in t.rows.iter().enumerate().filter(|(r, _)| r % row_step == 0) {
            let _ = writeln!(
                body,
                r#"<text x="{}" y="{:.1}" text-anchor="end" font-size="10">{}</text>"#,
                LEFT - 6.0,
                y + r as f64 * ch + ch / 2.0 + 3.5,
                esc(name)
            );
        }
        for (m, run) in runs.iter().enumerate() {
            let x0 = LEFT + m as f64 * (panel_w + GAP);
            let _ = writeln!(
                body,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11">{}</text>"#,
                x0 + cw * cols as f64 / 2.0,
                y - 6.0,
                esc(&run.summary.mode)
            );
            for (r, (name, ports)) in t.rows.iter().enumerate() {
                for (c, &(port, idx)) in ports.iter().enumerate() {
                    let u = run.port_util.get(idx).map_or(0.0, |p| p.2);
                    let _ = writeln!(
                        body,
                        r#"<rect x="{:.2}" y="{:.2}" width="{:.2}" height="{:.2}" fill="{}"><title>{}:{port} ({}) {}: {:.0}%</title></rect>"#,
                        x0 + c as f64 * cw,
                        y + r as f64 * ch,
                        (cw - 0.3).max(0.3),
                        (ch - 0.3).max(0.3),
                        colour(u),
                        esc(name),
                        esc(&t.name),
                        esc(&run.summary.mode),
                        u * 100.0
                    );
                }
            }
            // Port numbers of the first row under the matrix.
            let ports = &t.rows[0].1;
            let col_step = label_step(cols, cw, 22.0);
            for (c, (port, _)) in ports.iter().enumerate().filter(|(c, _)| c % col_step == 0) {
                let _ = writeln!(
                    body,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{port}</text>"#,
                    x0 + c as f64 * cw + cw / 2.0,
                    y + rows as f64 * ch + 11.0
                );
            }
        }
        let _ = writeln!(
            body,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10" fill="#555">port</text>"##,
            LEFT + panel_w / 2.0,
            y + rows as f64 * ch + 24.0
        );
        y += rows as f64 * ch + 44.0;
    }
    // The colour scale.
    let (lx, lw) = (LEFT, 300.0);
    for k in 0..50 {
        let _ = writeln!(
            body,
            r#"<rect x="{:.1}" y="{y}" width="{:.1}" height="12" fill="{}"/>"#,
            lx + k as f64 * lw / 50.0,
            lw / 50.0 + 0.2,
            colour(k as f64 / 49.0)
        );
    }
    for k in 0..=4 {
        let _ = writeln!(
            body,
            r#"<text x="{:.1}" y="{}" text-anchor="middle" font-size="10">{}%</text>"#,
            lx + k as f64 * lw / 4.0,
            y + 25.0,
            k * 25
        );
    }
    let _ = writeln!(
        body,
        r#"<text x="{}" y="{}" font-size="11">utilization: bytes sent over link capacity for the whole run</text>"#,
        lx + lw + 16.0,
        y + 10.0
    );
    let height = y + 40.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12"><rect width="{WIDTH}" height="{height}" fill="white"/>"#
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="26" text-anchor="middle" font-size="15" font-weight="bold">Link utilization per tier (switch egress ports)</text>"#,
        WIDTH / 2.0
    );
    out.push_str(&body);
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_runs_white_to_dark_red() {
        assert_eq!(colour(0.0), "rgb(255,255,255)");
        assert_eq!(colour(1.0), "rgb(135,0,0)");
        assert_eq!(label_step(64, 7.5, 11.0), 2);
        assert_eq!(label_step(4, 16.0, 11.0), 1);
    }
}
