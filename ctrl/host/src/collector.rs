//! Polls the host, keeps rates, and logs what changed — each absence,
//! unreadable file or vanished counter once, and again only when it is
//! back, so a missing device does not fill the log.

use std::collections::{BTreeSet, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, UNIX_EPOCH};

use crate::error::ExportError;
use crate::openmetrics::Snapshot;
use crate::rates::Rates;
use crate::sample::{HostSample, Sampler, Source};

/// The hw_counters the controller's congestion view is built from.
const SIGNALS: [&str; 3] = ["np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets"];

/// Owns everything that persists between polls.
#[derive(Debug)]
pub struct Collector {
    sampler: Sampler,
    host: String,
    rates: Rates,
    /// Keys of the things already reported as absent or broken.
    said: HashSet<String>,
    devices: Option<BTreeSet<String>>,
    started: Instant,
    csv: Option<Csv>,
}

impl Collector {
    pub fn new(sampler: Sampler, host: impl Into<String>) -> Self {
        Collector {
            sampler,
            host: host.into(),
            rates: Rates::default(),
            said: HashSet::new(),
            devices: None,
            started: Instant::now(),
            csv: None,
        }
    }

    /// Also appends every poll to a CSV file (created with a header if new).
    pub fn with_csv(mut self, path: &Path) -> Result<Self, ExportError> {
        self.csv = Some(Csv::open(path)?);
        Ok(self)
    }

    /// Polls now.
    pub fn poll(&mut self) -> Snapshot {
        let at = self.started.elapsed();
        self.poll_at(at)
    }

    /// Polls, with `at` the monotonic time of the reading (tests pass their own).
    pub fn poll_at(&mut self, at: Duration) -> Snapshot {
        let sample = self.sampler.sample();
        self.log_devices(&sample);
        self.log_problems(&sample);
        self.log_missing_signals(&sample);
        let changes = self.rates.update(at, &sample.counters);
        let present: BTreeSet<&str> = sample.devices.iter().map(String::as_str).collect();
        for key in changes.vanished {
            let is_netdev = key.port.is_none();
            if is_netdev || present.contains(key.device.as_str()) {
                let id = format!("vanished:{key}");
                if self.said.insert(id) {
                    tracing::warn!(counter = %key, "counter vanished; no longer exported until it returns");
                }
            }
        }
        let returned: Vec<String> = if self.said.iter().any(|id| id.starts_with("vanished:")) {
            let now: HashSet<String> = sample.counters.keys().map(|c| format!("vanished:{c}")).collect();
            self.said.iter().filter(|id| now.contains(*id)).cloned().collect()
        } else {
            Vec::new()
        };
        for id in returned {
            tracing::info!(counter = %id.trim_start_matches("vanished:"), "counter is back");
            self.said.remove(&id);
        }
        for key in changes.wrapped {
            tracing::debug!(counter = %key, "counter wrapped");
        }
        for key in changes.reset {
            tracing::info!(counter = %key, "counter went back (driver reset or re-plug); counting from its new value");
        }
        let snap = Snapshot {
            host: self.host.clone(),
            ports: sample.ports.clone(),
            counters: sample.counters.clone(),
            rates: self.rates.all().clone(),
            problems: sample.problems.len(),
        };
        if let Some(csv) = &mut self.csv {
            if let Err(e) = csv.append(&sample, &snap) {
                if self.said.insert("csv".into()) {
                    tracing::warn!(error = %crate::sample::describe(&e), "CSV append failed; still serving metrics");
                }
            } else {
                self.said.remove("csv");
            }
        }
        snap
    }

