//! What the policy remembers between decisions: each port's derate level
//! and timers, the weights it has asked for, and the destinations whose
//! recomputation the rate limit held back. Explicit and serializable, so
//! the same inputs always give the same outputs and a run can be replayed.

use std::collections::{BTreeMap, BTreeSet};

use metaroce_telemetry::PortKey;
use metaroce_topo::{LinkId, Member, Routing, SwitchId};
use serde::{Deserialize, Serialize};

use crate::reweight::Proposal;

/// One member's weight, by egress port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PortWeight {
    pub port: u16,
    pub weight: u32,
}

/// Derate state of one egress port (one direction of a link).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortState {
    pub link: LinkId,
    /// 0 = full capacity; see [`crate::Policy::factor_permille`].
    pub level: u8,
    /// When the level last changed.
    pub last_step_ns: Option<u64>,
    /// When the policy first found the port absent from the heat snapshot
    /// (absent ports count as cool, from then on).
    pub absent_since_ns: Option<u64>,
}

/// Weights the policy wants for one (switch, destination leaf) in place
/// of the baseline group's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Override {
    /// The baseline weights they were computed against: when the baseline
    /// moves (a failure elsewhere), the override is recomputed.
    pub base: Vec<PortWeight>,
    pub weights: Vec<PortWeight>,
}

/// The policy's memory. Start with `PolicyState::default()`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyState {
    #[serde(with = "pairs")]
    pub(crate) ports: BTreeMap<PortKey, PortState>,
    /// Destination leaf → switch → override.
    pub(crate) overrides: BTreeMap<SwitchId, BTreeMap<SwitchId, Override>>,
    /// Destination leaves to recompute at the next decision, with the
    /// ports whose level change made them so.
    pub(crate) dirty: BTreeMap<SwitchId, BTreeSet<PortKey>>,
    /// Changes the rate limit held back, by destination leaf. They stay
    /// right until a level change, a failure or a baseline move touches
    /// their leaf, which then is recomputed instead.
    #[serde(default)]
    pub(crate) pending: BTreeMap<SwitchId, Vec<Proposal>>,
    /// Fingerprint of the baseline the overrides were last checked against.
    #[serde(default)]
    pub(crate) baseline: Option<u64>,
}

impl PolicyState {
    /// The desired weights of `switch`'s group toward `leaf`, when they
    /// differ from the baseline routing's.
    pub fn desired(&self, switch: SwitchId, leaf: SwitchId) -> Option<&[PortWeight]> {
        self.overrides.get(&leaf)?.get(&switch).map(|o| o.weights.as_slice())
    }

    /// Every override as `(switch, leaf, weights)`, by leaf then switch.
    pub fn overrides(&self) -> impl Iterator<Item = (SwitchId, SwitchId, &[PortWeight])> + '_ {
        self.overrides
            .iter()
            .flat_map(|(&leaf, m)| m.iter().map(move |(&s, o)| (s, leaf, o.weights.as_slice())))
    }

    pub fn override_count(&self) -> usize {
        self.overrides.values().map(BTreeMap::len).sum()
    }

    /// Derate level of an egress port (0 when the policy does not track it).
    pub fn level(&self, port: PortKey) -> u8 {
        self.ports.get(&port).map_or(0, |p| p.level)
    }

    /// Every tracked port, level 0 included while its step timer runs.
    pub fn ports(&self) -> impl Iterator<Item = (PortKey, &PortState)> + '_ {
        self.ports.iter().map(|(k, v)| (*k, v))
    }

    /// Destination leaves whose changes the rate limit held back.
    pub fn pending(&self) -> impl Iterator<Item = SwitchId> + '_ {
        self.dirty.keys().copied()
    }
}

/// The members of `switch`'s baseline group toward `leaf` with the given
/// weights: what the controller installs for an override. None when the
/// baseline has no such group or the ports differ (the override is stale).
pub fn override_members(
    routing: &Routing,
    switch: SwitchId,
    leaf: SwitchId,
    weights: &[PortWeight],
) -> Option<Vec<Member>> {
    let (_, group) = routing.group_toward(switch, leaf)?;
    if group.members.len() != weights.len() {
        return None;
    }
    group
        .members
        .iter()
        .zip(weights)
        .map(|(m, w)| (m.port == w.port).then_some(Member { weight: w.weight, ..*m }))
        .collect()
}

/// `(port, weight)` of a baseline group, as the policy stores it.
pub(crate) fn key_of(members: &[Member]) -> Vec<PortWeight> {
    members.iter().map(|m| PortWeight { port: m.port, weight: m.weight }).collect()
}

/// A map with struct keys, written as a list of pairs (JSON map keys must
/// be strings).
mod pairs {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, K: Serialize, V: Serialize>(
        map: &BTreeMap<K, V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(map.iter())
    }

    pub fn deserialize<'de, D, K, V>(d: D) -> Result<BTreeMap<K, V>, D::Error>
    where
        D: Deserializer<'de>,
        K: Deserialize<'de> + Ord,
        V: Deserialize<'de>,
    {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}
