//! A layered SVG picture of the fabric: super-spines on top, then spines,
//! leaves and hosts, with the port number at each end of every link.
//!
//! Each tier is ordered by the mean position of its neighbors below
//! (barycenter), which keeps pods together and links short. Large fabrics
//! drop port labels and fold each leaf's hosts into one box, so the picture
//! stays readable. A fabric with more than [`overview::MAX_BOXES`] switches
//! in a tier is drawn as an [`overview`] (pods and blocks of switches as
//! boxes) unless [`RenderOptions::detail`] asks for every switch.

use std::fmt::Write;

use crate::model::{Role, SwitchId, Topology};

const NODE_W: f64 = 96.0;
const NODE_H: f64 = 30.0;
const GAP: f64 = 18.0;
const LAYER_GAP: f64 = 150.0;
const MARGIN: f64 = 40.0;
/// Above this many links, port labels would overlap into a grey smear.
const MAX_LABELED_LINKS: usize = 600;
/// Above this many hosts, each leaf's hosts are drawn as one box.
const MAX_DRAWN_HOSTS: usize = 96;

/// Options for [`svg`].
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// Links to draw as failed (dashed red); indices into `links`.
    pub failed_links: Vec<usize>,
    /// Every switch, however wide the picture gets (no overview).
    pub detail: bool,
}

pub mod overview;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn color(role: Role) -> (&'static str, &'static str) {
    match role {
        Role::SuperSpine => ("#efe3f7", "#7b3fa0"),
        Role::Spine => ("#e2ecf9", "#2f5f9e"),
        Role::Leaf => ("#e3f4e6", "#2f7d43"),
    }
}

/// Orders the switches of each tier; returns per-switch (x, y) centres and the canvas width.
fn layout(t: &Topology) -> (Vec<(f64, f64)>, f64, usize) {
    let top_tier = t.switches.iter().map(|s| s.role.tier()).max().unwrap_or(0);
    let mut tiers: Vec<Vec<SwitchId>> = vec![Vec::new(); usize::from(top_tier) + 1];
    for (i, s) in t.switches.iter().enumerate() {
        tiers[usize::from(s.role.tier())].push(i);
    }
    let mut rank = vec![0f64; t.switches.len()];
    for layer in &tiers {
        for (i, &s) in layer.iter().enumerate() {
            rank[s] = i as f64;
        }
    }
    // Barycenter ordering, bottom-up: each switch sits over its neighbors below.
    for layer in tiers.iter_mut().skip(1) {
        let key = |s: SwitchId| {
            let below: Vec<f64> = t
                .adjacency(s)
                .iter()
                .filter(|a| t.switches[a.peer].role.tier() < t.switches[s].role.tier())
                .map(|a| rank[a.peer])
                .collect();
            if below.is_empty() {
                f64::MAX
            } else {
                below.iter().sum::<f64>() / below.len() as f64
            }
        };
        let mut keyed: Vec<(f64, SwitchId)> = layer.iter().map(|&s| (key(s), s)).collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        *layer = keyed.into_iter().map(|(_, s)| s).collect();
        for (i, &s) in layer.iter().enumerate() {
            rank[s] = i as f64;
        }
    }
    let widest = tiers.iter().map(Vec::len).max().unwrap_or(1).max(1) as f64;
    // Wide enough for the title line even when the fabric is tiny.
    let width = (2.0 * MARGIN + widest * NODE_W + (widest - 1.0) * GAP).max(620.0);
    let mut pos = vec![(0.0, 0.0); t.switches.len()];
    for (tier, layer) in tiers.iter().enumerate() {
        let row = (usize::from(top_tier) - tier) as f64;
        let span = layer.len() as f64 * NODE_W + (layer.len().saturating_sub(1)) as f64 * GAP;
        let x0 = (width - span) / 2.0 + NODE_W / 2.0;
        for (i, &s) in layer.iter().enumerate() {
            pos[s] = (x0 + i as f64 * (NODE_W + GAP), MARGIN + 50.0 + row * LAYER_GAP);
        }
    }
    (pos, width, usize::from(top_tier))
}

