//! Which leaves can no longer reach each other: a failed link or switch may
//! leave some pair of leaves (and so every host pair between them) without
//! a path. The controller reports such a partition by name, and refuses an
//! operator's link-down that would cause one unless it is forced.

use metaroce_topo::{Routing, SwitchId, Topology};
use serde_json::{json, Value};

/// Ordered pairs `(from, to)` of working leaves with hosts where `from`
/// has no route toward `to`.
pub fn cut_pairs(routing: &Routing) -> Vec<(SwitchId, SwitchId)> {
    let leaves: Vec<SwitchId> =
        routing.destinations().iter().copied().filter(|&l| routing.switch_is_up(l)).collect();
    let mut out = Vec::new();
    for &a in &leaves {
        for &b in &leaves {
            if a != b && !routing.reaches(a, b) {
                out.push((a, b));
            }
        }
    }
    out
}

/// The pairs of `after` that `before` did not have (both sorted, as
/// [`cut_pairs`] returns them).
pub fn newly_cut(
    before: &[(SwitchId, SwitchId)],
    after: &[(SwitchId, SwitchId)],
) -> Vec<(SwitchId, SwitchId)> {
    after.iter().filter(|p| before.binary_search(p).is_err()).copied().collect()
}

/// At most this many pairs are spelled out in a message.
const SHOWN: usize = 8;

/// `leaf1→leaf2, leaf2→leaf1` (and how many more).
pub fn describe(topo: &Topology, pairs: &[(SwitchId, SwitchId)]) -> String {
    let name = |s: SwitchId| topo.switches.get(s).map_or("?", |x| x.name.as_str());
    let mut text: Vec<String> =
        pairs.iter().take(SHOWN).map(|&(a, b)| format!("{}→{}", name(a), name(b))).collect();
    if pairs.len() > SHOWN {
        text.push(format!("and {} more", pairs.len() - SHOWN));
    }
    text.join(", ")
}

/// `[["leaf1", "leaf2"], ...]`, every pair.
pub fn pairs_json(topo: &Topology, pairs: &[(SwitchId, SwitchId)]) -> Value {
    let name = |s: SwitchId| topo.switches.get(s).map_or("?", |x| x.name.as_str());
    Value::Array(pairs.iter().map(|&(a, b)| json!([name(a), name(b)])).collect())
}

/// "1 leaf pair", "2 leaf pairs".
pub fn count_text(n: usize) -> String {
    format!("{n} leaf {}", if n == 1 { "pair" } else { "pairs" })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const FABRIC: &str = r#"
name: reach
switches:
  - {name: leaf1, role: leaf, device_id: 1, p4rt: "127.0.0.1:1", subnet: 10.0.1.0/24}
  - {name: leaf2, role: leaf, device_id: 2, p4rt: "127.0.0.1:2", subnet: 10.0.2.0/24}
  - {name: spine1, role: spine, device_id: 3, p4rt: "127.0.0.1:3"}
  - {name: spine2, role: spine, device_id: 4, p4rt: "127.0.0.1:4"}
hosts:
  - {name: h1, ip: 10.0.1.1, mac: "02:00:00:00:01:01", leaf: leaf1, port: 1}
  - {name: h3, ip: 10.0.2.1, mac: "02:00:00:00:02:01", leaf: leaf2, port: 1}
links:
  - {a: "leaf1:3", b: "spine1:1"}
  - {a: "leaf1:4", b: "spine2:1"}
  - {a: "leaf2:3", b: "spine1:2"}
  - {a: "leaf2:4", b: "spine2:2"}
"#;

    #[test]
    fn a_second_failure_on_the_other_spine_cuts_the_leaves_apart() {
        let topo = metaroce_topo::load_str(FABRIC, "reach").unwrap();
        let mut r = Routing::compute(&topo);
        assert!(cut_pairs(&r).is_empty());
        r.fail_link(&topo, 0).unwrap(); // leaf1–spine1
        let one = cut_pairs(&r);
        assert!(one.is_empty(), "spine2 still joins them: {one:?}");
        r.fail_link(&topo, 3).unwrap(); // leaf2–spine2
        let two = cut_pairs(&r);
        assert_eq!(two, vec![(0, 1), (1, 0)]);
        assert_eq!(newly_cut(&one, &two), two);
        assert_eq!(describe(&topo, &two), "leaf1→leaf2, leaf2→leaf1");
        assert_eq!(pairs_json(&topo, &two), json!([["leaf1", "leaf2"], ["leaf2", "leaf1"]]));
        assert_eq!(count_text(2), "2 leaf pairs");
        assert_eq!(count_text(1), "1 leaf pair");
    }
}
