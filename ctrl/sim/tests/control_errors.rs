//! Bad `control:`, `events:` and `chunk` settings get errors that say where.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use metaroce_sim::scenario;

const JOB: &str = "jobs: [{pattern: all-to-all, hosts: all, size: 1MiB}]";

/// The problems of `yaml` with one job added.
fn problems(yaml: &str) -> String {
    common::problems(&format!("{yaml}\n{JOB}"))
}

#[test]
fn control_settings_are_checked_where_they_are() {
    let r = problems("control: {queue_high: 8pkt, queue_low: 16pkt}");
    assert!(r.contains("bad.yaml:1:") && r.contains("control:") && r.contains("below queue_high"), "{r}");
    let r = problems("control: {write_latncy: 1ms}");
    assert!(r.contains("unknown field \"write_latncy\"; did you mean \"write_latency\"?"), "{r}");
    let r = problems("control: {decision_time: soon}");
    assert!(r.contains("control.decision_time"), "{r}");
    let r = problems("control: {poll_interval: 0us}");
    assert!(r.contains("control.poll_interval") && r.contains("above zero"), "{r}");
    let r = problems("control: {policy: {hold_up: 5ms, hold_down: 1ms}}");
    assert!(r.contains("control.policy") && r.contains("hold_down_ns"), "{r}");
    let r = problems("control: {policy: {derate_step: 150%}}");
    assert!(r.contains("control.policy.derate_step"), "{r}");
    let r = problems("control: {policy: {max_share_growth: 0.9}}");
    assert!(r.contains("control.policy.max_share_growth"), "{r}");
    let r = problems("control: {policy: {max_share_growth: 1.0}}");
    assert!(r.contains("max_share_growth_permille"), "1.0 lets nothing move: {r}");
    let r = problems("control: {te: {confine_incasts: sometimes}}");
    assert!(r.contains("control.te.confine_incasts") && r.contains("expected true or false"), "{r}");
    let r = problems("control: {te: {rearrange_jobs: 1}}");
    assert!(r.contains("control.te.rearrange_jobs") && r.contains("expected true or false"), "{r}");
}

#[test]
fn link_events_name_fabric_links_inside_the_run() {
    let r = problems("events: [{at: 1ms, link_down: \"leaf1:1\"}]");
    assert!(r.contains("events[0].link_down") && r.contains("leads to a host"), "{r}");
    let r = problems("events: [{at: 1ms, link_down: \"leef1:3\"}]");
    assert!(r.contains("unknown switch \"leef1\"; did you mean \"leaf1\"?"), "{r}");
    let r = problems("events: [{link_down: \"leaf1:3\"}]");
    assert!(r.contains("events[0]") && r.contains("needs \"at\""), "{r}");
    let r = problems("events: [{at: 1ms}]");
    assert!(r.contains("needs link_down or link_up"), "{r}");
    let r = problems("events: [{at: 1ms, link_down: \"leaf1:3\", link_up: \"leaf1:3\"}]");
    assert!(r.contains("either link_down or link_up"), "{r}");
    let r = problems("limits: {time: 1ms}\nevents: [{at: 2ms, link_down: \"leaf1:3\"}]");
    assert!(r.contains("events:") && r.contains("past the time limit"), "{r}");
}

#[test]
fn a_good_control_section_is_what_the_run_gets() {
    let topo = leaf_spine(2, 2, 2, 100);
    let sc = scenario(
        &topo,
        &format!(
            "control: {{digest_latency: 20us, write_latency: 1ms, queue_high: 100KiB, queue_low: 10KiB, \
             policy: {{hold_up: 300us, derate_step: 25%}}, te: {{confine_incasts: false}}}}\n\
             events: [{{at: 2ms, link_up: \"leaf1:3\"}}, {{at: 1ms, link_down: \"leaf1:3\"}}]\n{JOB}"
        ),
    );
    let c = &sc.control;
    assert_eq!(
        (c.digest_latency_ps, c.decision_ps, c.write_latency_ps),
        (20_000_000, 100_000_000, 1_000_000_000)
    );
    assert_eq!((c.queue_high_bytes, c.queue_low_bytes), (100 << 10, 10 << 10));
    assert_eq!((c.policy.hold_up_ns, c.policy.derate_step_permille), (300_000, 250));
    assert!(!c.te.confine_incasts);
    let ev: Vec<(u64, bool)> = sc.events.iter().map(|e| (e.at_ps, e.up)).collect();
    assert_eq!(ev, vec![(1_000_000_000, false), (2_000_000_000, true)], "sorted by time");
    assert!(sc.net.reliable, "links that fail need a reliable transport");
    let plain = scenario(&topo, JOB);
    assert!(!plain.net.reliable && plain.events.is_empty());
    assert!(plain.control.te.confine_incasts, "incasts are confined by default");
}

#[test]
fn chunks_split_messages_but_not_rings() {
    let topo = leaf_spine(2, 2, 2, 100);
    let r = match scenario::load_str(
        "jobs: [{pattern: ring-allreduce, hosts: all, size: 1MiB, chunk: 64KiB}]",
        "bad.yaml",
        &topo,
    ) {
        Err(e) => e.report(),
        Ok(_) => panic!("accepted"),
    };
    assert!(r.contains("jobs[0]") && r.contains("chunked by its steps"), "{r}");
    let sc = scenario(
        &topo,
        "jobs: [{pattern: incast, hosts: [h1-1, h1-2], target: h2-1, size: 1MiB, chunk: 300KiB}]",
    );
    let run = run(&topo, &sc, metaroce_sim::RoutingMode::Ecmp);
    assert_eq!(run.summary.fct.count, 2 * 4, "1 MiB in 300 KiB chunks is 4 messages per sender");
    let whole = scenario(&topo, "jobs: [{pattern: incast, hosts: [h1-1, h1-2], target: h2-1, size: 1MiB}]");
    let one = completion(&run, 0);
    let w = completion(&common::run(&topo, &whole, metaroce_sim::RoutingMode::Ecmp), 0);
    // Each sender posts its next chunk when the ACK of the last one
    // reaches it: a chunk boundary costs a round trip (a few µs here),
    // three of them well under 15% of the run.
    assert!(one > w && one < w * 1.15, "chunks add a round trip per chunk: {one:.1} vs {w:.1} µs");
}
