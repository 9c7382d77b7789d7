//! Desired state: what every switch should hold, computed from the
//! topology, the routing (with failures applied) and the policy's weight
//! overrides. Logical routes name their members by port; [`assign`] gives
//! each multipath route an `nhop_group` entry of its own and points it at
//! a selector group holding the members, reusing what is installed so that
//! an unchanged group keeps its id and a changed one gets a fresh id
//! (make-before-break: the route's entry moves to the new group in one
//! write).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

use metaroce_pipeline::names::{DIGEST_SESSION, REPORT_SESSION, TOFINO_RECIRC_PORT};
use metaroce_pipeline::{Entry, Key, Mac, RouteTarget, Target};
use metaroce_topo::units::QueueDepth;
use metaroce_topo::{NextHop, Role, Routing, SwitchId, Topology};

use crate::place::{Steer, SteerHop};

/// Settings the YAML does not hold. Times are target-neutral (µs or ns, as
/// named); [`fixed_entries`] converts them, and the YAML's, to the
/// target's units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The loaded program's target: its time and queue units, and where
    /// threshold digests go (`Config::new` takes it from the pipeline).
    pub target: Target,
    pub digest_interval_us: u64,
    pub report_period_us: u64,
    pub latency_shift: u8,
    /// Largest INT hop count a source allows (the contract's limit is 4).
    pub int_max_hops: u8,
    /// UDP destination port of Telemetry Reports.
    pub report_port: u16,
    /// The large-flow detector's window.
    pub large_flow_window_ns: u64,
    /// A flow is large when it sends this share of the slowest host NIC's
    /// rate over a window (per mille); 0 turns the detector off.
    pub large_flow_permille: u32,
    /// The drain rule's setting, where the program carries the rule
    /// (`None`: it does not, and no drain entry is written).
    pub drain: Option<DrainSetting>,
}

/// The drain rule on a fabric (`p4src/README.md`, "Moves that never
/// reorder"): on where NICs need packets in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainSetting {
    pub enabled: bool,
    /// Least time between two pairing digests of one slot.
    pub pair_interval_ns: u64,
}

impl Settings {
    /// Nanoseconds per target time unit (1000 on BMv2, 1 on Tofino).
    pub fn time_unit_ns(&self) -> u64 {
        self.target.units().time_unit_ns.max(1)
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            target: Target::Bmv2,
            digest_interval_us: 1000,
            report_period_us: 1_000_000,
            latency_shift: 8,
            int_max_hops: 4,
            report_port: 32766,
            large_flow_window_ns: 1_000_000,
            large_flow_permille: 100,
            drain: None,
        }
    }
}

/// The router MAC of a switch: locally administered, from its device id.
/// Switches do not check destination MACs, so this only has to be stable.
pub fn switch_mac(device_id: u64) -> Mac {
    let d = device_id.to_be_bytes();
    [0x02, 0x4d, 0x52, d[5], d[6], d[7]]
}

/// The report source address of a switch (never routed: reports reach the
/// controller as packet-in).
fn report_ip(s: SwitchId) -> Ipv4Addr {
    let s = s as u32 + 1;
    Ipv4Addr::new(10, 254, (s >> 8) as u8, s as u8)
}

const COLLECTOR_IP: Ipv4Addr = Ipv4Addr::new(10, 255, 255, 254);
const COLLECTOR_MAC: Mac = [0x02, 0x4d, 0x52, 0xff, 0xff, 0xfe];

/// Weight overrides per (switch, destination leaf): `(port, weight)`.
pub type Overrides = BTreeMap<(SwitchId, SwitchId), Vec<(u16, u32)>>;

/// One switch's desired state before group ids are assigned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SwitchPlan {
    /// Everything but routes and their groups. Shared: it only changes with
    /// the routing's failures, so a decision that moves weights reuses it.
    pub fixed: Arc<Vec<Entry>>,
    /// Per prefix `(addr, len)`: members `(nhop id, weight)` sorted by nhop.
    /// Shared: the core's plan, the plan handed to the switch's agent and
    /// the agent's last assignment are one map, copied only when a
    /// decision re-weights a route of this switch while it is shared.
    pub routes: Arc<Routes>,
    /// The placement's steer entries for this switch (empty unless the
    /// mode writes). Shared with the placement: a decision that moves no
    /// flow through this switch reuses it.
    pub steer: Arc<Steer>,
    /// The drain rule's learnt `qp_pair` entries (written in every mode:
    /// they only let the rule see ACKs).
    pub pairs: Arc<Vec<Entry>>,
}

