//! The control hook: how anything outside the data path steers a run.
//!
//! A [`Control`] is the simulated fabric's control plane, attached to the
//! engine beside the [`Forwarder`](crate::Forwarder) (which decides per
//! packet). The engine calls it at physical instants only: once at the
//! start, when a switch egress queue crosses the high or low threshold the
//! control set on it (checked at dequeue, as the P4 program does, at most
//! one crossing per port per digest interval), when a wake-up it asked for
//! comes due, when a link goes down or up, and when a group rewrite it made
//! has moved traffic (the first new flowlet at that switch on a member
//! whose share rose). Everything in between is the control's own model: the
//! controller-in-the-loop mode (`metaroce`) adds digest, decision and write
//! latencies by scheduling wake-ups in virtual time; the baselines'
//! routing convergence after a failure is a control too; a serve mode can
//! pace wake-ups against the wall clock and turn P4Runtime writes into
//! [`Ctx::set_group`]. Through [`Ctx`] a control reads queue depths, the
//! queue-sensing registers and groups, and acts: wake-ups, thresholds,
//! group rewrites (applied at once and atomically: a packet never sees a
//! half-written group) and link failures. Ports and groups are named as the topology names them
//! (switch index, port number, destination leaf), never by engine indices,
//! so a control needs nothing from the engine's insides.

mod announce;
pub mod apply;
pub(crate) mod converge;
pub mod drained;
pub mod forward;
pub(crate) mod inloop;

use std::collections::HashMap;

use metaroce_topo::{LinkId, SwitchId};
use serde::Serialize;

use crate::engine::events::{Ev, PortId, Queue};
use crate::engine::net::{FibMember, Node, Ports};
use crate::engine::steer::Steering;
pub use crate::engine::steer::{Detector, LargeFlow, PacketFlow, SteerKey};
use crate::engine::PortState;

/// A threshold crossing of a switch egress queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Crossing {
    pub switch: SwitchId,
    pub port: u16,
    /// Bytes left in the queue when the packet that saw the crossing left.
    pub depth_bytes: u64,
    /// True: up through the high threshold; false: down through the low one.
    pub congested: bool,
}

/// Queue thresholds of one egress port, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Thresholds {
    /// A dequeue leaving at least this many bytes crosses up (0: off).
    pub high_bytes: u64,
    /// A dequeue leaving at most this many bytes crosses down.
    pub low_bytes: u64,
    /// Least time between two crossings reported for the port (the P4
    /// program's digest interval); a suppressed one is seen again by the
    /// next packet.
    pub min_interval_ps: u64,
}

/// Why the engine refused a control's request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("switch {0} is not in the topology")]
    UnknownSwitch(SwitchId),
    #[error("switch {switch} has no port {port}")]
    UnknownPort { switch: SwitchId, port: u16 },
    #[error("switch {switch} port {port} leads to a host, not into the fabric")]
    NotFabricPort { switch: SwitchId, port: u16 },
    #[error("switch {0} is not a destination leaf")]
    NotDestination(SwitchId),
    #[error("group of switch {switch} toward leaf {leaf} would have no member with a weight")]
    EmptyGroup { switch: SwitchId, leaf: SwitchId },
    #[error("link {0} is not in the topology")]
    UnknownLink(LinkId),
    #[error("host {0} is not in the topology")]
    UnknownHost(u32),
    #[error("switch {switch} port {port} is not in its group toward host {host}")]
    NotInGroup { switch: SwitchId, port: u16, host: u32 },
    #[error("low threshold {low} B is above the high one {high} B")]
    Thresholds { high: u64, low: u64 },
}

