//! What failed, and when a switch's trouble began and ended. An outage is
//! one episode: the first failure after the switch was up opens it (one
//! `switch_down` event), the retries that follow only count, and the
//! switch coming back closes it (one `switch_up` event with the count of
//! attempts and how long it was down). Pure: time is an argument.

use std::time::Duration;

use metaroce_p4rt::SessionError;
use tokio::time::Instant;

use super::AgentError;

/// What failed, as the status and the event log name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No connection to the switch (TCP, the HTTP/2 handshake).
    Connect,
    /// Mastership: not primary, the election refused, no answer.
    Arbitration,
    /// Pushing or checking the pipeline, configuring its digests.
    Pipeline,
    /// Reading the switch's entries back.
    Read,
    /// A Write that failed as a whole.
    Write,
    /// The StreamChannel dropped (the session reconnects by itself).
    Stream,
    /// The switch's pipeline cookie names another fabric or switch: it is
    /// refused ([`super::identity`]).
    Identity,
}

impl Failure {
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Connect => "connect",
            Failure::Arbitration => "arbitration",
            Failure::Pipeline => "pipeline",
            Failure::Read => "read",
            Failure::Write => "write",
            Failure::Stream => "stream",
            Failure::Identity => "identity",
        }
    }

    /// The kind of a session's failure.
    pub(super) fn of(e: &AgentError) -> Failure {
        match e {
            AgentError::Session(s) => Failure::of_session(s),
            AgentError::Pipeline(_) => Failure::Pipeline,
            AgentError::StreamEnded | AgentError::SessionShared => Failure::Stream,
            AgentError::Foreign { .. } => Failure::Identity,
        }
    }

    fn of_session(e: &SessionError) -> Failure {
        match e {
            SessionError::Connect { .. } => Failure::Connect,
            SessionError::NotPrimary { .. } | SessionError::Refused { .. } => Failure::Arbitration,
            SessionError::Deadline { rpc, .. } | SessionError::Rpc { rpc, .. } => match *rpc {
                "arbitration" => Failure::Arbitration,
                "Read" => Failure::Read,
                "Write" => Failure::Write,
                // GetForwardingPipelineConfig, SetForwardingPipelineConfig
                _ => Failure::Pipeline,
            },
            SessionError::Write { .. } => Failure::Write,
            SessionError::Closed { .. } => Failure::Stream,
            SessionError::NoP4Info { .. } | SessionError::P4Info(_) => Failure::Pipeline,
            SessionError::Thrift { .. } | SessionError::Prepared { .. } => Failure::Read,
        }
    }
}

/// How an outage ended: the attempts it took and how long it lasted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    pub attempts: u32,
    pub down_for: Duration,
}

/// One switch's outage, if it has one.
#[derive(Debug, Default)]
pub(super) struct Episode {
    since: Option<Instant>,
    attempts: u32,
}

impl Episode {
    /// A failure at `now`: true when it opens an outage (the one to report
    /// as an event); the failures after it only count as attempts.
    pub fn failed(&mut self, now: Instant) -> bool {
        self.attempts = self.attempts.saturating_add(1);
        if self.since.is_some() {
            return false;
        }
        self.since = Some(now);
        true
    }

    /// Failed attempts in the outage so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The switch is up at `now`: the outage it ends, if there was one.
    pub fn up(&mut self, now: Instant) -> Option<Recovered> {
        let since = self.since.take()?;
        let attempts = std::mem::take(&mut self.attempts);
        Some(Recovered { attempts, down_for: now.saturating_duration_since(since) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_one_down_and_one_up_however_many_attempts() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut e = Episode::default();
        assert_eq!(e.up(t0), None, "up without an outage: nothing to report");
        let opened: Vec<bool> = (0..130).map(|i| e.failed(t0 + s * i)).collect();
        assert_eq!(opened.iter().filter(|o| **o).count(), 1);
        assert!(opened[0]);
        assert_eq!(e.attempts(), 130);
        assert_eq!(e.up(t0 + s * 200), Some(Recovered { attempts: 130, down_for: s * 200 }));
        assert_eq!(e.up(t0 + s * 201), None);
        assert!(e.failed(t0 + s * 300), "the next failure opens the next outage");
        assert_eq!(e.up(t0 + s * 301), Some(Recovered { attempts: 1, down_for: s }));
    }

    #[test]
    fn failures_are_named_by_what_failed() {
        let connect =
            SessionError::Connect { device_id: 3, addr: "x".into(), attempts: 5, last: "tcp".into() };
        assert_eq!(Failure::of(&AgentError::Session(connect)), Failure::Connect);
        let write = SessionError::Rpc { device_id: 3, rpc: "Write", status: tonic::Status::unavailable("x") };
        assert_eq!(Failure::of(&AgentError::Session(write)), Failure::Write);
        let arb = SessionError::Deadline { device_id: 3, rpc: "arbitration", after: Duration::ZERO };
        assert_eq!(Failure::of(&AgentError::Session(arb)), Failure::Arbitration);
        let np = SessionError::NotPrimary { device_id: 3, election_id: 1, primary: Some(2) };
        assert_eq!(Failure::of(&AgentError::Session(np)), Failure::Arbitration);
        let push = SessionError::Rpc {
            device_id: 3,
            rpc: "SetForwardingPipelineConfig",
            status: tonic::Status::invalid_argument("x"),
        };
        assert_eq!(Failure::of(&AgentError::Session(push)), Failure::Pipeline);
        assert_eq!(Failure::of(&AgentError::StreamEnded), Failure::Stream);
    }
}