/// A YAML queue depth in the target's units: packets on BMv2 (bytes count
/// as MTU-sized packets), 80-byte cells on Tofino (packets count as
/// MTU-sized packets' cells), so a threshold means the same buffer on both.
fn depth(q: QueueDepth, settings: &Settings) -> u32 {
    let u = settings.target.units();
    let units = match q {
        QueueDepth::Packets(p) => u.queue_packets(p),
        QueueDepth::Bytes(b) => u.queue_bytes(b),
    };
    u32::try_from(units).unwrap_or(u32::MAX)
}

/// The next-hop id of an egress port (0 is never used).
pub fn nhop_id(port: u16) -> u16 {
    port.saturating_add(1)
}

/// The desired state of switch `s`.
pub fn switch_plan(
    topo: &Topology,
    routing: &Routing,
    overrides: &Overrides,
    settings: &Settings,
    s: SwitchId,
) -> SwitchPlan {
    let fixed = Arc::new(fixed_entries(topo, routing, settings, s));
    let routes = Arc::new(routes(routing, |s, leaf| overrides.get(&(s, leaf)).cloned(), s));
    SwitchPlan { fixed, routes, steer: Arc::default(), pairs: Arc::default() }
}

/// Weighted routes of a plan: per prefix `(addr, len)`, members
/// `(nhop id, weight)` sorted by nhop.
pub type Routes = BTreeMap<(Ipv4Addr, u8), Members>;

/// A route's members `(nhop id, weight)`, sorted by nhop. Shared: a
/// switch's routes toward most leaves name the same members (a leaf's
/// uplinks, a spine's way up), so [`update_routes`] keeps one copy of
/// each distinct list; a switch's routes grow with the fabric's leaves,
/// the distinct lists do not.
pub type Members = Arc<[(u16, u32)]>;

/// Routes from lists of members (a plan read back from the wire), one
/// copy of each distinct list (see [`Members`]).
pub fn routes_from(lists: impl IntoIterator<Item = ((Ipv4Addr, u8), Vec<(u16, u32)>)>) -> Routes {
    let mut shared = SharedMembers::default();
    lists.into_iter().map(|(key, members)| (key, shared.get(members))).collect()
}

/// The distinct member lists made so far, one copy each (see [`Members`]).
#[derive(Default)]
struct SharedMembers {
    distinct: HashSet<Members>,
    /// The list handed out last: routes in a row mostly name it, so they
    /// need no hash.
    last: Option<Members>,
}

impl SharedMembers {
    fn get(&mut self, members: Vec<(u16, u32)>) -> Members {
        let found =
            self.last.as_ref().filter(|m| ***m == *members).or_else(|| self.distinct.get(members.as_slice()));
        let shared = match found {
            Some(m) => m.clone(),
            None => {
                let m: Members = members.into();
                self.distinct.insert(m.clone());
                m
            }
        };
        self.last = Some(shared.clone());
        shared
    }
}

