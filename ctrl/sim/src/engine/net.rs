//! The network's static shape as the engine sees it: one directed port per
//! link direction (host NICs included), each with bandwidth, propagation
//! delay, buffer and PFC thresholds, and the flattened forwarding table.

use std::collections::HashMap;

use metaroce_topo::{Endpoint, NextHop, Role, Routing, SwitchId, Topology};

use crate::engine::events::PortId;
use crate::scenario::config::{NetConfig, ROCE_HEADER_BYTES};

/// A node a port connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Node {
    Switch(u32),
    Host(u32),
}

/// A directed link end: where packets queue and are serialized. Two cache
/// lines, the first holding what every packet's hop reads at the port it
/// leaves by (its timing, its buffer and class), so that reading ahead
/// (`ahead.rs`) names it with one hint; the PFC thresholds, where the port
/// starts and its label are in the second. What the hot paths read of
/// the rest is copied apart: where the port leads ([`Ports::to`], what an
/// arrival reads) and the thresholds (`pfc::Ingress`).
#[derive(Debug, Clone)]
#[repr(C, align(64))]
pub struct PortSpec {
    pub to: Node,
    /// A full packet's bytes (MTU and headers) and its serialization time,
    /// worked out once: most packets are full, and a division per hop
    /// shows in the engine's profile.
    full: (u64, u64),
    pub delay_ps: u64,
    /// Added to a data packet's arrival: 0, except on a floor's sped-up
    /// links (`NetConfig::core_speedup`), where it is what a full packet
    /// loses of its serialization time at the real rate, so the hop
    /// still stores and forwards a packet as slowly as the real one.
    pub data_lag_ps: u64,
    /// Egress buffer (lossy mode drops beyond it).
    pub buffer: u64,
    pub bw_bps: u64,
    /// Index into [`Ports::classes`].
    pub class: u8,
    /// PFC thresholds for what arrives over this port at `to`.
    pub xoff: u64,
    pub xon: u64,
    pub headroom: u64,
    pub from: Node,
    /// `switch:port` of the sending end, for people.
    pub label: String,
}

// The per-hop fields fill the first line; the second holds the rest.
const _: () = assert!(std::mem::size_of::<PortSpec>() == 128);
const _: () = assert!(std::mem::offset_of!(PortSpec, class) < 64);

impl PortSpec {
    /// Serialization time of `bytes` on this port, in picoseconds.
    #[inline]
    pub fn ser_ps(&self, bytes: u64) -> u64 {
        if bytes == self.full.0 {
            return self.full.1;
        }
        (bytes * 8_000_000_000_000).div_ceil(self.bw_bps)
    }
}

/// One member of a flattened next-hop group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FibMember {
    pub port: PortId,
    pub weight: u32,
}

/// All ports and the forwarding table, built once per run.
#[derive(Debug, Clone)]
pub struct Ports {
    pub specs: Vec<PortSpec>,
    /// Names of the port classes ("leaf→spine", ...), for per-tier figures.
    pub classes: Vec<String>,
    pub hosts: usize,
    /// Destination-leaf index of each leaf switch (None for non-destinations).
    pub dest_of: Vec<Option<u32>>,
    ndest: usize,
    /// `[switch * ndest + dest]` → range in `members`, and its total weight.
    fib: Vec<(u32, u32, u32)>,
    /// Members each FIB range may hold (a rewrite that fits stays in place).
    room: Vec<u32>,
    members: Vec<FibMember>,
    by_end: HashMap<(SwitchId, u16), PortId>,
    /// Port number at the sending switch of every port (0 for host NICs).
    pub number: Vec<u16>,
    /// Per topology link, its two directed ports (a→b, b→a).
    pub link_ports: Vec<(PortId, PortId)>,
    /// Per port, the port number at its receiving switch (0 toward hosts).
    arrival: Vec<u16>,
    /// Per port, where it leads (`PortSpec::to`), apart: on a big run an
    /// arrival reads nothing else of the port's 128-byte record, and a
    /// small array stays in cache where the record's line did not.
    pub(crate) to: Vec<Node>,
}

impl Ports {
    /// Port of host `h`'s NIC (host → leaf).
    pub fn nic(h: usize) -> PortId {
        h as PortId
    }

