//! The scenario YAML: which topology, which routing modes, network settings
//! and the jobs of the workload. Decoded field by field so that every
//! mistake is reported with its line, column and path.
//!
//! ```yaml
//! name: two-jobs
//! topology: ../topologies/leaf-spine-4x4.yaml   # relative to this file
//! seed: 7
//! modes: [ecmp, flowlet]
//! limits: {time: 50ms, events: 200000000}
//! network: {mtu: 4096B, lossless: [3], priority: 3, dcqcn: true}
//! jobs:
//!   - {name: train, pattern: all-to-all, hosts: "h*-1", size: 1MiB}
//!   - {name: bg, pattern: incast, hosts: [h1-2, h2-2], target: h4-4, size: 4MiB, start: 20us, priority: 0}
//! ```

pub(crate) mod config;
mod control_yaml;
pub(crate) mod decode;
mod draw;
mod jobs;
pub mod sizes;

use std::path::{Path, PathBuf};

use metaroce_topo::yaml::{self, Node, Value};
use metaroce_topo::Topology;

use crate::error::{Diagnostic, SimError};
use crate::scenario::config::{
    Clamp, Dcqcn, Ecn, Limits, NetConfig, Ordering, Pfc, RoutingMode, Scenario, DEFAULT_PRIORITY,
    ROCE_HEADER_BYTES,
};
use crate::scenario::decode::Diags;

/// Largest scenario file read.
pub const MAX_SCENARIO_BYTES: u64 = 4 << 20;

const TOP: &[&str] = &[
    "name",
    "description",
    "topology",
    "seed",
    "modes",
    "limits",
    "network",
    "nic",
    "control",
    "events",
    "jobs",
    "pcap",
];
const NETWORK: &[&str] = &[
    "mtu",
    "lossless",
    "priority",
    "pfc",
    "ecn",
    "dcqcn",
    "flowlet_timeout",
    "sports_per_qp",
    "rto",
    "ack_every",
];

/// A scenario and the topology it runs on.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub scenario: Scenario,
    pub topology: Topology,
    pub topology_path: PathBuf,
}