    fn log_devices(&mut self, sample: &HostSample) {
        let now: BTreeSet<String> = sample.devices.iter().cloned().collect();
        if now.is_empty() && self.said.insert("no-devices".into()) {
            tracing::warn!(
                dir = %self.sampler.sysfs.ib_dir().display(),
                "no RDMA devices; load the driver (mlx5_ib) or add Soft-RoCE: rdma link add rxe0 type rxe netdev <dev>"
            );
        } else if !now.is_empty() {
            self.said.remove("no-devices");
        }
        if let Some(before) = &self.devices {
            for d in now.difference(before) {
                tracing::info!(device = %d, "RDMA device appeared");
            }
            for d in before.difference(&now) {
                tracing::warn!(device = %d, "RDMA device disappeared; its counters are no longer exported");
            }
        } else if !now.is_empty() {
            tracing::info!(devices = ?now, "RDMA devices found");
        }
        self.devices = Some(now);
    }

    /// Says once per device which congestion counters it lacks (Soft-RoCE
    /// has no CNP counters; a netdev may have no pause or PFC counters), so
    /// an empty rate in a dashboard is explained in the log.
    fn log_missing_signals(&mut self, sample: &HostSample) {
        for dev in &sample.devices {
            // Judged at first sight; a counter lost later is reported as vanished.
            if !self.said.insert(format!("checked:{dev}")) {
                continue;
            }
            let has = |name: &str| {
                sample
                    .counters
                    .keys()
                    .any(|k| k.device == *dev && k.source == Source::IbHwCounters && k.name == name)
            };
            let missing: Vec<&str> = SIGNALS.iter().copied().filter(|n| !has(n)).collect();
            if !missing.is_empty() {
                tracing::info!(device = %dev, missing = ?missing, "device does not count these congestion signals");
            }
        }
        for n in &sample.netdevs {
            let has = sample
                .counters
                .keys()
                .any(|k| k.device == n.name && matches!(k.source, Source::EthtoolPause | Source::DcbPfc));
            if !has && self.said.insert(format!("missing:{}:pfc", n.name)) {
                tracing::info!(
                    netdev = %n.name,
                    "no pause or PFC counters (driver without ethtool pause stats or DCB, or not the live /sys)"
                );
            }
        }
    }

    fn log_problems(&mut self, sample: &HostSample) {
        let keys: HashSet<String> = sample.problems.iter().map(|p| format!("problem:{}", p.key)).collect();
        for p in &sample.problems {
            if self.said.insert(format!("problem:{}", p.key)) {
                tracing::warn!(file = %p.key, problem = %p.message, "cannot read; the other counters are still served");
            }
        }
        let fixed: Vec<String> =
            self.said.iter().filter(|k| k.starts_with("problem:") && !keys.contains(*k)).cloned().collect();
        for k in fixed {
            tracing::info!(file = %k.trim_start_matches("problem:"), "readable again");
            self.said.remove(&k);
        }
    }
}

/// CSV lines: `timestamp_ms,host,device,port,source,counter,value,rate`.
#[derive(Debug)]
struct Csv {
    path: PathBuf,
    file: File,
}

impl Csv {
    fn open(path: &Path) -> Result<Self, ExportError> {
        let err = |source| ExportError::Csv { path: path.to_path_buf(), source };
        let mut file = OpenOptions::new().create(true).append(true).open(path).map_err(err)?;
        if file.metadata().map_err(err)?.len() == 0 {
            file.write_all(b"timestamp_ms,host,device,port,source,counter,value,rate_per_s\n")
                .map_err(err)?;
        }
        Ok(Csv { path: path.to_path_buf(), file })
    }

    fn append(&mut self, sample: &HostSample, snap: &Snapshot) -> Result<(), ExportError> {
        let ms = sample.taken.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let mut out = String::new();
        for (k, v) in &snap.counters {
            let port = k.port.map(|p| p.to_string()).unwrap_or_default();
            let rate = snap.rates.get(k).map(|r| format!("{r:.3}")).unwrap_or_default();
            out.push_str(&format!(
                "{ms},{},{},{port},{},{},{v},{rate}\n",
                csv_field(&snap.host),
                csv_field(&k.device),
                k.source.as_str(),
                csv_field(&k.name)
            ));
        }
        self.file
            .write_all(out.as_bytes())
            .map_err(|source| ExportError::Csv { path: self.path.clone(), source })
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
