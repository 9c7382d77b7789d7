//! From the positioned YAML tree to raw, per-field-checked records.
//!
//! Each field is decoded on its own and every problem is recorded with its
//! path and position; decoding goes on after an error so that one run shows
//! all of them. Cross-record checks (duplicates, ports, reachability) live
//! in `validate`.

use std::net::Ipv4Addr;

use crate::error::Diagnostic;
use crate::model::{Ipv4Net, MacAddr, Role};
use crate::spec::{self, Field, Kind};
use crate::units::{Bandwidth, ByteSize, Duration, QueueDepth};
use crate::yaml::{Node, Pos, Value};

/// Most switches in one fabric; far beyond any real Clos, small enough to
/// keep a typo from asking for gigabytes.
pub const MAX_SWITCHES: usize = 16_384;
pub const MAX_HOSTS: usize = 262_144;
pub const MAX_LINKS: usize = 1_048_576;

/// A decoded value with where it was written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct At<T> {
    pub v: T,
    pub pos: Pos,
}

#[derive(Debug, Default)]
pub struct RawSwitch {
    pub name: Option<At<String>>,
    pub role: Option<At<Role>>,
    pub device_id: Option<At<u64>>,
    pub p4rt: Option<At<String>>,
    pub thrift_port: Option<At<u16>>,
    pub int_node_id: Option<At<u32>>,
    pub subnet: Option<At<Ipv4Net>>,
}

#[derive(Debug, Default)]
pub struct RawHost {
    pub pos: Pos,
    pub name: Option<At<String>>,
    pub ip: Option<At<Ipv4Addr>>,
    pub mac: Option<At<MacAddr>>,
    pub leaf: Option<At<String>>,
    pub port: Option<At<u16>>,
    pub nic_rate: Option<Bandwidth>,
    pub exporter: Option<At<String>>,
}

#[derive(Debug, Default)]
pub struct RawLink {
    pub pos: Pos,
    pub a: Option<At<(String, u16)>>,
    pub b: Option<At<(String, u16)>>,
    pub bandwidth: Option<Bandwidth>,
    pub delay: Option<Duration>,
    pub buffer: Option<ByteSize>,
}

#[derive(Debug, Default)]
pub struct RawFabric {
    pub flowlet_timeout: Option<At<Duration>>,
    pub queue_high: Option<At<QueueDepth>>,
    pub queue_low: Option<At<QueueDepth>>,
    pub ecn_threshold: Option<At<QueueDepth>>,
    pub int: Option<bool>,
    pub in_order_nics: Option<bool>,
    pub cpu_port: Option<At<u16>>,
}

#[derive(Debug, Default)]
pub struct RawDefaults {
    pub link_bandwidth: Option<Bandwidth>,
    pub link_delay: Option<Duration>,
    pub link_buffer: Option<ByteSize>,
    pub nic_rate: Option<Bandwidth>,
}

#[derive(Debug, Default)]
pub struct RawTopology {
    pub name: Option<String>,
    pub description: Option<String>,
    pub fabric: RawFabric,
    pub defaults: RawDefaults,
    pub switches: Vec<RawSwitch>,
    pub hosts: Vec<RawHost>,
    pub links: Vec<RawLink>,
}

/// Collects diagnostics while decoding.
#[derive(Debug, Default)]
pub struct Diags(pub Vec<Diagnostic>);

impl Diags {
    pub fn at(&mut self, path: impl Into<String>, pos: Option<Pos>, message: impl Into<String>) {
        self.0.push(Diagnostic { path: path.into(), pos, message: message.into() });
    }
}

/// A mapping whose keys have been checked against its field table.
struct Obj<'n> {
    path: String,
    fields: &'static [Field],
    entries: &'n [(Node, Node)],
}

impl<'n> Obj<'n> {
    fn get(&self, name: &str) -> Option<&'n Node> {
        debug_assert!(
            spec::field(self.fields, name).is_some(),
            "decoder asks for {name}, which the spec lacks"
        );
        self.entries
            .iter()
            .find(|(k, _)| k.as_str() == Some(name))
            .map(|(_, v)| v)
            .filter(|v| v.value != Value::Null)
    }
    fn child(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.path)
        }
    }
}

