//! The exporter daemon: one task polls on an interval and publishes the
//! rendered text; the HTTP server hands out the latest copy. The poll
//! runs on the blocking pool because sysfs and netlink reads block.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::collector::Collector;
use crate::error::ExportError;
use crate::openmetrics::{self, CONTENT_TYPE};

/// How the exporter runs.
#[derive(Debug, Clone)]
pub struct ExportConfig {
    pub listen: SocketAddr,
    pub interval: Duration,
}

/// Binds `cfg.listen` and serves until `shutdown` completes.
pub async fn run(
    cfg: ExportConfig,
    collector: Collector,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ExportError> {
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| ExportError::Bind { addr: cfg.listen, source })?;
    serve(listener, cfg.interval, collector, shutdown).await
}

/// Serves `/metrics` on an already bound listener (tests bind port 0).
pub async fn serve(
    listener: TcpListener,
    interval: Duration,
    collector: Collector,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ExportError> {
    let (collector, first) = poll_blocking(collector).await;
    let (tx, rx) = watch::channel(first);
    let (stop_tx, stop_rx) = watch::channel(false);
    let poller = tokio::spawn(poll_loop(collector, interval, tx, stop_rx));
    let addr = listener.local_addr().ok();
    tracing::info!(addr = ?addr, interval_ms = interval.as_millis(), "serving OpenMetrics on /metrics");
    let app = Router::new().route("/metrics", get(metrics)).route("/", get(index)).with_state(rx);
    let served = axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
    let _ = stop_tx.send(true);
    let _ = poller.await;
    served.map_err(ExportError::Serve)
}

async fn poll_blocking(mut c: Collector) -> (Collector, String) {
    match tokio::task::spawn_blocking(move || {
        let snap = c.poll();
        let text = openmetrics::render(&snap);
        (c, text)
    })
    .await
    {
        Ok(out) => out,
        // Only a panic inside the poll gets here; there is no collector to go on with.
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

async fn poll_loop(
    mut collector: Collector,
    interval: Duration,
    tx: watch::Sender<String>,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is immediate; the first poll is done
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let (c, text) = poll_blocking(collector).await;
        collector = c;
        tx.send_replace(text);
    }
}

async fn metrics(State(rx): State<watch::Receiver<String>>) -> impl IntoResponse {
    let body = rx.borrow().clone();
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], body)
}

async fn index() -> &'static str {
    "metaroce host exporter: RoCE NIC counters at /metrics (OpenMetrics)\n"
}