/// The control plane of a run. Every method but `start` has a default
/// that does nothing, so a control implements only what it reacts to.
pub trait Control: Send + std::fmt::Debug {
    /// Before the first event: set thresholds, schedule wake-ups.
    fn start(&mut self, ctx: &mut Ctx<'_>);
    fn on_crossing(&mut self, _ctx: &mut Ctx<'_>, _c: &Crossing) {}
    /// A wake-up asked for with [`Ctx::wake_at`] is due.
    fn on_wake(&mut self, _ctx: &mut Ctx<'_>, _token: u64) {}
    /// A link went down (`up` false) or came back, at the physical instant.
    fn on_link(&mut self, _ctx: &mut Ctx<'_>, _link: LinkId, _up: bool) {}
    /// The rewrite tagged `tag` moved traffic: a new flowlet at its switch
    /// took a member whose share of the group rose.
    fn on_moved(&mut self, _ctx: &mut Ctx<'_>, _tag: u64) {}
    /// A flow's first switch reported it large (see
    /// [`Ctx::set_large_flow_detector`]), at the physical instant.
    fn on_large_flow(&mut self, _ctx: &mut Ctx<'_>, _flow: &LargeFlow) {}
    /// Figures for the report, at the end of the run.
    fn summary(&self) -> ControlSummary;
}

/// A distribution of durations, for the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Dist {
    pub count: usize,
    pub min_us: f64,
    pub p50_us: f64,
    pub max_us: f64,
}

impl Dist {
    /// From samples in picoseconds; None when there are none.
    pub fn of(ps: Vec<u64>) -> Option<Dist> {
        let count = ps.len();
        let [min, p50, max] = min_p50_max(ps)?;
        let us = |v: u64| v as f64 / 1e6;
        Some(Dist { count, min_us: us(min), p50_us: us(p50), max_us: us(max) })
    }
}

/// The smallest, median (the lower of two middles) and largest of `v`;
/// None when it is empty.
pub fn min_p50_max(mut v: Vec<u64>) -> Option<[u64; 3]> {
    v.sort_unstable();
    Some([*v.first()?, v[(v.len() - 1) / 2], *v.last()?])
}

/// What a control reports about its run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ControlSummary {
    /// What the control is ("policy", "convergence", ...).
    pub kind: String,
    /// Threshold crossings the engine delivered.
    pub crossings: u64,
    /// Decisions taken.
    pub decisions: u64,
    /// Group rewrites that landed in switches (reroutes).
    pub group_writes: u64,
    /// From a threshold crossing (or a link failure) to new weights in
    /// place in the switches.
    pub reaction: Option<Dist>,
    /// From a threshold crossing to the first packet of a new flowlet on a
    /// member whose share rose.
    pub moved: Option<Dist>,
    /// From a link failure to routes around it in place in the switches.
    pub failover: Option<Dist>,
    /// Decisions that changed no group.
    pub no_change: u64,
    /// Requests the engine refused (each is a bug in the control).
    pub refused: u64,
    /// Flow placement (traffic engineering), for a control that places flows.
    pub placement: Option<PlacementSummary>,
}

/// What the controller's flow placement did in a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PlacementSummary {
    /// Large-flow reports that reached the controller.
    pub large_flow_reports: u64,
    /// Flows the planner knew at the end (observed and announced).
    pub flows: usize,
    /// Steer entries written or removed.
    pub steer_writes: u64,
    /// Planner moves by reason (new, rebalance, link_failed, route_changed, stayed, replaced, batch, ended).
    pub moves: std::collections::BTreeMap<String, u64>,
    /// Flows the planner could not place (no path left).
    pub unplaced: u64,
    /// Times a flow still off its planned path two detector windows after
    /// its entries landed (no flowlet gap yet) was counted where it was
    /// seen, so other flows were placed around it.
    pub stayed: u64,
    /// Steer writes or flows refused.
    pub refused: u64,
    /// From a flow's first large-flow report to its first flowlet on the
    /// path the planner chose.
    pub placed: Option<Dist>,
    /// The planner's highest link utilisation after its last move.
    pub planned_max_utilisation: Option<f64>,
    /// Its lower bound then (`ctrl/te/src/bound.rs`): the planned highest
    /// utilisation equals it when the placement is optimal.
    pub planned_lower_bound: Option<f64>,
}

/// A group rewrite waiting to see traffic move.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    pub tag: u64,
    /// Ports whose share of the group rose.
    pub raised: Vec<PortId>,
}

/// Per-port threshold state, kept by the engine.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sense {
    pub on: Option<Thresholds>,
    pub congested: bool,
    pub last_ps: Option<u64>,
    /// Deepest queue left by a dequeue since the register was last read.
    pub max_bytes: u64,
}

/// The engine's side of the hook, lent to a control for one callback.
#[derive(Debug)]
pub struct Ctx<'s> {
    pub(crate) now_ps: u64,
    pub(crate) switches: usize,
    pub(crate) ports: &'s mut Ports,
    pub(crate) st: &'s [PortState],
    pub(crate) sense: &'s mut Vec<Sense>,
    pub(crate) q: &'s mut Queue,
    /// Per (switch, destination index): a rewrite waiting to move traffic.
    pub(crate) watch: &'s mut HashMap<(u32, u32), Watch>,
    pub(crate) link_up: &'s [bool],
    /// Wake-ups pending in the queue (the engine tells a stalled run from
    /// one only the control keeps ticking).
    pub(crate) wakes: &'s mut usize,
    pub(crate) steer: &'s mut Steering,
    /// Per host: its leaf and that leaf's destination index.
    pub(crate) host_dest: &'s [(u32, u32)],
}

