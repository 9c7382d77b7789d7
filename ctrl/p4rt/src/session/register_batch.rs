//! Register access in batches: every cell a poll round needs in one
//! P4Runtime Read, every reset in one Write. A target whose P4Runtime
//! server answers UNIMPLEMENTED for registers (BMv2's PI) is served over
//! one Thrift connection per batch instead, reading a register whole when
//! the batch asks for more than a few of its cells.

use std::collections::BTreeMap;

use super::{Session, SessionError};
use crate::codec;
use crate::entity::register_bitwidth;
use crate::p4info::{P4Info, P4InfoError};
use crate::proto::p4::v1 as p4;

/// Over Thrift, a register with more cells than this asked of it in one
/// batch is read whole (one call) instead of cell by cell.
const THRIFT_WHOLE_ABOVE: usize = 4;

/// A register cell, or every cell of it (`index` `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisterCell<'a> {
    pub register: &'a str,
    pub index: Option<i64>,
}

/// What a batched read returns: for each asked [`RegisterCell`], in order,
/// its `(index, value)` pairs.
pub type RegisterValues = Vec<Vec<(i64, u128)>>;

/// A register's id, bit width and name, checked against the P4Info.
pub(super) fn resolve(info: &P4Info, register: &str) -> Result<(u32, i32, String), P4InfoError> {
    let r = info.register(register)?;
    let name = crate::p4info::name_of(r);
    let w = register_bitwidth(r).ok_or_else(|| P4InfoError::Usage {
        object: name.clone(),
        message: "only bit<W> registers are supported".into(),
    })?;
    Ok((r.preamble.as_ref().map(|p| p.id).unwrap_or_default(), w, name))
}

impl Session {
    /// Reads every cell of `cells` with one Read RPC (or, where registers
    /// are not served over P4Runtime, one Thrift connection).
    pub async fn read_registers(
        &self,
        info: &P4Info,
        cells: &[RegisterCell<'_>],
    ) -> Result<RegisterValues, SessionError> {
        let mut asked = Vec::with_capacity(cells.len());
        let mut entities = Vec::with_capacity(cells.len());
        for c in cells {
            let (id, w, name) = resolve(info, c.register)?;
            asked.push((id, w, name, c.index));
            entities.push(info.register_entry(c.register, c.index, None)?.into());
        }
        match self.read(entities).await {
            Ok(got) => Ok(sort_answers(&asked, got)),
            Err(e) if Self::unimplemented(&e) => self.read_registers_thrift(&asked, e).await,
            Err(e) => Err(e),
        }
    }

    async fn read_registers_thrift(
        &self,
        asked: &[(u32, i32, String, Option<i64>)],
        unimplemented: SessionError,
    ) -> Result<RegisterValues, SessionError> {
        let Some(mut t) = self.thrift().await? else { return Err(unimplemented) };
        let device_id = self.device_id();
        let thrift = |source| SessionError::Thrift { device_id, source };
        tracing::debug!(device_id, cells = asked.len(), "register batch read over Thrift");
        // How many cells the batch asks of each register.
        let mut per_register: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, _, name, index) in asked {
            let n = per_register.entry(name).or_default();
            *n = n.saturating_add(if index.is_some() { 1 } else { usize::MAX / 2 });
        }
        let mut whole: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for (name, n) in &per_register {
            if *n > THRIFT_WHOLE_ABOVE {
                whole.insert(name, t.register_read_all(name).await.map_err(thrift)?);
            }
        }
        let mut out = Vec::with_capacity(asked.len());
        for (_, _, name, index) in asked {
            // BMv2 registers hold at most 64 bits; Thrift carries them as i64.
            let v = |x: i64| x as u64 as u128;
            let cells = match (whole.get(name.as_str()), index) {
                (Some(all), None) => all.iter().enumerate().map(|(i, x)| (i as i64, v(*x))).collect(),
                (Some(all), Some(i)) => usize::try_from(*i)
                    .ok()
                    .and_then(|u| all.get(u))
                    .map(|x| vec![(*i, v(*x))])
                    .unwrap_or_default(),
                (None, Some(i)) => {
                    let x =
                        t.register_read(name, i32::try_from(*i).unwrap_or(i32::MAX)).await.map_err(thrift)?;
                    vec![(*i, v(x))]
                }
                (None, None) => {
                    let all = t.register_read_all(name).await.map_err(thrift)?;
                    all.into_iter().enumerate().map(|(i, x)| (i as i64, v(x))).collect()
                }
            };
            out.push(cells);
        }
        Ok(out)
    }

    /// Writes every `(register, index, value)` of `cells` with one Write
    /// RPC (or, where registers are not served over P4Runtime, one Thrift
    /// connection).
    pub async fn write_registers(
        &self,
        info: &P4Info,
        cells: &[(RegisterCell<'_>, u128)],
    ) -> Result<(), SessionError> {
        if cells.is_empty() {
            return Ok(());
        }
        let mut updates = Vec::with_capacity(cells.len());
        for (c, value) in cells {
            let entry = info.register_entry(c.register, c.index, Some((*value).into()))?;
            updates.push(crate::entity::modify(entry));
        }
        let e = match self.write(updates).await {
            Err(e) if Self::unimplemented(&e) => e,
            other => return other,
        };
        let Some(mut t) = self.thrift().await? else { return Err(e) };
        let device_id = self.device_id();
        let thrift = |source| SessionError::Thrift { device_id, source };
        for (c, value) in cells {
            let (_, _, name) = resolve(info, c.register)?;
            let v = u64::try_from(*value).map_err(|_| P4InfoError::Usage {
                object: name.clone(),
                message: format!("value {value} does not fit BMv2's 64-bit register API"),
            })? as i64;
            let indexes: Vec<i64> = match c.index {
                Some(i) => vec![i],
                None => (0..i64::from(info.register(c.register)?.size)).collect(),
            };
            for i in indexes {
                t.register_write(&name, i32::try_from(i).unwrap_or(i32::MAX), v).await.map_err(thrift)?;
            }
        }
        Ok(())
    }
}

/// Sorts a Read's answer into the cells asked: each register entry goes to
/// every asked cell it matches (its register, and its index or all).
fn sort_answers(asked: &[(u32, i32, String, Option<i64>)], got: Vec<p4::Entity>) -> RegisterValues {
    let mut out: RegisterValues = vec![Vec::new(); asked.len()];
    for e in got {
        let Some(p4::entity::Entity::RegisterEntry(r)) = e.entity else { continue };
        let Some(index) = r.index.map(|i| i.index) else { continue };
        let Some(p4::p4_data::Data::Bitstring(b)) = r.data.and_then(|d| d.data) else { continue };
        for (slot, (id, w, _, want)) in out.iter_mut().zip(asked) {
            if *id != r.register_id || want.is_some_and(|i| i != index) {
                continue;
            }
            if let Ok(v) = codec::decode_u128(&b, *w) {
                slot.push((index, v));
            }
        }
    }
    out
}
