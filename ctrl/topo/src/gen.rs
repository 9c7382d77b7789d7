//! Generators for the usual fabric shapes: 2-tier leaf-spine, 3-tier Clos
//! with spine planes, and the k-ary fat-tree.
//!
//! Addressing is regular so that engineers can read it: leaf number `l`
//! (from 0) owns `10.<l/256>.<l%256>.0/24`, its hosts are `.1`, `.2`, …,
//! and a host's MAC ends in the same three numbers. Leaves number their host
//! ports from 1, then their uplinks; spines number their downlinks from 1,
//! then their uplinks. Ports skip the CPU port.

use std::net::Ipv4Addr;

use crate::model::{
    Defaults, Endpoint, Fabric, Host, Ipv4Net, Link, MacAddr, Role, Switch, SwitchId, Topology,
};
use crate::units::Bandwidth;

/// Why a generator refused its parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    #[error("{what} must be between {min} and {max}, got {got}")]
    OutOfRange { what: &'static str, min: usize, max: usize, got: usize },
    #[error("fat-tree k must be even, got {0}")]
    OddK(usize),
    #[error("switch {switch} would need {ports} ports; switches have at most 510")]
    TooManyPorts { switch: String, ports: usize },
    #[error("{switches} switches do not fit P4Runtime ports {base}+device_id (at most 65535)")]
    AddressSpace { switches: usize, base: u16 },
}

/// Settings every generator shares.
#[derive(Debug, Clone)]
pub struct Common {
    pub name: String,
    pub link_bandwidth: Bandwidth,
    pub nic_rate: Bandwidth,
    /// Host part of every switch's P4Runtime address.
    pub p4rt_host: String,
    /// Switch `device_id` listens on `p4rt_base_port + device_id`.
    pub p4rt_base_port: u16,
    /// BMv2 Thrift port is `thrift_base_port + device_id`, if set.
    pub thrift_base_port: Option<u16>,
    pub fabric: Fabric,
    pub defaults: Defaults,
}

impl Common {
    pub fn new(name: &str, link_bandwidth: Bandwidth) -> Self {
        Common {
            name: name.to_string(),
            link_bandwidth,
            nic_rate: link_bandwidth,
            p4rt_host: "127.0.0.1".into(),
            p4rt_base_port: 50_000,
            thrift_base_port: Some(9090),
            fabric: Fabric::default(),
            defaults: Defaults { link_bandwidth, nic_rate: link_bandwidth, ..Defaults::default() },
        }
    }
}

fn range(what: &'static str, got: usize, min: usize, max: usize) -> Result<(), GenError> {
    if (min..=max).contains(&got) {
        Ok(())
    } else {
        Err(GenError::OutOfRange { what, min, max, got })
    }
}

struct Builder<'a> {
    c: &'a Common,
    switches: Vec<Switch>,
    hosts: Vec<Host>,
    links: Vec<Link>,
    next_port: Vec<u16>,
    leaves: usize,
}

impl<'a> Builder<'a> {
    fn new(c: &'a Common) -> Self {
        Builder {
            c,
            switches: Vec::new(),
            hosts: Vec::new(),
            links: Vec::new(),
            next_port: Vec::new(),
            leaves: 0,
        }
    }

    fn switch(&mut self, name: String, role: Role) -> Result<SwitchId, GenError> {
        let id = self.switches.len();
        let device_id = id as u64 + 1;
        let port = u64::from(self.c.p4rt_base_port) + device_id;
        let thrift = self.c.thrift_base_port.map(|b| u64::from(b) + device_id);
        if port > 65_535 || thrift.is_some_and(|t| t > 65_535) {
            return Err(GenError::AddressSpace { switches: id + 1, base: self.c.p4rt_base_port });
        }
        let subnet = (role == Role::Leaf).then(|| {
            let l = self.leaves;
            self.leaves += 1;
            Ipv4Net { addr: Ipv4Addr::new(10, (l / 256) as u8, (l % 256) as u8, 0), len: 24 }
        });
        self.switches.push(Switch {
            name,
            role,
            device_id,
            p4rt: format!("{}:{port}", self.c.p4rt_host),
            thrift_port: thrift.map(|t| t as u16),
            int_node_id: u32::try_from(device_id).unwrap_or(u32::MAX),
            subnet,
        });
        self.next_port.push(1);
        Ok(id)
    }

