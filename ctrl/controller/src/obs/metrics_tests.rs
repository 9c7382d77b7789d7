//! Tests of the metrics registry, with a line-by-line OpenMetrics checker.

use std::collections::BTreeMap;

use super::*;

/// Parses `name{k="v",...} value` into its parts; panics naming the line.
fn parse_sample(line: &str) -> (String, BTreeMap<String, String>, f64) {
    let (head, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line}"));
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().unwrap_or_else(|_| panic!("bad value in: {line}")),
    };
    let (name, labels) = match head.split_once('{') {
        None => (head.to_string(), BTreeMap::new()),
        Some((name, rest)) => {
            let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("unclosed labels: {line}"));
            let mut labels = BTreeMap::new();
            for pair in body.split("\",") {
                let (k, v) = pair.split_once("=\"").unwrap_or_else(|| panic!("bad label in: {line}"));
                assert!(k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "label name: {line}");
                labels.insert(k.to_string(), v.trim_end_matches('"').to_string());
            }
            (name.to_string(), labels)
        }
    };
    (name, labels, value)
}

/// Checks the exposition format: each family starts with `# TYPE`, has a
/// `# HELP`, its samples carry the family's name and suffixes, histogram
/// buckets are cumulative and end in +Inf, and `# EOF` is the last line.
pub(crate) fn check_openmetrics(text: &str) {
    assert!(text.ends_with("# EOF\n"), "must end with # EOF");
    let lines: Vec<&str> = text.lines().collect();
    let mut families: BTreeMap<String, (String, bool)> = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    let mut last_bucket: Option<f64> = None;
    for (i, line) in lines.iter().enumerate() {
        if *line == "# EOF" {
            assert_eq!(i, lines.len() - 1, "# EOF must be last");
            continue;
        }
        if let Some(meta) = line.strip_prefix("# ") {
            let mut parts = meta.splitn(3, ' ');
            let (what, name, rest) = (parts.next(), parts.next(), parts.next());
            let (Some(what), Some(name), Some(rest)) = (what, name, rest) else { panic!("bad meta: {line}") };
            assert!(name.starts_with("metaroce_"), "prefix: {line}");
            match what {
                "TYPE" => {
                    assert!(["counter", "gauge", "histogram"].contains(&rest), "type: {line}");
                    assert!(families.insert(name.into(), (rest.into(), false)).is_none(), "dup: {line}");
                    current = Some((name.into(), rest.into()));
                }
                "HELP" => {
                    families.get_mut(name).unwrap_or_else(|| panic!("HELP before TYPE: {line}")).1 = true
                }
                "UNIT" => assert!(name.ends_with(rest), "unit suffix: {line}"),
                _ => panic!("unknown meta: {line}"),
            }
            continue;
        }
        let (name, labels, value) = parse_sample(line);
        let (fam, kind) = current.clone().unwrap_or_else(|| panic!("sample before TYPE: {line}"));
        let suffix = name.strip_prefix(fam.as_str()).unwrap_or_else(|| panic!("foreign sample: {line}"));
        match (kind.as_str(), suffix) {
            ("counter", "_total") | ("gauge", "") | ("histogram", "_sum") => {}
            ("histogram", "_bucket") => {
                let prev = last_bucket.unwrap_or(0.0);
                assert!(value >= prev, "buckets must be cumulative: {line}");
                let le = labels.get("le").unwrap_or_else(|| panic!("bucket without le: {line}"));
                last_bucket = if le == "+Inf" { None } else { Some(value) };
            }
            ("histogram", "_count") => assert!(last_bucket.is_none(), "+Inf bucket missing: {line}"),
            _ => panic!("suffix {suffix:?} not allowed for a {kind}: {line}"),
        }
    }
    for (name, (_, help)) in families {
        assert!(help, "{name} has no HELP");
    }
}

fn full() -> Metrics {
    let m = Metrics::new();
    m.set_queue_depth("leaf1", 3, 42);
    m.add_ecn_marks("leaf1", 3, 7);
    m.digest_received("leaf1");
    m.digests_lost("leaf1", 2);
    m.register_poll("leaf1", "audit");
    m.int_report_received("leaf2");
    m.int_reports_lost("leaf2", 1);
    m.reroute("congestion");
    m.set_group_weight("leaf1", 1, 3, 2);
    m.set_group_weight("leaf1", 1, 4, 1);
    m.set_group_weight("leaf2", 1, 3, 1);
    m.set_path_share("leaf1", 3, 0.25);
    m.observe_decision(0.0003);
    m.observe_reaction(0.0008);
    m.set_host_rate("h1", "mlx5_0", "pfc_tx", 12.5);
    m.set_host_rate("h1", "mlx5_0", "bogus", 1.0);
    m.set_host_up("h1", true);
    m.observe_write("leaf1", 0.004);
    m.set_switch_connected("leaf1", true);
    m.set_switch_primary("leaf1", false);
    m.set_mode(Mode::Act);
    m.set_unreachable_pairs(2);
    m.flow_moves("rebalance", 3);
    m.flow_moves("bogus", 1);
    m.set_placement(4, 6, 0.75, 0.5);
    m.observe_placement(0.0002);
    m.set_jobs(1);
    m.large_flow_digest("leaf1");
    m.set_placement_failures(3, 1);
    m.write_failed("leaf2");
    m.set_refused_entries("leaf2", 904);
    m.session_failed("leaf1");
    m.set_switch_foreign("spine1", true);
    m.init_hosts(["h2"]);
    m
}