/// Everything switch `s` holds but routes and their groups: settings,
/// ports, next hops and one member per next hop a route may use.
pub fn fixed_entries(topo: &Topology, routing: &Routing, settings: &Settings, s: SwitchId) -> Vec<Entry> {
    let sw = &topo.switches[s];
    let mac = switch_mac(sw.device_id);
    let f = &topo.fabric;
    let units = settings.target.units();
    let us = |v: u64| units.time(v.saturating_mul(1000));
    // Threshold digests come back to ingress: through the CPU port on
    // BMv2 (recirculated by the program), a recirculation port on Tofino.
    let digest_port = match settings.target {
        Target::Bmv2 => u32::from(f.cpu_port),
        Target::Tofino => TOFINO_RECIRC_PORT,
    };
    let mut fixed = vec![
        Entry::Config { switch_id: sw.int_node_id, flowlet_timeout_us: units.time(f.flowlet_timeout.ns()) },
        Entry::EgressConfig {
            digest_interval_us: us(settings.digest_interval_us),
            report_period_us: us(settings.report_period_us),
            latency_shift: settings.latency_shift,
        },
        Entry::ReportConfig {
            src_mac: mac,
            dst_mac: COLLECTOR_MAC,
            src_ip: report_ip(s),
            dst_ip: if f.int { COLLECTOR_IP } else { Ipv4Addr::UNSPECIFIED },
            dst_port: settings.report_port,
        },
        Entry::CloneSession { id: REPORT_SESSION, port: u32::from(f.cpu_port) },
        Entry::CloneSession { id: DIGEST_SESSION, port: digest_port },
        large_flow_config(topo, settings),
    ];
    let (high, low, ecn) =
        (depth(f.queue_high, settings), depth(f.queue_low, settings), depth(f.ecn_threshold, settings));
    let mut nhops: BTreeMap<u16, Entry> = BTreeMap::new();
    for &h in topo.hosts_of(s) {
        let host = &topo.hosts[h];
        fixed.push(Entry::EdgePort { port: host.port });
        fixed.push(Entry::EgressPort {
            port: host.port,
            edge: true,
            mtu: 0,
            queue_high: high,
            queue_low: low,
            ecn_threshold: ecn,
        });
        nhops.insert(
            nhop_id(host.port),
            Entry::Nhop { id: nhop_id(host.port), port: host.port, src_mac: mac, dst_mac: host.mac.0 },
        );
    }
    for a in topo.adjacency(s) {
        fixed.push(Entry::EgressPort {
            port: a.port,
            edge: false,
            mtu: 0,
            queue_high: high,
            queue_low: low,
            ecn_threshold: ecn,
        });
        if !routing.link_is_up(a.link) {
            fixed.push(Entry::PortDown { port: a.port });
        }
        let peer_mac = switch_mac(topo.switches[a.peer].device_id);
        nhops.insert(
            nhop_id(a.port),
            Entry::Nhop { id: nhop_id(a.port), port: a.port, src_mac: mac, dst_mac: peer_mac },
        );
    }
    if f.int && sw.role == Role::Leaf && !topo.hosts_of(s).is_empty() {
        fixed.push(Entry::Watch {
            src: (Ipv4Addr::UNSPECIFIED, 0),
            dst: (Ipv4Addr::UNSPECIFIED, 0),
            l4_dst_port: (4791, 0xffff),
            priority: 10,
            max_hops: settings.int_max_hops,
        });
    }
    if let Some(d) = settings.drain {
        let units = settings.target.units();
        let interval = u32::try_from(units.time(d.pair_interval_ns)).unwrap_or(u32::MAX);
        fixed.push(Entry::DrainConfig { enabled: d.enabled, pair_interval_us: interval });
    }
    fixed.extend(nhops.into_values());
    let used: BTreeSet<u16> =
        routes(routing, |_, _| None, s).values().flat_map(|m| m.iter().map(|&(id, _)| id)).collect();
    fixed.extend(used.iter().map(|&id| Entry::Member { id: u32::from(id), nhop: id }));
    fixed
}

/// The large-flow detector's settings: a window, and the bytes in it that
/// make a flow large (the configured share of the slowest host NIC).
pub fn large_flow_config(topo: &Topology, settings: &Settings) -> Entry {
    let nic = topo.hosts.iter().map(|h| h.nic_rate.bps()).min().unwrap_or(0);
    let units = settings.target.units();
    let window = u32::try_from(units.time(settings.large_flow_window_ns)).unwrap_or(u32::MAX);
    let window_ns = u128::from(window) * u128::from(units.time_unit_ns.max(1));
    let bytes =
        u128::from(nic) * window_ns / 8 / 1_000_000_000 * u128::from(settings.large_flow_permille) / 1000;
    let threshold =
        if settings.large_flow_permille == 0 { 0 } else { u32::try_from(bytes).unwrap_or(u32::MAX).max(1) };
    Entry::LargeFlowConfig { window_us: window, threshold_bytes: threshold }
}

