//! The markdown report: one column per routing mode, so the effect of
//! routing reads across a row.

use std::fmt::Write as _;

use crate::report::ModeRun;
use crate::scenario::config::{Clamp, Scenario};

fn row(out: &mut String, name: &str, runs: &[ModeRun], cell: impl Fn(&ModeRun) -> String) {
    let _ = write!(out, "| {name} |");
    for r in runs {
        let _ = write!(out, " {} |", cell(r));
    }
    out.push('\n');
}

/// Pauses, paused time and drops of each priority, when jobs use several.
fn priorities(out: &mut String, runs: &[ModeRun]) {
    for (i, p) in runs[0].summary.pfc.by_priority.iter().enumerate() {
        let kind = if p.lossless { "lossless" } else { "lossy" };
        let name = format!("priority {} ({kind}): pauses / paused µs / drops", p.priority);
        row(out, &name, runs, |r| {
            let f = r.summary.pfc.by_priority[i];
            format!("{} / {:.1} / {}", f.pauses, f.paused_time_us, f.drops)
        });
    }
}

fn header(out: &mut String, first: &str, runs: &[ModeRun]) {
    let _ = write!(out, "| {first} |");
    for r in runs {
        let _ = write!(out, " {} |", r.summary.mode);
    }
    out.push_str("\n|---|");
    for _ in runs {
        out.push_str("---:|");
    }
    out.push('\n');
}

fn f2(v: f64) -> String {
    format!("{v:.2}")
}

/// "812.3 (1.42×)", or "unfinished".
fn completion(c: Option<f64>, slowdown: Option<f64>) -> String {
    match (c, slowdown) {
        (Some(c), Some(s)) => format!("{c:.1} ({s:.2}×)"),
        (Some(c), None) => format!("{c:.1}"),
        _ => "unfinished".to_string(),
    }
}

/// Completion, over the ideal, and over max(ideal, floor) when known.
fn completion_floor(c: Option<f64>, slowdown: Option<f64>, vs_floor: Option<f64>) -> String {
    match (c, slowdown, vs_floor) {
        (Some(c), Some(s), Some(f)) => format!("{c:.1} ({s:.2}×; {f:.2}× of max(ideal, floor))"),
        _ => completion(c, slowdown),
    }
}

/// ", floor X µs" when the run computed the job's floor.
fn floor_label(f: Option<f64>) -> String {
    f.map_or(String::new(), |f| format!(", floor {f:.1} µs"))
}

/// Each iteration of each job that runs several: completion and slowdown.
fn iterations(out: &mut String, runs: &[ModeRun]) {
    let s = &runs[0].summary;
    if s.jobs.iter().all(|j| j.iterations.len() <= 1) {
        return;
    }
    out.push_str(
        "\n## Iterations: completion time (µs), over the ideal bound, congestion tree, PFC pauses\n\n",
    );
    out.push_str(
        "Each iteration starts when every rank has finished the previous one, plus the job's compute time. \
         The tree is the largest congestion tree (links / switches, any job's traffic) that stood while the \
         iteration ran; the pauses are the PFC pauses (any job's traffic) that began meanwhile.\n\n",
    );
    header(out, "job, iteration", runs);
    for (j, job) in s.jobs.iter().enumerate().filter(|(_, j)| j.iterations.len() > 1) {
        for k in 0..job.iterations.len() {
            let it = &job.iterations[k];
            let name =
                format!("{} #{} (ideal {:.1} µs{})", job.name, k + 1, it.ideal_us, floor_label(it.floor_us));
            row(out, &name, runs, |r| {
                r.summary.jobs[j].iterations.get(k).map_or("-".into(), |i| {
                    let t = i.largest_tree;
                    format!(
                        "{}, tree {} / {}, {} pauses",
                        completion_floor(i.completion_us, i.slowdown, i.vs_floor),
                        t.links,
                        t.switches,
                        i.pfc_pauses
                    )
                })
            });
        }
    }
}

/// "1.5 MiB", "812 KiB", "0 B".
fn bytes(b: u64) -> String {
    match b {
        0..1024 => format!("{b} B"),
        1024..1_048_576 => format!("{:.0} KiB", b as f64 / 1024.0),
        _ => format!("{:.1} MiB", b as f64 / 1_048_576.0),
    }
}

