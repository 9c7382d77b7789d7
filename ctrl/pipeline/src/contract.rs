//! What the controller expects of the P4Info, checked in one pass at
//! start-up so that every disagreement is reported at once, with the
//! P4Info's own "did you mean" for names it does not know.

use metaroce_p4rt::p4info::{self, name_of};
use metaroce_p4rt::proto::p4::config::v1 as cfg;
use metaroce_p4rt::P4Info;

use crate::names as n;
use crate::target::Target;
use cfg::match_field::{Match, MatchType};

/// A table: its match fields `(name, kind, width)` and the actions we use.
pub(crate) struct TableSpec {
    pub(crate) name: &'static str,
    pub(crate) fields: &'static [(&'static str, MatchType, i32)],
    pub(crate) actions: &'static [&'static str],
}

pub(crate) const TABLES: &[TableSpec] = &[
    TableSpec { name: n::CONFIG, fields: &[], actions: &[n::CONFIGURE] },
    TableSpec {
        name: n::INGRESS_PORT_ROLE,
        fields: &[("port", MatchType::Exact, 9)],
        actions: &[n::SET_EDGE],
    },
    TableSpec {
        name: n::INT_WATCHLIST,
        fields: &[
            ("src_addr", MatchType::Ternary, 32),
            ("dst_addr", MatchType::Ternary, 32),
            ("l4_dst_port", MatchType::Ternary, 16),
        ],
        actions: &[n::INT_SOURCE],
    },
    TableSpec {
        name: n::IPV4_LPM,
        fields: &[("dst_addr", MatchType::Lpm, 32)],
        actions: &[n::SET_GROUP, n::SET_NHOP, n::ROUTING_DROP],
    },
    TableSpec {
        name: n::NHOP_GROUP,
        fields: &[("group_id", MatchType::Exact, 16)],
        actions: &[n::SELECT_NHOP],
    },
    TableSpec {
        name: n::PORT_DOWN,
        fields: &[("port", MatchType::Exact, 16)],
        actions: &[n::MARK_PORT_DOWN],
    },
    TableSpec {
        name: n::NHOP,
        fields: &[("nhop_id", MatchType::Exact, 16)],
        actions: &[n::FORWARD, n::ROUTING_DROP],
    },
    TableSpec {
        name: n::STEER_FLOW,
        fields: &[
            ("src_addr", MatchType::Exact, 32),
            ("dst_addr", MatchType::Exact, 32),
            ("udp_src_port", MatchType::Exact, 16),
            ("dest_qp", MatchType::Exact, 24),
        ],
        actions: &[n::STEER],
    },
    TableSpec {
        name: n::STEER_PAIR,
        fields: &[("src_addr", MatchType::Exact, 32), ("dst_addr", MatchType::Exact, 32)],
        actions: &[n::STEER],
    },
    TableSpec { name: n::LARGE_FLOW_CONFIG, fields: &[], actions: &[n::CONFIGURE_LARGE_FLOWS] },
    TableSpec { name: n::EGRESS_CONFIG, fields: &[], actions: &[n::CONFIGURE_EGRESS] },
    TableSpec {
        name: n::EGRESS_PORT_CONFIG,
        fields: &[("port", MatchType::Exact, 9)],
        actions: &[n::SET_PORT],
    },
    TableSpec { name: n::REPORT_CONFIG, fields: &[], actions: &[n::SET_REPORT_ENCAP] },
];

pub(crate) const ACTIONS: &[(&str, &[(&str, i32)])] = &[
    (n::CONFIGURE, &[("switch_id", 32), ("flowlet_timeout_us", 48)]),
    (n::SET_EDGE, &[]),
    (n::INT_SOURCE, &[("max_hops", 8)]),
    (n::SET_GROUP, &[("group_id", 16)]),
    (n::SET_NHOP, &[("nhop_id", 16)]),
    (n::ROUTING_DROP, &[("reason", 8)]),
    (n::SELECT_NHOP, &[("nhop_id", 16)]),
    (n::MARK_PORT_DOWN, &[]),
    (n::FORWARD, &[("port", 9), ("src_mac", 48), ("dst_mac", 48)]),
    (n::STEER, &[("nhop_id", 16), ("port", 9)]),
    (n::CONFIGURE_LARGE_FLOWS, &[("window_us", 32), ("threshold_bytes", 32)]),
    (n::CONFIGURE_EGRESS, &[("digest_interval_us", 48), ("report_period_us", 48), ("latency_shift", 8)]),
    (n::SET_PORT, &[("edge", 1), ("mtu", 16), ("queue_high", 32), ("queue_low", 32), ("ecn_threshold", 32)]),
    (
        n::SET_REPORT_ENCAP,
        &[("src_mac", 48), ("dst_mac", 48), ("src_ip", 32), ("dst_ip", 32), ("dst_port", 16)],
    ),
];

