//! Scripted event sequences for the policy: a fabric, a heat view that the
//! script heats and cools port by port, failures applied to the baseline
//! routing the way the controller does, and a decision every tick.
//! Decisions are rendered with switch names for golden files.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use metaroce_policy::{Decision, Input, Policy, PolicyConfig, PolicyState, PortWeight};
use metaroce_telemetry::{Heat, PortHeat, PortKey};
use metaroce_topo::{Routing, SwitchId, Topology};
use serde::Serialize;

pub const MS: u64 = 1_000_000;

/// Something that happens in the fabric at a scripted time.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// The egress port `"from>to"` goes above its high threshold.
    Hot(String),
    /// It goes back below its low threshold.
    Cool(String),
    /// Its queue is this deep without being congested.
    Warm(String, u32),
    /// The link `"a>b"` fails (both directions).
    FailLink(String),
    FailSwitch(String),
}

pub fn hot(p: &str) -> Event {
    Event::Hot(p.into())
}
pub fn cool(p: &str) -> Event {
    Event::Cool(p.into())
}
pub fn fail(p: &str) -> Event {
    Event::FailLink(p.into())
}

/// A running script.
pub struct Run {
    pub topo: Topology,
    pub routing: Routing,
    pub policy: Policy,
    pub state: PolicyState,
    pub heat: Heat,
    pub now: u64,
    /// The next tick to decide at, in milliseconds.
    pub next_ms: u64,
    pub log: Vec<GoldenStep>,
}

pub fn topology(file: &str) -> Topology {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies").join(file);
    metaroce_topo::load_file(&path).unwrap_or_else(|e| panic!("{file}: {e}"))
}

impl Run {
    pub fn new(topo: Topology, config: PolicyConfig) -> Self {
        let routing = Routing::compute(&topo);
        let policy = Policy::new(config).unwrap();
        Run {
            topo,
            routing,
            policy,
            state: PolicyState::default(),
            heat: Heat::new(),
            now: 0,
            next_ms: 0,
            log: Vec::new(),
        }
    }

    pub fn id(&self, name: &str) -> SwitchId {
        self.topo.switch_id(name).unwrap_or_else(|| panic!("no switch {name}"))
    }

    /// `"from>to"` → the egress port of `from` toward `to` (the first, if
    /// parallel; `"from>to#2"` names the second).
    pub fn port(&self, spec: &str) -> PortKey {
        let (pair, nth) = spec.split_once('#').map_or((spec, 1), |(p, n)| (p, n.parse().unwrap()));
        let (a, b) = pair.split_once('>').unwrap_or_else(|| panic!("port spec {spec}"));
        let (a, b) = (self.id(a), self.id(b));
        let adj = self.topo.adjacency(a).iter().filter(|x| x.peer == b).nth(nth - 1).unwrap();
        PortKey { switch: a, port: adj.port }
    }

    pub fn link(&self, spec: &str) -> usize {
        let k = self.port(spec);
        self.topo.adjacency(k.switch).iter().find(|a| a.port == k.port).unwrap().link
    }

    pub fn apply(&mut self, e: &Event) {
        match e {
            Event::Hot(p) => self.set(self.port(p), true, 60),
            Event::Cool(p) => self.set(self.port(p), false, 0),
            Event::Warm(p, d) => self.set(self.port(p), false, *d),
            Event::FailLink(p) => {
                let l = self.link(p);
                self.routing.fail_link(&self.topo, l).unwrap();
            }
            Event::FailSwitch(s) => {
                let s = self.id(s);
                self.routing.fail_switch(&self.topo, s).unwrap();
            }
        }
    }

    /// What the telemetry view does: `since_ns` moves when the state flips.
    fn set(&mut self, key: PortKey, congested: bool, depth: u32) {
        let now = self.now;
        let h =
            self.heat.entry(key).or_insert(PortHeat { congested, since_ns: now, depth, max_depth: depth });
        if h.congested != congested {
            h.since_ns = now;
        }
        h.congested = congested;
        h.depth = depth;
        h.max_depth = depth;
    }

    pub fn decide(&mut self) -> Decision {
        let input = Input { topo: &self.topo, routing: &self.routing, heat: &self.heat, now_ns: self.now };
        self.policy.decide(input, &mut self.state)
    }

    /// Runs until `until_ms`, deciding every `tick_ms`, applying each event
    /// at its time; logs ticks with events or changes. Returns every decision.
    pub fn script(&mut self, tick_ms: u64, until_ms: u64, events: &[(u64, Event)]) -> Vec<Decision> {
        let mut out = Vec::new();
        for t in (self.next_ms..=until_ms).step_by(tick_ms as usize) {
            self.now = t * MS;
            self.next_ms = t + tick_ms;
            let here: Vec<Event> = events.iter().filter(|(at, _)| *at == t).map(|(_, e)| e.clone()).collect();
            for e in &here {
                self.apply(e);
            }
            let d = self.decide();
            if !here.is_empty() || !d.changes.is_empty() {
                let step = self.render(t, here, &d);
                self.log.push(step);
            }
            out.push(d);
        }
        out
    }

