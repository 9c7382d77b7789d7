//! Typed construction of P4Runtime entities from names, checked against
//! the P4Info: table entries of every match kind, actions, action profile
//! members and groups, one-shot action sets, counters, registers, digests
//! and packet-replication-engine entries.

use crate::codec::{self, Bits};
use crate::p4info::{self, name_of, P4Info, P4InfoError};
use crate::proto::p4::config::v1 as cfg;
use crate::proto::p4::v1 as p4;

use cfg::match_field::{Match as MatchKind, MatchType};
use p4::field_match::FieldMatchType;

fn value_err(object: &str, field: &str, source: codec::ValueError) -> P4InfoError {
    P4InfoError::Value { object: object.to_owned(), field: field.to_owned(), source }
}

fn match_type_name(t: &cfg::MatchField) -> String {
    match t.r#match {
        Some(MatchKind::MatchType(m)) => {
            MatchType::try_from(m).map(|m| m.as_str_name().to_owned()).unwrap_or_else(|_| format!("type {m}"))
        }
        Some(MatchKind::OtherMatchType(ref s)) => s.clone(),
        None => "unspecified".into(),
    }
}

/// Builds one table entry, field by field, checked against the P4Info.
#[derive(Debug, Clone)]
pub struct TableEntryBuilder<'a> {
    info: &'a P4Info,
    table: &'a cfg::Table,
    entry: p4::TableEntry,
}

impl P4Info {
    /// Starts a table entry for the named table.
    pub fn table_entry(&self, table: &str) -> Result<TableEntryBuilder<'_>, P4InfoError> {
        let t = self.table(table)?;
        let id = t.preamble.as_ref().map(|p| p.id).unwrap_or_default();
        Ok(TableEntryBuilder {
            info: self,
            table: t,
            entry: p4::TableEntry { table_id: id, ..Default::default() },
        })
    }

    /// An action call with its parameters by name; every parameter must be
    /// given, each must fit its bitwidth.
    pub fn action_call(&self, action: &str, params: &[(&str, Bits)]) -> Result<p4::Action, P4InfoError> {
        let a = self.action(action)?;
        // The action's full name is only for errors: built when one is
        // returned, not for each of a fabric's million entries.
        let mut out = p4::Action {
            action_id: a.preamble.as_ref().map(|p| p.id).unwrap_or_default(),
            params: Vec::with_capacity(params.len()),
        };
        for (name, value) in params {
            let p = p4info::action_param(a, name)?;
            let v =
                codec::encode(value.clone(), p.bitwidth).map_err(|e| value_err(&name_of(a), &p.name, e))?;
            if out.params.iter().any(|q| q.param_id == p.id) {
                return Err(P4InfoError::Usage {
                    object: name_of(a),
                    message: format!("parameter {} given twice", p.name),
                });
            }
            out.params.push(p4::action::Param { param_id: p.id, value: v });
        }
        if let Some(missing) = a.params.iter().find(|p| !out.params.iter().any(|q| q.param_id == p.id)) {
            return Err(P4InfoError::Usage {
                object: name_of(a),
                message: format!("parameter {} is missing", missing.name),
            });
        }
        out.params.sort_by_key(|p| p.param_id);
        Ok(out)
    }

    /// An action profile member.
    pub fn profile_member(
        &self,
        profile: &str,
        member_id: u32,
        action: p4::Action,
    ) -> Result<p4::ActionProfileMember, P4InfoError> {
        let p = self.action_profiles.by_name(profile)?;
        Ok(p4::ActionProfileMember {
            action_profile_id: p.preamble.as_ref().map(|p| p.id).unwrap_or_default(),
            member_id,
            action: Some(action),
        })
    }

    /// An action profile group of `(member_id, weight)`; `max_size` 0 lets
    /// the server choose.
    pub fn profile_group(
        &self,
        profile: &str,
        group_id: u32,
        members: &[(u32, i32)],
        max_size: i32,
    ) -> Result<p4::ActionProfileGroup, P4InfoError> {
        let p = self.action_profiles.by_name(profile)?;
        let object = name_of(p);
        if p.max_group_size > 0 && max_size > p.max_group_size {
            return Err(P4InfoError::Usage {
                object,
                message: format!(
                    "max_size {max_size} exceeds the profile's max_group_size {}",
                    p.max_group_size
                ),
            });
        }
        if let Some((m, w)) = members.iter().find(|(_, w)| *w < 1) {
            return Err(P4InfoError::Usage {
                object,
                message: format!("member {m} has weight {w}; weights are >= 1"),
            });
        }
        Ok(p4::ActionProfileGroup {
            action_profile_id: p.preamble.as_ref().map(|p| p.id).unwrap_or_default(),
            group_id,
            members: members
                .iter()
                .map(|(member_id, weight)| p4::action_profile_group::Member {
                    member_id: *member_id,
                    weight: *weight,
                    watch_kind: None,
                })
                .collect(),
            max_size,
        })
    }

    /// An indirect counter cell, or all cells with `index` `None` (reads).
    pub fn counter_entry(&self, counter: &str, index: Option<i64>) -> Result<p4::CounterEntry, P4InfoError> {
        let c = self.counters.by_name(counter)?;
        Ok(p4::CounterEntry {
            counter_id: c.preamble.as_ref().map(|p| p.id).unwrap_or_default(),
            index: index.map(|index| p4::Index { index }),
            data: None,
        })
    }

    /// A register cell (or all cells) with an optional value to write.
    pub fn register_entry(
        &self,
        register: &str,
        index: Option<i64>,
        value: Option<Bits>,
    ) -> Result<p4::RegisterEntry, P4InfoError> {
        let r = self.register(register)?;
        let object = name_of(r);
        let data = match value {
            None => None,
            Some(v) => {
                let w = register_bitwidth(r).ok_or_else(|| P4InfoError::Usage {
                    object: object.clone(),
                    message: "only bit<W> registers are supported".into(),
                })?;
                let b = codec::encode(v, w).map_err(|e| value_err(&object, "value", e))?;
                Some(p4::P4Data { data: Some(p4::p4_data::Data::Bitstring(b)) })
            }
        };
        Ok(p4::RegisterEntry {
            register_id: r.preamble.as_ref().map(|p| p.id).unwrap_or_default(),
            index: index.map(|index| p4::Index { index }),
            data,
        })
    }

    /// A digest subscription with its batching and ack configuration.
    pub fn digest_entry(&self, digest: &str, config: DigestConfig) -> Result<p4::DigestEntry, P4InfoError> {
        let d = self.digest(digest)?;
        Ok(p4::DigestEntry {
            digest_id: d.preamble.as_ref().map(|p| p.id).unwrap_or_default(),
            config: Some(p4::digest_entry::Config {
                max_timeout_ns: config.max_timeout_ns,
                max_list_size: config.max_list_size,
                ack_timeout_ns: config.ack_timeout_ns,
            }),
        })
    }

    /// Packet metadata for a packet-out (header `"packet_out"`) by name.
    pub fn packet_metadata(
        &self,
        header: &str,
        fields: &[(&str, Bits)],
    ) -> Result<Vec<p4::PacketMetadata>, P4InfoError> {
        let h = self.packet_metadata.by_name(header)?;
        let object = name_of(h);
        fields
            .iter()
            .map(|(name, v)| {
                let m = p4info::packet_metadata_field(h, name)?;
                let value =
                    codec::encode(v.clone(), m.bitwidth).map_err(|e| value_err(&object, &m.name, e))?;
                Ok(p4::PacketMetadata { metadata_id: m.id, value })
            })
            .collect()
    }
}

