//! Register access in batches: every cell a poll round needs in one
//! P4Runtime Read, every reset in one Write. A target whose P4Runtime
//! server answers UNIMPLEMENTED for registers (BMv2's PI) is served over
//! one Thrift connection per batch instead, reading a register whole when
//! the batch asks for more than a few of its cells.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::cells::{Cell, CellEntity, CellsRequest};
use super::{cells, Session, SessionError};
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

/// An asked cell: its register's id, bit width and full name, and its
/// index (`None`: every cell).
#[derive(Debug, Clone)]
struct Asked {
    id: u32,
    width: i32,
    name: Arc<str>,
    index: Option<i64>,
}

/// A register's id, bit width and name, checked against the P4Info, the
/// name shared by every cell asked of it.
fn resolve_shared(info: &P4Info, register: &str) -> Result<Asked, P4InfoError> {
    let r = info.register(register)?;
    let preamble = r.preamble.as_ref();
    let name = preamble.map(|p| p.name.as_str()).unwrap_or_default();
    let width = register_bitwidth(r).ok_or_else(|| P4InfoError::Usage {
        object: name.to_owned(),
        message: "only bit<W> registers are supported".into(),
    })?;
    Ok(Asked { id: preamble.map(|p| p.id).unwrap_or_default(), width, name: name.into(), index: None })
}

/// A batch of register cells, and other entities read with them (such as
/// counter cells), resolved and encoded once: a poll asks the same cells
/// every audit ([`Session::register_read`], [`Session::read_prepared`]).
#[derive(Debug, Clone)]
pub struct RegisterRead {
    asked: Vec<Asked>,
    request: CellsRequest,
    /// How many other entities the request asks after the register cells
    /// (a target that serves registers only over Thrift has them read on
    /// their own, from the request).
    others: usize,
}

impl RegisterRead {
    /// How many register cells it asks.
    pub fn cells(&self) -> usize {
        self.asked.len()
    }

    /// How many other entities it reads with them.
    pub fn others(&self) -> usize {
        self.others
    }
}

/// [`resolve_shared`], the name as a `String`.
pub(super) fn resolve(info: &P4Info, register: &str) -> Result<(u32, i32, String), P4InfoError> {
    let Asked { id, width, name, .. } = resolve_shared(info, register)?;
    Ok((id, width, name.to_string()))
}

