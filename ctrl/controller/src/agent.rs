//! One task per switch: it owns the P4Runtime session and the switch's
//! installed state. It connects (with backoff), pushes the pipeline,
//! subscribes to digests, reads back what the switch holds, and then keeps
//! the switch at the desired state the core publishes, reconnecting and
//! re-syncing on its own when the switch restarts or drops the stream, so
//! that one switch's trouble never disturbs the others. Its registers are
//! polled beside it ([`poll`]), so a new desired state never waits for a poll.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use metaroce_p4rt::entity::DigestConfig;
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::session::PipelineOutcome;
use metaroce_p4rt::thrift::ThriftConfig;
use metaroce_p4rt::{Event as SessionEvent, Session, SessionConfig, SessionError};
use metaroce_pipeline::{Entry, Key, LargeFlowDigest, PacketInReason, Pipeline, QueueDigest};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::ha::{HaState, Term};
use crate::plan::SwitchPlan;
use crate::reconcile::{self, Change};

mod assigned;
mod poll;
mod term;

/// What a switch should hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Computed state; group ids are assigned against what is installed.
    Plan(SwitchPlan),
    /// Exactly these entries (a rollback to a snapshot).
    Exact(BTreeMap<Key, Entry>),
}

/// A target and, when a threshold digest caused it, when that digest
/// arrived (to measure reaction time to the write acknowledgement).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub target: Target,
    pub caused_at: Option<Cause>,
}

/// The digest behind a target, with the times of the stages a reaction
/// goes through before the switch writes (to see where its time goes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cause {
    /// The agent received the digest that made the port hot.
    pub received: Instant,
    /// The state task applied it.
    pub handled: Instant,
    /// The first target it caused was published to the switch's agent.
    pub published: Instant,
}

/// The desired state of one switch; `None` until the core has computed it.
pub type Desired = Option<Arc<Wanted>>;

/// What a switch task tells the core.
#[derive(Debug, Clone)]
pub enum AgentEvent {
    /// Connected, primary, pipeline in place, installed state read.
    Up {
        switch: usize,
        installed: Arc<BTreeMap<Key, Entry>>,
    },
    Down {
        switch: usize,
        reason: String,
    },
    Primary {
        switch: usize,
        primary: bool,
    },
    Digests {
        switch: usize,
        digests: Vec<QueueDigest>,
        received: Instant,
    },
    /// Flows the switch found large (its large-flow digests, decoded).
    LargeFlows {
        switch: usize,
        flows: Vec<LargeFlowDigest>,
        received: Instant,
    },
    /// Per port: (max depth since the last read, congested).
    Registers {
        switch: usize,
        ports: Vec<(u16, u32, bool)>,
        received: Instant,
    },
    /// The switch's own count of ECN-marked packets per polled port.
    EcnMarks {
        switch: usize,
        ports: Vec<(u16, u64)>,
    },
    /// A Telemetry Report frame received as packet-in.
    Report {
        switch: usize,
        frame: Vec<u8>,
    },
    /// The switch holds its desired state for the first time since its
    /// session (or stream) came up (after the `Synced` of the pass that
    /// got it there, if one had anything to write).
    Programmed {
        switch: usize,
    },
    /// A standby read the switch again and found it changed (by the leader).
    Installed {
        switch: usize,
        installed: Arc<BTreeMap<Key, Entry>>,
    },
    /// A reconcile pass ended.
    Synced {
        switch: usize,
        outcome: SyncOutcome,
        installed: Arc<BTreeMap<Key, Entry>>,
    },
}

/// The result of one reconcile pass.
#[derive(Debug, Clone)]
pub struct SyncOutcome {
    pub inserts: usize,
    pub modifies: usize,
    pub deletes: usize,
    pub batches: usize,
    /// Wall time of all writes of the pass.
    pub write_time: Duration,
    pub error: Option<String>,
    /// The digest that caused the change, if one did.
    pub caused_at: Option<Cause>,
    /// When the pass began (its diff and writes).
    pub started_at: Instant,
    /// When its first Write was sent (the controller's own share of a
    /// reaction ends here; the switch's acknowledgement follows).
    pub sent_at: Option<Instant>,
    /// When the last insert/modify batch was acknowledged: from then on new
    /// flowlets take the new weights (deletes of old groups follow).
    pub moved_at: Option<Instant>,
}

