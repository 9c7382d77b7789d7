//! Packet test vectors for the metaroce P4 program (`tests/p4/cases/`):
//! their schema ([`case`], documented in `tests/p4/README.md`), the packet
//! builder and matcher ([`packet`]), the target-neutral comparison of what a
//! switch did with what a case expects ([`check`]), and the runner on BMv2
//! `simple_switch_grpc` ([`bmv2`], [`run`]).
//!
//! Cases run on a [`target::Target`]: BMv2 ([`target::Bmv2`]) or the
//! simulator's pipeline twin ([`twin::TwinTarget`], in virtual time), which
//! must pass the same files; `cargo test` runs every target-neutral case
//! on the twin.

pub mod bmv2;
pub mod case;
pub mod check;
pub mod packet;
pub mod run;
pub mod target;
pub mod twin;
pub mod yaml;

pub use yaml::VectorError;
