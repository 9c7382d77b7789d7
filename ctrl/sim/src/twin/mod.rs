//! The pipeline twin: a Rust model of the metaroce P4 program
//! (`p4src/shared`, `p4src/v1model`) that runs its semantics on the state
//! of a [`Switch`] — the driver's in-process P4Runtime server — so that a
//! controller writing to a served twin gets exactly the server's checks,
//! and the twin forwards with the tables, groups, registers, counters,
//! digests and clone sessions the controller wrote. It is held to the
//! same packet vectors as BMv2 (`tests/p4/cases`, run by
//! `cargo test -p metaroce-p4-vectors`).
//!
//! # API (for the fabric simulator and serve mode)
//!
//! ```text
//! Twin::new(&Pipeline, Switch) -> Result<Twin, TwinError>
//!     P4 names come from metaroce_pipeline (its contract check has run);
//!     the switch must get the same P4Info pushed (by a controller, or
//!     Twin::install_pipeline) before packets flow: entry points fail with
//!     TwinError::NoPipeline / OtherPipeline otherwise.
//!
//! Headers::parse(&[u8]) -> Result<Headers, DropReason>;  Headers::deparse()
//!
//! twin.ingress(in_port, &mut Headers, now_us) -> Result<Verdict, TwinError>
//!     Verdict::Forward { port } | ToCpu { reason } | Drop(DropReason)
//!     Fills Headers::meta (the v1model metadata egress needs): keep it
//!     with the headers while the packet waits in your queue.
//!     Steer entries (steer_flow, then steer_pair) pin a NEW flowlet's next
//!     hop unless their port is in port_down; a running flowlet keeps its
//!     own. UDP from an edge port routed to a group goes through the
//!     large-flow detector, whose large_flow_digest_t items reach the
//!     switch's client like threshold digests (decode them with
//!     Pipeline::decode_large_flows; counted in sent_to_controller).
//! twin.egress(port, &mut Headers, depth_pkts, now_us) -> Result<Vec<Output>, TwinError>
//!     At dequeue: depth is the queue depth the packet leaves behind
//!     (BMv2's deq_qdepth). ECN, thresholds and digests (sent through the
//!     switch), max-depth/congested registers, INT source/transit/sink.
//!     Returns the clone copies: Telemetry Reports on collector ports, and
//!     reports to the CPU port (already delivered as packet-in).
//!
//! twin.process(in_port, &[u8], now_us) -> Result<Vec<Output>, TwinError>
//!     Bytes in, bytes out, through the twin's own egress queues
//!     (twin.set_queue(port, Queue { rate_pps, depth_pkts })); a parse
//!     error is counted under its drop reason. twin.advance(now_us) drains
//!     what is due; twin.packet_outs(now_us) sends what the controller sent
//!     as P4Runtime packet-outs (a served switch needs this called, or
//!     they wait); twin.count_drop(reason) counts a drop made outside.
//! twin.sent_to_controller() -> (digest items, packet-ins) handed to the
//!     switch for its primary client, to know when a client has them all.
//! ```
//!
//! Time is always the caller's `now_us` (the contract's BMv2 units:
//! timestamps in µs, 48 bits; queue depth in packets). There is no wall
//! clock here.

pub mod drain;
mod drain_step;
mod egress;
mod hash;
mod headers;
mod ids;
mod ingress;
mod large_flows;
mod process;
mod report;
pub mod window;

use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::server::Switch;
use metaroce_p4rt::P4Info;
use metaroce_pipeline::Pipeline;
use tokio::sync::mpsc::UnboundedReceiver;

pub use headers::{Aeth, Bridged, Bth, Ethernet, Headers, Int, IntHop, IntMd, IntShim, Ipv4, Tcp, Udp, L4};
pub use process::Queue;

use ids::{masked, Ids, RegisterId, TableId};
use process::Queues;

/// The CPU port: packet-in and packet-out.
pub const CPU_PORT: u32 = metaroce_pipeline::names::CPU_PORT;
/// Timestamps are 48-bit (µs on BMv2).
const TIME_MASK: u64 = (1 << 48) - 1;

/// Why the program drops a packet: the index of `drop_reasons`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Malformed or truncated header.
    ParserError,
    NoRoute,
    TtlExpired,
    NoNextHop,
    IntMalformed,
    Ipv4Invalid,
    UnsupportedEtherType,
    /// A reason the contract does not name (a `drop(reason)` written so).
    Other(u8),
}

