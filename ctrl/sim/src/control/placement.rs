//! Flow placement in the controller in the loop: the traffic-engineering
//! planner (`metaroce-te`) fed by the data plane's large-flow reports and by
//! announced jobs (through the job API's own validation), its moves turned
//! into steer entries that land after the write latency.
//!
//! The switches consult a steer entry only when a flowlet starts, so a
//! placement moves a running flow at its next gap (between iterations of a
//! training step, at the latest), never in the middle of a flowlet.
//!
//! The planner counts flows where they are, not only where it sent them
//! ([`metaroce_te::stay`], the same rule as the controller's): each
//! large-flow report names the egress port the flow left its first switch
//! by (the P4 program's digest carries it); a flow still seen off its
//! planned path two detector windows after its entries landed is counted
//! where it is seen before new flows are placed, and placed afresh once it
//! pauses.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use metaroce_te::job::{validate_job, JobLimits, JobRegistry};
use metaroce_te::stay::Stays;
use metaroce_te::{Demand, FlowKey, Plan, Planner, TeConfig};
use metaroce_topo::{Routing, SwitchId, Topology};
use serde_json::json;

use crate::control::{Ctx, LargeFlow, SteerKey};

/// One steer write: install (`Some(port)`) or remove an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SteerWrite {
    pub switch: SwitchId,
    pub key: SteerKey,
    pub port: Option<u16>,
    /// When the flow was first reported large (None: announced).
    pub detected_ps: Option<u64>,
}

/// An announced job: its name and flows `(src host, dst host, bytes)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announced {
    pub name: String,
    pub flows: Vec<(u32, u32, u64)>,
}

/// Counts for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PlacementStats {
    pub large_flow_reports: u64,
    pub steer_writes: u64,
    pub refused: u64,
    pub moves: BTreeMap<&'static str, u64>,
    pub unplaced: u64,
    /// Times a flow that had not moved onto its planned path was counted
    /// where it was seen instead.
    pub stayed: u64,
}

/// The planner and what the switches hold of its placement.
#[derive(Debug)]
pub(crate) struct Placement {
    planner: Planner,
    ip_of: Vec<Ipv4Addr>,
    host_of: HashMap<Ipv4Addr, u32>,
    /// Host pairs an announced job placed (their flows need no entry of
    /// their own: the pair entry carries them).
    announced_pairs: std::collections::HashSet<(u32, u32)>,
    /// First report of each flow, physical time.
    detected: HashMap<FlowKey, u64>,
    /// Observed flows: their last report (controller time).
    seen: HashMap<FlowKey, u64>,
    /// A flow with no report for this long is gone. Until then it keeps
    /// its demand and its path, quiet or not: a training job's queue pairs
    /// pause between iterations and come back to the same paths, and a
    /// quiet flow counted at no load let the planner move others onto its
    /// path, where they met it again at its next iteration.
    forget_ps: u64,
    /// Entries as last written (desired = written: the sim's writes never fail).
    held: BTreeMap<(SwitchId, SteerKey), u16>,
    pub stats: PlacementStats,
    /// Planned highest utilisation after each decision that moved flows.
    pub planned_max: Vec<f64>,
    /// Flows that have not moved onto their planned paths (times in ps,
    /// the large-flow detector's window).
    stays: Stays,
    /// Entries to write with the next decision's.
    repins: Vec<SteerWrite>,
}

impl Placement {
    /// `forget_ps`: a flow without a report for this long is removed and
    /// its entries deleted; `window_ps`: the large-flow detector's window.
    pub fn new(
        topo: &Topology,
        routing: &Routing,
        config: TeConfig,
        forget_ps: u64,
        window_ps: u64,
    ) -> Result<Self, metaroce_te::ConfigError> {
        let ip_of: Vec<Ipv4Addr> = topo.hosts.iter().map(|h| h.ip).collect();
        let host_of = ip_of.iter().enumerate().map(|(i, &ip)| (ip, i as u32)).collect();
        Ok(Placement {
            planner: Planner::new(topo, routing, config)?,
            ip_of,
            host_of,
            announced_pairs: Default::default(),
            detected: HashMap::new(),
            seen: HashMap::new(),
            forget_ps: forget_ps.max(1),
            held: BTreeMap::new(),
            stats: PlacementStats::default(),
            planned_max: Vec::new(),
            stays: Stays::new(window_ps),
            repins: Vec::new(),
        })
    }