/// Reads a scenario file and the topology it names (relative to the file).
pub fn load_file(path: &Path) -> Result<Loaded, SimError> {
    let origin = path.display().to_string();
    let text = read_text(path)?;
    let root = parse(&text, &origin)?;
    let mut diags = Diags::default();
    let topo_rel = topology_field(&root, &mut diags);
    let Some(rel) = topo_rel else {
        if diags.0.is_empty() {
            diags.0.push(Diagnostic {
                path: "topology".into(),
                pos: Some(root.pos),
                message: "missing field \"topology\": the path of the topology YAML, relative to this file"
                    .into(),
            });
        }
        return Err(SimError::Invalid { origin, diagnostics: diags.0 });
    };
    let topology_path = path.parent().unwrap_or(Path::new(".")).join(rel);
    let topology = metaroce_topo::load_file(&topology_path).map_err(|source| SimError::Topology {
        origin: origin.clone(),
        path: topology_path.clone(),
        source,
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let scenario = decode(&root, &origin, &topology, base)?;
    Ok(Loaded { scenario, topology, topology_path })
}

/// Decodes scenario text against a topology already loaded; a `topology`
/// field, if present, is not followed; flow-size files are relative to
/// the current directory.
pub fn load_str(text: &str, origin: &str, topo: &Topology) -> Result<Scenario, SimError> {
    let root = parse(text, origin)?;
    decode(&root, origin, topo, Path::new("."))
}

fn read_text(path: &Path) -> Result<String, SimError> {
    let io = |source| SimError::Io { path: path.to_path_buf(), source };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.len() > MAX_SCENARIO_BYTES {
        return Err(SimError::Invalid {
            origin: path.display().to_string(),
            diagnostics: vec![Diagnostic {
                path: String::new(),
                pos: None,
                message: format!("file is {} bytes, more than the limit of {MAX_SCENARIO_BYTES}", meta.len()),
            }],
        });
    }
    std::fs::read_to_string(path).map_err(io)
}

fn parse(text: &str, origin: &str) -> Result<Node, SimError> {
    yaml::parse(text).map_err(|e| SimError::Invalid {
        origin: origin.to_string(),
        diagnostics: vec![Diagnostic { path: String::new(), pos: Some(e.pos), message: e.message }],
    })
}

fn topology_field(root: &Node, diags: &mut Diags) -> Option<String> {
    let Value::Map(entries) = &root.value else { return None };
    let (_, v) = entries.iter().find(|(k, _)| k.as_str() == Some("topology"))?;
    diags.str(v, "topology").map(str::to_string)
}

fn decode(root: &Node, origin: &str, topo: &Topology, base: &Path) -> Result<Scenario, SimError> {
    let mut d = Diags::default();
    if !matches!(root.value, Value::Map(_)) {
        d.err("", root.pos, format!("a scenario is a mapping with \"jobs\", found {}", root.kind()));
    }
    let net = default_net(topo);
    let mut sc = Scenario {
        name: "scenario".into(),
        description: None,
        seed: 1,
        modes: vec![RoutingMode::Ecmp, RoutingMode::Flowlet],
        limits: Limits::default(),
        control: control_yaml::default_control(topo, net.mtu),
        net,
        jobs: Vec::new(),
        events: Vec::new(),
        pcap: Vec::new(),
        drawn_seed: 1,
    };
    let entries = d.map(root, "", TOP);
    // Network first: job checks need the MTU and rates.
    if let Some((_, n)) = entries.iter().find(|(k, _)| *k == "network") {
        network(&mut d, n, &mut sc.net);
        sc.control = control_yaml::default_control(topo, sc.net.mtu);
    }
    let mut saw_jobs = false;
    let mut events_at = None;
    let mut announce_at = Vec::new();
    for (key, v) in entries {
        match key {
            "name" => sc.name = d.str(v, key).unwrap_or("scenario").to_string(),
            "description" => sc.description = d.str(v, key).map(str::to_string),
            "seed" => sc.seed = d.u64(v, key, 0, u64::MAX).unwrap_or(1),
            "modes" => sc.modes = modes(&mut d, v),
            "limits" => sc.limits = limits(&mut d, v),
            "pcap" => sc.pcap = pcap(&mut d, v, topo),
            "nic" => sc.net.ordering = nic(&mut d, v),
            "control" => control_yaml::control(&mut d, v, sc.net.mtu, &mut sc.control),
            "events" => {
                events_at = Some(v.pos);
                sc.events = control_yaml::events(&mut d, v, topo);
            }
            "jobs" => {
                saw_jobs = true;
                let env = jobs::JobEnv { topo, priority: sc.net.priority, base };
                sc.jobs = jobs::decode(&mut d, v, &env);
                announce_at = jobs::announced(v);
            }
            _ => {}
        }
    }
    if let (Some(pos), Some(last)) = (events_at, sc.events.last()) {
        if last.at_ps >= sc.limits.time_ps {
            let msg = format!("an event at {} µs is past the time limit", last.at_ps / 1_000_000);
            d.err("events", pos, msg);
        }
    }
    if !sc.modes.iter().any(|m| m.has_controller()) {
        for (path, pos) in announce_at {
            let msg = "\"announce\" tells the controller about the job, and no mode here has one; \
                       add metaroce to \"modes\" or leave \"announce\" out";
            d.err(&path, pos, msg);
        }
    }
    // An RNIC's transport is reliable: go-back-N recovers drops in lossy
    // mode, and what a failed link loses in lossless mode.
    sc.net.reliable = !sc.net.lossless || !sc.events.is_empty();
    if !saw_jobs && matches!(root.value, Value::Map(_)) {
        d.err("jobs", root.pos, "missing field \"jobs\": a list of at least one job");
    }
    if d.0.is_empty() {
        // The jobs' random parts, now that the seed is known.
        sc.reseed(topo, sc.seed);
        Ok(sc)
    } else {
        Err(SimError::Invalid { origin: origin.to_string(), diagnostics: d.0 })
    }
}

/// Settings that follow the topology's fabric section unless overridden.
fn default_net(topo: &Topology) -> NetConfig {
    let mtu = 4096u32;
    let pkt = u64::from(mtu + ROCE_HEADER_BYTES);
    let kmin = match topo.fabric.ecn_threshold {
        metaroce_topo::units::QueueDepth::Packets(p) => p * pkt,
        metaroce_topo::units::QueueDepth::Bytes(b) => b,
    };
    NetConfig {
        mtu,
        lossless: true,
        lossless_priorities: vec![DEFAULT_PRIORITY],
        priority: DEFAULT_PRIORITY,
        reliable: false,
        pfc: Pfc { xoff_bytes: 24 * pkt, xon_bytes: 12 * pkt, headroom_bytes: None },
        ecn: Some(Ecn { kmin_bytes: kmin, kmax_bytes: kmin * 4, pmax: 0.2 }),
        dcqcn: Some(Dcqcn::default()),
        flowlet_timeout_ps: topo.fabric.flowlet_timeout.ns() * 1_000,
        sports_per_qp: 1,
        rto_ps: 200_000_000,
        ack_every: 16,
        ordering: Ordering::default(),
        core_speedup: 1,
    }
}

/// `nic: {ordering: go-back-n | out-of-order}`.
fn nic(d: &mut Diags, v: &Node) -> Ordering {
    let mut out = Ordering::default();
    for (_, n) in d.map(v, "nic", &["ordering"]) {
        let Some(s) = d.str(n, "nic.ordering") else { continue };
        match s.parse::<Ordering>() {
            Ok(o) => out = o,
            Err(_) => {
                let other = s;
                let hint = metaroce_topo::spec::did_you_mean(other, Ordering::NAMES.iter().copied())
                    .map(|k| format!("did you mean \"{k}\"? "))
                    .unwrap_or_default();
                let msg = format!(
                    "unknown NIC ordering \"{other}\"; {hint}use go-back-n (RC queue pairs: NAK and resend) \
                     or out-of-order (packets placed as they arrive)"
                );
                d.err("nic.ordering", n.pos, msg);
            }
        }
    }
    out
}

fn modes(d: &mut Diags, v: &Node) -> Vec<RoutingMode> {
    let mut out = Vec::new();
    for (i, item) in d.list(v, "modes").iter().enumerate() {
        let path = format!("modes[{i}]");
        if let Some(s) = d.str(item, &path) {
            match s.parse::<RoutingMode>() {
                Ok(m) if out.contains(&m) => d.err(&path, item.pos, format!("mode \"{m}\" is listed twice")),
                Ok(m) => out.push(m),
                Err(e) => d.err(&path, item.pos, e),
            }
        }
    }
    if out.is_empty() && matches!(v.value, Value::Seq(_)) {
        d.err("modes", v.pos, "list at least one routing mode (ecmp, flowlet, spray, metaroce)");
    }
    out
}

fn limits(d: &mut Diags, v: &Node) -> Limits {
    let mut l = Limits::default();
    for (key, n) in d.map(v, "limits", &["time", "events"]) {
        let path = format!("limits.{key}");
        match key {
            "time" => match d.duration_ps(n, &path) {
                Some(0) => d.err(&path, n.pos, "the time limit must be greater than zero"),
                Some(t) => l.time_ps = t,
                None => {}
            },
            _ => l.events = d.u64(n, &path, 1, 1 << 40).unwrap_or(l.events),
        }
    }
    l
}

fn pcap(d: &mut Diags, v: &Node, topo: &Topology) -> Vec<metaroce_topo::Endpoint> {
    let mut out = Vec::new();
    for (i, item) in d.list(v, "pcap").iter().enumerate() {
        let path = format!("pcap[{i}]");
        let Some(text) = d.str(item, &path) else { continue };
        match topo.link_end(text) {
            Ok(e) => out.push(e),
            Err(e) => d.err(&path, item.pos, e.to_string()),
        }
    }
    out
}

fn network(d: &mut Diags, v: &Node, net: &mut NetConfig) {
    let entries = d.map(v, "network", NETWORK);
    if let Some((_, n)) = entries.iter().find(|(k, _)| *k == "mtu") {
        match d.bytes(n, "network.mtu") {
            Some(m @ 256..=9000) => net.mtu = m as u32,
            Some(m) => {
                d.err("network.mtu", n.pos, format!("MTU of {m} bytes is impossible; use 256B..9000B"))
            }
            None => {}
        }
    }
    if let Some((_, n)) = entries.iter().find(|(k, _)| *k == "priority") {
        net.priority = d.priority(n, "network.priority").unwrap_or(net.priority);
    }
    // `lossless: true` (the default) makes the default priority lossless.
    net.lossless_priorities = vec![net.priority];
    let pkt = u64::from(net.mtu + ROCE_HEADER_BYTES);
    for (key, n) in entries {
        let path = format!("network.{key}");
        match key {
            "lossless" => net.lossless_priorities = lossless(d, n, net.priority),
            "pfc" => pfc(d, n, pkt, &mut net.pfc),
            "ecn" => net.ecn = ecn(d, n, pkt, net.ecn),
            "dcqcn" => net.dcqcn = dcqcn(d, n),
            "flowlet_timeout" => {
                net.flowlet_timeout_ps = d.duration_ps(n, &path).unwrap_or(net.flowlet_timeout_ps)
            }
            "sports_per_qp" => net.sports_per_qp = d.u64(n, &path, 1, 64).map_or(1, |v| v as u16),
            "rto" => match d.duration_ps(n, &path) {
                Some(0) => d.err(&path, n.pos, "the retransmission timeout must be greater than zero"),
                Some(t) => net.rto_ps = t,
                None => {}
            },
            "ack_every" => net.ack_every = d.u64(n, &path, 1, 1 << 16).map_or(16, |v| v as u32),
            _ => {}
        }
    }
    net.lossless = !net.lossless_priorities.is_empty();
}

/// `true` (the default priority is lossless), `false` (none is), or the
/// list of lossless priorities.
fn lossless(d: &mut Diags, v: &Node, default: u8) -> Vec<u8> {
    let Value::Seq(items) = &v.value else {
        return match v.as_str() {
            Some("true" | "on" | "yes") => vec![default],
            Some("false" | "off" | "no") => Vec::new(),
            _ => {
                let msg = "expected true, false, or a list of lossless priorities like [3]";
                d.err("network.lossless", v.pos, msg);
                vec![default]
            }
        };
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("network.lossless[{i}]");
        match d.priority(item, &path) {
            Some(p) if out.contains(&p) => d.err(&path, item.pos, format!("priority {p} is listed twice")),
            Some(p) => out.push(p),
            None => {}
        }
    }
    out.sort_unstable();
    out
}

fn pfc(d: &mut Diags, v: &Node, pkt: u64, p: &mut Pfc) {
    let mut pos = v.pos;
    for (key, n) in d.map(v, "network.pfc", &["xoff", "xon", "headroom"]) {
        let path = format!("network.pfc.{key}");
        pos = n.pos;
        match key {
            "xoff" => p.xoff_bytes = d.depth(n, &path, pkt).unwrap_or(p.xoff_bytes),
            "xon" => p.xon_bytes = d.depth(n, &path, pkt).unwrap_or(p.xon_bytes),
            _ if n.as_str() == Some("auto") => p.headroom_bytes = None,
            _ => p.headroom_bytes = d.depth(n, &path, pkt).or(p.headroom_bytes),
        }
    }
    if p.xon_bytes >= p.xoff_bytes {
        d.err("network.pfc", pos, format!("xon ({} B) must be below xoff ({} B)", p.xon_bytes, p.xoff_bytes));
    }
    if p.xoff_bytes < pkt {
        d.err("network.pfc.xoff", pos, format!("xoff must be at least one packet ({pkt} B)"));
    }
}

fn ecn(d: &mut Diags, v: &Node, pkt: u64, old: Option<Ecn>) -> Option<Ecn> {
    if let Some(s) = v.as_str() {
        return match s {
            "off" | "false" => None,
            "on" | "true" => old,
            _ => {
                d.err("network.ecn", v.pos, "expected on, off, or a mapping {kmin, kmax, pmax}");
                old
            }
        };
    }
    let mut e = old.unwrap_or(Ecn { kmin_bytes: 32 * pkt, kmax_bytes: 128 * pkt, pmax: 0.2 });
    for (key, n) in d.map(v, "network.ecn", &["kmin", "kmax", "pmax"]) {
        let path = format!("network.ecn.{key}");
        match key {
            "kmin" => e.kmin_bytes = d.depth(n, &path, pkt).unwrap_or(e.kmin_bytes),
            "kmax" => e.kmax_bytes = d.depth(n, &path, pkt).unwrap_or(e.kmax_bytes),
            _ => e.pmax = d.fraction(n, &path, 0.0, 1.0).unwrap_or(e.pmax),
        }
    }
    if e.kmax_bytes <= e.kmin_bytes {
        d.err(
            "network.ecn",
            v.pos,
            format!("kmax ({} B) must be above kmin ({} B)", e.kmax_bytes, e.kmin_bytes),
        );
    }
    Some(e)
}

fn dcqcn(d: &mut Diags, v: &Node) -> Option<Dcqcn> {
    if v.as_str().is_some() {
        return d.bool(v, "network.dcqcn").unwrap_or(true).then(Dcqcn::default);
    }
    let mut p = Dcqcn::default();
    let keys = ["g", "timer", "byte_counter", "rai", "rhai", "cnp_interval", "clamp"];
    for (key, n) in d.map(v, "network.dcqcn", &keys) {
        let path = format!("network.dcqcn.{key}");
        match key {
            "g" => p.g = d.fraction(n, &path, 1e-6, 1.0).unwrap_or(p.g),
            "timer" => p.timer_ps = d.duration_ps(n, &path).filter(|t| *t > 0).unwrap_or(p.timer_ps),
            "byte_counter" => p.byte_counter = d.bytes(n, &path).filter(|b| *b > 0).unwrap_or(p.byte_counter),
            "rai" => p.rai = d.fraction(n, &path, 0.0, 1.0).unwrap_or(p.rai),
            "rhai" => p.rhai = d.fraction(n, &path, 0.0, 1.0).unwrap_or(p.rhai),
            "clamp" => {
                let Some(s) = d.str(n, &path) else { continue };
                match Clamp::from_name(s) {
                    Some(c) => p.clamp = c,
                    None => {
                        let hint =
                            metaroce_topo::spec::did_you_mean(s, Clamp::ALL.iter().map(|c| c.as_str()))
                                .map(|k| format!("did you mean \"{k}\"? "))
                                .unwrap_or_default();
                        let msg = format!(
                            "unknown DCQCN clamp \"{s}\"; {hint}use always (every cut lowers the target rate, \
                             as in the DCQCN paper) or after-timer (only a cut after a timer increase, as \
                             HPCC's ns-3 model of ConnectX does)"
                        );
                        d.err(&path, n.pos, msg);
                    }
                }
            }
            _ => p.cnp_interval_ps = d.duration_ps(n, &path).unwrap_or(p.cnp_interval_ps),
        }
    }
    Some(p)
}
