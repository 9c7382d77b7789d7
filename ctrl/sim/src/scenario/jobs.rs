//! Decoding the `jobs` list: patterns, host selection and rank placement,
//! sizes, start times and rate caps, each checked against the topology.

use std::path::Path;

use metaroce_topo::spec::did_you_mean;
use metaroce_topo::yaml::{Node, Value};
use metaroce_topo::{HostId, NodeRef, Topology};

use crate::scenario::config::{Draw, Job, Pattern};
use crate::scenario::decode::Diags;
use crate::scenario::sizes::{self, SizeCdf};

const JOB: &[&str] = &[
    "name",
    "pattern",
    "hosts",
    "count",
    "placement",
    "size",
    "chunk",
    "start",
    "rate",
    "target",
    "shift",
    "priority",
    "iterations",
    "compute",
    "announce",
    "offset",
    "compute_jitter",
    "load",
    "sizes",
    "duration",
];
/// Fields only `pattern: poisson` takes.
const POISSON_ONLY: &[&str] = &["load", "sizes", "duration"];
/// Most iterations of one job.
pub const MAX_ITERATIONS: u64 = 10_000;
const PATTERNS: &[&str] = &["all-to-all", "ring-allreduce", "incast", "permutation", "poisson"];
/// Most jobs in one scenario.
pub const MAX_JOBS: usize = 256;

/// Where jobs are decoded: the topology, the default priority, and the
/// scenario's directory (flow-size files are relative to it). Their random
/// parts are drawn once the seed is known (`Scenario::reseed`).
pub(crate) struct JobEnv<'a> {
    pub topo: &'a Topology,
    pub priority: u8,
    pub base: &'a Path,
}

/// Decodes every job; problems go to `d`.
pub(crate) fn decode(d: &mut Diags, v: &Node, env: &JobEnv) -> Vec<Job> {
    let items = d.list(v, "jobs");
    if items.is_empty() && matches!(v.value, Value::Seq(_)) {
        d.err("jobs", v.pos, "list at least one job");
    }
    if items.len() > MAX_JOBS {
        d.err("jobs", v.pos, format!("{} jobs is more than the limit of {MAX_JOBS}", items.len()));
        return Vec::new();
    }
    let mut out: Vec<Job> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("jobs[{i}]");
        if let Some(mut job) = job(d, item, &path, env) {
            job.draw.index = i;
            if out.iter().any(|j| j.name == job.name) {
                d.err(&format!("{path}.name"), item.pos, format!("job name \"{}\" is used twice", job.name));
            }
            out.push(job);
        }
    }
    out
}

