//! Entries to P4Runtime entities and back, by the ids resolved at start-up.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use metaroce_p4rt::codec::{decode_u128, Bits};
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::{P4Info, P4InfoError};

use crate::contract::{DIGEST_FIELDS, DRAIN_PAIR_DIGEST_FIELDS, LARGE_FLOW_DIGEST_FIELDS};
use crate::entry::{Entry, FlowKey, RouteTarget};
use crate::names as n;
use crate::{Counter, DrainPairDigest, DrainPairKind, LargeFlowDigest, PipelineError, QueueDigest};

use p4::entity::Entity as E;
use p4::field_match::FieldMatchType as M;

/// Object ids of the loaded program.
#[derive(Debug, Clone)]
pub(crate) struct Ids {
    pub info: P4Info,
    tables: HashMap<u32, &'static str>,
    by_table: HashMap<&'static str, u32>,
    profile: u32,
    pub digest: u32,
    pub large_flow_digest: u32,
    /// `drain_pair_digest_t`, when the program carries the drain rule.
    pub drain_pair_digest: Option<u32>,
    counters: HashMap<u32, Counter>,
}

const OUR_TABLES: &[&str] = &[
    n::CONFIG,
    n::INGRESS_PORT_ROLE,
    n::INT_WATCHLIST,
    n::IPV4_LPM,
    n::NHOP_GROUP,
    n::PORT_DOWN,
    n::NHOP,
    n::STEER_FLOW,
    n::STEER_PAIR,
    n::LARGE_FLOW_CONFIG,
    n::EGRESS_CONFIG,
    n::EGRESS_PORT_CONFIG,
    n::REPORT_CONFIG,
];

const KEYLESS: &[&str] = &[n::CONFIG, n::LARGE_FLOW_CONFIG, n::EGRESS_CONFIG, n::REPORT_CONFIG];

/// The drain rule's tables: read and written where the program has them
/// (both programs do; a program without the rule is read without them).
const DRAIN_TABLES: &[&str] = &[n::DRAIN_CONFIG, n::QP_PAIR];

impl Ids {
    pub fn resolve(info: &P4Info) -> Result<Self, P4InfoError> {
        let mut tables = HashMap::new();
        let mut by_table = HashMap::new();
        for t in OUR_TABLES {
            let id = info.tables.id_of(t)?;
            tables.insert(id, *t);
            by_table.insert(*t, id);
        }
        let drain = info.tables.id_of(n::DRAIN_CONFIG).is_ok();
        if drain {
            for t in DRAIN_TABLES {
                let id = info.tables.id_of(t)?;
                tables.insert(id, *t);
                by_table.insert(*t, id);
            }
        }
        let mut counters = HashMap::new();
        for (name, c) in [
            (n::DROP_REASONS, Counter::DropReasons),
            (n::NEW_FLOWLETS, Counter::NewFlowlets),
            (n::ECN_MARKS, Counter::EcnMarks),
            (n::REPORTS_SENT, Counter::ReportsSent),
            (n::STEERED, Counter::Steered),
        ] {
            counters.insert(info.counters.id_of(name)?, c);
        }
        Ok(Ids {
            info: info.clone(),
            tables,
            by_table,
            profile: info.action_profiles.id_of(n::NHOP_SELECTOR)?,
            digest: info.digests.id_of(n::QUEUE_DIGEST)?,
            large_flow_digest: info.digests.id_of(n::LARGE_FLOW_DIGEST)?,
            drain_pair_digest: if drain { Some(info.digests.id_of(n::DRAIN_PAIR_DIGEST)?) } else { None },
            counters,
        })
    }

    pub fn counter_of(&self, id: u32) -> Option<Counter> {
        self.counters.get(&id).copied()
    }