impl P4Info {
    /// Names and decodes the metadata of a packet-in (header `"packet_in"`).
    pub fn decode_packet_metadata(
        &self,
        header: &str,
        metadata: &[p4::PacketMetadata],
    ) -> Result<Vec<(String, u128)>, P4InfoError> {
        let h = self.packet_metadata.by_name(header)?;
        let object = name_of(h);
        metadata
            .iter()
            .map(|m| {
                let f = h
                    .metadata
                    .iter()
                    .find(|f| f.id == m.metadata_id)
                    .ok_or(P4InfoError::UnknownId { kind: "packet metadata field", id: m.metadata_id })?;
                let v =
                    codec::decode_u128(&m.value, f.bitwidth).map_err(|e| value_err(&object, &f.name, e))?;
                Ok((f.name.clone(), v))
            })
            .collect()
    }
}

/// The bitwidth of a `bit<W>` register, if it is one.
pub fn register_bitwidth(r: &cfg::Register) -> Option<i32> {
    use cfg::p4_bitstring_like_type_spec::TypeSpec as B;
    use cfg::p4_data_type_spec::TypeSpec as T;
    match r.type_spec.as_ref()?.type_spec.as_ref()? {
        T::Bitstring(b) => match b.type_spec.as_ref()? {
            B::Bit(bit) => Some(bit.bitwidth),
            B::Int(i) => Some(i.bitwidth),
            B::Varbit(_) => None,
        },
        _ => None,
    }
}

/// DigestEntry configuration (P4Runtime §9.10): the server sends a list
/// when it holds `max_list_size` items or the oldest is `max_timeout_ns`
/// old, and does not resend the same data before an ack or `ack_timeout_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestConfig {
    pub max_timeout_ns: i64,
    pub max_list_size: i32,
    pub ack_timeout_ns: i64,
}

