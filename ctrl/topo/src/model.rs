//! The validated fabric: switches, hosts and links with every default
//! resolved and every name turned into an index.

use std::collections::HashMap;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::units::{Bandwidth, ByteSize, Duration, QueueDepth};

pub type SwitchId = usize;
pub type HostId = usize;
pub type LinkId = usize;

/// A switch's tier in the Clos. Links join different tiers; routes go up,
/// then down (valley-free), never down and up again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Leaf,
    Spine,
    SuperSpine,
}

impl Role {
    pub fn tier(self) -> u8 {
        match self {
            Role::Leaf => 0,
            Role::Spine => 1,
            Role::SuperSpine => 2,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leaf => "leaf",
            Role::Spine => "spine",
            Role::SuperSpine => "super-spine",
        }
    }

    /// The tier's name in the plural: "leaves", "spines", "super-spines".
    pub fn plural(self) -> &'static str {
        match self {
            Role::Leaf => "leaves",
            Role::Spine => "spines",
            Role::SuperSpine => "super-spines",
        }
    }
}

impl FromStr for Role {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "leaf" => Ok(Role::Leaf),
            "spine" => Ok(Role::Spine),
            "super-spine" => Ok(Role::SuperSpine),
            _ => Err(()),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An IPv4 prefix such as `10.0.1.0/24`. Host bits must be zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Net {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Ipv4Net {
    pub fn host(addr: Ipv4Addr) -> Self {
        Ipv4Net { addr, len: 32 }
    }
    fn mask(len: u8) -> u32 {
        if len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(len))
        }
    }
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & Self::mask(self.len) == u32::from(self.addr)
    }
    pub fn overlaps(&self, other: &Ipv4Net) -> bool {
        let len = self.len.min(other.len);
        u32::from(self.addr) & Self::mask(len) == u32::from(other.addr) & Self::mask(len)
    }
}

impl FromStr for Ipv4Net {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (addr, len) = s
            .split_once('/')
            .ok_or_else(|| format!("prefix \"{s}\" needs a length, like \"10.0.1.0/24\""))?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| format!("\"{addr}\" is not an IPv4 address"))?;
        let len: u8 = len
            .parse()
            .ok()
            .filter(|l| *l <= 32)
            .ok_or_else(|| format!("prefix length \"{len}\" is not 0..32"))?;
        if u32::from(addr) & !Self::mask(len) != 0 {
            let net = Ipv4Addr::from(u32::from(addr) & Self::mask(len));
            return Err(format!("prefix \"{s}\" has host bits set; did you mean \"{net}/{len}\"?"));
        }
        Ok(Ipv4Net { addr, len })
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// A 48-bit Ethernet address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl FromStr for MacAddr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("\"{s}\" is not a MAC address like \"02:00:00:00:01:01\"");
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut out {
            let p = parts.next().ok_or_else(bad)?;
            if p.len() != 2 {
                return Err(bad());
            }
            *byte = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(MacAddr(out))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

macro_rules! serialize_as_display {
    ($($t:ty),*) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    )*};
}
serialize_as_display!(Role, Ipv4Net, MacAddr);

/// Data-plane settings the controller installs on every switch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fabric {
    pub flowlet_timeout: Duration,
    pub queue_high: QueueDepth,
    pub queue_low: QueueDepth,
    pub ecn_threshold: QueueDepth,
    pub int: bool,
    /// The hosts' RDMA NICs need packets in order: the controller turns
    /// the drain rule on.
    pub in_order_nics: bool,
    pub cpu_port: u16,
}

impl Default for Fabric {
    fn default() -> Self {
        Fabric {
            flowlet_timeout: Duration::us(100),
            queue_high: QueueDepth::Packets(48),
            queue_low: QueueDepth::Packets(16),
            ecn_threshold: QueueDepth::Packets(32),
            int: true,
            in_order_nics: true,
            cpu_port: 255,
        }
    }
}

/// Values used where a link or host leaves them out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Defaults {
    pub link_bandwidth: Bandwidth,
    pub link_delay: Duration,
    pub link_buffer: ByteSize,
    pub nic_rate: Bandwidth,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            link_bandwidth: Bandwidth::gbps(100),
            link_delay: Duration::us(1),
            link_buffer: ByteSize(1 << 20),
            nic_rate: Bandwidth::gbps(100),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Switch {
    pub name: String,
    pub role: Role,
    pub device_id: u64,
    /// `host:port` of the P4Runtime server.
    pub p4rt: String,
    pub thrift_port: Option<u16>,
    pub int_node_id: u32,
    pub subnet: Option<Ipv4Net>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Host {
    pub name: String,
    pub ip: Ipv4Addr,
    pub mac: MacAddr,
    pub leaf: SwitchId,
    pub port: u16,
    pub nic_rate: Bandwidth,
    /// Propagation delay of the attachment (from `defaults.link.delay`).
    pub delay: Duration,
    /// `host:port` of the host's counter exporter, if it runs one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exporter: Option<String>,
}

/// One end of a switch-to-switch link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Endpoint {
    pub switch: SwitchId,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub a: Endpoint,
    pub b: Endpoint,
    pub bandwidth: Bandwidth,
    pub delay: Duration,
    pub buffer: ByteSize,
}

