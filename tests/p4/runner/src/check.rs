//! Comparing what a target did with what a case expects. Target-neutral:
//! the simulator's pipeline twin can hand its observations to [`check`].

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::case::{Expect, Output};
use crate::packet::{hex, Built};

/// One packet a target sent out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub port: u32,
    pub bytes: Vec<u8>,
    /// Packet-in metadata by name (CPU port).
    pub meta: Vec<(String, u128)>,
}

/// Everything observed during one case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// In the order each port sent them.
    pub outputs: Vec<Sent>,
    /// Digests in arrival order: name and fields.
    pub digests: Vec<(String, Vec<(String, u128)>)>,
    /// Counter increase over the case, per `(name, index)`.
    pub counters: HashMap<(String, i64), u64>,
    pub registers: HashMap<(String, i64), u128>,
}

struct Want<'a> {
    out: &'a Output,
    copy: u64,
    built: Built,
}

/// The copies of every expected output, built.
fn expand(outputs: &[Output]) -> Result<Vec<Want<'_>>, String> {
    let mut v = vec![];
    for out in outputs {
        let base = out.packet.written();
        for copy in 0..out.repeat.count {
            let built = out.packet.build(&out.repeat.overrides(copy, &base))?;
            v.push(Want { out, copy, built });
        }
    }
    Ok(v)
}

/// All ways the observation differs from the expectation; empty when it
/// matches.
pub fn check(e: &Expect, obs: &Observed) -> Vec<String> {
    let mut failures = vec![];
    let wants = match expand(&e.outputs) {
        Ok(w) => w,
        Err(m) => return vec![m],
    };
    let mut queues: BTreeMap<u32, VecDeque<&Sent>> = BTreeMap::new();
    for s in &obs.outputs {
        queues.entry(s.port).or_default().push_back(s);
    }
    let mut binds: HashMap<String, u32> = HashMap::new();
    let mut tallies: HashMap<(String, u128), u64> = HashMap::new();
    let mut per_port: HashMap<u32, u64> = HashMap::new();
    for (k, w) in wants.iter().enumerate() {
        let spec = &w.out.port;
        let mut ports: Vec<u32> = match &spec.any_of {
            Some(p) => p.clone(),
            None => queues.keys().copied().collect(),
        };
        if let Some(v) = &spec.same_as {
            match binds.get(v) {
                Some(p) => ports.retain(|x| x == p),
                None => {
                    failures.push(format!("{}: port variable `{v}` is not bound yet", w.out.where_));
                    return failures;
                }
            }
        }
        if let Some(v) = spec.not.as_ref().and_then(|v| binds.get(v)) {
            ports.retain(|x| x != v);
        }
        let mut why = vec![];
        let mut hit = None;
        for p in &ports {
            let Some(head) = queues.get(p).and_then(|q| q.front()) else {
                why.push(format!("port {p}: nothing (more) sent"));
                continue;
            };
            match w.built.compare(&head.bytes).and_then(|t| meta_ok(w.out, head).map(|()| t)) {
                Ok(t) => {
                    hit = Some((*p, t));
                    break;
                }
                Err(m) => why.push(format!("port {p}: {m}; got {}", hex(&head.bytes))),
            }
        }
        let Some((port, t)) = hit else {
            failures.push(format!(
                "expected output #{k} ({}, copy {}) on port(s) {ports:?} not seen: {}",
                w.out.where_,
                w.copy,
                why.join(" | ")
            ));
            return failures;
        };
        if let Some(q) = queues.get_mut(&port) {
            q.pop_front();
        }
        if let Some(v) = &spec.bind {
            binds.insert(v.clone(), port);
        }
        *per_port.entry(port).or_default() += 1;
        for (name, value) in t {
            *tallies.entry((name, value)).or_default() += 1;
        }
    }
    for (port, q) in &queues {
        for s in q {
            failures.push(format!("unexpected output on port {port}: {}", hex(&s.bytes)));
        }
    }
    for (port, r) in &e.port_counts {
        let n = per_port.get(port).copied().unwrap_or(0);
        if !r.contains(u128::from(n)) {
            failures.push(format!("port {port} sent {n} expected packets, wanted {r}"));
        }
    }
    for (name, value, r) in &e.tallies {
        let n = tallies.get(&(name.clone(), *value)).copied().unwrap_or(0);
        if !r.contains(u128::from(n)) {
            failures.push(format!("tally {name}: value {value} seen {n} times, wanted {r}"));
        }
    }
    failures.extend(check_digests(e, obs));
    for c in &e.counters {
        let sum: u64 =
            c.index.iter().map(|i| obs.counters.get(&(c.name.clone(), *i)).copied().unwrap_or(0)).sum();
        if !c.packets.contains(u128::from(sum)) {
            failures.push(format!("counter {}{:?} rose by {sum}, wanted {}", c.name, c.index, c.packets));
        }
    }
    for r in &e.registers {
        match obs.registers.get(&(r.name.clone(), r.index)) {
            Some(v) if r.value.contains(*v) => {}
            Some(v) => failures.push(format!("register {}[{}] is {v}, wanted {}", r.name, r.index, r.value)),
            None => failures.push(format!("register {}[{}] was not read", r.name, r.index)),
        }
    }
    failures
}

fn meta_ok(out: &Output, s: &Sent) -> Result<(), String> {
    for (name, want) in &out.packet_in {
        match s.meta.iter().find(|(n, _)| n == name) {
            Some((_, v)) if v == want => {}
            Some((_, v)) => return Err(format!("packet-in {name} is {v}, expected {want}")),
            None => return Err(format!("packet-in metadata {name} missing")),
        }
    }
    Ok(())
}

fn check_digests(e: &Expect, obs: &Observed) -> Vec<String> {
    let mut failures = vec![];
    if obs.digests.len() != e.digests.len() {
        failures.push(format!(
            "{} digests received, expected {}: {:?}",
            obs.digests.len(),
            e.digests.len(),
            obs.digests
        ));
    }
    for (i, ((want_name, want), (name, got))) in e.digests.iter().zip(&obs.digests).enumerate() {
        if !want_name.is_empty() && !name.ends_with(want_name.as_str()) {
            failures.push(format!("digest #{i} is {name}, expected {want_name}"));
        }
        for (field, r) in want {
            match got.iter().find(|(f, _)| f == field) {
                Some((_, v)) if r.contains(*v) => {}
                Some((_, v)) => failures.push(format!("digest #{i} field {field} is {v}, wanted {r}")),
                None => failures.push(format!("digest #{i} has no field {field}: {got:?}")),
            }
        }
    }
    failures
}
