//! One contract, two targets: compares the v1model and the TNA P4Info on
//! every object the controller uses (tables with their match fields and
//! actions, actions with their parameters, the selector, registers,
//! counters, digests, packet metadata). Ids may differ; names, kinds and
//! widths may not, except that time registers hold each target's time
//! width (48 bits on BMv2, 32 on Tofino).

use metaroce_p4rt::p4info::name_of;
use metaroce_p4rt::proto::p4::config::v1 as cfg;
use metaroce_p4rt::P4Info;

use crate::contract::{self, TIME};
use crate::names as n;
use crate::target::Target;

/// Every difference between the two P4Infos on the contract's objects,
/// and every way either breaks the contract for its own target.
pub fn parity(v1model: &P4Info, tna: &P4Info) -> Vec<String> {
    let mut out = Vec::new();
    for (info, want, label) in [(v1model, Target::Bmv2, "v1model"), (tna, Target::Tofino, "tna")] {
        match Target::of(info) {
            Ok(t) if t == want => {}
            Ok(t) => out.push(format!("{label}: the P4Info is for {}", t.name())),
            Err(e) => out.push(format!("{label}: {e}")),
        }
        out.extend(contract::check(info, want).into_iter().map(|p| format!("{label}: {p}")));
    }
    for t in contract::TABLES.iter().chain(contract::DRAIN_TABLES) {
        if let (Ok(a), Ok(b)) = (v1model.table(t.name), tna.table(t.name)) {
            let fields = |x: &cfg::Table| -> Vec<(String, Option<cfg::match_field::Match>, i32)> {
                x.match_fields.iter().map(|f| (f.name.clone(), f.r#match.clone(), f.bitwidth)).collect()
            };
            if fields(a) != fields(b) {
                out.push(format!(
                    "table {}: match fields differ: {:?} against {:?}",
                    t.name,
                    fields(a),
                    fields(b)
                ));
            }
            let actions = |info: &P4Info, x: &cfg::Table| -> Vec<String> {
                let mut v: Vec<String> = x
                    .action_refs
                    .iter()
                    .filter_map(|r| info.actions.by_id(r.id).ok().map(name_of))
                    .filter(|name| name != "NoAction")
                    .collect();
                v.sort();
                v
            };
            if actions(v1model, a) != actions(tna, b) {
                out.push(format!(
                    "table {}: actions differ: {:?} against {:?}",
                    t.name,
                    actions(v1model, a),
                    actions(tna, b)
                ));
            }
        }
    }
    for (name, _) in contract::ACTIONS.iter().chain(contract::DRAIN_ACTIONS) {
        if let (Ok(a), Ok(b)) = (v1model.action(name), tna.action(name)) {
            let params = |x: &cfg::Action| -> Vec<(String, i32)> {
                x.params.iter().map(|p| (p.name.clone(), p.bitwidth)).collect()
            };
            if params(a) != params(b) {
                out.push(format!(
                    "action {name}: parameters differ: {:?} against {:?}",
                    params(a),
                    params(b)
                ));
            }
        }
    }
    if let (Ok(a), Ok(b)) =
        (v1model.action_profiles.by_name(n::NHOP_SELECTOR), tna.action_profiles.by_name(n::NHOP_SELECTOR))
    {
        if a.with_selector != b.with_selector {
            out.push(format!("action profile {}: with_selector differs", n::NHOP_SELECTOR));
        }
    }
    for (name, _, width) in contract::REGISTERS {
        if let (Ok(a), Ok(b)) = (v1model.register(name), tna.register(name)) {
            if a.size != b.size {
                out.push(format!("register {name}: {} cells against {}", a.size, b.size));
            }
            let (wa, wb) =
                (metaroce_p4rt::entity::register_bitwidth(a), metaroce_p4rt::entity::register_bitwidth(b));
            if *width != TIME && wa != wb {
                out.push(format!("register {name}: bit<{wa:?}> against bit<{wb:?}>"));
            }
        }
    }
    for name in contract::COUNTERS {
        if let (Ok(a), Ok(b)) = (v1model.counters.by_name(name), tna.counters.by_name(name)) {
            if a.size != b.size {
                out.push(format!("counter {name}: {} cells against {}", a.size, b.size));
            }
            let unit = |c: &cfg::Counter| c.spec.as_ref().map(|s| s.unit);
            if unit(a) != unit(b) {
                out.push(format!("counter {name}: units differ"));
            }
        }
    }
    if contract::has_drain(v1model) != contract::has_drain(tna) {
        out.push(format!(
            "the drain rule is in {} only: the TNA program does not carry it yet",
            if contract::has_drain(v1model) { "v1model" } else { "tna" }
        ));
    }
    for name in [n::QUEUE_DIGEST, n::LARGE_FLOW_DIGEST, n::DRAIN_PAIR_DIGEST] {
        if let (Ok(a), Ok(b)) = (v1model.digest(name), tna.digest(name)) {
            let (ma, mb) = (contract::digest_members(v1model, a), contract::digest_members(tna, b));
            if ma != mb {
                out.push(format!("digest {name}: members differ: {ma:?} against {mb:?}"));
            }
        }
    }
    for name in [n::PACKET_IN, n::PACKET_OUT] {
        if let (Ok(a), Ok(b)) = (v1model.packet_metadata.by_name(name), tna.packet_metadata.by_name(name)) {
            let fields = |h: &cfg::ControllerPacketMetadata| -> Vec<(String, i32)> {
                h.metadata.iter().map(|m| (m.name.clone(), m.bitwidth)).collect()
            };
            if fields(a) != fields(b) {
                out.push(format!("{name}: fields differ: {:?} against {:?}", fields(a), fields(b)));
            }
        }
    }
    out
}
