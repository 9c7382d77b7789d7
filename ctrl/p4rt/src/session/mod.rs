//! One P4Runtime session per device: connection with backoff, arbitration,
//! pipeline push with cookie, batched writes, streamed reads, and the
//! StreamChannel (run by [`stream`]) that survives drops.

mod cells;
mod ends;
mod push;
mod register_batch;
mod registers;
mod stream;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

pub use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use tonic::transport::{Channel, Endpoint};

use crate::p4info::P4Info;
use crate::proto::p4::v1 as p4;
use crate::proto::p4::v1::p4_runtime_client::P4RuntimeClient;
use crate::status::WriteFailure;
use ends::Transport;

pub use register_batch::{RegisterCell, RegisterRead, RegisterValues};
pub use stream::Event;

/// The configs sessions pushed (cookies aside), each once.
static PUSHED: crate::intern::Interner<push::Program> = crate::intern::Interner::new();

/// Where and who: the device, our election id and role, and the timing.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// `http://host:port`.
    pub addr: String,
    pub device_id: u64,
    pub election_id: u128,
    /// Empty for the default (full-access) role.
    pub role: String,
    /// Deadline of every unary RPC, of a whole Read, and of arbitration.
    pub rpc_timeout: Duration,
    /// Deadline of one connection attempt (TCP and HTTP/2 handshake).
    pub connect_timeout: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Connection attempts before giving up; 0 = keep trying.
    pub connect_attempts: u32,
}

impl SessionConfig {
    pub fn new(addr: impl Into<String>, device_id: u64) -> Self {
        SessionConfig {
            addr: addr.into(),
            device_id,
            election_id: 1,
            role: String::new(),
            rpc_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(5),
            connect_attempts: 5,
        }
    }
}

/// Why a session call failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("device {device_id}: cannot connect to {addr} after {attempts} attempts: {last}")]
    Connect { device_id: u64, addr: String, attempts: u32, last: String },
    #[error("device {device_id}: {rpc} got no answer within {after:?}")]
    Deadline { device_id: u64, rpc: &'static str, after: Duration },
    #[error("device {device_id}: {rpc} failed: {:?}: {}", status.code(), status.message())]
    Rpc { device_id: u64, rpc: &'static str, status: tonic::Status },
    /// The switch answered the Write with per-update errors (the others
    /// of the batch were applied): a refusal of those entries, not a
    /// failure of the session.
    #[error("device {device_id}: write refused: {failure}")]
    Write { device_id: u64, failure: WriteFailure },
    #[error("device {device_id}: not primary (election id {election_id}); the primary has {primary:?}")]
    NotPrimary { device_id: u64, election_id: u128, primary: Option<u128> },
    #[error("device {device_id}: the server refused the stream: {message}")]
    Refused { device_id: u64, message: String },
    #[error("device {device_id}: the session is closed")]
    Closed { device_id: u64 },
    #[error("device {device_id}: the installed pipeline has no P4Info")]
    NoP4Info { device_id: u64 },
    /// A request this session encoded does not decode again (a bug).
    #[error("device {device_id}: a prepared Read does not decode: {message}")]
    Prepared { device_id: u64, message: String },
    #[error(transparent)]
    P4Info(#[from] crate::p4info::P4InfoError),
    #[error("device {device_id}: register fallback over Thrift failed")]
    Thrift {
        device_id: u64,
        #[source]
        source: crate::thrift::ThriftError,
    },
}

impl SessionError {
    /// The gRPC code, for RPC failures.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            SessionError::Rpc { status, .. } => Some(status.code()),
            SessionError::Write { failure, .. } => Some(failure.code),
            _ => None,
        }
    }
}

/// Our standing in the arbitration for our role.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RoleState {
    pub primary: bool,
    /// The election id the server reports (the primary's).
    pub election_id: Option<u128>,
    /// Bumped on every arbitration answer.
    pub generation: u64,
    /// Why the server last closed the stream with an error that retrying
    /// will not fix (a clashing election id, a wrong device id).
    pub refused: Option<String>,
}

