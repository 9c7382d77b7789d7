//! Scenario families: a YAML file that describes, with ranges and lists,
//! the fabrics, collectives, sizes and timings a claim must hold on; each
//! case is drawn from it by its number, so a suite of N cases is the same
//! N scenarios on every machine. `metaroce sim suite` runs them (see
//! `ctrl/cli/src/suite.rs`); this module reads a family and draws cases.
//!
//! ```yaml
//! name: clos-collectives
//! cases: 12          # the default of --cases
//! seeds: 1-3         # the default of --seeds: each case runs on each seed
//! modes: [ecmp, flowlet, spray, metaroce]
//! shapes:            # one drawn per case
//!   - {shape: fat-tree, k: [4, 6, 8]}
//!   - {shape: clos3, pods: 2-4, leaves: 2, spines: 2-4, supers: 1-2, hosts_per_leaf: 2}
//!   - {shape: leaf-spine, leaves: 2-8, spines: 2-4, hosts_per_leaf: 2-4, parallel: 1-2}
//!   - {shape: leaf-spine, leaves: 4, spines: 2, oversubscription: 2}
//! patterns: [all-to-all, ring-allreduce, permutation, incast-bystander, two-jobs]
//! ranks: 8-16        # hosts a collective spans (at most the fabric's)
//! announce: [false, true]
//! size: 256KiB-2MiB  # drawn log-uniform
//! chunk: [none, 64KiB, 256KiB]
//! iterations: 2-4
//! compute: 100us-1ms
//! network: {...}     # copied into every case's scenario, as are
//! control: {...}     # nic, control and limits
//! ```
//!
//! A value is one choice (`4`), a list to pick from (`[4, 6, 8]`) or a
//! range `LO-HI` (whole numbers uniform, sizes log-uniform, times uniform).

mod draw;

pub use draw::{Case, CaseError, CaseJob};

use metaroce_topo::yaml::{self, Node, Pos, Value};

use crate::error::{Diagnostic, SimError};
use crate::scenario::decode::Diags;
use crate::RoutingMode;

/// Largest family file read.
const MAX_FAMILY_BYTES: u64 = 1 << 20;

/// Collective patterns a family can draw.
pub const PATTERNS: &[&str] =
    &["all-to-all", "ring-allreduce", "permutation", "incast-bystander", "two-jobs"];
const SHAPES: &[&str] = &["leaf-spine", "fat-tree", "clos3"];
const PASS_THROUGH: &[&str] = &["network", "control", "nic", "limits"];
const TOP: &[&str] = &[
    "name",
    "description",
    "seed",
    "cases",
    "seeds",
    "modes",
    "bandwidth",
    "shapes",
    "patterns",
    "ranks",
    "announce",
    "size",
    "chunk",
    "iterations",
    "compute",
    "network",
    "control",
    "nic",
    "limits",
];

/// A whole number, a size or a time: one of a list, or a range.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    One(u64),
    Of(Vec<u64>),
    /// Inclusive.
    Range(u64, u64),
}

/// A chunk size or none (whole messages).
pub type ChunkChoice = Vec<Option<u64>>;

/// One fabric shape with its parameters' choices.
#[derive(Debug, Clone, PartialEq)]
pub enum ShapeSpec {
    LeafSpine {
        leaves: Choice,
        spines: Choice,
        hosts_per_leaf: Choice,
        parallel: Choice,
        oversubscription: Option<Choice>,
    },
    FatTree {
        k: Choice,
    },
    Clos3 {
        pods: Choice,
        leaves: Choice,
        spines: Choice,
        supers: Choice,
        hosts_per_leaf: Choice,
    },
}

