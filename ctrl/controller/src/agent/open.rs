//! Opening a switch's session: connect, check the switch is ours
//! ([`super::identity`]), push the pipeline and configure its digests, and
//! read back what it holds.

use std::collections::BTreeMap;

use metaroce_p4rt::session::PipelineOutcome;
use metaroce_p4rt::thrift::ThriftConfig;
use metaroce_p4rt::{Event as SessionEvent, Session, SessionError};
use metaroce_pipeline::{Entry, Key, Pipeline};
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tracing::{debug, warn};

use super::{identity, AgentConfig};
use crate::ha::Term;

/// Why a connected session ended.
#[derive(Debug, thiserror::Error)]
pub(super) enum AgentError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("{0}")]
    Pipeline(#[from] metaroce_pipeline::PipelineError),
    #[error("the session's event stream ended")]
    StreamEnded,
    #[error("the session is still held by the register poll")]
    SessionShared,
    #[error(
        "the switch runs a pipeline of another fabric or switch (cookie {installed:#018x}, this one's would be \
         {ours:#018x}): nothing is changed on it; check its p4rt address, or start with --adopt to take it over"
    )]
    Foreign { installed: u64, ours: u64 },
}

/// The opened session, its events, what became of the pipeline, and the
/// agent's turn among the switches being opened ([`super::opening`]).
pub(super) type Opened =
    (Session, mpsc::UnboundedReceiver<SessionEvent>, Program, Option<OwnedSemaphorePermit>);

/// What became of the pipeline when the session opened.
#[derive(Debug, Clone, Copy)]
pub(super) struct Program {
    /// In words, for the log.
    pub said: &'static str,
    /// This session pushed it: the switch's registers start at zero, so
    /// its first audit can wait an audit interval ([`super::poll`]).
    pub pushed: bool,
}

pub(super) async fn open(cfg: &AgentConfig, pipeline: &Pipeline, term: Term) -> Result<Opened, AgentError> {
    let mut sc = cfg.session.clone();
    sc.election_id = term.election_id;
    let mut session = Session::connect(sc).await?;
    // Connected: the heavy part (the pipeline, the read back, the first
    // pass) takes turns; a switch that cannot be reached holds none.
    let turn = cfg.opening.turn().await;
    if let Some(addr) = cfg.thrift {
        session = session.with_thrift(ThriftConfig::new(addr));
    }
    let rx = session.subscribe()?;
    let ours = ours_or_refused(cfg, &session, pipeline).await?;
    if !term.writes {
        // A standby: a backup that reads, until it is elected.
        session.use_p4info(pipeline.info())?;
        return Ok((session, rx, Program { said: "not pushed (standby)", pushed: false }, turn));
    }
    session.wait_primary().await?;
    let program = if !cfg.dry_run {
        let outcome = session.set_pipeline(pipeline.info(), pipeline.device().as_ref(), Some(ours)).await?;
        debug!(?outcome, "pipeline");
        session.configure_digest(pipeline.digest_entry(cfg.digest)?).await?;
        session.configure_digest(pipeline.large_flow_digest_entry(cfg.digest)?).await?;
        if let Some(entry) = pipeline.drain_pair_digest_entry(cfg.digest) {
            session.configure_digest(entry?).await?;
        }
        match outcome {
            PipelineOutcome::Pushed => Program { said: "pushed", pushed: true },
            PipelineOutcome::AlreadyInstalled => Program { said: "already running", pushed: false },
        }
    } else {
        session.use_p4info(pipeline.info())?;
        Program { said: "not pushed (dry run)", pushed: false }
    };
    Ok((session, rx, program, turn))
}

/// The cookie this controller pushes to the switch ([`identity::cookie`]).
pub(super) fn our_cookie(cfg: &AgentConfig, pipeline: &Pipeline) -> u64 {
    identity::cookie(pipeline.program_cookie(), &cfg.fabric, &cfg.name)
}

/// This fabric's cookie for the switch, once the switch has shown it is
/// ours (or fresh, or adopted); [`AgentError::Foreign`] otherwise, before
/// anything is written or read back.
async fn ours_or_refused(
    cfg: &AgentConfig,
    session: &Session,
    pipeline: &Pipeline,
) -> Result<u64, AgentError> {
    let ours = our_cookie(cfg, pipeline);
    let installed = session.installed_cookie().await?;
    match identity::Verdict::of(installed, ours, cfg.adopt) {
        identity::Verdict::Foreign => Err(AgentError::Foreign { installed: installed.unwrap_or(0), ours }),
        identity::Verdict::Adopted => {
            warn!(
                installed = installed.unwrap_or(0),
                ours, "taking over a switch whose pipeline cookie names another fabric or switch (--adopt)"
            );
            Ok(ours)
        }
        _ => Ok(ours),
    }
}

/// Reads back every entry of ours the switch holds; entries it cannot
/// parse are reported and left alone.
pub(super) async fn read_installed(
    session: &Session,
    pipeline: &Pipeline,
) -> Result<BTreeMap<Key, Entry>, AgentError> {
    let got = pipeline.read_installed(session).await?;
    for err in &got.unreadable {
        warn!(error = %err, "entry on the switch that the controller cannot read; it will be left alone");
    }
    Ok(got.entries)
}