/// The pipeline entry of a target-neutral steer entry.
pub fn steer_entry(flow: &metaroce_te::FlowKey, hop: &SteerHop) -> Entry {
    match *flow {
        metaroce_te::FlowKey::Flow { src, dst, sport, qp } => Entry::SteerFlow {
            flow: metaroce_pipeline::FlowKey { src, dst, sport, qp },
            nhop_id: hop.nhop_id,
            port: hop.port,
        },
        metaroce_te::FlowKey::Pair { src, dst } => {
            Entry::SteerPair { src, dst, nhop_id: hop.nhop_id, port: hop.port }
        }
    }
}

/// The steer key of a target-neutral flow on the switch.
pub fn steer_key(flow: &metaroce_te::FlowKey) -> Key {
    match *flow {
        metaroce_te::FlowKey::Flow { src, dst, sport, qp } => {
            Key::SteerFlow(metaroce_pipeline::FlowKey { src, dst, sport, qp })
        }
        metaroce_te::FlowKey::Pair { src, dst } => Key::SteerPair(u32::from(src), u32::from(dst)),
    }
}

/// The egress port of the steer entry `state` holds for `flow`, if any.
pub fn steer_port(state: &BTreeMap<Key, Entry>, flow: &metaroce_te::FlowKey) -> Option<u16> {
    match state.get(&steer_key(flow))? {
        Entry::SteerFlow { port, .. } | Entry::SteerPair { port, .. } => Some(*port),
        _ => None,
    }
}

/// The routes of switch `s`, with the weights `overrides(s, leaf)` gives
/// (`(port, weight)`) in place of the baseline's where it gives some.
/// Overrides only re-weight the baseline's members, so the next hops a
/// plan's routes use are those of the baseline.
pub fn routes(
    routing: &Routing,
    overrides: impl Fn(SwitchId, SwitchId) -> Option<Vec<(u16, u32)>>,
    s: SwitchId,
) -> Routes {
    let mut routes = BTreeMap::new();
    update_routes(routing, overrides, s, |_| true, &mut routes);
    routes
}

/// Recomputes the routes of `s` toward the destination leaves `leaves`
/// selects, leaving the others as they are: a decision that re-weights a
/// few destinations re-plans only their routes.
pub fn update_routes(
    routing: &Routing,
    overrides: impl Fn(SwitchId, SwitchId) -> Option<Vec<(u16, u32)>>,
    s: SwitchId,
    leaves: impl Fn(SwitchId) -> bool,
    routes: &mut Routes,
) {
    if !routing.switch_is_up(s) {
        routes.clear();
        return;
    }
    // A route whose members are unchanged keeps its own list; the others
    // share the lists this call makes.
    let mut shared = SharedMembers::default();
    for r in routing.routes(s) {
        if !leaves(r.leaf) {
            continue;
        }
        let key = (r.prefix.addr, r.prefix.len);
        let Some(group) = routing.groups(s).get(r.group) else {
            routes.remove(&key);
            continue;
        };
        let baseline = |port: u16| group.members.iter().any(|m| m.port == port);
        let mut members: Vec<(u16, u32)> = match overrides(s, r.leaf) {
            // Only the baseline's members (an override never adds one,
            // and a stale one must not point into a failure).
            Some(o) if r.leaf != s && o.iter().any(|&(port, _)| baseline(port)) => o
                .iter()
                .filter(|&&(port, _)| baseline(port))
                .map(|&(port, w)| (nhop_id(port), w.max(1)))
                .collect(),
            _ => group.members.iter().map(|m| (nhop_id(m.port), m.weight.max(1))).collect(),
        };
        // A host route on its own leaf targets the host port only.
        if r.prefix.len == 32 && r.leaf == s {
            members.retain(|(id, _)| {
                group.members.iter().any(|m| nhop_id(m.port) == *id && matches!(m.next, NextHop::Host(_)))
            });
        }
        members.sort_unstable();
        members.dedup_by_key(|m| m.0);
        if members.is_empty() {
            routes.remove(&key);
        } else if routes.get(&key).is_none_or(|m| **m != *members) {
            routes.insert(key, shared.get(members));
        }
    }
}