impl DropReason {
    pub fn code(self) -> u8 {
        match self {
            DropReason::ParserError => 1,
            DropReason::NoRoute => 2,
            DropReason::TtlExpired => 3,
            DropReason::NoNextHop => 4,
            DropReason::IntMalformed => 5,
            DropReason::Ipv4Invalid => 6,
            DropReason::UnsupportedEtherType => 7,
            DropReason::Other(c) => c,
        }
    }

    /// The reason as `p4src` names it, for people.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::ParserError => "parser_error",
            DropReason::NoRoute => "no_route",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::NoNextHop => "no_next_hop",
            DropReason::IntMalformed => "int_malformed",
            DropReason::Ipv4Invalid => "ipv4_invalid",
            DropReason::UnsupportedEtherType => "unsupported_ether_type",
            DropReason::Other(_) => "other",
        }
    }

    pub fn from_code(c: u8) -> Self {
        match c {
            1 => DropReason::ParserError,
            2 => DropReason::NoRoute,
            3 => DropReason::TtlExpired,
            4 => DropReason::NoNextHop,
            5 => DropReason::IntMalformed,
            6 => DropReason::Ipv4Invalid,
            7 => DropReason::UnsupportedEtherType,
            c => DropReason::Other(c),
        }
    }
}

/// What ingress decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// To egress on this port.
    Forward {
        port: u32,
    },
    /// To the controller as a packet-in with this reason (ARP).
    ToCpu {
        reason: u8,
    },
    Drop(DropReason),
}

/// Something the switch sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A frame on a data port, leaving at `at_us`.
    Packet { port: u32, bytes: Vec<u8>, at_us: u64 },
    /// A frame for the controller; the twin has handed it to the switch's
    /// primary client already.
    PacketIn { ingress_port: u16, reason: u8, payload: Vec<u8> },
}

/// Why the twin cannot run.
#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    #[error("the P4Info does not offer what the twin models: {problem}")]
    Contract { problem: String },
    #[error("switch {device_id} has no pipeline: push the program before sending packets")]
    NoPipeline { device_id: u64 },
    #[error("switch {device_id} runs a program whose P4Info differs from the twin's")]
    OtherPipeline { device_id: u64 },
    #[error("switch {device_id}: its packet-outs are already taken by another reader")]
    PacketOutsTaken { device_id: u64 },
    #[error("switch {device_id} has no {what}")]
    State { device_id: u64, what: String },
    #[error("port {port} is not a 9-bit data port")]
    BadPort { port: u32 },
    #[error("queue of port {port}: {message}")]
    BadQueue { port: u32, message: String },
    #[error("cannot install the pipeline on switch {device_id}: {message}")]
    Install { device_id: u64, message: String },
}

/// A table lookup's outcome: the action's id and parameters, if any.
pub(crate) struct Hit {
    pub hit: bool,
    pub action: Option<p4::Action>,
}

impl Hit {
    /// The parameters when the action is `a`.
    fn params(&self, a: &ids::ActionId) -> Option<Vec<u128>> {
        self.action.as_ref().filter(|x| x.action_id == a.id).map(|x| a.values(x))
    }
}

/// One switch's pipeline twin.
#[derive(Debug)]
pub struct Twin {
    switch: Switch,
    info: P4Info,
    /// Shared with the loaded program, not copied per switch.
    device_config: metaroce_p4rt::session::Bytes,
    ids: Ids,
    packet_outs: UnboundedReceiver<p4::PacketOut>,
    /// The switch's pipeline commits seen, and whether the last is ours.
    pushes_seen: u64,
    ours: bool,
    queues: Queues,
    /// Digest items and packet-ins handed to the switch for its client.
    digests_sent: u64,
    packet_ins_sent: u64,
}

impl Twin {
    /// A twin of the program `pipeline` describes over `switch`'s state.
    /// Takes the switch's packet-outs (one reader per switch).
    pub fn new(pipeline: &Pipeline, switch: Switch) -> Result<Self, TwinError> {
        let ids = Ids::resolve(pipeline.info())?;
        let packet_outs =
            switch.take_packet_outs().ok_or(TwinError::PacketOutsTaken { device_id: switch.device_id() })?;
        Ok(Twin {
            info: pipeline.info().clone(),
            device_config: pipeline.device().bytes(),
            ids,
            packet_outs,
            pushes_seen: 0,
            ours: false,
            queues: Queues::default(),
            digests_sent: 0,
            packet_ins_sent: 0,
            switch,
        })
    }

    pub fn switch(&self) -> &Switch {
        &self.switch
    }