/// The width of a register holding a time: the target's (48 bits on BMv2,
/// the 32 of a Tofino stateful ALU).
pub(crate) const TIME: i32 = -1;

/// Registers: `(name, size, width)`.
/// The controller reads the first two; the simulator's pipeline twin keeps
/// its state in all of them, so they are part of the contract too.
pub(crate) const REGISTERS: &[(&str, i32, i32)] = &[
    (n::PORT_MAX_DEPTH, n::PORT_REGISTER_SIZE as i32, 32),
    (n::PORT_CONGESTED, n::PORT_REGISTER_SIZE as i32, 8),
    (n::FLOWLET_SIG, n::FLOW_SLOTS as i32, 16),
    (n::FLOWLET_LAST_SEEN, n::FLOW_SLOTS as i32, TIME),
    (n::FLOWLET_NHOP, n::FLOW_SLOTS as i32, 16),
    (n::FLOWLET_PORT, n::FLOW_SLOTS as i32, 16),
    (n::FLOWLET_ID, n::FLOW_SLOTS as i32, 16),
    (n::PORT_LAST_DIGEST, n::PORT_REGISTER_SIZE as i32, TIME),
    (n::DIGEST_SEQ, 1, 32),
    (n::REPORT_LAST_BUCKET, n::FLOW_SLOTS as i32, 32),
    (n::REPORT_LAST_TIME, n::FLOW_SLOTS as i32, TIME),
    (n::REPORT_SEQ, 1, 32),
    (n::WINDOW_SIG, n::FLOW_SLOTS as i32, 16),
    (n::WINDOW_START, n::FLOW_SLOTS as i32, TIME),
    (n::WINDOW_BYTES, n::FLOW_SLOTS as i32, 32),
    (n::WINDOW_COLLISION, n::FLOW_SLOTS as i32, 8),
    (n::WINDOW_EARLY, n::FLOW_SLOTS as i32, 8),
];

pub(crate) const COUNTERS: &[&str] =
    &[n::DROP_REASONS, n::NEW_FLOWLETS, n::ECN_MARKS, n::REPORTS_SENT, n::STEERED];

/// Digest struct members in order, with widths.
pub(crate) const DIGEST_FIELDS: &[(&str, i32)] =
    &[("switch_id", 32), ("port", 16), ("depth", 32), ("timestamp", 48), ("seq", 32), ("congested", 8)];

/// Large-flow digest members in order, with widths. `flow` is the
/// steer_flow key: src 32 ++ dst 32 ++ UDP source port 16 ++ dest QP 24.
pub(crate) const LARGE_FLOW_DIGEST_FIELDS: &[(&str, i32)] = &[
    ("switch_id", 32),
    ("flow", 104),
    ("egress_port", 16),
    ("bytes", 32),
    ("window_us", 32),
    ("slot", 16),
    ("collision", 8),
    ("timestamp", 48),
];

/// The drain rule (`p4src/README.md`, "Moves that never reorder"): its
/// tables, actions, counter and pairing digest. Required of the v1model
/// program; on Tofino (whose program carries it too) the part is checked
/// only when the P4Info has it, and the controller writes no drain entries
/// where it is missing ([`has_drain`]).
pub(crate) const DRAIN_TABLES: &[TableSpec] = &[
    TableSpec { name: n::DRAIN_CONFIG, fields: &[], actions: &[n::CONFIGURE_DRAIN] },
    TableSpec {
        name: n::QP_PAIR,
        fields: &[
            ("src_addr", MatchType::Exact, 32),
            ("dst_addr", MatchType::Exact, 32),
            ("dest_qp", MatchType::Exact, 24),
        ],
        actions: &[n::PAIR],
    },
];

pub(crate) const DRAIN_ACTIONS: &[(&str, &[(&str, i32)])] =
    &[(n::CONFIGURE_DRAIN, &[("enabled", 1), ("pair_interval_us", 32)]), (n::PAIR, &[("data_qp", 24)])];

