//! The forwarding decision, behind a trait so that other policies plug in
//! as routing modes: the P4 pipeline twin and the controller's weights come
//! in a later issue. The baselines here are static ECMP, LetFlow-like
//! random flowlets, and per-packet spraying.

use metaroce_topo::HostId;

use crate::engine::events::{Packet, PortId};
use crate::engine::net::FibMember;
use crate::engine::steer::SteerKey;
use crate::report::stats::Reorder;
use crate::rng::{mix64, Rng};
use crate::scenario::config::{Ordering, Repick, RoutingMode};

/// What a switch sees of a packet when it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInfo {
    /// Hash of the 5-tuple (src IP, dst IP, UDP, src port, 4791).
    pub tuple_hash: u64,
    pub src: HostId,
    pub dst: HostId,
    pub sport: u16,
    pub bytes: u32,
    /// The flow's first leaf found nothing of it in flight (see
    /// [`Forwarder::moves_when_drained`]).
    pub fresh: bool,
}

/// The live state a policy may look at: queue depths by port.
pub trait NetView {
    fn queue_bytes(&self, port: PortId) -> u64;

    /// The steer entry of `switch` that matches the packet, with the key it
    /// matched (a flow entry before a pair entry); none by default.
    fn steer(&self, _switch: u32, _pkt: &PacketInfo) -> Option<(PortId, SteerKey)> {
        None
    }
}

/// Chooses the member of a next-hop group a packet takes.
pub trait Forwarder: Send + std::fmt::Debug {
    /// `group` is never empty and `total_weight` is the sum of its weights.
    /// Returns an index into `group`.
    fn choose(
        &mut self,
        now_ps: u64,
        switch: u32,
        group: &[FibMember],
        total_weight: u32,
        pkt: &PacketInfo,
        net: &dyn NetView,
    ) -> usize;

    /// The index `choose` would return now for a packet of 5-tuple hash
    /// `tuple_hash`, where the forwarder can tell without a change to its
    /// state; None, the default, where it cannot. A hint only: the engine
    /// reads ahead with it (`engine/ahead.rs`) and never routes by it.
    fn peek(&self, _switch: u32, _group: &[FibMember], _total: u32, _tuple_hash: u64) -> Option<usize> {
        None
    }

    /// True when the last `choose` began a new flowlet (forwarders without
    /// flowlets never do). The engine asks only after a group rewrite, to
    /// see when traffic has moved.
    fn started_flowlet(&self) -> bool {
        false
    }

    /// The steer entry the last `choose` started a flowlet on, if it did.
    fn steered(&self) -> Option<SteerKey> {
        None
    }

    /// Why the last `choose` sent the flow on another port than it took
    /// here before, if it did (forwarders that remember a flow's port).
    fn moved(&self) -> Option<Reorder> {
        None
    }

    /// What moves a flow whose forwarder records no move: spraying, or
    /// else routing changing under it (a failure).
    fn path_change_cause(&self) -> Reorder {
        Reorder::Failover
    }

    /// True for a forwarder that changes a flow's path only at a packet
    /// its first leaf found drained ([`PacketInfo::fresh`]): the engine
    /// then keeps the drain table (`twin/drain.rs`).
    fn moves_when_drained(&self) -> bool {
        false
    }

    /// True for a forwarder that is a whole switch pipeline (the served
    /// twin): the engine then asks [`Forwarder::route`] first and calls
    /// [`Forwarder::egress`] at every switch dequeue.
    fn is_pipeline(&self) -> bool {
        false
    }

    /// A whole switch pipeline routes from its own tables instead of the
    /// simulator's groups:
    /// `in_port` is the port number the packet arrived on at `switch`, and
    /// the answer is the egress port number there, or a drop. `None`, the
    /// default, means: choose from the group. `wire_psn` is the packet's
    /// PSN in its queue pair's 24-bit sequence (the BTH's).
    fn route(
        &mut self,
        _now_ps: u64,
        _switch: u32,
        _in_port: u16,
        _pkt: &Packet,
        _wire_psn: u32,
    ) -> Option<Route> {
        None
    }

