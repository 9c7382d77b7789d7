//! The markdown report: one column per routing mode, so the effect of
//! routing reads across a row.

use std::fmt::Write as _;

use crate::config::Scenario;
use crate::report::ModeRun;

fn row(out: &mut String, name: &str, runs: &[ModeRun], cell: impl Fn(&ModeRun) -> String) {
    let _ = write!(out, "| {name} |");
    for r in runs {
        let _ = write!(out, " {} |", cell(r));
    }
    out.push('\n');
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

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "unfinished".to_string(), |v| format!("{v:.digits$}"))
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
        "Topology `{}`, seed {}, MTU {} B, {}, ECN {}, DCQCN {}.\n",
        s.topology,
        s.seed,
        sc.net.mtu,
        if sc.net.lossless { "lossless (PFC)" } else { "lossy (go-back-N)" },
        if sc.net.ecn.is_some() { "on" } else { "off" },
        if sc.net.dcqcn.is_some() { "on" } else { "off" },
    );
    for r in runs {
        if let Some(stop) = r.summary.stopped {
            let _ = writeln!(
                out,
                "**Warning:** mode {} stopped early ({stop:?}) with {} messages unfinished.\n",
                r.summary.mode, r.summary.unfinished_messages
            );
        }
    }
    out.push_str("## Collective completion time (µs) vs the ideal bound\n\n");
    header(&mut out, "job", runs);
    for (j, job) in s.jobs.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {} ({}, {} ranks): ideal {:.1} µs, set by {} | {}",
            job.name,
            job.pattern,
            job.ranks,
            job.ideal_us,
            job.ideal_bottleneck,
            runs.iter()
                .map(|r| {
                    let x = &r.summary.jobs[j];
                    format!("{} ({}×) |", opt(x.completion_us, 1), opt(x.slowdown, 2))
                })
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    out.push_str("\n## Flows, PFC, ECN\n\n");
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
    row(&mut out, "ECN marks", runs, |r| r.summary.ecn_marks.to_string());
    row(&mut out, "CNPs", runs, |r| r.summary.cnps.to_string());
    row(&mut out, "drops", runs, |r| r.summary.drops.to_string());
    row(&mut out, "retransmitted packets", runs, |r| r.summary.retransmits.to_string());
    row(&mut out, "events", runs, |r| r.summary.events.to_string());
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