pub(crate) fn render(sc: &Scenario, runs: &[ModeRun]) -> String {
    let mut out = String::new();
    let Some(first) = runs.first() else { return out };
    let s = &first.summary;
    let _ = writeln!(out, "# Simulation report: {}\n", sc.name);
    if let Some(d) = &sc.description {
        let _ = writeln!(out, "{}\n", d.trim());
    }
    let _ = writeln!(
        out,
        "Topology `{}`, seed {}, MTU {} B, {}, ECN {}, DCQCN {}, NICs {}.\n",
        s.topology,
        s.seed,
        sc.net.mtu,
        pfc_text(&sc.net),
        if sc.net.ecn.is_some() { "on" } else { "off" },
        match &sc.net.dcqcn {
            None => "off".to_owned(),
            Some(d) if d.clamp == Clamp::Always => "on".to_owned(),
            Some(d) => format!("on (target clamped {})", d.clamp.as_str()),
        },
        ordering_text(sc.net.ordering),
    );
    for r in runs {
        if let Some(stop) = r.summary.stopped {
            let _ = writeln!(
                out,
                "**Warning:** mode {} stopped before the end, since {stop}, with {} messages unfinished.\n",
                r.summary.mode, r.summary.unfinished_messages
            );
        }
    }
    out.push_str("## Collective completion time (µs) vs the ideal bound\n\n");
    if s.jobs.iter().any(|j| j.iterations.len() > 1) {
        out.push_str(
            "A job of several iterations: from its start to the end of its last iteration, against the ideal \
             collective times the iterations plus the compute phases.\n\n",
        );
    }
    header(&mut out, "job", runs);
    for (j, job) in s.jobs.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {} ({}, {} ranks): ideal {:.1} µs, set by {}{} | {}",
            job.name,
            job.pattern,
            job.ranks,
            job.ideal_us,
            job.ideal_bottleneck,
            floor_label(job.floor_us),
            runs.iter()
                .map(|r| {
                    let x = &r.summary.jobs[j];
                    format!("{} |", completion_floor(x.completion_us, x.slowdown, x.vs_floor))
                })
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    iterations(&mut out, runs);
    crate::report::timeline::markdown(&mut out, runs);
    slowdowns(&mut out, runs);
    out.push_str("\n## Flows, PFC, ECN, reordering\n\n");
    header(&mut out, "metric", runs);
    row(&mut out, "FCT p50 (µs)", runs, |r| format!("{:.1}", r.summary.fct.p50_us));
    row(&mut out, "FCT p99 (µs)", runs, |r| format!("{:.1}", r.summary.fct.p99_us));
    row(&mut out, "messages finished", runs, |r| r.summary.fct.count.to_string());
    row(&mut out, "PFC pauses", runs, |r| r.summary.pfc.pauses.to_string());
    row(&mut out, "links ever paused", runs, |r| r.summary.pfc.paused_links.to_string());
    row(&mut out, "paused link-time (µs)", runs, |r| format!("{:.1}", r.summary.pfc.paused_time_us));
    row(&mut out, "largest congestion tree (links / switches / hosts)", runs, |r| {
        let t = r.summary.pfc.largest_tree;
        format!("{} / {} / {}", t.links, t.switches, t.hosts)
    });
    if s.pfc.by_priority.len() > 1 {
        priorities(&mut out, runs);
    }
    row(&mut out, "ECN marks", runs, |r| r.summary.ecn_marks.to_string());
    row(&mut out, "CNPs", runs, |r| r.summary.cnps.to_string());
    row(&mut out, "drops", runs, |r| r.summary.drops.to_string());
    row(&mut out, "out-of-order arrivals", runs, |r| r.summary.out_of_order.packets.to_string());
    if runs.iter().any(|r| r.summary.out_of_order.packets > 0) {
        row(&mut out, "… by cause", runs, |r| {
            let c: Vec<String> = r
                .summary
                .out_of_order
                .by_cause
                .iter()
                .filter(|(_, &v)| v > 0)
                .map(|(k, v)| format!("{v} {k}"))
                .collect();
            if c.is_empty() {
                "-".into()
            } else {
                c.join(", ")
            }
        });
    }
    row(&mut out, "NAKs (go-back-N)", runs, |r| r.summary.out_of_order.naks.to_string());
    row(&mut out, "retransmitted packets", runs, |r| r.summary.retransmits.to_string());
    row(&mut out, "retransmitted bytes", runs, |r| bytes(r.summary.out_of_order.retransmitted_bytes));
    if !sc.events.is_empty() {
        row(&mut out, "lost when a link failed", runs, |r| r.summary.lost_on_failure.to_string());
        row(&mut out, "routed into a dead link", runs, |r| r.summary.blackholed.to_string());
        row(&mut out, "ACKs/NAKs lost on a dead link", runs, |r| r.summary.acks_lost.to_string());
    }
    if runs.iter().any(|r| r.summary.misdelivered > 0) {
        row(&mut out, "delivered to the wrong host", runs, |r| r.summary.misdelivered.to_string());
    }
    row(&mut out, "events", runs, |r| r.summary.events.to_string());
    control(&mut out, sc, runs);
    out.push_str("\n## Link utilization per tier: imbalance max/mean (mean utilization)\n\n");
    header(&mut out, "tier", runs);
    for (t, tier) in s.utilization.iter().enumerate() {
        row(&mut out, &format!("{} ({} links)", tier.tier, tier.links), runs, |r| {
            r.summary
                .utilization
                .get(t)
                .map_or(String::new(), |u| format!("{} ({:.0}%)", f2(u.imbalance), u.mean * 100.0))
        });
    }
    out.push_str("\n## Queue depth seen by arriving packets (KiB): p50 / p99 / p99.9 / max\n\n");
    header(&mut out, "tier", runs);
    let tiers: Vec<String> =
        runs.iter().flat_map(|r| r.summary.queues.iter().map(|q| q.tier.clone())).collect();
    let mut seen = Vec::new();
    for tier in tiers {
        if seen.contains(&tier) {
            continue;
        }
        row(&mut out, &tier, runs, |r| {
            r.summary.queues.iter().find(|q| q.tier == tier).map_or("-".into(), |q| {
                format!("{:.0} / {:.0} / {:.0} / {:.0}", q.p50_kib, q.p99_kib, q.p999_kib, q.max_kib)
            })
        });
        seen.push(tier);
    }
    out
}

