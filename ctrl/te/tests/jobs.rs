//! The job API's body: the shapes it accepts, every problem it reports
//! (with its field path), and the registry's ownership of flows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use metaroce_te::job::{parse_job, Job, JobError, JobLimits, JobRegistry, Pattern};
use metaroce_te::FlowKey;
use metaroce_topo::Topology;

fn parse(t: &Topology, jobs: &JobRegistry, body: &str) -> Result<Job, JobError> {
    parse_job(body, t, jobs, &JobLimits::default())
}

/// `(path, message)` of every problem.
fn problems(t: &Topology, jobs: &JobRegistry, body: &str) -> Vec<(String, String)> {
    match parse(t, jobs, body) {
        Ok(job) => panic!("accepted: {job:?}"),
        Err(e) => e.problems.into_iter().map(|p| (p.path, p.message)).collect(),
    }
}

fn has(ps: &[(String, String)], path: &str, word: &str) -> bool {
    ps.iter().any(|(p, m)| p == path && m.contains(word))
}

#[test]
fn the_issue_shapes_are_accepted() {
    let t = topology("leaf-spine-4x4.yaml");
    let jobs = JobRegistry::default();
    let a2a = parse(
        &t,
        &jobs,
        r#"{"name": "moe-7", "pattern": "all-to-all", "hosts": ["h1-1", "h2-1"], "bytes": 1048576}"#,
    )
    .unwrap();
    assert_eq!(a2a.flows.len(), 2);
    assert!(a2a.flows.iter().all(|f| matches!(f.key, FlowKey::Pair { .. }) && f.bytes == 1 << 20));
    assert_eq!(a2a.pattern, Some(Pattern::AllToAll));
    assert_eq!(a2a.period_ns, None);
    let ring = parse(
        &t,
        &jobs,
        r#"{"name": "ring-3", "flows": [{"src": "h1-1", "dst": "h2-1", "sport": 49152, "qp": 17, "bytes": 8388608}], "period_ms": 2.5}"#,
    )
    .unwrap();
    assert_eq!(ring.flows[0].key, FlowKey::flow(t.hosts[0].ip, t.hosts[4].ip, 49152, 17));
    assert_eq!(ring.period_ns, Some(2_500_000));
    let (k, d) = ring.demands().next().unwrap();
    assert_eq!(k, ring.flows[0].key);
    assert_eq!(d.offered_bps(), 8_388_608 * 8 * 1_000_000_000 / 2_500_000);
}