/// A device configuration format. BMv2 takes its JSON; a Tofino target
/// takes its own packing of `tofino.bin` and `context.json`, added as
/// another implementation.
pub trait DeviceConfig: Send + Sync {
    /// The `p4_device_config` bytes.
    fn bytes(&self) -> Bytes;
}

/// BMv2: the JSON p4c writes.
#[derive(Debug, Clone)]
pub struct Bmv2Json(pub Vec<u8>);

impl DeviceConfig for Bmv2Json {
    fn bytes(&self) -> Bytes {
        Bytes::copy_from_slice(&self.0)
    }
}

/// Device config bytes already in the target's form, shared: every push of
/// a fabric's program hands the switch the same buffer instead of a copy
/// of its megabytes.
#[derive(Debug, Clone)]
pub struct SharedDeviceConfig(pub Bytes);

impl DeviceConfig for SharedDeviceConfig {
    fn bytes(&self) -> Bytes {
        self.0.clone()
    }
}

/// What [`Session::set_pipeline`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipelineOutcome {
    /// The switch already ran a pipeline with this cookie.
    AlreadyInstalled,
    Pushed,
}

/// The FNV-1a hash of the P4Info and device config: a cookie that changes
/// exactly when the pipeline does, and is the same in every process.
pub fn pipeline_cookie(info: &P4Info, device_config: &[u8]) -> u64 {
    use prost::Message;
    // prost encodes map fields (the type_info's) in HashMap order, which
    // differs from one process to the next: those maps are hashed sorted by
    // key. Otherwise two controllers, or one restarted, disagree on the
    // cookie and push the pipeline again, which wipes every table.
    let mut raw = info.raw().clone();
    let types = raw.type_info.take();
    let mut bytes = raw.encode_to_vec();
    if let Some(t) = types {
        sorted_map(&mut bytes, &t.structs);
        sorted_map(&mut bytes, &t.headers);
        sorted_map(&mut bytes, &t.header_unions);
        sorted_map(&mut bytes, &t.enums);
        sorted_map(&mut bytes, &t.serializable_enums);
        sorted_map(&mut bytes, &t.new_types);
        if let Some(e) = &t.error {
            bytes.extend(e.encode_to_vec());
        }
    }
    bytes
        .iter()
        .chain(device_config)
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
}

/// Appends a map's entries in key order (each key, a 0, its value), then a
/// separator.
fn sorted_map<V: prost::Message>(out: &mut Vec<u8>, m: &std::collections::HashMap<String, V>) {
    let mut entries: Vec<(&String, &V)> = m.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for (k, v) in entries {
        out.extend(k.as_bytes());
        out.push(0);
        out.extend(v.encode_to_vec());
    }
    out.push(0xff);
}

/// Whether a held config (cookie aside) is `info` with `device_config`;
/// the megabytes of a shared config are not compared with themselves.
fn same_program(held: &push::Program, info: &P4Info, device_config: &Bytes) -> bool {
    let held = &held.config;
    let d = &held.p4_device_config;
    let same_bytes =
        (d.as_ptr() == device_config.as_ptr() && d.len() == device_config.len()) || d == device_config;
    same_bytes && held.p4info.as_ref() == Some(info.raw())
}

#[derive(Debug)]
pub(crate) enum Cmd {
    Subscribe(mpsc::UnboundedSender<Event>),
    PacketOut(p4::PacketOut),
    KnownDigests(HashSet<u32>),
    /// The pushed config without its cookie (shared by every session that
    /// pushed the same program), and the cookie.
    Pipeline(Arc<push::Program>, Option<p4::forwarding_pipeline_config::Cookie>),
    Digest(p4::DigestEntry),
    /// Arbitrate again on the open stream with this election id.
    Elect(u128),
}

/// The responses of one Read, message by message.
#[derive(Debug)]
pub struct ReadStream {
    inner: tonic::Streaming<p4::ReadResponse>,
    device_id: u64,
    timeout: Duration,
}

impl ReadStream {
    /// The entities of the next response; `None` at the end.
    pub async fn next(&mut self) -> Option<Result<Vec<p4::Entity>, SessionError>> {
        next_read_message(&mut self.inner, self.device_id, self.timeout).await.map(|r| r.map(|r| r.entities))
    }
}

