//! One contract, two targets: compares the v1model and the TNA P4Info on
//! every table (match fields and actions), every action a table runs
//! (parameters), the selector, every register, counter and digest, and the
//! packet metadata, whether or not the controller uses it today: an object
//! one program has and the other lacks is a difference. Ids may differ;
//! names, kinds and widths may not, except that time registers hold each
//! target's time width (48 bits on BMv2, 32 on Tofino) and the drain
//! rule's registers hold what a Tofino stateful ALU updates in one access
//! (`slot_psn` is a pair of 32-bit halves there).

use std::collections::BTreeSet;

use metaroce_p4rt::p4info::{name_of, HasPreamble};
use metaroce_p4rt::proto::p4::config::v1 as cfg;
use metaroce_p4rt::P4Info;

use crate::contract::{self, TIME};
use crate::names as n;
use crate::target::Target;

/// The objects of the drain rule, by name: while one program lacks the
/// rule, one problem says so (see [`parity`]) rather than one per object.
fn of_drain_rule(name: &str) -> bool {
    name.starts_with("MetaroceIngress.routing.drain.") || name == n::DRAIN_PAIR_DIGEST
}

/// Every name of one kind in either P4Info, the ones only one has
/// reported (but the drain rule's while `drain_gap`); the names both have.
fn common<'a, T: 'a + HasPreamble>(
    kind: &str,
    a: impl Iterator<Item = &'a T>,
    b: impl Iterator<Item = &'a T>,
    drain_gap: bool,
    out: &mut Vec<String>,
) -> Vec<String> {
    let (a, b): (BTreeSet<String>, BTreeSet<String>) = (a.map(name_of).collect(), b.map(name_of).collect());
    let only = |x: &BTreeSet<String>, y: &BTreeSet<String>| -> Vec<String> {
        x.difference(y).filter(|name| !(drain_gap && of_drain_rule(name))).cloned().collect()
    };
    out.extend(only(&a, &b).into_iter().map(|name| format!("{kind} {name} is in the v1model P4Info only")));
    out.extend(only(&b, &a).into_iter().map(|name| format!("{kind} {name} is in the TNA P4Info only")));
    a.intersection(&b).cloned().collect()
}

/// Every difference between the two P4Infos, and every way either breaks
/// the contract for its own target.
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
    // A program without the drain rule is one problem, and the rule's
    // objects are then not listed one by one.
    let drain_gap = contract::has_drain(v1model) != contract::has_drain(tna);
    if drain_gap {
        out.push(format!(
            "the drain rule is in {} only",
            if contract::has_drain(v1model) { "v1model" } else { "tna" }
        ));
    }
    tables(v1model, tna, drain_gap, &mut out);
    if let (Ok(a), Ok(b)) =
        (v1model.action_profiles.by_name(n::NHOP_SELECTOR), tna.action_profiles.by_name(n::NHOP_SELECTOR))
    {
        if a.with_selector != b.with_selector {
            out.push(format!("action profile {}: with_selector differs", n::NHOP_SELECTOR));
        }
    }
    registers(v1model, tna, drain_gap, &mut out);
    for name in common("counter", v1model.counters.iter(), tna.counters.iter(), drain_gap, &mut out) {
        if let (Ok(a), Ok(b)) = (v1model.counters.by_name(&name), tna.counters.by_name(&name)) {
            if a.size != b.size {
                out.push(format!("counter {name}: {} cells against {}", a.size, b.size));
            }
            let unit = |c: &cfg::Counter| c.spec.as_ref().map(|s| s.unit);
            if unit(a) != unit(b) {
                out.push(format!("counter {name}: units differ"));
            }
        }
    }
    for name in common("digest", v1model.digests.iter(), tna.digests.iter(), drain_gap, &mut out) {
        if let (Ok(a), Ok(b)) = (v1model.digest(&name), tna.digest(&name)) {
            let (ma, mb) = (contract::digest_members(v1model, a), contract::digest_members(tna, b));
            if ma != mb {
                out.push(format!("digest {name}: members differ: {ma:?} against {mb:?}"));
            }
        }
    }
    let packet_metadata = common(
        "controller header",
        v1model.packet_metadata.iter(),
        tna.packet_metadata.iter(),
        drain_gap,
        &mut out,
    );
    for name in packet_metadata {
        if let (Ok(a), Ok(b)) = (v1model.packet_metadata.by_name(&name), tna.packet_metadata.by_name(&name)) {
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

/// Every table: its match fields and the actions it runs; every action a
/// table runs: its parameters. (An action no table runs, such as one a
/// target calls from its own control flow, is the target's business.)
fn tables(v1model: &P4Info, tna: &P4Info, drain_gap: bool, out: &mut Vec<String>) {
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
    let fields = |x: &cfg::Table| -> Vec<(String, Option<cfg::match_field::Match>, i32)> {
        x.match_fields.iter().map(|f| (f.name.clone(), f.r#match.clone(), f.bitwidth)).collect()
    };
    let mut run = BTreeSet::new();
    for name in common("table", v1model.tables.iter(), tna.tables.iter(), drain_gap, out) {
        let (Ok(a), Ok(b)) = (v1model.table(&name), tna.table(&name)) else { continue };
        if fields(a) != fields(b) {
            out.push(format!("table {name}: match fields differ: {:?} against {:?}", fields(a), fields(b)));
        }
        let (aa, ab) = (actions(v1model, a), actions(tna, b));
        if aa != ab {
            out.push(format!("table {name}: actions differ: {aa:?} against {ab:?}"));
        }
        run.extend(aa.into_iter().filter(|x| ab.contains(x)));
    }
    for name in run {
        if let (Ok(a), Ok(b)) = (v1model.action(&name), tna.action(&name)) {
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
}

/// Every register: its cells and width; a time register holds each
/// target's time width, and a drain rule register each target's layout.
fn registers(v1model: &P4Info, tna: &P4Info, drain_gap: bool, out: &mut Vec<String>) {
    for name in common("register", v1model.registers.iter(), tna.registers.iter(), drain_gap, out) {
        let (Ok(a), Ok(b)) = (v1model.register(&name), tna.register(&name)) else { continue };
        if a.size != b.size {
            out.push(format!("register {name}: {} cells against {}", a.size, b.size));
        }
        let time = contract::REGISTERS.iter().any(|(n, _, w)| *n == name && *w == TIME);
        let drain = contract::DRAIN_REGISTERS.iter().any(|(n, _, _)| *n == name);
        let (wa, wb) =
            (metaroce_p4rt::entity::register_bitwidth(a), metaroce_p4rt::entity::register_bitwidth(b));
        if !time && !drain && wa != wb {
            out.push(format!("register {name}: bit<{wa:?}> against bit<{wb:?}>"));
        }
    }
}