    /// `count` switches named `name(1)`, `name(2)`, ...
    fn switches(
        &mut self,
        count: usize,
        role: Role,
        name: impl Fn(usize) -> String,
    ) -> Result<Vec<SwitchId>, GenError> {
        (1..=count).map(|i| self.switch(name(i), role)).collect()
    }

    fn port(&mut self, s: SwitchId) -> Result<u16, GenError> {
        let mut p = self.next_port[s];
        if p == self.c.fabric.cpu_port {
            p += 1;
        }
        if p > 510 {
            return Err(GenError::TooManyPorts {
                switch: self.switches[s].name.clone(),
                ports: usize::from(p),
            });
        }
        self.next_port[s] = p + 1;
        Ok(p)
    }

    fn hosts(&mut self, leaf: SwitchId, count: usize) -> Result<(), GenError> {
        let Some(net) = self.switches[leaf].subnet else { return Ok(()) };
        let [_, x, y, _] = net.addr.octets();
        for h in 0..count {
            let port = self.port(leaf)?;
            let last = (h + 1) as u8;
            self.hosts.push(Host {
                name: format!("h{}-{}", usize::from(x) * 256 + usize::from(y) + 1, h + 1),
                ip: Ipv4Addr::new(10, x, y, last),
                mac: MacAddr([0x02, 0, 0x0a, x, y, last]),
                leaf,
                port,
                nic_rate: self.c.nic_rate,
                delay: self.c.defaults.link_delay,
                exporter: None,
            });
        }
        Ok(())
    }

    fn link(&mut self, lower: SwitchId, upper: SwitchId) -> Result<(), GenError> {
        let a = Endpoint { switch: lower, port: self.port(lower)? };
        let b = Endpoint { switch: upper, port: self.port(upper)? };
        self.links.push(Link {
            a,
            b,
            bandwidth: self.c.link_bandwidth,
            delay: self.c.defaults.link_delay,
            buffer: self.c.defaults.link_buffer,
        });
        Ok(())
    }

    fn finish(self, description: String) -> Topology {
        Topology::assemble(
            self.c.name.clone(),
            Some(description),
            self.c.fabric.clone(),
            self.c.defaults.clone(),
            self.switches,
            self.hosts,
            self.links,
        )
    }
}

/// Two tiers: every leaf connects to every spine with `parallel` links.
pub fn leaf_spine(
    c: &Common,
    leaves: usize,
    spines: usize,
    hosts_per_leaf: usize,
    parallel: usize,
) -> Result<Topology, GenError> {
    range("leaves", leaves, 1, 4096)?;
    range("spines", spines, 1, 510)?;
    range("hosts per leaf", hosts_per_leaf, 0, 254)?;
    range("parallel links", parallel, 1, 16)?;
    let mut b = Builder::new(c);
    let leaf_ids = b.switches(leaves, Role::Leaf, |i| format!("leaf{i}"))?;
    let spine_ids = b.switches(spines, Role::Spine, |i| format!("spine{i}"))?;
    for &l in &leaf_ids {
        b.hosts(l, hosts_per_leaf)?;
    }
    for &l in &leaf_ids {
        for &s in &spine_ids {
            for _ in 0..parallel {
                b.link(l, s)?;
            }
        }
    }
    Ok(b.finish(format!(
        "Leaf-spine: {leaves} leaves x {spines} spines, {hosts_per_leaf} hosts per leaf, {} links.",
        c.link_bandwidth
    )))
}