    pub fn read_requests(&self) -> Vec<p4::Entity> {
        let has = |t: &&&str| self.by_table.contains_key(**t);
        let keyed = OUR_TABLES.iter().chain([n::QP_PAIR].iter()).filter(has).filter(|t| !KEYLESS.contains(t));
        let mut out: Vec<p4::Entity> = keyed
            .map(|t| p4::TableEntry { table_id: self.by_table[t], ..Default::default() }.into())
            .collect();
        out.extend(KEYLESS.iter().chain([n::DRAIN_CONFIG].iter()).filter(has).map(|t| {
            p4::Entity::from(p4::TableEntry {
                table_id: self.by_table[t],
                is_default_action: true,
                ..Default::default()
            })
        }));
        out.push(p4::ActionProfileMember { action_profile_id: self.profile, ..Default::default() }.into());
        out.push(p4::ActionProfileGroup { action_profile_id: self.profile, ..Default::default() }.into());
        out.push(p4::Entity {
            entity: Some(E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
                r#type: Some(p4::packet_replication_engine_entry::Type::CloneSessionEntry(
                    p4::CloneSessionEntry::default(),
                )),
            })),
        });
        out
    }

    pub fn parse(&self, entity: &p4::Entity) -> Result<Option<Entry>, PipelineError> {
        match entity.entity.as_ref() {
            Some(E::TableEntry(t)) => self.parse_table(t),
            Some(E::ActionProfileMember(m)) if m.action_profile_id == self.profile => {
                let a = m.action.as_ref().ok_or_else(|| bad("selector member", "no action"))?;
                let p = params(&self.info, a)?;
                Ok(Some(Entry::Member { id: m.member_id, nhop: get(&p, "nhop_id")? as u16 }))
            }
            Some(E::ActionProfileGroup(g)) if g.action_profile_id == self.profile => {
                let mut members: Vec<(u32, u32)> =
                    g.members.iter().map(|m| (m.member_id, m.weight.max(1) as u32)).collect();
                members.sort_unstable();
                Ok(Some(Entry::Group { id: g.group_id, members }))
            }
            Some(E::PacketReplicationEngineEntry(p)) => match p.r#type.as_ref() {
                Some(p4::packet_replication_engine_entry::Type::CloneSessionEntry(c)) => {
                    let port = match c.replicas.first().and_then(|r| r.port_kind.as_ref()) {
                        Some(p4::replica::PortKind::Port(b)) => {
                            decode_u128(b, 32).map_err(|e| bad("clone session", &e.to_string()))? as u32
                        }
                        _ => return Err(bad("clone session", "no replica port")),
                    };
                    Ok(Some(Entry::CloneSession { id: c.session_id, port }))
                }
                _ => Ok(None),
            },
            _ => Ok(None),
        }
    }

    fn parse_table(&self, t: &p4::TableEntry) -> Result<Option<Entry>, PipelineError> {
        let Some(&table) = self.tables.get(&t.table_id) else { return Ok(None) };
        let info = &self.info;
        let action = match t.action.as_ref().and_then(|a| a.r#type.as_ref()) {
            Some(p4::table_action::Type::Action(a)) => Some(a),
            Some(p4::table_action::Type::ActionProfileGroupId(g)) => {
                if table == n::NHOP_GROUP {
                    let key = exact(t, 1)?;
                    return Ok(Some(Entry::GroupEntry { id: key as u16, group: *g }));
                }
                return Err(bad(table, "unexpected selector group"));
            }
            _ => None,
        };
        let Some(a) = action else {
            // A keyless table's default before anything was written.
            if t.is_default_action {
                return Ok(None);
            }
            return Err(bad(table, "entry without a direct action"));
        };
        let aname = info.actions.by_id(a.action_id).map(metaroce_p4rt::p4info::name_of).unwrap_or_default();
        let p = params(info, a)?;
        let mac = |f: &str| -> Result<[u8; 6], PipelineError> {
            let v = get(&p, f)?.to_be_bytes();
            let mut m = [0u8; 6];
            m.copy_from_slice(&v[10..16]);
            Ok(m)
        };
        let e = match table {
            n::CONFIG if aname == n::CONFIGURE => Entry::Config {
                switch_id: get(&p, "switch_id")? as u32,
                flowlet_timeout_us: get(&p, "flowlet_timeout_us")? as u64,
            },
            n::EGRESS_CONFIG if aname == n::CONFIGURE_EGRESS => Entry::EgressConfig {
                digest_interval_us: get(&p, "digest_interval_us")? as u64,
                report_period_us: get(&p, "report_period_us")? as u64,
                latency_shift: get(&p, "latency_shift")? as u8,
            },
            n::REPORT_CONFIG if aname == n::SET_REPORT_ENCAP => Entry::ReportConfig {
                src_mac: mac("src_mac")?,
                dst_mac: mac("dst_mac")?,
                src_ip: Ipv4Addr::from(get(&p, "src_ip")? as u32),
                dst_ip: Ipv4Addr::from(get(&p, "dst_ip")? as u32),
                dst_port: get(&p, "dst_port")? as u16,
            },
            n::LARGE_FLOW_CONFIG if aname == n::CONFIGURE_LARGE_FLOWS => Entry::LargeFlowConfig {
                window_us: get(&p, "window_us")? as u32,
                threshold_bytes: get(&p, "threshold_bytes")? as u32,
            },
            n::DRAIN_CONFIG if aname == n::CONFIGURE_DRAIN => Entry::DrainConfig {
                enabled: get(&p, "enabled")? != 0,
                pair_interval_us: get(&p, "pair_interval_us")? as u32,
            },
            // A keyless table still holding p4c's default (NoAction): nothing of ours.
            n::CONFIG | n::EGRESS_CONFIG | n::REPORT_CONFIG | n::LARGE_FLOW_CONFIG | n::DRAIN_CONFIG => {
                return Ok(None)
            }
            n::QP_PAIR if aname == n::PAIR => Entry::QpPair {
                src: Ipv4Addr::from(exact(t, 1)? as u32),
                dst: Ipv4Addr::from(exact(t, 2)? as u32),
                ack_qp: exact(t, 3)? as u32,
                data_qp: get(&p, "data_qp")? as u32,
            },
            n::INGRESS_PORT_ROLE => Entry::EdgePort { port: exact(t, 1)? as u16 },
            n::INT_WATCHLIST => Entry::Watch {
                src: ternary32(t, 1)?,
                dst: ternary32(t, 2)?,
                l4_dst_port: {
                    let (v, m) = ternary(t, 3)?;
                    (v as u16, m as u16)
                },
                priority: t.priority,
                max_hops: get(&p, "max_hops")? as u8,
            },
            n::IPV4_LPM => {
                let (prefix, len) = lpm(t)?;
                let target = match aname.as_str() {
                    n::SET_GROUP => RouteTarget::Group(get(&p, "group_id")? as u16),
                    n::SET_NHOP => RouteTarget::Nhop(get(&p, "nhop_id")? as u16),
                    other => return Err(bad(table, &format!("route with action {other}"))),
                };
                Entry::Route { prefix, len, target }
            }
            n::PORT_DOWN => Entry::PortDown { port: exact(t, 1)? as u16 },
            n::STEER_FLOW if aname == n::STEER => Entry::SteerFlow {
                flow: FlowKey {
                    src: Ipv4Addr::from(exact(t, 1)? as u32),
                    dst: Ipv4Addr::from(exact(t, 2)? as u32),
                    sport: exact(t, 3)? as u16,
                    qp: exact(t, 4)? as u32,
                },
                nhop_id: get(&p, "nhop_id")? as u16,
                port: get(&p, "port")? as u16,
            },
            n::STEER_PAIR if aname == n::STEER => Entry::SteerPair {
                src: Ipv4Addr::from(exact(t, 1)? as u32),
                dst: Ipv4Addr::from(exact(t, 2)? as u32),
                nhop_id: get(&p, "nhop_id")? as u16,
                port: get(&p, "port")? as u16,
            },
            n::NHOP => Entry::Nhop {
                id: exact(t, 1)? as u16,
                port: get(&p, "port")? as u16,
                src_mac: mac("src_mac")?,
                dst_mac: mac("dst_mac")?,
            },
            n::EGRESS_PORT_CONFIG => Entry::EgressPort {
                port: exact(t, 1)? as u16,
                edge: get(&p, "edge")? != 0,
                mtu: get(&p, "mtu")? as u16,
                queue_high: get(&p, "queue_high")? as u32,
                queue_low: get(&p, "queue_low")? as u32,
                ecn_threshold: get(&p, "ecn_threshold")? as u32,
            },
            _ => return Err(bad(table, &format!("unexpected action {aname}"))),
        };
        Ok(Some(e))
    }
}

