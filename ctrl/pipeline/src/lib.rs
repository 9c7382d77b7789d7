//! The P4 program's contract in Rust: typed tables, actions, registers and
//! digests of `p4src/`, resolved against the loaded P4Info at start-up.
//! This is the only crate that spells a P4 name ([`names`]); everything
//! else speaks [`Entry`], [`QueueDigest`], [`LargeFlowDigest`] and
//! [`PacketIn`].
//!
//! [`Pipeline::new`] checks the whole P4Info against what the controller
//! expects and reports every disagreement at once, so a stale build fails
//! at start-up instead of at the first write.

pub mod builtin;
mod codec;
mod compact;
mod contract;
pub mod entry;
pub mod names;
mod parity;
pub mod steer;
pub mod target;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use metaroce_p4rt::entity::{self as ent, DigestConfig};
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::{P4Info, P4InfoError};

pub use compact::{check_json, compact_json, JsonError};
pub use entry::{route_weights, Entry, FlowKey, Key, Mac, Phase, RouteTarget};
pub use parity::parity;
pub use steer::{check_steer, check_steer_in, route_members, SteerError};
pub use target::{QueueUnit, Target, Units, UnknownArch};

/// Why the pipeline could not be loaded or an entity not be built or read.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("cannot load the P4Info")]
    P4Info(#[source] P4InfoError),
    #[error("cannot read the device config {path}")]
    DeviceConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the BMv2 device config {path} is not JSON (is it p4c's output for v1model? rebuild it with `make p4`)")]
    Bmv2Json {
        path: PathBuf,
        #[source]
        source: compact::JsonError,
    },
    #[error("refusing the Tofino device config {path}")]
    TofinoConfig {
        path: PathBuf,
        #[source]
        source: metaroce_p4rt::tofino::TofinoConfigError,
    },
    #[error(
        "{path} is a Tofino build directory, but the P4Info is for {target}: pass the TNA P4Info (--p4info)"
    )]
    NotTofino { path: PathBuf, target: &'static str },
    #[error(
        "the P4Info does not match what the controller expects ({} problem(s)); rebuild with `make p4` \
         or use a matching controller:\n  - {}",
        problems.len(),
        problems.join("\n  - ")
    )]
    Mismatch { problems: Vec<String> },
    #[error("cannot build {what}")]
    Build {
        what: String,
        #[source]
        source: P4InfoError,
    },
    #[error("cannot read {what} from the switch: {message}")]
    Parse { what: String, message: String },
    #[error("refusing to write {what}: {message}")]
    Refused { what: String, message: String },
}

/// One queue-threshold crossing, as the switch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDigest {
    pub switch_id: u32,
    pub port: u16,
    /// Queue depth at the crossing (packets on BMv2).
    pub depth: u32,
    /// Switch time of the crossing (µs on BMv2).
    pub timestamp: u64,
    pub seq: u32,
    /// True for an up crossing through `queue_high`.
    pub congested: bool,
}

/// One flow slot's window at the flow's first switch that counted at
/// least the threshold (`Entry::LargeFlowConfig`), as the switch reports
/// it when the window closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LargeFlowDigest {
    pub switch_id: u32,
    /// The flow of the packet that closed the window: the window's own,
    /// unless `collision`.
    pub flow: FlowKey,
    /// Where that packet left (its next hop's port).
    pub egress_port: u16,
    /// IPv4 bytes (total length) the slot counted in the window.
    pub bytes: u32,
    /// The window's actual length, from its first packet to the one that
    /// closed it (µs on BMv2; saturates at `u32::MAX`): the rate is
    /// `bytes / window_us`.
    pub window_us: u32,
    /// The flow slot (flow hash mod `names::FLOW_SLOTS`).
    pub slot: u16,
    /// Another flow used the slot during the window, or closed it: the
    /// bytes may be more than one flow's.
    pub collision: bool,
    /// Switch time of the report (µs on BMv2).
    pub timestamp: u64,
}

impl LargeFlowDigest {
    /// Bytes per second, with the target's time unit in nanoseconds
    /// (1000 on BMv2, 1 on Tofino); `None` for a window of length 0.
    pub fn bytes_per_second(&self, unit_ns: u64) -> Option<f64> {
        let window_ns = u64::from(self.window_us).checked_mul(unit_ns)?;
        (window_ns > 0).then(|| f64::from(self.bytes) * 1e9 / window_ns as f64)
    }
}

