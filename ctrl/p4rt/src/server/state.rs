//! The forwarding state of one in-process switch and how Write updates
//! change it. Every refusal carries the status code the spec names.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::time::Instant;
use tonic::Status;

use super::digest::Digests;
use super::profile::{self, bump, check_action, check_scope, Profile};
use super::program::Register;
use super::table::{Installed, Table};
use super::FastMap;
use crate::codec;
use crate::entity::register_bitwidth;
use crate::p4info::P4Info;
use crate::proto::p4::v1 as p4;

use p4::entity::Entity as E;
use p4::table_action::Type as Act;
use p4::update::Type as Up;

/// The action profile member or group a table entry's action names.
#[derive(Debug, Clone, Copy)]
enum ProfileRef {
    Member(u32),
    Group(u32),
}

fn profile_ref(e: Option<&p4::TableEntry>) -> Option<ProfileRef> {
    match e.and_then(|e| e.action.as_ref()).and_then(|a| a.r#type.as_ref()) {
        Some(Act::ActionProfileMemberId(m)) => Some(ProfileRef::Member(*m)),
        Some(Act::ActionProfileGroupId(g)) => Some(ProfileRef::Group(*g)),
        _ => None,
    }
}

/// Everything a pipeline holds; replaced when a new pipeline is committed.
#[derive(Debug)]
pub(crate) struct State {
    pub info: Arc<P4Info>,
    pub tables: FastMap<u32, Table>,
    pub profiles: FastMap<u32, Profile>,
    pub counters: HashMap<u32, Vec<p4::CounterData>>,
    pub registers: HashMap<u32, Register>,
    pub clone_sessions: HashMap<u32, p4::CloneSessionEntry>,
    pub multicast: HashMap<u32, p4::MulticastGroupEntry>,
    pub digests: Digests,
    pub registers_via_p4runtime: bool,
}

fn id_of<T: crate::p4info::HasPreamble>(t: &T) -> u32 {
    t.preamble().map(|p| p.id).unwrap_or_default()
}

impl State {
    pub fn new(info: Arc<P4Info>, registers_via_p4runtime: bool) -> Self {
        let direct: Vec<u32> = info.direct_counters.iter().map(|d| d.direct_table_id).collect();
        let tables = info
            .tables
            .iter()
            .map(|t| (id_of(t), Table::new(t.clone(), direct.contains(&id_of(t)))))
            .collect();
        let profiles = info.action_profiles.iter().map(|p| (id_of(p), Profile::default())).collect();
        let counters = info
            .counters
            .iter()
            .map(|c| (id_of(c), vec![p4::CounterData::default(); usize::try_from(c.size).unwrap_or(0)]))
            .collect();
        let registers = info
            .registers
            .iter()
            .map(|r| (id_of(r), Register::new(usize::try_from(r.size).unwrap_or(0))))
            .collect();
        State {
            tables,
            profiles,
            counters,
            registers,
            clone_sessions: HashMap::new(),
            multicast: HashMap::new(),
            digests: Digests::default(),
            registers_via_p4runtime,
            info,
        }
    }