/// The next message of a Read's answer, waited for up to `timeout`;
/// `None` at the end.
pub(crate) async fn next_read_message<T>(
    stream: &mut tonic::Streaming<T>,
    device_id: u64,
    timeout: Duration,
) -> Option<Result<T, SessionError>> {
    match tokio::time::timeout(timeout, stream.message()).await {
        Err(_) => Some(Err(SessionError::Deadline { device_id, rpc: "Read", after: timeout })),
        Ok(Ok(None)) => None,
        Ok(Err(status)) => Some(Err(SessionError::Rpc { device_id, rpc: "Read", status })),
        Ok(Ok(Some(r))) => Some(Ok(r)),
    }
}

/// A session with one device. Dropping it closes the stream.
#[derive(Debug)]
pub struct Session {
    cfg: SessionConfig,
    client: P4RuntimeClient<Transport>,
    /// The client's channel, for the push ([`push`]).
    channel: Transport,
    cmd: mpsc::UnboundedSender<Cmd>,
    role: watch::Receiver<RoleState>,
    task: tokio::task::JoinHandle<()>,
    pub(crate) thrift: Option<crate::thrift::ThriftConfig>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(crate) fn election(v: u128) -> p4::Uint128 {
    p4::Uint128 { high: (v >> 64) as u64, low: v as u64 }
}

/// The pipeline push of `program` with `cookie` in `cfg`'s name (its
/// device, role and election id; verify and commit).
pub(crate) fn push_request(
    cfg: &SessionConfig,
    program: Arc<push::Program>,
    cookie: Option<p4::forwarding_pipeline_config::Cookie>,
) -> push::Push {
    let head = p4::SetForwardingPipelineConfigRequest {
        device_id: cfg.device_id,
        role: cfg.role.clone(),
        election_id: Some(election(cfg.election_id)),
        action: p4::set_forwarding_pipeline_config_request::Action::VerifyAndCommit as i32,
        config: None,
        ..Default::default()
    };
    push::Push { head, program, cookie }
}

/// The largest header block (trailers included) a session accepts. A
/// refused Write answers with one `p4.v1.Error` per update in its
/// `grpc-status-details-bin` trailer: a few tens of kilobytes for a
/// batch of a thousand. Over hyper's default of 16 KiB, the client
/// refuses the block and the HTTP/2 connection fails, and with it the
/// StreamChannel: every refused batch then cost a reconnect, and the
/// per-update errors were lost.
pub const MAX_HEADER_LIST_SIZE: u32 = 16 << 20;

/// Connects with exponential backoff; every attempt has a deadline.
pub(crate) async fn connect_channel(cfg: &SessionConfig) -> Result<Channel, SessionError> {
    let fail = |attempts, last: String| SessionError::Connect {
        device_id: cfg.device_id,
        addr: cfg.addr.clone(),
        attempts,
        last,
    };
    let ep = Endpoint::from_shared(cfg.addr.clone())
        .map_err(|e| fail(0, e.to_string()))?
        .connect_timeout(cfg.connect_timeout)
        .http2_max_header_list_size(MAX_HEADER_LIST_SIZE)
        .tcp_nodelay(true);
    let mut backoff = crate::Backoff::new(cfg.backoff_initial, cfg.backoff_max);
    let mut jitter = crate::Jitter::new(crate::Jitter::seed_for(cfg.device_id));
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let last = match tokio::time::timeout(cfg.connect_timeout, ep.connect()).await {
            Ok(Ok(ch)) => return Ok(ch),
            Ok(Err(e)) => {
                format!("{e}: {}", std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_default())
            }
            Err(_) => format!("no connection within {:?}", cfg.connect_timeout),
        };
        if cfg.connect_attempts != 0 && attempt >= cfg.connect_attempts {
            return Err(fail(attempt, last));
        }
        let delay = backoff.delay(jitter.unit());
        tracing::debug!(device_id = cfg.device_id, addr = %cfg.addr, attempt, error = %last, retry_in = ?delay, "connect failed; backing off");
        tokio::time::sleep(delay).await;
    }
}

