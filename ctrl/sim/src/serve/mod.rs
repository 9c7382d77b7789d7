//! Serve mode: the simulated fabric in (dilated) real time, each switch a
//! P4Runtime server on 127.0.0.1 at the port its topology YAML gives, so
//! that the real controller binary connects to it unchanged.
//!
//! [`Fabric::bind`] starts the servers. A served switch accepts only the
//! program its twin implements (any other P4Info is refused at push time
//! with every mismatch named). [`Fabric::wait_programmed`] waits for a
//! controller to push the pipeline and routes everywhere; then
//! [`Fabric::run`] plays a scenario's traffic: every switch forwards with
//! its pipeline twin on the state the controller wrote (routes, weighted
//! groups, flowlet timeout, thresholds, ECN, INT), threshold digests and
//! INT reports go to the controller, and group rewrites move new
//! flowlets. Simulated time is paced against the wall clock
//! (`dilation` wall seconds per simulated second); switch timestamps are
//! simulated microseconds from the start of traffic.

mod fabric;
mod forward;

use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use metaroce_pipeline::Pipeline;
use metaroce_topo::{Routing, Topology};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

use crate::report::ModeRun;
use crate::twin::{Twin, TwinError};
use crate::{Progress, Scenario, SimError};

pub use fabric::{check_program, serves, ProgramError, ServedSwitch};
pub use forward::{Counters, Pace, TwinFabric};

/// Why serving failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("switch {switch}: p4rt address \"{addr}\" names no port; write it as host:port")]
    Address { switch: String, addr: String },
    #[error(
        "switch {switch}: cannot listen on {addr}; stop what listens there (a BMv2 of the Mininet testbed?) or change its p4rt port in the topology"
    )]
    Bind {
        switch: String,
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "switches {first} and {second} both have P4Runtime port {port}; serve needs a port per switch (copy the topology with distinct p4rt ports)"
    )]
    SharedPort { first: String, second: String, port: u16 },
    #[error(
        "the scenario fails links ({}) and P4Runtime carries no port status: give serve the controller's API (--controller-api URL --token-file FILE with an operator token) so that it reports them with POST /api/v1/links, or run the scenario with `sim run`",
        link_events(*.count)
    )]
    LinkEvents { count: usize },
    #[error("the program to serve is not what the pipeline twin models: {0}")]
    Program(fabric::ProgramError),
    #[error("switch {switch}: the pipeline twin cannot run")]
    Twin {
        switch: String,
        #[source]
        source: TwinError,
    },
    #[error(
        "no controller programmed {missing} within {waited_s} s; start one against this topology (metaroce controller run TOPO) or wait longer (--wait)"
    )]
    NotProgrammed { missing: String, waited_s: u64 },
    #[error("the scenario's topology is {scenario}, not the served {served}; serve the scenario's topology")]
    TopologyMismatch { scenario: String, served: String },
    #[error(transparent)]
    Sim(#[from] SimError),
    #[error("the run thread failed: {0}")]
    Join(String),
}

/// A topology link of a served run went down or came back (`up`), at
/// `at_ps` simulated; sent when the wall clock reaches that instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkChange {
    pub at_ps: u64,
    /// Index into the topology's links.
    pub link: usize,
    pub up: bool,
}

/// How to serve.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where every switch listens (the YAML's port, this address).
    pub ip: IpAddr,
    /// Wall seconds per simulated second (1: real time).
    pub dilation: f64,
}

/// A served fabric.
#[derive(Debug)]
pub struct Fabric {
    pub switches: Vec<ServedSwitch>,
    pipeline: Arc<Pipeline>,
    /// Set to end a run early (the switches drop everything from then on).
    pub stop: Arc<AtomicBool>,
    /// What the run has done so far.
    pub counters: Arc<Counters>,
}

/// Where a served run is, for progress lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Status {
    pub now_ps: u64,
    pub forwarded: u64,
    pub dropped: u64,
    pub ecn_marks: u64,
    pub digests: u64,
    pub packet_ins: u64,
    pub lag_us: u64,
    /// Drops by the program's reason code (0: errors in the twin).
    pub drop_reasons: [u64; 8],
}

impl Status {
    pub fn of(c: &Counters) -> Status {
        use std::sync::atomic::Ordering::Relaxed;
        Status {
            now_ps: c.now_ps.load(Relaxed),
            forwarded: c.forwarded.load(Relaxed),
            dropped: c.dropped.load(Relaxed),
            ecn_marks: c.ecn_marks.load(Relaxed),
            digests: c.digests.load(Relaxed),
            packet_ins: c.packet_ins.load(Relaxed),
            lag_us: c.lag_us.load(Relaxed),
            drop_reasons: std::array::from_fn(|i| c.drop_reasons[i].load(Relaxed)),
        }
    }
}

