//! What the planner places: flows named the way the data plane matches
//! them, and what each one wants to send.

use std::fmt;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// A flow as the steer tables match it. Two granularities, one exact table
/// each in the data plane:
///
/// - [`FlowKey::Flow`]: one RoCE queue pair's packets on one UDP source
///   port (`steer_flow`, keyed src, dst, sport, dest QP);
/// - [`FlowKey::Pair`]: everything from one host to another that no
///   `Flow` entry matches (`steer_pair`, keyed src, dst): an announced job
///   whose ports and QPs are not known yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FlowKey {
    Flow { src: Ipv4Addr, dst: Ipv4Addr, sport: u16, qp: u32 },
    Pair { src: Ipv4Addr, dst: Ipv4Addr },
}

impl FlowKey {
    pub fn pair(src: Ipv4Addr, dst: Ipv4Addr) -> Self {
        FlowKey::Pair { src, dst }
    }
    pub fn flow(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, qp: u32) -> Self {
        FlowKey::Flow { src, dst, sport, qp }
    }
    pub fn src(&self) -> Ipv4Addr {
        match *self {
            FlowKey::Flow { src, .. } | FlowKey::Pair { src, .. } => src,
        }
    }
    pub fn dst(&self) -> Ipv4Addr {
        match *self {
            FlowKey::Flow { dst, .. } | FlowKey::Pair { dst, .. } => dst,
        }
    }
    /// A small deterministic hash, used to spread ties between equal paths.
    pub(crate) fn spread(&self) -> u64 {
        let (a, b, c) = match *self {
            FlowKey::Flow { src, dst, sport, qp } => {
                (u32::from(src), u32::from(dst), u64::from(sport) << 32 | u64::from(qp))
            }
            FlowKey::Pair { src, dst } => (u32::from(src), u32::from(dst), u64::MAX),
        };
        let mut x = (u64::from(a) << 32 | u64::from(b)) ^ c.rotate_left(29);
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlowKey::Flow { src, dst, sport, qp } => write!(f, "{src}->{dst} sport {sport} qp {qp}"),
            FlowKey::Pair { src, dst } => write!(f, "{src}->{dst}"),
        }
    }
}

/// What a flow offers to send. Every field is optional; the planner takes
/// the larger of the observed rate and the announced rate
/// (`bytes_per_iter` over `period_ns`), and a flow with neither (an
/// announced job without a period) offers its NIC's line rate. Either way
/// the NICs cap it (see `README.md`, "Demand").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Demand {
    /// Measured by the data plane (large-flow telemetry), bits per second.
    pub rate_bps: Option<u64>,
    /// Announced by the job API.
    pub bytes_per_iter: Option<u64>,
    /// The job's iteration period, nanoseconds.
    pub period_ns: Option<u64>,
}

impl Demand {
    pub fn rate(bps: u64) -> Self {
        Demand { rate_bps: Some(bps), ..Default::default() }
    }
    /// An announced flow: bytes per iteration, and the period if known.
    pub fn announced(bytes_per_iter: u64, period_ns: Option<u64>) -> Self {
        Demand { bytes_per_iter: Some(bytes_per_iter), period_ns, rate_bps: None }
    }

    /// Offered rate in bits per second; `u64::MAX` for "as fast as it can".
    pub fn offered_bps(&self) -> u64 {
        let announced = match (self.bytes_per_iter, self.period_ns) {
            (Some(bytes), Some(period)) if period > 0 => {
                let bps = u128::from(bytes) * 8 * 1_000_000_000 / u128::from(period);
                Some(u64::try_from(bps).unwrap_or(u64::MAX))
            }
            (Some(_), _) => Some(u64::MAX),
            _ => None,
        };
        match (self.rate_bps, announced) {
            (Some(r), Some(a)) => r.max(a),
            (Some(r), None) => r,
            (None, Some(a)) => a,
            (None, None) => u64::MAX,
        }
    }
}

/// Index of a flow in the planner's table. Stable while the flow exists;
/// reused after it is removed.
pub type FlowId = u32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_rate_takes_the_larger_and_defaults_to_line_rate() {
        assert_eq!(Demand::default().offered_bps(), u64::MAX);
        assert_eq!(Demand::rate(5).offered_bps(), 5);
        // 1 MB every 1 ms = 8 Gb/s.
        let a = Demand::announced(1_000_000, Some(1_000_000));
        assert_eq!(a.offered_bps(), 8_000_000_000);
        assert_eq!(Demand { rate_bps: Some(10_000_000_000), ..a }.offered_bps(), 10_000_000_000);
        assert_eq!(Demand::announced(1, None).offered_bps(), u64::MAX);
        assert_eq!(Demand::announced(1, Some(0)).offered_bps(), u64::MAX);
    }

    #[test]
    fn keys_serialize_with_their_kind() {
        let k = FlowKey::flow("10.0.0.1".parse().unwrap_or(Ipv4Addr::LOCALHOST), Ipv4Addr::LOCALHOST, 7, 9);
        let s = serde_json::to_string(&k).unwrap_or_default();
        assert_eq!(s, r#"{"kind":"flow","src":"10.0.0.1","dst":"127.0.0.1","sport":7,"qp":9}"#);
        assert_ne!(k.spread(), FlowKey::pair(k.src(), k.dst()).spread());
    }
}
