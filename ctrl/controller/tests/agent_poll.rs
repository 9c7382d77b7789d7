//! L2: a switch's agent against an in-process switch whose register access
//! is slow, as BMv2's (over Thrift) is: the register poll runs beside the
//! agent's plan path, so a new desired state is written without waiting
//! for a poll, and the poll ends with its agent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use metaroce_controller::agent::{self, AgentConfig, AgentEvent, Desired, Goal, SyncOutcome, Wanted};
use metaroce_controller::ha::{self, HaState, Role, Term};
use metaroce_p4rt::entity::DigestConfig;
use metaroce_p4rt::server::{start_local, Switch, SwitchOptions};
use metaroce_p4rt::SessionConfig;
use metaroce_pipeline::{names, Entry, Key};
use tokio::sync::{mpsc, watch};

fn agent_config(addr: std::net::SocketAddr, poll_interval: Duration) -> AgentConfig {
    let mut session = SessionConfig::new(format!("http://{addr}"), 1);
    session.election_id = 10;
    session.connect_attempts = 0;
    AgentConfig {
        switch: 0,
        name: "leaf1".into(),
        session,
        thrift: None,
        ports: vec![1, 2],
        poll_interval,
        audit_interval: poll_interval,
        ecn_interval: poll_interval,
        digest: DigestConfig::default(),
        dry_run: false,
        retry_initial: Duration::from_millis(100),
        retry_max: Duration::from_secs(1),
        cleanup_delay: Duration::ZERO,
        ha: None,
        steer_grace: Duration::ZERO,
        fabric: "poll-test".into(),
        adopt: false,
        opening: Default::default(),
        plans: None,
        forwarded_focus: None,
    }
}

fn exact(entries: &[Entry]) -> Desired {
    let target = Goal::Exact(entries.iter().map(|e| (e.key(), e.clone())).collect::<BTreeMap<_, _>>());
    Some(Arc::new(Wanted { target, caused_at: None }))
}

fn nhop(id: u16) -> Entry {
    Entry::Nhop { id, port: id, src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2] }
}

