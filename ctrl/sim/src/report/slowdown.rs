//! FCT slowdown by flow size, the figure load-balancing studies compare
//! on data-centre workloads: each flow of a `pattern: poisson` job, its
//! completion time over the time it would take alone on an idle fabric
//! ([`crate::report::ideal::flow_ideal_ps`]), as p50 and p99 per size
//! bucket and over all flows.

use metaroce_topo::{Routing, Topology};
use serde::Serialize;

use crate::engine::flows::Workload;
use crate::report::ideal::flow_ideal_ps;
use crate::scenario::config::NetConfig;

/// Upper ends of the size buckets (bytes, inclusive); the last bucket has none.
pub const BUCKETS: [u64; 4] = [10_000, 100_000, 1_000_000, 10_000_000];

/// The slowdowns of the flows in one size range.
#[derive(Debug, Clone, Serialize)]
pub struct SlowdownBucket {
    pub label: String,
    /// Sizes above this...
    pub above_bytes: u64,
    /// ...and up to this (none: no upper end).
    pub up_to_bytes: Option<u64>,
    /// Finished flows in the range.
    pub flows: usize,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

/// FCT slowdown of the run's Poisson flows.
#[derive(Debug, Clone, Serialize)]
pub struct FctSlowdown {
    pub all: SlowdownBucket,
    pub by_size: Vec<SlowdownBucket>,
    /// Poisson flows that had not finished when the run ended.
    pub unfinished: usize,
}

fn label(above: u64, up_to: Option<u64>) -> String {
    let h = |b: u64| match b {
        b if b >= 1_000_000 => format!("{} MB", b / 1_000_000),
        b if b >= 1_000 => format!("{} KB", b / 1_000),
        b => format!("{b} B"),
    };
    match (above, up_to) {
        (0, Some(u)) => format!("≤ {}", h(u)),
        (a, Some(u)) => format!("{}–{}", h(a), h(u)),
        (a, None) => format!("> {}", h(a)),
    }
}

/// Nearest-rank quantile of sorted values.
fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[i])
}

fn bucket(above: u64, up_to: Option<u64>, mut v: Vec<f64>) -> SlowdownBucket {
    v.sort_by(f64::total_cmp);
    SlowdownBucket {
        label: label(above, up_to),
        above_bytes: above,
        up_to_bytes: up_to,
        flows: v.len(),
        p50: quantile(&v, 0.5),
        p99: quantile(&v, 0.99),
    }
}

/// The slowdowns of every Poisson flow, by size; None without Poisson jobs.
pub(crate) fn compute(
    topo: &Topology,
    routing: &Routing,
    net: &NetConfig,
    w: &Workload,
) -> Option<FctSlowdown> {
    let jobs: Vec<_> = w.jobs.iter().filter(|j| j.pattern == "poisson").collect();
    if jobs.is_empty() {
        return None;
    }
    let mut per: Vec<Vec<f64>> = vec![Vec::new(); BUCKETS.len() + 1];
    let mut unfinished = 0;
    for job in jobs {
        for f in &w.flows[job.flows.clone()] {
            if f.done_ps == u64::MAX {
                unfinished += 1;
                continue;
            }
            let qp = &w.qps[f.qp as usize];
            let ideal = flow_ideal_ps(topo, routing, net, qp.src as usize, qp.dst as usize, f.bytes);
            let s = (f.done_ps - f.start_ps) as f64 / ideal.max(1) as f64;
            let b = BUCKETS.iter().position(|&u| f.bytes <= u).unwrap_or(BUCKETS.len());
            per[b].push(s);
        }
    }
    let all = bucket(0, None, per.concat());
    let by_size = per
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let above = if i == 0 { 0 } else { BUCKETS[i - 1] };
            bucket(above, BUCKETS.get(i).copied(), v)
        })
        .collect();
    Some(FctSlowdown { all: SlowdownBucket { label: "all sizes".into(), ..all }, by_size, unfinished })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_quantiles() {
        assert_eq!(label(0, Some(10_000)), "≤ 10 KB");
        assert_eq!(label(100_000, Some(1_000_000)), "100 KB–1 MB");
        assert_eq!(label(10_000_000, None), "> 10 MB");
        let b = bucket(0, None, (1..=100).rev().map(f64::from).collect());
        assert_eq!((b.flows, b.p50, b.p99), (100, Some(50.0), Some(99.0)));
        assert_eq!(bucket(0, None, Vec::new()).p50, None);
    }
}