    /// Port from host `h`'s leaf down to it.
    pub fn to_host(&self, h: usize) -> PortId {
        (self.hosts + h) as PortId
    }

    /// Where port `p` leads.
    #[inline]
    pub fn to(&self, p: PortId) -> Node {
        self.to[p as usize]
    }

    /// The port number at the receiving switch of a packet arriving over
    /// `p`: the far end of a link, or the leaf port of a host NIC.
    pub fn arrival_number(&self, p: PortId) -> u16 {
        self.arrival.get(p as usize).copied().unwrap_or(0)
    }

    pub fn by_end(&self, e: Endpoint) -> Option<PortId> {
        self.by_end.get(&(e.switch, e.port)).copied()
    }

    /// The group switch `s` uses toward destination index `d`, and its total weight.
    #[inline]
    pub fn group(&self, s: u32, d: u32) -> (&[FibMember], u32) {
        let (start, len, total) = self.fib[s as usize * self.ndest + d as usize];
        (&self.members[start as usize..(start + len) as usize], total)
    }

    pub fn build(topo: &Topology, routing: &Routing, net: &NetConfig) -> Self {
        let hosts = topo.hosts.len();
        let mut classes: Vec<String> = Vec::new();
        let mut class_of = |from: &str, to: &str| -> u8 {
            let name = format!("{from}→{to}");
            let i = classes.iter().position(|c| *c == name).unwrap_or_else(|| {
                classes.push(name);
                classes.len() - 1
            });
            i as u8
        };
        let pkt = u64::from(net.mtu + ROCE_HEADER_BYTES);
        let pfc = |bw: u64, delay_ps: u64| {
            let bdp = (u128::from(bw) * u128::from(delay_ps) / 8_000_000_000_000) as u64;
            net.pfc.headroom_bytes.unwrap_or(2 * bdp + 2 * pkt + 128)
        };
        let mut specs = Vec::with_capacity(2 * hosts + 2 * topo.links.len());
        let role = |s: SwitchId| topo.switches[s].role.as_str();
        for (i, h) in topo.hosts.iter().enumerate() {
            let (bw, delay) = (h.nic_rate.bps(), h.delay.ns() * 1_000);
            let class = class_of("host", "leaf");
            specs.push(spec(
                Node::Host(i as u32),
                Node::Switch(h.leaf as u32),
                bw,
                delay,
                u64::MAX,
                class,
                net,
                pfc(bw, delay),
                h.name.clone(),
            ));
        }
        for (i, h) in topo.hosts.iter().enumerate() {
            let (bw, delay) = (h.nic_rate.bps(), h.delay.ns() * 1_000);
            let class = class_of(role(h.leaf), "host");
            let label = format!("{}:{}", topo.switches[h.leaf].name, h.port);
            let buffer = topo.defaults.link_buffer.bytes();
            let (from, to) = (Node::Switch(h.leaf as u32), Node::Host(i as u32));
            // Receivers drain at line rate and never pause their leaf.
            specs.push(spec(from, to, bw, delay, buffer, class, net, u64::MAX, label));
        }
        let mut by_end = HashMap::new();
        for (i, h) in topo.hosts.iter().enumerate() {
            by_end.insert((h.leaf, h.port), (hosts + i) as PortId);
        }
        let speedup = net.core_speedup.max(1);
        for l in &topo.links {
            let (bw, delay) = (l.bandwidth.bps(), l.delay.ns() * 1_000);
            // What a full packet loses of its serialization at the link's
            // real rate when the floor speeds the link up (else nothing).
            let ser = |bps: u64| (pkt * 8_000_000_000_000).div_ceil(bps.max(1));
            let lag = ser(bw / speedup).saturating_sub(ser(bw));
            for (x, y) in [(l.a, l.b), (l.b, l.a)] {
                by_end.insert((x.switch, x.port), specs.len() as PortId);
                let class = class_of(role(x.switch), role(y.switch));
                let (from, to) = (Node::Switch(x.switch as u32), Node::Switch(y.switch as u32));
                let mut s = spec(
                    from,
                    to,
                    bw,
                    delay,
                    l.buffer.bytes(),
                    class,
                    net,
                    pfc(bw, delay),
                    topo.endpoint_name(x),
                );
                s.data_lag_ps = lag;
                specs.push(s);
            }
        }
        let specs_to = specs.iter().map(|s| s.to).collect();
        let mut ports = Ports {
            specs,
            classes,
            hosts,
            dest_of: Vec::new(),
            ndest: 0,
            fib: Vec::new(),
            room: Vec::new(),
            members: Vec::new(),
            number: Vec::new(),
            link_ports: Vec::new(),
            arrival: Vec::new(),
            to: specs_to,
            by_end,
        };
        ports.number = vec![0; ports.specs.len()];
        for (&(_, no), &p) in &ports.by_end {
            ports.number[p as usize] = no;
        }
        ports.link_ports = topo
            .links
            .iter()
            .map(|l| (ports.by_end[&(l.a.switch, l.a.port)], ports.by_end[&(l.b.switch, l.b.port)]))
            .collect();
        ports.arrival = vec![0; ports.specs.len()];
        for h in 0..hosts {
            ports.arrival[h] = ports.number[ports.to_host(h) as usize];
        }
        for &(a, b) in &ports.link_ports {
            ports.arrival[a as usize] = ports.number[b as usize];
            ports.arrival[b as usize] = ports.number[a as usize];
        }
        ports.build_fib(topo, routing);
        ports
    }