/// The twin keeps the rule's state in these: `(name, size, v1model width)`
/// (a Tofino stateful ALU holds other widths; the names are shared).
pub(crate) const DRAIN_REGISTERS: &[(&str, i32, i32)] = &[
    (n::DRAIN_SLOT_OWNER, n::DRAIN_SLOT_COUNT as i32, 32),
    (n::DRAIN_SLOT_PSN, n::DRAIN_SLOT_COUNT as i32, 48),
    (n::DRAIN_PAIR_ASKED, n::DRAIN_SLOT_COUNT as i32, TIME),
];

/// Pairing digest members: `hosts` is the data's IPv4 source ++
/// destination ++ protocol; `report` is kind (8) ++ QP (24) ++ PSN (24) ++
/// the switch's time (48, its time unit).
pub(crate) const DRAIN_PAIR_DIGEST_FIELDS: &[(&str, i32)] = &[("hosts", 72), ("report", 104)];

/// Whether the program carries the drain rule (its config table).
pub(crate) fn has_drain(info: &P4Info) -> bool {
    info.table(n::DRAIN_CONFIG).is_ok()
}

pub(crate) const PACKET_IN_FIELDS: &[(&str, i32)] = &[("ingress_port", 16), ("reason", 8), ("reserved", 8)];
pub(crate) const PACKET_OUT_FIELDS: &[(&str, i32)] = &[("egress_port", 16), ("flags", 8)];

fn register_width(width: i32, target: Target) -> i32 {
    if width == TIME {
        target.units().time_bits as i32
    } else {
        width
    }
}

/// Checks the P4Info against everything above; returns every problem.
pub(crate) fn check(info: &P4Info, target: Target) -> Vec<String> {
    let mut errs = Vec::new();
    let drain = target == Target::Bmv2 || has_drain(info);
    let drain_tables: &[TableSpec] = if drain { DRAIN_TABLES } else { &[] };
    for t in TABLES.iter().chain(drain_tables) {
        check_table(info, t, &mut errs);
    }
    let drain_actions: &[(&str, &[(&str, i32)])] = if drain { DRAIN_ACTIONS } else { &[] };
    for (name, params) in ACTIONS.iter().chain(drain_actions) {
        match info.action(name) {
            Ok(a) => {
                for (p, w) in *params {
                    match p4info::action_param(a, p) {
                        Ok(param) if param.bitwidth != *w => errs.push(format!(
                            "action {name}: parameter {p} is {} bits, the controller expects {w}",
                            param.bitwidth
                        )),
                        Ok(_) => {}
                        Err(e) => errs.push(format!("action {name}: {e}")),
                    }
                }
                if a.params.len() != params.len() {
                    errs.push(format!(
                        "action {name} has {} parameters, the controller expects {}",
                        a.params.len(),
                        params.len()
                    ));
                }
            }
            Err(e) => errs.push(e.to_string()),
        }
    }
    for (name, size, width) in REGISTERS {
        match info.register(name) {
            Ok(r) => {
                if r.size < *size {
                    errs.push(format!("register {name} has {} cells, the controller expects {size}", r.size));
                }
                let width = register_width(*width, target);
                if metaroce_p4rt::entity::register_bitwidth(r) != Some(width) {
                    errs.push(format!("register {name} is not bit<{width}>"));
                }
            }
            Err(e) => errs.push(e.to_string()),
        }
    }
    if drain {
        for (name, size, width) in DRAIN_REGISTERS {
            match info.register(name) {
                Ok(r) if r.size < *size => {
                    errs.push(format!("register {name} has {} cells, the controller expects {size}", r.size))
                }
                Ok(r) if target == Target::Bmv2 => {
                    let width = register_width(*width, target);
                    if metaroce_p4rt::entity::register_bitwidth(r) != Some(width) {
                        errs.push(format!("register {name} is not bit<{width}>"));
                    }
                }
                Ok(_) => {}
                Err(e) => errs.push(e.to_string()),
            }
        }
        if let Err(e) = info.counters.by_name(n::DRAIN_EVENTS) {
            errs.push(e.to_string());
        }
        check_digest(info, n::DRAIN_PAIR_DIGEST, DRAIN_PAIR_DIGEST_FIELDS, &mut errs);
    }
    for name in COUNTERS {
        if let Err(e) = info.counters.by_name(name) {
            errs.push(e.to_string());
        }
    }
    check_profile(info, &mut errs);
    check_digest(info, n::QUEUE_DIGEST, DIGEST_FIELDS, &mut errs);
    check_digest(info, n::LARGE_FLOW_DIGEST, LARGE_FLOW_DIGEST_FIELDS, &mut errs);
    check_packet_metadata(info, n::PACKET_IN, PACKET_IN_FIELDS, &mut errs);
    check_packet_metadata(info, n::PACKET_OUT, PACKET_OUT_FIELDS, &mut errs);
    errs
}

