//! Drawing case `i` of a family: a fabric from one of its shapes, one of
//! its patterns over hosts picked at random, sizes and timings from its
//! ranges, written as a topology and a scenario any `sim` command reads.
//! The draw depends only on the family's seed and the case number.

use metaroce_topo::gen::{self, Common};
use metaroce_topo::Topology;

use super::{Choice, Family, ShapeSpec};
use crate::rng::{mix64, Rng};

/// A case whose fabric the generators refuse (a shape's ranges reach a
/// fabric too large for its switches' ports, say).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("case {case}: {shape}: {source}")]
pub struct CaseError {
    pub case: usize,
    pub shape: String,
    #[source]
    pub source: metaroce_topo::gen::GenError,
}

/// One drawn case.
#[derive(Debug, Clone)]
pub struct Case {
    /// 1-based.
    pub number: usize,
    /// `fat-tree k=6`, `leaf-spine 4x2 (3 hosts/leaf, 2 parallel)`, …
    pub shape: String,
    pub topology: Topology,
    /// The drawn pattern (`two-jobs`, …) and the jobs it made.
    pub pattern: String,
    pub jobs: Vec<CaseJob>,
    /// The scenario, naming its topology as `topology.yaml` beside it.
    pub scenario_yaml: String,
}

/// One job of a case, as the suite groups it.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseJob {
    pub name: String,
    /// The group the suite reports it in: `permutation`, `bystander`, …
    pub role: String,
    pub announced: bool,
    pub ranks: usize,
    pub size: u64,
    pub chunk: Option<u64>,
    pub iterations: u64,
    pub compute_ps: u64,
}

fn pick(rng: &mut Rng, c: &Choice) -> u64 {
    match c {
        Choice::One(v) => *v,
        Choice::Of(vs) => vs[rng.below(vs.len() as u64) as usize],
        Choice::Range(a, b) => a + rng.below(b - a + 1),
    }
}

/// Sizes log-uniform in a range, rounded to 4 KiB (at least 4 KiB).
fn pick_size(rng: &mut Rng, c: &Choice) -> u64 {
    match c {
        Choice::Range(a, b) => {
            let (la, lb) = ((*a as f64).ln(), (*b as f64).ln());
            let v = (la + (lb - la) * rng.unit()).exp();
            (((v / 4096.0).round() as u64).max(1) * 4096).clamp(*a, *b)
        }
        other => pick(rng, other),
    }
}

/// Times uniform, rounded to a microsecond.
fn pick_time(rng: &mut Rng, c: &Choice) -> u64 {
    match c {
        Choice::Range(a, b) => {
            let v = a + rng.below(b - a + 1);
            (v / 1_000_000 * 1_000_000).max(*a)
        }
        other => pick(rng, other),
    }
}

fn pick_of<T: Clone>(rng: &mut Rng, items: &[T]) -> T {
    items[rng.below(items.len() as u64) as usize].clone()
}

fn bytes_text(b: u64) -> String {
    if b.is_multiple_of(1 << 20) {
        format!("{}MiB", b >> 20)
    } else if b.is_multiple_of(1024) {
        format!("{}KiB", b >> 10)
    } else {
        format!("{b}B")
    }
}

fn time_text(ps: u64) -> String {
    if ps.is_multiple_of(1_000_000_000) {
        format!("{}ms", ps / 1_000_000_000)
    } else if ps.is_multiple_of(1_000_000) {
        format!("{}us", ps / 1_000_000)
    } else {
        format!("{}ns", ps / 1_000)
    }
}