fn bad(what: &str, message: &str) -> PipelineError {
    PipelineError::Parse { what: what.to_owned(), message: message.to_owned() }
}

fn params(info: &P4Info, a: &p4::Action) -> Result<HashMap<String, u128>, PipelineError> {
    let action = info.actions.by_id(a.action_id).map_err(|e| bad("action", &e.to_string()))?;
    a.params
        .iter()
        .map(|p| {
            let spec = metaroce_p4rt::p4info::action_param_by_id(action, p.param_id)
                .map_err(|e| bad(&action_name(action), &e.to_string()))?;
            let v = decode_u128(&p.value, spec.bitwidth)
                .map_err(|e| bad(&action_name(action), &e.to_string()))?;
            Ok((spec.name.clone(), v))
        })
        .collect()
}

fn action_name(a: &metaroce_p4rt::proto::p4::config::v1::Action) -> String {
    metaroce_p4rt::p4info::name_of(a)
}

fn get(p: &HashMap<String, u128>, name: &str) -> Result<u128, PipelineError> {
    p.get(name).copied().ok_or_else(|| bad("action", &format!("parameter {name} missing")))
}

fn field(t: &p4::TableEntry, id: u32) -> Option<&M> {
    t.r#match.iter().find(|m| m.field_id == id).and_then(|m| m.field_match_type.as_ref())
}

