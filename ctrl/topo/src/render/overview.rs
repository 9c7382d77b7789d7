//! The overview picture of a fabric too large to draw switch by switch:
//! a three-tier fabric as its pods (the leaves and spines that the
//! super-spines join) under the super-spines, a two-tier one as blocks of
//! leaves under its spines. A row never holds more than [`MAX_BOXES`]
//! boxes: switches of a wide tier are drawn in consecutive blocks. The
//! links between two boxes are one line labelled with how many there are
//! (and how many are drawn failed). `topo render --detail` draws every
//! switch instead.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{color, esc, RenderOptions, GAP, MARGIN};
use crate::model::{Role, SwitchId, Topology};

/// Most boxes in one row.
pub const MAX_BOXES: usize = 16;
const BOX_W: f64 = 150.0;
const BOX_H: f64 = 46.0;
const ROW_GAP: f64 = 190.0;

/// A box of the overview: switches of one tier (or a pod of two).
struct Group {
    members: Vec<SwitchId>,
    /// Row from the top.
    row: usize,
    title: String,
    detail: String,
    role: Role,
}

/// True when the detailed picture would have more than [`MAX_BOXES`]
/// switches in a tier: the overview reads better.
pub fn wanted(t: &Topology) -> bool {
    let mut per_tier = [0usize; 3];
    for s in &t.switches {
        per_tier[usize::from(s.role.tier()).min(2)] += 1;
    }
    per_tier.iter().any(|&n| n > MAX_BOXES)
}

