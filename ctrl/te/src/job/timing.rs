//! A job's timing in its body: `period_ms` (the iteration, compute and
//! communication), or `compute_ms` (the compute phase; the communication
//! follows from the bytes and the placement), `offset` (`shiftable`, the
//! default: the scheduler may delay the job's start as the controller
//! recommends; `fixed`: it may not) and `start_ms` (when its first
//! iteration starts, after registration; the phase the plan starts from).

use std::collections::HashMap;

use metaroce_topo::spec::did_you_mean;
use metaroce_topo::{HostId, Topology};
use serde::Serialize;
use serde_json::{Map, Value};

use super::parse::Ctx;
use super::JobFlow;

/// Whether the scheduler may shift a job's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Offset {
    #[default]
    Shiftable,
    Fixed,
}

impl Offset {
    pub fn as_str(self) -> &'static str {
        match self {
            Offset::Shiftable => "shiftable",
            Offset::Fixed => "fixed",
        }
    }
}

/// A job's timing as validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Timing {
    pub compute_ns: Option<u64>,
    pub offset: Offset,
    pub start_ns: u64,
}

const OFFSETS: &[&str] = &["shiftable", "fixed"];

/// The least time a job's iteration spends communicating: its busiest
/// host's bytes in or out at that host's NIC rate (no fabric in the way).
pub fn comm_floor_ns(topo: &Topology, flows: &[JobFlow]) -> (u64, Option<HostId>) {
    let mut bytes: HashMap<(HostId, bool), u64> = HashMap::new();
    for f in flows {
        *bytes.entry((f.src, true)).or_default() += f.bytes;
        *bytes.entry((f.dst, false)).or_default() += f.bytes;
    }
    let mut worst = (0u64, None);
    let mut keys: Vec<_> = bytes.into_iter().collect();
    keys.sort_unstable();
    for ((h, _), b) in keys {
        let bps = topo.hosts.get(h).map_or(0, |x| x.nic_rate.bps()).max(1);
        let ns = u64::try_from(u128::from(b) * 8 * 1_000_000_000 / u128::from(bps)).unwrap_or(u64::MAX);
        if ns > worst.0 {
            worst = (ns, Some(h));
        }
    }
    worst
}

impl Ctx<'_> {
    /// A number of milliseconds in `0..=max` (0 allowed when `zero`).
    fn millis(&mut self, v: &Value, path: &str, what: &str, zero: bool) -> Option<u64> {
        let max = self.limits.max_period_ms as f64;
        match v.as_f64() {
            Some(ms) if ms < 0.0 => {
                self.err(path, format!("{what} cannot be negative, got {ms} ms"));
                None
            }
            Some(ms) if (ms == 0.0 && !zero) || ms > max => {
                let low = if zero { "[0" } else { "(0" };
                self.err(path, format!("{what} {ms} ms is out of range {low}, {max}]"));
                None
            }
            Some(ms) => Some((ms * 1e6).round() as u64),
            None => {
                self.err(path, format!("{what} must be a number of milliseconds, got {v}"));
                None
            }
        }
    }

    /// `compute_ms`, `offset` and `start_ms`, checked against the period
    /// and the job's own communication time.
    pub(super) fn timing(
        &mut self,
        obj: &Map<String, Value>,
        period_ns: Option<u64>,
        flows: Option<&[JobFlow]>,
    ) -> Timing {
        let compute_ns =
            obj.get("compute_ms").and_then(|v| self.millis(v, "compute_ms", "compute time", true));
        let start_ns =
            obj.get("start_ms").and_then(|v| self.millis(v, "start_ms", "start", true)).unwrap_or(0);
        let offset = match obj.get("offset") {
            None => Offset::Shiftable,
            Some(v) => match v.as_str() {
                Some("shiftable") => Offset::Shiftable,
                Some("fixed") => Offset::Fixed,
                _ => {
                    let hint = v
                        .as_str()
                        .and_then(|s| did_you_mean(s, OFFSETS.iter().copied()))
                        .map(|k| format!("did you mean \"{k}\"? "))
                        .unwrap_or_default();
                    self.err("offset", format!("unknown offset {v}; {hint}use \"shiftable\" or \"fixed\""));
                    Offset::Shiftable
                }
            },
        };
        let periodic = obj.contains_key("period_ms") || obj.contains_key("compute_ms");
        for key in ["offset", "start_ms"] {
            if obj.contains_key(key) && !periodic {
                self.err(
                    key,
                    format!("\"{key}\" goes with a periodic job: give \"period_ms\" or \"compute_ms\" too"),
                );
            }
        }
        if let (Some(p), Some(c)) = (period_ns, compute_ns) {
            if c >= p {
                self.err(
                    "compute_ms",
                    format!(
                        "compute time {} ms is not shorter than the period {} ms, which includes it and the communication",
                        c as f64 / 1e6,
                        p as f64 / 1e6
                    ),
                );
            }
        }
        if let (Some(p), Some(flows)) = (period_ns, flows) {
            self.period_fits(p, compute_ns.unwrap_or(0), flows);
        }
        Timing { compute_ns, offset, start_ns }
    }

    /// A period must hold the job's compute and its own communication.
    fn period_fits(&mut self, period_ns: u64, compute_ns: u64, flows: &[JobFlow]) {
        let (comm, host) = comm_floor_ns(self.topo, flows);
        if period_ns >= comm.saturating_add(compute_ns) || compute_ns >= period_ns {
            return;
        }
        let name = host.and_then(|h| self.topo.hosts.get(h)).map_or("?", |h| h.name.as_str());
        let also = if compute_ns > 0 { " plus its compute" } else { "" };
        self.err(
            "period_ms",
            format!(
                "period {} ms is shorter than the job's own communication{also}: host {name} moves its bytes \
                 of one iteration in {:.3} ms at its NIC rate",
                period_ns as f64 / 1e6,
                comm as f64 / 1e6
            ),
        );
    }
}
