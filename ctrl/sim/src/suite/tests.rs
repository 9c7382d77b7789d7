use super::*;

const FAMILY: &str = "\
name: t
seeds: 1-2
modes: [ecmp, metaroce]
shapes:
  - {shape: fat-tree, k: [4, 6]}
  - {shape: clos3, pods: 2-3, leaves: 2, spines: 2, supers: 1-2, hosts_per_leaf: 2}
  - {shape: leaf-spine, leaves: 2-4, spines: 2, parallel: 1-2, hosts_per_leaf: 2-4}
  - {shape: leaf-spine, leaves: 4, spines: 2, oversubscription: 2}
patterns: [all-to-all, ring-allreduce, permutation, incast-bystander, two-jobs]
ranks: 4-12
announce: [false, true]
size: 64KiB-1MiB
chunk: [none, 64KiB]
iterations: 2-3
compute: 50us-200us
network: {mtu: 4096B, ecn: {kmin: 32pkt, kmax: 128pkt, pmax: 20%}}
limits: {time: 50ms}
";

fn problems(text: &str) -> Vec<String> {
    match load_str(text, "f.yaml") {
        Ok(_) => Vec::new(),
        Err(e) => e.report().lines().map(str::to_owned).collect(),
    }
}

#[test]
fn a_family_reads_and_every_case_is_a_scenario_that_loads() {
    let f = load_str(FAMILY, "f.yaml").unwrap();
    assert_eq!(f.seeds, vec![1, 2]);
    assert_eq!(f.shapes.len(), 4);
    let mut patterns = std::collections::BTreeSet::new();
    let mut shapes = std::collections::BTreeSet::new();
    for i in 1..=60 {
        let c = f.case(i).unwrap();
        let sc = crate::scenario::load_str(&c.scenario_yaml, "case", &c.topology)
            .unwrap_or_else(|e| panic!("case {i} does not load: {}\n{}", e.report(), c.scenario_yaml));
        assert_eq!(sc.jobs.len(), c.jobs.len(), "case {i}");
        for j in &c.jobs {
            assert!(j.ranks >= 2 && j.ranks <= c.topology.hosts.len(), "case {i}: {j:?}");
            assert!((64 << 10..=4 << 20).contains(&j.size), "case {i}: {j:?}");
            assert!((2..=3).contains(&j.iterations));
            assert!((50_000_000..=200_000_000).contains(&j.compute_ps));
        }
        patterns.insert(c.pattern.clone());
        shapes.insert(c.shape.split(' ').next().unwrap().to_owned());
        // The same case draws the same scenario.
        assert_eq!(f.case(i).unwrap().scenario_yaml, c.scenario_yaml);
    }
    assert_eq!(patterns.len(), 5, "every pattern drawn in 60 cases: {patterns:?}");
    assert_eq!(shapes.len(), 3, "every shape drawn: {shapes:?}");
}

#[test]
fn an_oversubscribed_leaf_spine_has_the_asked_ratio() {
    let text = FAMILY.replace(
        "shapes:\n  - {shape: fat-tree, k: [4, 6]}\n  - {shape: clos3, pods: 2-3, leaves: 2, spines: 2, supers: 1-2, hosts_per_leaf: 2}\n  - {shape: leaf-spine, leaves: 2-4, spines: 2, parallel: 1-2, hosts_per_leaf: 2-4}\n",
        "shapes:\n",
    );
    let f = load_str(&text, "f.yaml").unwrap();
    let c = f.case(1).unwrap();
    assert!(c.shape.contains("2.0:1 oversubscribed"), "{}", c.shape);
    assert_eq!(c.topology.hosts.len(), 16);
}

#[test]
fn bad_families_are_reported_at_their_line_and_column() {
    let p = problems(&FAMILY.replace("shape: fat-tree", "shape: fat-trie"));
    assert!(p.iter().any(|l| l.starts_with("f.yaml:5:") && l.contains("did you mean \"fat-tree\"")), "{p:?}");
    let p = problems(&FAMILY.replace("ring-allreduce,", "ring,"));
    assert!(p.iter().any(|l| l.starts_with("f.yaml:9:") && l.contains("unknown name \"ring\"")), "{p:?}");
    let p = problems(&FAMILY.replace("ranks: 4-12", "ranks: 12-4"));
    assert!(p.iter().any(|l| l.starts_with("f.yaml:10:") && l.contains("backwards")), "{p:?}");
    let p = problems(&FAMILY.replace("size: 64KiB-1MiB", "size: 64KiB-lots"));
    assert!(p.iter().any(|l| l.starts_with("f.yaml:12:")), "{p:?}");
    let p = problems(&FAMILY.replace("k: [4, 6]", "k: [4, 5]"));
    assert!(p.iter().any(|l| l.contains("must be even")), "{p:?}");
    let p = problems(&FAMILY.replace("hosts_per_leaf: 2}", "hosts_per_leaf: 2, parallel: 2}"));
    assert!(
        p.iter().any(|l| l.starts_with("f.yaml:6:") && l.contains("shape clos3 has no \"parallel\"")),
        "{p:?}"
    );
    let p = problems(&FAMILY.replace("iterations: 2-3", "iteration: 2-3"));
    assert!(
        p.iter().any(|l| l.starts_with("f.yaml:14:") && l.contains("did you mean \"iterations\"")),
        "{p:?}"
    );
    let p = problems(&FAMILY.replace("chunk: [none, 64KiB]", "chunk: []"));
    assert!(p.iter().any(|l| l.contains("chunk")), "{p:?}");
    let p = problems("name: x\n");
    assert!(p.iter().any(|l| l.contains("missing field \"shapes\"")), "{p:?}");
    assert!(p.iter().any(|l| l.contains("missing field \"patterns\"")), "{p:?}");
    let p = problems("name: [\n");
    assert_eq!(p.len(), 1, "{p:?}");
}

#[test]
fn a_problem_in_a_copied_block_points_into_the_family() {
    let f = load_str(FAMILY, "f.yaml").unwrap();
    assert_eq!(f.position_of("network.ecn.kmin").map(|p| p.line), Some(16));
    assert_eq!(f.position_of("jobs[0]"), None);
}

#[test]
fn a_shape_the_generators_refuse_is_a_typed_error_naming_the_case() {
    let text = "name: big\nshapes:\n  - {shape: leaf-spine, leaves: 2, spines: 64, parallel: 8, hosts_per_leaf: 64}\npatterns: [permutation]\n";
    let f = load_str(text, "f.yaml").unwrap();
    let e = f.case(3).unwrap_err();
    assert_eq!(e.case, 3);
    assert!(e.to_string().starts_with("case 3: leaf-spine 2x64"), "{e}");
    assert!(e.to_string().contains("ports"), "{e}");
}
