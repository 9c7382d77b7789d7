//! The topology format, described once.
//!
//! These tables drive both the decoder (which keys are known, which are
//! required, did-you-mean for typos) and the published JSON Schema
//! (`topologies/schema.json`, written by `metaroce topo schema`). A test
//! checks the committed schema against [`json_schema`], so the two cannot
//! drift apart.

use serde_json::{json, Map, Value};

/// What a field holds.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Text,
    Bool,
    Int {
        min: u64,
        max: u64,
    },
    Bandwidth,
    Duration,
    ByteSize,
    QueueDepth,
    Ipv4,
    Ipv4Prefix,
    Mac,
    /// `host:port`, where a P4Runtime server listens.
    Address,
    /// `switch:port`, one end of a link.
    Endpoint,
    Enum(&'static [&'static str]),
    Object(&'static [Field]),
    List(&'static [Field]),
}

/// One key of a mapping.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    pub required: bool,
    pub doc: &'static str,
}

const fn req(name: &'static str, kind: Kind, doc: &'static str) -> Field {
    Field { name, kind, required: true, doc }
}
const fn opt(name: &'static str, kind: Kind, doc: &'static str) -> Field {
    Field { name, kind, required: false, doc }
}

/// Port numbers: 9 bits on v1model and Tofino; 511 is BMv2's drop port.
pub const PORT: Kind = Kind::Int { min: 0, max: 510 };
pub const ROLES: &[&str] = &["leaf", "spine", "super-spine"];

pub const FABRIC: &[Field] = &[
    opt(
        "flowlet_timeout",
        Kind::Duration,
        "Idle gap after which a flow may take a new path (default 100us; use milliseconds on BMv2).",
    ),
    opt("queue_high", Kind::QueueDepth, "Queue depth at which a port is reported congested (default 48pkt)."),
    opt(
        "queue_low",
        Kind::QueueDepth,
        "Queue depth below which a congested port is reported clear (default 16pkt).",
    ),
    opt(
        "ecn_threshold",
        Kind::QueueDepth,
        "Queue depth above which ECT packets are marked CE (default 32pkt).",
    ),
    opt("int", Kind::Bool, "Instrument RoCEv2 flows with INT-MD (default true)."),
    opt(
        "in_order_nics",
        Kind::Bool,
        "The hosts' RDMA NICs need packets in order (go-back-N): a flow changes path only when nothing of it is in flight (the drain rule; default true). false: flowlet gaps decide, for NICs that accept packets out of order.",
    ),
    opt(
        "cpu_port",
        Kind::Int { min: 0, max: 510 },
        "Port that carries packet-in/packet-out to the controller (default 255).",
    ),
];

pub const LINK_DEFAULTS: &[Field] = &[
    opt("bandwidth", Kind::Bandwidth, "Link rate when a link does not give one (default 100Gbps)."),
    opt("delay", Kind::Duration, "Propagation delay when a link does not give one (default 1us)."),
    opt("buffer", Kind::ByteSize, "Egress buffer per port when a link does not give one (default 1MiB)."),
];

pub const HOST_DEFAULTS: &[Field] = &[opt(
    "nic_rate",
    Kind::Bandwidth,
    "NIC rate when a host does not give one (default: defaults.link.bandwidth).",
)];

pub const DEFAULTS: &[Field] = &[
    opt("link", Kind::Object(LINK_DEFAULTS), "Defaults for links, including host attachments."),
    opt("host", Kind::Object(HOST_DEFAULTS), "Defaults for hosts."),
];

pub const SWITCH: &[Field] = &[
    req("name", Kind::Text, "Unique name, used by links and hosts."),
    req("role", Kind::Enum(ROLES), "Tier in the Clos: leaf, spine or super-spine."),
    req("device_id", Kind::Int { min: 1, max: u32::MAX as u64 }, "P4Runtime device id, unique."),
    req("p4rt", Kind::Address, "host:port of the switch's P4Runtime server."),
    opt(
        "thrift_port",
        Kind::Int { min: 1, max: 65_535 },
        "BMv2 Thrift runtime port (register and queue fallback).",
    ),
    opt(
        "int_node_id",
        Kind::Int { min: 1, max: u32::MAX as u64 },
        "Node id written into INT metadata (default: device_id).",
    ),
    opt(
        "subnet",
        Kind::Ipv4Prefix,
        "Leaves only: prefix covering all attached hosts, routed as one entry elsewhere.",
    ),
];

pub const HOST: &[Field] = &[
    req("name", Kind::Text, "Unique name."),
    req("ip", Kind::Ipv4, "IPv4 address."),
    req("mac", Kind::Mac, "MAC address, aa:bb:cc:dd:ee:ff."),
    req("leaf", Kind::Text, "Name of the leaf switch the host attaches to."),
    req("port", PORT, "Leaf port the host attaches to."),
    opt("nic_rate", Kind::Bandwidth, "NIC rate (default: defaults.host.nic_rate)."),
    opt(
        "exporter",
        Kind::Address,
        "host:port of the host's `metaroce host export`; the controller scrapes its PFC/CNP/ECN counters.",
    ),
];

pub const LINK: &[Field] = &[
    req("a", Kind::Endpoint, "One end, as switch:port."),
    req("b", Kind::Endpoint, "The other end, as switch:port."),
    opt("bandwidth", Kind::Bandwidth, "Rate (default: defaults.link.bandwidth)."),
    opt("delay", Kind::Duration, "Propagation delay (default: defaults.link.delay)."),
    opt("buffer", Kind::ByteSize, "Egress buffer on each end (default: defaults.link.buffer)."),
];

