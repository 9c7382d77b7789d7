//! Every kind of mistake an engineer can make in a topology file gets a
//! located, specific message, and all of them are reported in one run.

// Tests may panic on what they set up themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use metaroce_topo::{load_file, load_str, TopoError};

/// A valid 2x2 fabric to break in small ways; line numbers below refer to it.
const BASE: &str = r#"name: t
switches:
  - {name: leaf1, role: leaf, device_id: 1, p4rt: "127.0.0.1:50001"}
  - {name: leaf2, role: leaf, device_id: 2, p4rt: "127.0.0.1:50002"}
  - {name: spine1, role: spine, device_id: 3, p4rt: "127.0.0.1:50003"}
  - {name: spine2, role: spine, device_id: 4, p4rt: "127.0.0.1:50004"}
hosts:
  - {name: h1, ip: 10.0.1.1, mac: "02:00:00:00:01:01", leaf: leaf1, port: 1}
  - {name: h2, ip: 10.0.2.1, mac: "02:00:00:00:02:01", leaf: leaf2, port: 1}
links:
  - {a: "leaf1:3", b: "spine1:1"}
  - {a: "leaf1:4", b: "spine2:1"}
  - {a: "leaf2:3", b: "spine1:2"}
  - {a: "leaf2:4", b: "spine2:2"}
"#;

/// The diagnostics of `text`, each as `line:col: path: message`.
fn errors(text: &str) -> Vec<String> {
    match load_str(text, "t.yaml") {
        Ok(_) => Vec::new(),
        Err(TopoError::Invalid { diagnostics, .. }) => diagnostics.iter().map(ToString::to_string).collect(),
        Err(other) => vec![other.to_string()],
    }
}

fn assert_error(text: &str, expected: &[&str]) {
    let errs = errors(text);
    for e in expected {
        assert!(
            errs.iter().any(|got| got.contains(e)),
            "expected an error containing {e:?}, got:\n{}",
            errs.join("\n")
        );
    }
}

fn edit(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "test edits a line the base lacks: {from}");
    BASE.replacen(from, to, 1)
}

#[test]
fn the_base_fabric_is_valid() {
    assert_eq!(errors(BASE), Vec::<String>::new());
}