/// A family as read.
#[derive(Debug, Clone)]
pub struct Family {
    pub name: String,
    pub description: String,
    pub seed: u64,
    pub cases: usize,
    pub seeds: Vec<u64>,
    pub modes: Vec<RoutingMode>,
    /// Every link's rate (and every NIC's).
    pub bandwidth: metaroce_topo::units::Bandwidth,
    pub shapes: Vec<ShapeSpec>,
    pub patterns: Vec<String>,
    pub ranks: Choice,
    pub announce: Vec<bool>,
    pub size: Choice,
    pub chunk: ChunkChoice,
    pub iterations: Choice,
    /// Picoseconds.
    pub compute: Choice,
    /// The scenario blocks copied into every case, as flow YAML, with the
    /// family's node (for positions of problems found in them).
    pub pass_through: Vec<(String, String, Node)>,
}

/// Reads a family file.
pub fn load_file(path: &std::path::Path) -> Result<Family, SimError> {
    let origin = path.display().to_string();
    let io = |source| SimError::Io { path: path.to_path_buf(), source };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.len() > MAX_FAMILY_BYTES {
        return Err(SimError::Invalid {
            origin,
            diagnostics: vec![Diagnostic {
                path: String::new(),
                pos: None,
                message: format!("file is {} bytes, more than the limit of {MAX_FAMILY_BYTES}", meta.len()),
            }],
        });
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    load_str(&text, &origin)
}

/// Reads a family from text; `origin` names it in problems.
pub fn load_str(text: &str, origin: &str) -> Result<Family, SimError> {
    let root = yaml::parse(text).map_err(|e| SimError::Invalid {
        origin: origin.to_string(),
        diagnostics: vec![Diagnostic { path: String::new(), pos: Some(e.pos), message: e.message }],
    })?;
    let mut d = Diags::default();
    let fam = decode(&mut d, &root);
    match fam {
        Some(f) if d.0.is_empty() => Ok(f),
        _ => {
            if d.0.is_empty() {
                d.err("", root.pos, "not a family: expected a mapping with shapes and patterns");
            }
            Err(SimError::Invalid { origin: origin.to_string(), diagnostics: d.0 })
        }
    }
}

fn decode(d: &mut Diags, root: &Node) -> Option<Family> {
    let mut name = None;
    let mut f = Family {
        name: String::new(),
        description: String::new(),
        seed: 1,
        cases: 10,
        seeds: vec![1, 2, 3],
        modes: vec![RoutingMode::Ecmp, RoutingMode::Flowlet, RoutingMode::Spray, RoutingMode::Metaroce],
        bandwidth: metaroce_topo::units::Bandwidth::gbps(100),
        shapes: Vec::new(),
        patterns: Vec::new(),
        ranks: Choice::Range(8, 16),
        announce: vec![false],
        size: Choice::One(1 << 20),
        chunk: vec![None],
        iterations: Choice::One(3),
        compute: Choice::One(300_000_000),
        pass_through: Vec::new(),
    };
    let mut seen_shapes = false;
    let mut seen_patterns = false;
    for (key, n) in d.map(root, "", TOP) {
        match key {
            "name" => name = d.str(n, key).map(str::to_owned),
            "description" => f.description = d.str(n, key).unwrap_or_default().trim().to_owned(),
            "seed" => f.seed = d.u64(n, key, 0, u64::MAX).unwrap_or(1),
            "cases" => f.cases = d.u64(n, key, 1, 10_000).unwrap_or(10) as usize,
            "seeds" => f.seeds = seeds(d, n, key).unwrap_or_default(),
            "modes" => f.modes = modes(d, n, key),
            "bandwidth" => {
                if let Some(t) = d.str(n, key) {
                    match metaroce_topo::units::Bandwidth::parse(t) {
                        Ok(b) => f.bandwidth = b,
                        Err(e) => d.err(key, n.pos, e.0),
                    }
                }
            }
            "shapes" => {
                seen_shapes = true;
                f.shapes = d
                    .list(n, key)
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| shape(d, s, &format!("shapes[{i}]")))
                    .collect();
                if f.shapes.is_empty() {
                    d.err(key, n.pos, "no shape to draw from; list at least one");
                }
            }
            "patterns" => {
                seen_patterns = true;
                f.patterns = one_of_names(d, n, key, PATTERNS);
                if f.patterns.is_empty() {
                    d.err(
                        key,
                        n.pos,
                        format!("no pattern to draw from; list some of {}", PATTERNS.join(", ")),
                    );
                }
            }
            "ranks" => {
                f.ranks = choice(d, n, key, Kind::Count { min: 2, max: 4096 }).unwrap_or(f.ranks.clone())
            }
            "announce" => f.announce = bools(d, n, key),
            "size" => f.size = choice(d, n, key, Kind::Bytes).unwrap_or(f.size.clone()),
            "chunk" => f.chunk = chunks(d, n, key),
            "iterations" => {
                f.iterations =
                    choice(d, n, key, Kind::Count { min: 1, max: 1000 }).unwrap_or(f.iterations.clone());
            }
            "compute" => f.compute = choice(d, n, key, Kind::Time).unwrap_or(f.compute.clone()),
            k if PASS_THROUGH.contains(&k) => f.pass_through.push((k.to_owned(), flow_yaml(n), n.clone())),
            _ => {}
        }
    }
    if !seen_shapes {
        d.err(
            "shapes",
            root.pos,
            format!("missing field \"shapes\": the fabrics to draw from ({})", SHAPES.join(", ")),
        );
    }
    if !seen_patterns {
        d.err(
            "patterns",
            root.pos,
            format!("missing field \"patterns\": the collectives to draw from ({})", PATTERNS.join(", ")),
        );
    }
    match name {
        Some(n) if !n.trim().is_empty() => f.name = n,
        _ => d.err("name", root.pos, "missing field \"name\": the family's name, used in reports"),
    }
    Some(f)
}

