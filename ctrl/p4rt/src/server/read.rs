//! Read requests against the in-process switch: wildcards per §11.

use tonic::Status;

use super::state::State;
use crate::proto::p4::v1 as p4;

use p4::entity::Entity as E;

impl State {
    pub fn read(&self, e: &p4::Entity, out: &mut Vec<p4::Entity>) -> Result<(), Status> {
        match e.entity.as_ref() {
            Some(E::TableEntry(t)) => self.read_tables(t, out),
            Some(E::ActionProfileMember(m)) => {
                for (pid, p) in self
                    .profiles
                    .iter()
                    .filter(|(id, _)| m.action_profile_id == 0 || **id == m.action_profile_id)
                {
                    for (id, a) in p.members.iter().filter(|(id, _)| m.member_id == 0 || **id == m.member_id)
                    {
                        out.push(
                            p4::ActionProfileMember {
                                action_profile_id: *pid,
                                member_id: *id,
                                action: Some(a.clone()),
                            }
                            .into(),
                        );
                    }
                }
                Ok(())
            }
            Some(E::ActionProfileGroup(g)) => {
                for (_, p) in self
                    .profiles
                    .iter()
                    .filter(|(id, _)| g.action_profile_id == 0 || **id == g.action_profile_id)
                {
                    out.extend(
                        p.groups
                            .values()
                            .filter(|x| g.group_id == 0 || x.group_id == g.group_id)
                            .cloned()
                            .map(Into::into),
                    );
                }
                Ok(())
            }
            Some(E::CounterEntry(c)) => self.read_counters(c, out),
            Some(E::DirectCounterEntry(c)) => {
                let Some(t) = &c.table_entry else {
                    return Err(Status::invalid_argument("direct counter without table entry"));
                };
                let mut entries = vec![];
                self.read_tables(t, &mut entries)?;
                out.extend(entries.into_iter().filter_map(|e| match e.entity {
                    Some(E::TableEntry(mut te)) => {
                        let data = te.counter_data.take();
                        Some(p4::DirectCounterEntry { table_entry: Some(te), data }.into())
                    }
                    _ => None,
                }));
                Ok(())
            }
            Some(E::RegisterEntry(r)) => self.read_registers(r, out),
            Some(E::PacketReplicationEngineEntry(p)) => {
                use p4::packet_replication_engine_entry::Type as Pre;
                let wrap = |t: Pre| p4::Entity {
                    entity: Some(E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
                        r#type: Some(t),
                    })),
                };
                match p.r#type.as_ref() {
                    Some(Pre::CloneSessionEntry(c)) => out.extend(
                        self.clone_sessions
                            .values()
                            .filter(|s| c.session_id == 0 || s.session_id == c.session_id)
                            .cloned()
                            .map(|s| wrap(Pre::CloneSessionEntry(s))),
                    ),
                    Some(Pre::MulticastGroupEntry(m)) => out.extend(
                        self.multicast
                            .values()
                            .filter(|g| {
                                m.multicast_group_id == 0 || g.multicast_group_id == m.multicast_group_id
                            })
                            .cloned()
                            .map(|g| wrap(Pre::MulticastGroupEntry(g))),
                    ),
                    None => return Err(Status::invalid_argument("empty replication entry")),
                }
                Ok(())
            }
            Some(E::DigestEntry(d)) => {
                out.extend(self.digests.entries(d.digest_id).into_iter().map(Into::into));
                Ok(())
            }
            Some(_) => Err(Status::unimplemented("entity type not supported by this switch")),
            None => Err(Status::invalid_argument("read of an empty entity")),
        }
    }

    fn read_tables(&self, t: &p4::TableEntry, out: &mut Vec<p4::Entity>) -> Result<(), Status> {
        if t.table_id != 0 && !self.tables.contains_key(&t.table_id) {
            return Err(Status::not_found(format!("no table id {:#x}", t.table_id)));
        }
        for (id, table) in self.tables.iter().filter(|(id, _)| t.table_id == 0 || **id == t.table_id) {
            if t.is_default_action {
                let action = table
                    .default_action
                    .clone()
                    .map(|a| p4::TableAction { r#type: Some(p4::table_action::Type::Action(a)) });
                out.push(
                    p4::TableEntry { table_id: *id, action, is_default_action: true, ..Default::default() }
                        .into(),
                );
                continue;
            }
            let with_counter = |i: &super::table::Installed| {
                let mut e = i.entry.clone();
                if table.has_direct_counter {
                    e.counter_data = Some(i.counter);
                }
                p4::Entity::from(e)
            };
            if t.r#match.is_empty() {
                out.extend(table.entries.values().map(|i| with_counter(i)));
            } else {
                let key = table.canonical_match(&t.r#match, t.priority)?;
                out.extend(table.entries.get(&key).map(|i| with_counter(i)));
            }
        }
        Ok(())
    }

    fn read_counters(&self, c: &p4::CounterEntry, out: &mut Vec<p4::Entity>) -> Result<(), Status> {
        if c.counter_id != 0 && !self.counters.contains_key(&c.counter_id) {
            return Err(Status::not_found(format!("no counter id {:#x}", c.counter_id)));
        }
        for (id, cells) in self.counters.iter().filter(|(id, _)| c.counter_id == 0 || **id == c.counter_id) {
            let entry = |i: usize, d: &p4::CounterData| {
                p4::CounterEntry {
                    counter_id: *id,
                    index: Some(p4::Index { index: i64::try_from(i).unwrap_or(-1) }),
                    data: Some(*d),
                }
                .into()
            };
            match c.index {
                None => out.extend(cells.iter().enumerate().map(|(i, d)| entry(i, d))),
                Some(p4::Index { index }) => {
                    let i = usize::try_from(index).ok().filter(|i| *i < cells.len());
                    let i = i.ok_or_else(|| {
                        Status::out_of_range(format!("counter index {index} not in 0..{}", cells.len()))
                    })?;
                    out.push(entry(i, &cells[i]));
                }
            }
        }
        Ok(())
    }

    fn read_registers(&self, r: &p4::RegisterEntry, out: &mut Vec<p4::Entity>) -> Result<(), Status> {
        if !self.registers_via_p4runtime {
            return Err(Status::unimplemented("register reads are not supported over P4Runtime"));
        }
        if r.register_id != 0 && !self.registers.contains_key(&r.register_id) {
            return Err(Status::not_found(format!("no register id {:#x}", r.register_id)));
        }
        for (id, cells) in self.registers.iter().filter(|(id, _)| r.register_id == 0 || **id == r.register_id)
        {
            let entry = |i: usize, v: Vec<u8>| {
                p4::RegisterEntry {
                    register_id: *id,
                    index: Some(p4::Index { index: i64::try_from(i).unwrap_or(-1) }),
                    data: Some(p4::P4Data { data: Some(p4::p4_data::Data::Bitstring(v)) }),
                }
                .into()
            };
            match r.index {
                None => out.extend(cells.iter().enumerate().map(|(i, v)| entry(i, v))),
                Some(p4::Index { index }) => {
                    let cell = usize::try_from(index).ok().and_then(|i| Some((i, cells.get(i)?)));
                    let (i, v) = cell.ok_or_else(|| {
                        Status::out_of_range(format!("register index {index} not in 0..{}", cells.len()))
                    })?;
                    out.push(entry(i, v));
                }
            }
        }
        Ok(())
    }
}
