//! A switch's register poll, beside its agent's loop rather than in it: a
//! plan (new desired state, such as the steer entries of a job just
//! registered) never waits for a poll's reads and resets, which on BMv2 go
//! over Thrift at milliseconds each.
//!
//! Push first: a port's congestion reaches the controller as the switch's
//! threshold digests (and INT reports); the registers are an audit. Every
//! `audit_interval` the poll reads every polled port; every `poll_interval`
//! it reads only the ports in [`Focus`]: those hot (by a digest or the
//! last read), and every port for a while after a gap in the digests'
//! sequence numbers (digests lost). A round is one batched Read (the max
//! depth and congested cells of its ports) and one batched Write that
//! resets the max-depth cells it found non-zero (only as the writing
//! primary, never on a dry run); it reports [`AgentEvent::Registers`]. The
//! ECN-mark counters of every port are read in an audit's Read, at the first
//! audit and then at the first audit `ecn_interval` after the last (for
//! /metrics; they are totals, so a slower read loses no mark), and reported
//! with its registers. While no port is
//! hot and no digest was lost, the poll sleeps until its next audit (a
//! digest that heats a port wakes it), so an idle switch costs one Read
//! per audit, not a wake-up every `poll_interval`. The first audit reads
//! the switch at once, unless this session has just pushed the pipeline
//! ([`FirstAudit`]): its registers then start at zero, and an audit waits
//! an interval (on a fabric being programmed, every switch's first audit
//! would otherwise land while the rest are still being written).
//! A session that gets no digests (a standby, a dry run) reads every port
//! at every `poll_interval` instead; under sharding, the planner's session
//! to a switch it does not own gets them forwarded by the owner
//! ([`crate::agent::AgentConfig::forwarded_focus`]) and audits. It runs as
//! a task of its own on the agent's session, and ends when its
//! [`Poller`] is dropped (with the session) or stopped (for a term change;
//! the agent starts it again with the new term), so it never outlives its
//! session.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metaroce_p4rt::session::{RegisterCell, RegisterRead};
use metaroce_p4rt::{Session, SessionError};
use metaroce_pipeline::{Pipeline, PortRegister, QueueDigest};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, Instrument};

use super::{AgentConfig, AgentEvent};

/// When a poll's first audit reads the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstAudit {
    /// At once: the switch may hold congestion state (a controller that
    /// restarted, a takeover, a standby).
    Now,
    /// One audit interval from now: the session has just pushed the
    /// pipeline, whose registers start at zero, so an audit now reads
    /// nothing. Digests still wake fast rounds meanwhile.
    AfterInterval,
}

/// Why a round of the poll read the registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollReason {
    /// The slow audit of every polled port.
    Audit,
    /// Ports that are hot, at the fast interval.
    Hot,
    /// Every port at the fast interval: the switch's digests were lost.
    Lost,
}

impl PollReason {
    pub fn as_str(self) -> &'static str {
        match self {
            PollReason::Audit => "audit",
            PollReason::Hot => "hot",
            PollReason::Lost => "lost",
        }
    }
}

/// Which ports the poll reads at the fast interval, shared by the agent
/// (which sees the digests) and its poll (which sees the registers).
#[derive(Debug, Default)]
pub struct Focus {
    state: Mutex<FocusState>,
    /// A digest made a port hot or showed digests lost: the poll, asleep
    /// until its next audit while nothing is hot, wakes for a fast round.
    heated: Notify,
}

#[derive(Debug, Default)]
struct FocusState {
    hot: BTreeSet<u16>,
    /// The sequence number of the last threshold digest.
    last_seq: Option<u32>,
    /// Digests were lost: every port is read fast until then.
    lost_until: Option<Instant>,
}

