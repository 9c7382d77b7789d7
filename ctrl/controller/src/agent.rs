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
use metaroce_p4rt::{Backoff, Event as SessionEvent, Jitter, Session, SessionConfig};
use metaroce_pipeline::{Entry, Key, LargeFlowDigest, PacketInReason, Pipeline, QueueDigest};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::ha::{HaState, Term};
use crate::plan::SwitchPlan;

mod assigned;
mod episode;
pub mod identity;
mod open;
mod opening;
mod pass;
pub mod poll;
mod refused;
mod term;

pub use episode::{Failure, Recovered};
pub use opening::Opening;
pub use refused::Refused;

use open::{open, our_cookie, read_installed, AgentError};

/// What a switch should hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Goal {
    /// Computed state; group ids are assigned against what is installed.
    Plan(SwitchPlan),
    /// Exactly these entries (a rollback to a snapshot).
    Exact(BTreeMap<Key, Entry>),
}

/// A target and, when a threshold digest caused it, when that digest
/// arrived (to measure reaction time to the write acknowledgement).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub target: Goal,
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
    /// Connected, primary, pipeline in place, installed state read;
    /// with the outage this ends, if there was one.
    Up {
        switch: usize,
        installed: Arc<BTreeMap<Key, Entry>>,
        recovered: Option<Recovered>,
    },
    /// A failure of the switch's session. `opened`: the first of an
    /// outage (the others are its retries, counted in `attempts`).
    Down {
        switch: usize,
        kind: Failure,
        reason: String,
        attempts: u32,
        opened: bool,
    },
    Primary {
        switch: usize,
        primary: bool,
    },
    /// A pass found the switch holding what a target with a cause asks:
    /// nothing to write, so the cause is done there ([`crate::reaction`]).
    Settled {
        switch: usize,
        cause: Cause,
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
    /// The drain rule's pairing digests, decoded.
    DrainPairs {
        switch: usize,
        reports: Vec<metaroce_pipeline::DrainPairDigest>,
    },
    /// Per port: (max depth since the last read, congested); and why the
    /// poll read them ([`poll`]). An audit's read also carries the
    /// switch's own count of ECN-marked packets per polled port.
    Registers {
        switch: usize,
        ports: Vec<(u16, u32, bool)>,
        ecn_marks: Option<Vec<(u16, u64)>>,
        received: Instant,
        reason: poll::PollReason,
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
    /// A failure of the pass as a whole (no connection, not primary, a
    /// stale view of the switch): it is re-read and the pass retried.
    pub error: Option<String>,
    /// Entries the switch refused in this pass (a full table): held back
    /// and tried again later; the rest of the pass went on.
    pub refused: Vec<Refused>,
    /// Refused changes held back after the pass, and a summary of them.
    pub held_back: usize,
    pub held_summary: Option<serde_json::Value>,
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
    /// How often the registers of hot ports (or of every port, while the
    /// switch's digests are lost) are polled, beside the agent's loop
    /// ([`poll`]); a standby reads the switch's entries back every ten
    /// (under sharding, every ten audits and after each new desired state).
    pub poll_interval: Duration,
    /// How often every port's registers are read as an audit of what the
    /// digests say; also how long every port is polled fast after a gap
    /// in the digests.
    pub audit_interval: Duration,
    /// How often the ports' ECN-mark counters (for /metrics) ride in an
    /// audit's Read: at the first audit, then at the first audit this long
    /// after the last (so never more often than audits).
    pub ecn_interval: Duration,
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
    /// The fabric's name: with the switch's, it is in the pipeline cookie
    /// ([`identity`]), and a switch whose cookie names another is refused.
    pub fabric: String,
    /// Take over a switch whose cookie names another fabric or switch
    /// (the pipeline is pushed again, which clears its tables).
    pub adopt: bool,
    /// The bound on switches being opened at once, shared by the agents.
    pub opening: Opening,
    /// Under sharding ([`crate::shard`]), this instance's own election:
    /// while the instance does not plan (lead), a switch it does not own
    /// is held as a backup session that reads nothing (no register poll,
    /// no read back of its entries); only its owner and the planner read
    /// it. `None` (no sharding): a standby reads, to take over warm.
    pub plans: Option<watch::Receiver<HaState>>,
    /// Under sharding, the ports the poll reads fast, which the digests
    /// the switch's owner forwards to the planner update as well as this
    /// agent's own: the planner reads a switch it does not own as its
    /// owner does (an audit, and fast only what is hot or lost), not every
    /// port at every `poll_interval`. `None`: the agent's own.
    pub forwarded_focus: Option<Arc<poll::Focus>>,
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
    let mut backoff = Backoff::new(cfg.retry_initial, cfg.retry_max);
    let mut jitter = Jitter::new(Jitter::seed_for(cfg.session.device_id));
    let mut episode = episode::Episode::default();
    let mut first = true;
    loop {
        if *shutdown.borrow() {
            return;
        }
        // `connected` watches the shutdown itself, so that it can take
        // pending deletes along before it returns.
        let began = Instant::now();
        let result =
            connected(&cfg, &pipeline, &mut desired, &events, &mut shutdown, first, &mut episode).await;
        first = false;
        let e = match result {
            Ok(()) => return, // shutdown
            Err(e) => e,
        };
        // A session that ran for a while was healthy: the next attempt
        // comes soon. One that failed at once keeps backing off.
        backoff.ended_after(began.elapsed());
        let delay = backoff.delay(jitter.unit());
        let kind = Failure::of(&e);
        let reason = format!("{}: {e}", kind.as_str());
        let opened = episode.failed(Instant::now());
        let attempts = episode.attempts();
        if opened {
            warn!(error = %reason, retry_in = ?delay, "switch session failed");
        } else {
            debug!(error = %reason, attempts, retry_in = ?delay, "switch session failed again");
        }
        let _ = events.send(AgentEvent::Down { switch: cfg.switch, kind, reason, attempts, opened }).await;
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// The span of a switch's task: every log line of it names the switch.
pub fn span(cfg: &AgentConfig) -> tracing::Span {
    tracing::info_span!("switch", switch = %cfg.name, device_id = cfg.session.device_id)
}

struct Live<'a> {
    cfg: &'a AgentConfig,
    pipeline: &'a Arc<Pipeline>,
    /// Shared with the register poll; its election id changes only while
    /// the poll is stopped ([`Live::on_term`]).
    session: Arc<Session>,
    /// The register poll on this session, once the first pass is done.
    poller: Option<poll::Poller>,
    /// The ports the poll reads fast, which the digests update.
    focus: Arc<poll::Focus>,
    /// Shared with the state task's copy (the events carry it): copied
    /// only when a pass changes it while the state task still holds it.
    installed: Arc<BTreeMap<Key, Entry>>,
    events: &'a mpsc::Sender<AgentEvent>,
    retry_at: Option<Instant>,
    /// Deletes are pending until then.
    cleanup_at: Option<Instant>,
    backoff: Duration,
    /// What became of the pipeline when the session opened (or was
    /// last elected on).
    program: &'static str,
    /// The pipeline was pushed and no poll has started since: the first
    /// audit waits an audit interval ([`Live::start_polling`]).
    fresh_registers: bool,
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
    /// Changes the switch refused, held back ([`refused`]).
    refusals: refused::Refusals,
    /// The switch's outage, if it is in one ([`episode`]).
    episode: &'a mut episode::Episode,
}

async fn connected(
    cfg: &AgentConfig,
    pipeline: &Arc<Pipeline>,
    desired: &mut watch::Receiver<Desired>,
    events: &mpsc::Sender<AgentEvent>,
    shutdown: &mut watch::Receiver<bool>,
    first: bool,
    episode: &mut episode::Episode,
) -> Result<(), AgentError> {
    let mut stop = shutdown.clone();
    let mut ha = cfg.ha.clone();
    let term = term::current(cfg, ha.as_mut());
    let opening = async {
        // The turn is held until the first pass is written ([`opening`]).
        let (session, stream, program, turn) = open(cfg, pipeline, term).await?;
        let installed = Arc::new(term::read_or_empty(read_installed(&session, pipeline).await, term)?);
        Ok::<_, AgentError>((session, stream, program, installed, turn))
    };
    let (session, mut stream, program, installed, turn) = tokio::select! {
        r = opening => r?,
        _ = stop.changed() => return Ok(()),
    };
    debug!(entries = installed.len(), "switch up; installed state read back");
    // The status follows arbitration from its first answer on.
    let role = session.role();
    let primary = term::ours(term, role.primary, role.election_id);
    let _ = events.send(AgentEvent::Primary { switch: cfg.switch, primary }).await;
    let recovered = episode.up(Instant::now());
    if let Some(r) = recovered {
        info!(attempts = r.attempts, down_for = ?r.down_for, "switch back");
    }
    let _ = events.send(AgentEvent::Up { switch: cfg.switch, installed: installed.clone(), recovered }).await;
    let mut live = Live {
        cfg,
        pipeline,
        session: Arc::new(session),
        poller: None,
        focus: cfg.forwarded_focus.clone().unwrap_or_default(),
        installed,
        events,
        retry_at: None,
        cleanup_at: None,
        backoff: cfg.retry_initial,
        program: program.said,
        fresh_registers: program.pushed,
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
        refusals: refused::Refusals::new(cfg.retry_initial, cfg.retry_max.saturating_mul(6)),
        episode,
    };
    if live.steer_grace_until.is_some() {
        live.steer_found = term::steer_keys(&live.installed);
    }
    if !term.writes {
        info!(entries = live.installed.len(), election_id = %term.election_id, "switch read as a standby: writing nothing until elected");
    }
    let first = desired.borrow_and_update().clone();
    live.sync(&first, true).await;
    drop(turn);
    live.start_polling();
    live.run(&mut stream, desired, shutdown, ha.as_mut()).await
}

/// A timer that fires at `t`, or never.
async fn fire_at(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

impl Live<'_> {
    /// The connected switch's loop: session events, desired-state changes,
    /// the term, the steer grace and the retry, clean-up and refusal
    /// timers, until the session ends (an error) or the agent stops.
    async fn run(
        &mut self,
        stream: &mut mpsc::UnboundedReceiver<SessionEvent>,
        desired: &mut watch::Receiver<Desired>,
        shutdown: &mut watch::Receiver<bool>,
        mut ha: Option<&mut watch::Receiver<HaState>>,
    ) -> Result<(), AgentError> {
        let mut refresh = term::refresh_timer(self.cfg);
        let mut plans = self.cfg.plans.clone();
        loop {
            let retry = self.retry_at;
            let cleanup = self.cleanup_at.filter(|_| retry.is_none());
            let refused = self.refusals.next_retry().filter(|_| retry.is_none());
            tokio::select! {
                ev = stream.recv() => {
                    let Some(ev) = ev else { return Err(AgentError::StreamEnded) };
                    self.on_session_event(ev, desired).await?;
                }
                changed = desired.changed() => {
                    if changed.is_err() {
                        self.finish(desired).await;
                        return Ok(());
                    }
                    let d = desired.borrow_and_update().clone();
                    self.sync(&d, true).await;
                    if !self.term.writes && self.observes() {
                        term::refresh_soon(self.cfg, &mut refresh);
                    }
                }
                _ = refresh.tick(), if !self.term.writes && self.observes() => self.refresh_installed().await,
                _ = term::plans_changed(plans.as_mut()) => self.on_plans().await,
                t = term::changed(ha.as_deref_mut(), self.term) => self.on_term(t, desired).await?,
                _ = term::grace_end(self.steer_grace_until) => {
                    self.steer_grace_until = None;
                    self.steer_found.clear();
                    self.resync(desired).await;
                }
                _ = fire_at(retry) => self.retry(desired).await,
                _ = fire_at(cleanup) => {
                    self.cleanup_at = None;
                    self.resync(desired).await;
                }
                // Refused changes are due for another try.
                _ = fire_at(refused) => self.resync(desired).await,
                _ = shutdown.changed() => {
                    self.finish(desired).await;
                    return Ok(());
                }
            }
        }
    }

    /// Syncs the switch to the desired state as it is now.
    async fn resync(&mut self, desired: &watch::Receiver<Desired>) {
        let d = desired.borrow().clone();
        self.sync(&d, true).await;
    }

    /// The retry timer fired: reads what the switch holds again, then syncs.
    async fn retry(&mut self, desired: &watch::Receiver<Desired>) {
        self.retry_at = None;
        self.assigned.forget();
        match read_installed(&self.session, self.pipeline).await {
            Ok(i) => self.installed = Arc::new(i),
            Err(e) => warn!(error = %e, "re-reading installed state failed"),
        }
        self.resync(desired).await;
    }
}

impl Live<'_> {
    /// Starts the register poll on this session with the current term,
    /// unless the switch is a backup this instance need not read
    /// ([`AgentConfig::plans`]).
    fn start_polling(&mut self) {
        if !self.observes() {
            self.poller = None;
            return;
        }
        let (pipeline, session, events) = (self.pipeline.clone(), self.session.clone(), self.events.clone());
        let focus = self.focus.clone();
        // A pipeline just pushed holds zeroed registers: an audit now
        // would read nothing, and on a fabric being programmed every
        // switch's would land while the rest are still being written.
        let first_audit = std::mem::take(&mut self.fresh_registers);
        let first_audit = if first_audit { poll::FirstAudit::AfterInterval } else { poll::FirstAudit::Now };
        self.poller = Some(poll::Poller::start(
            self.cfg,
            pipeline,
            session,
            events,
            focus,
            self.term.writes,
            first_audit,
        ));
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
                        self.focus.on_digests(&digests, Instant::now(), self.cfg.audit_interval);
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
            SessionEvent::Digest(list) if self.pipeline.is_drain_pair_digest(&list) => {
                let (reports, malformed) = self.pipeline.decode_drain_pairs(&list);
                for e in &malformed {
                    warn!(error = %e, "malformed pairing digest dropped");
                }
                if !reports.is_empty() {
                    let _ = self.events.send(AgentEvent::DrainPairs { switch, reports }).await;
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
                let opened = self.episode.failed(Instant::now());
                let (kind, attempts) = (Failure::Stream, self.episode.attempts());
                let reason = format!("{}: {reason}", kind.as_str());
                let _ = self.events.send(AgentEvent::Down { switch, kind, reason, attempts, opened }).await;
            }
            SessionEvent::Reconnected => {
                // The switch may have restarted and lost everything: read
                // back what it holds and bring it to the desired state.
                self.assigned.forget();
                self.refusals.clear();
                self.installed = Arc::new(read_installed(&self.session, self.pipeline).await?);
                info!(entries = self.installed.len(), "stream back; re-syncing");
                self.programmed = false;
                self.program = "restored if the switch had lost it";
                let recovered = self.episode.up(Instant::now());
                let installed = self.installed.clone();
                let _ = self.events.send(AgentEvent::Up { switch, installed, recovered }).await;
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
}
