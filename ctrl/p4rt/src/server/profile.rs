//! Action validation, action profiles (members and weighted groups) and
//! weighted member selection for the in-process switch.

use super::FastMap;

use tonic::Status;

use crate::codec;
use crate::p4info::P4Info;
use crate::proto::p4::config::v1 as cfg;
use crate::proto::p4::v1 as p4;

#[derive(Debug, Default)]
pub(crate) struct Profile {
    pub members: FastMap<u32, p4::Action>,
    pub groups: FastMap<u32, p4::ActionProfileGroup>,
    /// How many groups and table entries use each member / group.
    pub member_refs: FastMap<u32, usize>,
    pub group_refs: FastMap<u32, usize>,
}

/// Checks an action against the P4Info and returns it canonical.
pub(crate) fn check_action(info: &P4Info, a: &p4::Action) -> Result<p4::Action, Status> {
    let decl = info
        .actions
        .by_id(a.action_id)
        .map_err(|_| Status::invalid_argument(format!("unknown action id {:#x}", a.action_id)))?;
    let name = decl.preamble.as_ref().map(|p| p.name.as_str()).unwrap_or("?");
    if a.params.len() != decl.params.len() {
        return Err(Status::invalid_argument(format!(
            "action {name} takes {} parameters, got {}",
            decl.params.len(),
            a.params.len()
        )));
    }
    let mut params = Vec::with_capacity(a.params.len());
    for p in &a.params {
        let d = decl.params.iter().find(|d| d.id == p.param_id).ok_or_else(|| {
            Status::invalid_argument(format!("action {name}: no parameter id {}", p.param_id))
        })?;
        if params.iter().any(|q: &p4::action::Param| q.param_id == p.param_id) {
            return Err(Status::invalid_argument(format!("action {name}: parameter {} twice", d.name)));
        }
        let value = codec::canonical(&p.value, d.bitwidth).map_err(|e| match e {
            codec::ValueError::TooWide { .. } => {
                Status::out_of_range(format!("action {name} param {}: {e}", d.name))
            }
            e => Status::invalid_argument(format!("action {name} param {}: {e}", d.name)),
        })?;
        params.push(p4::action::Param { param_id: p.param_id, value });
    }
    params.sort_by_key(|p| p.param_id);
    Ok(p4::Action { action_id: a.action_id, params })
}

/// Checks that `action_id` may be used by `table` in the given scope.
pub(crate) fn check_scope(table: &cfg::Table, action_id: u32, default: bool) -> Result<(), Status> {
    use cfg::action_ref::Scope;
    let name = table.preamble.as_ref().map(|p| p.name.as_str()).unwrap_or("?");
    let r = table.action_refs.iter().find(|r| r.id == action_id).ok_or_else(|| {
        Status::invalid_argument(format!("action {action_id:#x} is not an action of table {name}"))
    })?;
    match (Scope::try_from(r.scope).unwrap_or(Scope::TableAndDefault), default) {
        (Scope::DefaultOnly, false) => {
            Err(Status::invalid_argument(format!("action {action_id:#x} is default-only in table {name}")))
        }
        (Scope::TableOnly, true) => Err(Status::invalid_argument(format!(
            "action {action_id:#x} cannot be the default of table {name}"
        ))),
        _ => Ok(()),
    }
}

impl Profile {
    /// Checks a group against its profile's limits and its members.
    pub fn check_group(&self, decl: &cfg::ActionProfile, g: &p4::ActionProfileGroup) -> Result<(), Status> {
        if !decl.with_selector {
            return Err(Status::invalid_argument("action profile has no selector; groups are not allowed"));
        }
        let limit = if g.max_size > 0 { g.max_size } else { decl.max_group_size };
        if decl.max_group_size > 0 && g.max_size > decl.max_group_size {
            return Err(Status::resource_exhausted(format!(
                "group {}: max_size {} exceeds the profile's max_group_size {}",
                g.group_id, g.max_size, decl.max_group_size
            )));
        }
        let mut total = 0i64;
        for m in &g.members {
            if m.weight < 1 {
                return Err(Status::invalid_argument(format!(
                    "group {}: member {} weight {}",
                    g.group_id, m.member_id, m.weight
                )));
            }
            if decl.weights_disallowed && m.weight != 1 {
                return Err(Status::invalid_argument("this action profile does not allow weights"));
            }
            if !self.members.contains_key(&m.member_id) {
                return Err(Status::not_found(format!("group {}: no member {}", g.group_id, m.member_id)));
            }
            if g.members.iter().filter(|o| o.member_id == m.member_id).count() > 1 {
                return Err(Status::invalid_argument(format!(
                    "group {}: member {} twice",
                    g.group_id, m.member_id
                )));
            }
            total += i64::from(m.weight);
        }
        if limit > 0 && total > i64::from(limit) {
            return Err(Status::resource_exhausted(format!(
                "group {}: total weight {total} exceeds max size {limit}",
                g.group_id
            )));
        }
        Ok(())
    }

    pub fn add_group_refs(&mut self, g: &p4::ActionProfileGroup, delta: isize) {
        for m in &g.members {
            bump(&mut self.member_refs, m.member_id, delta);
        }
    }
}

pub(crate) fn bump(map: &mut FastMap<u32, usize>, id: u32, delta: isize) {
    let e = map.entry(id).or_default();
    *e = e.saturating_add_signed(delta);
    if *e == 0 {
        map.remove(&id);
    }
}

/// Picks from weighted candidates by hash: each candidate owns `weight`
/// consecutive buckets of `hash % total`.
pub(crate) fn pick_weighted<T: Clone>(items: &[(T, i32)], hash: u64) -> Option<T> {
    let total: u64 = items.iter().map(|(_, w)| u64::try_from(*w).unwrap_or(0)).sum();
    if total == 0 {
        return None;
    }
    let mut bucket = hash % total;
    for (item, w) in items {
        let w = u64::try_from(*w).unwrap_or(0);
        if bucket < w {
            return Some(item.clone());
        }
        bucket -= w;
    }
    None
}