pub const TOPOLOGY: &[Field] = &[
    req("name", Kind::Text, "Name of the fabric."),
    opt("description", Kind::Text, "Free text."),
    opt("fabric", Kind::Object(FABRIC), "Data-plane settings the controller installs on every switch."),
    opt("defaults", Kind::Object(DEFAULTS), "Values used where a link or host leaves them out."),
    req("switches", Kind::List(SWITCH), "Every switch of the fabric."),
    opt("hosts", Kind::List(HOST), "Hosts and the leaf ports they attach to."),
    opt("links", Kind::List(LINK), "Switch-to-switch links with explicit ports on both ends."),
];

/// Finds a field by name.
pub fn field(fields: &'static [Field], name: &str) -> Option<&'static Field> {
    fields.iter().find(|f| f.name == name)
}

/// The closest known name to `unknown`, if it is close enough to be a typo.
pub fn did_you_mean<'a>(unknown: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let unknown = unknown.to_ascii_lowercase();
    known
        .into_iter()
        .map(|k| (edit_distance(&unknown, &k.to_ascii_lowercase()), k))
        .filter(|(d, k)| *d <= (k.len().max(unknown.len()) / 3).max(1) || k.contains(unknown.as_str()))
        .min_by_key(|&(d, k)| (d, k))
        .map(|(_, k)| k)
}

/// Edit distance counting an adjacent swap as one edit ("laef" is one
/// edit from "leaf"), the commonest typo in hand-written names.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best =
                (d[(i - 1) * w + j] + 1).min(d[i * w + j - 1] + 1).min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = best;
        }
    }
    d[a.len() * w + b.len()]
}

/// The JSON Schema (draft 2020-12) of the topology format.
pub fn json_schema() -> Value {
    let mut schema = object_schema(TOPOLOGY);
    if let Value::Object(map) = &mut schema {
        let mut head = Map::new();
        head.insert("$schema".into(), json!("https://json-schema.org/draft/2020-12/schema"));
        head.insert("$id".into(), json!("https://metaroce.dev/schema/topology.json"));
        head.insert("title".into(), json!("metaroce fabric topology"));
        head.insert(
            "description".into(),
            json!("Switches, hosts and links of a RoCEv2 Clos fabric. Written by `metaroce topo schema`."),
        );
        head.append(map);
        *map = head;
    }
    schema
}

fn object_schema(fields: &[Field]) -> Value {
    let properties: Map<String, Value> =
        fields.iter().map(|f| (f.name.to_string(), field_schema(f))).collect();
    let required: Vec<&str> = fields.iter().filter(|f| f.required).map(|f| f.name).collect();
    let mut obj = json!({"type": "object", "additionalProperties": false, "properties": properties});
    if !required.is_empty() {
        obj["required"] = json!(required);
    }
    obj
}

fn field_schema(f: &Field) -> Value {
    let mut s = kind_schema(f.kind);
    s["description"] = json!(f.doc);
    s
}

fn kind_schema(kind: Kind) -> Value {
    let pattern = |p: &str, example: &str| json!({"type": "string", "pattern": p, "examples": [example]});
    match kind {
        Kind::Text => json!({"type": "string", "minLength": 1}),
        Kind::Bool => json!({"type": "boolean"}),
        Kind::Int { min, max } => json!({"type": "integer", "minimum": min, "maximum": max}),
        Kind::Bandwidth => pattern(r"^\s*[0-9_]*\.?[0-9]+\s*(Tbps|Gbps|Mbps|Kbps|bps)\s*$", "400Gbps"),
        Kind::Duration => pattern(r"^\s*[0-9_]*\.?[0-9]+\s*(s|ms|us|µs|ns)\s*$", "2us"),
        Kind::ByteSize => pattern(r"^\s*[0-9_]*\.?[0-9]+\s*(GiB|MiB|KiB|GB|MB|KB|kB|B)\s*$", "256KiB"),
        Kind::QueueDepth => pattern(
            r"^\s*[0-9_]*\.?[0-9]+\s*(packets|packet|pkts|pkt|GiB|MiB|KiB|GB|MB|KB|kB|B)\s*$",
            "48pkt",
        ),
        Kind::Ipv4 => pattern(r"^([0-9]{1,3}\.){3}[0-9]{1,3}$", "10.0.1.1"),
        Kind::Ipv4Prefix => pattern(r"^([0-9]{1,3}\.){3}[0-9]{1,3}/[0-9]{1,2}$", "10.0.1.0/24"),
        Kind::Mac => pattern(r"^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$", "02:00:00:00:01:01"),
        Kind::Address => pattern(r"^[^\s:]+:[0-9]{1,5}$", "127.0.0.1:50001"),
        Kind::Endpoint => pattern(r"^[^\s:]+:[0-9]{1,3}$", "leaf1:3"),
        Kind::Enum(values) => json!({"type": "string", "enum": values}),
        Kind::Object(fields) => object_schema(fields),
        Kind::List(fields) => json!({"type": "array", "items": object_schema(fields)}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_you_mean_finds_typos() {
        let known = ["bandwidth", "delay", "buffer"];
        assert_eq!(did_you_mean("bandwith", known), Some("bandwidth"));
        assert_eq!(did_you_mean("Delay", known), Some("delay"));
        assert_eq!(did_you_mean("colour", known), None);
        assert_eq!(did_you_mean("laef", ["leaf", "spine", "super-spine"]), Some("leaf"));
        assert_eq!(did_you_mean("device-id", ["device_id", "name"]), Some("device_id"));
    }

    #[test]
    fn committed_schema_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../topologies/schema.json");
        let committed = std::fs::read_to_string(path).expect("topologies/schema.json exists");
        let current = format!("{}\n", serde_json::to_string_pretty(&json_schema()).unwrap());
        assert!(
            committed == current,
            "topologies/schema.json is stale: run `cargo run -q -p metaroce-cli -- topo schema > topologies/schema.json`"
        );
    }
}