impl Family {
    /// Case `number` (1-based). `Err` says why its shape cannot be built.
    pub fn case(&self, number: usize) -> Result<Case, CaseError> {
        let mut rng = Rng::new(mix64(self.seed ^ mix64(number as u64)));
        let spec = pick_of(&mut rng, &self.shapes);
        let mut common = Common::new(&format!("{}-case{number}", self.name), self.bandwidth);
        common.thrift_base_port = None;
        let (shape, topology) = match &spec {
            ShapeSpec::LeafSpine { leaves, spines, hosts_per_leaf, parallel, oversubscription } => {
                let (l, s, p) = (pick(&mut rng, leaves), pick(&mut rng, spines), pick(&mut rng, parallel));
                let h = match oversubscription {
                    Some(o) => s * p * pick(&mut rng, o),
                    None => pick(&mut rng, hosts_per_leaf),
                };
                let up = s * p;
                let ratio = if h > up {
                    format!(", {:.1}:1 oversubscribed", h as f64 / up as f64)
                } else {
                    String::new()
                };
                let par = if p > 1 { format!(", {p} parallel links") } else { String::new() };
                (
                    format!("leaf-spine {l}x{s}, {h} hosts/leaf{par}{ratio}"),
                    gen::leaf_spine(&common, l as usize, s as usize, h as usize, p as usize),
                )
            }
            ShapeSpec::FatTree { k } => {
                let mut k = pick(&mut rng, k);
                k += k % 2;
                (format!("fat-tree k={k}"), gen::fat_tree(&common, k as usize))
            }
            ShapeSpec::Clos3 { pods, leaves, spines, supers, hosts_per_leaf } => {
                let (p, l, s, x, h) = (
                    pick(&mut rng, pods),
                    pick(&mut rng, leaves),
                    pick(&mut rng, spines),
                    pick(&mut rng, supers),
                    pick(&mut rng, hosts_per_leaf),
                );
                (
                    format!("clos3 {p} pods x {l} leaves, {s} planes x {x} supers, {h} hosts/leaf"),
                    gen::clos3(&common, p as usize, l as usize, s as usize, x as usize, h as usize),
                )
            }
        };
        let topology = topology.map_err(|source| CaseError { case: number, shape: shape.clone(), source })?;
        let pattern = pick_of(&mut rng, &self.patterns);
        let mut draw = Drawn {
            announced: pick_of(&mut rng, &self.announce),
            size: pick_size(&mut rng, &self.size),
            chunk: pick_of(&mut rng, &self.chunk),
            iterations: pick(&mut rng, &self.iterations),
            compute_ps: pick_time(&mut rng, &self.compute),
            ranks: pick(&mut rng, &self.ranks) as usize,
        };
        let mut hosts: Vec<usize> = (0..topology.hosts.len()).collect();
        rng.shuffle(&mut hosts);
        draw.ranks = draw.ranks.clamp(2, hosts.len().max(2));
        let (pattern, jobs, lines) = jobs_of(&pattern, &draw, &topology, &hosts);
        let mut y = String::new();
        y.push_str(&format!(
            "# Case {number} of family {}: drawn by `metaroce sim suite`; run it alone with\n#   metaroce sim run scenario.yaml\nname: {}-case{number}\n",
            self.name, self.name
        ));
        y.push_str(&format!("description: \"{shape}; {pattern}\"\ntopology: topology.yaml\nseed: 1\n"));
        y.push_str(&format!(
            "modes: [{}]\n",
            self.modes.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")
        ));
        for (key, text, _) in &self.pass_through {
            y.push_str(&format!("{key}: {text}\n"));
        }
        y.push_str("jobs:\n");
        for l in lines {
            y.push_str(&format!("  - {l}\n"));
        }
        Ok(Case { number, shape, topology, pattern, jobs, scenario_yaml: y })
    }
}

struct Drawn {
    announced: bool,
    size: u64,
    chunk: Option<u64>,
    iterations: u64,
    compute_ps: u64,
    ranks: usize,
}