    fn build_fib(&mut self, topo: &Topology, routing: &Routing) {
        let dests = routing.destinations();
        self.ndest = dests.len();
        self.dest_of = vec![None; topo.switches.len()];
        for (i, &d) in dests.iter().enumerate() {
            self.dest_of[d] = Some(i as u32);
        }
        self.fib = vec![(0, 0, 0); topo.switches.len() * dests.len()];
        self.room = vec![0; self.fib.len()];
        for s in 0..topo.switches.len() {
            for (di, &leaf) in dests.iter().enumerate() {
                let Some((_, group)) = routing.group_toward(s, leaf) else { continue };
                let start = self.members.len() as u32;
                let mut total = 0u32;
                for m in &group.members {
                    if let (NextHop::Switch(_), Some(&port)) = (m.next, self.by_end.get(&(s, m.port))) {
                        self.members.push(FibMember { port, weight: m.weight.max(1) });
                        total += m.weight.max(1);
                    }
                }
                let len = self.members.len() as u32 - start;
                self.fib[s * dests.len() + di] = (start, len, total);
                self.room[s * dests.len() + di] = len;
            }
        }
    }

    /// Replaces the group switch `s` uses toward destination index `d`.
    /// `members` must be non-empty with weights of at least 1 (checked by
    /// the caller). A group that fits its range is rewritten in place, so a
    /// packet never sees it half-written (the engine is single-threaded).
    pub fn set_group(&mut self, s: u32, d: u32, members: &[FibMember]) {
        let i = s as usize * self.ndest + d as usize;
        let total = members.iter().map(|m| m.weight).sum();
        let len = members.len() as u32;
        let start = if len <= self.room[i] {
            let start = self.fib[i].0;
            self.members[start as usize..(start + len) as usize].copy_from_slice(members);
            start
        } else {
            let start = self.members.len() as u32;
            self.members.extend_from_slice(members);
            self.room[i] = len;
            start
        };
        self.fib[i] = (start, len, total);
    }

    /// The tier of the switch at the sending end, or None for a host NIC.
    pub fn from_role(&self, topo: &Topology, port: PortId) -> Option<Role> {
        match self.specs[port as usize].from {
            Node::Switch(s) => Some(topo.switches[s as usize].role),
            Node::Host(_) => None,
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn spec(
    from: Node,
    to: Node,
    bw: u64,
    delay_ps: u64,
    buffer: u64,
    class: u8,
    net: &NetConfig,
    headroom: u64,
    label: String,
) -> PortSpec {
    let full = u64::from(net.mtu + ROCE_HEADER_BYTES);
    PortSpec {
        // A port of no bandwidth (never valid) keeps the division.
        full: if bw == 0 { (u64::MAX, 0) } else { (full, (full * 8_000_000_000_000).div_ceil(bw)) },
        from,
        to,
        bw_bps: bw,
        delay_ps,
        buffer,
        xoff: net.pfc.xoff_bytes,
        xon: net.pfc.xon_bytes,
        headroom,
        class,
        label,
        data_lag_ps: 0,
    }
}