#[derive(Default)]
struct RawJob<'n> {
    name: Option<String>,
    pattern: Option<(&'n str, &'n Node)>,
    hosts: Option<Vec<HostId>>,
    count: Option<(usize, &'n Node)>,
    shuffled: bool,
    size: Option<u64>,
    chunk: Option<u64>,
    start_ps: u64,
    rate_bps: Option<u64>,
    target: Option<HostId>,
    shift: Option<(usize, &'n Node)>,
    priority: Option<u8>,
    iterations: Option<u32>,
    compute_ps: u64,
    announce: Option<(bool, &'n Node)>,
    offset: Option<(bool, &'n Node)>,
    jitter_ppm: Option<(u32, &'n Node)>,
    load_ppm: Option<u32>,
    sizes: Option<SizeCdf>,
    duration_ps: Option<u64>,
    /// The first field only poisson takes, for errors on other patterns.
    poisson_field: Option<(&'n str, &'n Node)>,
}

fn job(d: &mut Diags, v: &Node, path: &str, env: &JobEnv) -> Option<Job> {
    let topo = env.topo;
    let errors_before = d.0.len();
    let mut r = RawJob::default();
    for (key, n) in d.map(v, path, JOB) {
        let p = format!("{path}.{key}");
        if POISSON_ONLY.contains(&key) && r.poisson_field.is_none() {
            r.poisson_field = Some((key, n));
        }
        match key {
            "name" => r.name = d.str(n, &p).map(str::to_string),
            "pattern" => r.pattern = pattern(d, n, &p).map(|s| (s, n)),
            "hosts" => r.hosts = hosts(d, n, &p, topo),
            "count" => r.count = d.u64(n, &p, 1, 1 << 20).map(|c| (c as usize, n)),
            "placement" => r.shuffled = placement(d, n, &p),
            "size" => r.size = size(d, n, &p),
            "chunk" => r.chunk = size(d, n, &p),
            "start" => r.start_ps = d.duration_ps(n, &p).unwrap_or(0),
            "rate" => r.rate_bps = d.bandwidth(n, &p),
            "target" => r.target = d.str(n, &p).and_then(|s| host(d, n, &p, topo, s)),
            "priority" => r.priority = d.priority(n, &p),
            "iterations" => r.iterations = iterations(d, n, &p),
            "compute" => r.compute_ps = compute(d, n, &p),
            "announce" => r.announce = d.bool(n, &p).map(|b| (b, n)),
            "offset" => r.offset = offset(d, n, &p).map(|b| (b, n)),
            "compute_jitter" => r.jitter_ppm = jitter(d, n, &p).map(|j| (j, n)),
            "load" => r.load_ppm = load(d, n, &p),
            "sizes" => r.sizes = sizes::decode(d, n, &p, env.base),
            "duration" => r.duration_ps = duration(d, n, &p),
            _ => r.shift = d.u64(n, &p, 1, 1 << 20).map(|c| (c as usize, n)),
        }
    }
    let name = r
        .name
        .clone()
        .unwrap_or_else(|| format!("job{}", path.trim_start_matches("jobs[").trim_end_matches(']')));
    let Some((pattern_name, pattern_node)) = r.pattern else {
        if d.0.len() == errors_before {
            d.err(path, v.pos, format!("missing field \"pattern\"; use one of {}", PATTERNS.join(", ")));
        }
        return None;
    };
    let ranks = ranks(d, v, path, &mut r)?;
    check_rate(d, v, path, topo, &ranks, r.rate_bps);
    if pattern_name == "poisson" {
        poisson_fields(d, v, path, &r);
    } else if let Some((key, n)) = r.poisson_field {
        let msg = format!("only pattern poisson takes \"{key}\" (pattern here: {pattern_name})");
        d.err(&format!("{path}.{key}"), n.pos, msg);
    }
    let size = if pattern_name == "poisson" {
        // Flow sizes are drawn; `size` is the smallest possible, for the
        // figures that read it.
        1
    } else {
        r.size.or_else(|| {
            d.err(path, v.pos, "missing field \"size\" (bytes, like 1MiB)");
            None
        })?
    };
    timing_fields(d, path, &r);
    let pattern = build_pattern(d, path, pattern_name, pattern_node, &mut r, &ranks)?;
    if d.0.len() != errors_before {
        return None;
    }
    if r.chunk.is_some() && pattern_name == "ring-allreduce" {
        d.err(path, v.pos, "a ring AllReduce is chunked by its steps already; leave out \"chunk\"");
        return None;
    }
    let chunk = r.chunk.filter(|&c| c < size);
    let priority = r.priority.unwrap_or(env.priority);
    let draw = Draw {
        index: 0,
        hosts: ranks.clone(),
        shuffled: r.shuffled,
        random_perm: matches!(pattern, Pattern::Permutation { .. }) && r.shift.is_none(),
    };
    Some(Job {
        name,
        pattern,
        ranks,
        size,
        start_ps: r.start_ps,
        rate_bps: r.rate_bps,
        chunk,
        priority,
        iterations: r.iterations.unwrap_or(1),
        compute_ps: r.compute_ps,
        announce: r.announce.is_some_and(|(b, _)| b),
        offset_fixed: r.offset.is_some_and(|(b, _)| b),
        compute_jitter_ppm: r.jitter_ppm.map_or(0, |(j, _)| j),
        offset_ps: 0,
        draw,
    })
}

/// What a poisson job must have and must not: `load`, `sizes` and
/// `duration`; no `size`, `chunk` or several iterations.
fn poisson_fields(d: &mut Diags, v: &Node, path: &str, r: &RawJob) {
    // A field already reported (itself or an item of it) is not "missing".
    let erred = |d: &Diags, key: &str| {
        let field = format!("{path}.{key}");
        d.0.iter().any(|x| x.path == field || x.path.starts_with(&format!("{field}[")))
    };
    if r.load_ppm.is_none() && !erred(d, "load") {
        d.err(
            path,
            v.pos,
            "pattern poisson needs \"load\": the offered load per sender, in (0, 1], like 0.5",
        );
    }
    if r.sizes.is_none() && !erred(d, "sizes") {
        let msg = "pattern poisson needs \"sizes\": web-search, hadoop, storage, a file, or a list of \
                   [bytes, cumulative fraction] points";
        d.err(path, v.pos, msg);
    }
    if r.duration_ps.is_none() && !erred(d, "duration") {
        d.err(path, v.pos, "pattern poisson needs \"duration\": how long flows arrive, like 2ms");
    }
    if r.size.is_some() {
        d.err(path, v.pos, "a poisson job draws its flow sizes from \"sizes\"; leave out \"size\"");
    }
    if r.chunk.is_some() {
        d.err(path, v.pos, "a poisson job sends each flow whole; leave out \"chunk\"");
    }
    if r.iterations.is_some_and(|i| i > 1) {
        d.err(path, v.pos, "a poisson job runs once; leave out \"iterations\"");
    }
}

/// `offset: shiftable|fixed`: true when fixed.
fn offset(d: &mut Diags, n: &Node, path: &str) -> Option<bool> {
    match d.str(n, path)? {
        "shiftable" => Some(false),
        "fixed" => Some(true),
        other => {
            let hint = did_you_mean(other, ["shiftable", "fixed"])
                .map(|k| format!("did you mean \"{k}\"? "))
                .unwrap_or_default();
            d.err(path, n.pos, format!("unknown offset \"{other}\"; {hint}use shiftable or fixed"));
            None
        }
    }
}

/// A fraction written as `0.05` or `5%`; None if it is neither.
fn fraction(n: &Node) -> Option<f64> {
    let text = n.as_str().unwrap_or("");
    match text.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().ok().map(|v| v / 100.0),
        None => text.trim().parse::<f64>().ok(),
    }
}

/// `compute_jitter`: how much each compute phase varies, a fraction in
/// [0, 0.5] (like 5% or 0.05), as parts per million.
fn jitter(d: &mut Diags, n: &Node, path: &str) -> Option<u32> {
    let v = fraction(n);
    match v {
        Some(v) if v.is_finite() && (0.0..=0.5).contains(&v) => Some((v * 1e6).round() as u32),
        Some(v) => {
            let msg =
                format!("compute jitter {v} is out of range: each compute phase varies by 0 to 50% (0.5)");
            d.err(path, n.pos, msg);
            None
        }
        None => {
            d.err(path, n.pos, "expected a compute jitter like 5% or 0.05");
            None
        }
    }
}

/// `offset` and `compute_jitter` go with a periodic job: `offset: fixed`
/// with an announced one (only an announced job gets a recommendation to
/// refuse), `compute_jitter` with compute phases.
fn timing_fields(d: &mut Diags, path: &str, r: &RawJob) {
    let announced = r.announce.is_some_and(|(b, _)| b);
    let periodic = r.iterations.is_some_and(|i| i > 1);
    if let Some((fixed, n)) = r.offset {
        if fixed && !announced {
            let msg = "offset: fixed refuses the controller's recommended start offset, which only an \
                       announced job gets; add announce: true or leave \"offset\" out";
            d.err(&format!("{path}.offset"), n.pos, msg);
        } else if !periodic {
            let msg = "\"offset\" goes with a periodic job: give it \"iterations\" above 1";
            d.err(&format!("{path}.offset"), n.pos, msg);
        }
    }
    if let Some((j, n)) = r.jitter_ppm {
        if j > 0 && (!periodic || r.compute_ps == 0) {
            let msg = "\"compute_jitter\" varies the compute phases between iterations: give \"iterations\" \
                       above 1 and \"compute\" above 0";
            d.err(&format!("{path}.compute_jitter"), n.pos, msg);
        }
    }
}

/// `load`: a fraction of the sender's NIC rate in (0, 1], as parts per million.
fn load(d: &mut Diags, n: &Node, path: &str) -> Option<u32> {
    let v = fraction(n);
    match v {
        Some(v) if v.is_finite() && v > 0.0 && v <= 1.0 => Some(((v * 1e6).round() as u32).max(1)),
        Some(v) => {
            let msg = format!(
                "load {v} is out of range: the offered load per sender is above 0 and at most 1 (its NIC rate)"
            );
            d.err(path, n.pos, msg);
            None
        }
        None => {
            d.err(path, n.pos, "expected a load in (0, 1], like 0.5 or 50%");
            None
        }
    }
}

fn duration(d: &mut Diags, n: &Node, path: &str) -> Option<u64> {
    let t = d.duration_ps(n, path)?;
    if t == 0 {
        d.err(path, n.pos, "flows arrive for a while; give a duration above 0, like 2ms");
    }
    (t > 0).then_some(t)
}

fn iterations(d: &mut Diags, n: &Node, path: &str) -> Option<u32> {
    if n.as_str().map(str::trim) == Some("0") {
        d.err(path, n.pos, "a job runs at least 1 iteration; leave \"iterations\" out for one");
        return None;
    }
    d.u64(n, path, 1, MAX_ITERATIONS).map(|v| v as u32)
}

fn compute(d: &mut Diags, n: &Node, path: &str) -> u64 {
    if n.as_str().is_some_and(|s| s.trim_start().starts_with('-')) {
        d.err(path, n.pos, "the compute time between iterations cannot be negative; use 0us or more");
        return 0;
    }
    d.duration_ps(n, path).unwrap_or(0)
}

/// Where each job said `announce: true`, for the check against the modes.
pub(crate) fn announced(v: &Node) -> Vec<(String, metaroce_topo::yaml::Pos)> {
    let Value::Seq(items) = &v.value else { return Vec::new() };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Value::Map(entries) = &item.value else { continue };
        if let Some((_, n)) = entries.iter().find(|(k, _)| k.as_str() == Some("announce")) {
            if matches!(n.as_str(), Some("true" | "on" | "yes")) {
                out.push((format!("jobs[{i}].announce"), n.pos));
            }
        }
    }
    out
}

fn pattern<'n>(d: &mut Diags, n: &'n Node, path: &str) -> Option<&'n str> {
    let s = d.str(n, path)?;
    if PATTERNS.contains(&s) {
        return Some(s);
    }
    let hint = did_you_mean(s, PATTERNS.iter().copied())
        .map(|k| format!("did you mean \"{k}\"? "))
        .unwrap_or_default();
    d.err(path, n.pos, format!("unknown pattern \"{s}\"; {hint}patterns: {}", PATTERNS.join(", ")));
    None
}

