//! `metaroce doctor`: a host checked against the troubleshooting table —
//! RDMA traffic not flowing (devices, ports, GID type, netdev), PFC
//! counters rising (buffer or rate mismatch, incast), ECN not taking effect
//! (NIC switch, CNPs), MTU mismatch. Each check is PASS, WARN or FAIL with
//! the reason and the fix. Pure over two samples taken a window apart.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::rates::step;
use crate::sample::{CounterKey, HostSample, Source};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub check: &'static str,
    /// Device, port or netdev checked; `host` for host-wide checks.
    pub subject: String,
    pub status: Status,
    pub reason: String,
    /// What to do; `None` on PASS.
    pub fix: Option<String>,
}

/// What the checks compare against.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// The priority RoCE traffic uses (ECN must be on for it).
    pub priority: u8,
    /// The MTU every RoCE netdev should have, if known.
    pub mtu: Option<u32>,
}

impl Default for DoctorOptions {
    fn default() -> Self {
        DoctorOptions { priority: 3, mtu: None }
    }
}

fn check(check: &'static str, subject: &str, status: Status, reason: String, fix: &str) -> Check {
    let fix = (status != Status::Pass).then(|| fix.to_string());
    Check { check, subject: subject.to_string(), status, reason, fix }
}

/// Runs every check over two samples taken `window` apart.
pub fn diagnose(
    first: &HostSample,
    second: &HostSample,
    window: Duration,
    opts: &DoctorOptions,
) -> Vec<Check> {
    let mut out = Vec::new();
    devices(&mut out, second);
    ports(&mut out, second);
    netdevs(&mut out, second, opts);
    pfc(&mut out, first, second, window);
    cnp(&mut out, first, second, window);
    if !second.problems.is_empty() {
        let shown: Vec<&str> = second.problems.iter().take(3).map(|p| p.message.as_str()).collect();
        out.push(check(
            "read",
            "host",
            Status::Warn,
            format!(
                "{} file(s) or request(s) could not be read: {}",
                second.problems.len(),
                shown.join("; ")
            ),
            "run as root; a garbled counter file points at a driver problem (check dmesg)",
        ));
    }
    out
}

fn devices(out: &mut Vec<Check>, s: &HostSample) {
    out.push(if s.devices.is_empty() {
        check(
            "rdma.devices",
            "host",
            Status::Fail,
            "no RDMA devices under class/infiniband".into(),
            "load the NIC's RDMA driver (modprobe mlx5_ib), or add Soft-RoCE: rdma link add rxe0 type rxe netdev <dev>",
        )
    } else {
        check("rdma.devices", "host", Status::Pass, format!("{} device(s): {}", s.devices.len(), s.devices.join(", ")), "")
    });
}

fn ports(out: &mut Vec<Check>, s: &HostSample) {
    for p in &s.ports {
        let subject = format!("{}/{}", p.device, p.port);
        let state = p.state.as_deref().unwrap_or("unreadable");
        out.push(if p.active() {
            check("port.active", &subject, Status::Pass, format!("state {state}"), "")
        } else {
            check(
                "port.active",
                &subject,
                Status::Fail,
                format!("state {state}, physical {}", p.phys_state.as_deref().unwrap_or("unknown")),
                "bring the link up (cable, switch port, `ip link set <netdev> up`)",
            )
        });
        let nd = p.netdev.as_deref().unwrap_or("?");
        let v2: Vec<_> =
            p.gids.iter().filter(|g| g.is_roce_v2() && g.netdev.as_deref() == p.netdev.as_deref()).collect();
        let routable = v2.iter().any(|g| !g.gid.starts_with("fe80"));
        out.push(match (v2.is_empty(), routable) {
            (true, _) => check(
                "gid.roce_v2",
                &subject,
                Status::Fail,
                format!("no RoCE v2 GID on netdev {nd} (RDMA traffic will not flow with the wrong GID type)"),
                "give the netdev an IP address (RoCE v2 GIDs follow its addresses) and use a RoCE v2 GID index in the application",
            ),
            (false, false) => check(
                "gid.roce_v2",
                &subject,
                Status::Warn,
                format!("only link-local RoCE v2 GIDs on {nd}; routed RoCE v2 needs an IP address"),
                "add the fabric IP address to the netdev",
            ),
            (false, true) => {
                let idx: Vec<String> = v2.iter().map(|g| g.index.to_string()).collect();
                check("gid.roce_v2", &subject, Status::Pass, format!("RoCE v2 GID index {} on {nd}", idx.join(",")), "")
            }
        });
    }
}