impl Focus {
    /// Takes a digest list in: its ports' states, and whether its sequence
    /// numbers skip (digests lost, or the switch restarted), in which case
    /// every port is read fast for `window`. Returns how many were skipped.
    pub fn on_digests(&self, digests: &[QueueDigest], now: Instant, window: Duration) -> u64 {
        let Ok(mut s) = self.state.lock() else { return 0 };
        let mut lost = 0u64;
        let mut heated = false;
        for d in digests {
            if let Some(last) = s.last_seq {
                let gap = d.seq.wrapping_sub(last).wrapping_sub(1);
                // A sequence that went back is a restart (or a stale list): one gap.
                lost += match gap {
                    0 => 0,
                    g if g >= 1 << 31 => 1,
                    g => u64::from(g),
                };
            }
            s.last_seq = Some(d.seq);
            if d.congested {
                heated |= s.hot.insert(d.port);
            } else {
                s.hot.remove(&d.port);
            }
        }
        if lost > 0 {
            s.lost_until = Some(now + window);
        }
        if heated || lost > 0 {
            self.heated.notify_one();
        }
        lost
    }

    /// What a fast round reads: every port while digests are lost, the hot
    /// ones otherwise (none: no round).
    fn fast(&self, ports: &[u16], now: Instant) -> (PollReason, Vec<u16>) {
        let Ok(mut s) = self.state.lock() else { return (PollReason::Lost, ports.to_vec()) };
        if s.lost_until.is_some_and(|t| now < t) {
            return (PollReason::Lost, ports.to_vec());
        }
        s.lost_until = None;
        (PollReason::Hot, ports.iter().copied().filter(|p| s.hot.contains(p)).collect())
    }

    /// What a read found: a congested port is hot, another is not.
    fn read(&self, found: &[(u16, u32, bool)]) {
        let Ok(mut s) = self.state.lock() else { return };
        for &(p, _, congested) in found {
            if congested {
                s.hot.insert(p);
            } else {
                s.hot.remove(&p);
            }
        }
    }
}

/// The running poll of one session; dropping it stops the poll.
#[derive(Debug)]
pub(super) struct Poller {
    task: JoinHandle<()>,
}

impl Poller {
    /// Starts polling on `session`, in the current span (the switch's).
    /// `writes`: the agent's term lets it write, so the poll resets the
    /// max-depth registers it reads (unless this is a dry run).
    pub(super) fn start(
        cfg: &AgentConfig,
        pipeline: Arc<Pipeline>,
        session: Arc<Session>,
        events: mpsc::Sender<AgentEvent>,
        focus: Arc<Focus>,
        writes: bool,
        first_audit: FirstAudit,
    ) -> Self {
        let poll = Poll {
            switch: cfg.switch,
            ports: cfg.ports.clone(),
            resets: writes && !cfg.dry_run,
            pipeline,
            session,
            events,
            focus,
            audit_reads: Default::default(),
        };
        // Digests reach only a writing primary that configured them (not a
        // standby, not a dry run), and under sharding the planner, to which
        // the switch's owner forwards them: any other polls every port
        // fast, as the fallback for a switch that does not push to it.
        let pushed = (writes || cfg.forwarded_focus.is_some()) && !cfg.dry_run;
        let fast = cfg.poll_interval;
        let audit = if pushed { cfg.audit_interval.max(fast) } else { fast };
        let ecn = cfg.ecn_interval.max(cfg.audit_interval).max(fast);
        let first = match first_audit {
            FirstAudit::Now => Duration::ZERO,
            FirstAudit::AfterInterval => audit,
        };
        Poller { task: tokio::spawn(poll.run(fast, audit, ecn, first).in_current_span()) }
    }

