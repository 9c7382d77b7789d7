//! The forwarding decision, behind a trait so that other policies plug in
//! as routing modes: the P4 pipeline twin and the controller's weights come
//! in a later issue. The baselines here are static ECMP, LetFlow-like
//! random flowlets, and per-packet spraying.

use metaroce_topo::HostId;

use crate::engine::events::{Packet, PortId};
use crate::engine::net::FibMember;
use crate::engine::steer::SteerKey;
use crate::rng::{mix64, Rng};
use crate::scenario::config::Mode;

/// What a switch sees of a packet when it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketInfo {
    /// Hash of the 5-tuple (src IP, dst IP, UDP, src port, 4791).
    pub tuple_hash: u64,
    pub src: HostId,
    pub dst: HostId,
    pub sport: u16,
    pub bytes: u32,
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
    /// default, means: choose from the group.
    fn route(&mut self, _now_ps: u64, _switch: u32, _in_port: u16, _pkt: &Packet) -> Option<Route> {
        None
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

/// Builds the forwarder of a baseline mode.
pub fn baseline(mode: Mode, seed: u64, switches: usize, flowlet_timeout_ps: u64) -> Box<dyn Forwarder> {
    match mode {
        Mode::Ecmp => Box::new(Ecmp { seed }),
        // metaroce: the same flowlets; its controller rewrites the weights.
        Mode::Flowlet | Mode::Metaroce => Box::new(Flowlet::new(seed, switches, flowlet_timeout_ps)),
        Mode::Spray => Box::new(Spray::default()),
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
}

/// Slots per switch in the flowlet table (hash collisions share a slot, as
/// in hardware).
pub const FLOWLET_SLOTS: usize = 4096;

/// LetFlow: a packet arriving more than the flowlet timeout after the last
/// one of its slot starts a new flowlet on a member drawn by weight (random
/// among equals). A running flowlet keeps its port whatever happens to the
/// weights; only a port that left the group (a failure) moves it.
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
        let kept = if idle { None } else { group.iter().position(|m| m.port == e.1) };
        self.started = kept.is_none();
        self.steered = None;
        if let Some(i) = kept {
            return i;
        }
        self.new_flowlets += 1;
        // A new flowlet takes its steer entry, if it has one whose port is
        // still a member of the group (failover beats steering).
        let steer = net.steer(switch, pkt).and_then(|(port, key)| {
            let i = group.iter().position(|m| m.port == port && m.weight > 0)?;
            Some((i, key))
        });
        let i = match steer {
            Some((i, key)) => {
                self.steered = Some(key);
                i
            }
            None => weighted(group, self.rng.below(u64::from(total.max(1))) as u32),
        };
        e.1 = group[i].port;
        i
    }

    fn steered(&self) -> Option<SteerKey> {
        self.steered
    }

    fn started_flowlet(&self) -> bool {
        self.started
    }
}

/// Per-packet weighted round-robin over each group: the even spreading
/// the ideal bound assumes (random per-packet choice would let queues
/// random-walk at full load).
#[derive(Debug, Clone, Default)]
pub struct Spray {
    next: std::collections::HashMap<(u32, PortId), u32>,
}

impl Forwarder for Spray {
    fn choose(
        &mut self,
        _: u64,
        switch: u32,
        group: &[FibMember],
        total: u32,
        _: &PacketInfo,
        _: &dyn NetView,
    ) -> usize {
        let c = self.next.entry((switch, group[0].port)).or_insert(0);
        let i = weighted(group, *c % total.max(1));
        *c = c.wrapping_add(1);
        i
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
        let mut s = Spray::default();
        let pkt = PacketInfo { tuple_hash: 1, src: 0, dst: 1, sport: 1, bytes: 100 };
        let picks = (0..4000).filter(|_| s.choose(0, 0, &group(), 4, &pkt, &NoView) == 1).count();
        assert_eq!(picks, 3000);
    }

    #[test]
    fn ecmp_is_static_and_flowlets_stick_within_the_timeout() {
        let pkt = PacketInfo { tuple_hash: 99, src: 0, dst: 1, sport: 1, bytes: 100 };
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
}