/// Turns a plan into entries. Every multipath route has an `nhop_group`
/// entry of its own, which it keeps for as long as it is installed; the
/// entry points at the selector group holding the route's members and
/// weights, one selector group per distinct content. A re-weighted route
/// therefore costs two ordered writes before new flowlets take the new
/// weights, and never touches the route: the new selector group (a fresh
/// id, complete in one update), then its entry pointed at it in one
/// modify; the old group goes once nothing points at it. Fails only when a
/// switch would run out of 16-bit entry ids.
pub fn assign(
    plan: &SwitchPlan,
    installed: &BTreeMap<Key, Entry>,
) -> Result<BTreeMap<Key, Entry>, PlanError> {
    let mut out = assign_routes(plan, installed)?;
    add_steer(&mut out, &plan.steer);
    add_pairs(&mut out, &plan.pairs);
    Ok(out)
}

/// [`assign`] without the plan's steer entries: the fixed entries, the
/// routes and their groups. A plan whose steer entries alone changed has
/// the same (see [`add_steer`]).
pub fn assign_routes(
    plan: &SwitchPlan,
    installed: &BTreeMap<Key, Entry>,
) -> Result<BTreeMap<Key, Entry>, PlanError> {
    let mut out: BTreeMap<Key, Entry> = plan.fixed.iter().map(|e| (e.key(), e.clone())).collect();
    // What is installed: selector groups by content, entries by id, and
    // the entry each route points at.
    let mut group_of_content: BTreeMap<&[(u32, u32)], u32> = BTreeMap::new();
    let mut groups_taken: BTreeSet<u32> = BTreeSet::new();
    let mut entry_group: BTreeMap<u16, u32> = BTreeMap::new();
    let mut route_entry: BTreeMap<(u32, u8), u16> = BTreeMap::new();
    for e in installed.values() {
        match e {
            Entry::Group { id, members } => {
                group_of_content.entry(members.as_slice()).or_insert(*id);
                groups_taken.insert(*id);
            }
            Entry::GroupEntry { id, group } => {
                entry_group.insert(*id, *group);
            }
            Entry::Route { prefix, len, target: RouteTarget::Group(g) } => {
                route_entry.insert((u32::from(*prefix), *len), *g);
            }
            _ => {}
        }
    }
    let content_of = |route: &[(u16, u32)]| -> Vec<(u32, u32)> {
        route.iter().map(|&(id, w)| (u32::from(id), w)).collect()
    };
    // Routes keep their installed, usable entry. Where routes share one
    // (an older controller shared entries by content), the content most
    // of them want keeps it and the others get entries of their own.
    let mut sharing: BTreeMap<u16, BTreeMap<Vec<(u32, u32)>, usize>> = BTreeMap::new();
    for (&(prefix, len), members) in plan.routes.iter().filter(|(_, m)| m.len() > 1) {
        if let Some(&e) = route_entry.get(&(u32::from(prefix), len)).filter(|e| entry_group.contains_key(e)) {
            *sharing.entry(e).or_default().entry(content_of(members)).or_default() += 1;
        }
    }
    let keeper: BTreeMap<u16, Vec<(u32, u32)>> = sharing
        .into_iter()
        .filter_map(|(e, contents)| {
            let current = entry_group.get(&e).and_then(|g| {
                installed.get(&Key::Group(*g)).and_then(|x| match x {
                    Entry::Group { members, .. } => Some(members.clone()),
                    _ => None,
                })
            });
            let best = contents.into_iter().max_by(|a, b| {
                a.1.cmp(&b.1)
                    .then_with(|| (Some(&a.0) == current.as_ref()).cmp(&(Some(&b.0) == current.as_ref())))
            })?;
            Some((e, best.0))
        })
        .collect();
    let mut entries_taken: BTreeSet<u16> = entry_group.keys().copied().collect();
    let mut next_entry = 1u16;
    let mut new_groups: BTreeMap<Vec<(u32, u32)>, u32> = BTreeMap::new();
    let mut next_group = 1u32;
    for (&(prefix, len), members) in plan.routes.iter() {
        let target = if members.len() == 1 {
            RouteTarget::Nhop(members[0].0)
        } else {
            let content = content_of(members);
            let kept = route_entry
                .get(&(u32::from(prefix), len))
                .copied()
                .filter(|e| keeper.get(e) == Some(&content));
            let entry = match kept {
                Some(e) => e,
                None => {
                    while entries_taken.contains(&next_entry) {
                        next_entry = next_entry.checked_add(1).ok_or(PlanError::TooManyGroups)?;
                    }
                    entries_taken.insert(next_entry);
                    next_entry
                }
            };
            let group = match group_of_content.get(content.as_slice()).or_else(|| new_groups.get(&content)) {
                Some(&g) => g,
                None => {
                    while groups_taken.contains(&next_group) {
                        next_group += 1;
                    }
                    groups_taken.insert(next_group);
                    new_groups.insert(content.clone(), next_group);
                    next_group
                }
            };
            let g = Entry::Group { id: group, members: content };
            out.insert(g.key(), g);
            let ge = Entry::GroupEntry { id: entry, group };
            out.insert(ge.key(), ge);
            RouteTarget::Group(entry)
        };
        let e = Entry::Route { prefix, len, target };
        out.insert(e.key(), e);
    }
    Ok(out)
}