    /// A whole switch pipeline sees an acknowledgement pass the sender's
    /// leaf `leaf`: the receiver `dst_host` has every PSN of the queue
    /// pair from `src_host` below `wire_psn` (or, `nak`, asks for it).
    /// Serve mode carries ACKs out of band, so this is how a twin's drain
    /// rule sees them.
    fn leaf_sees_ack(
        &mut self,
        _now_ps: u64,
        _leaf: u32,
        _src_host: u32,
        _dst_host: u32,
        _wire_psn: u32,
        _nak: bool,
    ) {
    }

    /// Egress processing as a packet leaves switch `switch` on `port`,
    /// with `depth_pkts` packets behind it; it may mark the packet CE.
    fn egress(&mut self, _now_ps: u64, _switch: u32, _port: u16, _depth_pkts: usize, _pkt: &mut Packet) {}

    /// True when the run is to end now (asked every 1,024 events).
    fn halted(&self) -> bool {
        false
    }

    /// Topology link `link` went down (`up` false) or came back at
    /// `now_ps`, the physical instant. A pipeline forwarder may tell the
    /// control plane that watches its links; the default ignores it.
    fn link(&mut self, _now_ps: u64, _link: usize, _up: bool) {}
}

/// What a whole switch pipeline decided (see [`Forwarder::route`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Out of this port number of the switch.
    Port(u16),
    /// Dropped by the pipeline (it counted why).
    Drop,
}

/// Builds the forwarder of a mode. metaroce's controller rewrites the
/// weights and steer entries it forwards by. On in-order NICs it moves a
/// flow only once the flow is drained (`drained.rs`), never at a mere gap:
/// under PFC a gap does not mean the flow's packets have left the old
/// path. On out-of-order NICs reordering costs nothing, and it moves flows
/// at flowlet gaps as the flowlet baseline does.
pub fn for_mode(
    mode: RoutingMode,
    ordering: Ordering,
    repick: Repick,
    seed: u64,
    switches: usize,
    flowlet_timeout_ps: u64,
) -> Box<dyn Forwarder> {
    match mode {
        RoutingMode::Ecmp => Box::new(Ecmp { seed }),
        RoutingMode::Metaroce if ordering == Ordering::GoBackN => {
            Box::new(super::drained::Drained::new(seed, repick))
        }
        RoutingMode::Flowlet | RoutingMode::Metaroce => {
            Box::new(Flowlet::new(seed, switches, flowlet_timeout_ps))
        }
        RoutingMode::Spray => Box::new(Spray::new(seed)),
    }
}

/// The member of `group` a packet's steer entry at `switch` names, with
/// the key it matched, if the entry's port is a live member (failover
/// beats steering).
pub(crate) fn steer_member(
    net: &dyn NetView,
    switch: u32,
    group: &[FibMember],
    pkt: &PacketInfo,
) -> Option<(usize, SteerKey)> {
    let (port, key) = net.steer(switch, pkt)?;
    let i = group.iter().position(|m| m.port == port && m.weight > 0)?;
    Some((i, key))
}

/// Why a forwarder that remembers a flow's port gave it another one.
pub(crate) fn move_cause(failover: bool, steered: bool) -> Reorder {
    match () {
        _ if failover => Reorder::Failover,
        _ if steered => Reorder::Steer,
        _ => Reorder::Flowlet,
    }
}

/// The member a point `x` in `0..total` falls on, weights laid end to end.
pub fn weighted(group: &[FibMember], x: u32) -> usize {
    let mut acc = 0u32;
    for (i, m) in group.iter().enumerate() {
        acc += m.weight;
        if x < acc {
            return i;
        }
    }
    group.len() - 1
}

/// The per-switch hash a switch computes over the 5-tuple: switches use
/// different seeds, as real fabrics do to avoid hash polarization.
pub fn switch_hash(seed: u64, switch: u32, tuple_hash: u64) -> u64 {
    mix64(tuple_hash ^ mix64(seed ^ (u64::from(switch) << 32 | 0xEC)))
}

/// Static ECMP over the weighted group.
#[derive(Debug, Clone)]
pub struct Ecmp {
    pub seed: u64,
}

impl Forwarder for Ecmp {
    fn choose(
        &mut self,
        _: u64,
        switch: u32,
        group: &[FibMember],
        total: u32,
        pkt: &PacketInfo,
        _: &dyn NetView,
    ) -> usize {
        let h = switch_hash(self.seed, switch, pkt.tuple_hash);
        weighted(group, (h % u64::from(total.max(1))) as u32)
    }

