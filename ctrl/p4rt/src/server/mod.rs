//! An in-process P4Runtime server with real switch state.
//!
//! [`Switch`] holds the forwarding state of one device: tables with real
//! match semantics, action profiles with weighted groups, counters,
//! registers, digests with batching and acks, clone sessions and multicast
//! groups, and client arbitration. [`Switch::service`] serves it over gRPC;
//! the data-plane side ([`Switch::lookup`], [`Switch::emit_digest`],
//! [`Switch::packet_in`], [`Switch::take_packet_outs`]) is for whoever
//! plays the switch's pipeline: the driver's tests, and the simulator,
//! which serves each simulated switch through one of these.

mod arbitration;
mod digest;
mod profile;
mod program;
mod read;
mod service;
mod state;
mod table;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::p4info::P4Info;
use crate::proto::p4::v1 as p4;
use arbitration::Streams;
use state::State;

pub use service::Service;

/// The served state's maps: keyed by ids and match fields the switch's
/// own controller writes, hashed with foldhash (seeded per process)
/// rather than SipHash, which was a twentieth of serving a fabric's
/// programming.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// How a [`Switch`] behaves.
#[derive(Debug, Clone)]
pub struct SwitchOptions {
    pub device_id: u64,
    /// `false` answers UNIMPLEMENTED to RegisterEntry reads and writes, as
    /// BMv2's PI server does; the driver then falls back to Thrift.
    pub registers_via_p4runtime: bool,
    /// What the device can run: a pushed P4Info it refuses is answered
    /// INVALID_ARGUMENT with the check's message, as a real target refuses
    /// a program compiled for something else.
    pub accepts: Option<PipelineCheck>,
    /// `Some(program)`: the device is a Tofino behind the SDE's P4Runtime
    /// server, and a pushed `p4_device_config` must be a
    /// `p4.tmp.P4DeviceConfig` for that program (see [`crate::tofino`]);
    /// anything else is answered INVALID_ARGUMENT.
    pub tofino_program: Option<String>,
    /// How long every Read or Write RPC that touches a register waits
    /// before it is served (with `registers_via_p4runtime`). BMv2 serves
    /// registers over Thrift, milliseconds per access: this lets tests and
    /// benches see what waits on a controller's register poll. Zero by
    /// default.
    pub register_latency: Duration,
}

impl Default for SwitchOptions {
    fn default() -> Self {
        SwitchOptions {
            device_id: 1,
            registers_via_p4runtime: true,
            accepts: None,
            tofino_program: None,
            register_latency: Duration::ZERO,
        }
    }
}

/// The test of a [`PipelineCheck`]: `Err` says why the device cannot run
/// it (the device's own error type: the server serves its text in the
/// `InvalidArgument` answer to the push).
pub type CheckFn = dyn Fn(&P4Info) -> Result<(), CheckError> + Send + Sync;

/// Why a device cannot run a program: whatever error its check returns.
pub type CheckError = Box<dyn std::error::Error + Send + Sync>;

/// Decides whether a device can run a P4Info.
#[derive(Clone)]
pub struct PipelineCheck(pub Arc<CheckFn>);

impl std::fmt::Debug for PipelineCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PipelineCheck(..)")
    }
}

/// The committed pipeline and its state.
#[derive(Debug)]
pub(crate) struct Pipeline {
    /// The program, shared with every switch of the process that runs it.
    pub program: Arc<program::Program>,
    /// This switch's cookie (the only part of the config of its own).
    pub cookie: Option<p4::forwarding_pipeline_config::Cookie>,
    pub state: State,
}

impl Pipeline {
    /// A committed config: its program shared, its state new.
    pub fn new(config: p4::ForwardingPipelineConfig, info: P4Info, registers_via_p4runtime: bool) -> Self {
        let (program, cookie) = program::Program::intern(config, info);
        let state = State::new(program.info.clone(), registers_via_p4runtime);
        Pipeline { program, cookie, state }
    }

    /// The config as pushed.
    pub fn config(&self) -> p4::ForwardingPipelineConfig {
        self.program.with_cookie(self.cookie)
    }
}