fn exact(t: &p4::TableEntry, id: u32) -> Result<u128, PipelineError> {
    match field(t, id) {
        Some(M::Exact(e)) => decode_u128(&e.value, 128).map_err(|e| bad("exact key", &e.to_string())),
        _ => Err(bad("table entry", &format!("exact key field {id} missing"))),
    }
}

fn ternary(t: &p4::TableEntry, id: u32) -> Result<(u128, u128), PipelineError> {
    match field(t, id) {
        Some(M::Ternary(x)) => {
            let v = decode_u128(&x.value, 128).map_err(|e| bad("ternary key", &e.to_string()))?;
            let m = decode_u128(&x.mask, 128).map_err(|e| bad("ternary mask", &e.to_string()))?;
            Ok((v, m))
        }
        None => Ok((0, 0)), // omitted: don't care
        _ => Err(bad("table entry", &format!("field {id} is not ternary"))),
    }
}

fn ternary32(t: &p4::TableEntry, id: u32) -> Result<(Ipv4Addr, u32), PipelineError> {
    let (v, m) = ternary(t, id)?;
    Ok((Ipv4Addr::from(v as u32), m as u32))
}

fn lpm(t: &p4::TableEntry) -> Result<(Ipv4Addr, u8), PipelineError> {
    match field(t, 1) {
        Some(M::Lpm(l)) => {
            let v = decode_u128(&l.value, 128).map_err(|e| bad("lpm key", &e.to_string()))?;
            Ok((Ipv4Addr::from(v as u32), l.prefix_len.clamp(0, 32) as u8))
        }
        None => Ok((Ipv4Addr::UNSPECIFIED, 0)),
        _ => Err(bad("route", "key is not LPM")),
    }
}

