//! INT-MD / Telemetry Report v2.0 decoding and the fabric-wide congestion
//! view built from threshold digests, register snapshots and reports.
//!
//! - [`report`]: decode a report from a frame or a UDP payload.
//! - [`seq`]: lost, duplicate and restarted sequence numbers per source.
//! - [`view`]: the fabric-wide congestion view the controller feeds with
//!   threshold crossings, register snapshots and reports.
//! - [`heat`]: the snapshot the view hands to the policy; the interface
//!   between this crate and `ctrl/policy`.
//!
//! The crate depends on no other metaroce crate and never reads a clock:
//! callers pass time in.

mod cursor;
pub mod heat;
mod inner;
pub mod report;
pub mod seq;
pub mod view;

pub use heat::{Heat, PortHeat, PortKey};
pub use report::{decode_frame, decode_udp_payload, ReportError, TelemetryReport};
pub use view::{
    CongestionTree, CongestionView, PortRegisters, RegisterSnapshot, ThresholdCrossing, ViewConfig,
    ViewInput, ViewSummary,
};