    /// Stops the poll; when this returns, the poll no longer holds the
    /// session (a poll under way is abandoned, as it would be on drop).
    pub(super) async fn stop(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Poll {
    switch: usize,
    ports: Vec<u16>,
    /// Reset the max-depth registers after reading them.
    resets: bool,
    pipeline: Arc<Pipeline>,
    session: Arc<Session>,
    events: mpsc::Sender<AgentEvent>,
    focus: Arc<Focus>,
    /// The audit's Read (every polled port), without and with the ECN
    /// counters, prepared at its first use: every audit asks the same.
    audit_reads: [Mutex<Option<Arc<RegisterRead>>>; 2],
}

impl Poll {
    async fn run(self, fast: Duration, audit: Duration, ecn: Duration, first: Duration) {
        if self.ports.is_empty() {
            return;
        }
        let mut tick = tokio::time::interval(fast);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first audit reads what the switch holds, `first` from now;
        // until then a digest still wakes fast rounds of its hot ports.
        let start = Instant::now() + first;
        let (mut audit_at, mut ecn_at) = (start, start);
        loop {
            tick.tick().await;
            let now = Instant::now();
            if now >= audit_at {
                audit_at = now + audit;
                let with_ecn = now >= ecn_at;
                if with_ecn {
                    ecn_at = now + ecn;
                }
                self.round(PollReason::Audit, &self.ports, with_ecn).await;
                continue;
            }
            let (reason, ports) = self.focus.fast(&self.ports, now);
            if !ports.is_empty() {
                self.round(reason, &ports, false).await;
                continue;
            }
            // Nothing hot: no fast rounds until the audit, or until a
            // digest makes a port hot (the tick then fires at once, being
            // late). An idle switch's poll wakes once per audit, not at
            // every fast tick.
            tokio::select! {
                _ = tokio::time::sleep_until(audit_at) => {}
                _ = self.focus.heated.notified() => {}
            }
        }
    }

    /// One round: reads `ports`' registers in one Read (with every polled
    /// port's ECN-mark counter, when `with_ecn`), resets the maxima in one
    /// Write, reports.
    async fn round(&self, reason: PollReason, ports: &[u16], with_ecn: bool) {
        let info = self.pipeline.info();
        let max_name = self.pipeline.register_name(PortRegister::MaxDepth);
        let prepared = match self.read_for(ports, with_ecn) {
            Ok(r) => r,
            Err(e) => return debug!(error = %e, reason = reason.as_str(), "register poll not asked"),
        };
        let with_ecn = prepared.others() > 0;
        let read = match self.session.read_prepared(&prepared).await {
            // A switch that refuses the counters still has its registers read.
            Err(e) if with_ecn => {
                debug!(error = %e, "register and ECN counter read failed; reading the registers alone");
                match self.read_for(ports, false) {
                    Ok(alone) => self.session.read_prepared(&alone).await,
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        let (values, counters) = match read {
            Ok(v) => v,
            Err(e) => return debug!(error = %e, reason = reason.as_str(), "register poll failed"),
        };
        let first = |i: usize| values.get(i).and_then(|v| v.first()).map(|(_, x)| *x).unwrap_or(0);
        let found: Vec<(u16, u32, bool)> = ports
            .iter()
            .enumerate()
            .map(|(i, &p)| (p, u32::try_from(first(2 * i)).unwrap_or(u32::MAX), first(2 * i + 1) != 0))
            .collect();
        self.focus.read(&found);
        if self.resets {
            let resets: Vec<(RegisterCell, u128)> = found
                .iter()
                .filter(|(_, depth, _)| *depth != 0)
                .map(|&(p, _, _)| (RegisterCell { register: max_name, index: Some(i64::from(p)) }, 0))
                .collect();
            if let Err(e) = self.session.write_registers(info, &resets).await {
                debug!(error = %e, "resetting the max-depth registers failed");
            }
        }
        let received = Instant::now();
        let ecn_marks = with_ecn.then(|| self.ecn_marks(counters));
        let (switch, ports) = (self.switch, found);
        let _ = self.events.send(AgentEvent::Registers { switch, ports, ecn_marks, received, reason }).await;
    }

    /// The Read of `ports`' registers (and, `with_ecn`, every polled port's
    /// ECN-mark counter), resolved and encoded: an audit's (every polled
    /// port) once for the poll's life, a fast round's each time.
    fn read_for(&self, ports: &[u16], with_ecn: bool) -> Result<Arc<RegisterRead>, SessionError> {
        let audit = ports == self.ports.as_slice();
        let slot = &self.audit_reads[usize::from(with_ecn)];
        if audit {
            if let Some(r) = slot.lock().ok().and_then(|held| held.clone()) {
                return Ok(r);
            }
        }
        let (max_name, hot_name) = (
            self.pipeline.register_name(PortRegister::MaxDepth),
            self.pipeline.register_name(PortRegister::Congested),
        );
        let mut cells = Vec::with_capacity(ports.len() * 2);
        for &p in ports {
            cells.push(RegisterCell { register: max_name, index: Some(i64::from(p)) });
            cells.push(RegisterCell { register: hot_name, index: Some(i64::from(p)) });
        }
        let ecn = if with_ecn { self.ecn_reads() } else { Vec::new() };
        let read = Arc::new(self.session.register_read(self.pipeline.info(), &cells, ecn)?);
        if audit {
            if let Ok(mut held) = slot.lock() {
                *held = Some(read.clone());
            }
        }
        Ok(read)
    }

    /// The reads of every polled port's ECN-mark counter (for /metrics).
    fn ecn_reads(&self) -> Vec<metaroce_p4rt::proto::p4::v1::Entity> {
        let cells: Vec<i64> = self.ports.iter().map(|&p| i64::from(p)).collect();
        self.pipeline.counter_cell_reads(metaroce_pipeline::Counter::EcnMarks, &cells).unwrap_or_else(|e| {
            debug!(error = %e, "no ECN counter to read");
            Vec::new()
        })
    }

    /// The ECN-mark counters a round read, per polled port.
    fn ecn_marks(&self, counters: Vec<metaroce_p4rt::proto::p4::v1::CounterEntry>) -> Vec<(u16, u64)> {
        let mut counts = BTreeMap::new();
        for c in counters {
            if let (Some(i), Some(d)) = (c.index, c.data) {
                counts.insert(i.index, u64::try_from(d.packet_count).unwrap_or(0));
            }
        }
        self.ports.iter().map(|&p| (p, counts.get(&i64::from(p)).copied().unwrap_or(0))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(port: u16, seq: u32, congested: bool) -> QueueDigest {
        QueueDigest { switch_id: 1, port, depth: 10, timestamp: 0, seq, congested }
    }

    #[test]
    fn a_port_is_read_fast_while_hot_and_every_port_while_digests_are_lost() {
        let focus = Focus::default();
        let (t0, window) = (Instant::now(), Duration::from_secs(1));
        let ports = [1, 2, 3];
        assert_eq!(focus.fast(&ports, t0), (PollReason::Hot, vec![]), "nothing hot: no fast round");
        assert_eq!(focus.on_digests(&[digest(2, 7, true)], t0, window), 0);
        assert_eq!(focus.fast(&ports, t0), (PollReason::Hot, vec![2]));
        // A read that finds port 2 cool and port 3 congested.
        focus.read(&[(2, 0, false), (3, 5, true)]);
        assert_eq!(focus.fast(&ports, t0), (PollReason::Hot, vec![3]));
        assert_eq!(focus.on_digests(&[digest(3, 8, false)], t0, window), 0, "in sequence");
        assert_eq!(focus.fast(&ports, t0), (PollReason::Hot, vec![]));
        // Seq 9 and 10 never came: every port fast for the window, then back.
        assert_eq!(focus.on_digests(&[digest(1, 11, false)], t0, window), 2);
        assert_eq!(focus.fast(&ports, t0 + window / 2), (PollReason::Lost, vec![1, 2, 3]));
        assert_eq!(focus.fast(&ports, t0 + window), (PollReason::Hot, vec![]));
    }

    #[test]
    fn a_sequence_that_wraps_is_in_order_and_one_that_restarts_is_a_gap() {
        let focus = Focus::default();
        let (t0, window) = (Instant::now(), Duration::from_secs(1));
        assert_eq!(focus.on_digests(&[digest(1, u32::MAX, false), digest(1, 0, false)], t0, window), 0);
        assert_eq!(focus.on_digests(&[digest(1, 5, false), digest(1, 0, false)], t0, window), 5);
    }
}
