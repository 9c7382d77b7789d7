//! The policy's tunables, their defaults, their validation, and the derate
//! levels they imply.

use serde::{Deserialize, Serialize};

/// Tunables of the rerouting policy. Times are nanoseconds on the
/// controller's clock; factors are per mille (1000 = full capacity), so the
/// arithmetic is exact and the same on every machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// A port must stay congested this long before its first derate step,
    /// so a burst that the data plane's flowlets already absorb is left
    /// alone. Default 2 ms.
    pub hold_up_ns: u64,
    /// A derated port must stay cool this long before each restore step.
    /// Longer than `hold_up_ns` (react fast, forget slowly): a link that
    /// flaps faster than this only ever moves one way. Default 50 ms.
    pub hold_down_ns: u64,
    /// Least time between two level steps of one port, in either
    /// direction: the bound on how fast any weight can move. Default 10 ms.
    pub step_interval_ns: u64,
    /// Each derate step multiplies the port's counted capacity by this, per
    /// mille. Default 500 (halve).
    pub derate_step_permille: u32,
    /// The counted capacity never drops below this share, per mille: a hot
    /// link keeps some traffic (it is not failed). Default 125.
    pub min_factor_permille: u32,
    /// Derate and restore group changes per decision; the rest wait for
    /// the next decision, most urgent first. A group is a switch's set of
    /// weights: routes of one switch moving to the same weights count once,
    /// as the controller writes them once. Failover is never held back.
    /// Default 256.
    pub max_changed_groups: usize,
    /// How much a warm (not congested) queue discounts an alternative: a
    /// queue at the fabric's `queue_high` counts `1000 - this` per mille of
    /// its capacity, an idle one all of it. Quantized in quarters of
    /// `queue_high` so queue noise does not move weights. Default 500.
    pub warm_discount_permille: u32,
    /// No member's share of a group's traffic grows past this much of its
    /// baseline share, per mille: when a port is derated, the weight it
    /// sheds is spread so that no alternative takes more than a third more
    /// than it had. With many alternatives this never binds; with two
    /// uplinks it keeps the hot one at least a third of the traffic
    /// (weights 1:2), because every flowlet moved lands on the one other
    /// link, and moving nearly all of them there only moves the collision.
    /// Default 1334 (a third more, rounded up so that 1:2 passes exactly).
    pub max_share_growth_permille: u32,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            hold_up_ns: 2_000_000,
            hold_down_ns: 50_000_000,
            step_interval_ns: 10_000_000,
            derate_step_permille: 500,
            min_factor_permille: 125,
            max_changed_groups: 256,
            warm_discount_permille: 500,
            max_share_growth_permille: 1334,
        }
    }
}

/// A configuration the policy refuses; the variant names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("policy config: {field} must be {rule}, got {got}")]
    OutOfRange { field: &'static str, rule: &'static str, got: u64 },
    #[error(
        "policy config: hold_down_ns ({hold_down_ns}) must be at least hold_up_ns ({hold_up_ns}), \
         or a flapping link could be derated and restored in turn"
    )]
    HoldDownShorterThanHoldUp { hold_down_ns: u64, hold_up_ns: u64 },
}

/// Most derate levels; with any sane factor the minimum is reached long before.
const MAX_LEVELS: usize = 32;

impl PolicyConfig {
    /// Checks every field; the first bad one is named in the error.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |field, rule, got: u64| Err(ConfigError::OutOfRange { field, rule, got });
        if self.step_interval_ns == 0 {
            return bad("step_interval_ns", "at least 1 (it bounds the rate of change)", 0);
        }
        if !(1..=999).contains(&self.derate_step_permille) {
            return bad("derate_step_permille", "between 1 and 999", self.derate_step_permille.into());
        }
        if !(1..=1000).contains(&self.min_factor_permille) {
            return bad("min_factor_permille", "between 1 and 1000", self.min_factor_permille.into());
        }
        if self.max_changed_groups == 0 {
            return bad("max_changed_groups", "at least 1", 0);
        }
        if self.warm_discount_permille > 999 {
            return bad("warm_discount_permille", "at most 999", self.warm_discount_permille.into());
        }
        if !(1001..=10_000).contains(&self.max_share_growth_permille) {
            return bad(
                "max_share_growth_permille",
                "between 1001 and 10000",
                self.max_share_growth_permille.into(),
            );
        }
        if self.hold_down_ns < self.hold_up_ns {
            return Err(ConfigError::HoldDownShorterThanHoldUp {
                hold_down_ns: self.hold_down_ns,
                hold_up_ns: self.hold_up_ns,
            });
        }
        Ok(())
    }

    /// Counted capacity per mille at each level: level 0 is 1000, each
    /// level multiplies by the step, the last one is the minimum.
    pub(crate) fn factors(&self) -> Vec<u32> {
        let mut out = vec![1000u32];
        let mut f = 1000u32;
        while f > self.min_factor_permille && out.len() < MAX_LEVELS {
            f = (f * self.derate_step_permille / 1000).max(self.min_factor_permille);
            out.push(f);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_halve_down_to_an_eighth() {
        let c = PolicyConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(c.factors(), vec![1000, 500, 250, 125]);
    }

    #[test]
    fn factors_stop_at_the_minimum() {
        let c = PolicyConfig { derate_step_permille: 300, min_factor_permille: 50, ..Default::default() };
        assert_eq!(c.factors(), vec![1000, 300, 90, 50]);
        let c = PolicyConfig { min_factor_permille: 1000, ..Default::default() };
        assert_eq!(c.factors(), vec![1000], "a minimum of 1000 switches derating off");
        let c = PolicyConfig { derate_step_permille: 999, min_factor_permille: 1, ..Default::default() };
        assert_eq!(c.factors().len(), MAX_LEVELS);
    }

    #[test]
    fn bad_fields_are_named() {
        let named = |c: PolicyConfig| match c.validate() {
            Err(ConfigError::OutOfRange { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let d = PolicyConfig::default;
        assert_eq!(named(PolicyConfig { step_interval_ns: 0, ..d() }), "step_interval_ns");
        assert_eq!(named(PolicyConfig { derate_step_permille: 1000, ..d() }), "derate_step_permille");
        assert_eq!(named(PolicyConfig { derate_step_permille: 0, ..d() }), "derate_step_permille");
        assert_eq!(named(PolicyConfig { min_factor_permille: 0, ..d() }), "min_factor_permille");
        assert_eq!(named(PolicyConfig { max_changed_groups: 0, ..d() }), "max_changed_groups");
        assert_eq!(named(PolicyConfig { warm_discount_permille: 1000, ..d() }), "warm_discount_permille");
        assert_eq!(
            named(PolicyConfig { max_share_growth_permille: 1000, ..d() }),
            "max_share_growth_permille"
        );
        let e = PolicyConfig { hold_up_ns: 10, hold_down_ns: 5, ..d() }.validate().unwrap_err();
        assert!(e.to_string().contains("hold_down_ns"), "{e}");
    }

    #[test]
    fn config_reads_from_json_with_defaults_and_refuses_unknown_keys() {
        let c: PolicyConfig = serde_json::from_str(r#"{"hold_up_ns": 1000}"#).unwrap();
        assert_eq!(c, PolicyConfig { hold_up_ns: 1000, ..Default::default() });
        assert!(serde_json::from_str::<PolicyConfig>(r#"{"hold_up": 1}"#).is_err());
    }
}