/// The agent of one switch, running: its desired state, events and stop.
struct Running {
    desired: watch::Sender<Desired>,
    events: mpsc::Receiver<AgentEvent>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

async fn start(cfg: AgentConfig) -> Running {
    let (desired, desired_rx) = watch::channel(exact(&[]));
    let (ev_tx, events) = mpsc::channel(1024);
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(agent::run(cfg, common::pipeline(), desired_rx, ev_tx, stop_rx));
    let mut r = Running { desired, events, stop, task };
    r.next("Programmed", |e| matches!(e, AgentEvent::Programmed { .. }).then_some(())).await;
    r
}

impl Running {
    /// The first event `f` picks, within 5 s; panics naming `what` if none.
    async fn next<T>(&mut self, what: &str, mut f: impl FnMut(AgentEvent) -> Option<T>) -> T {
        let wait = async {
            loop {
                if let Some(t) = f(self.events.recv().await.expect("the agent stopped")) {
                    return t;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(5), wait)
            .await
            .unwrap_or_else(|_| panic!("no {what} within 5 s"))
    }

    /// Stops the agent and waits until it has returned.
    async fn stop(self) {
        self.stop.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(5), self.task).await.expect("agent stopped").unwrap();
    }
}

/// Sets port 1's max-depth register to `depth`, waits for a poll that
/// reads it and returns the register's value after that poll (its reset,
/// if any, comes before the poll's report). Each call of a test sets a
/// depth of its own: a poll that read the value a previous call left
/// (no reset while a standby) and reset it just before this call set
/// the register again reports that older value, not this one.
async fn depth_after_poll(agent: &mut Running, sw: &Switch, depth: u8) -> Vec<u8> {
    let id = common::pipeline().info().registers.id_of(names::PORT_MAX_DEPTH).unwrap();
    assert!(sw.set_register_cell(id, 1, vec![depth]));
    let read =
        |e| matches!(e, AgentEvent::Registers { ports, .. } if ports[0] == (1, u32::from(depth), false));
    agent.next("a poll that read the depth just set", |e| read(e).then_some(())).await;
    sw.register_cell(id, 1).unwrap()
}

async fn switch(register_latency: Duration) -> (Switch, std::net::SocketAddr, watch::Sender<bool>) {
    let opts = SwitchOptions { device_id: 1, register_latency, ..Default::default() };
    let (mut switches, addrs, stop) = start_local([opts]).await.unwrap();
    (switches.remove(0), addrs[0], stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_is_written_while_a_slow_register_poll_is_under_way() {
    // A register access the switch answers only after 30 s: longer than
    // the session's RPC deadline (10 s), so a poll holds for 10 s per read.
    let (sw, addr, stop_switch) = switch(Duration::from_secs(30)).await;
    let mut agent = start(agent_config(addr, Duration::from_millis(10))).await;
    common::wait_for("the first register read of a poll", 5, || async { sw.register_reads() > 0 }).await;
    agent.desired.send(exact(&[nhop(1)])).unwrap();
    let outcome: SyncOutcome = agent
        .next("write of the new plan", |e| match e {
            AgentEvent::Synced { outcome, .. } => Some(outcome),
            AgentEvent::Registers { .. } => panic!("the poll was answered: it was not the slow one"),
            _ => None,
        })
        .await;
    assert_eq!((outcome.inserts, outcome.error), (1, None));
    let held = common::installed(addr, 1, &common::pipeline()).await;
    assert_eq!(held.get(&Key::Nhop(1)), Some(&nhop(1)));
    // Shutting down does not wait for the poll either.
    agent.stop().await;
    let _ = stop_switch.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_register_poll_reports_and_ends_with_its_agent() {
    let (sw, addr, stop_switch) = switch(Duration::ZERO).await;
    let mut agent = start(agent_config(addr, Duration::from_millis(5))).await;
    let first = agent.next("Registers", |e| match e {
        AgentEvent::Registers { ports, ecn_marks, .. } => Some((ports, ecn_marks)),
        _ => None,
    });
    // The first round is an audit: the ECN-mark counters come with it.
    assert_eq!(first.await, (vec![(1, 0, false), (2, 0, false)], Some(vec![(1, 0), (2, 0)])));
    agent.stop().await;
    // No poll outlives the agent (a read already on its way may land).
    let reads = sw.register_reads();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        sw.register_reads() <= reads + 1,
        "{} register reads after the agent stopped",
        sw.register_reads() - reads
    );
    let _ = stop_switch.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_poll_resets_the_max_depth_only_as_the_writing_primary() {
    let (sw, addr, stop_switch) = switch(Duration::ZERO).await;
    let mut agent = start(agent_config(addr, Duration::from_millis(5))).await;
    assert_eq!(depth_after_poll(&mut agent, &sw, 7).await, vec![0]);
    agent.stop().await;
    // A dry run (on the pipeline the first agent pushed) reads and writes nothing.
    let mut cfg = agent_config(addr, Duration::from_millis(5));
    cfg.dry_run = true;
    let mut agent = start(cfg).await;
    assert_eq!(depth_after_poll(&mut agent, &sw, 8).await, vec![8]);
    assert_eq!(depth_after_poll(&mut agent, &sw, 9).await, vec![9]);
    agent.stop().await;
    let _ = stop_switch.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_change_reaches_the_poll() {
    let (sw, addr, stop_switch) = switch(Duration::ZERO).await;
    let leader = |revision| {
        let mut s = HaState::standby("a");
        s.role = Role::Leader;
        s.term = Term { election_id: ha::leader_election_id(revision), writes: true };
        s
    };
    let (ha_tx, ha_rx) = watch::channel(leader(1));
    let mut cfg = agent_config(addr, Duration::from_millis(5));
    cfg.ha = Some(ha_rx);
    let mut agent = start(cfg).await;
    assert_eq!(depth_after_poll(&mut agent, &sw, 10).await, vec![0]);
    // Demoted: the polls go on, and reset nothing.
    ha_tx.send(HaState::standby("a")).unwrap();
    agent
        .next("stepping down", |e| matches!(e, AgentEvent::Primary { primary: false, .. }).then_some(()))
        .await;
    assert_eq!(depth_after_poll(&mut agent, &sw, 11).await, vec![11]);
    assert_eq!(depth_after_poll(&mut agent, &sw, 12).await, vec![12]);
    // Elected again: the resets resume.
    ha_tx.send(leader(2)).unwrap();
    agent.next("elected", |e| matches!(e, AgentEvent::Primary { primary: true, .. }).then_some(())).await;
    assert_eq!(depth_after_poll(&mut agent, &sw, 13).await, vec![0]);
    agent.stop().await;
    let _ = stop_switch.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_just_pushed_is_audited_an_interval_later_one_already_running_at_once() {
    let (sw, addr, stop_switch) = switch(Duration::ZERO).await;
    let cfg = || {
        let mut c = agent_config(addr, Duration::from_millis(5));
        c.audit_interval = Duration::from_secs(30);
        c
    };
    // A fresh switch: the agent pushes the pipeline, whose registers
    // start at zero. Its poll waits for the audit (or a digest).
    let agent = start(cfg()).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sw.register_reads(), 0, "a just-pushed switch was audited at once");
    agent.stop().await;
    // The switch already runs the program: its registers may hold
    // congestion, so a new agent's poll reads them at once.
    let mut agent = start(cfg()).await;
    let first = agent.next("the first audit", |e| match e {
        AgentEvent::Registers { reason, .. } => Some(reason),
        _ => None,
    });
    assert_eq!(first.await, agent::poll::PollReason::Audit);
    assert!(sw.register_reads() > 0);
    agent.stop().await;
    let _ = stop_switch.send(true);
}
