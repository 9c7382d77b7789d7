//! metaroce's forwarder for in-order NICs: a flow changes path only when
//! nothing of it is in flight.
//!
//! Every switch remembers the port each flow (5-tuple) took there. A flow
//! keeps that port until a packet arrives that its first leaf found
//! drained ([`PacketInfo::fresh`], set from `twin/drain.rs`: every packet
//! forwarded before it has been acknowledged, no NAK outstanding, no slot
//! collision). Only then may the packet take a new path:
//! - its steer entry, if it has one whose port is a live member of the
//!   group;
//! - else, with [`Repick::Drained`], a member drawn by the current weights
//!   (the controller's re-weighting reaches running flows at their drained
//!   points), or with [`Repick::Never`] the port it had (weights reach new
//!   flows only).
//!
//! A new flow picks the same way at its first packet. The one exception to
//! the rule is a failover: a flow whose port left the group (the link
//! died) moves at once, to a member drawn by weight (not to its steer
//! entry, which the P4 program looks up for new flowlets only), and a
//! reordering that causes is counted as a failover's.

use std::collections::HashMap;

use crate::control::forward::{move_cause, steer_member, weighted, Forwarder, NetView, PacketInfo};
use crate::engine::events::PortId;
use crate::engine::net::FibMember;
use crate::engine::steer::SteerKey;
use crate::report::stats::Reorder;
use crate::rng::Rng;

pub use crate::scenario::config::Repick;

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct Drained {
    rng: Rng,
    repick: Repick,
    /// (switch, the flow's 5-tuple hash) → the port it takes there. An
    /// exact table: the P4 program's slotted one and its collision rule
    /// are in `p4src/README.md`.
    paths: HashMap<(u32, u64), PortId>,
    /// Packets that picked a port (new flows, drained flows, failovers).
    pub picks: u64,
    started: bool,
    steered: Option<SteerKey>,
    moved: Option<Reorder>,
}

impl Drained {
    pub fn new(seed: u64, repick: Repick) -> Self {
        Drained {
            rng: Rng::new(seed ^ 0xD8A1),
            repick,
            paths: HashMap::new(),
            picks: 0,
            started: false,
            steered: None,
            moved: None,
        }
    }
}

impl Forwarder for Drained {
    fn choose(
        &mut self,
        _now: u64,
        switch: u32,
        group: &[FibMember],
        total: u32,
        pkt: &PacketInfo,
        net: &dyn NetView,
    ) -> usize {
        self.started = false;
        self.steered = None;
        self.moved = None;
        let key = (switch, pkt.tuple_hash);
        let prev = self.paths.get(&key).copied();
        let member = prev.and_then(|p| group.iter().position(|m| m.port == p));
        if let Some(i) = member {
            if !pkt.fresh {
                return i;
            }
        }
        let failover = prev.is_some() && member.is_none();
        self.started = true;
        self.picks += 1;
        // A running flowlet (not fresh) whose port left the group fails
        // over by a draw, as the P4 program does: steer entries are looked
        // up for new flowlets only.
        let steer = if failover && !pkt.fresh { None } else { steer_member(net, switch, group, pkt) };
        let i = match (steer, member, self.repick) {
            (Some((i, key)), _, _) => {
                self.steered = Some(key);
                i
            }
            (None, Some(i), Repick::Never) => i,
            _ => weighted(group, self.rng.below(u64::from(total.max(1))) as u32),
        };
        let port = group[i].port;
        if prev.is_some_and(|p| p != port) {
            self.moved = Some(move_cause(failover, self.steered.is_some()));
        }
        self.paths.insert(key, port);
        i
    }

    fn started_flowlet(&self) -> bool {
        self.started
    }

    fn steered(&self) -> Option<SteerKey> {
        self.steered
    }

    fn moved(&self) -> Option<Reorder> {
        self.moved
    }

    fn moves_when_drained(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Steer(Option<PortId>);
    impl NetView for Steer {
        fn queue_bytes(&self, _: PortId) -> u64 {
            0
        }
        fn steer(&self, _: u32, p: &PacketInfo) -> Option<(PortId, SteerKey)> {
            let key = SteerKey { src: p.src as u32, dst: p.dst as u32, sport: Some(p.sport) };
            self.0.map(|port| (port, key))
        }
    }

    fn uplinks() -> Vec<FibMember> {
        (0..4).map(|p| FibMember { port: 20 + p, weight: 1 }).collect()
    }

    fn pkt(fresh: bool) -> PacketInfo {
        PacketInfo { tuple_hash: 5, src: 0, dst: 1, sport: 9, bytes: 4096, fresh }
    }

    #[test]
    fn a_steer_entry_lands_only_at_a_drained_packet() {
        let g = uplinks();
        let mut d = Drained::new(1, Repick::Drained);
        let first = d.choose(0, 3, &g, 4, &pkt(true), &Steer(None));
        let other = (first + 1) % 4;
        let moved_to = Steer(Some(g[other].port));
        for t in 1..100 {
            assert_eq!(d.choose(t, 3, &g, 4, &pkt(false), &moved_to), first, "in flight: the flow stays");
            assert_eq!(d.moved(), None);
        }
        assert_eq!(d.choose(100, 3, &g, 4, &pkt(true), &moved_to), other, "drained: the entry lands");
        assert_eq!(d.moved(), Some(Reorder::Steer));
        assert!(d.steered().is_some() && d.started_flowlet());
    }

    #[test]
    fn a_failover_moves_at_once_and_never_picks_the_dead_port() {
        let g = uplinks();
        let mut d = Drained::new(1, Repick::Never);
        let first = d.choose(0, 3, &g, 4, &pkt(true), &Steer(None));
        let survivors: Vec<FibMember> = g.iter().copied().filter(|m| m.port != g[first].port).collect();
        let i = d.choose(1, 3, &survivors, 3, &pkt(false), &Steer(None));
        assert_ne!(survivors[i].port, g[first].port);
        assert_eq!(d.moved(), Some(Reorder::Failover));
        // A failover in flight draws even when a live steer entry exists
        // (the P4 program looks entries up for new flowlets only); a
        // drained packet whose port left takes the entry.
        let (a, b) = (g[first].port, survivors[0].port);
        let mut d = Drained::new(1, Repick::Never);
        assert_eq!(g[d.choose(0, 3, &g, 4, &pkt(true), &Steer(Some(a)))].port, a);
        d.choose(1, 3, &survivors, 3, &pkt(false), &Steer(Some(b)));
        assert!(d.started_flowlet() && d.steered().is_none(), "in flight: drawn");
        let mut d = Drained::new(1, Repick::Never);
        d.choose(0, 3, &g, 4, &pkt(true), &Steer(Some(a)));
        assert_eq!(survivors[d.choose(1, 3, &survivors, 3, &pkt(true), &Steer(Some(b)))].port, b);
        assert!(d.steered().is_some(), "drained: the entry");
    }

    #[test]
    fn never_keeps_a_drained_flow_where_it_is_and_drained_redraws_it() {
        let g = uplinks();
        let mut never = Drained::new(1, Repick::Never);
        let first = never.choose(0, 3, &g, 4, &pkt(true), &Steer(None));
        assert!((1..200).all(|t| never.choose(t, 3, &g, 4, &pkt(true), &Steer(None)) == first));
        let mut drained = Drained::new(1, Repick::Drained);
        let picks: std::collections::BTreeSet<usize> =
            (0..200).map(|t| drained.choose(t, 3, &g, 4, &pkt(true), &Steer(None))).collect();
        assert_eq!(picks.len(), 4, "re-drawn by weight at every drained packet");
    }
}
