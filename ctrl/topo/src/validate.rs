//! Checks across records, then assembly of the [`Topology`].
//!
//! Names must resolve, identifiers must be unique, ports must be used once,
//! links must join different tiers, and every host must be able to reach
//! every other over valley-free paths. Every problem is reported, each at
//! the place that introduced it, pointing back at the first use when
//! something is duplicated.

use std::collections::HashMap;
use std::hash::Hash;

use crate::decode::{At, Diags, RawTopology};
use crate::model::{Defaults, Endpoint, Fabric, Host, Link, Role, Switch, SwitchId, Topology};
use crate::routing::Routing;
use crate::spec;
use crate::yaml::Pos;

/// Remembers the first place each key was seen and reports later ones.
struct Unique<K> {
    what: &'static str,
    seen: HashMap<K, String>,
}

impl<K: Eq + Hash> Unique<K> {
    fn new(what: &'static str) -> Self {
        Unique { what, seen: HashMap::new() }
    }
    /// Records `key`; reports it and returns false if it was seen before.
    fn check(&mut self, d: &mut Diags, key: K, shown: &str, path: String, pos: Pos) -> bool {
        match self.seen.get(&key) {
            Some(first) => {
                d.at(path, Some(pos), format!("duplicate {} {shown} (first used by {first})", self.what));
                false
            }
            None => {
                self.seen.insert(key, format!("{path}, line {}", pos.line));
                true
            }
        }
    }
}

/// Validates raw records and builds the topology; `None` when anything was wrong.
pub fn assemble(d: &mut Diags, raw: RawTopology) -> Option<Topology> {
    let fabric = fabric(d, &raw);
    let defaults = Defaults {
        link_bandwidth: raw.defaults.link_bandwidth.unwrap_or(Defaults::default().link_bandwidth),
        link_delay: raw.defaults.link_delay.unwrap_or(Defaults::default().link_delay),
        link_buffer: raw.defaults.link_buffer.unwrap_or(Defaults::default().link_buffer),
        nic_rate: raw
            .defaults
            .nic_rate
            .or(raw.defaults.link_bandwidth)
            .unwrap_or(Defaults::default().nic_rate),
    };
    if raw.switches.is_empty() && d.0.is_empty() {
        d.at("switches", None, "a fabric needs at least one switch");
    }
    // Aligned with raw.switches: `None` where a switch had its own errors.
    // Its name still resolves, so one bad field does not cascade into
    // "unknown switch" everywhere the switch is used.
    let switches = switches(d, &raw);
    let mut index: HashMap<&str, SwitchId> = HashMap::new();
    for (i, s) in raw.switches.iter().enumerate() {
        if let Some(n) = &s.name {
            index.entry(n.v.as_str()).or_insert(i);
        }
    }
    let mut ports = Unique::new("use of port");
    let hosts = hosts(d, &raw, &switches, &index, &defaults, &fabric, &mut ports);
    let links = links(d, &raw, &switches, &index, &defaults, &fabric, &mut ports);
    let switches: Vec<Switch> = switches.into_iter().flatten().collect();
    let complete = switches.len() == raw.switches.len()
        && hosts.len() == raw.hosts.len()
        && links.len() == raw.links.len();
    if !d.0.is_empty() || !complete {
        return None;
    }
    let topo = Topology::assemble(
        raw.name.clone().unwrap_or_default(),
        raw.description.clone(),
        fabric,
        defaults,
        switches,
        hosts,
        links,
    );
    reachability(d, &topo, &raw);
    d.0.is_empty().then_some(topo)
}

