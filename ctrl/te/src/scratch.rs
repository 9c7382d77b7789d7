//! The buffers a decision fills and empties again, kept by the planner
//! between decisions, and the planner's `Clone`, which leaves them out.
//!
//! A controller decides over and over with one planner. Fresh buffers in
//! every decision would be fresh memory every time: the allocator hands
//! freed pages back to the kernel within milliseconds, and the kernel
//! zeroes each page again on first touch (on the bench's 100,000 new
//! flows that zeroing was a fifth of the decision, the half of it that
//! is not the output). Kept here, a planner that has decided before
//! reuses their capacity. They carry nothing from one decision to the
//! next: each use clears them first.

use crate::demand;
use crate::flow::{FlowId, FlowKey};
use crate::group::Member;
use crate::planner::{LinkLoads, Planner};
use crate::search::Route;

/// Buffers of one decision (see the module doc). Not state: a clone of
/// the planner starts with none.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// Rates (`Planner::refresh_rates`): the live flows, their NICs and
    /// offers, their rates, the max-min's own buffers, and the grouping's
    /// input and output.
    pub live: Vec<FlowId>,
    pub input: Vec<(u32, u32, u64)>,
    pub rates: Vec<u64>,
    pub max_min: demand::Bufs,
    pub members: Vec<Member>,
    pub group_of: Vec<Option<u32>>,
    /// New flows (`bulk.rs`).
    pub bulk: crate::bulk::Bufs,
    /// The log's new flows with their keys and routes as placed, the
    /// report's reads of keys and routes, and per flow (a bit each)
    /// whether the decision put it on a route (`Planner::listed_on`).
    pub new: Vec<FlowId>,
    pub placed: Vec<(FlowKey, Route)>,
    pub now: Vec<(FlowKey, Route, bool)>,
    pub moved: crate::bits::Bits,
}

impl Clone for Scratch {
    /// None of the buffers: they hold nothing between decisions.
    fn clone(&self) -> Self {
        Scratch::default()
    }
}

impl Clone for Planner {
    fn clone(&self) -> Self {
        Planner {
            config: self.config.clone(),
            net: self.net.clone(),
            flows: self.flows.clone(),
            links: self.links.clone(),
            inbox: self.inbox.clone(),
            decision: self.decision,
            tally: self.tally.clone(),
            to_dest: self.to_dest.clone(),
            groups: self.groups.clone(),
            scratch: Scratch::default(),
        }
    }

    /// Makes this planner a copy of `source` that keeps its own buffers:
    /// the scratch of a decision, and the room in each per-link and
    /// per-destination flow list (lists never shrink as flows leave, so
    /// a planner that has decided before has that room). What it
    /// decides next is what a clone of `source` would decide.
    fn clone_from(&mut self, source: &Self) {
        // Every field, so that a new one cannot be forgotten here.
        let Planner { config, net, flows, links, inbox, decision, tally, to_dest, groups, scratch: _ } = self;
        config.clone_from(&source.config);
        net.clone_from(&source.net);
        flows.clone_from(&source.flows);
        let LinkLoads { load, bg, on, hot, forced } = links;
        load.clone_from(&source.links.load);
        bg.clone_from(&source.links.bg);
        on.clone_from(&source.links.on);
        hot.clone_from(&source.links.hot);
        forced.clone_from(&source.links.forced);
        inbox.clone_from(&source.inbox);
        *decision = source.decision;
        tally.clone_from(&source.tally);
        to_dest.clone_from(&source.to_dest);
        groups.clone_from(&source.groups);
    }
}
