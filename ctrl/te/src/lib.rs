//! Pure traffic engineering: places large flows and announced jobs on
//! valley-free shortest paths so that the highest link utilisation is as
//! low as it can be, and says which flows to move and why.
//!
//! ```text
//! (topology, routing with failures applied, flows with demands,
//!  current placement = the planner's state, now_ns)
//!      → Plan { moves with reasons, unplaced flows, planned max utilisation, lower bound }
//! ```
//!
//! No clock, no I/O, no async, no tonic: time is an argument. The planner
//! keeps its state in flat arrays (per flow, per directed link, per
//! destination and switch) so a decision after one hot link or one failure
//! touches only the flows on it.
//!
//! # Calling sequence (the controller's state task, or the simulator)
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use metaroce_te::{Demand, FlowKey, Planner, TeConfig};
//! let topo = metaroce_topo::load_file("topologies/leaf-spine-4x4.yaml".as_ref())?;
//! let mut routing = metaroce_topo::Routing::compute(&topo);
//! let mut planner = Planner::new(&topo, &routing, TeConfig::default())?;
//!
//! // Inputs between decisions, in any order:
//! let (a, b) = (topo.hosts[0].ip, topo.hosts[5].ip);
//! planner.upsert(FlowKey::pair(a, b), Demand::announced(1 << 20, None))?; // a job's host pair
//! planner.upsert(FlowKey::flow(a, b, 49152, 17), Demand::rate(40_000_000_000))?; // an elephant seen
//! let changes = routing.fail_link(&topo, 0)?;       // the caller owns the routing
//! planner.routing_changed(&routing, &changes);      // ... and tells the planner
//! planner.set_background(0, 3, 90_000_000_000)?;    // unsteered load on switch 0 port 3
//!
//! // One decision:
//! let plan = planner.plan(5_000_000);
//! for m in &plan.moves {
//!     // m.flow, m.reason (new|rebalance|link_failed|route_changed|stayed|replaced|ended), m.from, m.to
//!     if let Some(to) = &m.to {
//!         for hop in to.steer_hops() {
//!             // write steer entry for m.flow at hop.switch: egress hop.port (toward hop.next)
//!         }
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Mapping a placement to steer entries
//!
//! A [`Path`] lists every switch-to-switch [`Hop`] from the source leaf to
//! the destination leaf: the switch, its egress port (always a member of
//! that switch's route group toward the destination leaf, never on a
//! failed link) and the neighbour it leads to. Where `hop.choice` is true
//! the group has several members and the flow needs one steer entry at
//! `hop.switch` pinning `hop.port`: in `steer_flow` (src, dst, sport, qp)
//! for a [`FlowKey::Flow`], in `steer_pair` (src, dst) for a
//! [`FlowKey::Pair`]. The nhop id is the one the controller installed for
//! that (switch, port) member. [`Path::steer_hops`] yields them
//! downstream first, the order to write them in. For a move, write the
//! `to` entries (downstream first), then delete the `from` entries at
//! switches the `to` path does not pin. An `Ended` move lists the entries
//! to delete. Hops without a choice need no entry.
//!
//! The job API's body is validated and expanded into flows by [`job`]
//! (pure, no HTTP); its [`job::JobRegistry`] keeps who owns which flow.
//!
//! See `README.md` for the model, the algorithm, the guarantees and the
//! tunables.

mod bits;
mod bound;
mod bulk;
mod cells;
mod colour;
mod config;
mod cut;
mod decide;
mod demand;
mod eject;
mod exact;
mod flow;
mod group;
mod hot;
pub mod job;
mod net;
pub mod phase;
mod planner;
mod rearrange;
mod rebatch;
mod report;
mod scratch;
mod search;
pub mod stay;

/// A xorshift64 generator (the unit tests' random inputs, the exact
/// placement's restarts): each call returns the next state (seeded with
/// `x`, never 0). A fixed seed keeps the planner deterministic.
pub(crate) fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

pub use config::{ConfigError, TeConfig};
pub use flow::{Demand, FlowId, FlowKey};
pub use net::MAX_HOPS;
pub use planner::{FlowError, Planner};
pub use report::{Hop, LinkUse, Move, Path, Plan, Reason, Unplaced};