fn fabric(d: &mut Diags, raw: &RawTopology) -> Fabric {
    let def = Fabric::default();
    let f = &raw.fabric;
    let fabric = Fabric {
        flowlet_timeout: f.flowlet_timeout.map_or(def.flowlet_timeout, |a| a.v),
        queue_high: f.queue_high.map_or(def.queue_high, |a| a.v),
        queue_low: f.queue_low.map_or(def.queue_low, |a| a.v),
        ecn_threshold: f.ecn_threshold.map_or(def.ecn_threshold, |a| a.v),
        int: f.int.unwrap_or(def.int),
        in_order_nics: f.in_order_nics.unwrap_or(def.in_order_nics),
        cpu_port: f.cpu_port.map_or(def.cpu_port, |a| a.v),
    };
    if let Some(t) = f.flowlet_timeout.filter(|t| t.v.ns() == 0) {
        d.at("fabric.flowlet_timeout", Some(t.pos), "must be greater than zero");
    }
    let pos = |a: Option<At<_>>| a.map(|a: At<crate::units::QueueDepth>| a.pos);
    if !fabric.queue_low.same_unit(fabric.queue_high) || !fabric.ecn_threshold.same_unit(fabric.queue_high) {
        d.at(
            "fabric",
            pos(f.queue_low).or(pos(f.ecn_threshold)).or(pos(f.queue_high)),
            format!(
                "queue_high ({}), queue_low ({}) and ecn_threshold ({}) must use the same unit, packets or bytes",
                fabric.queue_high, fabric.queue_low, fabric.ecn_threshold
            ),
        );
    } else if fabric.queue_low.value() >= fabric.queue_high.value() {
        d.at(
            "fabric.queue_low",
            pos(f.queue_low).or(pos(f.queue_high)),
            format!(
                "queue_low ({}) must be below queue_high ({}) so that a port can leave the congested state",
                fabric.queue_low, fabric.queue_high
            ),
        );
    }
    if fabric.queue_high.value() == 0 || fabric.ecn_threshold.value() == 0 {
        d.at(
            "fabric",
            pos(f.queue_high).or(pos(f.ecn_threshold)),
            "queue_high and ecn_threshold must be above zero",
        );
    }
    fabric
}

fn switches(d: &mut Diags, raw: &RawTopology) -> Vec<Option<Switch>> {
    let mut names = Unique::new("name");
    let mut devices = Unique::new("device_id");
    let mut int_ids = Unique::new("int_node_id");
    let mut addrs = Unique::new("p4rt address");
    let mut thrift = Unique::new("thrift address");
    let mut out = Vec::with_capacity(raw.switches.len());
    for (i, s) in raw.switches.iter().enumerate() {
        let path = |f: &str| format!("switches[{i}].{f}");
        if let Some(n) = &s.name {
            names.check(d, n.v.clone(), &format!("\"{}\"", n.v), path("name"), n.pos);
        }
        let device_unique =
            s.device_id.is_none_or(|id| devices.check(d, id.v, &id.v.to_string(), path("device_id"), id.pos));
        let int_id = s
            .int_node_id
            .or_else(|| s.device_id.and_then(|a| Some(At { v: u32::try_from(a.v).ok()?, pos: a.pos })));
        // A defaulted int_node_id repeats a duplicate device_id: reported once, above.
        if let Some(id) = int_id.filter(|_| device_unique || s.int_node_id.is_some()) {
            let via = if s.int_node_id.is_some() { "" } else { " (defaulted from device_id)" };
            int_ids.check(d, id.v, &format!("{}{via}", id.v), path("int_node_id"), id.pos);
        }
        if let Some(a) = &s.p4rt {
            addrs.check(d, a.v.clone(), &a.v, path("p4rt"), a.pos);
            if let Some(t) = s.thrift_port {
                let host = a.v.rsplit_once(':').map_or("", |(h, _)| h);
                thrift.check(
                    d,
                    (host.to_string(), t.v),
                    &format!("{host}:{}", t.v),
                    path("thrift_port"),
                    t.pos,
                );
            }
        }
        if let (Some(sub), Some(role)) = (s.subnet, s.role) {
            if role.v != Role::Leaf {
                d.at(
                    path("subnet"),
                    Some(sub.pos),
                    format!("only leaves own a subnet; this switch is a {}", role.v),
                );
            }
        }
        let complete = (&s.name, s.role, s.device_id, &s.p4rt, int_id);
        out.push(
            if let (Some(name), Some(role), Some(device_id), Some(p4rt), Some(int_node_id)) = complete {
                Some(Switch {
                    name: name.v.clone(),
                    role: role.v,
                    device_id: device_id.v,
                    p4rt: p4rt.v.clone(),
                    thrift_port: s.thrift_port.map(|t| t.v),
                    int_node_id: int_node_id.v,
                    subnet: s.subnet.map(|a| a.v),
                })
            } else {
                None
            },
        );
    }
    let subnets: Vec<_> = raw.switches.iter().enumerate().filter_map(|(i, s)| Some((i, s.subnet?))).collect();
    for (x, (i, a)) in subnets.iter().enumerate() {
        if let Some((j, _)) = subnets[..x].iter().find(|(_, b)| a.v.overlaps(&b.v)) {
            d.at(
                format!("switches[{i}].subnet"),
                Some(a.pos),
                format!("subnet {} overlaps the subnet of switches[{j}]", a.v),
            );
        }
    }
    out
}