/// A seed list as text (`1-3`, `1,5`) or as a YAML list of them.
fn seeds(d: &mut Diags, n: &Node, path: &str) -> Option<Vec<u64>> {
    let text = match &n.value {
        Value::Seq(items) => items.iter().filter_map(Node::as_str).collect::<Vec<_>>().join(","),
        _ => d.str(n, path)?.to_owned(),
    };
    crate::seeds::parse(&text).map_err(|e| d.err(path, n.pos, e.to_string())).ok()
}

fn modes(d: &mut Diags, n: &Node, path: &str) -> Vec<RoutingMode> {
    let names: Vec<&str> = RoutingMode::ALL.iter().map(|m| m.as_str()).collect();
    one_of_names(d, n, path, &names)
        .iter()
        .filter_map(|s| RoutingMode::ALL.iter().copied().find(|m| m.as_str() == s))
        .collect()
}

/// A list of names, each one of `known`.
fn one_of_names(d: &mut Diags, n: &Node, path: &str, known: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, item) in d.list(n, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(s) = d.str(item, &p) else { continue };
        if known.contains(&s) {
            if !out.iter().any(|o| o == s) {
                out.push(s.to_owned());
            }
        } else {
            let hint = metaroce_topo::spec::did_you_mean(s, known.iter().copied())
                .map(|k| format!("did you mean \"{k}\"? "))
                .unwrap_or_default();
            d.err(&p, item.pos, format!("unknown name \"{s}\"; {hint}use one of {}", known.join(", ")));
        }
    }
    out
}

fn bools(d: &mut Diags, n: &Node, path: &str) -> Vec<bool> {
    let items: Vec<&Node> = match &n.value {
        Value::Seq(items) => items.iter().collect(),
        _ => vec![n],
    };
    let mut out: Vec<bool> = items.iter().filter_map(|i| d.bool(i, path)).collect();
    out.dedup();
    if out.is_empty() {
        d.err(path, n.pos, "expected true, false or a list of them");
    }
    out
}