fn placement(d: &mut Diags, n: &Node, path: &str) -> bool {
    match d.str(n, path) {
        Some("in-order") | None => false,
        Some("shuffled") => true,
        Some(other) => {
            d.err(path, n.pos, format!("unknown placement \"{other}\"; use in-order or shuffled"));
            false
        }
    }
}

fn size(d: &mut Diags, n: &Node, path: &str) -> Option<u64> {
    match d.bytes(n, path)? {
        0 => {
            d.err(path, n.pos, "a message of zero bytes cannot complete; give a size like 1MiB");
            None
        }
        s => Some(s),
    }
}

/// Resolves one host name (or IP address) with a did-you-mean.
fn host(d: &mut Diags, n: &Node, path: &str, topo: &Topology, name: &str) -> Option<HostId> {
    if let Some(NodeRef::Host(h)) = topo.lookup(name) {
        return Some(h);
    }
    if let Some(h) = topo.hosts.iter().position(|h| h.ip.to_string() == name) {
        return Some(h);
    }
    let msg = match topo.lookup(name) {
        Some(NodeRef::Switch(_)) => format!("\"{name}\" is a switch, not a host"),
        _ => {
            let hint = did_you_mean(name, topo.hosts.iter().map(|h| h.name.as_str()))
                .map(|k| format!("; did you mean \"{k}\"?"))
                .unwrap_or_default();
            format!("unknown host \"{name}\" in topology {}{hint}", topo.name)
        }
    };
    d.err(path, n.pos, msg);
    None
}