impl Ctx<'_> {
    pub fn now_ps(&self) -> u64 {
        self.now_ps
    }

    /// Calls [`Control::on_wake`] with `token` at `t_ps` (now, if earlier).
    pub fn wake_at(&mut self, t_ps: u64, token: u64) {
        *self.wakes += 1;
        self.q.push(t_ps.max(self.now_ps), Ev::Wake { token });
    }

    fn port(&self, switch: SwitchId, port: u16) -> Result<PortId, ControlError> {
        if switch >= self.switches {
            return Err(ControlError::UnknownSwitch(switch));
        }
        self.ports
            .by_end(metaroce_topo::Endpoint { switch, port })
            .ok_or(ControlError::UnknownPort { switch, port })
    }

    /// Bytes queued at a switch egress port.
    pub fn queue_bytes(&self, switch: SwitchId, port: u16) -> Result<u64, ControlError> {
        let p = self.port(switch, port)?;
        Ok(self.st[p as usize].qbytes)
    }

    /// Sets (or with `None` clears) the thresholds of a switch egress port.
    pub fn set_thresholds(
        &mut self,
        switch: SwitchId,
        port: u16,
        t: Option<Thresholds>,
    ) -> Result<(), ControlError> {
        let p = self.port(switch, port)?;
        if let Some(t) = t {
            if t.low_bytes > t.high_bytes {
                return Err(ControlError::Thresholds { high: t.high_bytes, low: t.low_bytes });
            }
        }
        self.sense[p as usize].on = t;
        Ok(())
    }

    /// Reads a port's queue-sensing registers as the P4 program keeps them:
    /// the deepest queue since the last read (then reset) and whether the
    /// port is above its high threshold.
    pub fn read_registers(&mut self, switch: SwitchId, port: u16) -> Result<(u64, bool), ControlError> {
        let p = self.port(switch, port)?;
        let s = &mut self.sense[p as usize];
        Ok((std::mem::take(&mut s.max_bytes), s.congested))
    }

    fn dest(&self, switch: SwitchId, leaf: SwitchId) -> Result<u32, ControlError> {
        if switch >= self.switches {
            return Err(ControlError::UnknownSwitch(switch));
        }
        self.ports.dest_of.get(leaf).copied().flatten().ok_or(ControlError::NotDestination(leaf))
    }

    /// The members `(port, weight)` switch `switch` forwards over toward `leaf`.
    pub fn group(&self, switch: SwitchId, leaf: SwitchId) -> Result<Vec<(u16, u32)>, ControlError> {
        let d = self.dest(switch, leaf)?;
        let (members, _) = self.ports.group(switch as u32, d);
        Ok(members.iter().map(|m| (self.ports.number[m.port as usize], m.weight)).collect())
    }

    /// Replaces the group of `switch` toward `leaf` at once. Members of
    /// weight 0 are left out; at least one must remain. `tag` names the
    /// rewrite in a later [`Control::on_moved`].
    pub fn set_group(
        &mut self,
        switch: SwitchId,
        leaf: SwitchId,
        weights: &[(u16, u32)],
        tag: u64,
    ) -> Result<(), ControlError> {
        let d = self.dest(switch, leaf)?;
        let mut members = Vec::with_capacity(weights.len());
        for &(port, weight) in weights.iter().filter(|w| w.1 > 0) {
            let p = self.port(switch, port)?;
            if !matches!(self.ports.specs[p as usize].to, Node::Switch(_)) {
                return Err(ControlError::NotFabricPort { switch, port });
            }
            members.push(FibMember { port: p, weight });
        }
        if members.is_empty() {
            return Err(ControlError::EmptyGroup { switch, leaf });
        }
        let raised = raised(self.ports.group(switch as u32, d).0, &members);
        self.ports.set_group(switch as u32, d, &members);
        if raised.is_empty() {
            self.watch.remove(&(switch as u32, d));
        } else {
            self.watch.insert((switch as u32, d), Watch { tag, raised });
        }
        Ok(())
    }

    /// Installs (`Some(port)`) or removes the steer entry `key` at `switch`.
    /// The port must be a member of the switch's group toward the
    /// destination host's leaf (steering stays within the route's group);
    /// `tag` names the write in a later [`Control::on_moved`], when a new
    /// flowlet first takes the entry. The entry is consulted only when a
    /// flowlet starts, so a running flowlet never moves.
    pub fn set_steer(
        &mut self,
        switch: SwitchId,
        key: SteerKey,
        port: Option<u16>,
        tag: u64,
    ) -> Result<(), ControlError> {
        if switch >= self.switches {
            return Err(ControlError::UnknownSwitch(switch));
        }
        let Some(&(_, dest)) = self.host_dest.get(key.dst as usize) else {
            return Err(ControlError::UnknownHost(key.dst));
        };
        if self.host_dest.get(key.src as usize).is_none() {
            return Err(ControlError::UnknownHost(key.src));
        }
        let egress = match port {
            None => None,
            Some(port) => {
                let p = self.port(switch, port)?;
                let (members, _) = self.ports.group(switch as u32, dest);
                if !members.iter().any(|m| m.port == p) {
                    return Err(ControlError::NotInGroup { switch, port, host: key.dst });
                }
                Some(p)
            }
        };
        self.steer.set(self.now_ps, switch as u32, key, egress, tag);
        Ok(())
    }

    /// Turns the large-flow detector of every switch on (or off): a flow
    /// whose first switch counts at least `threshold_bytes` in a window of
    /// `window_ps` is reported through [`Control::on_large_flow`].
    pub fn set_large_flow_detector(&mut self, d: Option<Detector>) {
        self.steer.set_detector(d, self.switches);
    }

    pub fn link_is_up(&self, link: LinkId) -> Result<bool, ControlError> {
        self.link_up.get(link).copied().ok_or(ControlError::UnknownLink(link))
    }

    /// Fails (or restores) a link now: queued packets and packets on its
    /// wire are lost, and every control hears of it through `on_link`.
    pub fn set_link(&mut self, link: LinkId, up: bool) -> Result<(), ControlError> {
        if link >= self.link_up.len() {
            return Err(ControlError::UnknownLink(link));
        }
        self.q.push(self.now_ps, Ev::Link { link: link as u32, up });
        Ok(())
    }
}

/// Ports whose share of the group is larger in `new` than in `old`.
fn raised(old: &[FibMember], new: &[FibMember]) -> Vec<PortId> {
    let total = |g: &[FibMember]| g.iter().map(|m| u64::from(m.weight)).sum::<u64>().max(1);
    let (to, tn) = (total(old), total(new));
    new.iter()
        .filter(|m| {
            let before = old.iter().find(|o| o.port == m.port).map_or(0, |o| u64::from(o.weight));
            u64::from(m.weight) * to > before * tn
        })
        .map(|m| m.port)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raised_members_gain_share() {
        let m = |port, weight| FibMember { port, weight };
        assert_eq!(raised(&[m(1, 1), m(2, 1)], &[m(1, 1), m(2, 3)]), vec![2]);
        assert_eq!(raised(&[m(1, 1), m(2, 1)], &[m(1, 2), m(2, 2)]), Vec::<PortId>::new());
        assert_eq!(raised(&[m(1, 1), m(2, 1), m(3, 1)], &[m(1, 1), m(3, 1)]), vec![1, 3]);
        assert_eq!(Dist::of(vec![3_000_000, 1_000_000, 2_000_000]).map(|d| d.p50_us), Some(2.0));
    }
}