/// Checks that `node` is a mapping, reports unknown keys (with a
/// suggestion) and missing required keys.
fn object<'n>(d: &mut Diags, path: &str, node: &'n Node, fields: &'static [Field]) -> Option<Obj<'n>> {
    let entries: &[(Node, Node)] = match &node.value {
        Value::Map(entries) => entries,
        Value::Null => &[],
        _ => {
            let keys: Vec<&str> = fields.iter().map(|f| f.name).collect();
            d.at(
                path,
                Some(node.pos),
                format!("expected a mapping with keys {}, found {}", keys.join(", "), node.kind()),
            );
            return None;
        }
    };
    for (k, _) in entries {
        let key = k.as_str().unwrap_or_default();
        if spec::field(fields, key).is_none() {
            let known = fields.iter().map(|f| f.name);
            let hint = match spec::did_you_mean(key, known) {
                Some(s) => format!("; did you mean \"{s}\"?"),
                None => {
                    format!("; known keys: {}", fields.iter().map(|f| f.name).collect::<Vec<_>>().join(", "))
                }
            };
            let obj = if path.is_empty() { "the top level".to_string() } else { path.to_string() };
            d.at(path, Some(k.pos), format!("unknown key \"{key}\" in {obj}{hint}"));
        }
    }
    let obj = Obj { path: path.to_string(), fields, entries };
    for f in fields.iter().filter(|f| f.required) {
        if obj.entries.iter().all(|(k, v)| k.as_str() != Some(f.name) || v.value == Value::Null) {
            d.at(
                obj.child(f.name),
                Some(node.pos),
                format!("missing required key \"{}\" ({})", f.name, f.doc),
            );
        }
    }
    Some(obj)
}

/// Decodes one scalar field with `parse`, recording a located error on failure.
fn scalar<T>(
    d: &mut Diags,
    obj: &Obj<'_>,
    name: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Option<At<T>> {
    let node = obj.get(name)?;
    let Some(text) = node.as_str() else {
        d.at(obj.child(name), Some(node.pos), format!("expected a single value, found {}", node.kind()));
        return None;
    };
    match parse(text) {
        Ok(v) => Some(At { v, pos: node.pos }),
        Err(msg) => {
            d.at(obj.child(name), Some(node.pos), msg);
            None
        }
    }
}

fn kind_of(obj: &Obj<'_>, name: &str) -> Kind {
    spec::field(obj.fields, name).map_or(Kind::Text, |f| f.kind)
}

fn text(d: &mut Diags, obj: &Obj<'_>, name: &str) -> Option<At<String>> {
    scalar(d, obj, name, |s| {
        if s.trim().is_empty() {
            Err("must not be empty".into())
        } else if s.len() > 256 {
            Err("is longer than 256 characters".into())
        } else {
            Ok(s.to_string())
        }
    })
}

/// A name that other records refer to: no spaces, no colons.
fn name(d: &mut Diags, obj: &Obj<'_>, key: &str) -> Option<At<String>> {
    scalar(d, obj, key, |s| {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if ok {
            Ok(s.to_string())
        } else {
            Err(format!("name \"{s}\" must be 1-64 characters of letters, digits, '-', '_' or '.'"))
        }
    })
}

fn int(d: &mut Diags, obj: &Obj<'_>, name: &str) -> Option<At<u64>> {
    let Kind::Int { min, max } = kind_of(obj, name) else { return None };
    scalar(d, obj, name, |s| match s.parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        Ok(v) => Err(format!("{v} is out of range {min}..={max}")),
        Err(_) => Err(format!("expected a whole number in {min}..={max}, found \"{s}\"")),
    })
}

fn small<T: TryFrom<u64>>(v: Option<At<u64>>) -> Option<At<T>> {
    v.and_then(|a| T::try_from(a.v).ok().map(|v| At { v, pos: a.pos }))
}