    /// Commits the twin's own program on the switch, as a controller's
    /// pipeline push would (for runs without a controller).
    pub fn install_pipeline(&self) -> Result<(), TwinError> {
        let config = p4::ForwardingPipelineConfig {
            p4info: Some(self.info.raw().clone()),
            p4_device_config: self.device_config.clone(),
            cookie: None,
        };
        self.switch.commit_pipeline(config).map_err(|s| TwinError::Install {
            device_id: self.switch.device_id(),
            message: s.message().to_owned(),
        })
    }

    /// Fails unless the switch runs the program the twin models.
    fn check_pipeline(&mut self) -> Result<(), TwinError> {
        let device_id = self.switch.device_id();
        let pushes = self.switch.pipeline_pushes();
        if pushes != self.pushes_seen {
            self.pushes_seen = pushes;
            self.ours = self.switch.p4info().is_some_and(|i| i.raw() == self.info.raw());
            if !self.ours && pushes > 0 && self.switch.p4info().is_some() {
                return Err(TwinError::OtherPipeline { device_id });
            }
        }
        match (self.ours, pushes) {
            (true, _) => Ok(()),
            (false, 0) => Err(TwinError::NoPipeline { device_id }),
            (false, _) => Err(TwinError::OtherPipeline { device_id }),
        }
    }

    fn state_err(&self, what: impl Into<String>) -> TwinError {
        TwinError::State { device_id: self.switch.device_id(), what: what.into() }
    }

    /// Looks `key` up in `t`, `hash` choosing a selector group's member.
    fn lookup(&self, t: &TableId, key: &[u128], hash: u64) -> Result<Hit, TwinError> {
        let k: Vec<(u32, Vec<u8>)> =
            t.fields.iter().zip(key).map(|((id, w), v)| (*id, ids::encode(*v, *w))).collect();
        let h = self
            .switch
            .lookup(t.id, &k, hash, 0)
            .ok_or_else(|| self.state_err(format!("table {}", t.name)))?;
        Ok(Hit { hit: h.hit, action: h.action })
    }

    fn reg(&self, r: RegisterId, index: u32) -> Result<u128, TwinError> {
        let cell = self
            .switch
            .register_cell(r.id, index as usize)
            .ok_or_else(|| self.state_err(format!("register cell {}[{index}]", r.name)))?;
        Ok(metaroce_p4rt::codec::decode_u128(&cell, r.width).unwrap_or(0))
    }

    fn set_reg(&self, r: RegisterId, index: u32, v: u128) -> Result<(), TwinError> {
        if self.switch.set_register_cell(r.id, index as usize, ids::encode(v, r.width)) {
            Ok(())
        } else {
            Err(self.state_err(format!("register cell {}[{index}]", r.name)))
        }
    }

    /// Counts one packet; a cell past the counter's end is not counted
    /// (BMv2 ignores it too).
    fn count(&self, counter: u32, index: u32) {
        if !self.switch.count(counter, index as usize, 0) {
            tracing::debug!(device = self.switch.device_id(), counter, index, "counter cell out of range");
        }
    }

    /// Counts a drop the way ingress does (`drop_reasons[reason]`).
    pub fn count_drop(&mut self, reason: DropReason) -> Result<(), TwinError> {
        self.check_pipeline()?;
        self.count_reason(reason);
        Ok(())
    }

    /// `drop_reasons[reason]`; reason 0 (DROP_NONE) is never counted.
    fn count_reason(&self, reason: DropReason) {
        if reason.code() != 0 {
            self.count(self.ids.drop_reasons, u32::from(reason.code()));
        }
    }

    /// How many digest items and packet-ins the twin handed to the switch
    /// for its primary client (a digest the server refused as a duplicate
    /// awaiting its ack is not counted), to know when a client has them all.
    pub fn sent_to_controller(&self) -> (u64, u64) {
        (self.digests_sent, self.packet_ins_sent)
    }

    /// Sends a packet-in to the switch's primary client.
    fn packet_in(&mut self, ingress_port: u32, reason: u8, payload: Vec<u8>) -> Output {
        let values = [u128::from(ingress_port), u128::from(reason), 0];
        let meta = self
            .ids
            .packet_in
            .iter()
            .zip(values)
            .map(|((id, w), v)| p4::PacketMetadata { metadata_id: *id, value: ids::encode(v, *w) })
            .collect();
        if self.switch.packet_in(payload.clone(), meta) {
            self.packet_ins_sent += 1;
        } else {
            tracing::debug!(device = self.switch.device_id(), reason, "packet-in without a primary client");
        }
        Output::PacketIn { ingress_port: masked(u128::from(ingress_port), 16) as u16, reason, payload }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_parity;
#[cfg(test)]
mod tests_steer;