    /// Registers an announced job through the job API's validation and
    /// expansion, exactly as `POST /api/v1/jobs` would with a `flows` body.
    pub fn announce(&mut self, topo: &Topology, job: &Announced) -> Result<(), String> {
        let flows: Vec<_> = job
            .flows
            .iter()
            .map(|&(s, d, bytes)| {
                json!({"src": topo.hosts[s as usize].name, "dst": topo.hosts[d as usize].name, "bytes": bytes})
            })
            .collect();
        let body = json!({"name": job.name, "flows": flows});
        let limits = JobLimits::default();
        let parsed =
            validate_job(&body, topo, &JobRegistry::default(), &limits).map_err(|e| e.to_string())?;
        for (key, demand) in parsed.demands() {
            self.planner.upsert(key, demand).map_err(|e| e.to_string())?;
            if let (Some(&s), Some(&d)) = (self.host_of.get(&key.src()), self.host_of.get(&key.dst())) {
                self.announced_pairs.insert((s, d));
            }
        }
        Ok(())
    }

    /// A large-flow report reached the controller: the flow joins the
    /// planner's input as an elastic host-pair flow. True when the input changed.
    pub fn on_large_flow(&mut self, f: &LargeFlow, reported_ps: u64, now_ps: u64) -> bool {
        self.stats.large_flow_reports += 1;
        if self.announced_pairs.contains(&(f.src, f.dst)) {
            return false;
        }
        let (Some(&src), Some(&dst)) = (self.ip_of.get(f.src as usize), self.ip_of.get(f.dst as usize))
        else {
            return false;
        };
        // A queue pair that rotates its UDP source port per message
        // (`sports_per_qp`) shows up as several flows, one per port, each
        // active in turn; planned apart they would count its load twice.
        // The simulator's queue pairs are one per host pair and job, so the
        // host pair is the queue pair here and a pair entry carries it.
        let key = FlowKey::pair(src, dst);
        // A RoCE queue pair sends as fast as DCQCN and PFC let it: what it
        // sent in a congested window understates what it would send on a
        // clean path. So a large flow is elastic (it offers its line rate,
        // and the planner shares the NICs max-min); the measured rate is
        // not used.
        let demand = Demand::default();
        let known = self.planner.rate(&key).is_some();
        if self.planner.upsert(key, demand).is_err() {
            self.stats.refused += 1;
            return false;
        }
        self.detected.entry(key).or_insert(reported_ps);
        if self.seen.insert(key, now_ps).is_none() {
            tracing::debug!(t_us = now_ps / 1_000_000, flow = %key, "large flow seen");
        }
        if known {
            self.track(key, f, now_ps);
        } else {
            self.apply_stays(now_ps);
        }
        !known
    }

    /// Compares where a report saw a placed flow with where the planner
    /// counts it: notes it if it has not moved onto its entries.
    fn track(&mut self, key: FlowKey, f: &LargeFlow, now_ps: u64) {
        self.stays.seen(&self.planner, key, (f.switch, f.port), now_ps);
    }

    /// Counts every flow stuck off its planned path where it is seen, and
    /// pins it there: the flows placed next go around it.
    fn apply_stays(&mut self, now_ps: u64) {
        let seen = &self.seen;
        let stays = self.stays.adopt(&mut self.planner, |k| seen.get(k).copied(), now_ps, now_ps / 1_000);
        for st in stays {
            tracing::debug!(t_us = now_ps / 1_000_000, flow = %st.flow, "flow not moved: counted where it is seen");
            self.stats.stayed += 1;
            // Its entries follow: the plan is where it is until it pauses
            // and is placed afresh.
            self.repin(st.flow, st.from.as_ref(), &st.to);
        }
    }

    /// Entries that move a flow's pins from `from` to `to`.
    fn repin(&mut self, key: FlowKey, from: Option<&metaroce_te::Path>, to: &metaroce_te::Path) {
        let Some(k) = self.steer_key(&key) else { return };
        let detected_ps = None;
        for hop in to.steer_hops() {
            if self.held.insert((hop.switch, k), hop.port) != Some(hop.port) {
                self.repins.push(SteerWrite {
                    switch: hop.switch,
                    key: k,
                    port: Some(hop.port),
                    detected_ps,
                });
            }
        }
        for hop in from.into_iter().flat_map(|p| p.steer_hops()) {
            if to.port_at(hop.switch).is_none() && self.held.remove(&(hop.switch, k)).is_some() {
                self.repins.push(SteerWrite { switch: hop.switch, key: k, port: None, detected_ps });
            }
        }
    }

    /// Flows counted where they were seen that went quiet (no report for
    /// two windows: they paused) are placed afresh by the next decision,
    /// as new flows. True when the planner's input changed.
    pub fn requeue_quiet(&mut self, now_ps: u64) -> bool {
        let seen = &self.seen;
        let quiet = self.stays.requeue_quiet(
            &mut self.planner,
            |k| seen.get(k).copied(),
            |_| Demand::default(),
            now_ps,
        );
        !quiet.is_empty()
    }