/// FCT slowdown by flow size of the Poisson jobs, p50 / p99 per mode.
fn slowdowns(out: &mut String, runs: &[ModeRun]) {
    let Some(first) = &runs[0].summary.fct_slowdown else { return };
    out.push_str(
        "\n## FCT slowdown by flow size (Poisson flows): p50 / p99\n\n\
         A flow's completion time over its time alone on the idle fabric.\n\n",
    );
    header(out, "flow size (flows)", runs);
    let q = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    let rows = std::iter::once(&first.all).chain(&first.by_size);
    for (i, b) in rows.enumerate() {
        row(out, &format!("{} ({})", b.label, b.flows), runs, |r| {
            let Some(s) = &r.summary.fct_slowdown else { return "-".into() };
            let b = if i == 0 { &s.all } else { &s.by_size[i - 1] };
            format!("{} / {}", q(b.p50), q(b.p99))
        });
    }
    if runs.iter().any(|r| r.summary.fct_slowdown.as_ref().is_some_and(|s| s.unfinished > 0)) {
        row(out, "unfinished flows", runs, |r| {
            r.summary.fct_slowdown.as_ref().map_or("-".into(), |s| s.unfinished.to_string())
        });
    }
}

fn dist(d: &Option<crate::control::Dist>) -> String {
    d.as_ref().map_or_else(
        || "-".to_string(),
        |d| format!("{:.0} / {:.0} / {:.0} ({})", d.min_us, d.p50_us, d.max_us, d.count),
    )
}