fn netdevs(out: &mut Vec<Check>, s: &HostSample, opts: &DoctorOptions) {
    for n in &s.netdevs {
        let state = n.operstate.as_deref().unwrap_or("absent");
        out.push(match state {
            "up" => check("netdev.up", &n.name, Status::Pass, "operstate up".into(), ""),
            "unknown" => check(
                "netdev.up",
                &n.name,
                Status::Warn,
                "operstate unknown (virtual devices report this)".into(),
                "check that the link carries traffic: ip link show",
            ),
            _ => check(
                "netdev.up",
                &n.name,
                Status::Fail,
                format!("operstate {state}"),
                "ip link set <netdev> up, and check the cable or the switch port",
            ),
        });
        ecn(out, n, opts.priority);
    }
    let mtus: BTreeSet<u32> = s.netdevs.iter().filter_map(|n| n.mtu).collect();
    let listing =
        s.netdevs.iter().map(|n| format!("{}={}", n.name, n.mtu.map_or("?".into(), |m| m.to_string())));
    let listing = listing.collect::<Vec<_>>().join(", ");
    if s.netdevs.is_empty() {
        return;
    }
    out.push(match (opts.mtu, mtus.len()) {
        (Some(want), _) if mtus.iter().any(|m| *m != want) => check(
            "netdev.mtu",
            "host",
            Status::Fail,
            format!("MTU {listing}, expected {want}"),
            "set the same MTU on every host and switch port of the fabric: ip link set <netdev> mtu <n>",
        ),
        (_, 0 | 1) => check("netdev.mtu", "host", Status::Pass, format!("MTU {listing}"), ""),
        _ => check(
            "netdev.mtu",
            "host",
            Status::Warn,
            format!("MTUs differ: {listing}"),
            "use one MTU across the fabric (RoCE picks its path MTU from the netdev MTU)",
        ),
    });
}

fn ecn(out: &mut Vec<Check>, n: &crate::sample::NetdevState, prio: u8) {
    if n.ecn.is_empty() {
        out.push(check(
            "ecn.roce",
            &n.name,
            Status::Warn,
            "the driver exposes no ECN settings in sysfs (mlx5 has ecn/roce_np and ecn/roce_rp)".into(),
            "check ECN/DCQCN on the NIC with the vendor's tools",
        ));
        return;
    }
    let off: Vec<&str> = ["roce_np", "roce_rp"]
        .into_iter()
        .filter(|side| n.ecn.get(*side).and_then(|m| m.get(&prio)) != Some(&true))
        .collect();
    out.push(if off.is_empty() {
        check("ecn.roce", &n.name, Status::Pass, format!("ECN on for priority {prio} (roce_np, roce_rp)"), "")
    } else {
        check(
            "ecn.roce",
            &n.name,
            Status::Fail,
            format!("ECN off for priority {prio} in {} (ECN will not take effect)", off.join(", ")),
            &format!(
                "echo 1 > /sys/class/net/{}/ecn/{}/enable/{prio}",
                n.name,
                off.first().copied().unwrap_or("roce_np")
            ),
        )
    });
}

/// Increase of every counter matching `keep` between two samples.
fn increase(first: &HostSample, second: &HostSample, keep: impl Fn(&CounterKey) -> bool) -> Option<u64> {
    let mut seen = false;
    let mut sum = 0u64;
    for (k, &new) in second.counters.iter().filter(|(k, _)| keep(k)) {
        seen = true;
        if let Some(&old) = first.counters.get(k) {
            sum = sum.saturating_add(step(old, new).increase());
        }
    }
    seen.then_some(sum)
}

#[allow(clippy::cast_precision_loss)]
fn per_s(n: u64, window: Duration) -> f64 {
    n as f64 / window.as_secs_f64().max(1e-3)
}

