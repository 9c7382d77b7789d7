//! Reading a job body: every field checked, every problem kept with its
//! path, so one answer lists all that is wrong.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use metaroce_topo::spec::did_you_mean;
use metaroce_topo::{HostId, NodeRef, Topology};
use serde_json::{Map, Value};

use super::{Job, JobError, JobFlow, JobLimits, JobRegistry, Pattern, Problem, MAX_PROBLEMS};
use crate::flow::FlowKey;

const FIELDS: &[&str] = &[
    "name",
    "pattern",
    "hosts",
    "bytes",
    "period_ms",
    "compute_ms",
    "offset",
    "start_ms",
    "shift",
    "target",
    "flows",
];
const FLOW_FIELDS: &[&str] = &["src", "dst", "sport", "qp", "src_qp", "bytes"];
const PATTERNS: &[&str] = &["all-to-all", "ring-allreduce", "permutation", "incast"];
/// RoCE queue pair numbers are 24 bits.
const MAX_QP: u64 = (1 << 24) - 1;

/// Parses and validates a job body (JSON text).
pub fn parse_job(
    body: &str,
    topo: &Topology,
    jobs: &JobRegistry,
    limits: &JobLimits,
) -> Result<Job, JobError> {
    let v: Value = serde_json::from_str(body)
        .map_err(|e| JobError { problems: vec![Problem::new("", format!("the body is not JSON: {e}"))] })?;
    validate_job(&v, topo, jobs, limits)
}

/// Validates a job body already parsed as JSON against the topology and
/// the registered jobs, and expands it into flows.
pub fn validate_job(
    v: &Value,
    topo: &Topology,
    jobs: &JobRegistry,
    limits: &JobLimits,
) -> Result<Job, JobError> {
    let mut c = Ctx { topo, limits, problems: Vec::new() };
    let Some(obj) = v.as_object() else {
        c.err("", "a job is a JSON object, like {\"name\": \"moe-7\", \"pattern\": \"all-to-all\", ...}");
        return Err(c.done());
    };
    c.unknown_fields(obj, "", FIELDS);
    let name = c.name(obj.get("name"), jobs);
    let period_ns = obj.get("period_ms").and_then(|p| c.period(p));
    let bytes = obj.get("bytes").and_then(|b| c.bytes(b, "bytes"));
    let built = match (obj.get("pattern"), obj.get("flows")) {
        (Some(_), Some(_)) => {
            c.err("flows", "give either \"pattern\" with \"hosts\", or \"flows\", not both");
            None
        }
        (None, None) => {
            c.err("", "missing \"pattern\" (with \"hosts\") or \"flows\"");
            None
        }
        (Some(p), None) => c.pattern(obj, p, bytes, jobs),
        (None, Some(f)) => {
            for key in ["hosts", "shift", "target"] {
                if obj.contains_key(key) {
                    c.err(
                        key,
                        format!("\"{key}\" goes with \"pattern\"; a job with \"flows\" lists them itself"),
                    );
                }
            }
            c.flows(f, bytes, jobs).map(|flows| (None, Vec::new(), flows))
        }
    };
    if let Some((_, _, flows)) = &built {
        let name = name.as_deref().unwrap_or("");
        c.owned(flows, jobs, name);
    }
    let timing = c.timing(obj, period_ns, built.as_ref().map(|(_, _, f)| f.as_slice()));
    match (name, built) {
        (Some(name), Some((pattern, ranks, flows))) if c.problems.is_empty() => {
            Ok(Job { name, pattern, ranks, period_ns, timing, flows })
        }
        _ => Err(c.done()),
    }
}

pub(super) struct Ctx<'a> {
    pub(super) topo: &'a Topology,
    pub(super) limits: &'a JobLimits,
    problems: Vec<Problem>,
}

type Built = (Option<Pattern>, Vec<HostId>, Vec<JobFlow>);