    fn peek(&self, switch: u32, group: &[FibMember], total: u32, tuple_hash: u64) -> Option<usize> {
        let h = switch_hash(self.seed, switch, tuple_hash);
        Some(weighted(group, (h % u64::from(total.max(1))) as u32))
    }
}

/// Slots per switch in the flowlet table (hash collisions share a slot, as
/// in hardware).
pub const FLOWLET_SLOTS: usize = 4096;

/// LetFlow: a packet arriving more than the flowlet timeout after the last
/// one of its slot starts a new flowlet on its steer entry's port, if it has
/// one in the group, else on a member drawn by weight (random among
/// equals). A running flowlet keeps its port whatever happens to the
/// weights; only a port that left the group (a failure) moves it, to a
/// drawn member. The rule is the P4 program's, held to the twin by
/// `twin/tests_parity.rs`.
#[derive(Debug, Clone)]
pub struct Flowlet {
    seed: u64,
    timeout_ps: u64,
    rng: Rng,
    /// `[switch * FLOWLET_SLOTS + slot]` → (last seen, port).
    table: Vec<(u64, PortId)>,
    pub new_flowlets: u64,
    started: bool,
    steered: Option<SteerKey>,
    moved: Option<Reorder>,
}

impl Flowlet {
    pub fn new(seed: u64, switches: usize, timeout_ps: u64) -> Self {
        Flowlet {
            seed,
            timeout_ps,
            rng: Rng::new(seed ^ 0xF10E),
            table: vec![(0, PortId::MAX); switches * FLOWLET_SLOTS],
            new_flowlets: 0,
            started: false,
            steered: None,
            moved: None,
        }
    }
}

impl Forwarder for Flowlet {
    fn choose(
        &mut self,
        now: u64,
        switch: u32,
        group: &[FibMember],
        total: u32,
        pkt: &PacketInfo,
        net: &dyn NetView,
    ) -> usize {
        let slot = (switch_hash(self.seed, switch, pkt.tuple_hash) as usize) & (FLOWLET_SLOTS - 1);
        let e = &mut self.table[switch as usize * FLOWLET_SLOTS + slot];
        let idle = now.saturating_sub(e.0) > self.timeout_ps;
        e.0 = now;
        // Slots shared by flows toward other destinations hold ports of
        // other groups: those start a flowlet here too, as in hardware.
        let before = group.iter().position(|m| m.port == e.1);
        let kept = if idle { None } else { before };
        self.started = kept.is_none();
        self.steered = None;
        self.moved = None;
        if let Some(i) = kept {
            return i;
        }
        // A running flowlet whose port left the group fails over.
        let failover = !idle && e.1 != PortId::MAX && before.is_none();
        self.new_flowlets += 1;
        // A new flowlet takes its steer entry, if it has one whose port is
        // still a member of the group (failover beats steering). A running
        // flowlet that fails over draws from the group, as the P4 program
        // does (it looks steer entries up for new flowlets only): the entry
        // takes the flow at its next gap (`twin/tests_parity.rs`).
        let steer = if failover { None } else { steer_member(net, switch, group, pkt) };
        let i = match steer {
            Some((i, key)) => {
                self.steered = Some(key);
                i
            }
            None => weighted(group, self.rng.below(u64::from(total.max(1))) as u32),
        };
        if e.1 != PortId::MAX && e.1 != group[i].port {
            self.moved = Some(move_cause(failover, self.steered.is_some()));
        }
        e.1 = group[i].port;
        i
    }

    fn steered(&self) -> Option<SteerKey> {
        self.steered
    }

    fn moved(&self) -> Option<Reorder> {
        self.moved
    }

    fn started_flowlet(&self) -> bool {
        self.started
    }
}

/// Groups whose total weight is above this are sprayed by an independent
/// weighted draw per packet instead of a shuffled round (a round would be
/// longer than any flow).
pub const SPRAY_MAX_ROUND: u32 = 4096;

/// Per-packet spraying as the best sprayers do it: every flow (5-tuple) at
/// every switch walks its own random order of the group's slots (each
/// member `weight` times), drawn from the run's seed, the switch, the flow
/// and the round, and reshuffled every round (every `total_weight`
/// packets). So each flow's packets split exactly by weight every round,
/// and no two flows or switches share an order: synchronised flows cannot
/// lock onto the same members, as a round-robin shared by the flows of a
/// switch makes them do.
#[derive(Debug, Clone, Default)]
pub struct Spray {
    seed: u64,
    flows: std::collections::HashMap<(u32, u64), SprayRound>,
}