/// A list of large-flow digests, decoded: what parsed, and every item
/// that did not (already counted in
/// [`Pipeline::malformed_large_flow_digests`]).
#[derive(Debug, Default)]
pub struct LargeFlows {
    pub flows: Vec<LargeFlowDigest>,
    pub malformed: Vec<PipelineError>,
}

/// What a drain pairing digest reports (`drain_pair_digest_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DrainPairKind {
    /// A data queue pair took a slot at its first leaf: `qp` is the data's
    /// (responder) QP, `psn` its packet's.
    Data,
    /// An ACK or NAK no `qp_pair` entry pairs reached its sender's leaf:
    /// `qp` is the ACK's (requester) QP, `psn` its PSN.
    Ack,
}

/// One pairing digest: the data's direction (`src` sends to `dst`), a QP
/// and a 24-bit PSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainPairDigest {
    pub src: std::net::Ipv4Addr,
    pub dst: std::net::Ipv4Addr,
    pub qp: u32,
    pub psn: u32,
    /// The switch's time of the report (its time unit: µs on BMv2).
    pub timestamp: u64,
    pub kind: DrainPairKind,
}

/// Why the switch sent a packet to the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketInReason {
    Report,
    Arp,
    Other(u8),
}

/// A decoded packet-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn {
    pub ingress_port: u16,
    pub reason: PacketInReason,
    pub payload: Vec<u8>,
}

/// Per-port registers the controller reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortRegister {
    /// Largest queue depth since the controller last wrote 0.
    MaxDepth,
    /// 1 while the port is above `queue_high`.
    Congested,
}

/// Counters the controller reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    DropReasons,
    NewFlowlets,
    EcnMarks,
    ReportsSent,
    /// Flowlets started on a steer entry, by egress port.
    Steered,
}

/// What a switch holds of ours ([`Pipeline::read_installed`]).
#[derive(Debug, Default)]
pub struct Installed {
    pub entries: std::collections::BTreeMap<Key, Entry>,
    /// Entities of our tables that do not parse as any [`Entry`].
    pub unreadable: Vec<PipelineError>,
}

/// The loaded, checked program.
#[derive(Debug, Clone)]
pub struct Pipeline {
    info: P4Info,
    target: Target,
    /// Shared by every clone and every push of the program.
    device_config: metaroce_p4rt::session::Bytes,
    /// [`metaroce_p4rt::session::pipeline_cookie`] of the P4Info and the
    /// device config as given (for BMv2, before [`compact_json`]).
    program_cookie: u64,
    ids: codec::Ids,
    /// Large-flow digest items dropped as malformed, over every clone.
    malformed_large_flows: Arc<AtomicU64>,
}

impl Pipeline {
    /// Checks `info` against the contract of its target (from the P4Info's
    /// architecture); `device_config` is the target's `p4_device_config`
    /// (BMv2 JSON, or a Tofino `P4DeviceConfig`). A Tofino config is
    /// pushed as is; BMv2 JSON without the whitespace between its tokens
    /// ([`compact_json`]: the same document in a sixth of the bytes).
    pub fn new(info: P4Info, device_config: Vec<u8>) -> Result<Self, PipelineError> {
        let target =
            Target::of(&info).map_err(|p| PipelineError::Mismatch { problems: vec![p.to_string()] })?;
        let problems = contract::check(&info, target);
        if !problems.is_empty() {
            return Err(PipelineError::Mismatch { problems });
        }
        let ids = codec::Ids::resolve(&info)
            .map_err(|source| PipelineError::Build { what: "ids".into(), source })?;
        // The cookie names the program as given, not as pushed: a switch
        // that an earlier build programmed with the indented JSON still
        // runs this program. A cookie that changed would push it again,
        // which wipes every table.
        let program_cookie = metaroce_p4rt::session::pipeline_cookie(&info, &device_config);
        let device_config = match target {
            Target::Bmv2 => compact_json(&device_config),
            Target::Tofino => device_config,
        };
        Ok(Pipeline {
            info,
            target,
            device_config: device_config.into(),
            program_cookie,
            ids,
            malformed_large_flows: Arc::default(),
        })
    }