#[test]
fn obs_metrics_exposition_is_valid_openmetrics() {
    let text = full().encode();
    check_openmetrics(&text);
    for want in [
        "metaroce_port_queue_depth{switch=\"leaf1\",port=\"3\"} 42.0",
        "metaroce_ecn_marks_total{switch=\"leaf1\",port=\"3\"} 7",
        "metaroce_digests_total{switch=\"leaf1\"} 1",
        "metaroce_digests_lost_total{switch=\"leaf1\"} 2",
        "metaroce_int_reports_total{switch=\"leaf2\"} 1",
        "metaroce_int_reports_lost_total{switch=\"leaf2\"} 1",
        "metaroce_reroutes_total{reason=\"congestion\"} 1",
        "metaroce_reroutes_total{reason=\"link_down\"} 0",
        "metaroce_group_weight{switch=\"leaf1\",group=\"1\",port=\"4\"} 1.0",
        "metaroce_path_share_ratio{switch=\"leaf1\",port=\"3\"} 0.25",
        "metaroce_decision_duration_seconds_bucket{le=\"0.0005\"} 1",
        "metaroce_decision_duration_seconds_count 1",
        "metaroce_reaction_duration_seconds_bucket{le=\"0.001\"} 1",
        "metaroce_host_congestion_rate{host=\"h1\",device=\"mlx5_0\",signal=\"pfc_tx\"} 12.5",
        "metaroce_host_exporter_up{host=\"h1\"} 1.0",
        "metaroce_switch_write_duration_seconds_bucket{switch=\"leaf1\",le=\"0.005\"} 1",
        "metaroce_switch_connected{switch=\"leaf1\"} 1.0",
        "metaroce_switch_primary{switch=\"leaf1\"} 0.0",
        "metaroce_mode{mode=\"act\"} 1.0",
        "metaroce_mode{mode=\"observe\"} 0.0",
        "metaroce_unreachable_leaf_pairs 2.0",
        "metaroce_flow_moves_total{reason=\"rebalance\"} 3",
        "metaroce_flow_moves_total{reason=\"new\"} 0",
        "metaroce_steered_flows 4.0",
        "metaroce_placed_flows 6.0",
        "metaroce_planned_max_utilisation_ratio 0.75",
        "metaroce_observed_max_utilisation_ratio 0.5",
        "metaroce_placement_duration_seconds_bucket{le=\"0.00025\"} 1",
        "metaroce_jobs 1.0",
        "metaroce_large_flow_digests_total{switch=\"leaf1\"} 1",
        "metaroce_unplaced_flows 3.0",
        "metaroce_refused_steer_entries 1.0",
        "metaroce_switch_write_failures_total{switch=\"leaf2\"} 1",
        "metaroce_switch_refused_entries{switch=\"leaf2\"} 904.0",
        "metaroce_switch_session_failures_total{switch=\"leaf1\"} 1",
        "metaroce_switch_foreign{switch=\"spine1\"} 1.0",
        "metaroce_host_exporter_up{host=\"h2\"} 0.0",
    ] {
        assert!(text.lines().any(|l| l == want), "missing {want} in\n{text}");
    }
}

#[test]
fn obs_every_family_is_exported_once() {
    let text = full().encode();
    let names = Metrics::sample_names();
    for name in &names {
        assert!(text.lines().any(|l| l.starts_with(name.as_str())), "{name} has no sample");
    }
    let types = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
    assert_eq!(types, SPECS.len());
}

/// What a scrape shows before anything happened: the families an alert
/// rule reads have samples (0) from the first scrape.
#[test]
fn obs_alerted_families_have_samples_from_the_start() {
    let m = Metrics::new();
    m.init_switches(["leaf1"]);
    m.init_hosts(["h1"]);
    let text = m.encode();
    for want in [
        "metaroce_unplaced_flows 0.0",
        "metaroce_refused_steer_entries 0.0",
        "metaroce_switch_write_failures_total{switch=\"leaf1\"} 0",
        "metaroce_switch_connected{switch=\"leaf1\"} 0.0",
        "metaroce_switch_primary{switch=\"leaf1\"} 0.0",
        "metaroce_switch_foreign{switch=\"leaf1\"} 0.0",
        "metaroce_unreachable_leaf_pairs 0.0",
        "metaroce_host_exporter_up{host=\"h1\"} 0.0",
        "metaroce_ha_role{role=\"alone\"} 1.0",
        "metaroce_mode{mode=\"observe\"} 1.0",
    ] {
        assert!(text.lines().any(|l| l == want), "missing {want} in\n{text}");
    }
    m.write_failed("leaf1");
    assert!(m.encode().contains("metaroce_switch_write_failures_total{switch=\"leaf1\"} 1"));
}