fn boolean(d: &mut Diags, obj: &Obj<'_>, name: &str) -> Option<bool> {
    scalar(d, obj, name, |s| match s {
        "true" | "True" | "TRUE" => Ok(true),
        "false" | "False" | "FALSE" => Ok(false),
        _ => Err(format!("expected true or false, found \"{s}\"")),
    })
    .map(|a| a.v)
}

fn unit<T>(
    d: &mut Diags,
    obj: &Obj<'_>,
    name: &str,
    parse: fn(&str) -> Result<T, crate::units::UnitError>,
) -> Option<At<T>> {
    scalar(d, obj, name, |s| parse(s).map_err(|e| e.0))
}

fn endpoint(d: &mut Diags, obj: &Obj<'_>, name: &str) -> Option<At<(String, u16)>> {
    scalar(d, obj, name, |s| {
        let bad =
            || format!("\"{s}\" is not an endpoint like \"leaf1:3\" (switch name, colon, port 0..=510)");
        let (sw, port) = s.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.trim().parse().map_err(|_| bad())?;
        if sw.trim().is_empty() || port > 510 {
            return Err(bad());
        }
        Ok((sw.trim().to_string(), port))
    })
}

fn address(d: &mut Diags, obj: &Obj<'_>, name: &str) -> Option<At<String>> {
    scalar(d, obj, name, |s| {
        let bad =
            || format!("\"{s}\" is not an address like \"127.0.0.1:50001\" (host, colon, port 1..=65535)");
        let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        if host.is_empty() || host.contains(char::is_whitespace) || port == 0 {
            return Err(bad());
        }
        Ok(s.to_string())
    })
}

/// Checks that `node` is a list of at most `max` items.
fn list<'n>(d: &mut Diags, path: &str, node: Option<&'n Node>, max: usize) -> &'n [Node] {
    let Some(node) = node else { return &[] };
    match &node.value {
        Value::Seq(items) if items.len() > max => {
            d.at(path, Some(node.pos), format!("{} entries, more than the limit of {max}", items.len()));
            &[]
        }
        Value::Seq(items) => items,
        Value::Null => &[],
        _ => {
            d.at(path, Some(node.pos), format!("expected a list, found {}", node.kind()));
            &[]
        }
    }
}

/// Decodes the document root into raw records.
pub fn topology(d: &mut Diags, root: &Node) -> RawTopology {
    let mut raw = RawTopology::default();
    if !matches!(root.value, Value::Map(_)) {
        d.at(
            "",
            Some(root.pos),
            format!(
                "a topology file is a mapping with keys name, switches, hosts, links; found {}",
                root.kind()
            ),
        );
        return raw;
    }
    let Some(top) = object(d, "", root, spec::TOPOLOGY) else { return raw };
    raw.name = text(d, &top, "name").map(|a| a.v);
    raw.description = text(d, &top, "description").map(|a| a.v);
    if let Some(node) = top.get("fabric") {
        raw.fabric = fabric(d, node);
    }
    if let Some(node) = top.get("defaults") {
        raw.defaults = defaults(d, node);
    }
    for (i, node) in list(d, "switches", top.get("switches"), MAX_SWITCHES).iter().enumerate() {
        raw.switches.push(switch(d, &format!("switches[{i}]"), node));
    }
    for (i, node) in list(d, "hosts", top.get("hosts"), MAX_HOSTS).iter().enumerate() {
        raw.hosts.push(host(d, &format!("hosts[{i}]"), node));
    }
    for (i, node) in list(d, "links", top.get("links"), MAX_LINKS).iter().enumerate() {
        raw.links.push(link(d, &format!("links[{i}]"), node));
    }
    raw
}

fn fabric(d: &mut Diags, node: &Node) -> RawFabric {
    let Some(o) = object(d, "fabric", node, spec::FABRIC) else { return RawFabric::default() };
    RawFabric {
        flowlet_timeout: unit(d, &o, "flowlet_timeout", Duration::parse),
        queue_high: unit(d, &o, "queue_high", QueueDepth::parse),
        queue_low: unit(d, &o, "queue_low", QueueDepth::parse),
        ecn_threshold: unit(d, &o, "ecn_threshold", QueueDepth::parse),
        int: boolean(d, &o, "int"),
        in_order_nics: boolean(d, &o, "in_order_nics"),
        cpu_port: small(int(d, &o, "cpu_port")),
    }
}