/// One flow's place in its current round at one switch.
#[derive(Debug, Clone, Default)]
struct SprayRound {
    /// The group the order was drawn for: first port, members, total weight.
    group: (PortId, usize, u32),
    round: u64,
    pos: usize,
    order: Vec<u32>,
}

impl Spray {
    pub fn new(seed: u64) -> Self {
        Spray { seed, flows: Default::default() }
    }
}

/// The random stream of one (switch, flow, round) of a run's seed.
fn spray_rng(seed: u64, switch: u32, tuple_hash: u64, round: u64) -> Rng {
    let s = mix64(seed ^ (u64::from(switch) << 32 | 0x5B7A));
    Rng::new(s ^ mix64(tuple_hash).rotate_left(19) ^ mix64(round.wrapping_add(0xA11CE)))
}

impl Forwarder for Spray {
    fn choose(
        &mut self,
        _: u64,
        switch: u32,
        group: &[FibMember],
        total: u32,
        pkt: &PacketInfo,
        _: &dyn NetView,
    ) -> usize {
        let total = total.max(1);
        if group.len() == 1 {
            return 0;
        }
        let seed = self.seed;
        let st = self.flows.entry((switch, pkt.tuple_hash)).or_default();
        if total > SPRAY_MAX_ROUND {
            st.round = st.round.wrapping_add(1);
            let x = spray_rng(seed, switch, pkt.tuple_hash, st.round).below(u64::from(total));
            return weighted(group, x as u32);
        }
        let sig = (group[0].port, group.len(), total);
        if st.group != sig || st.pos >= st.order.len() {
            // A new round, or the group changed under the flow (a weight
            // rewrite, a failure): draw a fresh order for it.
            st.round = st.round.wrapping_add(1);
            st.group = sig;
            st.pos = 0;
            st.order.clear();
            st.order.extend(0..total);
            spray_rng(seed, switch, pkt.tuple_hash, st.round).shuffle(&mut st.order);
        }
        let slot = st.order[st.pos];
        st.pos += 1;
        weighted(group, slot)
    }