/// Where [`svg`] draws each switch of the detailed picture, for other
/// drawings of the fabric (the controller's page) that must look the same.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Centre of each switch box, by switch index.
    pub switches: Vec<(f64, f64)>,
    /// The canvas.
    pub width: f64,
    pub height: f64,
    /// The row of hosts (or of each leaf's folded host box).
    pub hosts_y: f64,
    /// Size of a switch box.
    pub node: (f64, f64),
}

/// The detailed picture's layout: tiers top-down, each ordered by barycenter.
pub fn switch_layout(t: &Topology) -> Layout {
    let (switches, width, top_tier) = layout(t);
    let hosts_y = MARGIN + 50.0 + (top_tier as f64 + 1.0) * LAYER_GAP * 0.75;
    Layout { switches, width, height: hosts_y + 40.0, hosts_y, node: (NODE_W, NODE_H) }
}

/// Renders the fabric as a standalone SVG document.
pub fn svg(t: &Topology, opts: &RenderOptions) -> String {
    if !opts.detail && overview::wanted(t) {
        return overview::svg(t, opts);
    }
    let Layout { switches: pos, width, height, hosts_y, .. } = switch_layout(t);
    let labels = t.links.len() <= MAX_LABELED_LINKS;
    let fold_hosts = t.hosts.len() > MAX_DRAWN_HOSTS;
    let mut o = String::new();
    let _ = write!(
        o,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="Helvetica, Arial, sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="{MARGIN}" y="28" font-size="18" font-weight="bold">{}</text>
<text x="{MARGIN}" y="48" font-size="12" fill="#555">{} leaves, {} spines, {} super-spines, {} hosts, {} links{}</text>
"##,
        esc(&t.name),
        t.count_role(Role::Leaf),
        t.count_role(Role::Spine),
        t.count_role(Role::SuperSpine),
        t.hosts.len(),
        t.links.len(),
        if labels { "; numbers at link ends are ports" } else { "; port labels omitted at this size" }
    );
    o.push_str("<g stroke-width=\"1.2\">\n");
    for (i, l) in t.links.iter().enumerate() {
        let (pa, pb) = (pos[l.a.switch], pos[l.b.switch]);
        // From the bottom edge of the upper node to the top edge of the lower one.
        let (up, low, up_port, low_port) =
            if pa.1 < pb.1 { (pa, pb, l.a.port, l.b.port) } else { (pb, pa, l.b.port, l.a.port) };
        let (x1, y1, x2, y2) = (up.0, up.1 + NODE_H / 2.0, low.0, low.1 - NODE_H / 2.0);
        let failed = opts.failed_links.contains(&i);
        let style =
            if failed { r##"stroke="#d62728" stroke-dasharray="6 4""## } else { r##"stroke="#8a94a6""## };
        let _ = writeln!(
            o,
            r#"<line x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" {style}><title>{} - {} ({})</title></line>"#,
            esc(&t.endpoint_name(l.a)),
            esc(&t.endpoint_name(l.b)),
            l.bandwidth
        );
        if labels {
            for (port, t_) in [(up_port, 0.13), (low_port, 0.87)] {
                let lx = x1 + (x2 - x1) * t_;
                let ly = y1 + (y2 - y1) * t_;
                let _ = writeln!(
                    o,
                    r##"<text x="{lx:.1}" y="{ly:.1}" font-size="9" fill="#333" text-anchor="middle" dominant-baseline="middle" paint-order="stroke" stroke="white" stroke-width="3">{port}</text>"##
                );
            }
        }
    }
    o.push_str("</g>\n");
    hosts(&mut o, t, &pos, hosts_y, fold_hosts, labels);
    for (i, s) in t.switches.iter().enumerate() {
        let (x, y) = pos[i];
        let (fill, stroke) = color(s.role);
        let _ = writeln!(
            o,
            r#"<g><title>{} ({}), device {}, {}</title><rect x="{:.1}" y="{:.1}" width="{NODE_W}" height="{NODE_H}" rx="6" fill="{fill}" stroke="{stroke}" stroke-width="1.5"/><text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" dominant-baseline="middle">{}</text></g>"#,
            esc(&s.name),
            s.role,
            s.device_id,
            esc(&s.p4rt),
            x - NODE_W / 2.0,
            y - NODE_H / 2.0,
            y,
            esc(&s.name)
        );
    }
    o.push_str("</svg>\n");
    o
}

fn hosts(o: &mut String, t: &Topology, pos: &[(f64, f64)], y: f64, fold: bool, labels: bool) {
    for (leaf, &(lx, ly)) in pos.iter().enumerate() {
        let hs = t.hosts_of(leaf);
        if hs.is_empty() {
            continue;
        }
        if fold {
            let _ = writeln!(
                o,
                r##"<line x1="{lx:.1}" y1="{:.1}" x2="{lx:.1}" y2="{:.1}" stroke="#b0b7c3"/><rect x="{:.1}" y="{:.1}" width="{NODE_W}" height="22" rx="4" fill="#f5f5f5" stroke="#999"/><text x="{lx:.1}" y="{:.1}" font-size="10" text-anchor="middle" dominant-baseline="middle">{} hosts</text>"##,
                ly + NODE_H / 2.0,
                y - 11.0,
                lx - NODE_W / 2.0,
                y - 11.0,
                y,
                hs.len()
            );
            continue;
        }
        let w = NODE_W / hs.len() as f64;
        for (k, &h) in hs.iter().enumerate() {
            let host = &t.hosts[h];
            let hx = lx - NODE_W / 2.0 + w * (k as f64 + 0.5);
            let _ = writeln!(
                o,
                r##"<g><title>{} {} {} via {}:{}</title><line x1="{hx:.1}" y1="{:.1}" x2="{hx:.1}" y2="{:.1}" stroke="#b0b7c3"/><circle cx="{hx:.1}" cy="{y:.1}" r="6" fill="#fff4d6" stroke="#b7791f"/><text x="{hx:.1}" y="{:.1}" font-size="9" text-anchor="middle">{}</text></g>"##,
                esc(&host.name),
                host.ip,
                host.mac,
                esc(&t.switches[leaf].name),
                host.port,
                ly + NODE_H / 2.0,
                y - 6.0,
                y + 18.0,
                if labels { format!("{} ({})", esc(&host.name), host.port) } else { esc(&host.name) }
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{self, Common};
    use crate::units::Bandwidth;

    #[test]
    fn picture_has_every_switch_link_and_port() {
        let t = gen::leaf_spine(&Common::new("two by two", Bandwidth::gbps(100)), 2, 2, 2, 1).unwrap();
        let svg = svg(&t, &RenderOptions::default());
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<rect x=").count(), 4, "one box per switch");
        assert_eq!(svg.matches("<line").count(), 4 + 4, "four links, four host drops");
        assert_eq!(svg.matches("<circle").count(), 4);
        assert!(svg.contains("<title>leaf1:3 - spine1:1 (100Gbps)</title>"));
        // Spines are drawn above leaves.
        let y_of = |name: &str| {
            let at = svg.find(&format!(">{name}</text>")).unwrap();
            let tag = svg[..at].rfind("<text").unwrap();
            let y = &svg[tag..at];
            let y = &y[y.find("y=\"").unwrap() + 3..];
            y[..y.find('"').unwrap()].parse::<f64>().unwrap()
        };
        assert!(y_of("spine1") < y_of("leaf1"));
    }

    #[test]
    fn large_fabrics_fold_hosts_and_drop_labels() {
        let t = gen::leaf_spine(&Common::new("big", Bandwidth::gbps(400)), 64, 16, 8, 1).unwrap();
        let svg = svg(&t, &RenderOptions { detail: true, ..RenderOptions::default() });
        assert!(svg.contains("port labels omitted"));
        assert_eq!(svg.matches(">8 hosts<").count(), 64);
        assert!(!svg.contains("<circle"));
    }

    #[test]
    fn names_are_escaped() {
        let mut t = gen::leaf_spine(&Common::new("a<b & \"c\"", Bandwidth::gbps(100)), 1, 1, 1, 1).unwrap();
        t.name = "a<b & \"c\"".into();
        let svg = svg(&t, &RenderOptions::default());
        assert!(svg.contains("a&lt;b &amp; &quot;c&quot;"));
    }
}