/// Resolves a switch name, suggesting the closest one when it is unknown.
fn resolve(
    d: &mut Diags,
    index: &HashMap<&str, SwitchId>,
    name: &str,
    path: String,
    pos: Pos,
) -> Option<SwitchId> {
    let found = index.get(name).copied();
    if found.is_none() {
        let hint =
            spec::did_you_mean(name, index.keys().copied()).map(|s| format!("; did you mean \"{s}\"?"));
        d.at(path, Some(pos), format!("unknown switch \"{name}\"{}", hint.unwrap_or_default()));
    }
    found
}

fn check_port(
    d: &mut Diags,
    ports: &mut Unique<(SwitchId, u16)>,
    fabric: &Fabric,
    (sw, sw_name, port): (SwitchId, &str, u16),
    path: String,
    pos: Pos,
) {
    if port == fabric.cpu_port {
        d.at(
            path.clone(),
            Some(pos),
            format!("port {port} is the CPU port (fabric.cpu_port); use another port"),
        );
    }
    ports.check(d, (sw, port), &format!("{sw_name}:{port}"), path, pos);
}

fn hosts(
    d: &mut Diags,
    raw: &RawTopology,
    switches: &[Option<Switch>],
    index: &HashMap<&str, SwitchId>,
    defaults: &Defaults,
    fabric: &Fabric,
    ports: &mut Unique<(SwitchId, u16)>,
) -> Vec<Host> {
    let mut names: Unique<String> = Unique::new("name");
    for (i, s) in raw.switches.iter().enumerate() {
        if let Some(n) = &s.name {
            names
                .seen
                .entry(n.v.clone())
                .or_insert_with(|| format!("switches[{i}].name, line {}", n.pos.line));
        }
    }
    let mut ips = Unique::new("IP address");
    let mut macs = Unique::new("MAC address");
    let mut exporters = Unique::new("exporter address");
    let mut out = Vec::with_capacity(raw.hosts.len());
    for (i, h) in raw.hosts.iter().enumerate() {
        let path = |f: &str| format!("hosts[{i}].{f}");
        if let Some(n) = &h.name {
            names.check(d, n.v.clone(), &format!("\"{}\"", n.v), path("name"), n.pos);
        }
        if let Some(ip) = h.ip {
            ips.check(d, ip.v, &ip.v.to_string(), path("ip"), ip.pos);
        }
        if let Some(mac) = h.mac {
            macs.check(d, mac.v, &mac.v.to_string(), path("mac"), mac.pos);
        }
        if let Some(a) = &h.exporter {
            exporters.check(d, a.v.clone(), &a.v, path("exporter"), a.pos);
        }
        let leaf = h.leaf.as_ref().and_then(|l| resolve(d, index, &l.v, path("leaf"), l.pos));
        if let (Some(leaf), Some(l), Some(sw)) = (leaf, &h.leaf, leaf.and_then(|x| switches[x].as_ref())) {
            if sw.role != Role::Leaf {
                d.at(
                    path("leaf"),
                    Some(l.pos),
                    format!("{} is a {}; hosts attach to leaves", sw.name, sw.role),
                );
            }
            if let Some(port) = h.port {
                check_port(d, ports, fabric, (leaf, &sw.name, port.v), path("port"), port.pos);
            }
            if let (Some(ip), Some(subnet)) = (h.ip, sw.subnet) {
                if !subnet.contains(ip.v) {
                    d.at(
                        path("ip"),
                        Some(ip.pos),
                        format!("{} is outside {}'s subnet {subnet}", ip.v, sw.name),
                    );
                }
            }
            if let Some(ip) = h.ip {
                let owner = switches
                    .iter()
                    .flatten()
                    .find(|s| s.name != sw.name && s.subnet.is_some_and(|n| n.contains(ip.v)));
                if let Some(other) = owner {
                    d.at(
                        path("ip"),
                        Some(ip.pos),
                        format!(
                            "{} lies in {}'s subnet, but the host attaches to {}",
                            ip.v, other.name, sw.name
                        ),
                    );
                }
            }
        }
        if let (Some(name), Some(ip), Some(mac), Some(leaf), Some(port)) =
            (&h.name, h.ip, h.mac, leaf, h.port)
        {
            out.push(Host {
                name: name.v.clone(),
                ip: ip.v,
                mac: mac.v,
                leaf,
                port: port.v,
                nic_rate: h.nic_rate.unwrap_or(defaults.nic_rate),
                delay: defaults.link_delay,
                exporter: h.exporter.as_ref().map(|a| a.v.clone()),
            });
        }
    }
    out
}