    fn path_change_cause(&self) -> Reorder {
        Reorder::Spray
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoView;
    impl NetView for NoView {
        fn queue_bytes(&self, _: PortId) -> u64 {
            0
        }
    }

    fn group() -> Vec<FibMember> {
        vec![FibMember { port: 10, weight: 1 }, FibMember { port: 11, weight: 3 }]
    }

    #[test]
    fn weights_are_respected() {
        assert_eq!(weighted(&group(), 0), 0);
        assert_eq!(weighted(&group(), 1), 1);
        assert_eq!(weighted(&group(), 3), 1);
        let mut s = Spray::new(1);
        let pkt = PacketInfo { tuple_hash: 1, src: 0, dst: 1, sport: 1, bytes: 100, fresh: false };
        let picks = (0..4000).filter(|_| s.choose(0, 0, &group(), 4, &pkt, &NoView) == 1).count();
        assert_eq!(picks, 3000, "every round of 4 packets is one permutation of the 4 weighted slots");
    }

    #[test]
    fn ecmp_is_static_and_flowlets_stick_within_the_timeout() {
        let pkt = PacketInfo { tuple_hash: 99, src: 0, dst: 1, sport: 1, bytes: 100, fresh: false };
        let mut e = Ecmp { seed: 4 };
        let first = e.choose(0, 3, &group(), 4, &pkt, &NoView);
        assert!((0..100).all(|t| e.choose(t, 3, &group(), 4, &pkt, &NoView) == first));
        let mut f = Flowlet::new(4, 8, 1_000);
        let a = f.choose(10_000, 3, &group(), 4, &pkt, &NoView);
        for t in 1..50 {
            assert_eq!(f.choose(10_000 + t * 900, 3, &group(), 4, &pkt, &NoView), a, "gap below timeout");
        }
        assert_eq!(f.new_flowlets, 1);
        f.choose(10_000 + 49 * 900 + 5_000, 3, &group(), 4, &pkt, &NoView);
        assert_eq!(f.new_flowlets, 2, "a gap over the timeout starts a new flowlet");
    }

    /// Steers every packet to the port it holds.
    struct SteerTo(PortId);
    impl NetView for SteerTo {
        fn queue_bytes(&self, _: PortId) -> u64 {
            0
        }
        fn steer(&self, _: u32, p: &PacketInfo) -> Option<(PortId, SteerKey)> {
            Some((self.0, SteerKey { src: p.src as u32, dst: p.dst as u32, sport: Some(p.sport) }))
        }
    }

    #[test]
    fn a_failover_draws_and_the_steer_entry_waits_for_the_next_gap() {
        let pkt = PacketInfo { tuple_hash: 99, src: 0, dst: 1, sport: 1, bytes: 100, fresh: false };
        let all = vec![FibMember { port: 10, weight: 1 }, FibMember { port: 11, weight: 1 }];
        let mut f = Flowlet::new(4, 8, 1_000);
        // The flow runs on 11 (steered); then 11 leaves the group and the
        // entry moves to 10, a live member: the failover draws all the
        // same, as the P4 program does, and is no steered flowlet.
        assert_eq!(all[f.choose(10_000, 3, &all, 2, &pkt, &SteerTo(11))].port, 11);
        assert!(f.steered().is_some());
        let left = vec![FibMember { port: 10, weight: 1 }, FibMember { port: 12, weight: 1 }];
        let i = f.choose(10_500, 3, &left, 2, &pkt, &SteerTo(10));
        assert!(f.started_flowlet() && f.steered().is_none(), "a failover is drawn");
        assert_eq!(f.moved(), Some(Reorder::Failover));
        let drawn = left[i].port;
        assert_eq!(left[f.choose(11_000, 3, &left, 2, &pkt, &SteerTo(10))].port, drawn, "it runs on");
        let after_gap = f.choose(13_000, 3, &left, 2, &pkt, &SteerTo(10));
        assert_eq!((left[after_gap].port, f.steered().is_some()), (10, true), "the entry at the next gap");
    }

    fn uplinks() -> Vec<FibMember> {
        (0..4).map(|p| FibMember { port: 20 + p, weight: 1 }).collect()
    }

    fn flow(tuple_hash: u64) -> PacketInfo {
        PacketInfo { tuple_hash, src: 0, dst: 1, sport: 1, bytes: 4096, fresh: false }
    }

    #[test]
    fn a_sprayed_flow_splits_evenly_over_a_leafs_uplinks() {
        let mut s = Spray::new(7);
        let mut split = [0u32; 4];
        for k in 0..514 {
            split[s.choose(0, 2, &uplinks(), 4, &flow(0xF00D), &NoView)] += 1;
            // Every prefix of the flow is within one packet of even.
            let (lo, hi) = (split.iter().min().copied(), split.iter().max().copied());
            assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "after {} packets: {split:?}", k + 1);
        }
        assert_eq!(split.iter().sum::<u32>(), 514);
    }

    #[test]
    fn synchronised_flows_do_not_lock_onto_the_same_uplinks() {
        // Two flows whose packets reach the leaf alternately (the case a
        // round-robin shared by the switch's flows locks: one flow would
        // take uplinks 0 and 2 only, the other 1 and 3).
        let mut s = Spray::new(7);
        let mut split = [[0u32; 4]; 2];
        let mut same = 0;
        for _ in 0..4096 {
            let a = s.choose(0, 2, &uplinks(), 4, &flow(1), &NoView);
            let b = s.choose(0, 2, &uplinks(), 4, &flow(2), &NoView);
            split[0][a] += 1;
            split[1][b] += 1;
            same += u32::from(a == b);
        }
        assert_eq!(split, [[1024; 4]; 2], "each flow even on every uplink");
        // Independent orders collide a quarter of the time, not never or always.
        assert!((850..1200).contains(&same), "{same} of 4096 pairs on the same uplink");
        // Another switch, seed or flow has another order.
        let order = |seed: u64, switch: u32, f: u64| {
            let mut s = Spray::new(seed);
            (0..16).map(|_| s.choose(0, switch, &uplinks(), 4, &flow(f), &NoView)).collect::<Vec<_>>()
        };
        assert_eq!(order(7, 2, 1), order(7, 2, 1), "the same seed gives the same order");
        assert_ne!(order(7, 2, 1), order(7, 3, 1));
        assert_ne!(order(7, 2, 1), order(8, 2, 1));
        assert_ne!(order(7, 2, 1), order(7, 2, 2));
    }
}
