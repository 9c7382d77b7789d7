//! The congestion signals of one host, per RDMA device: CNPs, ECN marks,
//! pause and PFC frames. This is what the controller folds into its view;
//! the exporter and the scrape client both build it with [`summarize`], so
//! the two sides cannot disagree on which raw counter means what.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::sample::{CounterKey, Source};

/// A counter's total and its rate per second (absent until two readings).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Counter {
    pub total: u64,
    pub rate: Option<f64>,
}

impl Counter {
    fn add(slot: &mut Option<Counter>, total: u64, rate: Option<f64>) {
        let c = slot.get_or_insert(Counter { total: 0, rate: Some(0.0) });
        c.total = c.total.saturating_add(total);
        c.rate = c.rate.zip(rate).map(|(a, b)| a + b);
    }
}

/// Congestion counters of one RDMA device, summed over its ports; `None`
/// where the driver does not count that signal.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct DeviceCongestion {
    pub netdev: Option<String>,
    /// CNPs this device sent as a notification point (`np_cnp_sent`).
    pub cnp_sent: Option<Counter>,
    /// CNPs this device reacted to as a reaction point (`rp_cnp_handled`).
    pub cnp_handled: Option<Counter>,
    /// RoCE packets that arrived ECN-marked (`np_ecn_marked_roce_packets`).
    pub ecn_marked: Option<Counter>,
    pub pause_tx: Option<Counter>,
    pub pause_rx: Option<Counter>,
    /// PFC frames sent, all priorities.
    pub pfc_tx: Option<Counter>,
    /// PFC frames received, all priorities.
    pub pfc_rx: Option<Counter>,
    pub pfc_tx_by_priority: BTreeMap<u8, Counter>,
    pub pfc_rx_by_priority: BTreeMap<u8, Counter>,
}

/// The congestion counters of a host.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct HostCongestion {
    pub host: String,
    pub devices: BTreeMap<String, DeviceCongestion>,
}

/// Which signal a raw counter is, if any.
enum Signal {
    CnpSent,
    CnpHandled,
    EcnMarked,
    PauseTx,
    PauseRx,
    PfcTx(u8),
    PfcRx(u8),
}

fn signal(key: &CounterKey) -> Option<Signal> {
    let name = key.name.as_str();
    match key.source {
        Source::IbHwCounters => match name {
            "np_cnp_sent" => Some(Signal::CnpSent),
            "rp_cnp_handled" => Some(Signal::CnpHandled),
            "np_ecn_marked_roce_packets" => Some(Signal::EcnMarked),
            _ => None,
        },
        Source::EthtoolPause => match name {
            "tx_pause_frames" => Some(Signal::PauseTx),
            "rx_pause_frames" => Some(Signal::PauseRx),
            _ => None,
        },
        Source::DcbPfc => {
            let prio = |p: &str| p.parse::<u8>().ok().filter(|p| *p < 8);
            if let Some(p) = name.strip_prefix("tx_pfc_prio").and_then(prio) {
                Some(Signal::PfcTx(p))
            } else {
                name.strip_prefix("rx_pfc_prio").and_then(prio).map(Signal::PfcRx)
            }
        }
        Source::IbCounters | Source::NetStatistics => None,
    }
}

/// Folds raw counters into per-device signals. `ports` lists
/// `(rdma device, netdev)` pairs so that a netdev's pause and PFC counters
/// land on the RDMA devices that run over it.
pub fn summarize(
    host: &str,
    ports: &[(String, Option<String>)],
    counters: &BTreeMap<CounterKey, u64>,
    rates: &BTreeMap<CounterKey, f64>,
) -> HostCongestion {
    let mut devices: BTreeMap<String, DeviceCongestion> = BTreeMap::new();
    for (dev, netdev) in ports {
        let d = devices.entry(dev.clone()).or_default();
        if d.netdev.is_none() {
            d.netdev.clone_from(netdev);
        }
    }
    for (key, &total) in counters {
        let Some(sig) = signal(key) else { continue };
        let rate = rates.get(key).copied();
        let owners: Vec<&String> = if key.source.is_rdma() {
            vec![&key.device]
        } else {
            ports.iter().filter(|(_, n)| n.as_deref() == Some(key.device.as_str())).map(|(d, _)| d).collect()
        };
        let mut owners = owners;
        owners.dedup();
        for dev in owners {
            let d = devices.entry(dev.clone()).or_default();
            match sig {
                Signal::CnpSent => Counter::add(&mut d.cnp_sent, total, rate),
                Signal::CnpHandled => Counter::add(&mut d.cnp_handled, total, rate),
                Signal::EcnMarked => Counter::add(&mut d.ecn_marked, total, rate),
                Signal::PauseTx => Counter::add(&mut d.pause_tx, total, rate),
                Signal::PauseRx => Counter::add(&mut d.pause_rx, total, rate),
                Signal::PfcTx(p) => {
                    Counter::add(&mut d.pfc_tx, total, rate);
                    d.pfc_tx_by_priority.insert(p, Counter { total, rate });
                }
                Signal::PfcRx(p) => {
                    Counter::add(&mut d.pfc_rx, total, rate);
                    d.pfc_rx_by_priority.insert(p, Counter { total, rate });
                }
            }
        }
    }
    HostCongestion { host: host.to_string(), devices }
}