    /// Weights of `switch`'s group toward `leaf` as installed: the override
    /// if any, else the baseline's.
    pub fn weights(&self, switch: &str, leaf: &str) -> Vec<PortWeight> {
        let (s, l) = (self.id(switch), self.id(leaf));
        if let Some(w) = self.state.desired(s, l) {
            return w.to_vec();
        }
        self.baseline(s, l)
    }

    pub fn baseline(&self, s: SwitchId, l: SwitchId) -> Vec<PortWeight> {
        self.routing
            .group_toward(s, l)
            .map(|(_, g)| g.members.iter().map(|m| PortWeight { port: m.port, weight: m.weight }).collect())
            .unwrap_or_default()
    }

    /// Weight on the port `"from>to"` in `from`'s group toward `leaf`.
    pub fn weight_on(&self, spec: &str, leaf: &str) -> u32 {
        let k = self.port(spec);
        let name = &self.topo.switches[k.switch].name;
        self.weights(name, leaf).iter().find(|w| w.port == k.port).map_or(0, |w| w.weight)
    }

    fn name(&self, s: SwitchId) -> String {
        self.topo.switches[s].name.clone()
    }

    fn port_name(&self, s: SwitchId, port: u16) -> String {
        match self.topo.adjacency(s).iter().find(|a| a.port == port) {
            Some(a) => format!("{}>{}:{port}", self.name(s), self.name(a.peer)),
            None => format!("{}:{port}", self.name(s)),
        }
    }

    fn render_weights(&self, s: SwitchId, w: &[PortWeight]) -> String {
        let parts: Vec<String> = w
            .iter()
            .map(|w| {
                let peer =
                    self.topo.adjacency(s).iter().find(|a| a.port == w.port).map(|a| self.name(a.peer));
                format!("{}({})={}", w.port, peer.unwrap_or_default(), w.weight)
            })
            .collect();
        parts.join(" ")
    }

    fn render(&self, t_ms: u64, events: Vec<Event>, d: &Decision) -> GoldenStep {
        let changes = d
            .changes
            .iter()
            .map(|c| GoldenChange {
                group: format!("{} -> {}", self.name(c.switch), self.name(c.leaf)),
                kind: c.kind.as_str(),
                old: self.render_weights(c.switch, &c.old),
                new: self.render_weights(c.switch, &c.new),
                baseline: c.baseline,
                cause: c.cause.map(|h| self.port_name(h.switch, h.port)),
                shift_permille: c.shift_permille,
            })
            .collect();
        let levels = d.levels.iter().map(|l| (self.port_name(l.switch, l.port), l.level)).collect();
        GoldenStep { t_ms, events, levels, changes, deferred: d.deferred, overrides: d.overrides }
    }
}

#[derive(Debug, Serialize)]
pub struct GoldenStep {
    pub t_ms: u64,
    pub events: Vec<Event>,
    pub levels: BTreeMap<String, u8>,
    pub changes: Vec<GoldenChange>,
    pub deferred: usize,
    pub overrides: usize,
}

#[derive(Debug, Serialize)]
pub struct GoldenChange {
    pub group: String,
    pub kind: &'static str,
    pub old: String,
    pub new: String,
    pub baseline: bool,
    pub cause: Option<String>,
    pub shift_permille: u32,
}

/// Compares `value` with `tests/golden/<name>.json`; `UPDATE_GOLDEN=1`
/// rewrites the file instead.
pub fn golden<T: Serialize>(name: &str, value: &T) {
    let path: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(value).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{}: {e}; run UPDATE_GOLDEN=1 cargo test -p metaroce-policy", path.display())
    });
    if want != text {
        let line = want.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{} differs from this run (first at line {}):\n  golden: {}\n  now:    {}\n\
             if the change is intended, run UPDATE_GOLDEN=1 cargo test -p metaroce-policy and review the diff",
            path.display(),
            line + 1,
            want.lines().nth(line).unwrap_or("<end>"),
            text.lines().nth(line).unwrap_or("<end>"),
        );
    }
}

/// A script and what the policy decided, as stored in a golden file.
#[derive(Debug, Serialize)]
pub struct Golden<'a> {
    pub topology: &'a str,
    pub config: &'a PolicyConfig,
    pub script: Vec<(u64, Event)>,
    pub steps: &'a [GoldenStep],
}