fn chunks(d: &mut Diags, n: &Node, path: &str) -> ChunkChoice {
    let items: Vec<&Node> = match &n.value {
        Value::Seq(items) => items.iter().collect(),
        _ => vec![n],
    };
    let mut out = Vec::new();
    for item in items {
        match item.as_str() {
            Some("none") => out.push(None),
            _ => match d.bytes(item, path) {
                Some(0) => d.err(path, item.pos, "a chunk of 0 bytes; write none for whole messages"),
                Some(b) => out.push(Some(b)),
                None => {}
            },
        }
    }
    if out.is_empty() {
        d.err(path, n.pos, "expected none, a size like 256KiB, or a list of them");
    }
    out
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Count {
        min: u64,
        max: u64,
    },
    Bytes,
    /// Picoseconds.
    Time,
}

fn scalar(d: &mut Diags, n: &Node, text: &str, path: &str, kind: Kind) -> Option<u64> {
    let v = match kind {
        Kind::Count { .. } => {
            text.trim().replace('_', "").parse::<u64>().map_err(|_| "expected a whole number".to_owned())
        }
        Kind::Bytes => metaroce_topo::units::ByteSize::parse(text.trim()).map(|b| b.bytes()).map_err(|e| e.0),
        Kind::Time => metaroce_topo::units::Duration::parse(text.trim())
            .map(|t| t.ns().saturating_mul(1_000))
            .map_err(|e| e.0),
    };
    match (v, kind) {
        (Ok(v), Kind::Count { min, max }) if !(min..=max).contains(&v) => {
            d.err(path, n.pos, format!("{v} is out of range; use {min}..={max}"));
            None
        }
        (Ok(0), Kind::Bytes) => {
            d.err(path, n.pos, "a size of 0 bytes cannot be drawn");
            None
        }
        (Ok(v), _) => Some(v),
        (Err(e), _) => {
            d.err(path, n.pos, format!("\"{text}\": {e}"));
            None
        }
    }
}

/// One value, a list to pick from, or a range `LO-HI`.
fn choice(d: &mut Diags, n: &Node, path: &str, kind: Kind) -> Option<Choice> {
    match &n.value {
        Value::Seq(items) => {
            let vals: Vec<u64> = items
                .iter()
                .enumerate()
                .filter_map(|(i, it)| {
                    let p = format!("{path}[{i}]");
                    let t = d.str(it, &p)?;
                    scalar(d, it, t, &p, kind)
                })
                .collect();
            if items.is_empty() {
                d.err(path, n.pos, "an empty list cannot be drawn from");
            }
            (vals.len() == items.len() && !vals.is_empty()).then_some(Choice::Of(vals))
        }
        _ => {
            let text = d.str(n, path)?;
            match text.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (scalar(d, n, a, path, kind)?, scalar(d, n, b, path, kind)?);
                    if b < a {
                        d.err(path, n.pos, format!("range {text} runs backwards; write it LOW-HIGH"));
                        return None;
                    }
                    Some(Choice::Range(a, b))
                }
                None => scalar(d, n, text, path, kind).map(Choice::One),
            }
        }
    }
}