/// The jobs of a pattern, as scenario lines, over hosts in drawn order.
fn jobs_of(
    pattern: &str,
    d: &Drawn,
    topo: &Topology,
    order: &[usize],
) -> (String, Vec<CaseJob>, Vec<String>) {
    let names =
        |idx: &[usize]| idx.iter().map(|&h| topo.hosts[h].name.clone()).collect::<Vec<_>>().join(", ");
    let mut jobs = Vec::new();
    let mut lines = Vec::new();
    let mut job = |name: &str,
                   role: &str,
                   pat: &str,
                   hosts: &[usize],
                   extra: &str,
                   size: u64,
                   chunk: Option<u64>| {
        let chunk_text = chunk.filter(|_| pat != "ring-allreduce" && pat != "incast");
        let mut l = format!(
            "{{name: {name}, pattern: {pat}, hosts: [{}], size: {}, iterations: {}, compute: {}, announce: {}",
            names(hosts),
            bytes_text(size),
            d.iterations,
            time_text(d.compute_ps),
            d.announced
        );
        if let Some(c) = chunk_text.filter(|&c| c < size) {
            l.push_str(&format!(", chunk: {}", bytes_text(c)));
        }
        l.push_str(extra);
        l.push('}');
        lines.push(l);
        jobs.push(CaseJob {
            name: name.to_owned(),
            role: role.to_owned(),
            announced: d.announced,
            ranks: hosts.len(),
            size,
            chunk: chunk_text.filter(|&c| c < size),
            iterations: d.iterations,
            compute_ps: d.compute_ps,
        });
    };
    let n = d.ranks;
    let pattern = match pattern {
        // An incast of half the ranks into one host, beside a permutation
        // of four hosts, two of which receive on the target's leaf.
        "incast-bystander" if order.len() >= 7 => {
            let target = order[0];
            let leaf = topo.hosts[target].leaf;
            let (same, other): (Vec<usize>, Vec<usize>) =
                order[1..].iter().partition(|&&h| topo.hosts[h].leaf == leaf);
            let mut bystander: Vec<usize> = same.iter().take(2).copied().collect();
            let rest: Vec<usize> = other.iter().chain(same.iter().skip(2)).copied().collect();
            let need = 4 - bystander.len();
            bystander.extend(rest.iter().take(need));
            let senders: Vec<usize> = rest.iter().skip(need).take((n / 2).max(2)).copied().collect();
            let target_name = &topo.hosts[target].name;
            job("incast", "incast", "incast", &senders, &format!(", target: {target_name}"), d.size, None);
            job("bystander", "bystander", "permutation", &bystander, "", d.size, d.chunk);
            "incast-bystander"
        }
        // Elephants (a permutation of four times the size, whole messages)
        // on half the ranks, an All-to-All on the other half.
        "two-jobs" if n >= 4 => {
            let (a, b) = order[..n].split_at(n / 2);
            job("elephants", "two-jobs: elephants", "permutation", a, "", d.size * 4, None);
            job(
                "all-to-all",
                "two-jobs: all-to-all",
                "all-to-all",
                b,
                ", placement: shuffled",
                d.size,
                d.chunk,
            );
            "two-jobs"
        }
        "all-to-all" => {
            job(
                "all-to-all",
                "all-to-all",
                "all-to-all",
                &order[..n],
                ", placement: shuffled",
                d.size,
                d.chunk,
            );
            "all-to-all"
        }
        "ring-allreduce" => {
            job(
                "ring",
                "ring-allreduce",
                "ring-allreduce",
                &order[..n],
                ", placement: shuffled",
                d.size,
                None,
            );
            "ring-allreduce"
        }
        // A random permutation (drawn per seed); also what a fabric too
        // small for the other two patterns gets.
        _ => {
            job("permutation", "permutation", "permutation", &order[..n], "", d.size, d.chunk);
            "permutation"
        }
    };
    let jobs = jobs.into_iter().map(|mut j| {
        if j.announced {
            j.role.push_str(" (announced)");
        }
        j
    });
    (pattern.to_owned(), jobs.collect(), lines)
}
