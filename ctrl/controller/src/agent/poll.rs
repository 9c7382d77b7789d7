//! A switch's register poll, beside its agent's loop rather than in it: a
//! plan (new desired state, such as the steer entries of a job just
//! registered) never waits for a poll's reads and resets, which on BMv2 go
//! over Thrift at milliseconds each.
//!
//! Every `poll_interval` the poll reads the per-port registers, resets the
//! max-depth cells it found non-zero (only as the writing primary, never on
//! a dry run) and reports [`AgentEvent::Registers`]; every
//! [`ECN_POLL_EVERY`]th poll also reads the ECN-mark counters. It runs as a
//! task of its own on the agent's session, and ends when its [`Poller`] is
//! dropped (with the session) or stopped (for a term change; the agent
//! starts it again with the new term), so it never outlives its session.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use metaroce_p4rt::Session;
use metaroce_pipeline::{Pipeline, PortRegister};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, Instrument};

use super::{AgentConfig, AgentEvent};

/// The ECN counters are read with every this many register polls (once a
/// second at the default 100 ms): they feed /metrics only, not decisions.
const ECN_POLL_EVERY: u64 = 10;

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
        writes: bool,
    ) -> Self {
        let poll = Poll {
            switch: cfg.switch,
            ports: cfg.ports.clone(),
            resets: writes && !cfg.dry_run,
            pipeline,
            session,
            events,
            polls: 0,
        };
        Poller { task: tokio::spawn(poll.run(cfg.poll_interval).in_current_span()) }
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
    /// Register polls so far: every tenth also reads the ECN counters.
    polls: u64,
}

impl Poll {
    async fn run(mut self, every: Duration) {
        if self.ports.is_empty() {
            return;
        }
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.poll_registers().await;
        }
    }

    /// Reads the per-port registers and resets the maxima.
    async fn poll_registers(&mut self) {
        let info = self.pipeline.info();
        let max =
            self.session.read_register(info, self.pipeline.register_name(PortRegister::MaxDepth), None).await;
        let hot = self
            .session
            .read_register(info, self.pipeline.register_name(PortRegister::Congested), None)
            .await;
        let (max, hot) = match (max, hot) {
            (Ok(m), Ok(h)) => (m, h),
            (Err(e), _) | (_, Err(e)) => return debug!(error = %e, "register poll failed"),
        };
        let cell = |v: &[(i64, u128)], port: u16| {
            v.iter().find(|(i, _)| *i == i64::from(port)).map(|(_, x)| *x).unwrap_or(0)
        };
        let ports: Vec<(u16, u32, bool)> = self
            .ports
            .iter()
            .map(|&p| (p, u32::try_from(cell(&max, p)).unwrap_or(u32::MAX), cell(&hot, p) != 0))
            .collect();
        if self.resets {
            for &(p, depth, _) in &ports {
                if depth == 0 {
                    continue;
                }
                let name = self.pipeline.register_name(PortRegister::MaxDepth);
                if let Err(e) = self.session.write_register(info, name, Some(i64::from(p)), 0).await {
                    debug!(error = %e, port = p, "resetting the max-depth register failed");
                    break;
                }
            }
        }
        let received = Instant::now();
        let _ = self.events.send(AgentEvent::Registers { switch: self.switch, ports, received }).await;
        self.polls += 1;
        if self.polls % ECN_POLL_EVERY == 1 {
            self.poll_ecn_marks().await;
        }
    }

    /// Reads the ECN-mark counter of every polled port (for /metrics).
    async fn poll_ecn_marks(&self) {
        use metaroce_p4rt::proto::p4::v1::entity::Entity as E;
        let read = match self.pipeline.counter_read(metaroce_pipeline::Counter::EcnMarks) {
            Ok(r) => r,
            Err(e) => return debug!(error = %e, "no ECN counter to read"),
        };
        let entities = match self.session.read(vec![read]).await {
            Ok(v) => v,
            Err(e) => return debug!(error = %e, "ECN counter read failed"),
        };
        let mut counts = BTreeMap::new();
        for e in entities {
            if let Some(E::CounterEntry(c)) = e.entity {
                if let (Some(i), Some(d)) = (c.index, c.data) {
                    counts.insert(i.index, u64::try_from(d.packet_count).unwrap_or(0));
                }
            }
        }
        let ports =
            self.ports.iter().map(|&p| (p, counts.get(&i64::from(p)).copied().unwrap_or(0))).collect();
        let _ = self.events.send(AgentEvent::EcnMarks { switch: self.switch, ports }).await;
    }
}
