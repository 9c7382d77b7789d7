//! `GET /api/v1/layout`: where the page draws each switch, link and host,
//! from the same layout as `metaroce topo render` (tiers top-down, ordered
//! by barycenter), plus the overview boxes (pods or blocks of switches) for
//! fabrics too wide to draw switch by switch. Built once per fabric.

use metaroce_topo::render::{self, overview};
use metaroce_topo::Topology;
use serde_json::{json, Value};

/// The layout document.
pub fn build(t: &Topology) -> Value {
    let p = render::switch_layout(t);
    let switches: Vec<Value> = t
        .switches
        .iter()
        .zip(&p.switches)
        .map(|(s, (x, y))| json!({ "name": s.name, "role": s.role.as_str(), "x": round(*x), "y": round(*y) }))
        .collect();
    let links: Vec<Value> = t
        .links
        .iter()
        .map(|l| json!([l.a.switch, l.a.port, l.b.switch, l.b.port, l.bandwidth.bps()]))
        .collect();
    let hosts: Vec<Value> =
        t.hosts.iter().map(|h| json!([h.name, h.ip.to_string(), h.leaf, h.port])).collect();
    let overview = overview::wanted(t).then(|| {
        let (boxes, width, height, (w, h)) = overview::boxes(t);
        let boxes: Vec<Value> = boxes
            .into_iter()
            .map(|b| {
                json!({ "title": b.title, "detail": b.detail, "role": b.role.as_str(),
                        "x": round(b.x), "y": round(b.y), "members": b.members })
            })
            .collect();
        json!({ "width": round(width), "height": round(height), "box": [w, h], "boxes": boxes })
    });
    json!({
        "name": t.name,
        "width": round(p.width),
        "height": round(p.height),
        "hosts_y": round(p.hosts_y),
        "node": [p.node.0, p.node.1],
        "switches": switches,
        "links": links,
        "hosts": hosts,
        "overview": overview,
    })
}

fn round(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}