/// The control plane's figures: reroutes and reaction times.
fn control(out: &mut String, sc: &Scenario, runs: &[ModeRun]) {
    if runs.iter().all(|r| r.summary.control.is_none()) {
        return;
    }
    let c = &sc.control;
    let us = |ps: u64| ps as f64 / 1e6;
    let _ = writeln!(
        out,
        "\n## Control plane\n\nController in the loop (metaroce): digest {:.0} µs, decision {:.0} µs, \
         write {:.0} µs; queue thresholds {} / {} B; policy hold-up {:.0} µs, step interval {:.0} µs, \
         hold-down {:.0} µs. Baselines: routing converges {:.0} µs after a failure.\n",
        us(c.digest_latency_ps),
        us(c.decision_ps),
        us(c.write_latency_ps),
        c.queue_high_bytes,
        c.queue_low_bytes,
        c.policy.hold_up_ns as f64 / 1e3,
        c.policy.step_interval_ns as f64 / 1e3,
        c.policy.hold_down_ns as f64 / 1e3,
        us(c.convergence_ps),
    );
    header(out, "metric (times in µs: min / p50 / max (count))", runs);
    let get = |r: &ModeRun| r.summary.control.clone().unwrap_or_default();
    row(out, "control", runs, |r| r.summary.control.as_ref().map_or("-".into(), |c| c.kind.clone()));
    row(out, "threshold crossings", runs, |r| get(r).crossings.to_string());
    row(out, "decisions", runs, |r| get(r).decisions.to_string());
    row(out, "reroutes (group writes)", runs, |r| get(r).group_writes.to_string());
    row(out, "crossing → new weights in place", runs, |r| dist(&get(r).reaction));
    row(out, "crossing → first new flowlet on a raised member", runs, |r| dist(&get(r).moved));
    row(out, "link failure → routes around it in place", runs, |r| dist(&get(r).failover));
    if runs.iter().any(|r| get(r).placement.is_some()) {
        let place = |r: &ModeRun| get(r).placement.unwrap_or_default();
        row(out, "large-flow reports", runs, |r| place(r).large_flow_reports.to_string());
        row(out, "flows placed (observed + announced)", runs, |r| place(r).flows.to_string());
        row(out, "planner moves (by reason)", runs, |r| {
            let m = place(r).moves;
            if m.is_empty() {
                return "-".into();
            }
            m.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ")
        });
        row(out, "flows not moved, counted where seen", runs, |r| place(r).stayed.to_string());
        row(out, "steer entries written", runs, |r| place(r).steer_writes.to_string());
        row(out, "flowlets started on a steer entry", runs, |r| r.summary.steered_flowlets.to_string());
        row(out, "steer write → first packet on it", runs, |r| dist(&r.summary.moves.landed));
        row(out, "packets forwarded before a write landed (min / p50 / max)", runs, |r| {
            r.summary.moves.packets_before_landing.map_or("-".into(), |[a, b, c]| format!("{a} / {b} / {c}"))
        });
        row(out, "steer writes never taken", runs, |r| r.summary.moves.never_landed.to_string());
        if runs.iter().any(|r| r.summary.moves.drain.is_some()) {
            row(out, "drained packets / slot collisions", runs, |r| {
                r.summary.moves.drain.map_or("-".into(), |d| format!("{} / {}", d.fresh, d.collisions))
            });
        }
        row(out, "large flow reported → first flowlet on its planned path", runs, |r| {
            dist(&place(r).placed)
        });
        row(out, "planned highest link utilisation (its lower bound)", runs, |r| {
            let p = place(r);
            match (p.planned_max_utilisation, p.planned_lower_bound) {
                (Some(u), Some(b)) => format!("{:.0}% ({:.0}%)", u * 100.0, b * 100.0),
                (Some(u), None) => format!("{:.0}%", u * 100.0),
                _ => "-".into(),
            }
        });
    }
    if runs.iter().any(|r| get(r).refused > 0) {
        row(out, "writes refused (bugs)", runs, |r| get(r).refused.to_string());
    }
}

fn ordering_text(o: crate::scenario::config::Ordering) -> &'static str {
    match o {
        crate::scenario::config::Ordering::GoBackN => "go-back-N (an out-of-order PSN is NAKed and resent)",
        crate::scenario::config::Ordering::OutOfOrder => "out-of-order (packets placed as they arrive)",
    }
}

/// "lossless (PFC on priority 3)" or "lossy (go-back-N)".
fn pfc_text(net: &crate::scenario::config::NetConfig) -> String {
    if !net.lossless {
        return "lossy (go-back-N)".into();
    }
    let list: Vec<String> = net.lossless_priorities.iter().map(u8::to_string).collect();
    let what = if list.len() == 1 { "priority" } else { "priorities" };
    format!("lossless (PFC on {what} {})", list.join(", "))
}