/// Three tiers in planes: spine `j` of every pod connects to each of the
/// `supers_per_plane` super-spines of plane `j`.
pub fn clos3(
    c: &Common,
    pods: usize,
    leaves_per_pod: usize,
    spines_per_pod: usize,
    supers_per_plane: usize,
    hosts_per_leaf: usize,
) -> Result<Topology, GenError> {
    range("pods", pods, 1, 510)?;
    range("leaves per pod", leaves_per_pod, 1, 510)?;
    range("spines per pod", spines_per_pod, 1, 510)?;
    range("super-spines per plane", supers_per_plane, 1, 510)?;
    range("hosts per leaf", hosts_per_leaf, 0, 254)?;
    range(
        "switches",
        pods * (leaves_per_pod + spines_per_pod) + spines_per_pod * supers_per_plane,
        1,
        15_000,
    )?;
    let mut b = Builder::new(c);
    let mut pod_leaves = Vec::new();
    let mut pod_spines = Vec::new();
    let mut planes = Vec::new();
    for p in 1..=pods {
        pod_leaves.push(b.switches(leaves_per_pod, Role::Leaf, |i| format!("p{p}-leaf{i}"))?);
    }
    for p in 1..=pods {
        pod_spines.push(b.switches(spines_per_pod, Role::Spine, |i| format!("p{p}-spine{i}"))?);
    }
    for j in 1..=spines_per_pod {
        planes.push(b.switches(supers_per_plane, Role::SuperSpine, |k| format!("ss{j}-{k}"))?);
    }
    for leaves in &pod_leaves {
        for &l in leaves {
            b.hosts(l, hosts_per_leaf)?;
        }
    }
    for (leaves, spines) in pod_leaves.iter().zip(&pod_spines) {
        for &l in leaves {
            for &s in spines {
                b.link(l, s)?;
            }
        }
    }
    for spines in &pod_spines {
        for (j, &s) in spines.iter().enumerate() {
            for &t in &planes[j] {
                b.link(s, t)?;
            }
        }
    }
    Ok(b.finish(format!(
        "3-tier Clos: {pods} pods of {leaves_per_pod} leaves and {spines_per_pod} spines, \
         {spines_per_pod} planes of {supers_per_plane} super-spines, {hosts_per_leaf} hosts per leaf."
    )))
}

/// The k-ary fat-tree: k pods of k/2 leaves and k/2 spines, (k/2)² cores,
/// k/2 hosts per leaf. Cores are the super-spine tier.
pub fn fat_tree(c: &Common, k: usize) -> Result<Topology, GenError> {
    range("k", k, 2, 64)?;
    if k % 2 == 1 {
        return Err(GenError::OddK(k));
    }
    let half = k / 2;
    let mut t = clos3(c, k, half, half, half, half)?;
    t.description = Some(format!(
        "k={k} fat-tree: {k} pods of {half} leaves and {half} spines, {} cores, {} hosts.",
        half * half,
        k * k * k / 4
    ));
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Routing;

    #[test]
    fn fat_tree_has_the_textbook_counts() {
        let t = fat_tree(&Common::new("ft", Bandwidth::gbps(100)), 4).unwrap();
        assert_eq!(t.switches.len(), 20);
        assert_eq!(t.hosts.len(), 16);
        assert_eq!(t.links.len(), 32);
        assert_eq!(t.count_role(Role::SuperSpine), 4);
        let r = Routing::compute(&t);
        // Hosts in different pods have (k/2)^2 = 4 equal-cost paths.
        let (paths, more) = r.host_paths(&t, 0, 15, 100);
        assert_eq!((paths.len(), more), (4, false));
    }

    #[test]
    fn generators_refuse_impossible_shapes() {
        let c = Common::new("x", Bandwidth::gbps(100));
        assert_eq!(fat_tree(&c, 5).unwrap_err(), GenError::OddK(5));
        assert!(matches!(leaf_spine(&c, 0, 2, 1, 1), Err(GenError::OutOfRange { what: "leaves", .. })));
        assert!(matches!(leaf_spine(&c, 600, 2, 1, 1), Err(GenError::TooManyPorts { .. })));
        assert!(matches!(
            clos3(&c, 200, 100, 10, 100, 1),
            Err(GenError::OutOfRange { what: "switches", .. })
        ));
    }
}