    /// Makes room at once for the table entries a Write inserts: a
    /// controller programming a switch writes a table's thousand entries
    /// in one batch, which would otherwise grow (rehash) its map ten
    /// times over.
    pub fn reserve_inserts(&mut self, updates: &[p4::Update]) {
        // Per table (a Write names few), counted before any is applied.
        let mut per_table: Vec<(u32, usize)> = Vec::new();
        for u in updates {
            if u.r#type != Up::Insert as i32 {
                continue;
            }
            let Some(E::TableEntry(e)) = u.entity.as_ref().and_then(|e| e.entity.as_ref()) else { continue };
            match per_table.iter_mut().find(|(id, _)| *id == e.table_id) {
                Some((_, n)) => *n += 1,
                None => per_table.push((e.table_id, 1)),
            }
        }
        for (id, n) in per_table {
            if let Some(table) = self.tables.get_mut(&id) {
                // No room for entries a full table will refuse.
                let room = usize::try_from(table.info.size).unwrap_or(0).saturating_sub(table.entries.len());
                table.entries.reserve(n.min(room));
            }
        }
    }

    pub fn apply(&mut self, u: p4::Update, now: Instant) -> Result<(), Status> {
        let t = Up::try_from(u.r#type).ok().filter(|t| *t != Up::Unspecified);
        let t = t.ok_or_else(|| Status::invalid_argument("update type unspecified"))?;
        match u.entity.and_then(|e| e.entity) {
            Some(E::TableEntry(e)) => self.table_entry(t, e, now),
            Some(E::ActionProfileMember(m)) => self.member(t, &m),
            Some(E::ActionProfileGroup(g)) => self.group(t, &g),
            Some(E::CounterEntry(c)) => self.counter(t, &c),
            Some(E::DirectCounterEntry(c)) => self.direct_counter(t, &c),
            Some(E::RegisterEntry(r)) => self.register(t, &r),
            Some(E::PacketReplicationEngineEntry(p)) => self.pre(t, &p),
            Some(E::DigestEntry(d)) => self.digest(t, &d),
            Some(_) => Err(Status::unimplemented("entity type not supported by this switch")),
            None => Err(Status::invalid_argument("update without an entity")),
        }
    }

    /// A table entry update, taken by value: the entry moves into the
    /// table, not copied.
    fn table_entry(&mut self, t: Up, mut e: p4::TableEntry, now: Instant) -> Result<(), Status> {
        let table = self
            .tables
            .get(&e.table_id)
            .ok_or_else(|| Status::not_found(format!("no table id {:#x}", e.table_id)))?;
        if e.is_default_action {
            return self.default_entry(t, &e);
        }
        if table.info.is_const_table {
            return Err(Status::permission_denied(format!("table {} is const", table.name())));
        }
        let key = table.canonical_match(&e.r#match, e.priority)?;
        if e.idle_timeout_ns != 0 && table.info.idle_timeout_behavior == 0 {
            return Err(Status::invalid_argument(format!(
                "table {} has no idle timeout support",
                table.name()
            )));
        }
        let exists = table.entries.contains_key(&key);
        match (t, exists) {
            (Up::Insert, true) => {
                return Err(Status::already_exists(format!("entry exists in {}", table.name())))
            }
            (Up::Modify | Up::Delete, false) => {
                return Err(Status::not_found(format!("no such entry in {}", table.name())))
            }
            _ => {}
        }
        if t == Up::Delete {
            let table = self.tables.get_mut(&e.table_id).ok_or_else(|| Status::internal("table vanished"))?;
            let old = table.entries.remove(&key).map(|i| i.entry);
            self.entry_refs(e.table_id, old.as_ref(), -1);
            return Ok(());
        }
        if t == Up::Insert && i64::try_from(table.entries.len()).unwrap_or(i64::MAX) >= table.info.size.max(1)
        {
            return Err(Status::resource_exhausted(format!(
                "table {} is full ({})",
                table.name(),
                table.info.size
            )));
        }
        let action = self.check_table_action(e.table_id, e.action.as_ref())?;
        let table_id = e.table_id;
        let counter = e.counter_data.take().unwrap_or_default();
        e.r#match = key.0.clone();
        e.action = Some(action);
        let uses = profile_ref(Some(&e));
        let table = self.tables.get_mut(&table_id).ok_or_else(|| Status::internal("table vanished"))?;
        let old = table
            .entries
            .insert(key, Box::new(Installed { entry: e, counter, last_hit: now, idle_notified: false }));
        self.entry_refs(table_id, old.map(|i| i.entry).as_ref(), -1);
        self.bump_ref(table_id, uses, 1);
        Ok(())
    }

    fn default_entry(&mut self, t: Up, e: &p4::TableEntry) -> Result<(), Status> {
        let table = self.tables.get(&e.table_id).ok_or_else(|| Status::internal("table vanished"))?;
        if t != Up::Modify {
            return Err(Status::invalid_argument("the default entry can only be modified"));
        }
        if !e.r#match.is_empty() || e.priority != 0 {
            return Err(Status::invalid_argument("the default entry has no match and no priority"));
        }
        if table.info.const_default_action_id != 0 {
            return Err(Status::permission_denied(format!(
                "table {} has a const default action",
                table.name()
            )));
        }
        let action = match e.action.as_ref().and_then(|a| a.r#type.as_ref()) {
            None => None, // reset to the program's initial default
            Some(Act::Action(a)) => {
                check_scope(&table.info, a.action_id, true)?;
                Some(check_action(&self.info, a)?)
            }
            Some(_) => return Err(Status::unimplemented("indirect default actions are not supported")),
        };
        if let Some(t) = self.tables.get_mut(&e.table_id) {
            t.default_action = action;
        }
        Ok(())
    }

    fn check_table_action(
        &self,
        table_id: u32,
        a: Option<&p4::TableAction>,
    ) -> Result<p4::TableAction, Status> {
        let table = self.tables.get(&table_id).ok_or_else(|| Status::internal("table vanished"))?;
        let implementation = table.info.implementation_id;
        let ty = a
            .and_then(|a| a.r#type.as_ref())
            .ok_or_else(|| Status::invalid_argument("entry has no action"))?;
        let profile = || {
            self.profiles
                .get(&implementation)
                .ok_or_else(|| Status::invalid_argument(format!("table {} is not indirect", table.name())))
        };
        match ty {
            Act::Action(a) if implementation == 0 => {
                check_scope(&table.info, a.action_id, false)?;
                Ok(p4::TableAction { r#type: Some(Act::Action(check_action(&self.info, a)?)) })
            }
            Act::Action(_) => Err(Status::invalid_argument(format!(
                "table {} needs a member, group or action set",
                table.name()
            ))),
            Act::ActionProfileMemberId(m) => {
                profile()?.members.get(m).ok_or_else(|| Status::not_found(format!("no member {m}")))?;
                Ok(p4::TableAction { r#type: Some(Act::ActionProfileMemberId(*m)) })
            }
            Act::ActionProfileGroupId(g) => {
                profile()?.groups.get(g).ok_or_else(|| Status::not_found(format!("no group {g}")))?;
                Ok(p4::TableAction { r#type: Some(Act::ActionProfileGroupId(*g)) })
            }
            Act::ActionProfileActionSet(set) => {
                profile()?;
                let decl = self
                    .info
                    .action_profiles
                    .by_id(implementation)
                    .map_err(|e| Status::internal(e.to_string()))?;
                let mut out = set.clone();
                let mut total = 0i64;
                for a in &mut out.action_profile_actions {
                    if a.weight < 1 {
                        return Err(Status::invalid_argument(format!("action set weight {}", a.weight)));
                    }
                    total += i64::from(a.weight);
                    let act = a
                        .action
                        .as_ref()
                        .ok_or_else(|| Status::invalid_argument("action set entry without action"))?;
                    check_scope(&table.info, act.action_id, false)?;
                    a.action = Some(check_action(&self.info, act)?);
                }
                if out.action_profile_actions.is_empty() {
                    return Err(Status::invalid_argument("empty action set"));
                }
                if decl.max_group_size > 0 && total > i64::from(decl.max_group_size) {
                    return Err(Status::resource_exhausted(format!(
                        "action set weight {total} over {}",
                        decl.max_group_size
                    )));
                }
                Ok(p4::TableAction { r#type: Some(Act::ActionProfileActionSet(out)) })
            }
        }
    }

    fn entry_refs(&mut self, table_id: u32, e: Option<&p4::TableEntry>, delta: isize) {
        self.bump_ref(table_id, profile_ref(e), delta);
    }

    fn bump_ref(&mut self, table_id: u32, uses: Option<ProfileRef>, delta: isize) {
        let Some(implementation) = self.tables.get(&table_id).map(|t| t.info.implementation_id) else {
            return;
        };
        let Some(p) = self.profiles.get_mut(&implementation) else { return };
        match uses {
            Some(ProfileRef::Member(m)) => bump(&mut p.member_refs, m, delta),
            Some(ProfileRef::Group(g)) => bump(&mut p.group_refs, g, delta),
            None => {}
        }
    }

    fn member(&mut self, t: Up, m: &p4::ActionProfileMember) -> Result<(), Status> {
        // The declaration is read through a clone of the shared P4Info,
        // not copied for every member and group written.
        let info = Arc::clone(&self.info);
        let decl = info
            .action_profiles
            .by_id(m.action_profile_id)
            .map_err(|_| Status::not_found(format!("no action profile id {:#x}", m.action_profile_id)))?;
        let action = match (t, m.action.as_ref()) {
            (Up::Delete, _) => None,
            (_, None) => {
                return Err(Status::invalid_argument(format!("member {} has no action", m.member_id)))
            }
            (_, Some(a)) => {
                for table_id in &decl.table_ids {
                    if let Some(table) = self.tables.get(table_id) {
                        check_scope(&table.info, a.action_id, false)?;
                    }
                }
                Some(check_action(&self.info, a)?)
            }
        };
        let p = self.profiles.entry(m.action_profile_id).or_default();
        let exists = p.members.contains_key(&m.member_id);
        match (t, exists, action) {
            (Up::Insert, true, _) => Err(Status::already_exists(format!("member {} exists", m.member_id))),
            (Up::Modify | Up::Delete, false, _) => {
                Err(Status::not_found(format!("no member {}", m.member_id)))
            }
            (Up::Delete, true, _) if p.member_refs.contains_key(&m.member_id) => {
                Err(Status::failed_precondition(format!("member {} is still in use", m.member_id)))
            }
            (Up::Delete, true, _) => {
                p.members.remove(&m.member_id);
                Ok(())
            }
            (Up::Insert, false, _)
                if i64::try_from(p.members.len()).unwrap_or(i64::MAX) >= decl.size.max(1) =>
            {
                Err(Status::resource_exhausted(format!("action profile full ({} members)", decl.size)))
            }
            (_, _, Some(a)) => {
                p.members.insert(m.member_id, a);
                Ok(())
            }
            _ => Err(Status::invalid_argument("bad member update")),
        }
    }

    fn group(&mut self, t: Up, g: &p4::ActionProfileGroup) -> Result<(), Status> {
        // The declaration is read through a clone of the shared P4Info,
        // not copied for every member and group written.
        let info = Arc::clone(&self.info);
        let decl = info
            .action_profiles
            .by_id(g.action_profile_id)
            .map_err(|_| Status::not_found(format!("no action profile id {:#x}", g.action_profile_id)))?;
        let p = self.profiles.entry(g.action_profile_id).or_default();
        let exists = p.groups.contains_key(&g.group_id);
        match (t, exists) {
            (Up::Insert, true) => return Err(Status::already_exists(format!("group {} exists", g.group_id))),
            (Up::Modify | Up::Delete, false) => {
                return Err(Status::not_found(format!("no group {}", g.group_id)))
            }
            _ => {}
        }
        if t == Up::Delete {
            if p.group_refs.contains_key(&g.group_id) {
                return Err(Status::failed_precondition(format!("group {} is still in use", g.group_id)));
            }
            if let Some(old) = p.groups.remove(&g.group_id) {
                p.add_group_refs(&old, -1);
            }
            return Ok(());
        }
        let mut stored = g.clone();
        let old = p.groups.get(&g.group_id).cloned();
        if let Some(old) = &old {
            // max_size is fixed at insert (§9.2.3)
            if g.max_size != 0 && g.max_size != old.max_size {
                return Err(Status::invalid_argument("max_size cannot change after insert"));
            }
            stored.max_size = old.max_size;
        }
        p.check_group(decl, &stored)?;
        if t == Up::Insert && decl.size > 0 && i64::try_from(p.groups.len()).unwrap_or(i64::MAX) >= decl.size
        {
            return Err(Status::resource_exhausted("action profile has no room for another group"));
        }
        if let Some(old) = &old {
            p.add_group_refs(old, -1);
        }
        p.add_group_refs(&stored, 1);
        p.groups.insert(g.group_id, stored);
        Ok(())
    }

    fn counter(&mut self, t: Up, c: &p4::CounterEntry) -> Result<(), Status> {
        if t != Up::Modify {
            return Err(Status::invalid_argument("counter entries can only be modified"));
        }
        let cells = self
            .counters
            .get_mut(&c.counter_id)
            .ok_or_else(|| Status::not_found(format!("no counter id {:#x}", c.counter_id)))?;
        let data = c.data.unwrap_or_default();
        match c.index {
            None => cells.iter_mut().for_each(|x| *x = data),
            Some(p4::Index { index }) => {
                let len = cells.len();
                let cell = usize::try_from(index).ok().and_then(|i| cells.get_mut(i));
                *cell.ok_or_else(|| {
                    Status::out_of_range(format!("counter index {index} not in 0..{len}"))
                })? = data;
            }
        }
        Ok(())
    }

    fn direct_counter(&mut self, t: Up, c: &p4::DirectCounterEntry) -> Result<(), Status> {
        if t != Up::Modify {
            return Err(Status::invalid_argument("direct counter entries can only be modified"));
        }
        let e = c
            .table_entry
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("direct counter without table entry"))?;
        let table = self.tables.get_mut(&e.table_id).ok_or_else(|| Status::not_found("no such table"))?;
        if !table.has_direct_counter {
            return Err(Status::invalid_argument(format!("table {} has no direct counter", table.name())));
        }
        let key = table.canonical_match(&e.r#match, e.priority)?;
        let i = table.entries.get_mut(&key).ok_or_else(|| Status::not_found("no such entry"))?;
        i.counter = c.data.unwrap_or_default();
        Ok(())
    }

    fn register(&mut self, t: Up, r: &p4::RegisterEntry) -> Result<(), Status> {
        if !self.registers_via_p4runtime {
            return Err(Status::unimplemented("register writes are not supported over P4Runtime"));
        }
        if t != Up::Modify {
            return Err(Status::invalid_argument("register entries can only be modified"));
        }
        let decl =
            self.info.registers.by_id(r.register_id).map_err(|_| Status::not_found("no such register"))?;
        let w = register_bitwidth(decl).ok_or_else(|| Status::unimplemented("only bit<W> registers"))?;
        let value = match r.data.as_ref().and_then(|d| d.data.as_ref()) {
            Some(p4::p4_data::Data::Bitstring(b)) => {
                codec::canonical(b, w).map_err(|e| Status::out_of_range(e.to_string()))?
            }
            _ => return Err(Status::invalid_argument("register data must be a bitstring")),
        };
        let cells =
            self.registers.get_mut(&r.register_id).ok_or_else(|| Status::not_found("no such register"))?;
        match r.index {
            None => cells.fill(value),
            Some(p4::Index { index }) => {
                let len = cells.len();
                let set = usize::try_from(index).is_ok_and(|i| cells.set(i, value));
                if !set {
                    return Err(Status::out_of_range(format!("register index {index} not in 0..{len}")));
                }
            }
        }
        Ok(())
    }

    fn pre(&mut self, t: Up, p: &p4::PacketReplicationEngineEntry) -> Result<(), Status> {
        use p4::packet_replication_engine_entry::Type as Pre;
        match p.r#type.as_ref() {
            Some(Pre::CloneSessionEntry(c)) => {
                upsert(&mut self.clone_sessions, t, c.session_id, c.clone(), "clone session")
            }
            Some(Pre::MulticastGroupEntry(m)) => {
                if m.multicast_group_id == 0 {
                    return Err(Status::invalid_argument("multicast group 0 is reserved"));
                }
                upsert(&mut self.multicast, t, m.multicast_group_id, m.clone(), "multicast group")
            }
            None => Err(Status::invalid_argument("empty replication entry")),
        }
    }

    fn digest(&mut self, t: Up, d: &p4::DigestEntry) -> Result<(), Status> {
        self.info
            .digests
            .by_id(d.digest_id)
            .map_err(|_| Status::not_found(format!("no digest id {:#x}", d.digest_id)))?;
        self.digests.configure(t, d)
    }

    /// Resolves a hit or the default into the action to run; `hash` picks
    /// among weighted group members.
    pub fn resolve(&self, table_id: u32, a: &p4::TableAction, hash: u64) -> Option<p4::Action> {
        let implementation = self.tables.get(&table_id)?.info.implementation_id;
        let p = self.profiles.get(&implementation);
        match a.r#type.as_ref()? {
            Act::Action(a) => Some(a.clone()),
            Act::ActionProfileMemberId(m) => p?.members.get(m).cloned(),
            Act::ActionProfileGroupId(g) => {
                let p = p?;
                let items: Vec<(u32, i32)> =
                    p.groups.get(g)?.members.iter().map(|m| (m.member_id, m.weight)).collect();
                p.members.get(&profile::pick_weighted(&items, hash)?).cloned()
            }
            Act::ActionProfileActionSet(set) => {
                let items: Vec<(p4::Action, i32)> = set
                    .action_profile_actions
                    .iter()
                    .filter_map(|a| Some((a.action.clone()?, a.weight)))
                    .collect();
                profile::pick_weighted(&items, hash)
            }
        }
    }
}

fn upsert<T>(map: &mut HashMap<u32, T>, t: Up, id: u32, v: T, what: &str) -> Result<(), Status> {
    match (t, map.contains_key(&id)) {
        (Up::Insert, true) => Err(Status::already_exists(format!("{what} {id} exists"))),
        (Up::Modify | Up::Delete, false) => Err(Status::not_found(format!("no {what} {id}"))),
        (Up::Delete, true) => {
            map.remove(&id);
            Ok(())
        }
        _ => {
            map.insert(id, v);
            Ok(())
        }
    }
}