fn links(
    d: &mut Diags,
    raw: &RawTopology,
    switches: &[Option<Switch>],
    index: &HashMap<&str, SwitchId>,
    defaults: &Defaults,
    fabric: &Fabric,
    ports: &mut Unique<(SwitchId, u16)>,
) -> Vec<Link> {
    let mut out = Vec::with_capacity(raw.links.len());
    for (i, l) in raw.links.iter().enumerate() {
        let mut ends = [None, None];
        for (slot, (key, end)) in ends.iter_mut().zip([("a", &l.a), ("b", &l.b)]) {
            let Some(end) = end else { continue };
            let path = format!("links[{i}].{key}");
            if let Some(sw) = resolve(d, index, &end.v.0, path.clone(), end.pos) {
                check_port(d, ports, fabric, (sw, &end.v.0, end.v.1), path, end.pos);
                *slot = Some(Endpoint { switch: sw, port: end.v.1 });
            }
        }
        let [Some(a), Some(b)] = ends else { continue };
        let pos = l.b.as_ref().map(|e| e.pos);
        let (Some(sa), Some(sb)) = (&switches[a.switch], &switches[b.switch]) else { continue };
        if a.switch == b.switch {
            d.at(format!("links[{i}].b"), pos, format!("link joins {} to itself", sa.name));
            continue;
        }
        if sa.role == sb.role {
            d.at(
                format!("links[{i}]"),
                Some(l.pos),
                format!(
                    "link joins two {} ({} and {}); links must join different tiers so that routes stay \
                     valley-free (a down-then-up path risks PFC deadlock)",
                    sa.role.plural(),
                    sa.name,
                    sb.name
                ),
            );
            continue;
        }
        out.push(Link {
            a,
            b,
            bandwidth: l.bandwidth.unwrap_or(defaults.link_bandwidth),
            delay: l.delay.unwrap_or(defaults.link_delay),
            buffer: l.buffer.unwrap_or(defaults.link_buffer),
        });
    }
    out
}

/// Every pair of leaves with hosts must have a valley-free path.
fn reachability(d: &mut Diags, topo: &Topology, raw: &RawTopology) {
    const SHOWN: usize = 10;
    let routing = Routing::compute(topo);
    let leaves: Vec<SwitchId> = (0..topo.switches.len()).filter(|&s| !topo.hosts_of(s).is_empty()).collect();
    let mut missing = 0usize;
    for &from in &leaves {
        for &to in &leaves {
            if from == to || routing.reaches(from, to) {
                continue;
            }
            missing += 1;
            if missing <= SHOWN {
                let (hf, ht) = (topo.hosts_of(from)[0], topo.hosts_of(to)[0]);
                d.at(
                    format!("hosts[{hf}]"),
                    Some(raw.hosts[hf].pos),
                    format!(
                        "{} (on {}) cannot reach {} (on {}): no valley-free path from {} to {}",
                        topo.hosts[hf].name,
                        topo.switches[from].name,
                        topo.hosts[ht].name,
                        topo.switches[to].name,
                        topo.switches[from].name,
                        topo.switches[to].name
                    ),
                );
            }
        }
    }
    if missing > SHOWN {
        d.at(
            "hosts",
            None,
            format!("... and {} more leaf pairs that cannot reach each other", missing - SHOWN),
        );
    }
}