#[test]
fn patterns_expand_like_the_simulator() {
    let t = topology("leaf-spine-4x4.yaml");
    let jobs = JobRegistry::default();
    let body =
        |p: &str| format!(r#"{{"name": "j", "hosts": ["h1-1", "h2-1", "h3-1", "h4-1"], "bytes": 1, {p}}}"#);
    let pairs = |j: &Job| j.flows.iter().map(|f| (f.src, f.dst)).collect::<Vec<_>>();
    let (a, b, c, d) = (0, 4, 8, 12);
    let ring = parse(&t, &jobs, &body(r#""pattern": "ring-allreduce""#)).unwrap();
    assert_eq!(pairs(&ring), vec![(a, b), (b, c), (c, d), (d, a)]);
    let perm = parse(&t, &jobs, &body(r#""pattern": "permutation", "shift": 1"#)).unwrap();
    assert_eq!(pairs(&perm), vec![(a, b), (b, c), (c, d), (d, a)]);
    let half = parse(&t, &jobs, &body(r#""pattern": "permutation""#)).unwrap();
    assert_eq!(pairs(&half), vec![(a, c), (b, d), (c, a), (d, b)], "default shift: half the ranks");
    let incast = parse(&t, &jobs, &body(r#""pattern": "incast", "target": "h1-1""#)).unwrap();
    assert_eq!(pairs(&incast), vec![(b, a), (c, a), (d, a)], "the target is not a rank");
    let a2a = parse(&t, &jobs, &body(r#""pattern": "all-to-all""#)).unwrap();
    assert_eq!(a2a.flows.len(), 12);
    assert_eq!(pairs(&a2a), Pattern::AllToAll.pairs(&a2a.ranks));
}

#[test]
fn every_problem_is_reported_with_its_field() {
    let t = topology("leaf-spine-4x4.yaml");
    let jobs = JobRegistry::default();
    let ps = problems(
        &t,
        &jobs,
        r#"{"name": "", "pattern": "all-to-al", "hosts": ["h1-1", "h9-9", "h1-1", "leaf1"], "bytes": 0, "period_ms": -1, "colour": 1}"#,
    );
    assert!(has(&ps, "name", "empty"), "{ps:?}");
    assert!(has(&ps, "pattern", "did you mean \"all-to-all\""), "{ps:?}");
    assert!(has(&ps, "hosts[1]", "unknown host \"h9-9\""), "{ps:?}");
    assert!(has(&ps, "hosts[2]", "listed twice"), "{ps:?}");
    assert!(has(&ps, "hosts[3]", "is a switch"), "{ps:?}");
    assert!(has(&ps, "bytes", "zero bytes"), "{ps:?}");
    assert!(has(&ps, "period_ms", "out of range"), "{ps:?}");
    assert!(has(&ps, "colour", "unknown field"), "{ps:?}");
    let hint = problems(
        &t,
        &jobs,
        r#"{"name": "x", "pattern": "ring-allreduce", "hosts": ["h1-5", "h2-1"], "bytes": 1}"#,
    );
    assert!(has(&hint, "hosts[0]", "did you mean"), "{hint:?}");
}

#[test]
fn bad_flows_lists_are_reported_flow_by_flow() {
    let t = topology("leaf-spine-4x4.yaml");
    let jobs = JobRegistry::default();
    let ps = problems(
        &t,
        &jobs,
        r#"{"name": "f", "flows": [
            {"src": "h1-1", "dst": "h2-1", "sport": 49152, "qp": 17, "bytes": 1},
            {"src": "h1-1", "dst": "h2-1", "sport": 49152, "qp": 17, "bytes": 1},
            {"src": "h1-2", "dst": "h2-2"},
            {"src": "h1-2", "dst": "h2-2", "sport": 1, "qp": 2, "bytes": 1},
            {"src": "h1-3", "dst": "h1-3", "bytes": 1},
            {"src": "h1-4", "dst": "h2-4", "sport": 7, "bytes": 1},
            {"src": "h1-4", "dst": "h2-4", "qp": 16777216, "sport": 70000, "bytes": 1099511627777},
            "nope"
        ], "hosts": ["h1-1"]}"#,
    );
    assert!(has(&ps, "flows[1]", "duplicate flow"), "{ps:?}");
    assert!(has(&ps, "flows[2].bytes", "missing"), "{ps:?}");
    assert!(has(&ps, "flows[4]", "same host"), "{ps:?}");
    assert!(has(&ps, "flows[5].qp", "needs \"qp\""), "{ps:?}");
    assert!(has(&ps, "flows[6].qp", "out of range"), "{ps:?}");
    assert!(has(&ps, "flows[6].sport", "out of range"), "{ps:?}");
    assert!(has(&ps, "flows[6].bytes", "out of range"), "{ps:?}");
    assert!(has(&ps, "flows[7]", "a flow is an object"), "{ps:?}");
    assert!(has(&ps, "hosts", "goes with \"pattern\""), "{ps:?}");
    // A host-pair flow owns its pair: a flow on the same pair overlaps it.
    let ps = problems(
        &t,
        &jobs,
        r#"{"name": "g", "bytes": 5, "flows": [{"src": "h1-2", "dst": "h2-2"}, {"src": "h1-2", "dst": "h2-2", "sport": 1, "qp": 2}]}"#,
    );
    assert!(has(&ps, "flows[1]", "overlaps flows[0]"), "{ps:?}");
}

#[test]
fn a_sender_qp_is_taken_for_one_connection_only() {
    let t = topology("leaf-spine-4x4.yaml");
    let jobs = JobRegistry::default();
    let job = parse(
        &t,
        &jobs,
        r#"{"name": "s", "bytes": 1, "flows": [
            {"src": "h1-1", "dst": "h2-1", "sport": 49152, "qp": 17, "src_qp": 33},
            {"src": "h1-1", "dst": "h2-1", "sport": 49153, "qp": 18},
            {"src": "h1-2", "dst": "h2-1", "sport": 49152, "qp": 17, "src_qp": 33}
        ]}"#,
    )
    .unwrap();
    let qps: Vec<Option<u32>> = job.flows.iter().map(|f| f.src_qp).collect();
    assert_eq!(qps, [Some(33), None, Some(33)], "one sender QP per sender host and receiver");
    let ps = problems(
        &t,
        &jobs,
        r#"{"name": "s", "bytes": 1, "flows": [
            {"src": "h1-1", "dst": "h2-1", "sport": 49152, "qp": 17, "src_qp": 33},
            {"src": "h1-1", "dst": "h2-1", "sport": 49153, "qp": 18, "src_qp": 33},
            {"src": "h1-2", "dst": "h2-2", "src_qp": 5},
            {"src": "h1-3", "dst": "h2-3", "sport": 1, "qp": 2, "src_qp": 16777216},
            {"src": "h1-4", "dst": "h2-4", "sport": 1, "qp": 2, "src_qp": "x"}
        ]}"#,
    );
    assert!(has(&ps, "flows[1].src_qp", "same src_qp 33"), "{ps:?}");
    assert!(has(&ps, "flows[2].src_qp", "needs \"sport\" and \"qp\""), "{ps:?}");
    assert!(has(&ps, "flows[3].src_qp", "out of range"), "{ps:?}");
    assert!(has(&ps, "flows[4].src_qp", ""), "{ps:?}");
}

#[test]
fn shape_and_size_limits() {
    let t = topology("leaf-spine-4x4.yaml");
    let jobs = JobRegistry::default();
    for (body, path, word) in [
        ("[]", "", "JSON object"),
        ("{", "", "not JSON"),
        (r#"{"name": "x", "bytes": 1}"#, "", "missing \"pattern\""),
        (r#"{"name": "x", "pattern": "all-to-all", "hosts": ["h1-1"], "bytes": 1}"#, "hosts", "at least 2"),
        (
            r#"{"name": "x", "pattern": "incast", "hosts": ["h1-1", "h2-1"], "bytes": 1}"#,
            "target",
            "needs a \"target\"",
        ),
        (
            r#"{"name": "x", "pattern": "all-to-all", "hosts": ["h1-1", "h2-1"], "bytes": 1, "shift": 1}"#,
            "shift",
            "permutation only",
        ),
        (
            r#"{"name": "x", "pattern": "permutation", "hosts": ["h1-1", "h2-1"], "bytes": 1, "shift": 2}"#,
            "shift",
            "every rank to itself",
        ),
        (
            r#"{"name": "a b", "pattern": "all-to-all", "hosts": ["h1-1", "h2-1"], "bytes": 1}"#,
            "name",
            "letters",
        ),
        (
            r#"{"name": "x", "pattern": "all-to-all", "hosts": ["h1-1", "h2-1"], "bytes": 1.5}"#,
            "bytes",
            "whole number",
        ),
        (r#"{"name": "x", "pattern": "all-to-all", "hosts": "all", "bytes": 1}"#, "hosts", "a list"),
        (
            r#"{"name": "x", "pattern": 3, "hosts": ["h1-1", "h2-1"], "bytes": 1}"#,
            "pattern",
            "unknown pattern 3",
        ),
        (r#"{"name": "x", "flows": [], "bytes": 1}"#, "flows", "at least one"),
    ] {
        let ps = problems(&t, &jobs, body);
        assert!(has(&ps, path, word), "{body}: {ps:?}");
    }
    let small = JobLimits { max_flows: 5, ..Default::default() };
    let e = parse_job(
        r#"{"name": "x", "pattern": "all-to-all", "hosts": ["h1-1", "h2-1", "h3-1"], "bytes": 1}"#,
        &t,
        &jobs,
        &small,
    )
    .unwrap_err();
    assert!(e.problems[0].message.contains("6 flows is more than the limit of 5"), "{e}");
    assert!(e.to_string().contains("hosts: 6 flows"), "{e}");
}

#[test]
fn the_registry_owns_flows_and_refuses_overlaps_from_other_jobs() {
    let t = topology("leaf-spine-4x4.yaml");
    let mut jobs = JobRegistry::default();
    let a =
        parse(&t, &jobs, r#"{"name": "a", "pattern": "all-to-all", "hosts": ["h1-1", "h2-1"], "bytes": 1}"#)
            .unwrap();
    jobs.register(a).unwrap();
    assert_eq!((jobs.len(), jobs.flow_count()), (1, 2));
    let pair = FlowKey::pair(t.hosts[0].ip, t.hosts[4].ip);
    assert_eq!(jobs.owner(&pair), Some("a"));
    assert_eq!(
        jobs.owner(&FlowKey::flow(pair.src(), pair.dst(), 1, 1)),
        Some("a"),
        "the pair covers its flows"
    );
    // Another job on the same host pair, with or without a QP: refused.
    let ps = problems(
        &t,
        &jobs,
        r#"{"name": "b", "flows": [{"src": "h1-1", "dst": "h2-1", "sport": 1, "qp": 1, "bytes": 1}]}"#,
    );
    assert!(has(&ps, "flows[0]", "already owned by job \"a\""), "{ps:?}");
    let ps = problems(
        &t,
        &jobs,
        r#"{"name": "a", "pattern": "ring-allreduce", "hosts": ["h3-1", "h4-1"], "bytes": 1}"#,
    );
    assert!(has(&ps, "name", "already registered"), "{ps:?}");
    // Two jobs may share a host pair with distinct QPs.
    let body = |n: &str, qp: u32| {
        format!(
            r#"{{"name": "{n}", "flows": [{{"src": "h3-1", "dst": "h4-1", "sport": 5, "qp": {qp}, "bytes": 1}}]}}"#
        )
    };
    let c = parse(&t, &jobs, &body("c", 1)).unwrap();
    jobs.register(c).unwrap();
    let d = parse(&t, &jobs, &body("d", 2)).unwrap();
    jobs.register(d).unwrap();
    // ... but then a pair flow there overlaps both.
    let ps = problems(&t, &jobs, r#"{"name": "e", "flows": [{"src": "h3-1", "dst": "h4-1", "bytes": 1}]}"#);
    assert!(has(&ps, "flows[0]", "already owned"), "{ps:?}");
    // Registering a job validated before a conflicting one was added fails too.
    let late = parse(&t, &jobs, &body("late", 9)).unwrap();
    let mut other = jobs.clone();
    other.register(parse(&t, &other, r#"{"name": "x", "flows": [{"src": "h3-1", "dst": "h4-1", "sport": 5, "qp": 9, "bytes": 1}]}"#).unwrap()).unwrap();
    assert!(other.register(late).is_err());
    // Removal releases the flows.
    let removed = jobs.remove("a").unwrap();
    assert_eq!(removed.flows.len(), 2);
    assert_eq!(jobs.owner(&pair), None);
    assert!(jobs.remove("a").is_none());
    assert_eq!(jobs.list().map(|j| j.name.as_str()).collect::<Vec<_>>(), vec!["c", "d"]);
    let again =
        parse(&t, &jobs, r#"{"name": "b", "flows": [{"src": "h1-1", "dst": "h2-1", "bytes": 1}]}"#).unwrap();
    jobs.register(again).unwrap();
}

#[test]
fn a_1024_rank_all_to_all_fits_the_limits() {
    let t = leaf_spine(64, 16, 16, 1);
    let hosts: Vec<String> = t.hosts.iter().map(|h| format!("\"{}\"", h.name)).collect();
    let body = format!(
        r#"{{"name": "big", "pattern": "all-to-all", "hosts": [{}], "bytes": 1048576}}"#,
        hosts.join(",")
    );
    let job = parse(&t, &JobRegistry::default(), &body).unwrap();
    assert_eq!(job.flows.len(), 1024 * 1023);
}

#[test]
fn timing_is_accepted_and_every_timing_problem_is_listed() {
    let t = topology("leaf-spine-4x4.yaml");
    let jobs = JobRegistry::default();
    let ok = parse(
        &t,
        &jobs,
        r#"{"name": "p", "pattern": "permutation", "hosts": ["h1-1", "h2-1"], "bytes": 2097152, "compute_ms": 0.4, "offset": "fixed", "start_ms": 1}"#,
    )
    .unwrap();
    assert!(ok.periodic());
    assert_eq!(ok.timing.compute_ns, Some(400_000));
    assert_eq!(ok.timing.offset, metaroce_te::job::Offset::Fixed);
    assert_eq!(ok.timing.start_ns, 1_000_000);
    // 8 MiB a host at 100 Gb/s take 0.67 ms: a 0.1 ms period cannot hold
    // them; a negative compute time, an unknown offset, and an offset on
    // a job without a period are all named at once.
    let ps = problems(
        &t,
        &jobs,
        r#"{"name": "p", "pattern": "permutation", "hosts": ["h1-1", "h2-1"], "bytes": 8388608, "period_ms": 0.1, "compute_ms": -1, "offset": "later"}"#,
    );
    assert!(has(&ps, "period_ms", "shorter than the job's own communication"), "{ps:?}");
    assert!(has(&ps, "compute_ms", "cannot be negative"), "{ps:?}");
    assert!(has(&ps, "offset", "unknown offset"), "{ps:?}");
    let ps = problems(
        &t,
        &jobs,
        r#"{"name": "p", "pattern": "permutation", "hosts": ["h1-1", "h2-1"], "bytes": 1024, "offset": "fixed", "compute_ms": 1e12}"#,
    );
    assert!(has(&ps, "compute_ms", "out of range"), "{ps:?}");
    let ps = problems(
        &t,
        &jobs,
        r#"{"name": "p", "pattern": "permutation", "hosts": ["h1-1", "h2-1"], "bytes": 1024, "offset": "fixed"}"#,
    );
    assert!(has(&ps, "offset", "goes with a periodic job"), "{ps:?}");
}
