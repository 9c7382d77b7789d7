//! Host NIC congestion folded into the controller's view: the rates the
//! host exporters report (PFC, pause, CNP, ECN), per host and device, for
//! metrics and the congestion map, and the PFC alarm. PFC is the last line
//! of defence (DESIGN.md, invariant 6): pause frames that keep rising on
//! hosts while the controller is rerouting mean the loop is not keeping up.

use std::collections::BTreeMap;

use metaroce_host::{Counter, HostCongestion, ScrapeError};
use serde_json::{json, Value};

use crate::obs::Metrics;

/// Consecutive scrapes with rising PFC while acting that raise the alarm.
pub const PFC_ALARM_SCRAPES: u32 = 3;

/// An event to log.
#[derive(Debug, Clone, PartialEq)]
pub struct HostNote {
    pub kind: &'static str,
    pub reason: String,
    pub details: Value,
}

#[derive(Debug, Clone, Default)]
struct HostState {
    last: Option<HostCongestion>,
    error: Option<String>,
    /// Scrapes in a row with PFC rising while the controller acted.
    pfc_rising: u32,
    alarmed: bool,
}

/// What the controller knows of every host that runs an exporter.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    hosts: BTreeMap<String, HostState>,
}

/// An error and its sources, `: `-separated (what failed, then why).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn rate(c: &Option<Counter>) -> f64 {
    c.as_ref().and_then(|c| c.rate).unwrap_or(0.0)
}

impl Hosts {
    /// Takes one scrape; `acting` is true while the controller has weight
    /// overrides in force in `act` mode.
    pub fn update(
        &mut self,
        metrics: &Metrics,
        got: Vec<(String, Result<HostCongestion, ScrapeError>)>,
        acting: bool,
    ) -> Vec<HostNote> {
        let mut notes = Vec::new();
        for (host, result) in got {
            let st = self.hosts.entry(host.clone()).or_default();
            match result {
                Ok(h) => {
                    metrics.set_host_up(&host, true);
                    let mut pfc = 0.0;
                    for (dev, d) in &h.devices {
                        for (signal, c) in [
                            ("pfc_tx", &d.pfc_tx),
                            ("pfc_rx", &d.pfc_rx),
                            ("pause_tx", &d.pause_tx),
                            ("pause_rx", &d.pause_rx),
                            ("cnp_sent", &d.cnp_sent),
                            ("cnp_handled", &d.cnp_handled),
                            ("ecn_marked", &d.ecn_marked),
                        ] {
                            if c.is_some() {
                                metrics.set_host_rate(&host, dev, signal, rate(c));
                            }
                        }
                        pfc += rate(&d.pfc_tx) + rate(&d.pfc_rx) + rate(&d.pause_tx) + rate(&d.pause_rx);
                    }
                    if st.error.take().is_some() {
                        notes.push(HostNote {
                            kind: "host_exporter",
                            reason: format!("{host}: exporter answers again"),
                            details: json!({}),
                        });
                    }
                    st.pfc_rising = if pfc > 0.0 && acting { st.pfc_rising + 1 } else { 0 };
                    if st.pfc_rising >= PFC_ALARM_SCRAPES && !st.alarmed {
                        st.alarmed = true;
                        notes.push(HostNote {
                            kind: "pfc_alarm",
                            reason: format!("{host}: PFC/pause frames keep rising while the controller reroutes; check buffers, ECN thresholds and incast"),
                            details: json!({"host": host, "pause_frames_per_second": pfc, "scrapes": st.pfc_rising}),
                        });
                    } else if st.pfc_rising == 0 && st.alarmed {
                        st.alarmed = false;
                        notes.push(HostNote {
                            kind: "pfc_alarm_cleared",
                            reason: format!("{host}: PFC quiet again"),
                            details: json!({}),
                        });
                    }
                    st.last = Some(h);
                }
                Err(e) => {
                    metrics.set_host_up(&host, false);
                    let e = error_chain(&e);
                    if st.error.is_none() {
                        notes.push(HostNote {
                            kind: "host_exporter",
                            reason: format!("{host}: exporter unreachable: {e}"),
                            details: json!({}),
                        });
                    }
                    st.error = Some(e);
                }
            }
        }
        notes
    }

    /// The hosts part of the congestion map.
    pub fn status(&self) -> Value {
        let hosts: Vec<Value> = self
            .hosts
            .iter()
            .map(|(name, st)| {
                let devices: BTreeMap<&String, Value> = st
                    .last
                    .iter()
                    .flat_map(|h| h.devices.iter())
                    .map(|(dev, d)| {
                        (dev, json!({
                            "netdev": d.netdev, "pfc_per_s": rate(&d.pfc_tx) + rate(&d.pfc_rx),
                            "pause_per_s": rate(&d.pause_tx) + rate(&d.pause_rx),
                            "cnp_sent_per_s": rate(&d.cnp_sent), "cnp_handled_per_s": rate(&d.cnp_handled),
                            "ecn_marked_per_s": rate(&d.ecn_marked),
                        }))
                    })
                    .collect();
                json!({"host": name, "up": st.error.is_none() && st.last.is_some(), "error": st.error,
                       "pfc_alarm": st.alarmed, "devices": devices})
            })
            .collect();
        Value::Array(hosts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metaroce_host::DeviceCongestion;

    fn scrape(pfc: f64) -> Vec<(String, Result<HostCongestion, ScrapeError>)> {
        let dev =
            DeviceCongestion { pfc_tx: Some(Counter { total: 10, rate: Some(pfc) }), ..Default::default() };
        let h = HostCongestion {
            host: "h1".into(),
            devices: [("mlx5_0".to_string(), dev)].into_iter().collect(),
        };
        vec![("h1".into(), Ok(h))]
    }

    #[test]
    fn pfc_rising_while_acting_raises_one_alarm_and_clears() {
        let m = Metrics::new();
        let mut h = Hosts::default();
        for _ in 0..PFC_ALARM_SCRAPES - 1 {
            assert!(h.update(&m, scrape(50.0), true).is_empty());
        }
        let n = h.update(&m, scrape(50.0), true);
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].kind, "pfc_alarm");
        assert!(h.update(&m, scrape(50.0), true).is_empty(), "one alarm per episode");
        assert!(h.status().to_string().contains("\"pfc_alarm\":true"));
        assert_eq!(h.update(&m, scrape(0.0), true)[0].kind, "pfc_alarm_cleared");
    }

    #[test]
    fn pfc_while_not_acting_is_no_alarm_and_a_dead_exporter_is_said_once() {
        let m = Metrics::new();
        let mut h = Hosts::default();
        for _ in 0..10 {
            assert!(h.update(&m, scrape(50.0), false).is_empty());
        }
        let refused = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let down = || {
            let e = ScrapeError::Connect { addr: "h1:9101".into(), source: refused() };
            vec![("h1".to_string(), Err(e))]
        };
        assert_eq!(h.update(&m, down(), true).len(), 1);
        assert!(h.update(&m, down(), true).is_empty());
        let status = h.status().to_string();
        assert!(status.contains("cannot connect to exporter h1:9101: connection refused"), "{status}");
        assert_eq!(h.update(&m, scrape(0.0), true)[0].reason, "h1: exporter answers again");
    }
}