#[test]
fn obs_clear_groups_forgets_only_that_switch() {
    let m = full();
    m.clear_groups("leaf1");
    let text = m.encode();
    assert!(!text.contains("metaroce_group_weight{switch=\"leaf1\""));
    assert!(text.contains("metaroce_group_weight{switch=\"leaf2\",group=\"1\",port=\"3\"} 1.0"));
    m.clear_path_shares("leaf1");
    assert!(!m.encode().contains("metaroce_path_share_ratio{"));
}

#[test]
fn obs_unknown_reroute_reason_counts_as_other() {
    let m = Metrics::new();
    m.reroute("because I said so");
    let text = m.encode();
    assert!(text.contains("metaroce_reroutes_total{reason=\"other\"} 1"));
    assert!(!text.contains("because"));
}

#[test]
fn obs_metrics_clones_share_one_registry() {
    let m = Metrics::new();
    let c = m.clone();
    let t = std::thread::spawn(move || (0..100).for_each(|_| c.digest_received("s")));
    (0..100).for_each(|_| m.digest_received("s"));
    assert!(t.join().is_ok());
    assert!(m.encode().contains("metaroce_digests_total{switch=\"s\"} 200"));
}

/// Every `metaroce_*` name in `text`.
fn metric_names_in(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("metaroce_") {
        let tail = &rest[i..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        names.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

/// Collects every `expr` and `query` string in the dashboard.
fn queries(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr" | "definition" | "query", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => queries(v, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| queries(v, out)),
        _ => {}
    }
}

#[test]
fn obs_grafana_dashboard_matches_the_registry() {
    let text = include_str!("../../grafana/metaroce.json");
    let dash: serde_json::Value = serde_json::from_str(text).expect("dashboard is valid JSON");
    assert!(dash["title"].is_string() && dash["uid"].is_string());
    let vars = dash["templating"]["list"].as_array().expect("templating.list");
    assert!(vars
        .iter()
        .any(|v| v["type"] == "datasource" && v["query"] == "prometheus" && v["name"] == "datasource"));
    let panels = dash["panels"].as_array().expect("panels");
    for p in panels.iter().filter(|p| p["type"] != "row") {
        assert_eq!(p["datasource"]["uid"], "${datasource}", "panel {} has a fixed datasource", p["title"]);
        assert!(p["targets"].as_array().is_some_and(|t| !t.is_empty()), "panel {} has no query", p["title"]);
    }
    let mut found = Vec::new();
    queries(&dash, &mut found);
    let referenced: Vec<String> = found.iter().flat_map(|q| metric_names_in(q)).collect();
    let exported = Metrics::sample_names();
    for name in &referenced {
        assert!(exported.contains(name), "dashboard queries {name}, which /metrics does not export");
    }
    for spec in &SPECS {
        let shown = spec.sample_names().iter().any(|s| referenced.contains(s));
        assert!(shown, "no dashboard panel shows {}", spec.name);
    }
}

/// The alert rules (`ctrl/controller/prometheus/`, unit-tested with
/// promtool in `make test`) read only families this registry exports, and
/// each rule tells what it means and what to do.
#[test]
fn obs_alert_rules_match_the_registry() {
    let text = include_str!("../../prometheus/metaroce-rules.yml");
    let exported = Metrics::sample_names();
    let named = metric_names_in(text);
    for name in &named {
        assert!(exported.contains(name), "the alert rules read {name}, which /metrics does not export");
    }
    for family in ["metaroce_switch_primary", "metaroce_unreachable_leaf_pairs", "metaroce_host_exporter_up"]
    {
        assert!(named.iter().any(|n| n == family), "no rule reads {family}");
    }
    let rules: Vec<&str> = text.split("- alert: ").skip(1).collect();
    assert!(rules.len() >= 10, "{} rules", rules.len());
    for rule in rules {
        let name = rule.lines().next().unwrap_or("");
        for field in ["expr:", "severity:", "summary:", "description:", "runbook: >-"] {
            assert!(rule.contains(field), "rule {name} has no {field}");
        }
        let runbook = rule.split("runbook: >-").nth(1).unwrap_or("");
        assert!(
            runbook.contains("Means:") && runbook.contains("Do:"),
            "rule {name}: the runbook says what it means and what to do"
        );
    }
}