impl Default for DigestConfig {
    fn default() -> Self {
        DigestConfig { max_timeout_ns: 1_000_000, max_list_size: 64, ack_timeout_ns: 1_000_000_000 }
    }
}

impl TableEntryBuilder<'_> {
    fn object(&self) -> String {
        name_of(self.table)
    }

    fn field(&self, name: &str, wanted: MatchType) -> Result<&cfg::MatchField, P4InfoError> {
        let f = p4info::match_field(self.table, name)?;
        if f.r#match != Some(MatchKind::MatchType(wanted as i32)) {
            return Err(P4InfoError::MatchKind {
                object: self.object(),
                field: f.name.clone(),
                actual: match_type_name(f),
                wanted: wanted.as_str_name(),
            });
        }
        if self.entry.r#match.iter().any(|m| m.field_id == f.id) {
            return Err(P4InfoError::Usage {
                object: self.object(),
                message: format!("{} matched twice", f.name),
            });
        }
        Ok(f)
    }

    fn push(mut self, field_id: u32, m: FieldMatchType) -> Self {
        self.entry.r#match.push(p4::FieldMatch { field_id, field_match_type: Some(m) });
        self.entry.r#match.sort_by_key(|m| m.field_id);
        self
    }

    fn enc(&self, f: &cfg::MatchField, v: Bits) -> Result<Vec<u8>, P4InfoError> {
        codec::encode(v, f.bitwidth).map_err(|e| value_err(&self.object(), &f.name, e))
    }

    pub fn exact(self, field: &str, value: impl Into<Bits>) -> Result<Self, P4InfoError> {
        let f = self.field(field, MatchType::Exact)?;
        let value = self.enc(f, value.into())?;
        let id = f.id;
        Ok(self.push(id, FieldMatchType::Exact(p4::field_match::Exact { value })))
    }

    /// Longest-prefix match; the value is masked to the prefix so that the
    /// entry is canonical (the spec forbids bits past the prefix).
    pub fn lpm(self, field: &str, value: impl Into<Bits>, prefix_len: i32) -> Result<Self, P4InfoError> {
        let f = self.field(field, MatchType::Lpm)?;
        let mask =
            codec::prefix_mask(prefix_len, f.bitwidth).map_err(|e| value_err(&self.object(), &f.name, e))?;
        let v = codec::padded(&self.enc(f, value.into())?, f.bitwidth)
            .map_err(|e| value_err(&self.object(), &f.name, e))?;
        let id = f.id;
        if prefix_len == 0 {
            return Ok(self); // a zero-length prefix is a wildcard: omitted
        }
        let value = codec::canonical(&codec::and(&v, &mask), f.bitwidth)
            .map_err(|e| value_err(&self.object(), &f.name, e))?;
        Ok(self.push(id, FieldMatchType::Lpm(p4::field_match::Lpm { value, prefix_len })))
    }

    /// Ternary match; bits outside the mask are cleared.
    pub fn ternary(
        self,
        field: &str,
        value: impl Into<Bits>,
        mask: impl Into<Bits>,
    ) -> Result<Self, P4InfoError> {
        let f = self.field(field, MatchType::Ternary)?;
        let object = self.object();
        let w = f.bitwidth;
        let pad = |b: Vec<u8>| codec::padded(&b, w).map_err(|e| value_err(&object, &f.name, e));
        let (v, m) = (pad(self.enc(f, value.into())?)?, pad(self.enc(f, mask.into())?)?);
        let id = f.id;
        if m.iter().all(|b| *b == 0) {
            return Ok(self); // don't-care: omitted
        }
        let value = codec::canonical(&codec::and(&v, &m), w).map_err(|e| value_err(&object, &f.name, e))?;
        let mask = codec::canonical(&m, w).map_err(|e| value_err(&object, &f.name, e))?;
        Ok(self.push(id, FieldMatchType::Ternary(p4::field_match::Ternary { value, mask })))
    }

    pub fn range(
        self,
        field: &str,
        low: impl Into<Bits>,
        high: impl Into<Bits>,
    ) -> Result<Self, P4InfoError> {
        let f = self.field(field, MatchType::Range)?;
        let (low, high) = (self.enc(f, low.into())?, self.enc(f, high.into())?);
        if codec::cmp(&low, &high) == std::cmp::Ordering::Greater {
            return Err(P4InfoError::Usage {
                object: self.object(),
                message: format!("{}: low > high", f.name),
            });
        }
        let id = f.id;
        Ok(self.push(id, FieldMatchType::Range(p4::field_match::Range { low, high })))
    }

    pub fn optional(self, field: &str, value: impl Into<Bits>) -> Result<Self, P4InfoError> {
        let f = self.field(field, MatchType::Optional)?;
        let value = self.enc(f, value.into())?;
        let id = f.id;
        Ok(self.push(id, FieldMatchType::Optional(p4::field_match::Optional { value })))
    }

    pub fn priority(mut self, priority: i32) -> Self {
        self.entry.priority = priority;
        self
    }

    pub fn idle_timeout_ns(mut self, ns: i64) -> Self {
        self.entry.idle_timeout_ns = ns;
        self
    }

    /// A direct action with parameters by name.
    pub fn action(mut self, action: &str, params: &[(&str, Bits)]) -> Result<Self, P4InfoError> {
        let a = self.info.action_call(action, params)?;
        if !self.table.action_refs.iter().any(|r| r.id == a.action_id) {
            return Err(P4InfoError::Usage {
                object: self.object(),
                message: format!("action {action} is not one of this table's actions"),
            });
        }
        self.entry.action = Some(p4::TableAction { r#type: Some(p4::table_action::Type::Action(a)) });
        Ok(self)
    }

    /// Points an indirect table entry at an action profile member.
    pub fn member(mut self, member_id: u32) -> Self {
        self.entry.action =
            Some(p4::TableAction { r#type: Some(p4::table_action::Type::ActionProfileMemberId(member_id)) });
        self
    }

    /// Points an indirect table entry at an action profile group.
    pub fn group(mut self, group_id: u32) -> Self {
        self.entry.action =
            Some(p4::TableAction { r#type: Some(p4::table_action::Type::ActionProfileGroupId(group_id)) });
        self
    }

    /// A one-shot action set: `(action, weight)` pairs, no member ids.
    pub fn action_set(mut self, actions: Vec<(p4::Action, i32)>) -> Self {
        let set = p4::ActionProfileActionSet {
            action_profile_actions: actions
                .into_iter()
                .map(|(a, weight)| p4::ActionProfileAction { action: Some(a), weight, watch_kind: None })
                .collect(),
            ..Default::default()
        };
        self.entry.action =
            Some(p4::TableAction { r#type: Some(p4::table_action::Type::ActionProfileActionSet(set)) });
        self
    }

    /// Marks this as the table's default entry (written with MODIFY).
    pub fn default_action(mut self) -> Self {
        self.entry.is_default_action = true;
        self.entry.r#match.clear();
        self
    }

    pub fn build(self) -> p4::TableEntry {
        self.entry
    }
}

/// A clone session replicating to `(port, instance)` pairs.
pub fn clone_session(session_id: u32, replicas: &[(u32, u32)], cos: u32, truncate: i32) -> p4::Entity {
    pre(p4::packet_replication_engine_entry::Type::CloneSessionEntry(p4::CloneSessionEntry {
        session_id,
        replicas: replicas_of(replicas),
        class_of_service: cos,
        packet_length_bytes: truncate,
    }))
}

/// A multicast group replicating to `(port, instance)` pairs.
pub fn multicast_group(group_id: u32, replicas: &[(u32, u32)]) -> p4::Entity {
    pre(p4::packet_replication_engine_entry::Type::MulticastGroupEntry(p4::MulticastGroupEntry {
        multicast_group_id: group_id,
        replicas: replicas_of(replicas),
        metadata: vec![],
    }))
}

fn replicas_of(r: &[(u32, u32)]) -> Vec<p4::Replica> {
    r.iter()
        .map(|(port, instance)| p4::Replica {
            instance: *instance,
            backup_replicas: vec![],
            port_kind: Some(p4::replica::PortKind::Port(
                codec::encode(*port, 32).unwrap_or_else(|_| vec![0]),
            )),
        })
        .collect()
}

fn pre(t: p4::packet_replication_engine_entry::Type) -> p4::Entity {
    p4::Entity {
        entity: Some(p4::entity::Entity::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
            r#type: Some(t),
        })),
    }
}

macro_rules! into_entity {
    ($($t:ident),*) => {$(
        impl From<p4::$t> for p4::Entity {
            fn from(e: p4::$t) -> Self {
                p4::Entity { entity: Some(p4::entity::Entity::$t(e)) }
            }
        }
    )*};
}
into_entity!(
    TableEntry,
    ActionProfileMember,
    ActionProfileGroup,
    CounterEntry,
    DirectCounterEntry,
    RegisterEntry,
    DigestEntry,
    MeterEntry
);

/// An INSERT update.
pub fn insert(e: impl Into<p4::Entity>) -> p4::Update {
    update(p4::update::Type::Insert, e)
}

/// A MODIFY update.
pub fn modify(e: impl Into<p4::Entity>) -> p4::Update {
    update(p4::update::Type::Modify, e)
}

/// A DELETE update.
pub fn delete(e: impl Into<p4::Entity>) -> p4::Update {
    update(p4::update::Type::Delete, e)
}

fn update(t: p4::update::Type, e: impl Into<p4::Entity>) -> p4::Update {
    p4::Update { r#type: t as i32, entity: Some(e.into()) }
}