#[derive(Debug, Default)]
pub(crate) struct Core {
    pub pipeline: Option<Pipeline>,
    pub saved: Option<p4::ForwardingPipelineConfig>,
    pub streams: Streams,
    pub pipeline_pushes: u64,
    /// Updates applied by Write RPCs since start.
    pub writes: u64,
    /// Register Read RPCs received since start (answered or not yet).
    pub register_reads: u64,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub opts: SwitchOptions,
    pub core: Mutex<Core>,
    pub packet_out_tx: mpsc::UnboundedSender<p4::PacketOut>,
    pub packet_out_rx: Mutex<Option<mpsc::UnboundedReceiver<p4::PacketOut>>>,
    pub epoch: Instant,
}

/// One in-process switch; clones share the same device.
#[derive(Debug, Clone)]
pub struct Switch {
    pub(crate) inner: Arc<Inner>,
}

/// The result of a data-plane lookup.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The action to run (member and group references resolved).
    pub action: Option<p4::Action>,
    /// `false` when no entry matched and the default action applies.
    pub hit: bool,
}

impl Switch {
    pub fn new(opts: SwitchOptions) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Switch {
            inner: Arc::new(Inner {
                opts,
                core: Mutex::new(Core::default()),
                packet_out_tx: tx,
                packet_out_rx: Mutex::new(Some(rx)),
                epoch: Instant::now(),
            }),
        }
    }

    pub fn device_id(&self) -> u64 {
        self.inner.opts.device_id
    }

    pub(crate) fn core(&self) -> MutexGuard<'_, Core> {
        // A panic while holding the lock leaves consistent state behind:
        // every mutation validates first and then writes.
        self.inner.core.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The service implementation itself, to wrap or compose (tests use
    /// this to build servers that misbehave in one RPC).
    pub fn handler(&self) -> Service {
        Service { switch: self.clone() }
    }

    /// The gRPC service, to add to a tonic router.
    pub fn service(&self) -> crate::proto::p4::v1::p4_runtime_server::P4RuntimeServer<Service> {
        crate::proto::p4::v1::p4_runtime_server::P4RuntimeServer::new(Service { switch: self.clone() })
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
    }

    /// Serves on `addr` (use port 0 for any) until `shutdown` resolves.
    pub async fn bind(
        &self,
        addr: SocketAddr,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<Result<(), tonic::transport::Error>>)> {
        use tokio_stream::StreamExt;
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        // As gRPC servers on switches do: without TCP_NODELAY a reply's
        // last small write waits for the client's delayed ACK (up to 40 ms).
        // Best effort: a connection without it still works, only slower.
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|conn| {
            let conn = conn?;
            if let Err(e) = conn.set_nodelay(true) {
                tracing::debug!(error = %e, "TCP_NODELAY not set on a P4Runtime connection");
            }
            Ok::<_, std::io::Error>(conn)
        });
        let router = tonic::transport::Server::builder().add_service(self.service());
        let task = tokio::spawn(router.serve_with_incoming_shutdown(incoming, shutdown));
        Ok((local, task))
    }

    /// Serves this switch over in-memory byte streams and returns a channel
    /// to it: no sockets, no ports, so a simulator can run thousands. Each
    /// (re)connect of the channel opens a fresh stream; the server task
    /// ends when the channel and its clones are gone.
    pub fn in_memory_channel(&self) -> tonic::transport::Channel {
        use tokio_stream::StreamExt;
        let (tx, rx) = mpsc::unbounded_channel::<tokio::io::DuplexStream>();
        let incoming = tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(Ok::<_, std::io::Error>);
        let router = tonic::transport::Server::builder().add_service(self.service());
        tokio::spawn(router.serve_with_incoming(incoming));
        let connector = tower::service_fn(move |_: tonic::transport::Uri| {
            let tx = tx.clone();
            async move {
                let (client, server) = tokio::io::duplex(1 << 20);
                tx.send(server).map_err(|_| std::io::Error::other("in-memory switch is gone"))?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(client))
            }
        });
        tonic::transport::Endpoint::from_static("http://in-memory.invalid")
            .http2_max_header_list_size(crate::session::MAX_HEADER_LIST_SIZE)
            .connect_with_connector_lazy(connector)
    }

    /// The installed pipeline's P4Info, if any.
    pub fn p4info(&self) -> Option<Arc<P4Info>> {
        self.core().pipeline.as_ref().map(|p| p.state.info.clone())
    }

    /// How many times a pipeline was committed (to check cookie skipping).
    pub fn pipeline_pushes(&self) -> u64 {
        self.core().pipeline_pushes
    }

    /// Updates applied by Write RPCs since the switch started: it stays
    /// put once a controller has finished programming.
    pub fn writes(&self) -> u64 {
        self.core().writes
    }

    /// Register Read RPCs received since the switch started (with
    /// `registers_via_p4runtime`), counted on arrival: with
    /// [`SwitchOptions::register_latency`], a test sees that a controller's
    /// poll is under way before it is answered.
    pub fn register_reads(&self) -> u64 {
        self.core().register_reads
    }

    /// Entries in a table of the installed pipeline.
    pub fn table_len(&self, table_id: u32) -> Option<usize> {
        Some(self.core().pipeline.as_ref()?.state.tables.get(&table_id)?.entries.len())
    }

    /// Looks `key` (`(match field id, value)`) up in a table the way the
    /// data plane does; `hash` selects among weighted group members.
    pub fn lookup(&self, table_id: u32, key: &[(u32, Vec<u8>)], hash: u64, bytes: u64) -> Option<Hit> {
        let mut core = self.core();
        let state = &mut core.pipeline.as_mut()?.state;
        let now = Instant::now();
        let table = state.tables.get_mut(&table_id)?;
        let found = table.lookup(key, now).map(|i| {
            i.counter.packet_count += 1;
            i.counter.byte_count += i64::try_from(bytes).unwrap_or(i64::MAX);
            i.entry.action.clone()
        });
        match found {
            Some(a) => Some(Hit { action: a.and_then(|a| state.resolve(table_id, &a, hash)), hit: true }),
            None => {
                table.default_counter.packet_count += 1;
                Some(Hit { action: table.default_action.clone(), hit: false })
            }
        }
    }

    /// Raw register cell, whatever transport is enabled (for the data plane
    /// and the Thrift stand-in).
    pub fn register_cell(&self, register_id: u32, index: usize) -> Option<Vec<u8>> {
        self.core().pipeline.as_ref()?.state.registers.get(&register_id)?.get(index)
    }

    /// Sets a register cell from the data plane side; `false` if it does not exist.
    pub fn set_register_cell(&self, register_id: u32, index: usize, value: Vec<u8>) -> bool {
        let mut core = self.core();
        match core.pipeline.as_mut().and_then(|p| p.state.registers.get_mut(&register_id)) {
            Some(r) => r.set(index, value),
            None => false,
        }
    }

    /// The egress ports of a clone session's replicas, in order; `None`
    /// when the session is not configured (the data plane makes no copy).
    pub fn clone_session_ports(&self, session_id: u32) -> Option<Vec<u32>> {
        #[allow(deprecated)] // the old port field is still a valid way to write a replica
        fn port(r: &p4::Replica) -> u32 {
            match &r.port_kind {
                Some(p4::replica::PortKind::Port(b)) => {
                    crate::codec::decode_u64(b, 32).ok().and_then(|p| u32::try_from(p).ok()).unwrap_or(0)
                }
                Some(p4::replica::PortKind::EgressPort(p)) => *p,
                None => 0,
            }
        }
        let core = self.core();
        let s = core.pipeline.as_ref()?.state.clone_sessions.get(&session_id)?;
        Some(s.replicas.iter().map(port).collect())
    }

    /// Counts a packet in an indirect counter cell.
    pub fn count(&self, counter_id: u32, index: usize, bytes: u64) -> bool {
        let mut core = self.core();
        let Some(c) =
            core.pipeline.as_mut().and_then(|p| p.state.counters.get_mut(&counter_id)?.get_mut(index))
        else {
            return false;
        };
        c.packet_count += 1;
        c.byte_count += i64::try_from(bytes).unwrap_or(i64::MAX);
        true
    }

    /// Raises a digest from the data plane. It is batched per its
    /// DigestEntry and sent to the primary client; `false` if not queued
    /// (not configured, or the same data awaits an ack).
    pub fn emit_digest(&self, digest_id: u32, data: p4::P4Data) -> bool {
        let now = Instant::now();
        let deadline = {
            let mut core = self.core();
            let Some(p) = core.pipeline.as_mut() else { return false };
            if !p.state.digests.emit(digest_id, data, now) {
                return false;
            }
            p.state.digests.next_deadline()
        };
        self.flush_digests();
        if let Some(at) = deadline.filter(|at| *at > now) {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let me = self.clone();
                rt.spawn(async move {
                    tokio::time::sleep_until(at).await;
                    me.flush_digests();
                });
            }
        }
        true
    }

    /// Sends the digest lists that are due to the primary client. Lists
    /// wait while no client is primary.
    pub fn flush_digests(&self) {
        let now = Instant::now();
        let ts = i64::try_from(now.duration_since(self.inner.epoch).as_nanos()).unwrap_or(i64::MAX);
        let mut core = self.core();
        let Core { pipeline, streams, .. } = &mut *core;
        let (Some(p), Some(tx)) = (pipeline.as_mut(), streams.primary_tx()) else { return };
        for list in p.state.digests.due(now, ts) {
            let msg =
                p4::StreamMessageResponse { update: Some(p4::stream_message_response::Update::Digest(list)) };
            let _ = tx.send(Ok(msg));
        }
    }

    /// Digest lists sent and not yet acked.
    pub fn outstanding_digests(&self) -> usize {
        self.core().pipeline.as_ref().map(|p| p.state.digests.outstanding()).unwrap_or(0)
    }

    /// Sends a packet to the primary controller; `false` if there is none.
    pub fn packet_in(&self, payload: Vec<u8>, metadata: Vec<p4::PacketMetadata>) -> bool {
        let core = self.core();
        let Some(tx) = core.streams.primary_tx() else { return false };
        let msg = p4::StreamMessageResponse {
            update: Some(p4::stream_message_response::Update::Packet(p4::PacketIn { payload, metadata })),
        };
        tx.send(Ok(msg)).is_ok()
    }

    /// The packets the controller sent out; the first caller gets them.
    pub fn take_packet_outs(&self) -> Option<mpsc::UnboundedReceiver<p4::PacketOut>> {
        self.inner.packet_out_rx.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// Notifies the primary of entries idle longer than their timeout;
    /// returns how many were reported.
    pub fn check_idle(&self) -> usize {
        let now = Instant::now();
        let mut core = self.core();
        let Core { pipeline, streams, .. } = &mut *core;
        let Some(p) = pipeline.as_mut() else { return 0 };
        let mut idle = vec![];
        for t in p.state.tables.values_mut() {
            for i in t.entries.values_mut() {
                let limit =
                    std::time::Duration::from_nanos(u64::try_from(i.entry.idle_timeout_ns).unwrap_or(0));
                if i.entry.idle_timeout_ns > 0 && !i.idle_notified && now.duration_since(i.last_hit) >= limit
                {
                    i.idle_notified = true;
                    idle.push(i.entry.clone());
                }
            }
        }
        let n = idle.len();
        if let (Some(tx), false) = (streams.primary_tx(), idle.is_empty()) {
            let ts = i64::try_from(now.duration_since(self.inner.epoch).as_nanos()).unwrap_or(i64::MAX);
            let note = p4::IdleTimeoutNotification { table_entry: idle, timestamp: ts };
            let msg = p4::StreamMessageResponse {
                update: Some(p4::stream_message_response::Update::IdleTimeoutNotification(note)),
            };
            let _ = tx.send(Ok(msg));
        }
        n
    }

    /// Ends every open StreamChannel with UNAVAILABLE, as a restarting or
    /// flaky server would. Clients must reconnect and re-arbitrate.
    pub fn drop_streams(&self) {
        let mut core = self.core();
        for (_, slot) in core.streams.slots.drain() {
            let _ = slot.tx.send(Err(tonic::Status::unavailable("stream dropped by the switch")));
        }
    }

    /// The election id of the default role's primary, if any.
    pub fn primary_election_id(&self) -> Option<u128> {
        self.core().streams.primary("").map(|(_, e)| e)
    }
}

/// Switches started together on free loopback ports, one per options
/// value, in order (tests, benches, demos); they all stop when `true` is
/// sent on the returned sender (or it is dropped).
pub async fn start_local(
    options: impl IntoIterator<Item = SwitchOptions>,
) -> std::io::Result<(Vec<Switch>, Vec<SocketAddr>, tokio::sync::watch::Sender<bool>)> {
    let (stop, rx) = tokio::sync::watch::channel(false);
    let mut switches = Vec::new();
    let mut addrs = Vec::new();
    for o in options {
        let sw = Switch::new(o);
        let mut rx = rx.clone();
        let (addr, _task) = sw
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)), async move {
                let _ = rx.wait_for(|s| *s).await;
            })
            .await?;
        switches.push(sw);
        addrs.push(addr);
    }
    Ok((switches, addrs, stop))
}