fn pfc(out: &mut Vec<Check>, first: &HostSample, second: &HostSample, window: Duration) {
    for n in &second.netdevs {
        let of = |src: Source| {
            let name = n.name.clone();
            move |k: &CounterKey| k.port.is_none() && k.device == name && k.source == src
        };
        let pfc = increase(first, second, of(Source::DcbPfc));
        let pause = increase(first, second, of(Source::EthtoolPause));
        let w = window.as_secs_f64();
        out.push(match (pfc, pause) {
            (None, None) => check(
                "pfc.rising",
                &n.name,
                Status::Warn,
                "no PFC or pause counters readable (needs DCB or ethtool netlink in the driver, and the live /sys)".into(),
                "run on the host itself as root; check the driver supports DCB (mlx5 does)",
            ),
            (p, q) if p.unwrap_or(0) + q.unwrap_or(0) > 0 => {
                let total = p.unwrap_or(0) + q.unwrap_or(0);
                check(
                    "pfc.rising",
                    &n.name,
                    Status::Warn,
                    format!("{total} PFC/pause frames in {w:.1} s ({:.1}/s): buffer or rate mismatch, or incast", per_s(total, window)),
                    "mark ECN before PFC triggers (switch ECN threshold below the PFC xoff), check buffer headroom and link rates, look for incast",
                )
            }
            _ => check("pfc.rising", &n.name, Status::Pass, format!("no PFC or pause frames in {w:.1} s"), ""),
        });
    }
}

fn cnp(out: &mut Vec<Check>, first: &HostSample, second: &HostSample, window: Duration) {
    for dev in &second.devices {
        let of = |name: &'static str| {
            let dev = dev.clone();
            move |k: &CounterKey| k.device == dev && k.source == Source::IbHwCounters && k.name == name
        };
        let total = |name: &'static str| -> Option<u64> {
            let keep = of(name);
            let v: Vec<u64> = second.counters.iter().filter(|(k, _)| keep(k)).map(|(_, v)| *v).collect();
            (!v.is_empty()).then(|| v.iter().sum())
        };
        let (sent, handled) = (total("np_cnp_sent"), total("rp_cnp_handled"));
        let rising = increase(first, second, of("np_cnp_sent")).unwrap_or(0)
            + increase(first, second, of("rp_cnp_handled")).unwrap_or(0);
        let mut reason = String::new();
        out.push(match (sent, handled) {
            (None, None) => check(
                "cnp",
                dev,
                Status::Warn,
                "the driver counts no CNPs (rdma_rxe has no DCQCN)".into(),
                "use a NIC with DCQCN (mlx5) for congestion control",
            ),
            (s, h) if s.unwrap_or(0) + h.unwrap_or(0) > 0 => {
                let _ = write!(reason, "CNPs sent {}, handled {}", s.unwrap_or(0), h.unwrap_or(0));
                if rising > 0 {
                    let _ = write!(reason, "; {:.1}/s now", per_s(rising, window));
                }
                check("cnp", dev, Status::Pass, reason, "")
            }
            _ => check(
                "cnp",
                dev,
                Status::Warn,
                "no CNPs sent or handled: no congestion yet, or ECN is not taking effect".into(),
                "check the switches mark ECN (fabric.ecn_threshold) and ECN is on in the NIC (ecn.roce)",
            ),
        });
    }
}

/// The report as text: one line per check, the fix under each non-PASS.
pub fn render(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let _ = writeln!(out, "{}  {:<12} {:<14} {}", c.status.as_str(), c.check, c.subject, c.reason);
        if let Some(fix) = &c.fix {
            let _ = writeln!(out, "      fix: {fix}");
        }
    }
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    let _ = writeln!(
        out,
        "doctor: {} PASS, {} WARN, {} FAIL",
        count(Status::Pass),
        count(Status::Warn),
        count(Status::Fail)
    );
    out
}

/// The report as JSON: `{"checks": [...], "pass": n, "warn": n, "fail": n}`.
pub fn to_json(checks: &[Check]) -> serde_json::Value {
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    serde_json::json!({
        "checks": checks,
        "pass": count(Status::Pass),
        "warn": count(Status::Warn),
        "fail": count(Status::Fail),
    })
}