fn check_table(info: &P4Info, spec: &TableSpec, errs: &mut Vec<String>) {
    let t = match info.table(spec.name) {
        Ok(t) => t,
        Err(e) => return errs.push(e.to_string()),
    };
    for (field, kind, width) in spec.fields {
        match p4info::match_field(t, field) {
            Ok(f) => {
                if f.r#match != Some(Match::MatchType(*kind as i32)) {
                    errs.push(format!("table {}: field {field} is not {}", spec.name, kind.as_str_name()));
                }
                if f.bitwidth != *width {
                    errs.push(format!(
                        "table {}: field {field} is {} bits, the controller expects {width}",
                        spec.name, f.bitwidth
                    ));
                }
            }
            Err(e) => errs.push(format!("table {}: {e}", spec.name)),
        }
    }
    if t.match_fields.len() != spec.fields.len() {
        errs.push(format!(
            "table {} has {} match fields, the controller expects {}",
            spec.name,
            t.match_fields.len(),
            spec.fields.len()
        ));
    }
    for action in spec.actions {
        let Ok(id) = info.actions.id_of(action) else { continue }; // reported with the actions
        if !t.action_refs.iter().any(|r| r.id == id) {
            errs.push(format!("table {} does not offer action {action}", spec.name));
        }
    }
}

fn check_profile(info: &P4Info, errs: &mut Vec<String>) {
    match (info.action_profiles.by_name(n::NHOP_SELECTOR), info.table(n::NHOP_GROUP)) {
        (Ok(p), Ok(t)) => {
            let id = p.preamble.as_ref().map(|p| p.id).unwrap_or_default();
            if t.implementation_id != id {
                errs.push(format!("table {} is not implemented by {}", n::NHOP_GROUP, n::NHOP_SELECTOR));
            }
            if !p.with_selector {
                errs.push(format!("action profile {} has no selector", n::NHOP_SELECTOR));
            }
        }
        (Err(e), _) => errs.push(e.to_string()),
        (_, Err(_)) => {}
    }
}

fn check_digest(info: &P4Info, name: &str, fields: &[(&str, i32)], errs: &mut Vec<String>) {
    let d = match info.digest(name) {
        Ok(d) => d,
        Err(e) => return errs.push(e.to_string()),
    };
    let members = digest_members(info, d);
    let got: Vec<(String, i32)> = members.unwrap_or_default();
    let want: Vec<(String, i32)> = fields.iter().map(|(f, w)| ((*f).to_owned(), *w)).collect();
    if got != want {
        let show =
            |v: &[(String, i32)]| v.iter().map(|(f, w)| format!("{f}:{w}")).collect::<Vec<_>>().join(", ");
        errs.push(format!(
            "digest {name}: fields are [{}], the controller expects [{}]",
            show(&got),
            show(&want)
        ));
    }
}

/// Names and widths of a digest's struct members, in order.
pub(crate) fn digest_members(info: &P4Info, d: &cfg::Digest) -> Option<Vec<(String, i32)>> {
    use cfg::p4_bitstring_like_type_spec::TypeSpec as B;
    use cfg::p4_data_type_spec::TypeSpec as T;
    let Some(T::Struct(s)) = d.type_spec.as_ref()?.type_spec.as_ref() else { return None };
    let st = info.raw().type_info.as_ref()?.structs.get(&s.name)?;
    st.members
        .iter()
        .map(|m| match m.type_spec.as_ref()?.type_spec.as_ref()? {
            T::Bitstring(b) => match b.type_spec.as_ref()? {
                B::Bit(bit) => Some((m.name.clone(), bit.bitwidth)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn check_packet_metadata(info: &P4Info, header: &str, fields: &[(&str, i32)], errs: &mut Vec<String>) {
    let h = match info.packet_metadata.by_name(header) {
        Ok(h) => h,
        Err(e) => return errs.push(e.to_string()),
    };
    for (f, w) in fields {
        match p4info::packet_metadata_field(h, f) {
            Ok(m) if m.bitwidth != *w => errs.push(format!(
                "{}: field {f} is {} bits, the controller expects {w}",
                name_of(h),
                m.bitwidth
            )),
            Ok(_) => {}
            Err(e) => errs.push(e.to_string()),
        }
    }
}