/// Builds the entity of `entry` by name through the driver's checked builders.
pub(crate) fn build(info: &P4Info, entry: &Entry) -> Result<p4::Entity, P4InfoError> {
    let b = |v: u64| -> Bits { v.into() };
    let e: p4::Entity = match entry {
        Entry::Config { switch_id, flowlet_timeout_us } => info
            .table_entry(n::CONFIG)?
            .action(
                n::CONFIGURE,
                &[("switch_id", (*switch_id).into()), ("flowlet_timeout_us", b(*flowlet_timeout_us))],
            )?
            .default_action()
            .build()
            .into(),
        Entry::EgressConfig { digest_interval_us, report_period_us, latency_shift } => info
            .table_entry(n::EGRESS_CONFIG)?
            .action(
                n::CONFIGURE_EGRESS,
                &[
                    ("digest_interval_us", b(*digest_interval_us)),
                    ("report_period_us", b(*report_period_us)),
                    ("latency_shift", (*latency_shift).into()),
                ],
            )?
            .default_action()
            .build()
            .into(),
        Entry::ReportConfig { src_mac, dst_mac, src_ip, dst_ip, dst_port } => info
            .table_entry(n::REPORT_CONFIG)?
            .action(
                n::SET_REPORT_ENCAP,
                &[
                    ("src_mac", (*src_mac).into()),
                    ("dst_mac", (*dst_mac).into()),
                    ("src_ip", (*src_ip).into()),
                    ("dst_ip", (*dst_ip).into()),
                    ("dst_port", (*dst_port).into()),
                ],
            )?
            .default_action()
            .build()
            .into(),
        Entry::LargeFlowConfig { window_us, threshold_bytes } => info
            .table_entry(n::LARGE_FLOW_CONFIG)?
            .action(
                n::CONFIGURE_LARGE_FLOWS,
                &[("window_us", (*window_us).into()), ("threshold_bytes", (*threshold_bytes).into())],
            )?
            .default_action()
            .build()
            .into(),
        Entry::DrainConfig { enabled, pair_interval_us } => info
            .table_entry(n::DRAIN_CONFIG)?
            .action(
                n::CONFIGURE_DRAIN,
                &[("enabled", u8::from(*enabled).into()), ("pair_interval_us", (*pair_interval_us).into())],
            )?
            .default_action()
            .build()
            .into(),
        Entry::QpPair { src, dst, ack_qp, data_qp } => info
            .table_entry(n::QP_PAIR)?
            .exact("src_addr", *src)?
            .exact("dst_addr", *dst)?
            .exact("dest_qp", *ack_qp)?
            .action(n::PAIR, &[("data_qp", (*data_qp).into())])?
            .build()
            .into(),
        Entry::SteerFlow { flow, nhop_id, port } => info
            .table_entry(n::STEER_FLOW)?
            .exact("src_addr", flow.src)?
            .exact("dst_addr", flow.dst)?
            .exact("udp_src_port", flow.sport)?
            .exact("dest_qp", flow.qp)?
            .action(n::STEER, &[("nhop_id", (*nhop_id).into()), ("port", (*port).into())])?
            .build()
            .into(),
        Entry::SteerPair { src, dst, nhop_id, port } => info
            .table_entry(n::STEER_PAIR)?
            .exact("src_addr", *src)?
            .exact("dst_addr", *dst)?
            .action(n::STEER, &[("nhop_id", (*nhop_id).into()), ("port", (*port).into())])?
            .build()
            .into(),
        Entry::EdgePort { port } => info
            .table_entry(n::INGRESS_PORT_ROLE)?
            .exact("port", *port)?
            .action(n::SET_EDGE, &[])?
            .build()
            .into(),
        Entry::Watch { src, dst, l4_dst_port, priority, max_hops } => info
            .table_entry(n::INT_WATCHLIST)?
            .ternary("src_addr", src.0, src.1)?
            .ternary("dst_addr", dst.0, dst.1)?
            .ternary("l4_dst_port", l4_dst_port.0, l4_dst_port.1)?
            .priority(*priority)
            .action(n::INT_SOURCE, &[("max_hops", (*max_hops).into())])?
            .build()
            .into(),
        Entry::Route { prefix, len, target } => {
            let t = info.table_entry(n::IPV4_LPM)?.lpm("dst_addr", *prefix, i32::from(*len))?;
            match target {
                RouteTarget::Group(g) => t.action(n::SET_GROUP, &[("group_id", (*g).into())])?,
                RouteTarget::Nhop(h) => t.action(n::SET_NHOP, &[("nhop_id", (*h).into())])?,
            }
            .build()
            .into()
        }
        Entry::Nhop { id, port, src_mac, dst_mac } => info
            .table_entry(n::NHOP)?
            .exact("nhop_id", *id)?
            .action(
                n::FORWARD,
                &[("port", (*port).into()), ("src_mac", (*src_mac).into()), ("dst_mac", (*dst_mac).into())],
            )?
            .build()
            .into(),
        Entry::Member { id, nhop } => {
            let a = info.action_call(n::SELECT_NHOP, &[("nhop_id", (*nhop).into())])?;
            info.profile_member(n::NHOP_SELECTOR, *id, a)?.into()
        }
        Entry::Group { id, members } => {
            let m: Vec<(u32, i32)> =
                members.iter().map(|(m, w)| (*m, i32::try_from(*w).unwrap_or(i32::MAX))).collect();
            info.profile_group(n::NHOP_SELECTOR, *id, &m, 0)?.into()
        }
        Entry::GroupEntry { id, group } => {
            info.table_entry(n::NHOP_GROUP)?.exact("group_id", *id)?.group(*group).build().into()
        }
        Entry::PortDown { port } => info
            .table_entry(n::PORT_DOWN)?
            .exact("port", *port)?
            .action(n::MARK_PORT_DOWN, &[])?
            .build()
            .into(),
        Entry::EgressPort { port, edge, mtu, queue_high, queue_low, ecn_threshold } => info
            .table_entry(n::EGRESS_PORT_CONFIG)?
            .exact("port", *port)?
            .action(
                n::SET_PORT,
                &[
                    ("edge", u8::from(*edge).into()),
                    ("mtu", (*mtu).into()),
                    ("queue_high", (*queue_high).into()),
                    ("queue_low", (*queue_low).into()),
                    ("ecn_threshold", (*ecn_threshold).into()),
                ],
            )?
            .build()
            .into(),
        Entry::CloneSession { id, port } => crate::clone_session_entity(*id, *port),
    };
    Ok(e)
}

