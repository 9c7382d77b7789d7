//! Packet test vectors for the metaroce P4 program (`tests/p4/cases/`):
//! their schema ([`case`], documented in `tests/p4/README.md`), the packet
//! builder and matcher ([`packet`]), the target-neutral comparison of what a
//! switch did with what a case expects ([`check`]), and the runner on BMv2
//! `simple_switch_grpc` ([`bmv2`], [`run`]).
//!
//! The simulator's pipeline twin is meant to pass the same files: it loads
//! them with [`case::load_dir`], plays the steps, and hands its
//! [`check::Observed`] to [`check::check`].

pub mod bmv2;
pub mod case;
pub mod check;
pub mod packet;
pub mod run;
pub mod yaml;

pub use yaml::VectorError;
