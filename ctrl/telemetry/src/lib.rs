//! INT-MD / Telemetry Report v2.0 decoding and the fabric-wide congestion
//! view built from threshold digests, register snapshots and reports.
//!
//! [`heat`] is the snapshot the view hands to the policy: it is the
//! interface between this crate and `ctrl/policy`.

pub mod heat;

pub use heat::{Heat, PortHeat, PortKey};