    /// True while some flow is counted where it was seen.
    pub fn has_stays(&self) -> bool {
        self.stays.has_stays()
    }

    /// Flows without a recent report are forgotten (their entries removed
    /// by the next decision). True when the planner's input changed.
    pub fn age(&mut self, now_ps: u64) -> bool {
        let mut changed = false;
        let forget = self.forget_ps;
        let planner = &mut self.planner;
        let mut gone = Vec::new();
        self.seen.retain(|key, last| {
            if now_ps.saturating_sub(*last) < forget {
                return true;
            }
            tracing::debug!(t_us = now_ps / 1_000_000, flow = %key, "large flow forgotten");
            planner.remove(key);
            gone.push(*key);
            changed = true;
            false
        });
        for key in gone {
            self.stays.forget(&key);
        }
        changed
    }

    /// The routing changed (a link failed or came back).
    pub fn routing(&mut self, routing: &Routing) {
        self.planner.reset_routing(routing);
    }

    /// One decision: the steer writes that carry out its moves.
    pub fn decide(&mut self, now_ps: u64) -> Vec<SteerWrite> {
        let plan = self.planner.plan(now_ps / 1_000);
        self.stats.unplaced += plan.unplaced.len() as u64;
        if !plan.moves.is_empty() {
            self.planned_max.push(plan.max_utilisation);
        }
        let mut out = std::mem::take(&mut self.repins);
        out.extend(self.writes(&plan));
        out
    }

    fn steer_key(&self, k: &FlowKey) -> Option<SteerKey> {
        let src = *self.host_of.get(&k.src())?;
        let dst = *self.host_of.get(&k.dst())?;
        let sport = match k {
            FlowKey::Flow { sport, .. } => Some(*sport),
            FlowKey::Pair { .. } => None,
        };
        Some(SteerKey { src, dst, sport })
    }

    /// The desired entries after the plan's moves, diffed against what was
    /// written: each `to` path's entries (downstream first), then the
    /// removal of `from` entries the new path does not pin.
    fn writes(&mut self, plan: &Plan) -> Vec<SteerWrite> {
        let mut out = Vec::new();
        for m in &plan.moves {
            *self.stats.moves.entry(m.reason.as_str()).or_insert(0) += 1;
            tracing::debug!(
                t_us = plan.now_ns / 1_000,
                flow = %m.flow,
                reason = m.reason.as_str(),
                rate_gbps = self.planner.rate(&m.flow).unwrap_or(0) / 1_000_000_000,
                to = ?m.to.as_ref().map(|p| p.hops.iter().map(|h| (h.switch, h.next)).collect::<Vec<_>>()),
                "planned move"
            );
            self.stays.moved(&m.flow);
            let Some(key) = self.steer_key(&m.flow) else { continue };
            let detected_ps = self.detected.get(&m.flow).copied();
            if let Some(to) = &m.to {
                for hop in to.steer_hops() {
                    if self.held.insert((hop.switch, key), hop.port) != Some(hop.port) {
                        out.push(SteerWrite { switch: hop.switch, key, port: Some(hop.port), detected_ps });
                    }
                }
            }
            if let Some(from) = &m.from {
                for hop in from.steer_hops() {
                    let kept = m.to.as_ref().is_some_and(|to| to.port_at(hop.switch).is_some());
                    if !kept && self.held.remove(&(hop.switch, key)).is_some() {
                        out.push(SteerWrite { switch: hop.switch, key, port: None, detected_ps });
                    }
                }
            }
        }
        out
    }

    /// Writes land in the switches; `tag` names each for the "moved" callback.
    pub fn land(&mut self, ctx: &mut Ctx<'_>, w: &SteerWrite, tag: u64) -> bool {
        match ctx.set_steer(w.switch, w.key, w.port, tag) {
            Ok(()) => {
                self.stats.steer_writes += 1;
                // Observed flows are host pairs here (see `on_large_flow`).
                let ips = (self.ip_of.get(w.key.src as usize), self.ip_of.get(w.key.dst as usize));
                if let (Some(_), None, (Some(&s), Some(&d))) = (w.port, w.key.sport, ips) {
                    self.stays.landed(FlowKey::pair(s, d), ctx.now_ps());
                }
                true
            }
            Err(e) => {
                tracing::warn!(switch = w.switch, key = ?w.key, error = %e, "steer write refused");
                self.stats.refused += 1;
                false
            }
        }
    }

    pub fn flows(&self) -> usize {
        self.planner.flow_count()
    }
}