/// Consecutive blocks of `items`, at most [`MAX_BOXES`] of them.
fn blocks(items: &[SwitchId]) -> Vec<Vec<SwitchId>> {
    let per = items.len().div_ceil(MAX_BOXES).max(1);
    items.chunks(per).map(<[SwitchId]>::to_vec).collect()
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn name_range(t: &Topology, members: &[SwitchId]) -> String {
    match members {
        [] => String::new(),
        [one] => t.switches[*one].name.clone(),
        [first, .., last] => format!("{} … {}", t.switches[*first].name, t.switches[*last].name),
    }
}

fn block_group(t: &Topology, members: Vec<SwitchId>, row: usize, role: Role) -> Group {
    let hosts: usize = members.iter().map(|&s| t.hosts_of(s).len()).sum();
    let mut detail = count(members.len(), role.as_str(), role.plural());
    if hosts > 0 {
        write!(detail, ", {}", count(hosts, "host", "hosts")).ok();
    }
    Group { title: name_range(t, &members), members, row, detail, role }
}

/// The pods of a three-tier fabric: what stays connected among the leaves
/// and spines without the super-spines.
fn pods(t: &Topology) -> Vec<Vec<SwitchId>> {
    let n = t.switches.len();
    let mut pod = vec![usize::MAX; n];
    let mut out: Vec<Vec<SwitchId>> = Vec::new();
    for start in 0..n {
        if pod[start] != usize::MAX || t.switches[start].role == Role::SuperSpine {
            continue;
        }
        let id = out.len();
        let mut members = vec![start];
        pod[start] = id;
        let mut i = 0;
        while i < members.len() {
            let s = members[i];
            i += 1;
            for a in t.adjacency(s) {
                if pod[a.peer] == usize::MAX && t.switches[a.peer].role != Role::SuperSpine {
                    pod[a.peer] = id;
                    members.push(a.peer);
                }
            }
        }
        members.sort_unstable();
        out.push(members);
    }
    out
}

fn groups(t: &Topology) -> Vec<Group> {
    let of_role =
        |r: Role| -> Vec<SwitchId> { (0..t.switches.len()).filter(|&s| t.switches[s].role == r).collect() };
    let supers = of_role(Role::SuperSpine);
    let mut out = Vec::new();
    if supers.is_empty() {
        out.extend(blocks(&of_role(Role::Spine)).into_iter().map(|m| block_group(t, m, 0, Role::Spine)));
        out.extend(blocks(&of_role(Role::Leaf)).into_iter().map(|m| block_group(t, m, 1, Role::Leaf)));
        return out;
    }
    out.extend(blocks(&supers).into_iter().map(|m| block_group(t, m, 0, Role::SuperSpine)));
    let pods = pods(t);
    let per = pods.len().div_ceil(MAX_BOXES).max(1);
    for (k, chunk) in pods.chunks(per).enumerate() {
        let members: Vec<SwitchId> = chunk.iter().flatten().copied().collect();
        let by = |r: Role| members.iter().filter(|&&s| t.switches[s].role == r).count();
        let hosts: usize = members.iter().map(|&s| t.hosts_of(s).len()).sum();
        let first = k * per + 1;
        let title = if chunk.len() == 1 {
            format!("pod {first}")
        } else {
            format!("pods {first} … {}", first + chunk.len() - 1)
        };
        let each = if chunk.len() == 1 { "" } else { " in all" };
        let detail = format!(
            "{}, {}, {}{each}",
            count(by(Role::Leaf), "leaf", "leaves"),
            count(by(Role::Spine), "spine", "spines"),
            count(hosts, "host", "hosts")
        );
        out.push(Group { members, row: 1, title, detail, role: Role::Spine });
    }
    out
}

/// Above this many bundles, only failed ones are labelled (the tooltips
/// carry every count).
const MAX_LABELS: usize = 64;

/// Rows `r` whose every box joins every box of row `r + 1` by the same
/// number of links: `(r, links per pair)`. They are drawn as one band
/// instead of a thicket of lines; bundles with failed links are drawn on
/// top of it.
fn full_meshes(
    groups: &[Group],
    bundles: &BTreeMap<(usize, usize), (usize, usize, u64)>,
) -> Vec<(usize, usize)> {
    let rows = groups.iter().map(|g| g.row).max().unwrap_or(0);
    let mut out = Vec::new();
    for r in 0..rows {
        let (upper, lower): (Vec<usize>, Vec<usize>) = (
            (0..groups.len()).filter(|&g| groups[g].row == r).collect(),
            (0..groups.len()).filter(|&g| groups[g].row == r + 1).collect(),
        );
        if upper.len() * lower.len() < 4 {
            continue;
        }
        let first = bundles.get(&(upper[0], lower[0])).map(|b| b.0);
        let same = upper
            .iter()
            .all(|&u| lower.iter().all(|&l| bundles.get(&(u, l)).is_some_and(|b| Some(b.0) == first)));
        let between = bundles.keys().filter(|(u, l)| groups[*u].row == r && groups[*l].row == r + 1).count();
        if let (true, Some(n)) = (same && between == upper.len() * lower.len(), first) {
            out.push((r, n));
        }
    }
    out
}

/// A full mesh between row `r` and the next: one shaded band and a label.
fn mesh_band(o: &mut String, groups: &[Group], pos: &[(f64, f64)], r: usize, n: usize, width: f64) {
    let span = |row: usize| {
        let xs: Vec<f64> = (0..groups.len()).filter(|&g| groups[g].row == row).map(|g| pos[g].0).collect();
        let y = (0..groups.len()).find(|&g| groups[g].row == row).map_or(0.0, |g| pos[g].1);
        (xs.iter().copied().fold(f64::MAX, f64::min), xs.iter().copied().fold(f64::MIN, f64::max), y)
    };
    let ((ua, ub, uy), (la, lb, ly)) = (span(r), span(r + 1));
    let (y1, y2) = (uy + BOX_H / 2.0, ly - BOX_H / 2.0);
    let per = count(n, "link", "links");
    let _ = writeln!(
        o,
        r##"<polygon points="{ua:.1},{y1:.1} {ub:.1},{y1:.1} {lb:.1},{y2:.1} {la:.1},{y2:.1}" fill="#8a94a6" fill-opacity="0.18" stroke="#8a94a6" stroke-opacity="0.5"><title>full mesh: {per} between every box above and every box below</title></polygon><text x="{:.1}" y="{:.1}" font-size="12" fill="#333" text-anchor="middle" dominant-baseline="middle" paint-order="stroke" stroke="white" stroke-width="4">full mesh: every box above joins every box below by {per}</text>"##,
        width / 2.0,
        (y1 + y2) / 2.0
    );
}

/// One box of the overview as placed on the canvas.
#[derive(Debug, Clone, PartialEq)]
pub struct OverviewBox {
    /// The switches it stands for.
    pub members: Vec<SwitchId>,
    pub title: String,
    /// What it holds, e.g. "16 leaves, 4 spines, 64 hosts".
    pub detail: String,
    /// Its colour's role (a pod is drawn as a spine).
    pub role: Role,
    /// Centre.
    pub x: f64,
    pub y: f64,
}

/// Where [`svg`] draws its boxes: the boxes, the canvas width and height,
/// and the box size; for other drawings of the overview that must match.
pub fn boxes(t: &Topology) -> (Vec<OverviewBox>, f64, f64, (f64, f64)) {
    let groups = groups(t);
    let rows = groups.iter().map(|g| g.row).max().unwrap_or(0) + 1;
    let widest = (0..rows).map(|r| groups.iter().filter(|g| g.row == r).count()).max().unwrap_or(1) as f64;
    let width = (2.0 * MARGIN + widest * BOX_W + (widest - 1.0) * GAP).max(720.0);
    let height = MARGIN + 90.0 + (rows - 1) as f64 * ROW_GAP + BOX_H + MARGIN;
    let mut pos = vec![(0.0, 0.0); groups.len()];
    for r in 0..rows {
        let in_row: Vec<usize> = (0..groups.len()).filter(|&g| groups[g].row == r).collect();
        let span = in_row.len() as f64 * BOX_W + in_row.len().saturating_sub(1) as f64 * GAP;
        let x0 = (width - span) / 2.0 + BOX_W / 2.0;
        for (i, &g) in in_row.iter().enumerate() {
            pos[g] = (x0 + i as f64 * (BOX_W + GAP), MARGIN + 90.0 + r as f64 * ROW_GAP);
        }
    }
    let out = groups
        .into_iter()
        .zip(pos)
        .map(|(g, (x, y))| OverviewBox {
            members: g.members,
            title: g.title,
            detail: g.detail,
            role: g.role,
            x,
            y,
        })
        .collect();
    (out, width, height, (BOX_W, BOX_H))
}

/// Renders the overview as a standalone SVG document.
pub fn svg(t: &Topology, opts: &RenderOptions) -> String {
    let groups = groups(t);
    let (placed, width, height, _) = boxes(t);
    let pos: Vec<(f64, f64)> = placed.iter().map(|b| (b.x, b.y)).collect();
    let mut of = vec![usize::MAX; t.switches.len()];
    for (g, grp) in groups.iter().enumerate() {
        for &s in &grp.members {
            of[s] = g;
        }
    }
    // (upper box, lower box) → (links, failed, total bits per second)
    let mut bundles: BTreeMap<(usize, usize), (usize, usize, u64)> = BTreeMap::new();
    let mut inside = vec![0usize; groups.len()];
    for (i, l) in t.links.iter().enumerate() {
        let (ga, gb) = (of[l.a.switch], of[l.b.switch]);
        if ga == gb {
            inside[ga] += 1;
            continue;
        }
        let key = if pos[ga].1 <= pos[gb].1 { (ga, gb) } else { (gb, ga) };
        let e = bundles.entry(key).or_default();
        e.0 += 1;
        e.1 += usize::from(opts.failed_links.contains(&i));
        e.2 = e.2.saturating_add(l.bandwidth.bps());
    }
    let mut o = String::new();
    let _ = write!(
        o,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="Helvetica, Arial, sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="{MARGIN}" y="28" font-size="18" font-weight="bold">{}</text>
<text x="{MARGIN}" y="48" font-size="12" fill="#555">{} leaves, {} spines, {} super-spines, {} hosts, {} links</text>
<text x="{MARGIN}" y="66" font-size="12" fill="#555">Overview: each box is a pod or a block of switches; ×N on a line counts the links it stands for. `metaroce topo render --detail` draws every switch.</text>
"##,
        esc(&t.name),
        t.count_role(Role::Leaf),
        t.count_role(Role::Spine),
        t.count_role(Role::SuperSpine),
        t.hosts.len(),
        t.links.len(),
    );
    o.push_str("<g>\n");
    let meshes = full_meshes(&groups, &bundles);
    for &(r, n) in &meshes {
        mesh_band(&mut o, &groups, &pos, r, n, width);
    }
    let labels = bundles.len() <= MAX_LABELS;
    let mut failed_seen = 0usize;
    for (&(up, low), &(n, failed, bps)) in &bundles {
        if failed == 0 && meshes.iter().any(|&(r, _)| groups[up].row == r) {
            continue;
        }
        let (x1, y1, x2, y2) = (pos[up].0, pos[up].1 + BOX_H / 2.0, pos[low].0, pos[low].1 - BOX_H / 2.0);
        let w = 1.0 + (n as f64).log2().max(0.0) * 0.6;
        let style = if failed > 0 {
            format!(r##"stroke="#d62728" stroke-dasharray="6 4" stroke-width="{w:.1}""##)
        } else {
            format!(r##"stroke="#8a94a6" stroke-width="{w:.1}""##)
        };
        let failed_text = if failed > 0 { format!(", {failed} failed") } else { String::new() };
        let _ = writeln!(
            o,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" {style}><title>{} – {}: {}{failed_text}, {:.0} Gbit/s in all</title></line>"#,
            esc(&groups[up].title),
            esc(&groups[low].title),
            count(n, "link", "links"),
            bps as f64 / 1e9
        );
        if (labels && n > 1) || failed > 0 {
            // Labels of failed bundles meeting at one box are staggered.
            let at = if failed > 0 { 0.35 + 0.15 * (failed_seen % 4) as f64 } else { 0.8 };
            failed_seen += usize::from(failed > 0);
            let (lx, ly) = (x1 + (x2 - x1) * at, y1 + (y2 - y1) * at);
            let label = if failed > 0 { format!("×{n} ({failed} failed)") } else { format!("×{n}") };
            let _ = writeln!(
                o,
                r##"<text x="{lx:.1}" y="{ly:.1}" font-size="9" fill="#333" text-anchor="middle" dominant-baseline="middle" paint-order="stroke" stroke="white" stroke-width="3">{label}</text>"##
            );
        }
    }
    o.push_str("</g>\n");
    for (g, grp) in groups.iter().enumerate() {
        let (x, y) = pos[g];
        let (fill, stroke) = color(grp.role);
        let internal = if inside[g] > 0 {
            format!(", {} inside", count(inside[g], "link", "links"))
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            r##"<g><title>{}: {}{internal}</title><rect x="{:.1}" y="{:.1}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/><text x="{x:.1}" y="{:.1}" font-size="11" font-weight="bold" text-anchor="middle">{}</text><text x="{x:.1}" y="{:.1}" font-size="9.5" fill="#333" text-anchor="middle">{}</text></g>"##,
            esc(&grp.title),
            esc(&grp.detail),
            x - BOX_W / 2.0,
            y - BOX_H / 2.0,
            y - 4.0,
            esc(&grp.title),
            y + 12.0,
            esc(&grp.detail)
        );
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::gen::{self, Common};
    use crate::units::Bandwidth;

    fn width_of(svg: &str) -> f64 {
        let w = &svg[svg.find("width=\"").unwrap() + 7..];
        w[..w.find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn a_wide_leaf_spine_is_drawn_in_blocks_of_leaves() {
        let t = gen::leaf_spine(&Common::new("ai", Bandwidth::gbps(400)), 64, 16, 8, 1).unwrap();
        assert!(wanted(&t));
        let svg = svg(&t, &RenderOptions::default());
        assert!(width_of(&svg) < 3000.0, "{}", width_of(&svg));
        assert_eq!(svg.matches("<rect x=").count(), 16 + 16, "16 spines, 16 blocks of leaves");
        assert_eq!(svg.matches(">4 leaves, 32 hosts<").count(), 16);
        // Every spine reaches every block by 4 links: one band, not 256 lines.
        assert_eq!(svg.matches("<line").count(), 0);
        assert!(svg.contains("every box below by 4 links"));
        assert!(svg.contains("--detail"));
    }

    #[test]
    fn a_three_tier_clos_is_drawn_as_pods_under_the_super_spines() {
        let t = gen::clos3(&Common::new("clos", Bandwidth::gbps(400)), 8, 16, 4, 8, 4).unwrap();
        assert!(wanted(&t));
        let mut opts = RenderOptions::default();
        opts.failed_links.push(t.links.len() - 1);
        let svg = svg(&t, &opts);
        assert_eq!(svg.matches("middle\">pod ").count(), 8, "one box per pod");
        assert!(svg.contains(">16 leaves, 4 spines, 64 hosts<"), "{svg}");
        assert!(svg.contains("failed)"), "a failed link shows on its bundle");
        assert!(svg.contains("full mesh"), "super-spines and pods are a full mesh");
        assert_eq!(svg.matches("<line").count(), 1, "only the bundle with the failed link is a line");
        assert!(width_of(&svg) < 3000.0);
    }

    #[test]
    fn a_huge_clos_stays_within_a_row_of_boxes() {
        let t = gen::clos3(&Common::new("huge", Bandwidth::gbps(400)), 64, 32, 16, 16, 1).unwrap();
        let svg = svg(&t, &RenderOptions::default());
        assert!(width_of(&svg) <= 2.0 * MARGIN + MAX_BOXES as f64 * (BOX_W + GAP));
        assert!(svg.contains(">pods 1 … 4<"), "pods drawn four to a box");
    }
}