    /// Loads the P4Info and the device config (`p4src/build/`). For a
    /// Tofino P4Info the device config is a bf-p4c output directory
    /// (`tofino.bin`, `context.json`), packed for the SDE's P4Runtime
    /// server, or such a packed file; either is checked whole and for
    /// program [`names::TNA_PROGRAM`] before anything is sent.
    pub fn load(p4info: &Path, device_config: &Path) -> Result<Self, PipelineError> {
        let info = P4Info::load(p4info).map_err(PipelineError::P4Info)?;
        let target =
            Target::of(&info).map_err(|p| PipelineError::Mismatch { problems: vec![p.to_string()] })?;
        let tofino_err = |source| PipelineError::TofinoConfig { path: device_config.to_owned(), source };
        let bytes = if device_config.is_dir() {
            if target != Target::Tofino {
                return Err(PipelineError::NotTofino {
                    path: device_config.to_owned(),
                    target: target.name(),
                });
            }
            let build = metaroce_p4rt::tofino::TofinoConfig::load_dir(device_config, names::TNA_PROGRAM)
                .map_err(tofino_err)?;
            build.encode().map_err(tofino_err)?
        } else {
            let bytes = std::fs::read(device_config)
                .map_err(|source| PipelineError::DeviceConfig { path: device_config.to_owned(), source })?;
            match target {
                Target::Tofino => {
                    metaroce_p4rt::tofino::TofinoConfig::decode(&bytes, names::TNA_PROGRAM)
                        .map_err(tofino_err)?;
                }
                // Checked here, where the file can be named: the push
                // would otherwise be refused by every switch.
                Target::Bmv2 => {
                    compact::check_json(&bytes).map_err(|source| PipelineError::Bmv2Json {
                        path: device_config.to_owned(),
                        source,
                    })?;
                }
            }
            bytes
        };
        Self::new(info, bytes)
    }

    /// The target the program was compiled for.
    pub fn target(&self) -> Target {
        self.target
    }

    /// What numbers mean on the target (time and queue units).
    pub fn units(&self) -> Units {
        self.target.units()
    }

    pub fn info(&self) -> &P4Info {
        &self.info
    }

    pub fn device_config(&self) -> &[u8] {
        &self.device_config
    }

    /// The device config to push, already in the target's form (BMv2
    /// JSON, or a packed Tofino `P4DeviceConfig`): shared, not copied.
    pub fn device(&self) -> Box<dyn metaroce_p4rt::session::DeviceConfig> {
        Box::new(metaroce_p4rt::session::SharedDeviceConfig(self.device_config.clone()))
    }

    /// The program's cookie ([`metaroce_p4rt::session::pipeline_cookie`]
    /// of the P4Info and the device config as loaded, before compaction).
    pub fn program_cookie(&self) -> u64 {
        self.program_cookie
    }