/// One digest item: a struct of the fields in [`DIGEST_FIELDS`] order.
pub(crate) fn decode_digest(d: &p4::P4Data) -> Result<QueueDigest, PipelineError> {
    let v = digest_values(d, n::QUEUE_DIGEST, DIGEST_FIELDS)?;
    let [switch_id, port, depth, timestamp, seq, congested] = v[..] else {
        return Err(bad(n::QUEUE_DIGEST, "wrong member count"));
    };
    Ok(QueueDigest {
        switch_id: switch_id as u32,
        port: port as u16,
        depth: depth as u32,
        timestamp: timestamp as u64,
        seq: seq as u32,
        congested: congested != 0,
    })
}

/// The bitstring members of a digest item, decoded by `fields`' widths.
fn digest_values(d: &p4::P4Data, name: &str, fields: &[(&str, i32)]) -> Result<Vec<u128>, PipelineError> {
    let Some(p4::p4_data::Data::Struct(s)) = d.data.as_ref() else {
        return Err(bad(name, "item is not a struct"));
    };
    if s.members.len() != fields.len() {
        return Err(bad(name, &format!("{} members, expected {}", s.members.len(), fields.len())));
    }
    s.members
        .iter()
        .zip(fields)
        .map(|(m, (field, w))| {
            let Some(p4::p4_data::Data::Bitstring(b)) = m.data.as_ref() else {
                return Err(bad(name, &format!("{field} is not a bitstring")));
            };
            decode_u128(b, *w).map_err(|e| bad(name, &format!("{field}: {e}")))
        })
        .collect()
}

/// One large-flow digest item: a struct of [`LARGE_FLOW_DIGEST_FIELDS`].
pub(crate) fn decode_large_flow(d: &p4::P4Data) -> Result<LargeFlowDigest, PipelineError> {
    let v = digest_values(d, n::LARGE_FLOW_DIGEST, LARGE_FLOW_DIGEST_FIELDS)?;
    let [switch_id, flow, egress_port, bytes, window_us, slot, collision, timestamp] = v[..] else {
        return Err(bad(n::LARGE_FLOW_DIGEST, "wrong member count"));
    };
    // flow: src 32 ++ dst 32 ++ UDP source port 16 ++ dest QP 24.
    let flow = FlowKey {
        src: Ipv4Addr::from((flow >> 72) as u32),
        dst: Ipv4Addr::from((flow >> 40) as u32),
        sport: (flow >> 24) as u16,
        qp: (flow & 0xff_ffff) as u32,
    };
    Ok(LargeFlowDigest {
        switch_id: switch_id as u32,
        flow,
        egress_port: egress_port as u16,
        bytes: bytes as u32,
        window_us: window_us as u32,
        slot: slot as u16,
        collision: collision != 0,
        timestamp: timestamp as u64,
    })
}

/// A pairing digest: `hosts` is source 32 ++ destination 32 ++ protocol 8,
/// `report` kind 8 ++ QP 24 ++ PSN 24 ++ time 48. A kind other than 0 or
/// 1 is malformed.
pub(crate) fn decode_drain_pair(d: &p4::P4Data) -> Result<DrainPairDigest, PipelineError> {
    let v = digest_values(d, n::DRAIN_PAIR_DIGEST, DRAIN_PAIR_DIGEST_FIELDS)?;
    let [hosts, report] = v[..] else {
        return Err(bad(n::DRAIN_PAIR_DIGEST, "wrong member count"));
    };
    let kind = match report >> 96 {
        0 => DrainPairKind::Data,
        1 => DrainPairKind::Ack,
        k => return Err(bad(n::DRAIN_PAIR_DIGEST, &format!("unknown kind {k}"))),
    };
    Ok(DrainPairDigest {
        src: Ipv4Addr::from((hosts >> 40) as u32),
        dst: Ipv4Addr::from((hosts >> 8) as u32),
        qp: ((report >> 72) & 0xff_ffff) as u32,
        psn: ((report >> 48) & 0xff_ffff) as u32,
        timestamp: (report & 0xffff_ffff_ffff) as u64,
        kind,
    })
}