#[test]
fn unknown_keys_suggest_the_right_one() {
    let text = edit(r#"{a: "leaf1:3", b: "spine1:1"}"#, r#"{a: "leaf1:3", b: "spine1:1", bandwith: 10Gbps}"#);
    assert_error(
        &text,
        &["11:35: links[0]: unknown key \"bandwith\" in links[0]; did you mean \"bandwidth\"?"],
    );
    let text = format!("{BASE}colour: blue\n");
    assert_error(&text, &["unknown key \"colour\" in the top level; known keys: name, description"]);
}

#[test]
fn unknown_switches_are_named_with_a_suggestion() {
    let text = edit(r#"b: "spine1:2""#, r#"b: "spine9:2""#);
    assert_error(&text, &["13:23: links[2].b: unknown switch \"spine9\"; did you mean \"spine1\"?"]);
    let text = edit("leaf: leaf2", "leaf: s9");
    assert_error(&text, &["hosts[1].leaf: unknown switch \"s9\""]);
}

#[test]
fn duplicates_point_at_the_first_use() {
    let text = edit("name: spine2", "name: spine1");
    assert_error(
        &text,
        &["6:12: switches[3].name: duplicate name \"spine1\" (first used by switches[2].name, line 5)"],
    );
    let text = edit("device_id: 4", "device_id: 3");
    assert_error(&text, &["switches[3].device_id: duplicate device_id 3"]);
    let text = edit("p4rt: \"127.0.0.1:50004\"", "p4rt: \"127.0.0.1:50003\"");
    assert_error(&text, &["switches[3].p4rt: duplicate p4rt address 127.0.0.1:50003"]);
    let text = edit("ip: 10.0.2.1", "ip: 10.0.1.1");
    assert_error(&text, &["hosts[1].ip: duplicate IP address 10.0.1.1 (first used by hosts[0].ip, line 8)"]);
    let text = edit("02:00:00:00:02:01", "02:00:00:00:01:01");
    assert_error(&text, &["hosts[1].mac: duplicate MAC address 02:00:00:00:01:01"]);
    let text = edit("name: h2", "name: leaf1");
    assert_error(&text, &["hosts[1].name: duplicate name \"leaf1\" (first used by switches[0].name"]);
    let text = edit("p4rt: \"127.0.0.1:50004\"}", "p4rt: \"127.0.0.1:50004\", int_node_id: 1}");
    assert_error(
        &text,
        &["switches[3].int_node_id: duplicate int_node_id 1 (first used by switches[0].int_node_id"],
    );
}

#[test]
fn host_exporter_addresses_parse_and_are_unique() {
    let with = |a: &str, b: &str| {
        edit("leaf: leaf1, port: 1}", &format!("leaf: leaf1, port: 1, exporter: \"{a}\"}}")).replacen(
            "leaf: leaf2, port: 1}",
            &format!("leaf: leaf2, port: 1, exporter: \"{b}\"}}"),
            1,
        )
    };
    let topo = load_str(&with("127.0.0.1:9469", "127.0.0.2:9469"), "t.yaml").unwrap();
    assert_eq!(topo.hosts[0].exporter.as_deref(), Some("127.0.0.1:9469"));
    assert_eq!(load_str(BASE, "t.yaml").unwrap().hosts[0].exporter, None, "the field is optional");
    assert_error(
        &with("127.0.0.1:9469", "127.0.0.1:9469"),
        &["hosts[1].exporter: duplicate exporter address 127.0.0.1:9469 (first used by hosts[0].exporter, line 8)"],
    );
    assert_error(
        &with("127.0.0.1", "127.0.0.2:9469"),
        &["hosts[0].exporter: \"127.0.0.1\" is not an address like \"127.0.0.1:50001\""],
    );
    assert_error(&with("127.0.0.1:9469", "h2:0"), &["hosts[1].exporter: \"h2:0\" is not an address"]);
}

#[test]
fn a_port_is_used_once() {
    let text = edit(r#"{a: "leaf1:3", b: "spine1:1"}"#, r#"{a: "leaf1:1", b: "spine1:1"}"#);
    assert_error(&text, &["links[0].a: duplicate use of port leaf1:1 (first used by hosts[0].port, line 8)"]);
    let text = edit("port: 1}", "port: 255}");
    assert_error(&text, &["hosts[0].port: port 255 is the CPU port (fabric.cpu_port); use another port"]);
    let text = edit("port: 1}", "port: 600}");
    assert_error(&text, &["hosts[0].port: 600 is out of range 0..=510"]);
}

#[test]
fn hosts_attach_to_leaves() {
    let text = edit("leaf: leaf2, port: 1", "leaf: spine2, port: 9");
    assert_error(&text, &["hosts[1].leaf: spine2 is a spine; hosts attach to leaves"]);
}

#[test]
fn links_join_different_switches_and_tiers() {
    let text = edit(r#"b: "spine1:1""#, r#"b: "leaf1:7""#);
    assert_error(&text, &["links[0].b: link joins leaf1 to itself"]);
    let text = edit(r#"b: "spine1:1""#, r#"b: "leaf2:7""#);
    assert_error(
        &text,
        &["links[0]: link joins two leaves (leaf1 and leaf2); links must join different tiers"],
    );
}

#[test]
fn unreachable_hosts_are_reported() {
    // leaf2 loses both uplinks: h1 and h2 cannot reach each other.
    let text =
        BASE.replace("  - {a: \"leaf2:3\", b: \"spine1:2\"}\n  - {a: \"leaf2:4\", b: \"spine2:2\"}\n", "");
    assert_error(
        &text,
        &[
            "hosts[0]: h1 (on leaf1) cannot reach h2 (on leaf2): no valley-free path from leaf1 to leaf2",
            "hosts[1]: h2 (on leaf2) cannot reach h1 (on leaf1)",
        ],
    );
}

#[test]
fn malformed_units_say_what_to_write() {
    let text = edit(r#"{a: "leaf1:3", b: "spine1:1"}"#, r#"{a: "leaf1:3", b: "spine1:1", bandwidth: 10G}"#);
    assert_error(
        &text,
        &["links[0].bandwidth: bandwidth \"10G\" has unknown unit \"G\"; use one of Tbps, Gbps"],
    );
    let text = edit(r#"{a: "leaf1:3", b: "spine1:1"}"#, r#"{a: "leaf1:3", b: "spine1:1", delay: 5}"#);
    assert_error(&text, &["links[0].delay: duration \"5\" has no unit; write it like \"2us\""]);
    let text = edit(r#"{a: "leaf1:3", b: "spine1:1"}"#, r#"{a: "leaf1:3", b: "spine1:1", bandwidth: 0Gbps}"#);
    assert_error(&text, &["bandwidth \"0Gbps\" must be greater than zero"]);
    let text =
        edit(r#"{a: "leaf1:3", b: "spine1:1"}"#, r#"{a: "leaf1:3", b: "spine1:1", bandwidth: -10Gbps}"#);
    assert_error(&text, &["bandwidth \"-10Gbps\" must not be negative"]);
    let text = format!("{BASE}fabric: {{queue_high: 40}}\n");
    assert_error(
        &text,
        &["fabric.queue_high: queue depth \"40\" needs a unit: packets (\"48pkt\") or bytes"],
    );
}

#[test]
fn wrong_types_are_named() {
    let text = edit("device_id: 1,", "device_id: one,");
    assert_error(&text, &["switches[0].device_id: expected a whole number in 1..=4294967295, found \"one\""]);
    let text = edit("device_id: 1,", "device_id: [1],");
    assert_error(&text, &["switches[0].device_id: expected a single value, found a list"]);
    let text = BASE.replacen("switches:\n", "switches: 3\nx_switches:\n", 1);
    assert_error(&text, &["switches: expected a list, found a scalar"]);
    let text = edit("role: leaf, device_id: 1", "role: laef, device_id: 1");
    assert_eq!(errors(&text), vec!["3:25: switches[0].role: unknown role \"laef\"; did you mean \"leaf\"?"]);
    let text = format!("{BASE}fabric: {{int: yes}}\n");
    assert_error(&text, &["fabric.int: expected true or false, found \"yes\""]);
    let text = edit("ip: 10.0.1.1", "ip: 10.0.1.300");
    assert_error(&text, &["hosts[0].ip: \"10.0.1.300\" is not an IPv4 address"]);
    let text = edit("02:00:00:00:01:01", "01:00:00:00:01:01");
    assert_error(&text, &["is a multicast MAC"]);
}

#[test]
fn missing_required_keys_are_listed() {
    let text = edit("{name: leaf1, role: leaf, device_id: 1, ", "{name: leaf1, ");
    assert_error(
        &text,
        &["switches[0].role: missing required key \"role\"", "switches[0].device_id: missing required key"],
    );
    assert_error("switches: []\n", &["name: missing required key \"name\""]);
}

#[test]
fn every_problem_is_reported_in_one_run() {
    let text =
        edit("device_id: 4", "device_id: 3").replace("spine1:2", "spine9:2").replace("10.0.2.1", "10.0.1.1");
    let errs = errors(&text);
    assert!(errs.len() >= 3, "{errs:#?}");
}

#[test]
fn subnets_and_fabric_settings_are_consistent() {
    let text = edit(r#"p4rt: "127.0.0.1:50001"}"#, r#"p4rt: "127.0.0.1:50001", subnet: 10.0.9.0/24}"#);
    assert_error(&text, &["hosts[0].ip: 10.0.1.1 is outside leaf1's subnet 10.0.9.0/24"]);
    let text = edit(r#"p4rt: "127.0.0.1:50003"}"#, r#"p4rt: "127.0.0.1:50003", subnet: 10.0.9.0/24}"#);
    assert_error(&text, &["switches[2].subnet: only leaves own a subnet; this switch is a spine"]);
    let text = format!("{BASE}fabric: {{queue_high: 10pkt, queue_low: 20pkt}}\n");
    assert_error(&text, &["fabric.queue_low: queue_low (20pkt) must be below queue_high (10pkt)"]);
    let text = format!("{BASE}fabric: {{queue_high: 10pkt, queue_low: 2KiB}}\n");
    assert_error(&text, &["must use the same unit, packets or bytes"]);
}

#[test]
fn malformed_yaml_has_a_position() {
    let errs = errors("name: t\nswitches: [\n  {name: a\n");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("YAML syntax error"), "{errs:?}");
    assert_error("name: t\nname: u\n", &["2:1: duplicate key \"name\" (first used at line 1)"]);
    assert_error("", &["a topology file is a mapping with keys name, switches, hosts, links; found nothing"]);
    assert_error("- a\n- b\n", &["found a list"]);
}

#[test]
fn deeply_nested_documents_are_refused() {
    let text = format!("name: t\nswitches: {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    let errs = errors(&text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("nesting deeper") || errs[0].contains("recursion limit"), "{errs:?}");
}

#[test]
fn absurd_sizes_are_refused() {
    // A million switches, written compactly: refused by count, not by memory.
    let text = format!("name: t\nswitches: [{}]\n", vec!["{}"; 1_000_000].join(","));
    assert_error(&text, &["switches: 1000000 entries, more than the limit of 16384"]);
    let text = edit(r#"{a: "leaf1:3", b: "spine1:1"}"#, r#"{a: "leaf1:3", b: "spine1:1", buffer: 10TB}"#);
    assert_error(&text, &["links[0].buffer: size \"10TB\" has unknown unit \"TB\""]);
    let text = edit(r#"{a: "leaf1:3", b: "spine1:1"}"#, r#"{a: "leaf1:3", b: "spine1:1", buffer: 1000GiB}"#);
    assert_error(&text, &["larger than the maximum of 64GiB"]);
}

#[test]
fn huge_and_binary_files_are_refused_before_reading() {
    let dir = std::env::temp_dir().join(format!("metaroce-topo-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.yaml");
    // Sparse: takes no disk, but claims 10 GB.
    std::fs::File::create(&big).unwrap().set_len(10_000_000_000).unwrap();
    let err = load_file(&big).unwrap_err();
    assert!(matches!(err, TopoError::TooLarge { size: 10_000_000_000, .. }), "{err}");
    assert!(err.to_string().contains("more than the limit"), "{err}");
    let bin = dir.join("bin.yaml");
    std::fs::write(&bin, b"name: t\xff\xfe\n").unwrap();
    let err = load_file(&bin).unwrap_err();
    assert!(err.report().contains("not UTF-8"), "{}", err.report());
    let missing = dir.join("missing.yaml");
    let err = load_file(&missing).unwrap_err();
    assert!(matches!(err, TopoError::Io { .. }) && err.to_string().contains("missing.yaml"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shipped_topologies_are_valid() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../topologies");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            load_file(&path).unwrap_or_else(|e| panic!("{}", e.report()));
            n += 1;
        }
    }
    assert!(n >= 4, "expected the four shipped fabrics, found {n}");
}

mod never_panics {
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        /// Random edits of a valid file load or fail cleanly (the fuzz
        /// target in fuzz/ explores further with coverage guidance).
        #[test]
        fn mutated_files_load_or_fail_cleanly(
            edits in proptest::collection::vec((any::<prop::sample::Index>(), 0usize..3, any::<char>()), 1..8),
        ) {
            let mut text: Vec<char> = super::BASE.chars().collect();
            for (at, kind, c) in edits {
                let i = at.index(text.len().max(1));
                match kind {
                    0 if i < text.len() => { text.remove(i); }
                    1 => text.insert(i.min(text.len()), c),
                    _ if i < text.len() => text[i] = c,
                    _ => {}
                }
            }
            let text: String = text.into_iter().collect();
            if let Err(e) = metaroce_topo::load_str(&text, "mutated") {
                prop_assert!(!e.report().is_empty());
            }
        }

        #[test]
        fn arbitrary_text_loads_or_fails_cleanly(text in "\\PC{0,400}") {
            let _ = metaroce_topo::load_str(&text, "random");
        }
    }
}