/// Adds the drain rule's learnt `qp_pair` entries to a switch's state.
pub fn add_pairs(out: &mut BTreeMap<Key, Entry>, pairs: &[Entry]) {
    out.extend(pairs.iter().map(|e| (e.key(), e.clone())));
}

/// Adds steer entries to a switch's assigned routes and groups
/// ([`assign_routes`]), checked against those groups: one whose next hop
/// is not a member of its route's group (or whose port is not that next
/// hop's) is refused, named, and left out; the route's group forwards the
/// flow instead.
pub fn add_steer(out: &mut BTreeMap<Key, Entry>, steer: &Steer) {
    for (flow, hop) in steer.iter() {
        let e = steer_entry(flow, hop);
        match metaroce_pipeline::check_steer_in(out, &e) {
            Ok(()) => {
                out.insert(e.key(), e);
            }
            Err(refusal) => tracing::warn!(error = %refusal, "steer entry refused"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the switch needs more than 65535 next-hop group entries (`nhop_group` ids are 16 bits)")]
    TooManyGroups,
}

#[cfg(test)]
mod tests {
    use super::*;
    use metaroce_topo::gen::{self, Common};
    use metaroce_topo::units::Bandwidth;

    /// Re-planning only the destinations whose weights changed gives the
    /// plan a full re-plan gives; an override naming a port that is not a
    /// baseline member (stale, or into a failure) never reaches a route.
    #[test]
    fn updating_some_destinations_equals_a_full_replan() {
        let t = gen::leaf_spine(&Common::new("t", Bandwidth::gbps(100)), 4, 3, 2, 1).unwrap();
        let r = Routing::compute(&t);
        let s = 0;
        let ports: Vec<u16> = t.adjacency(s).iter().map(|a| a.port).collect();
        let mut o: Overrides = Overrides::new();
        o.insert((s, 1), ports.iter().enumerate().map(|(i, &p)| (p, 1 + i as u32)).collect());
        // Leaf 2: one real member re-weighted, plus a port the group never had.
        o.insert((s, 2), vec![(ports[0], 5), (999, 7)]);
        let lookup = |sw: SwitchId, leaf: SwitchId| o.get(&(sw, leaf)).cloned();
        let full = routes(&r, lookup, s);
        let mut updated = routes(&r, |_, _| None, s);
        update_routes(&r, lookup, s, |leaf| leaf == 1 || leaf == 2, &mut updated);
        assert_eq!(updated, full);
        assert_ne!(full, routes(&r, |_, _| None, s), "the overrides changed something");
        for members in full.values() {
            assert!(members.iter().all(|&(nhop, _)| nhop != nhop_id(999)), "{members:?}");
        }
        // Back to the baseline: updating with no overrides restores it.
        update_routes(&r, |_, _| None, s, |_| true, &mut updated);
        assert_eq!(updated, routes(&r, |_, _| None, s));
    }

    /// A switch's routes toward different leaves over the same members
    /// hold one list between them, built fresh or read back from the wire;
    /// a re-weighted route gets a list of its own.
    #[test]
    fn routes_with_equal_members_share_one_list() {
        let t = gen::leaf_spine(&Common::new("t", Bandwidth::gbps(100)), 4, 3, 2, 1).unwrap();
        let r = Routing::compute(&t);
        let s = 0;
        let mut all = routes(&r, |_, _| None, s);
        let up: Vec<&Members> = all.values().filter(|m| m.len() == 3).collect();
        assert!(up.len() >= 3, "leaf 0 routes toward three leaves over its three spines: {all:?}");
        assert!(up.iter().all(|m| Arc::ptr_eq(m, up[0])), "one list for every route up");
        let back = routes_from(all.iter().map(|(k, m)| (*k, m.to_vec())));
        assert_eq!(back, all);
        let up: Vec<&Members> = back.values().filter(|m| m.len() == 3).collect();
        assert!(up.iter().all(|m| Arc::ptr_eq(m, up[0])), "one list once read back");
        let ports: Vec<u16> = t.adjacency(s).iter().map(|a| a.port).collect();
        let weights: Vec<(u16, u32)> = ports.iter().enumerate().map(|(i, &p)| (p, 1 + i as u32)).collect();
        update_routes(&r, |_, leaf| (leaf == 1).then(|| weights.clone()), s, |leaf| leaf == 1, &mut all);
        let distinct: HashSet<&[(u16, u32)]> =
            all.values().filter(|m| m.len() == 3).map(|m| &m[..]).collect();
        assert_eq!(distinct.len(), 2, "the re-weighted route's members differ from the others'");
    }

    /// The same YAML on both targets: thresholds in each one's queue
    /// units (48 packets = 48 slots on BMv2, 48 x 19 cells of 80 bytes on
    /// Tofino), times in its time units, digests back through the CPU port
    /// on BMv2 and a recirculation port on Tofino.
    #[test]
    fn a_threshold_means_the_same_queue_on_both_targets() {
        let t = gen::leaf_spine(&Common::new("t", Bandwidth::gbps(100)), 2, 2, 1, 1).unwrap();
        let r = Routing::compute(&t);
        let f = &t.fabric;
        let pick = |target: Target| {
            let settings = Settings { target, ..Settings::default() };
            let fixed = fixed_entries(&t, &r, &settings, 0);
            let high = fixed.iter().find_map(|e| match e {
                Entry::EgressPort { queue_high, .. } => Some(*queue_high),
                _ => None,
            });
            let timeout = fixed.iter().find_map(|e| match e {
                Entry::Config { flowlet_timeout_us, .. } => Some(*flowlet_timeout_us),
                _ => None,
            });
            let interval = fixed.iter().find_map(|e| match e {
                Entry::EgressConfig { digest_interval_us, .. } => Some(*digest_interval_us),
                _ => None,
            });
            let digest_port = fixed.iter().find_map(|e| match e {
                Entry::CloneSession { id: DIGEST_SESSION, port } => Some(*port),
                _ => None,
            });
            let window = match large_flow_config(&t, &settings) {
                Entry::LargeFlowConfig { window_us, threshold_bytes } => (window_us, threshold_bytes),
                _ => (0, 0),
            };
            (high, timeout, interval, digest_port, window)
        };
        let QueueDepth::Packets(p) = f.queue_high else { panic!("the generator's default is in packets") };
        let (bh, bt, bi, bd, bw) = pick(Target::Bmv2);
        let (th, tt, ti, td, tw) = pick(Target::Tofino);
        assert_eq!(bh, Some(p as u32));
        assert_eq!(th, Some(p as u32 * 19));
        assert_eq!(bt, Some(f.flowlet_timeout.ns().div_ceil(1000)));
        assert_eq!(tt, Some(f.flowlet_timeout.ns()));
        assert_eq!((bi, ti), (Some(1000), Some(1_000_000)));
        assert_eq!((bd, td), (Some(u32::from(f.cpu_port)), Some(TOFINO_RECIRC_PORT)));
        // The same window and the same bytes, in each target's time unit.
        assert_eq!((bw.0, tw.0), (1000, 1_000_000));
        assert_eq!(bw.1, tw.1);
    }
}