impl Link {
    /// The end on `switch`, and the far end, if the link touches it.
    pub fn ends_from(&self, switch: SwitchId) -> Option<(Endpoint, Endpoint)> {
        if self.a.switch == switch {
            Some((self.a, self.b))
        } else if self.b.switch == switch {
            Some((self.b, self.a))
        } else {
            None
        }
    }
}

/// What a name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeRef {
    Switch(SwitchId),
    Host(HostId),
}

/// A switch's link to a neighbor, as seen from the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adjacency {
    pub link: LinkId,
    pub port: u16,
    pub peer: SwitchId,
    pub peer_port: u16,
}

/// A validated fabric. Build it with [`crate::load_file`] or [`crate::load_str`].
#[derive(Debug, Clone, Serialize)]
pub struct Topology {
    pub name: String,
    pub description: Option<String>,
    pub fabric: Fabric,
    pub defaults: Defaults,
    pub switches: Vec<Switch>,
    pub hosts: Vec<Host>,
    pub links: Vec<Link>,
    #[serde(skip)]
    names: HashMap<String, NodeRef>,
    #[serde(skip)]
    adjacency: Vec<Vec<Adjacency>>,
    #[serde(skip)]
    hosts_of: Vec<Vec<HostId>>,
}

impl Topology {
    /// Assembles a topology and its indices. Callers must have validated
    /// the parts (the decoder does; generators build valid fabrics).
    pub(crate) fn assemble(
        name: String,
        description: Option<String>,
        fabric: Fabric,
        defaults: Defaults,
        switches: Vec<Switch>,
        hosts: Vec<Host>,
        links: Vec<Link>,
    ) -> Self {
        let mut names = HashMap::with_capacity(switches.len() + hosts.len());
        for (i, s) in switches.iter().enumerate() {
            names.insert(s.name.clone(), NodeRef::Switch(i));
        }
        for (i, h) in hosts.iter().enumerate() {
            names.insert(h.name.clone(), NodeRef::Host(i));
        }
        let mut adjacency = vec![Vec::new(); switches.len()];
        for (id, l) in links.iter().enumerate() {
            adjacency[l.a.switch].push(Adjacency {
                link: id,
                port: l.a.port,
                peer: l.b.switch,
                peer_port: l.b.port,
            });
            adjacency[l.b.switch].push(Adjacency {
                link: id,
                port: l.b.port,
                peer: l.a.switch,
                peer_port: l.a.port,
            });
        }
        let mut hosts_of = vec![Vec::new(); switches.len()];
        for (i, h) in hosts.iter().enumerate() {
            hosts_of[h.leaf].push(i);
        }
        Topology { name, description, fabric, defaults, switches, hosts, links, names, adjacency, hosts_of }
    }

    pub fn lookup(&self, name: &str) -> Option<NodeRef> {
        self.names.get(name).copied()
    }

    pub fn switch_id(&self, name: &str) -> Option<SwitchId> {
        match self.lookup(name) {
            Some(NodeRef::Switch(s)) => Some(s),
            _ => None,
        }
    }

    /// Every switch-to-switch link of `switch`, in link order.
    pub fn adjacency(&self, switch: SwitchId) -> &[Adjacency] {
        &self.adjacency[switch]
    }

    /// Hosts attached to `leaf`.
    pub fn hosts_of(&self, leaf: SwitchId) -> &[HostId] {
        &self.hosts_of[leaf]
    }