fn shape(d: &mut Diags, n: &Node, path: &str) -> Option<ShapeSpec> {
    const KNOWN: &[&str] = &[
        "shape",
        "leaves",
        "spines",
        "hosts_per_leaf",
        "parallel",
        "oversubscription",
        "k",
        "pods",
        "supers",
    ];
    let entries = d.map(n, path, KNOWN);
    let get = |k: &str| entries.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
    let Some(kind_node) = get("shape") else {
        d.err(path, n.pos, format!("missing field \"shape\"; use one of {}", SHAPES.join(", ")));
        return None;
    };
    let kind = d.str(kind_node, &format!("{path}.shape"))?;
    let allowed: &[&str] = match kind {
        "leaf-spine" => &["shape", "leaves", "spines", "hosts_per_leaf", "parallel", "oversubscription"],
        "fat-tree" => &["shape", "k"],
        "clos3" => &["shape", "pods", "leaves", "spines", "supers", "hosts_per_leaf"],
        other => {
            let hint = metaroce_topo::spec::did_you_mean(other, SHAPES.iter().copied())
                .map(|k| format!("did you mean \"{k}\"? "))
                .unwrap_or_default();
            d.err(
                &format!("{path}.shape"),
                kind_node.pos,
                format!("unknown shape \"{other}\"; {hint}use one of {}", SHAPES.join(", ")),
            );
            return None;
        }
    };
    for (key, v) in &entries {
        if !allowed.contains(key) {
            d.err(
                &format!("{path}.{key}"),
                v.pos,
                format!("shape {kind} has no \"{key}\"; it takes {}", allowed[1..].join(", ")),
            );
        }
    }
    let mut c = |key: &str, min: u64, max: u64, default: u64| -> Choice {
        match get(key) {
            Some(v) => choice(d, v, &format!("{path}.{key}"), Kind::Count { min, max })
                .unwrap_or(Choice::One(default)),
            None => Choice::One(default),
        }
    };
    Some(match kind {
        "leaf-spine" => {
            let (leaves, spines, hosts_per_leaf, parallel) = (
                c("leaves", 1, 512, 4),
                c("spines", 1, 64, 4),
                c("hosts_per_leaf", 1, 64, 4),
                c("parallel", 1, 8, 1),
            );
            let oversubscription = get("oversubscription").map(|_| c("oversubscription", 1, 16, 1));
            ShapeSpec::LeafSpine { leaves, spines, hosts_per_leaf, parallel, oversubscription }
        }
        "fat-tree" => {
            let k = c("k", 2, 32, 4);
            let odd = match &k {
                Choice::One(v) => *v % 2 == 1,
                Choice::Of(vs) => vs.iter().any(|v| v % 2 == 1),
                Choice::Range(..) => false,
            };
            if odd {
                d.err(&format!("{path}.k"), get("k").map_or(n.pos, |v| v.pos), "a fat-tree's k must be even");
            }
            ShapeSpec::FatTree { k }
        }
        _ => ShapeSpec::Clos3 {
            pods: c("pods", 1, 64, 2),
            leaves: c("leaves", 1, 64, 2),
            spines: c("spines", 1, 64, 2),
            supers: c("supers", 1, 64, 2),
            hosts_per_leaf: c("hosts_per_leaf", 1, 64, 2),
        },
    })
}

/// A node as flow-style YAML (`{a: 1, b: [x, y]}`), scalars as written.
fn flow_yaml(n: &Node) -> String {
    match &n.value {
        Value::Null => "~".into(),
        Value::Scalar { text, quoted } => {
            if *quoted || text.chars().any(|c| ",:{}[]#&*!|>'\"%@`".contains(c)) && !is_plain_unit(text) {
                serde_json::to_string(text).unwrap_or_default()
            } else {
                text.clone()
            }
        }
        Value::Seq(items) => format!("[{}]", items.iter().map(flow_yaml).collect::<Vec<_>>().join(", ")),
        Value::Map(entries) => format!(
            "{{{}}}",
            entries
                .iter()
                .map(|(k, v)| format!("{}: {}", flow_yaml(k), flow_yaml(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `20%` and the like need no quotes.
fn is_plain_unit(text: &str) -> bool {
    text.strip_suffix('%').is_some_and(|t| t.parse::<f64>().is_ok())
}

impl Family {
    /// The family node a problem of a drawn scenario at `path` (like
    /// `network.ecn.kmin`) came from, if it came from a copied block.
    pub fn position_of(&self, path: &str) -> Option<Pos> {
        let mut parts = path.split('.');
        let head = parts.next()?;
        let block = self.pass_through.iter().find(|(k, _, _)| k == head)?;
        let mut node = &block.2;
        let mut pos = node.pos;
        for part in parts {
            let key = part.split('[').next().unwrap_or(part);
            let Value::Map(entries) = &node.value else { break };
            let Some((_, v)) = entries.iter().find(|(k, _)| k.as_str() == Some(key)) else { break };
            node = v;
            pos = v.pos;
        }
        Some(pos)
    }
}

#[cfg(test)]
mod tests;
