//! The P4Info ids of every object the twin touches, resolved once from the
//! names in `metaroce_pipeline::names`, and typed access to the switch's
//! state through them.

use metaroce_p4rt::entity::register_bitwidth;
use metaroce_p4rt::p4info::{self, name_of};
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::{codec, P4Info};
use metaroce_pipeline::names::{self as n, field as f, param as pa};

use super::TwinError;

/// A table and its match fields `(id, width)` in the order the twin gives keys.
#[derive(Debug, Clone)]
pub(super) struct TableId {
    pub id: u32,
    pub name: &'static str,
    pub fields: Vec<(u32, i32)>,
}

/// An action and its parameters `(id, width)` in the order the twin reads them.
#[derive(Debug, Clone)]
pub(super) struct ActionId {
    pub id: u32,
    pub params: Vec<(u32, i32)>,
}

impl ActionId {
    /// The parameters of `a` in this action's order (0 where missing).
    pub fn values(&self, a: &p4::Action) -> Vec<u128> {
        self.params
            .iter()
            .map(|(id, w)| {
                a.params
                    .iter()
                    .find(|p| p.param_id == *id)
                    .and_then(|p| codec::decode_u128(&p.value, *w).ok())
                    .unwrap_or(0)
            })
            .collect()
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct RegisterId {
    pub id: u32,
    pub name: &'static str,
    pub width: i32,
}

#[derive(Debug, Clone)]
pub(super) struct Ids {
    pub config: TableId,
    pub configure: ActionId,
    pub port_role: TableId,
    pub int_watchlist: TableId,
    pub int_source: ActionId,
    pub ipv4_lpm: TableId,
    pub set_group: ActionId,
    pub set_nhop: ActionId,
    pub routing_drop: ActionId,
    pub nhop_group: TableId,
    pub select_nhop: ActionId,
    pub port_down: TableId,
    pub nhop: TableId,
    pub forward: ActionId,
    pub steer_flow: TableId,
    pub steer_pair: TableId,
    pub steer: ActionId,
    pub large_flow_config: TableId,
    pub configure_large_flows: ActionId,
    pub window_sig: RegisterId,
    pub window_start: RegisterId,
    pub window_bytes: RegisterId,
    pub window_collision: RegisterId,
    pub window_early: RegisterId,
    pub steered: u32,
    pub egress_config: TableId,
    pub configure_egress: ActionId,
    pub egress_port_config: TableId,
    pub set_port: ActionId,
    pub report_config: TableId,
    pub set_report_encap: ActionId,
    pub flowlet_sig: RegisterId,
    pub flowlet_last_seen: RegisterId,
    pub flowlet_nhop: RegisterId,
    pub flowlet_port: RegisterId,
    pub flowlet_id: RegisterId,
    pub port_max_depth: RegisterId,
    pub port_congested: RegisterId,
    pub port_last_digest: RegisterId,
    pub digest_seq: RegisterId,
    pub report_last_bucket: RegisterId,
    pub report_last_time: RegisterId,
    pub report_seq: RegisterId,
    pub drop_reasons: u32,
    pub new_flowlets: u32,
    pub ecn_marks: u32,
    pub reports_sent: u32,
    pub digest: u32,
    /// Digest struct members' widths, in order.
    pub digest_widths: Vec<i32>,
    pub large_flow_digest: u32,
    pub large_flow_digest_widths: Vec<i32>,
    /// `packet_in` fields `ingress_port`, `reason`, `reserved`.
    pub packet_in: Vec<(u32, i32)>,
    /// `packet_out` field `egress_port`.
    pub packet_out_port: (u32, i32),
    /// The drain rule's objects, when the program has them (the v1model
    /// program, which the twin runs, does).
    pub drain: Option<DrainIds>,
}

/// The drain rule's tables, actions, register and counter.
#[derive(Debug, Clone)]
pub(super) struct DrainIds {
    pub config: TableId,
    pub configure: ActionId,
    pub qp_pair: TableId,
    pub pair: ActionId,
    pub slot_owner: RegisterId,
    pub slot_psn: RegisterId,
    pub pair_asked: RegisterId,
    pub events: u32,
    pub pair_digest: u32,
    pub pair_digest_widths: Vec<i32>,
}

impl DrainIds {
    fn resolve(info: &P4Info) -> Result<Option<Self>, TwinError> {
        if info.table(n::DRAIN_CONFIG).is_err() {
            return Ok(None);
        }
        let (pair_digest, pair_digest_widths) = digest_members(info, n::DRAIN_PAIR_DIGEST)?;
        Ok(Some(DrainIds {
            config: table(info, n::DRAIN_CONFIG, &[])?,
            configure: action(info, n::CONFIGURE_DRAIN, &[pa::ENABLED, pa::PAIR_INTERVAL_US])?,
            qp_pair: table(info, n::QP_PAIR, &[f::SRC_ADDR, f::DST_ADDR, f::DEST_QP])?,
            pair: action(info, n::PAIR, &[pa::DATA_QP])?,
            slot_owner: register(info, n::DRAIN_SLOT_OWNER)?,
            slot_psn: register(info, n::DRAIN_SLOT_PSN)?,
            pair_asked: register(info, n::DRAIN_PAIR_ASKED)?,
            events: counter(info, n::DRAIN_EVENTS)?,
            pair_digest,
            pair_digest_widths,
        }))
    }
}

fn missing(what: String, e: impl std::fmt::Display) -> TwinError {
    TwinError::Contract { problem: format!("{what}: {e}") }
}

fn table(info: &P4Info, name: &'static str, fields: &[&str]) -> Result<TableId, TwinError> {
    let t = info.table(name).map_err(|e| missing(format!("table {name}"), e))?;
    let id = t.preamble.as_ref().map(|p| p.id).unwrap_or_default();
    let fields = fields
        .iter()
        .map(|fname| {
            p4info::match_field(t, fname)
                .map(|m| (m.id, m.bitwidth))
                .map_err(|e| missing(format!("table {name}"), e))
        })
        .collect::<Result<_, _>>()?;
    Ok(TableId { id, name, fields })
}

fn action(info: &P4Info, name: &str, params: &[&str]) -> Result<ActionId, TwinError> {
    let a = info.action(name).map_err(|e| missing(format!("action {name}"), e))?;
    let id = a.preamble.as_ref().map(|p| p.id).unwrap_or_default();
    let params = params
        .iter()
        .map(|p| {
            p4info::action_param(a, p)
                .map(|x| (x.id, x.bitwidth))
                .map_err(|e| missing(format!("action {name}"), e))
        })
        .collect::<Result<_, _>>()?;
    Ok(ActionId { id, params })
}

fn register(info: &P4Info, name: &'static str) -> Result<RegisterId, TwinError> {
    let r = info.register(name).map_err(|e| missing(format!("register {name}"), e))?;
    let width = register_bitwidth(r)
        .ok_or_else(|| TwinError::Contract { problem: format!("register {name} is not bit<W>") })?;
    Ok(RegisterId { id: r.preamble.as_ref().map(|p| p.id).unwrap_or_default(), name, width })
}

fn counter(info: &P4Info, name: &str) -> Result<u32, TwinError> {
    info.counters.id_of(name).map_err(|e| missing(format!("counter {name}"), e))
}

fn packet_fields(info: &P4Info, header: &str, fields: &[&str]) -> Result<Vec<(u32, i32)>, TwinError> {
    let h =
        info.packet_metadata.by_name(header).map_err(|e| missing(format!("packet metadata {header}"), e))?;
    fields
        .iter()
        .map(|fname| {
            p4info::packet_metadata_field(h, fname)
                .map(|m| (m.id, m.bitwidth))
                .map_err(|e| missing(name_of(h), e))
        })
        .collect()
}

fn digest_members(info: &P4Info, name: &str) -> Result<(u32, Vec<i32>), TwinError> {
    use cfg::p4_bitstring_like_type_spec::TypeSpec as B;
    use cfg::p4_data_type_spec::TypeSpec as T;
    use metaroce_p4rt::proto::p4::config::v1 as cfg;
    let d = info.digest(name).map_err(|e| missing(format!("digest {name}"), e))?;
    let id = d.preamble.as_ref().map(|p| p.id).unwrap_or_default();
    let bad = || TwinError::Contract { problem: format!("digest {name} is not a struct of bit<W>") };
    let Some(T::Struct(s)) = d.type_spec.as_ref().and_then(|t| t.type_spec.as_ref()) else {
        return Err(bad());
    };
    let st = info.raw().type_info.as_ref().and_then(|t| t.structs.get(&s.name)).ok_or_else(bad)?;
    let widths = st
        .members
        .iter()
        .map(|m| match m.type_spec.as_ref().and_then(|t| t.type_spec.as_ref()) {
            Some(T::Bitstring(b)) => match b.type_spec.as_ref() {
                Some(B::Bit(x)) => Some(x.bitwidth),
                _ => None,
            },
            _ => None,
        })
        .collect::<Option<Vec<i32>>>()
        .ok_or_else(bad)?;
    Ok((id, widths))
}

impl Ids {
    pub fn resolve(info: &P4Info) -> Result<Self, TwinError> {
        let (digest, digest_widths) = digest_members(info, n::QUEUE_DIGEST)?;
        let (large_flow_digest, large_flow_digest_widths) = digest_members(info, n::LARGE_FLOW_DIGEST)?;
        let port_out = packet_fields(info, n::PACKET_OUT, &[pa::EGRESS_PORT])?;
        Ok(Ids {
            config: table(info, n::CONFIG, &[])?,
            configure: action(info, n::CONFIGURE, &[pa::SWITCH_ID, pa::FLOWLET_TIMEOUT_US])?,
            port_role: table(info, n::INGRESS_PORT_ROLE, &[f::PORT])?,
            int_watchlist: table(info, n::INT_WATCHLIST, &[f::SRC_ADDR, f::DST_ADDR, f::L4_DST_PORT])?,
            int_source: action(info, n::INT_SOURCE, &[pa::MAX_HOPS])?,
            ipv4_lpm: table(info, n::IPV4_LPM, &[f::DST_ADDR])?,
            set_group: action(info, n::SET_GROUP, &[pa::GROUP_ID])?,
            set_nhop: action(info, n::SET_NHOP, &[pa::NHOP_ID])?,
            routing_drop: action(info, n::ROUTING_DROP, &[pa::REASON])?,
            nhop_group: table(info, n::NHOP_GROUP, &[f::GROUP_ID])?,
            select_nhop: action(info, n::SELECT_NHOP, &[pa::NHOP_ID])?,
            port_down: table(info, n::PORT_DOWN, &[f::PORT])?,
            nhop: table(info, n::NHOP, &[f::NHOP_ID])?,
            forward: action(info, n::FORWARD, &[pa::PORT, pa::SRC_MAC, pa::DST_MAC])?,
            steer_flow: table(info, n::STEER_FLOW, &[f::SRC_ADDR, f::DST_ADDR, f::UDP_SRC_PORT, f::DEST_QP])?,
            steer_pair: table(info, n::STEER_PAIR, &[f::SRC_ADDR, f::DST_ADDR])?,
            steer: action(info, n::STEER, &[pa::NHOP_ID, pa::PORT])?,
            large_flow_config: table(info, n::LARGE_FLOW_CONFIG, &[])?,
            configure_large_flows: action(
                info,
                n::CONFIGURE_LARGE_FLOWS,
                &[pa::WINDOW_US, pa::THRESHOLD_BYTES],
            )?,
            window_sig: register(info, n::WINDOW_SIG)?,
            window_start: register(info, n::WINDOW_START)?,
            window_bytes: register(info, n::WINDOW_BYTES)?,
            window_collision: register(info, n::WINDOW_COLLISION)?,
            window_early: register(info, n::WINDOW_EARLY)?,
            steered: counter(info, n::STEERED)?,
            egress_config: table(info, n::EGRESS_CONFIG, &[])?,
            configure_egress: action(
                info,
                n::CONFIGURE_EGRESS,
                &[pa::DIGEST_INTERVAL_US, pa::REPORT_PERIOD_US, pa::LATENCY_SHIFT],
            )?,
            egress_port_config: table(info, n::EGRESS_PORT_CONFIG, &[f::PORT])?,
            set_port: action(
                info,
                n::SET_PORT,
                &[pa::EDGE, pa::MTU, pa::QUEUE_HIGH, pa::QUEUE_LOW, pa::ECN_THRESHOLD],
            )?,
            report_config: table(info, n::REPORT_CONFIG, &[])?,
            set_report_encap: action(
                info,
                n::SET_REPORT_ENCAP,
                &[pa::SRC_MAC, pa::DST_MAC, pa::SRC_IP, pa::DST_IP, pa::DST_PORT],
            )?,
            flowlet_sig: register(info, n::FLOWLET_SIG)?,
            flowlet_last_seen: register(info, n::FLOWLET_LAST_SEEN)?,
            flowlet_nhop: register(info, n::FLOWLET_NHOP)?,
            flowlet_port: register(info, n::FLOWLET_PORT)?,
            flowlet_id: register(info, n::FLOWLET_ID)?,
            port_max_depth: register(info, n::PORT_MAX_DEPTH)?,
            port_congested: register(info, n::PORT_CONGESTED)?,
            port_last_digest: register(info, n::PORT_LAST_DIGEST)?,
            digest_seq: register(info, n::DIGEST_SEQ)?,
            report_last_bucket: register(info, n::REPORT_LAST_BUCKET)?,
            report_last_time: register(info, n::REPORT_LAST_TIME)?,
            report_seq: register(info, n::REPORT_SEQ)?,
            drop_reasons: counter(info, n::DROP_REASONS)?,
            new_flowlets: counter(info, n::NEW_FLOWLETS)?,
            ecn_marks: counter(info, n::ECN_MARKS)?,
            reports_sent: counter(info, n::REPORTS_SENT)?,
            digest,
            digest_widths,
            large_flow_digest,
            large_flow_digest_widths,
            packet_in: packet_fields(info, n::PACKET_IN, &[pa::INGRESS_PORT, pa::REASON, pa::RESERVED])?,
            packet_out_port: port_out.first().copied().unwrap_or((0, 16)),
            drain: DrainIds::resolve(info)?,
        })
    }
}

/// `v` cut to `width` bits.
pub(super) fn masked(v: u128, width: i32) -> u128 {
    if width >= 128 {
        v
    } else {
        v & ((1u128 << width.max(0)) - 1)
    }
}

/// The canonical bytestring of `v` cut to `width` bits.
pub(super) fn encode(v: u128, width: i32) -> Vec<u8> {
    codec::encode(masked(v, width), width.max(1)).unwrap_or_else(|_| vec![0])
}
