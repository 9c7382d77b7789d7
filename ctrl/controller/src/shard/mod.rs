//! Sharding: several controller instances split a fabric's switches
//! through etcd, and one of them, the elected one ([`crate::ha`]), plans.
//!
//! - **Ownership** ([`owner`]). Each instance holds one etcd lease. It
//!   registers under `metaroce/<fabric>/shard/members/<name>` with it, and
//!   owns a switch by creating `metaroce/<fabric>/shard/owners/<switch>`
//!   with it in a transaction that succeeds only if the key is absent: at
//!   most one owner, and the lease decides. Who takes what is the balanced
//!   rule of [`assign`]. A dead instance's keys go with its lease, and the
//!   others adopt its switches.
//! - **Fencing.** An owner arbitrates on its switch with the election id
//!   [`owner_election_id`] of its owner key's creation revision: a newer
//!   owner's key was created later, so its id is higher and the switch
//!   refuses a paused old owner's writes, exactly as the HA election's ids
//!   do. A non-owner keeps a backup session (id below every owner's) that
//!   reads. The switch agents follow a per-switch [`crate::ha::HaState`], so
//!   the agent code is the HA code: a new owner reads what the switch holds
//!   and writes only the difference; it never pushes the pipeline again
//!   unless the switch lost it.
//! - **Decisions** ([`desired`]). The elected instance's state task runs the
//!   fabric-wide view and the planner as before; its per-switch desired
//!   state is published to `metaroce/<fabric>/desired/<switch>`, fenced on
//!   its leadership. Every instance watches that prefix and hands each
//!   switch's desired state to its agent, which writes it only while the
//!   instance owns the switch.
//! - **Forwarding** ([`forward`]). Digests and Telemetry Reports go to a
//!   switch's primary only, so an owner that does not plan puts them under
//!   `metaroce/<fabric>/forward/<switch>`; the planner watches that prefix
//!   and feeds them to its state task as its own agents' events.
//! - **Contract** ([`contract`]). Each member key holds a digest of the
//!   topology and of the program (P4Info and device config); an instance
//!   whose digests differ from a live member's is refused at start, naming
//!   what differs.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::agent::poll::Focus;
use crate::agent::{AgentEvent, Desired};
use crate::daemon::Config;
use crate::ha::{HaError, HaState};

pub mod assign;
pub mod contract;
pub mod desired;
pub mod forward;
pub mod grace;
pub mod owner;
pub mod wire;

/// Where a fabric's shard keys live.
pub fn members_prefix(fabric: &str) -> String {
    format!("metaroce/{fabric}/shard/members/")
}

pub fn owners_prefix(fabric: &str) -> String {
    format!("metaroce/{fabric}/shard/owners/")
}

pub fn desired_prefix(fabric: &str) -> String {
    format!("metaroce/{fabric}/desired/")
}

pub fn forward_prefix(fabric: &str) -> String {
    format!("metaroce/{fabric}/forward/")
}

/// The switch index at the end of a key under `prefix`.
pub fn switch_of(key: &[u8], prefix: &str) -> Option<usize> {
    std::str::from_utf8(key).ok()?.strip_prefix(prefix)?.parse().ok()
}

/// The election id of a switch's owner whose key was created at etcd
/// revision `revision`: above every non-owner's, and above every older
/// owner's (the same shift as the HA leader's, [`crate::ha::leader_election_id`]).
pub fn owner_election_id(revision: i64) -> u128 {
    crate::ha::leader_election_id(revision)
}