/// `all`, a pattern with `*` wildcards, or a list of names.
fn hosts(d: &mut Diags, n: &Node, path: &str, topo: &Topology) -> Option<Vec<HostId>> {
    if let Some(s) = n.as_str() {
        let hs: Vec<HostId> = if s == "all" {
            (0..topo.hosts.len()).collect()
        } else {
            (0..topo.hosts.len()).filter(|&h| glob(s, &topo.hosts[h].name)).collect()
        };
        if hs.is_empty() {
            d.err(path, n.pos, format!("\"{s}\" matches no host of topology {}", topo.name));
            return None;
        }
        return Some(hs);
    }
    let mut out = Vec::new();
    let mut ok = true;
    for (i, item) in d.list(n, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(name) = d.str(item, &p) else {
            ok = false;
            continue;
        };
        match host(d, item, &p, topo, name) {
            Some(h) if out.contains(&h) => {
                d.err(&p, item.pos, format!("host \"{name}\" is listed twice; each rank needs its own host"));
                ok = false;
            }
            Some(h) => out.push(h),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// Matches `*` as any run of characters.
fn glob(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// The selected hosts in rank order, before any shuffle (the seed
/// shuffles them, see `scenario::draw`).
fn ranks(d: &mut Diags, v: &Node, path: &str, r: &mut RawJob) -> Option<Vec<HostId>> {
    let Some(mut hs) = r.hosts.take() else {
        if !d.0.iter().any(|x| x.path.starts_with(&format!("{path}.hosts"))) {
            d.err(
                path,
                v.pos,
                "missing field \"hosts\": all, a pattern like \"h*-1\", or a list of host names",
            );
        }
        return None;
    };
    if let Some(t) = r.target {
        hs.retain(|&h| h != t);
    }
    if let Some((count, n)) = r.count {
        if count > hs.len() {
            d.err(
                &format!("{path}.count"),
                n.pos,
                format!("count {count} is more than the {} hosts selected", hs.len()),
            );
            return None;
        }
        hs.truncate(count);
    }
    Some(hs)
}

fn check_rate(d: &mut Diags, v: &Node, path: &str, topo: &Topology, ranks: &[HostId], rate: Option<u64>) {
    let Some(rate) = rate else { return };
    if let Some(&h) = ranks.iter().find(|&&h| topo.hosts[h].nic_rate.bps() < rate) {
        let host = &topo.hosts[h];
        d.err(
            &format!("{path}.rate"),
            v.pos,
            format!("rate {rate} bps is impossible: host {} has a {} NIC", host.name, host.nic_rate),
        );
    }
}

fn build_pattern(
    d: &mut Diags,
    path: &str,
    name: &str,
    at: &Node,
    r: &mut RawJob,
    ranks: &[HostId],
) -> Option<Pattern> {
    let need = |d: &mut Diags, min: usize| {
        if ranks.len() < min {
            d.err(path, at.pos, format!("pattern {name} needs at least {min} hosts, got {}", ranks.len()));
            return false;
        }
        true
    };
    match name {
        "all-to-all" => need(d, 2).then_some(Pattern::AllToAll),
        "ring-allreduce" => need(d, 2).then_some(Pattern::RingAllReduce),
        "incast" => {
            let Some(target) = r.target else {
                d.err(path, at.pos, "pattern incast needs a \"target\" host");
                return None;
            };
            need(d, 1).then_some(Pattern::Incast { target })
        }
        "poisson" => {
            if !need(d, 2) {
                return None;
            }
            Some(Pattern::Poisson {
                load_ppm: r.load_ppm?,
                sizes: r.sizes.take()?,
                duration_ps: r.duration_ps?,
                flows: Vec::new(),
            })
        }
        _ => {
            if !need(d, 2) {
                return None;
            }
            let n = ranks.len();
            let perm = match r.shift {
                Some((s, node)) if s % n == 0 => {
                    d.err(
                        &format!("{path}.shift"),
                        node.pos,
                        format!("shift {s} maps every rank to itself with {n} ranks"),
                    );
                    return None;
                }
                Some((s, _)) => (0..n).map(|i| (i + s) % n).collect(),
                // Drawn with the seed (`scenario::draw`).
                None => Vec::new(),
            };
            Some(Pattern::Permutation { perm })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("h*-1", "h3-1"));
        assert!(!glob("h*-1", "h3-2"));
        assert!(glob("*", "anything"));
        assert!(glob("h1-*", "h1-4"));
        assert!(!glob("h1-*", "h2-4"));
        assert!(glob("h1", "h1"));
    }
}