impl Session {
    /// Reads every cell of `cells` with one Read RPC (or, where registers
    /// are not served over P4Runtime, one Thrift connection).
    pub async fn read_registers(
        &self,
        info: &P4Info,
        cells: &[RegisterCell<'_>],
    ) -> Result<RegisterValues, SessionError> {
        Ok(self.read_registers_with(info, cells, Vec::new()).await?.0)
    }

    /// Like [`Session::read_registers`], and the `extra` entities (counter
    /// cells) in the same Read: one request per round instead of one per
    /// kind. Returns the register values and the counter entries read for
    /// `extra`. Where registers are not served over P4Runtime, the extras
    /// are read on their own.
    pub async fn read_registers_with(
        &self,
        info: &P4Info,
        cells: &[RegisterCell<'_>],
        extra: Vec<p4::Entity>,
    ) -> Result<(RegisterValues, Vec<p4::CounterEntry>), SessionError> {
        self.read_prepared(&self.register_read(info, cells, extra)?).await
    }

    /// Resolves `cells` against the P4Info and encodes their Read (with
    /// `extra`) for [`Session::read_prepared`], once for as many rounds as
    /// ask the same cells.
    pub fn register_read(
        &self,
        info: &P4Info,
        cells: &[RegisterCell<'_>],
        extra: Vec<p4::Entity>,
    ) -> Result<RegisterRead, SessionError> {
        let mut asked: Vec<Asked> = Vec::with_capacity(cells.len());
        let mut entities = Vec::with_capacity(cells.len() + extra.len());
        // A round asks many cells of few registers: each is resolved once.
        let mut resolved: Vec<(&str, Asked)> = Vec::new();
        for c in cells {
            let r = match resolved.iter().find(|(n, _)| *n == c.register) {
                Some((_, r)) => r.clone(),
                None => {
                    let r = resolve_shared(info, c.register)?;
                    resolved.push((c.register, r.clone()));
                    r
                }
            };
            entities.push(register_read(r.id, c.index));
            asked.push(Asked { index: c.index, ..r });
        }
        let others = extra.len();
        entities.extend(extra);
        let request = CellsRequest::new(&p4::ReadRequest {
            device_id: self.device_id(),
            role: self.cfg.role.clone(),
            entities,
        });
        Ok(RegisterRead { asked, request, others })
    }

    /// Reads a prepared batch: the register values of every asked cell, in
    /// order, and the counter entries its other entities read.
    pub async fn read_prepared(
        &self,
        read: &RegisterRead,
    ) -> Result<(RegisterValues, Vec<p4::CounterEntry>), SessionError> {
        match self.read_cells(read.request.clone()).await {
            Ok(got) => {
                let mut registers = Vec::with_capacity(read.asked.len());
                let mut counters = Vec::new();
                for e in got {
                    match e.cell {
                        Some(Cell::Register(r)) => registers.push(r),
                        Some(Cell::Counter(c)) => counters.push(c),
                        None => {}
                    }
                }
                Ok((sort_answers(&read.asked, registers), counters))
            }
            Err(e) if Self::unimplemented(&e) => {
                let values = self.read_registers_thrift(&read.asked, e).await?;
                let others = match read.others {
                    0 => Vec::new(),
                    n => {
                        let entities = read.request.entities(self.device_id())?;
                        self.read(entities[entities.len().saturating_sub(n)..].to_vec()).await?
                    }
                };
                let counters = others
                    .into_iter()
                    .filter_map(|e| match CellEntity::from(e).cell {
                        Some(Cell::Counter(c)) => Some(c),
                        _ => None,
                    })
                    .collect();
                Ok((values, counters))
            }
            Err(e) => Err(e),
        }
    }

    /// One Read of a prepared request, every answer message collected;
    /// waiting for each has the RPC deadline, as [`Session::read`] does.
    async fn read_cells(&self, request: CellsRequest) -> Result<Vec<CellEntity>, SessionError> {
        let device_id = self.device_id();
        let timeout = self.cfg.rpc_timeout;
        let mut stream = self.call("Read", cells::send(self.channel.clone(), self.request(request))).await?;
        let mut out = Vec::new();
        while let Some(r) = super::next_read_message(&mut stream, device_id, timeout).await {
            out.extend(r?.entities);
        }
        Ok(out)
    }

    async fn read_registers_thrift(
        &self,
        asked: &[Asked],
        unimplemented: SessionError,
    ) -> Result<RegisterValues, SessionError> {
        let Some(mut t) = self.thrift().await? else { return Err(unimplemented) };
        let device_id = self.device_id();
        let thrift = |source| SessionError::Thrift { device_id, source };
        tracing::debug!(device_id, cells = asked.len(), "register batch read over Thrift");
        // How many cells the batch asks of each register.
        let mut per_register: BTreeMap<&str, usize> = BTreeMap::new();
        for Asked { name, index, .. } in asked {
            let n = per_register.entry(name.as_ref()).or_default();
            *n = n.saturating_add(if index.is_some() { 1 } else { usize::MAX / 2 });
        }
        let mut whole: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        for (name, n) in &per_register {
            if *n > THRIFT_WHOLE_ABOVE {
                whole.insert(name, t.register_read_all(name).await.map_err(thrift)?);
            }
        }
        let mut out = Vec::with_capacity(asked.len());
        for Asked { name, index, .. } in asked {
            let (name, index) = (name.as_ref(), *index);
            // BMv2 registers hold at most 64 bits; Thrift carries them as i64.
            let v = |x: i64| x as u64 as u128;
            let cells = match (whole.get(name), index) {
                (Some(all), None) => all.iter().enumerate().map(|(i, x)| (i as i64, v(*x))).collect(),
                (Some(all), Some(i)) => usize::try_from(i)
                    .ok()
                    .and_then(|u| all.get(u))
                    .map(|x| vec![(i, v(*x))])
                    .unwrap_or_default(),
                (None, Some(i)) => {
                    let x =
                        t.register_read(name, i32::try_from(i).unwrap_or(i32::MAX)).await.map_err(thrift)?;
                    vec![(i, v(x))]
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

/// The Read of one register cell (or every cell, `index` `None`).
fn register_read(register_id: u32, index: Option<i64>) -> p4::Entity {
    p4::Entity {
        entity: Some(p4::entity::Entity::RegisterEntry(p4::RegisterEntry {
            register_id,
            index: index.map(|index| p4::Index { index }),
            ..Default::default()
        })),
    }
}

/// Sorts a Read's answer into the cells asked: each register entry goes to
/// every asked cell it matches (its register, and its index or all). The
/// cells are looked up by (register, index), not scanned per entry: a
/// round asks two cells per port and gets as many entries back.
fn sort_answers(asked: &[Asked], got: Vec<p4::RegisterEntry>) -> RegisterValues {
    let mut out: RegisterValues =
        asked.iter().map(|a| Vec::with_capacity(usize::from(a.index.is_some()))).collect();
    let mut exact: Vec<(u32, i64, usize)> =
        asked.iter().enumerate().filter_map(|(slot, a)| Some((a.id, a.index?, slot))).collect();
    exact.sort_unstable();
    let whole: Vec<usize> = (0..asked.len()).filter(|&slot| asked[slot].index.is_none()).collect();
    for r in got {
        let Some(index) = r.index.map(|i| i.index) else { continue };
        let Some(p4::p4_data::Data::Bitstring(b)) = r.data.and_then(|d| d.data) else { continue };
        let key = (r.register_id, index);
        let from = exact.partition_point(|&(id, i, _)| (id, i) < key);
        let matching =
            exact[from..].iter().take_while(|&&(id, i, _)| (id, i) == key).map(|&(_, _, slot)| slot);
        let wildcards = whole.iter().copied().filter(|&slot| asked[slot].id == r.register_id);
        for slot in matching.chain(wildcards) {
            if let Ok(v) = codec::decode_u128(&b, asked[slot].width) {
                out[slot].push((index, v));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(id: u32, index: Option<i64>) -> Asked {
        Asked { id, width: 32, name: "r".into(), index }
    }

    /// The register entries of an answer, as `read_prepared` splits them off.
    fn registers(got: &[p4::Entity]) -> Vec<p4::RegisterEntry> {
        got.iter()
            .filter_map(|e| match CellEntity::from(e.clone()).cell {
                Some(Cell::Register(r)) => Some(r),
                _ => None,
            })
            .collect()
    }

    fn entry(id: u32, index: i64, value: u32) -> p4::Entity {
        p4::Entity {
            entity: Some(p4::entity::Entity::RegisterEntry(p4::RegisterEntry {
                register_id: id,
                index: Some(p4::Index { index }),
                data: Some(p4::P4Data {
                    data: Some(p4::p4_data::Data::Bitstring(codec::encode(u128::from(value), 32).unwrap())),
                }),
            })),
        }
    }

    /// The scan it replaced: every entry against every asked cell.
    fn by_scan(asked: &[Asked], got: &[p4::Entity]) -> RegisterValues {
        let mut out: RegisterValues = vec![Vec::new(); asked.len()];
        for e in got {
            let Some(p4::entity::Entity::RegisterEntry(r)) = &e.entity else { continue };
            let Some(index) = r.index.map(|i| i.index) else { continue };
            let Some(p4::p4_data::Data::Bitstring(b)) = r.data.as_ref().and_then(|d| d.data.as_ref()) else {
                continue;
            };
            for (slot, a) in out.iter_mut().zip(asked) {
                if a.id == r.register_id && a.index.is_none_or(|i| i == index) {
                    slot.push((index, codec::decode_u128(b, a.width).unwrap()));
                }
            }
        }
        out
    }

    #[test]
    fn answers_go_to_every_cell_they_match_in_the_order_they_came() {
        // Cells out of order, one asked twice, one register asked whole,
        // one cell nobody answers.
        let asked = [cell(7, Some(3)), cell(5, Some(1)), cell(7, Some(3)), cell(5, None), cell(9, Some(0))];
        let got = vec![
            entry(5, 2, 20),
            entry(7, 3, 73),
            p4::Entity { entity: Some(p4::entity::Entity::CounterEntry(p4::CounterEntry::default())) },
            entry(5, 1, 10),
            entry(8, 3, 99), // a register nobody asked for
            entry(7, 4, 74), // an index nobody asked for
        ];
        let out = sort_answers(&asked, registers(&got));
        assert_eq!(out, vec![vec![(3, 73)], vec![(1, 10)], vec![(3, 73)], vec![(2, 20), (1, 10)], vec![]]);
        assert_eq!(out, by_scan(&asked, &got));
    }

    #[test]
    fn a_poll_round_sorts_as_the_scan_did() {
        // Two registers, two cells a port, answers in reverse.
        let asked: Vec<Asked> = (0..48).flat_map(|p| [cell(11, Some(p)), cell(12, Some(p))]).collect();
        let got: Vec<p4::Entity> =
            (0..48).rev().flat_map(|p| [entry(12, p, p as u32 * 2), entry(11, p, p as u32)]).collect();
        let out = sort_answers(&asked, registers(&got));
        assert_eq!(out, by_scan(&asked, &got));
        assert_eq!((out[0].as_slice(), out[95].as_slice()), (&[(0, 0)][..], &[(47, 94)][..]));
    }
}