/// How a switch task behaves.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub switch: usize,
    pub name: String,
    pub session: SessionConfig,
    pub thrift: Option<SocketAddr>,
    /// Ports whose registers are polled.
    pub ports: Vec<u16>,
    /// How often the registers are polled, beside the agent's loop
    /// ([`poll`]); a standby reads the switch's entries back every ten.
    pub poll_interval: Duration,
    pub digest: DigestConfig,
    /// Write nothing (dry run): compute and log the changes only.
    pub dry_run: bool,
    pub retry_initial: Duration,
    pub retry_max: Duration,
    /// How long the deletes of a pass (old groups no route points at any
    /// more) wait after its writes: meanwhile the switches' writes that
    /// move traffic go first, and a pass that follows soon takes them along.
    pub cleanup_delay: Duration,
    /// The election ([`crate::ha`]), when there is one: the agent arbitrates
    /// with its term's election id and writes only while it leads.
    pub ha: Option<watch::Receiver<HaState>>,
    /// After a takeover, how long steer entries the switch holds and the
    /// new plan lacks are kept (the flow's large-flow reports, or its job,
    /// reach the new leader meanwhile).
    pub steer_grace: Duration,
}

/// Runs until `shutdown` fires. Never returns an error: failures are
/// reported to the core and retried. Spawn it inside a span naming the
/// switch ([`span`]).
pub async fn run(
    cfg: AgentConfig,
    pipeline: Arc<Pipeline>,
    mut desired: watch::Receiver<Desired>,
    events: mpsc::Sender<AgentEvent>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut backoff = cfg.retry_initial;
    let mut first = true;
    loop {
        if *shutdown.borrow() {
            return;
        }
        // `connected` watches the shutdown itself, so that it can take
        // pending deletes along before it returns.
        let result = connected(&cfg, &pipeline, &mut desired, &events, &mut shutdown, first).await;
        first = false;
        let reason = match result {
            Ok(()) => return, // shutdown
            Err(e) => format!("{e:#}"),
        };
        warn!(error = %reason, retry_in = ?backoff, "switch session failed");
        let _ = events.send(AgentEvent::Down { switch: cfg.switch, reason }).await;
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.changed() => return,
        }
        backoff = (backoff * 2).min(cfg.retry_max);
    }
}

/// The span of a switch's task: every log line of it names the switch.
pub fn span(cfg: &AgentConfig) -> tracing::Span {
    tracing::info_span!("switch", switch = %cfg.name, device_id = cfg.session.device_id)
}

/// Why a connected session ended.
#[derive(Debug, thiserror::Error)]
enum AgentError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("{0}")]
    Pipeline(#[from] metaroce_pipeline::PipelineError),
    #[error("the session's event stream ended")]
    StreamEnded,
    #[error("the session is still held by the register poll")]
    SessionShared,
}

async fn open(
    cfg: &AgentConfig,
    pipeline: &Pipeline,
    term: Term,
) -> Result<(Session, mpsc::UnboundedReceiver<SessionEvent>, &'static str), AgentError> {
    let mut sc = cfg.session.clone();
    sc.election_id = term.election_id;
    let mut session = Session::connect(sc).await?;
    if let Some(addr) = cfg.thrift {
        session = session.with_thrift(ThriftConfig::new(addr));
    }
    let rx = session.subscribe()?;
    if !term.writes {
        // A standby: a backup that reads, until it is elected.
        session.use_p4info(pipeline.info())?;
        return Ok((session, rx, "not pushed (standby)"));
    }
    session.wait_primary().await?;
    let program = if !cfg.dry_run {
        let outcome = session.set_pipeline(pipeline.info(), pipeline.device().as_ref(), None).await?;
        debug!(?outcome, "pipeline");
        session.configure_digest(pipeline.digest_entry(cfg.digest)?).await?;
        session.configure_digest(pipeline.large_flow_digest_entry(cfg.digest)?).await?;
        match outcome {
            PipelineOutcome::Pushed => "pushed",
            PipelineOutcome::AlreadyInstalled => "already running",
        }
    } else {
        session.use_p4info(pipeline.info())?;
        "not pushed (dry run)"
    };
    Ok((session, rx, program))
}

