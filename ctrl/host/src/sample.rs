//! One reading of everything the host exposes: RDMA ports with their
//! state, GIDs and counters, and the netdevs under them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;

use crate::error::ReadError;
use crate::netlink::{NicStats, Stats};
use crate::sysfs::{read_text, Gid, Sysfs};

/// Where a counter comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Source {
    /// `ports/N/counters/` (the IB PMA counters).
    IbCounters,
    /// `ports/N/hw_counters/` (driver counters: CNP, ECN, retransmission).
    IbHwCounters,
    /// `/sys/class/net/<dev>/statistics/`.
    NetStatistics,
    /// ethtool netlink pause statistics.
    EthtoolPause,
    /// DCB netlink IEEE PFC counters.
    DcbPfc,
}

impl Source {
    pub const ALL: [Source; 5] = [
        Source::IbCounters,
        Source::IbHwCounters,
        Source::NetStatistics,
        Source::EthtoolPause,
        Source::DcbPfc,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Source::IbCounters => "counters",
            Source::IbHwCounters => "hw_counters",
            Source::NetStatistics => "statistics",
            Source::EthtoolPause => "ethtool_pause",
            Source::DcbPfc => "dcb_pfc",
        }
    }

    pub fn parse(s: &str) -> Option<Source> {
        Source::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// Counters of an RDMA port (the rest belong to a netdev).
    pub fn is_rdma(self) -> bool {
        matches!(self, Source::IbCounters | Source::IbHwCounters)
    }
}

/// Identifies one counter: an RDMA device and port, or a netdev (port `None`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CounterKey {
    pub device: String,
    pub port: Option<u32>,
    pub source: Source,
    pub name: String,
}

impl fmt::Display for CounterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(p) => write!(f, "{}/{p}/{}/{}", self.device, self.source.as_str(), self.name),
            None => write!(f, "{}/{}/{}", self.device, self.source.as_str(), self.name),
        }
    }
}

/// An RDMA port's state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortState {
    pub device: String,
    pub port: u32,
    /// As sysfs writes it, e.g. `4: ACTIVE`.
    pub state: Option<String>,
    pub phys_state: Option<String>,
    pub link_layer: Option<String>,
    pub netdev: Option<String>,
    pub gids: Vec<Gid>,
}

impl PortState {
    pub fn active(&self) -> bool {
        self.state.as_deref().is_some_and(|s| s.ends_with("ACTIVE"))
    }
}

/// A netdev under an RDMA port.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetdevState {
    pub name: String,
    /// `up`, `down`, ...; `None` when the netdev is gone.
    pub operstate: Option<String>,
    pub mtu: Option<u32>,
    /// ECN enable per priority as mlx5 exposes it (`ecn/roce_np`, `ecn/roce_rp`);
    /// empty when the driver exposes none.
    pub ecn: BTreeMap<String, BTreeMap<u8, bool>>,
}

/// Something that could not be read; `key` is stable across polls so the
/// exporter can say it once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

impl Problem {
    fn read(e: &ReadError) -> Self {
        Problem { key: e.path().display().to_string(), message: describe(e) }
    }
}

/// Everything read in one poll.
#[derive(Debug, Clone)]
pub struct HostSample {
    pub taken: SystemTime,
    pub devices: Vec<String>,
    pub ports: Vec<PortState>,
    pub netdevs: Vec<NetdevState>,
    pub counters: BTreeMap<CounterKey, u64>,
    pub problems: Vec<Problem>,
}

impl HostSample {
    pub fn netdev(&self, name: &str) -> Option<&NetdevState> {
        self.netdevs.iter().find(|n| n.name == name)
    }
}

/// Reads samples from a sysfs root and a source of NIC statistics.
#[derive(Debug, Clone)]
pub struct Sampler {
    pub sysfs: Sysfs,
    pub nic: Arc<dyn NicStats>,
}

impl Sampler {
    pub fn new(sysfs: Sysfs, nic: Arc<dyn NicStats>) -> Self {
        Sampler { sysfs, nic }
    }