impl Session {
    /// Connects, opens the stream and waits for the first arbitration
    /// answer (primary or backup).
    pub async fn connect(cfg: SessionConfig) -> Result<Self, SessionError> {
        let channel = connect_channel(&cfg).await?;
        Self::connect_with(cfg, channel).await
    }

    /// Like [`Session::connect`] over a channel made elsewhere, such as
    /// [`crate::server::Switch::in_memory_channel`]; `cfg.addr` is then
    /// only a label.
    pub async fn connect_with(cfg: SessionConfig, channel: Channel) -> Result<Self, SessionError> {
        let channel = ends::transport(channel);
        let client = P4RuntimeClient::new(channel.clone())
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20);
        let (cmd, cmd_rx) = mpsc::unbounded_channel();
        let (role_tx, mut role) = watch::channel(RoleState::default());
        let span = tracing::info_span!("p4rt_session", device_id = cfg.device_id, addr = %cfg.addr);
        let task = tokio::spawn(tracing::Instrument::instrument(
            stream::run(cfg.clone(), client.clone(), channel.clone(), cmd_rx, role_tx),
            span,
        ));
        let answered =
            tokio::time::timeout(cfg.rpc_timeout, role.wait_for(|r| r.generation > 0 || r.refused.is_some()))
                .await
                .map(|r| r.map(|_| ()));
        match answered {
            Ok(Ok(())) => {
                let refused = role.borrow().refused.clone();
                if let Some(message) = refused {
                    task.abort();
                    return Err(SessionError::Refused { device_id: cfg.device_id, message });
                }
            }
            Ok(Err(_)) => return Err(SessionError::Closed { device_id: cfg.device_id }),
            Err(_) => {
                task.abort();
                return Err(SessionError::Deadline {
                    device_id: cfg.device_id,
                    rpc: "arbitration",
                    after: cfg.rpc_timeout,
                });
            }
        }
        Ok(Session { cfg, client, channel, cmd, role, task, thrift: None })
    }

    pub fn device_id(&self) -> u64 {
        self.cfg.device_id
    }

    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// Our arbitration state now.
    pub fn role(&self) -> RoleState {
        self.role.borrow().clone()
    }

    /// Waits until we are primary, up to the RPC deadline.
    pub async fn wait_primary(&self) -> Result<(), SessionError> {
        let mut role = self.role.clone();
        // Primary with our id now: after `set_election_id` the standing
        // answer may still be the one for the id we held before.
        let id = self.cfg.election_id;
        let mine = |r: &RoleState| r.primary && r.election_id.is_none_or(|e| e == id);
        let waited = tokio::time::timeout(self.cfg.rpc_timeout, role.wait_for(mine)).await;
        match waited.map(|r| r.map(|_| ())) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(SessionError::Closed { device_id: self.cfg.device_id }),
            Err(_) => Err(SessionError::NotPrimary {
                device_id: self.cfg.device_id,
                election_id: self.cfg.election_id,
                primary: self.role().election_id,
            }),
        }
    }

    /// Arbitrates again with `election_id` on the open stream (and on every
    /// reconnect after it), without dropping the session: a standby
    /// controller that was elected becomes primary this way, and one that
    /// lost its leadership steps down. Writes carry the new id from now on;
    /// the answer arrives as an [`Event::Role`] (see [`Session::wait_primary`]).
    pub fn set_election_id(&mut self, election_id: u128) -> Result<(), SessionError> {
        self.cfg.election_id = election_id;
        self.send(Cmd::Elect(election_id))
    }

    /// Events from the stream: role changes, digests (already acked),
    /// packet-ins, idle timeouts, errors and reconnects. Subscriptions
    /// outlive stream drops.
    pub fn subscribe(&self) -> Result<mpsc::UnboundedReceiver<Event>, SessionError> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.send(Cmd::Subscribe(tx))?;
        Ok(rx)
    }

    fn send(&self, c: Cmd) -> Result<(), SessionError> {
        self.cmd.send(c).map_err(|_| SessionError::Closed { device_id: self.cfg.device_id })
    }

    pub(crate) async fn call<T>(
        &self,
        rpc: &'static str,
        fut: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, SessionError> {
        let device_id = self.cfg.device_id;
        match tokio::time::timeout(self.cfg.rpc_timeout, fut).await {
            Err(_) => Err(SessionError::Deadline { device_id, rpc, after: self.cfg.rpc_timeout }),
            // The server enforces our grpc-timeout too; tonic reports that
            // as CANCELLED "Timeout expired".
            Ok(Err(status))
                if status.code() == tonic::Code::DeadlineExceeded
                    || (status.code() == tonic::Code::Cancelled
                        && status.message().contains("Timeout expired")) =>
            {
                Err(SessionError::Deadline { device_id, rpc, after: self.cfg.rpc_timeout })
            }
            Ok(Err(status)) => Err(SessionError::Rpc { device_id, rpc, status }),
            Ok(Ok(r)) => Ok(r.into_inner()),
        }
    }

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.set_timeout(self.cfg.rpc_timeout);
        r
    }

    /// The cookie of the pipeline the switch runs; `None` when it runs
    /// none (or runs one pushed without a cookie).
    pub async fn installed_cookie(&self) -> Result<Option<u64>, SessionError> {
        use p4::get_forwarding_pipeline_config_request::ResponseType;
        let get = p4::GetForwardingPipelineConfigRequest {
            device_id: self.cfg.device_id,
            response_type: ResponseType::CookieOnly as i32,
        };
        let mut client = self.client.clone();
        let current = self
            .call("GetForwardingPipelineConfig", client.get_forwarding_pipeline_config(self.request(get)))
            .await;
        // BMv2 answers FAILED_PRECONDITION/UNKNOWN before its first pipeline.
        match current {
            Ok(r) => Ok(r.config.and_then(|c| c.cookie).map(|c| c.cookie)),
            Err(SessionError::Rpc { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Installs the pipeline unless one with the same cookie already runs.
    /// `cookie` defaults to [`pipeline_cookie`].
    pub async fn set_pipeline(
        &self,
        info: &P4Info,
        device_config: &dyn DeviceConfig,
        cookie: Option<u64>,
    ) -> Result<PipelineOutcome, SessionError> {
        let bytes = device_config.bytes();
        let cookie = cookie.unwrap_or_else(|| pipeline_cookie(info, &bytes));
        let installed = self.installed_cookie().await?;
        // Remembered so that a switch that restarted gets it back; held
        // once for every session that pushed the same program.
        let shared = PUSHED.get_or_insert(
            |c| same_program(c, info, &bytes),
            || {
                push::Program::new(p4::ForwardingPipelineConfig {
                    p4info: Some(info.raw().clone()),
                    p4_device_config: bytes.clone(),
                    cookie: None,
                })
            },
        );
        let outcome = if installed == Some(cookie) {
            tracing::info!(device_id = self.cfg.device_id, cookie, "pipeline already installed");
            PipelineOutcome::AlreadyInstalled
        } else {
            let theirs = Some(p4::forwarding_pipeline_config::Cookie { cookie });
            let req = self.request(push_request(&self.cfg, shared.clone(), theirs));
            self.call("SetForwardingPipelineConfig", push::send(self.channel.clone(), req)).await?;
            tracing::info!(device_id = self.cfg.device_id, cookie, "pipeline pushed");
            PipelineOutcome::Pushed
        };
        self.use_p4info(info)?;
        self.send(Cmd::Pipeline(shared, Some(p4::forwarding_pipeline_config::Cookie { cookie })))?;
        Ok(outcome)
    }

    /// Tells the stream which digest ids the program has, so that a list
    /// for another id is reported instead of delivered.
    pub fn use_p4info(&self, info: &P4Info) -> Result<(), SessionError> {
        self.send(Cmd::KnownDigests(
            info.digests.iter().filter_map(|d| d.preamble.as_ref().map(|p| p.id)).collect(),
        ))
    }

    /// One Write batch (CONTINUE_ON_ERROR). Per-update failures come back
    /// as [`SessionError::Write`] (the other updates were applied); a call
    /// that failed as a whole (no connection, not primary, no pipeline)
    /// as [`SessionError::Rpc`] or [`SessionError::Deadline`].
    pub async fn write(&self, updates: Vec<p4::Update>) -> Result<(), SessionError> {
        let n = updates.len();
        let req = p4::WriteRequest {
            device_id: self.cfg.device_id,
            role: self.cfg.role.clone(),
            election_id: Some(election(self.cfg.election_id)),
            updates,
            ..Default::default()
        };
        let mut client = self.client.clone();
        match self.call("Write", client.write(self.request(req))).await {
            Ok(_) => Ok(()),
            Err(SessionError::Rpc { status, device_id, rpc }) => {
                let failure = WriteFailure::from_status(&status, n);
                if failure.failures.is_empty() {
                    Err(SessionError::Rpc { status, device_id, rpc })
                } else {
                    Err(SessionError::Write { device_id, failure })
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Writes in batches of `batch`, sequentially; failure indexes are
    /// positions in `updates`.
    pub async fn write_batched(&self, updates: Vec<p4::Update>, batch: usize) -> Result<(), SessionError> {
        let total = updates.len();
        let batch = batch.max(1);
        let mut failures = vec![];
        let mut last = None;
        // Each Write takes its batch by value: the updates move into the
        // requests, none is copied (a fabric's programming writes millions).
        let mut rest = updates.into_iter();
        for n in 0.. {
            let chunk: Vec<p4::Update> = rest.by_ref().take(batch).collect();
            if chunk.is_empty() {
                break;
            }
            match self.write(chunk).await {
                Ok(()) => {}
                Err(SessionError::Write { failure, .. }) => {
                    let base = n * batch;
                    failures.extend(failure.failures.iter().cloned().map(|mut f| {
                        f.index += base;
                        f
                    }));
                    last = Some((failure.code, failure.message));
                }
                Err(e) => return Err(e),
            }
        }
        match last {
            None => Ok(()),
            Some((code, message)) => Err(SessionError::Write {
                device_id: self.cfg.device_id,
                failure: WriteFailure { batch_len: total, code, message, failures },
            }),
        }
    }

    /// Reads entities (wildcards allowed) and gathers every response.
    pub async fn read(&self, entities: Vec<p4::Entity>) -> Result<Vec<p4::Entity>, SessionError> {
        let mut stream = self.read_stream(entities).await?;
        let mut out = vec![];
        while let Some(batch) = stream.next().await {
            out.extend(batch?);
        }
        Ok(out)
    }

    /// Starts a Read and hands back its responses as they arrive; waiting
    /// for each has the RPC deadline.
    pub async fn read_stream(&self, entities: Vec<p4::Entity>) -> Result<ReadStream, SessionError> {
        let device_id = self.cfg.device_id;
        let req = p4::ReadRequest { device_id, role: self.cfg.role.clone(), entities };
        let mut client = self.client.clone();
        let inner = self.call("Read", client.read(self.request(req))).await?;
        Ok(ReadStream { inner, device_id, timeout: self.cfg.rpc_timeout })
    }

    /// Configures a digest (insert, or modify if it exists) and remembers
    /// it, so that it is configured again after a reconnect.
    pub async fn configure_digest(&self, entry: p4::DigestEntry) -> Result<(), SessionError> {
        match self.write(vec![crate::entity::insert(entry)]).await {
            Err(SessionError::Write { failure, .. }) if failure.only_already_exists() => {
                self.write(vec![crate::entity::modify(entry)]).await?;
            }
            other => other?,
        }
        self.send(Cmd::Digest(entry))
    }

    /// Sends a packet-out with its metadata.
    pub fn packet_out(
        &self,
        payload: Vec<u8>,
        metadata: Vec<p4::PacketMetadata>,
    ) -> Result<(), SessionError> {
        self.send(Cmd::PacketOut(p4::PacketOut { payload, metadata }))
    }

    /// The device's capabilities (its P4Runtime API version).
    pub async fn capabilities(&self) -> Result<String, SessionError> {
        let mut client = self.client.clone();
        let req = p4::CapabilitiesRequest { device_id: self.cfg.device_id };
        Ok(self.call("Capabilities", client.capabilities(self.request(req))).await?.p4runtime_api_version)
    }
}
