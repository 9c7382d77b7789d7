//! The daemon: one task per switch ([`crate::agent`]), the status API, an
//! optional UDP report collector, and the state task that owns the fabric
//! state ([`Core`]) and is the only one that changes it. Everything talks
//! to the state task over channels.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use metaroce_p4rt::entity::DigestConfig;
use metaroce_p4rt::SessionConfig;
use metaroce_pipeline::{Entry, Key, Pipeline};
use metaroce_topo::Topology;
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::agent::{AgentConfig, AgentEvent, Desired, Goal, Wanted};
use crate::core::{Core, CoreConfig, Due, Input, Note};
use crate::hosts;
use crate::mode::Mode;
use crate::obs::{self, Command, EventLog, Metrics, Snapshot, Tokens};
use crate::plan::SwitchPlan;
use crate::reaction::Reactions;
use crate::snapshot::SnapshotDoc;
use crate::status::SwitchStatus;
use metaroce_core::plan::DrainSetting;

mod agent_events;
mod jobs;
mod links;
mod publish;
mod tasks;

/// Everything `run` needs.
#[derive(Debug, Clone)]
pub struct Config {
    pub topology: Topology,
    pub pipeline: Arc<Pipeline>,
    pub mode: Mode,
    /// Compute and log changes; write nothing to the switches.
    pub dry_run: bool,
    /// Take over switches whose pipeline cookie names another fabric or
    /// switch (they are refused otherwise: [`crate::agent::identity`]).
    pub adopt: bool,
    /// Status API and /metrics.
    pub listen: Option<SocketAddr>,
    /// `/metrics` alone, without authentication, for scrapers.
    pub metrics_listen: Option<SocketAddr>,
    pub tokens: Option<PathBuf>,
    /// JSON-lines event log.
    pub events: Option<PathBuf>,
    /// Record every controller input as JSON lines (for replay).
    pub record: Option<PathBuf>,
    /// UDP address that receives Telemetry Reports from a collector port.
    pub collector: Option<SocketAddr>,
    /// Register polls of hot ports, and of every port of a switch whose
    /// digests were lost ([`crate::agent::AgentConfig::poll_interval`]).
    pub poll_interval: Duration,
    /// The slow audit of every port's registers (push first: the digests
    /// carry congestion; [`crate::agent::AgentConfig::audit_interval`]).
    pub audit_interval: Duration,
    /// How often the ECN-mark counters are read with an audit
    /// ([`crate::agent::AgentConfig::ecn_interval`]).
    pub ecn_interval: Duration,
    /// How often host exporters (`hosts[].exporter` in the topology) are scraped.
    pub host_scrape_interval: Duration,
    pub tick: Duration,
    pub election_id: u128,
    pub digest: DigestConfig,
    pub core: CoreConfig,
    /// High availability: campaign for leadership in etcd ([`crate::ha`]).
    pub ha: Option<crate::ha::HaConfig>,
    /// With `ha`: split the switches with the other instances through etcd
    /// ([`crate::shard`]); the elected instance plans for all of them.
    pub shard: bool,
    /// The bound on switches opened at once (connect, pipeline push, read
    /// back, first pass), shared by every agent ([`crate::agent::Opening`]).
    pub opening: crate::agent::Opening,
}

