//! Every task of the daemon and the channels between them, spawned from
//! [`super::run`] through this module: one place to read the wiring.
//!
//! ```text
//!  status API ──cmd_tx──┐            ┌──desired_tx[s] (watch)──► agent s ──P4Runtime──► switch s
//!  (HTTP, tokens)       │            │                             │
//!     ▲ snap_rx (watch) ▼            │    ev_tx (mpsc, 8192) ◄──────┘ digests, snapshots,
//!     └──────────── state task ◄─────┴─────────────────────────────── installed state, up/down
//!                   (owns Core)  ◄── udp_rx ◄── report collector (UDP Telemetry Reports)
//!                       │ ▲      ◄── host_rx ◄── host exporter scraper (HTTP)
//!                       │ └──────── restored_rx ◄── HA job store (etcd) ◄── job_ops
//!                       └── ha state (watch) ◄── HA election (etcd leases)
//!  /metrics listener (no auth) reads Metrics, shared with the state task
//! ```
//!
//! Every task stops when `stop` turns true; the state task alone changes
//! the fabric state.

use std::net::SocketAddr;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{info, warn, Instrument};

use super::{agent_configs, Config, DaemonError, HostScrape};
use crate::agent::{self, AgentEvent, Desired};
use crate::obs::{self, Metrics};

type Tasks = Vec<JoinHandle<()>>;

/// A TCP listener on `addr`.
async fn listen(addr: SocketAddr) -> Result<tokio::net::TcpListener, DaemonError> {
    tokio::net::TcpListener::bind(addr).await.map_err(|source| DaemonError::Listen { addr, source })
}

/// Completes when `stop` turns true.
async fn until(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// The status API on `addr` until `stop`.
/// Returns the address it listens on (the port chosen, for port 0).
pub(super) async fn api(
    addr: SocketAddr,
    state: obs::ApiState,
    stop: watch::Receiver<bool>,
) -> Result<(JoinHandle<()>, SocketAddr), DaemonError> {
    let listener = listen(addr).await?;
    let bound = listener.local_addr().unwrap_or(addr);
    let task = tokio::spawn(async move {
        if let Err(e) = obs::serve(listener, state, until(stop)).await {
            warn!(error = %e, "status API stopped");
        }
    });
    Ok((task, bound))
}

/// Serves `/metrics` alone, without authentication, on `addr` until `stop`.
pub(super) async fn metrics_listener(
    addr: SocketAddr,
    metrics: Metrics,
    stop: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, DaemonError> {
    let listener = listen(addr).await?;
    Ok(tokio::spawn(async move {
        if let Err(e) = obs::serve_metrics(listener, metrics, until(stop)).await {
            warn!(error = %e, "metrics listener stopped");
        }
    }))
}

/// What the HA tasks give the others: the election's state, the job
/// store's operations and its restored jobs (all `None` without HA).
pub(super) type HaLinks = (
    Option<watch::Receiver<crate::ha::HaState>>,
    Option<mpsc::UnboundedSender<crate::ha::jobs::Op>>,
    Option<mpsc::Receiver<crate::ha::jobs::Restored>>,
);

/// The election and the job store, when the configuration asks for HA.
/// It campaigns with the API's URL: the configured one, else the address
/// the API listens on, when that is one a client can reach.
pub(super) async fn ha(
    cfg: &Config,
    api: Option<SocketAddr>,
    stop: watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> Result<HaLinks, DaemonError> {
    let Some(h) = &cfg.ha else { return Ok((None, None, None)) };
    let mut h = h.clone();
    h.url = h.url.or_else(|| crate::ha::listen_url(api));
    let Some(started) = crate::ha::start(&h, &cfg.topology.name, stop).await? else {
        return Ok((None, None, None));
    };
    tasks.push(started.task);
    let (ops_tx, ops_rx) = mpsc::unbounded_channel();
    let (restored_tx, restored_rx) = mpsc::channel(4);
    tasks.push(tokio::spawn(crate::ha::jobs::run(started.jobs, ops_rx, restored_tx)));
    Ok((Some(started.state), Some(ops_tx), Some(restored_rx)))
}

/// One agent per switch; returns the senders of their desired state.
pub(super) fn agents(
    cfg: &Config,
    ha: Option<watch::Receiver<crate::ha::HaState>>,
    events: &mpsc::Sender<AgentEvent>,
    stop: &watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> Result<Vec<watch::Sender<Desired>>, DaemonError> {
    let mut desired_tx = Vec::new();
    for mut a in agent_configs(cfg)? {
        a.ha = ha.clone();
        let (tx, rx) = watch::channel::<Desired>(None);
        desired_tx.push(tx);
        let span = agent::span(&a);
        let fut = agent::run(a, cfg.pipeline.clone(), rx, events.clone(), stop.clone());
        tasks.push(tokio::spawn(fut.instrument(span)));
    }
    Ok(desired_tx)
}

/// The UDP Telemetry Report collector, when configured; its frames go to
/// the state task (dropped, with a warning, when it falls behind).
pub(super) async fn collector(
    addr: Option<SocketAddr>,
    mut stop: watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> Result<mpsc::Receiver<Vec<u8>>, DaemonError> {
    let (udp_tx, udp_rx) = mpsc::channel::<Vec<u8>>(4096);
    let Some(addr) = addr else { return Ok(udp_rx) };
    let sock =
        tokio::net::UdpSocket::bind(addr).await.map_err(|source| DaemonError::Listen { addr, source })?;
    info!(%addr, "Telemetry Report collector listening");
    tasks.push(tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        loop {
            tokio::select! {
                r = sock.recv_from(&mut buf) => match r {
                    Ok((n, _)) => { if udp_tx.try_send(buf[..n].to_vec()).is_err() { warn!("report collector queue full; report dropped") } }
                    Err(e) => warn!(error = %e, "collector socket"),
                },
                _ = stop.changed() => return,
            }
        }
    }));
    Ok(udp_rx)
}

/// The host exporters' scraper, when the topology names exporters.
pub(super) fn host_scraper(
    cfg: &Config,
    mut stop: watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> mpsc::Receiver<HostScrape> {
    let (host_tx, host_rx) = mpsc::channel::<HostScrape>(4);
    let targets: Vec<(String, String)> =
        cfg.topology.hosts.iter().filter_map(|h| Some((h.name.clone(), h.exporter.clone()?))).collect();
    if targets.is_empty() {
        return host_rx;
    }
    info!(hosts = targets.len(), every = ?cfg.host_scrape_interval, "scraping host exporters");
    let every = cfg.host_scrape_interval;
    tasks.push(tokio::spawn(async move {
        let opts = metaroce_host::ScrapeOptions::default();
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let got = metaroce_host::scrape_all(&targets, &opts).await;
                    if host_tx.send(got).await.is_err() { return }
                }
                _ = stop.changed() => return,
            }
        }
    }));
    host_rx
}