/// Reads back every entry of ours the switch holds; entries it cannot
/// parse are reported and left alone.
async fn read_installed(session: &Session, pipeline: &Pipeline) -> Result<BTreeMap<Key, Entry>, AgentError> {
    let got = pipeline.read_installed(session).await?;
    for err in &got.unreadable {
        warn!(error = %err, "entry on the switch that the controller cannot read; it will be left alone");
    }
    Ok(got.entries)
}

struct Live<'a> {
    cfg: &'a AgentConfig,
    pipeline: &'a Arc<Pipeline>,
    /// Shared with the register poll; its election id changes only while
    /// the poll is stopped ([`Live::on_term`]).
    session: Arc<Session>,
    /// The register poll on this session, once the first pass is done.
    poller: Option<poll::Poller>,
    installed: BTreeMap<Key, Entry>,
    events: &'a mpsc::Sender<AgentEvent>,
    retry_at: Option<Instant>,
    /// Deletes are pending until then.
    cleanup_at: Option<Instant>,
    backoff: Duration,
    /// What became of the pipeline when the session opened.
    program: &'static str,
    /// The switch reached the desired state since the session (or its
    /// stream) came up: the operator has been told so.
    programmed: bool,
    /// The election id held and whether to write ([`crate::ha`]).
    term: Term,
    /// Elected or just started: until then, steer entries the plan lacks stay.
    steer_grace_until: Option<Instant>,
    /// The steer entries the switch held when the grace began and the
    /// plan has not claimed since ([`term`]): only these are kept.
    steer_found: std::collections::BTreeSet<Key>,
    /// The last plan's routes and groups, assigned ([`assigned`]).
    assigned: assigned::Assigned,
}