    /// All names, for did-you-mean suggestions.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.keys().map(String::as_str)
    }

    pub fn count_role(&self, role: Role) -> usize {
        self.switches.iter().filter(|s| s.role == role).count()
    }

    /// `name:port` of a link end, for messages.
    pub fn endpoint_name(&self, e: Endpoint) -> String {
        format!("{}:{}", self.switches[e.switch].name, e.port)
    }

    /// Parses `switch:port` naming one end of a switch-to-switch or host
    /// link; the error says what is wrong, with a did-you-mean.
    pub fn link_end(&self, text: &str) -> Result<Endpoint, LinkRefError> {
        let Some((name, port)) = text.rsplit_once(':') else {
            return Err(LinkRefError::Syntax(text.to_owned()));
        };
        let Some(switch) = self.switch_id(name) else {
            let hint = crate::spec::did_you_mean(name, self.switches.iter().map(|s| s.name.as_str()))
                .map(|k| format!("; did you mean \"{k}\"?"))
                .unwrap_or_default();
            return Err(LinkRefError::UnknownSwitch { name: name.to_owned(), hint });
        };
        let Ok(port) = port.parse::<u16>() else {
            return Err(LinkRefError::Port(port.to_owned()));
        };
        let used = self.adjacency(switch).iter().any(|a| a.port == port)
            || self.hosts_of(switch).iter().any(|&h| self.hosts[h].port == port);
        if !used {
            return Err(LinkRefError::NoLink { switch: name.to_owned(), port });
        }
        Ok(Endpoint { switch, port })
    }

    /// The switch-to-switch link one of whose ends `text` names.
    pub fn fabric_link(&self, text: &str) -> Result<LinkId, LinkRefError> {
        let end = self.link_end(text)?;
        self.links
            .iter()
            .position(|l| l.a == end || l.b == end)
            .ok_or_else(|| LinkRefError::HostLink(text.to_owned()))
    }
}

/// Why `switch:port` names no link end (or no fabric link).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkRefError {
    #[error("\"{0}\" is not a link end; write it as switch:port, like \"leaf1:5\"")]
    Syntax(String),
    #[error("unknown switch \"{name}\"{hint}")]
    UnknownSwitch { name: String, hint: String },
    #[error("\"{0}\" is not a port number")]
    Port(String),
    #[error("switch {switch} has no link on port {port}")]
    NoLink { switch: String, port: u16 },
    #[error("{0} leads to a host; only switch-to-switch links are in the fabric")]
    HostLink(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_ends_are_parsed_with_a_reason_for_every_mistake() {
        let t = crate::load_file(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../topologies/mininet-2x2.yaml"
        )))
        .unwrap();
        let leaf1 = t.switch_id("leaf1").unwrap();
        assert_eq!(t.link_end("leaf1:3"), Ok(Endpoint { switch: leaf1, port: 3 }));
        assert_eq!(
            t.link_end("leaf1:1"),
            Ok(Endpoint { switch: leaf1, port: 1 }),
            "host links have ends too"
        );
        assert!(t.link_end("leaf1").unwrap_err().to_string().contains("switch:port"));
        assert!(t.link_end("leef1:3").unwrap_err().to_string().contains("did you mean \"leaf1\""));
        assert!(t.link_end("leaf1:x").unwrap_err().to_string().contains("not a port number"));
        assert_eq!(t.link_end("leaf1:9"), Err(LinkRefError::NoLink { switch: "leaf1".into(), port: 9 }));
        let l = t.fabric_link("spine1:1").unwrap();
        assert_eq!(t.fabric_link("leaf1:3"), Ok(l), "either end names the link");
        assert!(t.fabric_link("leaf1:1").unwrap_err().to_string().contains("leads to a host"));
    }

    #[test]
    fn prefixes() {
        let p: Ipv4Net = "10.0.1.0/24".parse().unwrap();
        assert!(p.contains("10.0.1.7".parse().unwrap()));
        assert!(!p.contains("10.0.2.7".parse().unwrap()));
        assert!(p.overlaps(&"10.0.0.0/16".parse().unwrap()));
        assert!(!p.overlaps(&"10.0.2.0/24".parse().unwrap()));
        let e = "10.0.1.5/24".parse::<Ipv4Net>().unwrap_err();
        assert!(e.contains("did you mean \"10.0.1.0/24\""), "{e}");
        assert!("10.0.1.0/33".parse::<Ipv4Net>().is_err());
        assert!("10.0.1.0".parse::<Ipv4Net>().is_err());
        assert_eq!("0.0.0.0/0".parse::<Ipv4Net>().unwrap().len, 0);
    }

    #[test]
    fn macs() {
        let m: MacAddr = "02:00:0A:00:01:ff".parse().unwrap();
        assert_eq!(m.to_string(), "02:00:0a:00:01:ff");
        assert!("02:00:0a:00:01".parse::<MacAddr>().is_err());
        assert!("02:00:0a:00:01:ff:00".parse::<MacAddr>().is_err());
        assert!("02-00-0a-00-01-ff".parse::<MacAddr>().is_err());
        assert!("0x:00:0a:00:01:ff".parse::<MacAddr>().is_err());
    }
}