impl Config {
    /// The loaded program decides the target's units (`core.settings.target`).
    pub fn new(topology: Topology, pipeline: Arc<Pipeline>) -> Self {
        let mut core = CoreConfig::default();
        core.settings.target = pipeline.target();
        // The drain rule where the program has it: on for NICs that need
        // order; pairing digests at most once a millisecond per slot.
        core.settings.drain = pipeline
            .has_drain()
            .then_some(DrainSetting { enabled: topology.fabric.in_order_nics, pair_interval_ns: 1_000_000 });
        Config {
            topology,
            pipeline,
            mode: Mode::Observe,
            dry_run: false,
            adopt: false,
            listen: None,
            metrics_listen: None,
            tokens: None,
            events: None,
            record: None,
            collector: None,
            poll_interval: Duration::from_millis(100),
            audit_interval: Duration::from_secs(2),
            ecn_interval: Duration::from_secs(10),
            host_scrape_interval: Duration::from_secs(5),
            tick: Duration::from_millis(5),
            election_id: 10,
            // Immediate delivery: BMv2 raises any non-zero timeout to 100 ms.
            digest: DigestConfig { max_timeout_ns: 0, max_list_size: 1, ack_timeout_ns: 1_000_000_000 },
            core,
            ha: None,
            shard: false,
            opening: crate::agent::Opening::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("controller setup")]
    Core(#[from] crate::core::CoreError),
    #[error("cannot open the event log")]
    Events(#[source] obs::ObsError),
    #[error("cannot load the API tokens")]
    Tokens(#[from] obs::TokenError),
    #[error("cannot listen on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the recording {path}")]
    Record {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("high availability")]
    Ha(#[from] crate::ha::HaError),
    #[error("switch {switch}: P4Runtime address {addr:?} is not host:port")]
    Address { switch: String, addr: String },
    #[error("sharding")]
    Shard(#[from] crate::shard::ShardError),
    #[error("the pipeline's steer tables (for job admission)")]
    SteerTables(#[from] crate::admission::AdmissionError),
}

/// `GET /api/v1/topology`'s document, serialized once.
fn topology_doc(t: &Topology) -> obs::Document {
    obs::Document::of(t).unwrap_or_else(|error| {
        warn!(%error, "cannot serialize the topology; GET /api/v1/topology answers null");
        obs::Document::default()
    })
}

/// The session settings of switch `s`.
pub fn session_config(topo: &Topology, s: usize, election_id: u128) -> SessionConfig {
    let sw = &topo.switches[s];
    let mut c = SessionConfig::new(format!("http://{}", sw.p4rt), sw.device_id);
    c.election_id = election_id;
    // One attempt per session: the switch's agent retries (with backoff
    // and jitter), so a switch it cannot reach is shown down with the
    // connect error from the first attempt, not silently retried inside.
    c.connect_attempts = 1;
    c
}

fn agent_configs(cfg: &Config) -> Result<Vec<AgentConfig>, DaemonError> {
    (0..cfg.topology.switches.len()).map(|s| agent_config(cfg, s)).collect()
}

/// The agent settings of switch `s`.
pub fn agent_config(cfg: &Config, s: usize) -> Result<AgentConfig, DaemonError> {
    let topo = &cfg.topology;
    let sw = &topo.switches[s];
    let host: std::net::IpAddr = sw
        .p4rt
        .rsplit_once(':')
        .and_then(|(h, _)| h.trim_matches(['[', ']']).parse().ok())
        .ok_or_else(|| DaemonError::Address { switch: sw.name.clone(), addr: sw.p4rt.clone() })?;
    let mut ports: Vec<u16> = topo.adjacency(s).iter().map(|a| a.port).collect();
    ports.extend(topo.hosts_of(s).iter().map(|&h| topo.hosts[h].port));
    ports.sort_unstable();
    ports.dedup();
    Ok(AgentConfig {
        switch: s,
        name: sw.name.clone(),
        session: session_config(topo, s, cfg.election_id),
        thrift: sw.thrift_port.map(|p| SocketAddr::new(host, p)),
        ports,
        poll_interval: cfg.poll_interval,
        audit_interval: cfg.audit_interval,
        ecn_interval: cfg.ecn_interval,
        digest: cfg.digest,
        dry_run: cfg.dry_run,
        retry_initial: Duration::from_millis(100),
        retry_max: Duration::from_secs(5),
        cleanup_delay: Duration::from_millis(20),
        ha: None,
        steer_grace: Duration::from_nanos(cfg.core.place.flow_idle_ns),
        fabric: topo.name.clone(),
        adopt: cfg.adopt,
        opening: cfg.opening.clone(),
        plans: None,
        forwarded_focus: None,
    })
}

/// Runs the controller until `shutdown` completes.
pub async fn run(
    cfg: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DaemonError> {
    let metrics = Metrics::new();
    metrics.set_mode(cfg.mode);
    metrics.init_switches(cfg.topology.switches.iter().map(|s| s.name.as_str()));
    metrics.init_hosts(cfg.topology.hosts.iter().filter(|h| h.exporter.is_some()).map(|h| h.name.as_str()));
    let events = match &cfg.events {
        Some(p) => EventLog::with_file(4096, p).map_err(DaemonError::Events)?,
        None => EventLog::new(4096),
    };
    let tokens = cfg.tokens.as_deref().map(Tokens::load).transpose()?.map(Arc::new);
    let recorder = match &cfg.record {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|source| DaemonError::Record { path: p.clone(), source })?,
        )),
        None => None,
    };
    let core = Core::new(cfg.topology.clone(), cfg.core.clone(), cfg.mode)?;
    let steer_tables = crate::admission::SteerTables::of(&cfg.pipeline)?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let (snap_tx, snap_rx) = watch::channel(Arc::new(Snapshot::default()));
    let (cmd_tx, cmd_rx) = mpsc::channel::<Command>(16);
    // Every task and channel, spawned in one place (see `tasks.rs`).
    let mut tasks = Vec::new();
    let mut api_addr = None;
    if let Some(addr) = cfg.listen {
        let api = obs::ApiState::new(metrics.clone(), events.clone(), tokens, snap_rx, cmd_tx.clone())
            .with_fabric(Arc::new(cfg.topology.clone()));
        let (task, bound) = tasks::api(addr, api, stop_rx.clone()).await?;
        tasks.push(task);
        api_addr = Some(bound);
    }
    if let Some(addr) = cfg.metrics_listen {
        tasks.push(tasks::metrics_listener(addr, metrics.clone(), stop_rx.clone()).await?);
    }
    let (ha_rx, job_ops, restored_rx) = tasks::ha(&cfg, api_addr, stop_rx.clone(), &mut tasks).await?;
    let (ev_tx, ev_rx) = mpsc::channel::<AgentEvent>(8192);
    let desired_tx = match (cfg.shard, ha_rx.clone()) {
        (true, Some(ha)) => crate::shard::start(&cfg, ha, &ev_tx, &stop_rx, &mut tasks).await?,
        (true, None) if cfg.ha.is_none() => return Err(crate::shard::ShardError::NoElection.into()),
        _ => tasks::agents(&cfg, ha_rx.clone(), &ev_tx, &stop_rx, &mut tasks)?,
    };
    let udp_rx = tasks::collector(cfg.collector, stop_rx.clone(), &mut tasks).await?;
    let host_rx = tasks::host_scraper(&cfg, stop_rx.clone(), &mut tasks);
    drop(ev_tx);
    let ha = crate::ha::Follower::new(ha_rx, &metrics).sharded(cfg.shard);
    let n = cfg.topology.switches.len();
    let state = State {
        core,
        obs: Observed { metrics, events, recorder, reactions: Reactions::new(n), shown: Default::default() },
        fleet: Fleet {
            switches: vec![SwitchStatus::default(); n],
            desired_tx,
            staged: BTreeMap::new(),
            steer_tables,
            loop_announced: false,
            dry_run: cfg.dry_run,
        },
        publish: Publication {
            snap_tx,
            last_publish: None,
            last_refresh: None,
            topology_json: topology_doc(&cfg.topology),
            dirty_status: false,
            metrics_dirty: std::collections::BTreeSet::new(),
            metrics_shown: vec![None; n],
            publishing: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            names: Arc::new(cfg.topology.switches.iter().map(|s| s.name.clone()).collect()),
            recommended: None,
            summary: None,
            status: None,
        },
        ha,
        job_ops,
        hosts: hosts::Hosts::default(),
        topo: Arc::new(cfg.topology.clone()),
        start: Instant::now(),
        decisions: 0,
    };
    state.run(Inputs { ev_rx, udp_rx, cmd_rx, host_rx, restored_rx }, cfg.tick, shutdown).await;
    let _ = stop_tx.send(true);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
    }
    info!("controller stopped");
    Ok(())
}

/// The state task: the control core, and the daemon's parts around it.
struct State {
    core: Core,
    /// What operators see: metrics, the event log, reaction times.
    obs: Observed,
    /// The switches: their sessions' status and desired state.
    fleet: Fleet,
    /// The snapshot the API and the page read, and what it is built from.
    publish: Publication,
    /// The election, when there is one: role, takeovers, API refusals.
    ha: crate::ha::Follower,
    /// The task that keeps jobs in etcd, when there is an election.
    job_ops: Option<mpsc::UnboundedSender<crate::ha::jobs::Op>>,
    hosts: hosts::Hosts,
    topo: Arc<Topology>,
    start: Instant,
    decisions: u64,
}

/// What operators see of the state task.
struct Observed {
    metrics: Metrics,
    events: EventLog,
    /// `--record`: every input, for `controller replay`.
    recorder: Option<std::io::BufWriter<std::fs::File>>,
    reactions: Reactions,
    /// Per port: the queue depth and ECN-mark total the metrics show, so
    /// that a register audit that finds nothing new costs no metrics
    /// update (each builds its labels and searches the family).
    shown: std::collections::HashMap<(usize, u16), PortShown>,
}

/// What one port's metrics show ([`Observed::shown`]).
#[derive(Debug, Default, Clone, Copy)]
struct PortShown {
    depth: Option<u64>,
    ecn_marks: Option<u64>,
}

/// The switches as the state task drives them.
struct Fleet {
    switches: Vec<SwitchStatus>,
    desired_tx: Vec<watch::Sender<Desired>>,
    /// Per switch: its full plan while some of its steer entries wait for
    /// their downstream entries ([`crate::stage`]), with the plan's cause.
    staged: BTreeMap<usize, (SwitchPlan, Option<crate::agent::Cause>)>,
    /// The steer tables' sizes, to admit jobs by ([`crate::admission`]).
    steer_tables: crate::admission::SteerTables,
    /// The operator has been told that every switch is programmed.
    loop_announced: bool,
    dry_run: bool,
}

/// The published snapshot and what it is rebuilt from.
struct Publication {
    snap_tx: watch::Sender<Arc<Snapshot>>,
    last_publish: Option<Instant>,
    /// When the group metrics were last refreshed.
    last_refresh: Option<Instant>,
    /// The topology as JSON, built once.
    topology_json: obs::Document,
    /// A change happened since the last status publication.
    dirty_status: bool,
    /// Switches whose group metrics are refreshed at the next publication.
    metrics_dirty: std::collections::BTreeSet<usize>,
    /// Per switch, the installed state its group metrics were last
    /// refreshed from.
    metrics_shown: Vec<Option<Arc<BTreeMap<Key, Entry>>>>,
    /// A status build is running on a blocking thread.
    publishing: Arc<std::sync::atomic::AtomicBool>,
    names: Arc<Vec<String>>,
    /// The fabric-wide parts of the status, with the versions
    /// ([`Core::versions`]) they were built at: a publication rebuilds
    /// them only when they changed, so that it does not hold up the
    /// state task (a job or a large flow waiting behind it) for nothing.
    recommended: Option<(u64, Arc<crate::plan::Overrides>)>,
    summary: Option<(u64, Arc<metaroce_telemetry::view::ViewSummary>)>,
    /// The status last published and what it was built from
    /// ([`crate::status::StatusKey`]): rebuilt only when that changes.
    status: Option<(crate::status::StatusKey, Arc<serde_json::Value>)>,
}

/// One scrape of every host exporter: host name → counters or error.
type HostScrape = Vec<(String, Result<metaroce_host::HostCongestion, metaroce_host::ScrapeError>)>;

/// The state task's input channels.
struct Inputs {
    ev_rx: mpsc::Receiver<AgentEvent>,
    udp_rx: mpsc::Receiver<Vec<u8>>,
    cmd_rx: mpsc::Receiver<Command>,
    host_rx: mpsc::Receiver<HostScrape>,
    /// Jobs read back from etcd after an election.
    restored_rx: Option<mpsc::Receiver<crate::ha::jobs::Restored>>,
}

impl State {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    async fn run(mut self, inputs: Inputs, tick: Duration, shutdown: impl Future<Output = ()>) {
        let Inputs { mut ev_rx, mut udp_rx, mut cmd_rx, mut host_rx, mut restored_rx } = inputs;
        // The tick is adaptive: every `tick` while something waits for time,
        // else at the next status publication ([`State::next_tick`]).
        let mut last_tick = Instant::now();
        let ticker = tokio::time::sleep_until(last_tick + tick);
        tokio::pin!(ticker);
        tokio::pin!(shutdown);
        self.decide_and_publish(true).await;
        // Events are written to the file once per round of the loop.
        self.obs.events.defer_flush(true);
        // An input whose senders are gone (no collector, no host exporters,
        // no API) answers None at once, every time: it is polled no more,
        // or the loop would spin on it and burn a core doing nothing.
        let (mut udp_open, mut cmd_open, mut host_open) = (true, true, true);
        loop {
            let go_on = tokio::select! {
                ev = ev_rx.recv() => match ev {
                    Some(ev) => {
                        self.on_agent(ev);
                        // Coalesce: take whatever else is queued before deciding once.
                        let mut n = 0;
                        while n < 10_000 {
                            match ev_rx.try_recv() { Ok(ev) => self.on_agent(ev), Err(_) => break }
                            n += 1;
                        }
                        // The core's rule: the placement alone, everything, or nothing.
                        self.decide_due_and_publish(false).await;
                        true
                    }
                    None => false,
                },
                // Reports feed the view, not the heat decisions read: the tick decides.
                frame = udp_rx.recv(), if udp_open => {
                    match frame { Some(f) => self.on_report(None, &f, false), None => udp_open = false }
                    true
                }
                cmd = cmd_rx.recv(), if cmd_open => {
                    match cmd { Some(c) => self.on_command(c).await, None => cmd_open = false }
                    true
                }
                got = host_rx.recv(), if host_open => {
                    match got { Some(got) => self.on_hosts(got), None => host_open = false }
                    true
                }
                st = self.ha.changed() => { self.on_election(st); self.maybe_publish(true); true }
                r = jobs::restored(&mut restored_rx) => { self.on_restored(r).await; true }
                () = &mut ticker => {
                    last_tick = Instant::now();
                    if self.ha.check_takeover(&self.fleet.switches, &self.obs.metrics, &self.obs.events) {
                        self.maybe_publish(true);
                    }
                    self.input(&Input::Tick);
                    if self.core.due(self.now_ns(), true) == Due::None {
                        self.maybe_publish(false);
                    } else {
                        self.decide_with(false, |core, now| core.decide_due(now, true)).await;
                    }
                    true
                }
                _ = &mut shutdown => false,
            };
            self.obs.events.flush();
            if !go_on {
                self.obs.events.defer_flush(false);
                return;
            }
            ticker.as_mut().reset(self.next_tick(last_tick, tick));
        }
    }

    fn name(&self, s: usize) -> String {
        self.core.topology().switches.get(s).map(|x| x.name.clone()).unwrap_or_default()
    }

    fn input(&mut self, input: &Input) {
        let now = self.now_ns();
        self.record(now, input);
        let notes = self.core.observe(now, input);
        if !matches!(input, Input::Crossing(_) | Input::Snapshot(_) | Input::Report(_) | Input::Tick) {
            self.obs.metrics.set_unreachable_pairs(self.core.unreachable().len());
        }
        self.log(notes);
    }

    /// Appends an input to the recording, if one is kept.
    fn record(&mut self, now: u64, input: &Input) {
        if let Some(w) = self.obs.recorder.as_mut() {
            if !matches!(input, Input::Tick) {
                let line = json!({"t_ns": now, "input": input});
                if writeln!(w, "{line}").and_then(|()| w.flush()).is_err() {
                    warn!("cannot write the recording; recording stops");
                    self.obs.recorder = None;
                }
            }
        }
    }

    fn log(&self, notes: Vec<Note>) {
        for n in notes {
            // Policy changes are reroutes only when they are written (act);
            // in observe/advise they are recommendations.
            let applied = self.core.mode().writes() && !self.core.pinned() && self.ha.writes();
            if let Some(r) = n.kind.reroute_label(applied) {
                self.obs.metrics.reroute(r);
            }
            self.obs.events.record(n.kind.event_name(), n.switch.as_deref(), &n.reason, n.details);
        }
    }

    fn on_hosts(&mut self, got: HostScrape) {
        let acting = self.core.mode().writes() && self.core.policy_state().override_count() > 0;
        for note in self.hosts.update(&self.obs.metrics, got, acting) {
            self.obs.events.record(note.kind, None, &note.reason, note.details);
        }
        self.publish.dirty_status = true;
    }

    fn on_report(&mut self, switch: Option<usize>, bytes: &[u8], frame: bool) {
        let decoded = if frame {
            metaroce_telemetry::decode_frame(bytes)
        } else {
            metaroce_telemetry::decode_udp_payload(bytes)
        };
        match decoded {
            Ok(r) => {
                let sink = switch.map(|s| self.name(s)).unwrap_or_else(|| format!("node{}", r.group.node_id));
                self.obs.metrics.int_report_received(&sink);
                let lost_before = self.core.view().counters().reports.lost;
                self.input(&Input::Report(Box::new(r)));
                let lost = self.core.view().counters().reports.lost.saturating_sub(lost_before);
                if lost > 0 {
                    self.obs.metrics.int_reports_lost(&sink, lost);
                }
            }
            Err(e) => warn!(error = %e, "malformed Telemetry Report dropped"),
        }
    }

    async fn on_command(&mut self, cmd: Command) {
        let Some(cmd) = self.ha.gate(cmd) else { return };
        match cmd {
            Command::SetMode { mode, claim, reply } => {
                if !jobs::claimed(claim, "mode") {
                    return;
                }
                let old = self.core.mode();
                self.core.set_mode(mode);
                self.obs.metrics.set_mode(mode);
                self.obs.events.record(
                    "mode",
                    None,
                    &format!("mode {old} → {mode}"),
                    json!({"from": old, "to": mode}),
                );
                let _ = reply.send(Ok(()));
                self.decide_and_publish(true).await;
            }
            Command::SetLink { link, up, force, claim, reply } => {
                if jobs::claimed(claim, "link") && self.on_set_link(link, up, force, reply) {
                    self.decide_and_publish(true).await;
                }
            }
            Command::Rollback { snapshot, claim, reply } => {
                if !jobs::claimed(claim, "rollback") {
                    return;
                }
                let names: Vec<String> =
                    self.core.topology().switches.iter().map(|s| s.name.clone()).collect();
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                match SnapshotDoc::from_value(snapshot, &self.core.topology().name, &refs) {
                    Ok(doc) => {
                        self.core.pin();
                        self.fleet.staged.clear();
                        self.obs.metrics.set_mode(Mode::Observe);
                        for (s, name) in names.iter().enumerate() {
                            if let Some(entries) = doc.entries(name) {
                                let wanted = Wanted { target: Goal::Exact(entries), caused_at: None };
                                self.fleet.desired_tx[s].send_replace(Some(Arc::new(wanted)));
                            }
                        }
                        self.obs.events.record(
                            "rollback",
                            None,
                            "switches restored to a snapshot; mode observe until set again",
                            json!({"taken_at_unix_ms": doc.taken_at_unix_ms}),
                        );
                        let _ = reply.send(Ok(()));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e.into()));
                    }
                }
            }
            Command::RegisterJob { body, received, claim, reply } => {
                self.on_register_job(body, received, claim, reply).await
            }
            Command::RemoveJob { name, received, claim, reply } => {
                self.on_remove_job(name, received, claim, reply).await
            }
        }
    }
}