fn defaults(d: &mut Diags, node: &Node) -> RawDefaults {
    let mut raw = RawDefaults::default();
    let Some(o) = object(d, "defaults", node, spec::DEFAULTS) else { return raw };
    if let Some(l) = o.get("link").and_then(|n| object(d, "defaults.link", n, spec::LINK_DEFAULTS)) {
        raw.link_bandwidth = unit(d, &l, "bandwidth", Bandwidth::parse).map(|a| a.v);
        raw.link_delay = unit(d, &l, "delay", Duration::parse).map(|a| a.v);
        raw.link_buffer = unit(d, &l, "buffer", ByteSize::parse).map(|a| a.v);
    }
    if let Some(h) = o.get("host").and_then(|n| object(d, "defaults.host", n, spec::HOST_DEFAULTS)) {
        raw.nic_rate = unit(d, &h, "nic_rate", Bandwidth::parse).map(|a| a.v);
    }
    raw
}

fn switch(d: &mut Diags, path: &str, node: &Node) -> RawSwitch {
    let mut raw = RawSwitch::default();
    let Some(o) = object(d, path, node, spec::SWITCH) else { return raw };
    raw.name = name(d, &o, "name");
    raw.role = scalar(d, &o, "role", |s| {
        s.parse::<Role>().map_err(|()| match spec::did_you_mean(s, spec::ROLES.iter().copied()) {
            Some(r) => format!("unknown role \"{s}\"; did you mean \"{r}\"?"),
            None => format!("unknown role \"{s}\"; use leaf, spine or super-spine"),
        })
    });
    raw.device_id = int(d, &o, "device_id");
    raw.p4rt = address(d, &o, "p4rt");
    raw.thrift_port = small(int(d, &o, "thrift_port"));
    raw.int_node_id = small(int(d, &o, "int_node_id"));
    raw.subnet = scalar(d, &o, "subnet", str::parse);
    raw
}

fn host(d: &mut Diags, path: &str, node: &Node) -> RawHost {
    let mut raw = RawHost { pos: node.pos, ..RawHost::default() };
    let Some(o) = object(d, path, node, spec::HOST) else { return raw };
    raw.name = name(d, &o, "name");
    raw.ip = scalar(d, &o, "ip", |s| {
        let ip: Ipv4Addr =
            s.parse().map_err(|_| format!("\"{s}\" is not an IPv4 address like \"10.0.1.1\""))?;
        if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.is_loopback() {
            return Err(format!(
                "{ip} cannot be a host address (unspecified, broadcast, multicast or loopback)"
            ));
        }
        Ok(ip)
    });
    raw.mac = scalar(d, &o, "mac", |s| {
        let mac: MacAddr = s.parse()?;
        if mac.0[0] & 1 == 1 {
            return Err(format!("{mac} is a multicast MAC; a host needs a unicast address"));
        }
        Ok(mac)
    });
    raw.leaf = name(d, &o, "leaf");
    raw.port = small(int(d, &o, "port"));
    raw.nic_rate = unit(d, &o, "nic_rate", Bandwidth::parse).map(|a| a.v);
    raw.exporter = address(d, &o, "exporter");
    raw
}

fn link(d: &mut Diags, path: &str, node: &Node) -> RawLink {
    let mut raw = RawLink { pos: node.pos, ..RawLink::default() };
    let Some(o) = object(d, path, node, spec::LINK) else { return raw };
    raw.a = endpoint(d, &o, "a");
    raw.b = endpoint(d, &o, "b");
    raw.bandwidth = unit(d, &o, "bandwidth", Bandwidth::parse).map(|a| a.v);
    raw.delay = unit(d, &o, "delay", Duration::parse).map(|a| a.v);
    raw.buffer = unit(d, &o, "buffer", ByteSize::parse).map(|a| a.v);
    raw
}