    /// Reads everything; never fails as a whole (see [`HostSample::problems`]).
    pub fn sample(&self) -> HostSample {
        let mut s = HostSample {
            taken: SystemTime::now(),
            devices: Vec::new(),
            ports: Vec::new(),
            netdevs: Vec::new(),
            counters: BTreeMap::new(),
            problems: Vec::new(),
        };
        match self.sysfs.devices() {
            Ok(d) => s.devices = d,
            Err(e) => s.problems.push(Problem::read(&e)),
        }
        for device in s.devices.clone() {
            self.read_device(&mut s, &device);
        }
        let netdevs: BTreeSet<String> = s.ports.iter().filter_map(|p| p.netdev.clone()).collect();
        for n in netdevs {
            self.read_netdev(&mut s, &n);
        }
        s
    }

    fn read_device(&self, s: &mut HostSample, device: &str) {
        let ports = match self.sysfs.ports(device) {
            Ok(p) => p,
            Err(e) => return s.problems.push(Problem::read(&e)),
        };
        for port in ports {
            let dir = self.sysfs.port_dir(device, port);
            let mut text = |name: &str| match read_text(&dir.join(name)) {
                Ok(t) => Some(t),
                Err(e) => {
                    s.problems.push(Problem::read(&e));
                    None
                }
            };
            let (state, phys_state, link_layer) = (text("state"), text("phys_state"), text("link_layer"));
            let gids = self.sysfs.gids(device, port);
            let netdev = self.sysfs.port_netdev(device, &gids);
            for source in [Source::IbCounters, Source::IbHwCounters] {
                let key =
                    |name: String| CounterKey { device: device.to_string(), port: Some(port), source, name };
                self.read_counters(s, &dir.join(source.as_str()), key);
            }
            s.ports.push(PortState {
                device: device.to_string(),
                port,
                state,
                phys_state,
                link_layer,
                netdev,
                gids,
            });
        }
    }

    fn read_counters(&self, s: &mut HostSample, dir: &std::path::Path, key: impl Fn(String) -> CounterKey) {
        match self.sysfs.counters(dir) {
            Ok((values, errors)) => {
                s.counters.extend(values.into_iter().map(|(n, v)| (key(n), v)));
                s.problems.extend(errors.iter().map(Problem::read));
            }
            Err(e) => s.problems.push(Problem::read(&e)),
        }
    }

    fn read_netdev(&self, s: &mut HostSample, name: &str) {
        let dir = self.sysfs.net_dir(name);
        let operstate = read_text(&dir.join("operstate")).ok();
        let mtu = read_text(&dir.join("mtu")).ok().and_then(|m| m.parse().ok());
        if operstate.is_none() {
            s.problems.push(Problem {
                key: dir.display().to_string(),
                message: format!("netdev {name} is absent"),
            });
        }
        let key =
            |source| move |n: String| CounterKey { device: name.to_string(), port: None, source, name: n };
        self.read_counters(s, &dir.join("statistics"), key(Source::NetStatistics));
        let mut ecn = BTreeMap::new();
        for side in ["roce_np", "roce_rp"] {
            let enable = dir.join("ecn").join(side).join("enable");
            let Ok((values, _)) = self.sysfs.counters(&enable) else { continue };
            let prios: BTreeMap<u8, bool> =
                values.into_iter().filter_map(|(p, v)| Some((p.parse().ok()?, v != 0))).collect();
            if !prios.is_empty() {
                ecn.insert(side.to_string(), prios);
            }
        }
        let netlink: [(Source, Result<Option<Stats>, _>); 2] =
            [(Source::EthtoolPause, self.nic.pause(name)), (Source::DcbPfc, self.nic.pfc(name))];
        for (source, got) in netlink {
            match got {
                Ok(Some(stats)) => s.counters.extend(stats.into_iter().map(|(n, v)| (key(source)(n), v))),
                Ok(None) => {}
                Err(e) => s.problems.push(Problem {
                    key: format!("{name}/{}", source.as_str()),
                    message: format!("{name}: {}", describe(&e)),
                }),
            }
        }
        s.netdevs.push(NetdevState { name: name.to_string(), operstate, mtu, ecn });
    }
}

/// An error with its causes, for a log line that says everything once.
pub fn describe(e: &dyn std::error::Error) -> String {
    let mut out = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push(c.to_string());
        cur = c.source();
    }
    out.join(": ")
}
