//! The planner's tunables, their defaults and their validation.

use serde::{Deserialize, Serialize};

/// Tunables of the planner. Times are nanoseconds on the controller's clock
/// (as in `metaroce-policy`); gains are per mille of a link's capacity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TeConfig {
    /// A flow that already has a path moves only if that lowers the highest
    /// utilisation on its path (its bottleneck, counting itself) by at
    /// least this much, per mille of capacity: 50 = five points of link
    /// utilisation. New flows and flows on failures are placed regardless.
    /// Default 50.
    pub min_gain_permille: u32,
    /// Rebalancing moves per decision; the rest wait for the next decision.
    /// New flows, ended flows and flows on failed links are never held
    /// back and do not count. Default 64.
    pub max_moves: usize,
    /// A flow that was rebalanced or repaired is not moved again to
    /// rebalance for this long (failures still move it at once). A first
    /// placement starts no hold-down: it was made with what was known
    /// then, and a rebalance still needs the margin. Default 100 ms.
    pub hold_down_ns: u64,
    /// Bound on the local-search steps of one decision (each step tries the
    /// flows of the hottest link), so a decision's cost stays bounded on
    /// any input. Default 100,000.
    pub max_search_steps: usize,
    /// New flows are placed by a beam search: at a switch with more than
    /// `search_beam` members it looks at `search_width` of them (with the
    /// links they lead into where the route has no more choice) and
    /// follows the `search_beam` least utilised. Rebalancing and repairs
    /// search every path. Defaults 2 and 8.
    pub search_beam: usize,
    pub search_width: usize,
    /// Place a batch of new, equal flows by the recursive equitable edge
    /// colouring (at the cut bound for All-to-All, permutations and rings
    /// on a uniform leaf-spine, with parallel links or not, and on a
    /// uniform three-tier Clos whose spines have as many uplinks as
    /// leaves, fat-trees included) instead of greedily. Default true.
    pub exact_jobs: bool,
    /// Confine each incast (a receiver-bound group, `group.rs`) to as few
    /// links as its senders allow, its members not counting against each
    /// other, so its PFC congestion tree stays small and other flows keep
    /// off it. This trades the highest utilisation for the tree: a
    /// confined incast may load a link up to its whole rate where spread
    /// it would load several a little (on 300 random small fabrics the
    /// highest utilisation is then optimal in 252, at worst 4x the
    /// optimum, against 299 and 1.25x spread). False places every flow
    /// for the lowest highest utilisation alone. Default true.
    pub confine_incasts: bool,
    /// Where a decision's announced new flows end above the lower bound
    /// after greedy placement and the local search (unequal rates, jobs
    /// of different sizes placed together), rearrange them together by
    /// negotiated congestion (`rearrange.rs`), keeping the result only if
    /// the highest utilisation falls. Costs up to some 70 ms of CPU in a
    /// decision of 2,000 such flows; nothing where the batch is at the
    /// bound, exact, learned or over 2,048 flows. Default true.
    pub rearrange_jobs: bool,
}

impl Default for TeConfig {
    fn default() -> Self {
        TeConfig {
            min_gain_permille: 50,
            max_moves: 64,
            hold_down_ns: 100_000_000,
            max_search_steps: 100_000,
            search_beam: 2,
            search_width: 8,
            exact_jobs: true,
            confine_incasts: true,
            rearrange_jobs: true,
        }
    }
}

/// A configuration the planner refuses; the variant names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("te config: {field} must be {rule}, got {got}")]
    OutOfRange { field: &'static str, rule: &'static str, got: u64 },
}

impl TeConfig {
    /// Checks every field; the first bad one is named in the error.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field, rule, got: u64| Err(ConfigError::OutOfRange { field, rule, got });
        if self.min_gain_permille > 1000 {
            return bad("min_gain_permille", "at most 1000", self.min_gain_permille.into());
        }
        if self.max_moves == 0 {
            return bad("max_moves", "at least 1 (0 would never rebalance)", 0);
        }
        if !(1..=16).contains(&self.search_beam) {
            return bad("search_beam", "between 1 and 16", self.search_beam as u64);
        }
        if self.search_width < self.search_beam {
            return bad("search_width", "at least search_beam", self.search_width as u64);
        }
        if self.max_search_steps == 0 {
            return bad("max_search_steps", "at least 1", 0);
        }
        Ok(())
    }

    /// The gain threshold in utilisation units (1.0 = a full link). A tiny
    /// floor keeps every accepted move a strict improvement, so the local
    /// search always ends.
    pub(crate) fn min_gain(&self) -> f64 {
        (f64::from(self.min_gain_permille) / 1000.0).max(EPS)
    }
}

/// Smallest improvement that counts, in utilisation units.
pub(crate) const EPS: f64 = 1e-9;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_fields_are_named() {
        assert_eq!(TeConfig::default().validate(), Ok(()));
        let named = |c: TeConfig| match c.validate() {
            Err(ConfigError::OutOfRange { field, .. }) => field,
            Ok(()) => "ok",
        };
        let d = TeConfig::default;
        assert_eq!(named(TeConfig { min_gain_permille: 1001, ..d() }), "min_gain_permille");
        assert_eq!(named(TeConfig { max_moves: 0, ..d() }), "max_moves");
        assert_eq!(named(TeConfig { max_search_steps: 0, ..d() }), "max_search_steps");
        assert_eq!(named(TeConfig { search_beam: 0, ..d() }), "search_beam");
        assert_eq!(named(TeConfig { search_width: 1, ..d() }), "search_width");
        assert_eq!(named(TeConfig { min_gain_permille: 0, ..d() }), "ok");
    }

    #[test]
    fn config_reads_from_json_with_defaults_and_refuses_unknown_keys() {
        let c: TeConfig = serde_json::from_str(r#"{"max_moves": 3}"#).unwrap_or_default();
        assert_eq!(c, TeConfig { max_moves: 3, ..Default::default() });
        assert!(serde_json::from_str::<TeConfig>(r#"{"max_move": 3}"#).is_err());
    }
}