    /// The P4Runtime update that makes `entry` so. Defaults of keyless
    /// tables are always MODIFY; `Delete` of one is refused.
    pub fn update(&self, kind: p4::update::Type, entry: &Entry) -> Result<p4::Update, PipelineError> {
        let entity = self.entity(entry)?;
        let kind = if entry.is_default() {
            if kind == p4::update::Type::Delete {
                return Err(PipelineError::Parse {
                    what: format!("{:?}", entry.key()),
                    message: "the default of a keyless table cannot be deleted".into(),
                });
            }
            p4::update::Type::Modify
        } else {
            kind
        };
        Ok(p4::Update { r#type: kind as i32, entity: Some(entity) })
    }

    /// The P4Runtime entity of `entry`.
    pub fn entity(&self, entry: &Entry) -> Result<p4::Entity, PipelineError> {
        if let Entry::PortDown { port: names::PORT_NONE } = entry {
            return Err(PipelineError::Refused {
                what: format!("{:?}", entry.key()),
                message: format!(
                    "port {} is PORT_NONE, the key a new flowlet without a steer entry checks; ports are 9 bits",
                    names::PORT_NONE
                ),
            });
        }
        codec::build(&self.info, entry)
            .map_err(|source| PipelineError::Build { what: format!("{:?}", entry.key()), source })
    }

    /// Reads that return every entry this crate can parse back.
    pub fn read_requests(&self) -> Vec<p4::Entity> {
        self.ids.read_requests()
    }

    /// The entry an entity read from a switch describes; `None` for
    /// entities that are not control-plane state of ours (counters, the
    /// digest clone session's peers, defaults we never write).
    pub fn parse(&self, entity: &p4::Entity) -> Result<Option<Entry>, PipelineError> {
        self.ids.parse(entity)
    }

    /// Reads back every entry of ours `session`'s switch holds. Entity
    /// kinds the server cannot read (UNIMPLEMENTED, e.g. keyless defaults
    /// on some targets) are skipped: writing those again changes nothing.
    /// Entities of our tables that do not parse are returned apart, for the
    /// caller to report and leave alone.
    pub async fn read_installed(
        &self,
        session: &metaroce_p4rt::Session,
    ) -> Result<Installed, metaroce_p4rt::SessionError> {
        let mut out = Installed::default();
        for req in self.read_requests() {
            let entities = match session.read(vec![req]).await {
                Ok(e) => e,
                Err(e) if e.code() == Some(tonic::Code::Unimplemented) => continue,
                Err(e) => return Err(e),
            };
            for entity in entities {
                match self.parse(&entity) {
                    Ok(Some(e)) => {
                        out.entries.insert(e.key(), e);
                    }
                    Ok(None) => {}
                    Err(err) => out.unreadable.push(err),
                }
            }
        }
        Ok(out)
    }

    /// The digest subscription; `max_list_size` 1 delivers each crossing at once.
    pub fn digest_entry(&self, config: DigestConfig) -> Result<p4::DigestEntry, PipelineError> {
        self.info
            .digest_entry(names::QUEUE_DIGEST, config)
            .map_err(|source| PipelineError::Build { what: "digest entry".into(), source })
    }

    /// True when the list is one of our threshold digests.
    pub fn is_queue_digest(&self, list: &p4::DigestList) -> bool {
        list.digest_id == self.ids.digest
    }

    /// Decodes a list of threshold digests; malformed items are errors.
    pub fn decode_digests(&self, list: &p4::DigestList) -> Result<Vec<QueueDigest>, PipelineError> {
        list.data.iter().map(codec::decode_digest).collect()
    }

    /// The large-flow digest subscription.
    pub fn large_flow_digest_entry(&self, config: DigestConfig) -> Result<p4::DigestEntry, PipelineError> {
        self.info
            .digest_entry(names::LARGE_FLOW_DIGEST, config)
            .map_err(|source| PipelineError::Build { what: "large-flow digest entry".into(), source })
    }

    /// True when the list is one of our large-flow digests.
    pub fn is_large_flow_digest(&self, list: &p4::DigestList) -> bool {
        list.digest_id == self.ids.large_flow_digest
    }

    /// Decodes a list of large-flow digests. A malformed item is dropped
    /// and counted ([`Pipeline::malformed_large_flow_digests`]); the
    /// others are kept.
    pub fn decode_large_flows(&self, list: &p4::DigestList) -> LargeFlows {
        let mut out = LargeFlows::default();
        for item in &list.data {
            match codec::decode_large_flow(item) {
                Ok(d) => out.flows.push(d),
                Err(e) => out.malformed.push(e),
            }
        }
        if !out.malformed.is_empty() {
            self.malformed_large_flows.fetch_add(out.malformed.len() as u64, Ordering::Relaxed);
        }
        out
    }

    /// Whether the program carries the drain rule (the v1model and TNA
    /// ones do): the controller writes its entries only then.
    pub fn has_drain(&self) -> bool {
        self.ids.drain_pair_digest.is_some()
    }

    /// The pairing digest subscription, where the program has the rule.
    pub fn drain_pair_digest_entry(
        &self,
        config: DigestConfig,
    ) -> Option<Result<p4::DigestEntry, PipelineError>> {
        self.has_drain().then(|| {
            self.info
                .digest_entry(names::DRAIN_PAIR_DIGEST, config)
                .map_err(|source| PipelineError::Build { what: "drain pairing digest entry".into(), source })
        })
    }

    /// True when the list is one of our pairing digests.
    pub fn is_drain_pair_digest(&self, list: &p4::DigestList) -> bool {
        self.ids.drain_pair_digest == Some(list.digest_id)
    }

    /// Decodes a list of pairing digests: what parsed, and an error per
    /// item that did not (the caller counts and drops those: a lost report
    /// pairs nothing, and the switch reports again).
    pub fn decode_drain_pairs(&self, list: &p4::DigestList) -> (Vec<DrainPairDigest>, Vec<PipelineError>) {
        let mut ok = Vec::new();
        let mut bad = Vec::new();
        for item in &list.data {
            match codec::decode_drain_pair(item) {
                Ok(d) => ok.push(d),
                Err(e) => bad.push(e),
            }
        }
        (ok, bad)
    }

    /// Large-flow digest items dropped as malformed so far.
    pub fn malformed_large_flow_digests(&self) -> u64 {
        self.malformed_large_flows.load(Ordering::Relaxed)
    }

    pub fn decode_packet_in(&self, p: &p4::PacketIn) -> Result<PacketIn, PipelineError> {
        let fields = self
            .info
            .decode_packet_metadata(names::PACKET_IN, &p.metadata)
            .map_err(|e| PipelineError::Parse { what: "packet-in".into(), message: e.to_string() })?;
        let get = |f: &str| fields.iter().find(|(n, _)| n == f).map(|(_, v)| *v).unwrap_or(0);
        let reason = match get("reason") as u8 {
            names::PACKET_IN_REPORT => PacketInReason::Report,
            names::PACKET_IN_ARP => PacketInReason::Arp,
            r => PacketInReason::Other(r),
        };
        Ok(PacketIn { ingress_port: get("ingress_port") as u16, reason, payload: p.payload.clone() })
    }

    /// Metadata of a packet-out that leaves untouched on `port`.
    pub fn packet_out_metadata(&self, port: u16) -> Result<Vec<p4::PacketMetadata>, PipelineError> {
        self.info
            .packet_metadata(
                names::PACKET_OUT,
                &[("egress_port", port.into()), ("flags", 0u8.into()), ("reserved", 0u8.into())],
            )
            .map_err(|source| PipelineError::Build { what: "packet-out metadata".into(), source })
    }

    /// The P4 name of a per-port register (for the driver's read/write,
    /// which falls back to Thrift on BMv2).
    pub fn register_name(&self, r: PortRegister) -> &'static str {
        match r {
            PortRegister::MaxDepth => names::PORT_MAX_DEPTH,
            PortRegister::Congested => names::PORT_CONGESTED,
        }
    }

    /// A read of every cell of a counter.
    pub fn counter_read(&self, c: Counter) -> Result<p4::Entity, PipelineError> {
        self.counter_cell_read(c, None)
    }

    /// Reads of the cells `indexes` of a counter (a poll of a few ports
    /// reads those, not the whole array).
    pub fn counter_cell_reads(&self, c: Counter, indexes: &[i64]) -> Result<Vec<p4::Entity>, PipelineError> {
        indexes.iter().map(|&i| self.counter_cell_read(c, Some(i))).collect()
    }

    fn counter_cell_read(&self, c: Counter, index: Option<i64>) -> Result<p4::Entity, PipelineError> {
        let name = match c {
            Counter::DropReasons => names::DROP_REASONS,
            Counter::NewFlowlets => names::NEW_FLOWLETS,
            Counter::EcnMarks => names::ECN_MARKS,
            Counter::ReportsSent => names::REPORTS_SENT,
            Counter::Steered => names::STEERED,
        };
        self.info
            .counter_entry(name, index)
            .map(Into::into)
            .map_err(|source| PipelineError::Build { what: format!("counter read {name}"), source })
    }

    /// Which counter a read answer belongs to.
    pub fn counter_of(&self, id: u32) -> Option<Counter> {
        self.ids.counter_of(id)
    }
}

/// The clone session replicas of `port`, as P4Runtime wants them.
pub fn clone_session_entity(id: u32, port: u32) -> p4::Entity {
    ent::clone_session(id, &[(port, 1)], 0, 0)
}
