//! The controller's side: fetch one host exporter's `/metrics` and turn it
//! into [`HostCongestion`].
//!
//! A plain HTTP/1.0 GET over a tokio `TcpStream` (the exporter answers
//! with a length-delimited body), bounded in size and time so that a stuck
//! or hostile exporter cannot stall the controller.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::congestion::{summarize, HostCongestion};
use crate::error::ScrapeError;
use crate::openmetrics;

/// Limits of one scrape.
#[derive(Debug, Clone, Copy)]
pub struct ScrapeOptions {
    /// Connect, send and read, all together.
    pub timeout: Duration,
    /// Largest response accepted, headers included.
    pub max_bytes: usize,
}

impl Default for ScrapeOptions {
    fn default() -> Self {
        ScrapeOptions { timeout: Duration::from_secs(2), max_bytes: 8 << 20 }
    }
}

/// Scrapes the exporter at `addr` (`host:port`) and summarizes its
/// congestion counters per RDMA device.
pub async fn scrape(addr: &str, opts: &ScrapeOptions) -> Result<HostCongestion, ScrapeError> {
    let text = fetch(addr, opts).await?;
    parse_congestion(addr, &text)
}

/// Scrapes several exporters at once, e.g. every host of the topology
/// with an `exporter` address as `(host name, address)`; one result per
/// target, in the order given, so one dead host does not hide the others.
///
/// From a `metaroce_topo::Topology`:
/// ```text
/// let targets: Vec<(String, String)> =
///     topo.hosts.iter().filter_map(|h| Some((h.name.clone(), h.exporter.clone()?))).collect();
/// for (host, got) in scrape_all(&targets, &ScrapeOptions::default()).await { ... }
/// ```
pub async fn scrape_all(
    targets: &[(String, String)],
    opts: &ScrapeOptions,
) -> Vec<(String, Result<HostCongestion, ScrapeError>)> {
    let mut set = tokio::task::JoinSet::new();
    for (i, (name, addr)) in targets.iter().enumerate() {
        let (addr, opts) = (addr.clone(), *opts);
        let name = name.clone();
        set.spawn(async move { (i, name, scrape(&addr, &opts).await) });
    }
    let mut out: Vec<(usize, String, Result<HostCongestion, ScrapeError>)> =
        Vec::with_capacity(targets.len());
    while let Some(joined) = set.join_next().await {
        // A scrape task only panics on a bug; its host is then missing from the result.
        if let Ok(r) = joined {
            out.push(r);
        }
    }
    out.sort_by_key(|(i, _, _)| *i);
    out.into_iter().map(|(_, name, r)| (name, r)).collect()
}

/// Parses exporter text into [`HostCongestion`]; `addr` only names the
/// source in errors.
pub fn parse_congestion(addr: &str, text: &str) -> Result<HostCongestion, ScrapeError> {
    let lines = openmetrics::parse(text).map_err(|e| ScrapeError::Parse {
        addr: addr.to_string(),
        line: e.line,
        problem: e.problem,
    })?;
    let (host, ports, counters, rates) = openmetrics::decode(&lines);
    Ok(summarize(&host, &ports, &counters, &rates))
}

/// The body of `GET /metrics` from `addr`.
pub async fn fetch(addr: &str, opts: &ScrapeOptions) -> Result<String, ScrapeError> {
    if addr.rsplit_once(':').is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err()) {
        return Err(ScrapeError::Address { addr: addr.to_string() });
    }
    match tokio::time::timeout(opts.timeout, fetch_unbounded_time(addr, opts.max_bytes)).await {
        Ok(r) => r,
        Err(_) => Err(ScrapeError::Timeout { addr: addr.to_string(), after: opts.timeout }),
    }
}

async fn fetch_unbounded_time(addr: &str, max: usize) -> Result<String, ScrapeError> {
    let io = |source| ScrapeError::Io { addr: addr.to_string(), source };
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|source| ScrapeError::Connect { addr: addr.to_string(), source })?;
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    let req = format!(
        "GET /metrics HTTP/1.0\r\nHost: {host}\r\nAccept: application/openmetrics-text, text/plain\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(req.as_bytes()).await.map_err(io)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut chunk).await.map_err(io)?;
        if n == 0 {
            break;
        }
        if buf.len() + n > max {
            return Err(ScrapeError::TooLarge { addr: addr.to_string(), limit: max });
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| ScrapeError::Status {
        addr: addr.to_string(),
        status: text.lines().next().unwrap_or("no response").to_string(),
    })?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(ScrapeError::Status { addr: addr.to_string(), status: status.to_string() });
    }
    Ok(body.to_string())
}