impl Fabric {
    /// Checks the program against the twin and starts one P4Runtime server
    /// per switch; they stop when `shutdown` turns true.
    pub async fn bind(
        topo: &Topology,
        pipeline: Arc<Pipeline>,
        opts: &Options,
        shutdown: &watch::Receiver<bool>,
    ) -> Result<Fabric, ServeError> {
        fabric::check_program(pipeline.info()).map_err(ServeError::Program)?;
        let switches = fabric::bind_all(topo, opts.ip, &serves(pipeline.info()), shutdown).await?;
        Ok(Fabric {
            switches,
            pipeline,
            stop: Arc::new(AtomicBool::new(false)),
            counters: Arc::new(Counters::default()),
        })
    }

    /// Switches that do not yet run our program with routes installed.
    pub fn unprogrammed(&self) -> Vec<&str> {
        let lpm = self
            .pipeline
            .info()
            .table(metaroce_pipeline::names::IPV4_LPM)
            .ok()
            .and_then(|t| t.preamble.as_ref().map(|p| p.id));
        self.switches
            .iter()
            .filter(|s| {
                let ours = s.switch.p4info().is_some_and(|i| i.raw() == self.pipeline.info().raw());
                !ours || lpm.and_then(|t| s.switch.table_len(t)).unwrap_or(0) == 0
            })
            .map(|s| s.name.as_str())
            .collect()
    }

    /// Waits until a controller has pushed the program and routes to every
    /// switch and nothing changed for `settle`; `tick` sees how many are
    /// programmed, now and then.
    pub async fn wait_programmed(
        &self,
        limit: Duration,
        settle: Duration,
        tick: &mut dyn FnMut(usize, usize),
    ) -> Result<(), ServeError> {
        let start = Instant::now();
        let mut last: Option<(Vec<u64>, Instant)> = None;
        loop {
            let missing = self.unprogrammed();
            tick(self.switches.len() - missing.len(), self.switches.len());
            if missing.is_empty() {
                let sizes = self.state_sizes();
                match &last {
                    Some((s, since)) if *s == sizes => {
                        if since.elapsed() >= settle {
                            return Ok(());
                        }
                    }
                    _ => last = Some((sizes, Instant::now())),
                }
            } else {
                last = None;
            }
            // Programmed but never quiet counts as not programmed, too.
            if start.elapsed() >= limit {
                let missing = if missing.is_empty() {
                    "(still being written to)".to_owned()
                } else {
                    missing.join(", ")
                };
                return Err(ServeError::NotProgrammed { missing, waited_s: limit.as_secs() });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Entries per switch, to see when a controller has finished writing.
    fn state_sizes(&self) -> Vec<u64> {
        self.switches.iter().map(|s| s.switch.writes()).collect()
    }

    /// Plays `sc` on the served switches until it completes, a limit
    /// ends it, or [`Fabric::stop`] is set. Blocks: call it off the async
    /// runtime (`spawn_blocking`), whose handle the twins need for digest
    /// timers. The scenario's link failures and repairs go to `links`
    /// (P4Runtime has no port status: whoever receives them tells the
    /// controller); a scenario with any needs it.
    pub fn run(
        &self,
        topo: &Topology,
        routing: &Routing,
        sc: &Scenario,
        opts: &Options,
        links: Option<UnboundedSender<LinkChange>>,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<ModeRun, ServeError> {
        if !sc.events.is_empty() && links.is_none() {
            return Err(ServeError::LinkEvents { count: sc.events.len() });
        }
        let mut twins = Vec::with_capacity(self.switches.len());
        for s in &self.switches {
            let t = Twin::new(&self.pipeline, s.switch.clone())
                .map_err(|source| ServeError::Twin { switch: s.name.clone(), source })?;
            twins.push(t);
        }
        // The switches' own pipeline marks ECN; the simulator's RED is off.
        let mut sc = sc.clone();
        sc.net.ecn = None;
        let pace = Pace { start: Instant::now(), dilation: opts.dilation };
        let mut fwd = TwinFabric::new(topo, twins, pace, self.stop.clone(), self.counters.clone());
        if let Some(tx) = links {
            fwd = fwd.report_links(tx);
        }
        Ok(crate::run_with(topo, routing, &sc, "served", Box::new(fwd), progress)?)
    }
}

impl Status {
    /// "no_route 12, ttl_expired 1": the drops by reason, for people.
    pub fn drops_by_reason(&self) -> String {
        let parts: Vec<String> = (0u8..)
            .zip(self.drop_reasons)
            .filter(|&(_, n)| n > 0)
            .map(|(code, n)| {
                // Slot 0 holds errors in the twin, not a program reason.
                let name =
                    if code == 0 { "twin_error" } else { crate::twin::DropReason::from_code(code).name() };
                format!("{name} {n}")
            })
            .collect();
        parts.join(", ")
    }
}

/// "1 link event", "3 link events".
fn link_events(n: usize) -> String {
    format!("{n} link event{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::Status;

    #[test]
    fn drops_are_named_as_the_program_names_them() {
        let s = Status { drop_reasons: [1, 0, 2, 3, 0, 0, 0, 0], ..Status::default() };
        assert_eq!(s.drops_by_reason(), "twin_error 1, no_route 2, ttl_expired 3");
        assert_eq!(Status::default().drops_by_reason(), "");
    }
}
