//! The control core: everything the controller decides, with no I/O, no
//! async and no clock (time is an argument). It holds the fabric state
//! (topology, routing with failures, the congestion view), the policy
//! that re-weights groups, the placement that steers large flows and
//! announced jobs, and each switch's desired state.
//!
//! One entry point, [`Core::handle`]: an input (a digest, a register
//! snapshot, a report, a failure, a job, a timer tick) goes in; a
//! [`Step`] comes out with the plans that changed, the decision's notes
//! and when the core wants its next tick ([`Core::next_timer`]). The rule
//! for when to decide lives here, not in the callers. Three callers drive
//! this one core:
//!
//! - the daemon (`metaroce-controller`), in real time, writing the plans
//!   to the switches over P4Runtime;
//! - the replay ([`replay`]), over a recorded input stream;
//! - the simulator's `metaroce` mode (`metaroce-sim`), in virtual time,
//!   adding only its time model (digest, decision and write latencies).

pub mod fabric;
pub mod mode;
pub mod note;
pub mod pair;
pub mod place;
pub mod plan;
pub mod reach;
pub mod replay;

pub use fabric::{Core, CoreConfig, CoreError, Input, Step};
pub use mode::Mode;
pub use note::{Note, NoteKind};
