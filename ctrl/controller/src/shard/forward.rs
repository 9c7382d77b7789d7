//! Pushed events to the planner. A switch sends its digests and Telemetry
//! Reports to its primary, its owner; an owner that does not plan puts
//! them under `metaroce/<fabric>/forward/<switch>` (one key per switch,
//! overwritten: a watch sees every put), and the planner watches that
//! prefix and hands them to its state task as if its own agent had
//! received them. etcd here is a small message bus: one put per digest
//! list, a few milliseconds; at a fabric's full digest rate a direct
//! stream to the planner would be the next step.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, EventType, WatchOptions};
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};

use super::wire::Pushed;
use crate::agent::poll::Focus;
use crate::agent::AgentEvent;
use crate::ha::{HaState, Role};

/// Events waiting for etcd; more are dropped (and counted in the log).
const QUEUE: usize = 4096;

/// Passes every agent event to the state task and, while this instance
/// does not plan, copies the pushed ones to etcd.
pub struct Forwarder {
    client: Client,
    prefix: String,
    ha: watch::Receiver<HaState>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

impl Forwarder {
    pub fn new(client: Client, fabric: &str, ha: watch::Receiver<HaState>) -> Self {
        Forwarder { client, prefix: super::forward_prefix(fabric), ha }
    }

    /// Runs until the agents are gone (their senders dropped).
    pub async fn run(self, mut from_agents: mpsc::Receiver<AgentEvent>, to_state: mpsc::Sender<AgentEvent>) {
        let (put_tx, put_rx) = mpsc::channel::<(usize, String)>(QUEUE);
        tokio::spawn(put_all(self.client, self.prefix, put_rx));
        let mut dropped = 0u64;
        while let Some(ev) = from_agents.recv().await {
            if self.ha.borrow().role != Role::Leader {
                if let Some((s, p)) = Pushed::of(&ev) {
                    let value = serde_json::to_string(&p).unwrap_or_default();
                    if put_tx.try_send((s, value)).is_err() {
                        dropped += 1;
                        if dropped.is_power_of_two() {
                            warn!(dropped, "shard: forwarding queue full; pushed events dropped");
                        }
                    }
                }
            }
            if to_state.send(ev).await.is_err() {
                return;
            }
        }
    }
}

/// Puts the forwarded events in order. A failure is said once until a put
/// works again (etcd down: every event would fail).
async fn put_all(mut client: Client, prefix: String, mut rx: mpsc::Receiver<(usize, String)>) {
    let mut failing = 0u64;
    while let Some((s, value)) = rx.recv().await {
        let put = client.put(format!("{prefix}{s}"), value, None);
        let why = match tokio::time::timeout(crate::ha::elector::RPC_TIMEOUT, put).await {
            Ok(Ok(_)) => {
                if failing > 0 {
                    info!(lost = failing, "shard: forwarding to the planner works again");
                }
                failing = 0;
                continue;
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer".to_string(),
        };
        if failing == 0 {
            warn!(switch = s, error = %why, "shard: cannot forward pushed events to the planner; dropping them until etcd answers");
        }
        failing += 1;
    }
}

/// Where the planner takes forwarded events: its state task, and the
/// focus of its poll of each switch ([`crate::agent::AgentConfig::forwarded_focus`]).
#[derive(Debug)]
pub struct Receiver {
    pub to_state: mpsc::Sender<AgentEvent>,
    /// Per switch of the topology.
    pub focus: Vec<Arc<Focus>>,
    /// How long every port of a switch is polled fast after a gap in its
    /// digests (the audit interval, as for the owner's own digests).
    pub window: Duration,
}

/// While this instance plans: the other owners' forwarded events to its
/// state task.
pub async fn receive(
    mut client: Client,
    fabric: String,
    mut ha: watch::Receiver<HaState>,
    to: Receiver,
    mut stop: watch::Receiver<bool>,
) {
    let prefix = super::forward_prefix(&fabric);
    loop {
        tokio::select! {
            r = ha.wait_for(|s| s.role == Role::Leader) => if r.is_err() { return },
            _ = stop.wait_for(|s| *s) => return,
        }
        info!("shard: planning: taking the owners' forwarded digests and reports");
        let why = tokio::select! {
            why = follow(&mut client, &prefix, &to) => why,
            _ = ha.wait_for(|s| s.role != Role::Leader) => "no longer the planner".into(),
            _ = stop.wait_for(|s| *s) => return,
        };
        info!(reason = %why, "shard: forwarded events no longer followed");
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// Follows the forwarded events from now on; returns why it stopped.
async fn follow(client: &mut Client, prefix: &str, to: &Receiver) -> String {
    let mut stream = match client.watch(prefix, Some(WatchOptions::new().with_prefix())).await {
        Ok(s) => s,
        Err(e) => return e.to_string(),
    };
    loop {
        let resp = match stream.message().await {
            Ok(Some(r)) => r,
            Ok(None) => return "the watch stream ended".into(),
            Err(e) => return e.to_string(),
        };
        if resp.canceled() {
            return format!("watch canceled: {}", resp.cancel_reason());
        }
        for ev in resp.events() {
            let (EventType::Put, Some(kv)) = (ev.event_type(), ev.kv()) else { continue };
            let Some((s, focus)) =
                super::switch_of(kv.key(), prefix).and_then(|s| Some((s, to.focus.get(s)?)))
            else {
                warn!(key = %String::from_utf8_lossy(kv.key()), "shard: forwarded event for no switch of this topology; dropped");
                continue;
            };
            match serde_json::from_slice::<Pushed>(kv.value()) {
                Ok(p) => {
                    let ev = p.event(s);
                    if let AgentEvent::Digests { digests, .. } = &ev {
                        focus.on_digests(digests, tokio::time::Instant::now(), to.window);
                    }
                    if to.to_state.send(ev).await.is_err() {
                        return "the state task stopped".into();
                    }
                }
                Err(e) => warn!(switch = s, error = %e, "shard: forwarded event is not ours; dropped"),
            }
        }
    }
}