impl Ctx<'_> {
    pub(super) fn err(&mut self, path: &str, message: impl Into<String>) {
        self.problems.push(Problem::new(path, message));
    }

    fn done(mut self) -> JobError {
        if self.problems.len() > MAX_PROBLEMS {
            let more = self.problems.len() - MAX_PROBLEMS;
            self.problems.truncate(MAX_PROBLEMS);
            self.err("", format!("... and {more} more problems"));
        }
        JobError { problems: self.problems }
    }

    fn unknown_fields(&mut self, obj: &Map<String, Value>, at: &str, known: &[&str]) {
        for key in obj.keys().filter(|k| !known.contains(&k.as_str())) {
            let hint = did_you_mean(key, known.iter().copied())
                .map(|k| format!("did you mean \"{k}\"? "))
                .unwrap_or_default();
            let path = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
            self.err(&path, format!("unknown field \"{key}\"; {hint}fields: {}", known.join(", ")));
        }
    }

    fn name(&mut self, v: Option<&Value>, jobs: &JobRegistry) -> Option<String> {
        let Some(v) = v else {
            self.err("name", "missing field \"name\": a name like \"moe-7\"");
            return None;
        };
        let Some(s) = v.as_str() else {
            self.err("name", "the name is a string, like \"moe-7\"");
            return None;
        };
        let bad = s.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')));
        if s.is_empty() {
            self.err("name", "the name is empty");
        } else if s.len() > self.limits.max_name_len {
            self.err(
                "name",
                format!("the name is {} characters, more than {}", s.len(), self.limits.max_name_len),
            );
        } else if let Some(ch) = bad {
            self.err("name", format!("the name has {ch:?}; use letters, digits, '-', '_' and '.' only"));
        } else if jobs.get(s).is_some() {
            self.err("name", format!("a job named \"{s}\" is already registered; delete it first"));
        } else {
            return Some(s.to_string());
        }
        None
    }

    fn uint(&mut self, v: &Value, path: &str, min: u64, max: u64, what: &str) -> Option<u64> {
        match v.as_u64() {
            Some(x) if (min..=max).contains(&x) => Some(x),
            Some(x) => {
                self.err(path, format!("{what} {x} is out of range {min}..={max}"));
                None
            }
            None => {
                self.err(path, format!("{what} must be a whole number in {min}..={max}, got {v}"));
                None
            }
        }
    }

    fn bytes(&mut self, v: &Value, path: &str) -> Option<u64> {
        if v.as_u64() == Some(0) {
            self.err(path, "zero bytes per iteration: a flow that sends nothing needs no path");
            return None;
        }
        self.uint(v, path, 1, self.limits.max_bytes, "bytes per flow per iteration")
    }

    fn period(&mut self, v: &Value) -> Option<u64> {
        let max = self.limits.max_period_ms as f64;
        match v.as_f64() {
            Some(ms) if ms > 0.0 && ms <= max => Some((ms * 1e6).round() as u64),
            Some(ms) => {
                self.err("period_ms", format!("period {ms} ms is out of range (0, {max}]"));
                None
            }
            None => {
                self.err("period_ms", format!("period_ms must be a number of milliseconds, got {v}"));
                None
            }
        }
    }

    /// A host by name or IPv4 address, with a did-you-mean.
    fn host(&mut self, v: &Value, path: &str) -> Option<HostId> {
        let Some(name) = v.as_str() else {
            self.err(path, format!("a host is a name like \"h1-1\", got {v}"));
            return None;
        };
        match self.topo.lookup(name) {
            Some(NodeRef::Host(h)) => return Some(h),
            Some(NodeRef::Switch(_)) => {
                self.err(path, format!("\"{name}\" is a switch, not a host"));
                return None;
            }
            None => {}
        }
        if let Ok(ip) = name.parse::<Ipv4Addr>() {
            if let Some(h) = self.topo.hosts.iter().position(|h| h.ip == ip) {
                return Some(h);
            }
        }
        let hint = did_you_mean(name, self.topo.hosts.iter().map(|h| h.name.as_str()))
            .map(|k| format!("; did you mean \"{k}\"?"))
            .unwrap_or_default();
        self.err(path, format!("unknown host \"{name}\" in topology {}{hint}", self.topo.name));
        None
    }

    fn pattern(
        &mut self,
        obj: &Map<String, Value>,
        p: &Value,
        bytes: Option<u64>,
        jobs: &JobRegistry,
    ) -> Option<Built> {
        let name = match p.as_str() {
            Some(s) if PATTERNS.contains(&s) => Some(s),
            _ => {
                let shown = p.as_str().map_or_else(|| p.to_string(), str::to_string);
                let hint = p
                    .as_str()
                    .and_then(|s| did_you_mean(s, PATTERNS.iter().copied()))
                    .map(|k| format!("did you mean \"{k}\"? "))
                    .unwrap_or_default();
                self.err(
                    "pattern",
                    format!("unknown pattern {shown}; {hint}patterns: {}", PATTERNS.join(", ")),
                );
                None
            }
        };
        if bytes.is_none() && !obj.contains_key("bytes") {
            self.err("bytes", "missing field \"bytes\": bytes per flow per iteration");
        }
        let target = obj.get("target").and_then(|t| self.host(t, "target"));
        if name.is_some_and(|n| n != "incast") && obj.contains_key("target") {
            self.err("target", "\"target\" goes with pattern incast only");
        }
        if name.is_some_and(|n| n != "permutation") && obj.contains_key("shift") {
            self.err("shift", "\"shift\" goes with pattern permutation only");
        }
        let mut ranks = self.ranks(obj.get("hosts"))?;
        let name = name?;
        if let Some(t) = target {
            ranks.retain(|&h| h != t);
        }
        let min = if name == "incast" { 1 } else { 2 };
        if ranks.len() < min {
            self.err("hosts", format!("pattern {name} needs at least {min} hosts, got {}", ranks.len()));
            return None;
        }
        let pattern = self.build(obj, name, target, ranks.len())?;
        let count = pattern.flow_count(ranks.len());
        if count > self.limits.max_flows {
            self.err(
                "hosts",
                format!("{count} flows is more than the limit of {} per job", self.limits.max_flows),
            );
            return None;
        }
        self.room(count, jobs, "hosts")?;
        let bytes = bytes?;
        let flows = pattern
            .pairs(&ranks)
            .into_iter()
            .map(|(src, dst)| JobFlow {
                key: self.pair_key(src, dst),
                src,
                dst,
                bytes,
                index: None,
                src_qp: None,
            })
            .collect();
        Some((Some(pattern), ranks, flows))
    }

    fn build(
        &mut self,
        obj: &Map<String, Value>,
        name: &str,
        target: Option<HostId>,
        n: usize,
    ) -> Option<Pattern> {
        match name {
            "all-to-all" => Some(Pattern::AllToAll),
            "ring-allreduce" => Some(Pattern::RingAllReduce),
            "incast" => match target {
                Some(target) => Some(Pattern::Incast { target }),
                None => {
                    if !obj.contains_key("target") {
                        self.err("target", "pattern incast needs a \"target\" host");
                    }
                    None
                }
            },
            _ => {
                let shift = match obj.get("shift") {
                    Some(s) => self.uint(s, "shift", 1, 1 << 20, "shift")? as usize,
                    None => (n / 2).max(1),
                };
                if shift % n == 0 {
                    self.err("shift", format!("shift {shift} maps every rank to itself with {n} ranks"));
                    return None;
                }
                Some(Pattern::shift(n, shift))
            }
        }
    }

    fn ranks(&mut self, v: Option<&Value>) -> Option<Vec<HostId>> {
        let Some(v) = v else {
            self.err("hosts", "missing field \"hosts\": the ranks' host names, in rank order");
            return None;
        };
        let Some(items) = v.as_array() else {
            self.err("hosts", "\"hosts\" is a list of host names, like [\"h1-1\", \"h2-1\"]");
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut first: HashMap<HostId, usize> = HashMap::new();
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let path = format!("hosts[{i}]");
            match self.host(item, &path) {
                Some(h) => match first.insert(h, i) {
                    Some(j) => {
                        self.err(
                            &path,
                            format!(
                                "host {} is listed twice (also hosts[{j}]); one rank per host",
                                self.topo.hosts[h].name
                            ),
                        );
                        ok = false;
                    }
                    None => out.push(h),
                },
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn room(&mut self, count: usize, jobs: &JobRegistry, path: &str) -> Option<()> {
        let total = jobs.flow_count().saturating_add(count);
        if total > self.limits.max_total_flows {
            self.err(
                path,
                format!(
                    "{count} more flows would make {total} over all jobs, more than the limit of {}",
                    self.limits.max_total_flows
                ),
            );
            return None;
        }
        Some(())
    }

    fn pair_key(&self, src: HostId, dst: HostId) -> FlowKey {
        FlowKey::pair(self.topo.hosts[src].ip, self.topo.hosts[dst].ip)
    }

    fn flows(&mut self, v: &Value, bytes: Option<u64>, jobs: &JobRegistry) -> Option<Vec<JobFlow>> {
        let Some(items) = v.as_array() else {
            self.err(
                "flows",
                "\"flows\" is a list of {\"src\", \"dst\", \"sport\", \"qp\", \"src_qp\", \"bytes\"}",
            );
            return None;
        };
        if items.is_empty() {
            self.err("flows", "list at least one flow");
            return None;
        }
        if items.len() > self.limits.max_flows {
            self.err(
                "flows",
                format!("{} flows is more than the limit of {} per job", items.len(), self.limits.max_flows),
            );
            return None;
        }
        self.room(items.len(), jobs, "flows")?;
        let before = self.problems.len();
        let mut out = Vec::with_capacity(items.len());
        let mut seen: HashMap<FlowKey, usize> = HashMap::new();
        let mut pairs: HashMap<(HostId, HostId), (usize, bool)> = HashMap::new();
        let mut senders: HashMap<(HostId, HostId, u32), usize> = HashMap::new();
        for (i, item) in items.iter().enumerate() {
            let Some(f) = self.flow(item, i, bytes) else { continue };
            let path = format!("flows[{i}]");
            let is_pair = matches!(f.key, FlowKey::Pair { .. });
            if let Some(j) = seen.insert(f.key, i) {
                self.err(&path, format!("duplicate flow: the same as flows[{j}]"));
                continue;
            }
            if let Some(q) = f.src_qp {
                if let Some(j) = senders.insert((f.src, f.dst, q), i) {
                    self.err(
                        &format!("{path}.src_qp"),
                        format!("flows[{j}] has the same src_qp {q} between these hosts: one sender QP is one connection"),
                    );
                    continue;
                }
            }
            match pairs.get(&(f.src, f.dst)) {
                Some(&(j, other_pair)) if is_pair || other_pair => {
                    self.err(
                        &path,
                        format!(
                            "overlaps flows[{j}]: a flow without sport/qp owns all traffic between its hosts"
                        ),
                    );
                    continue;
                }
                Some(_) => {}
                None => {
                    pairs.insert((f.src, f.dst), (i, is_pair));
                }
            }
            out.push(f);
        }
        (self.problems.len() == before).then_some(out)
    }

    fn flow(&mut self, v: &Value, i: usize, default_bytes: Option<u64>) -> Option<JobFlow> {
        let at = format!("flows[{i}]");
        let Some(obj) = v.as_object() else {
            self.err(
                &at,
                "a flow is an object like {\"src\": \"h1-1\", \"dst\": \"h2-1\", \"bytes\": 1048576}",
            );
            return None;
        };
        self.unknown_fields(obj, &at, FLOW_FIELDS);
        let end = |key: &str, c: &mut Self| match obj.get(key) {
            Some(h) => c.host(h, &format!("{at}.{key}")),
            None => {
                c.err(&format!("{at}.{key}"), format!("missing field \"{key}\": a host name"));
                None
            }
        };
        let (src, dst) = (end("src", self), end("dst", self));
        let sport =
            obj.get("sport").and_then(|s| self.uint(s, &format!("{at}.sport"), 1, 65_535, "UDP source port"));
        let qp = obj.get("qp").and_then(|q| self.uint(q, &format!("{at}.qp"), 0, MAX_QP, "queue pair"));
        match (obj.contains_key("sport"), obj.contains_key("qp")) {
            (true, false) => self.err(
                &format!("{at}.qp"),
                "a flow with \"sport\" needs \"qp\" too (or neither: a host-pair flow)",
            ),
            (false, true) => self.err(
                &format!("{at}.sport"),
                "a flow with \"qp\" needs \"sport\" too (or neither: a host-pair flow)",
            ),
            _ => {}
        }
        // The sender's own queue pair (the requester's: its ACKs carry
        // it): the drain rule then pairs them exactly (`qp_pair`).
        let src_qp = obj.get("src_qp").and_then(|q| {
            let q = self.uint(q, &format!("{at}.src_qp"), 0, MAX_QP, "queue pair")?;
            if !obj.contains_key("qp") {
                self.err(
                    &format!("{at}.src_qp"),
                    "\"src_qp\" (the sender's queue pair) needs \"sport\" and \"qp\" (the receiver's): it pairs one connection",
                );
                return None;
            }
            Some(q as u32)
        });
        let bytes = match obj.get("bytes") {
            Some(b) => self.bytes(b, &format!("{at}.bytes")),
            None if default_bytes.is_some() => default_bytes,
            None => {
                self.err(&format!("{at}.bytes"), "missing field \"bytes\" (here or for the whole job)");
                None
            }
        };
        let (src, dst, bytes) = (src?, dst?, bytes?);
        if src == dst {
            self.err(&at, format!("src and dst are the same host {}", self.topo.hosts[src].name));
            return None;
        }
        let (a, b) = (self.topo.hosts[src].ip, self.topo.hosts[dst].ip);
        let key = match (sport, qp, obj.contains_key("sport") || obj.contains_key("qp")) {
            (Some(s), Some(q), _) => FlowKey::flow(a, b, s as u16, q as u32),
            (_, _, true) => return None,
            _ => FlowKey::pair(a, b),
        };
        Some(JobFlow { key, src, dst, bytes, index: Some(i), src_qp })
    }

    /// Every flow another job already owns.
    fn owned(&mut self, flows: &[JobFlow], jobs: &JobRegistry, name: &str) {
        for (i, f) in flows.iter().enumerate() {
            if let Some(other) = jobs.conflict(&f.key, name) {
                self.err(&f.origin(i), format!("flow {} is already owned by job \"{other}\"", f.key));
                if self.problems.len() > MAX_PROBLEMS {
                    return;
                }
            }
        }
    }
}