async fn connected(
    cfg: &AgentConfig,
    pipeline: &Arc<Pipeline>,
    desired: &mut watch::Receiver<Desired>,
    events: &mpsc::Sender<AgentEvent>,
    shutdown: &mut watch::Receiver<bool>,
    first: bool,
) -> Result<(), AgentError> {
    let mut stop = shutdown.clone();
    let mut ha = cfg.ha.clone();
    let term = term::current(cfg, ha.as_mut());
    let opening = async {
        let (session, stream, program) = open(cfg, pipeline, term).await?;
        let installed = term::read_or_empty(read_installed(&session, pipeline).await, term)?;
        Ok::<_, AgentError>((session, stream, program, installed))
    };
    let (session, mut stream, program, installed) = tokio::select! {
        r = opening => r?,
        _ = stop.changed() => return Ok(()),
    };
    debug!(entries = installed.len(), "switch up; installed state read back");
    // The status follows arbitration from its first answer on.
    let role = session.role();
    let primary = term::ours(term, role.primary, role.election_id);
    let _ = events.send(AgentEvent::Primary { switch: cfg.switch, primary }).await;
    let _ = events.send(AgentEvent::Up { switch: cfg.switch, installed: Arc::new(installed.clone()) }).await;
    let mut live = Live {
        cfg,
        pipeline,
        session: Arc::new(session),
        poller: None,
        installed,
        events,
        retry_at: None,
        cleanup_at: None,
        backoff: cfg.retry_initial,
        program,
        programmed: false,
        term,
        // A controller that starts (or restarts) has not yet heard of the
        // flows and jobs whose steer entries the switch holds: they stay
        // for the grace, as after a takeover ([`term`]), so a restart does
        // not undo a working placement before its flows are reported or
        // its jobs posted again.
        steer_grace_until: (first && term.writes).then(|| Instant::now() + cfg.steer_grace),
        steer_found: Default::default(),
        assigned: assigned::Assigned::default(),
    };
    if live.steer_grace_until.is_some() {
        live.steer_found = term::steer_keys(&live.installed);
    }
    if !term.writes {
        info!(entries = live.installed.len(), election_id = %term.election_id, "switch read as a standby: writing nothing until elected");
    }
    let first = desired.borrow_and_update().clone();
    live.sync(&first, true).await;
    live.start_polling();
    let mut refresh = term::refresh_timer(cfg.poll_interval);
    loop {
        let retry = live.retry_at;
        let cleanup = live.cleanup_at.filter(|_| retry.is_none());
        tokio::select! {
            ev = stream.recv() => {
                let Some(ev) = ev else { return Err(AgentError::StreamEnded) };
                live.on_session_event(ev, desired).await?;
            }
            changed = desired.changed() => {
                if changed.is_err() {
                    live.finish(desired).await;
                    return Ok(());
                }
                let d = desired.borrow_and_update().clone();
                live.sync(&d, true).await;
            }
            _ = refresh.tick(), if !live.term.writes => live.refresh_installed().await,
            t = term::changed(ha.as_mut(), live.term) => live.on_term(t, desired).await?,
            _ = term::grace_end(live.steer_grace_until) => {
                live.steer_grace_until = None;
                live.steer_found.clear();
                let d = desired.borrow().clone();
                live.sync(&d, true).await;
            }
            _ = async { match retry { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {
                live.retry_at = None;
                live.assigned.forget();
                match read_installed(&live.session, pipeline).await {
                    Ok(i) => live.installed = i,
                    Err(e) => warn!(error = %e, "re-reading installed state failed"),
                }
                let d = desired.borrow().clone();
                live.sync(&d, true).await;
            }
            _ = async { match cleanup { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {
                live.cleanup_at = None;
                let d = desired.borrow().clone();
                live.sync(&d, true).await;
            }
            _ = shutdown.changed() => {
                live.finish(desired).await;
                return Ok(());
            }
        }
    }
}

impl Live<'_> {
    /// Starts the register poll on this session with the current term.
    fn start_polling(&mut self) {
        let (pipeline, session, events) = (self.pipeline.clone(), self.session.clone(), self.events.clone());
        self.poller = Some(poll::Poller::start(self.cfg, pipeline, session, events, self.term.writes));
    }

    /// The one line per switch an operator sees at the default log level:
    /// the first time the switch holds its desired state.
    async fn announce(&mut self, written: usize) {
        if self.programmed {
            return;
        }
        self.programmed = true;
        let primary = self.session.role().primary;
        let entries = self.installed.len();
        if self.cfg.dry_run {
            info!(entries, would_write = written, primary, "switch read (dry run: nothing written)");
        } else {
            info!(pipeline = self.program, entries, written, primary, "switch programmed");
        }
        let _ = self.events.send(AgentEvent::Programmed { switch: self.cfg.switch }).await;
    }

    /// Before the agent stops: the deferred deletes, so that no unused
    /// groups stay behind.
    async fn finish(&mut self, desired: &watch::Receiver<Desired>) {
        if self.cleanup_at.take().is_some() && self.retry_at.is_none() {
            let d = desired.borrow().clone();
            self.sync(&d, false).await;
        }
    }

    async fn on_session_event(
        &mut self,
        ev: SessionEvent,
        desired: &watch::Receiver<Desired>,
    ) -> Result<(), AgentError> {
        let switch = self.cfg.switch;
        match ev {
            SessionEvent::Digest(list) if self.pipeline.is_queue_digest(&list) => {
                match self.pipeline.decode_digests(&list) {
                    Ok(digests) => {
                        let _ = self
                            .events
                            .send(AgentEvent::Digests { switch, digests, received: Instant::now() })
                            .await;
                    }
                    Err(e) => warn!(error = %e, "malformed digest list dropped"),
                }
            }
            SessionEvent::Digest(list) if self.pipeline.is_large_flow_digest(&list) => {
                let got = self.pipeline.decode_large_flows(&list);
                for e in &got.malformed {
                    warn!(error = %e, "malformed large-flow digest dropped");
                }
                if !got.flows.is_empty() {
                    let received = Instant::now();
                    let _ =
                        self.events.send(AgentEvent::LargeFlows { switch, flows: got.flows, received }).await;
                }
            }
            SessionEvent::PacketIn(p) => match self.pipeline.decode_packet_in(&p) {
                Ok(pi) if pi.reason == PacketInReason::Report => {
                    let _ = self.events.send(AgentEvent::Report { switch, frame: pi.payload }).await;
                }
                Ok(pi) => debug!(reason = ?pi.reason, port = pi.ingress_port, "packet-in ignored"),
                Err(e) => warn!(error = %e, "malformed packet-in dropped"),
            },
            SessionEvent::Role { primary, election_id } => {
                let primary = term::ours(self.term, primary, election_id);
                let _ = self.events.send(AgentEvent::Primary { switch, primary }).await;
            }
            SessionEvent::Disconnected { reason } => {
                warn!(%reason, "stream dropped; the session reconnects");
                let _ = self.events.send(AgentEvent::Down { switch, reason }).await;
            }
            SessionEvent::Reconnected => {
                // The switch may have restarted and lost everything: read
                // back what it holds and bring it to the desired state.
                self.assigned.forget();
                self.installed = read_installed(&self.session, self.pipeline).await?;
                info!(entries = self.installed.len(), "stream back; re-syncing");
                self.programmed = false;
                self.program = "restored if the switch had lost it";
                let _ = self
                    .events
                    .send(AgentEvent::Up { switch, installed: Arc::new(self.installed.clone()) })
                    .await;
                let d = desired.borrow().clone();
                self.sync(&d, true).await;
            }
            SessionEvent::StreamError(e) => {
                warn!(code = e.canonical_code, message = %e.message, "stream error from the switch")
            }
            _ => {}
        }
        Ok(())
    }

    /// One reconcile pass: write the difference in phase order, stop at
    /// the first failed batch and retry later with backoff. With
    /// `defer_deletes`, deletes that follow writes wait for `cleanup_delay`.
    async fn sync(&mut self, desired: &Desired, defer_deletes: bool) {
        let Some(wanted) = desired else { return };
        if !self.term.writes {
            return;
        }
        let started_at = Instant::now();
        let desired = match &wanted.target {
            Target::Plan(p) => match self.assigned.desired(p, &self.installed) {
                Ok(d) => d,
                Err(e) => return warn!(error = %e, "desired state cannot be installed"),
            },
            Target::Exact(m) => {
                self.assigned.forget();
                m.clone()
            }
        };
        let desired = self.keep_steer(desired);
        let mut batches = reconcile::diff(&desired, &self.installed);
        // Deletes wait while traffic-moving writes go (see `cleanup_delay`),
        // unless they are all there is to do.
        let moves = batches.iter().take_while(|b| b.iter().any(|c| !matches!(c, Change::Delete(_)))).count();
        if defer_deletes && moves > 0 && moves < batches.len() && !self.cfg.cleanup_delay.is_zero() {
            batches.truncate(moves);
            self.cleanup_at.get_or_insert(started_at + self.cfg.cleanup_delay);
        } else if moves < batches.len() {
            self.cleanup_at = None;
        }
        if batches.is_empty() {
            self.announce(0).await;
            return;
        }
        let (inserts, modifies, deletes) = reconcile::counts(&batches);
        let started = Instant::now();
        let mut error = None;
        let mut moved_at = None;
        let mut sent_at = None;
        if self.cfg.dry_run {
            for c in batches.iter().flatten() {
                info!(change = ?c, "dry run: would write");
            }
        } else {
            for batch in &batches {
                sent_at.get_or_insert_with(Instant::now);
                match self.write(batch).await {
                    Ok(()) => {
                        reconcile::apply(&mut self.installed, batch);
                        if batch.iter().any(|c| !matches!(c, Change::Delete(_))) {
                            moved_at = Some(Instant::now());
                        }
                    }
                    Err(e) => {
                        error = Some(format!("{e:#}"));
                        break;
                    }
                }
            }
        }
        let write_time = started.elapsed();
        match &error {
            None => {
                self.backoff = self.cfg.retry_initial;
                debug!(inserts, modifies, deletes, ?write_time, "switch in sync");
            }
            Some(e) => {
                warn!(error = %e, retry_in = ?self.backoff, "write failed; will re-read and retry");
                self.retry_at = Some(Instant::now() + self.backoff);
                self.backoff = (self.backoff * 2).min(self.cfg.retry_max);
            }
        }
        let caused_at = wanted.caused_at;
        let outcome = SyncOutcome {
            inserts,
            modifies,
            deletes,
            batches: batches.len(),
            write_time,
            error,
            caused_at,
            started_at,
            sent_at,
            moved_at,
        };
        let ok = outcome.error.is_none();
        let installed = Arc::new(self.installed.clone());
        let _ = self.events.send(AgentEvent::Synced { switch: self.cfg.switch, outcome, installed }).await;
        if ok {
            self.announce(inserts + modifies + deletes).await;
        }
    }

    async fn write(&self, batch: &[Change]) -> Result<(), AgentError> {
        let updates = batch
            .iter()
            .map(|c| {
                let kind = match c {
                    Change::Insert(_) => p4::update::Type::Insert,
                    Change::Modify(_) => p4::update::Type::Modify,
                    Change::Delete(_) => p4::update::Type::Delete,
                };
                self.pipeline.update(kind, c.entry())
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.session.write_batched(updates, 1000).await?;
        Ok(())
    }
}