/// Why sharding could not start.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error(transparent)]
    Etcd(#[from] HaError),
    #[error(transparent)]
    Contract(#[from] contract::Mismatch),
    #[error("--shard needs --ha (the elected instance plans for every shard)")]
    NoElection,
    #[error("the switches' agents")]
    Agents(#[source] Box<crate::daemon::DaemonError>),
}

/// The shard timing.
#[derive(Debug, Clone)]
pub struct Timing {
    pub lease_ttl: Duration,
    /// How often the shard keys are read and the lease renewed.
    pub every: Duration,
    /// Wait before trying again after etcd failed.
    pub retry: Duration,
}

impl Timing {
    pub fn new(lease_ttl: Duration) -> Self {
        Timing {
            lease_ttl,
            every: (lease_ttl / 10).clamp(Duration::from_millis(20), Duration::from_millis(200)),
            retry: Duration::from_millis(250),
        }
    }
}

type Tasks = Vec<JoinHandle<()>>;

/// Starts sharding beside the election `ha`: the ownership task, one agent
/// per switch following its own ownership term, the desired-state watcher,
/// the publisher (active while this instance leads) and the forwarding of
/// digests. Returns the senders the state task publishes desired state on,
/// and the receiver of events forwarded by the other owners.
pub async fn start(
    cfg: &Config,
    ha: watch::Receiver<HaState>,
    events: &mpsc::Sender<AgentEvent>,
    stop: &watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> Result<Vec<watch::Sender<Desired>>, ShardError> {
    let h = cfg.ha.as_ref().ok_or(ShardError::NoElection)?;
    let fabric = cfg.topology.name.clone();
    let n = cfg.topology.switches.len();
    let el = crate::ha::EtcdElector::connect(&h.endpoints, &members_prefix(&fabric)).await?;
    let client = el.client();
    let ours = contract::Contract::of(&cfg.topology, &cfg.pipeline, &h.name);
    contract::check(&mut client.clone(), &fabric, &ours).await?;
    let timing = Timing::new(h.lease_ttl);
    let (terms, term_rx) = owner::terms(&h.name, n);
    let own = owner::Owner::new(el, &fabric, ours, n, timing.clone());
    tasks.push(tokio::spawn(own.run(terms, stop.clone()).instrument(tracing::info_span!("shard"))));
    // Agents: their desired state comes from etcd, their term from ownership.
    let mut agent_desired = Vec::with_capacity(n);
    let (fwd_tx, fwd_rx) = mpsc::channel::<AgentEvent>(8192);
    // The owners' forwarded digests steer the planner's polls too.
    let focus: Vec<Arc<Focus>> = (0..n).map(|_| Arc::default()).collect();
    for (s, term) in term_rx.into_iter().enumerate() {
        let mut a = crate::daemon::agent_config(cfg, s).map_err(|e| ShardError::Agents(Box::new(e)))?;
        a.ha = Some(term);
        // A switch neither owned nor planned here is not read
        // ([`crate::agent::AgentConfig::plans`]).
        a.plans = Some(ha.clone());
        a.forwarded_focus = Some(focus[s].clone());
        let (tx, rx) = watch::channel::<Desired>(None);
        agent_desired.push(tx);
        let span = crate::agent::span(&a);
        let fut = crate::agent::run(a, cfg.pipeline.clone(), rx, fwd_tx.clone(), stop.clone());
        tasks.push(tokio::spawn(fut.instrument(span)));
    }
    drop(fwd_tx);
    let previous: Vec<_> = agent_desired.iter().map(|tx| tx.subscribe()).collect();
    tasks.push(tokio::spawn(desired::watch(client.clone(), fabric.clone(), agent_desired, stop.clone())));
    let mut core_desired = Vec::with_capacity(n);
    let mut core_rx = Vec::with_capacity(n);
    for _ in 0..n {
        let (tx, rx) = watch::channel::<Desired>(None);
        core_desired.push(tx);
        core_rx.push(rx);
    }
    let grace = Duration::from_nanos(cfg.core.place.flow_idle_ns);
    let publisher = desired::Publisher::new(client.clone(), &fabric, core_rx, ha.clone(), previous, grace);
    tasks.push(tokio::spawn(publisher.run(stop.clone())));
    // Our agents' events reach our state task; while we do not plan, the
    // pushed ones of the switches we own also go to the planner.
    let fw = forward::Forwarder::new(client.clone(), &fabric, ha.clone());
    tasks.push(tokio::spawn(fw.run(fwd_rx, events.clone())));
    let to_planner = forward::Receiver { to_state: events.clone(), focus, window: cfg.audit_interval };
    tasks.push(tokio::spawn(forward::receive(client, fabric, ha, to_planner, stop.clone())));
    Ok(core_desired)
}
