//! The P4Runtime driver of metaroce: everything between the controller and
//! a switch's P4Runtime server, and a P4Runtime server of its own.
//!
//! - [`proto`]: the P4Runtime protobufs, generated at build time from the
//!   PyPI package `p4runtime==1.6.0` (see `build.rs`).
//! - [`P4Info`]: the program's objects by id, name and unique suffix, with
//!   "did you mean" on a miss; [`codec`] encodes values canonically.
//! - [`entity`]: typed table entries, action profiles, counters, registers,
//!   digests and replication entries built from names.
//! - [`Session`]: one device: connect with backoff, arbitration, pipeline
//!   push with cookie, batched writes with per-update errors, streamed
//!   reads, digests, packet-in/out and idle timeouts over a stream that
//!   reconnects by itself.
//! - [`backoff`]: retry delays, exponential with a cap and jitter.
//! - [`thrift`]: BMv2's Thrift runtime for registers and queues, which
//!   BMv2's P4Runtime server does not offer.
//! - [`tofino`]: the device config of the Tofino SDE's P4Runtime server.
//! - [`server`]: an in-process P4Runtime server with real state, for tests
//!   and for the simulator.
//!
//! Only `ctrl/pipeline` spells P4 names; this crate takes them as strings.
//!
//! ```no_run
//! use metaroce_p4rt::entity::insert;
//! use metaroce_p4rt::session::Bmv2Json;
//! use metaroce_p4rt::{P4Info, Session, SessionConfig};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let info = P4Info::load("p4src/build/main.p4info.txt".as_ref())?;
//! let session = Session::connect(SessionConfig::new("http://127.0.0.1:9559", 1)).await?;
//! session.wait_primary().await?;
//! session.set_pipeline(&info, &Bmv2Json(std::fs::read("p4src/build/main.json")?), None).await?;
//! let entry = info
//!     .table_entry("routing.ipv4_lpm")?
//!     .lpm("hdr.ipv4.dst_addr", std::net::Ipv4Addr::new(10, 0, 1, 0), 24)?
//!     .action("routing.set_group", &[("group", 7u16.into())])?
//!     .build();
//! session.write(vec![insert(entry)]).await?;
//! # Ok(())
//! # }
//! ```

pub mod backoff;
pub mod codec;
pub mod entity;
mod intern;
pub mod p4info;
pub mod server;
pub mod session;
pub mod status;
pub mod thrift;
pub mod tofino;
mod tofino_bin;

pub use backoff::{Backoff, Jitter};
pub use codec::{Bits, ValueError};
pub use p4info::{P4Info, P4InfoError};
pub use session::{Event, Session, SessionConfig, SessionError};
pub use status::{UpdateFailure, WriteFailure};

/// The generated P4Runtime messages and services.
#[allow(missing_docs, missing_debug_implementations, clippy::all, clippy::pedantic)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/protos.rs"));
}
