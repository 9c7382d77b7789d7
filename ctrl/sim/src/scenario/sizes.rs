//! Flow-size distributions of `pattern: poisson` jobs: a CDF given inline,
//! in a file, or by the name of one the simulator ships
//! (`ctrl/sim/sizes/*.yaml`: web search, Hadoop, storage).
//!
//! A CDF is a list of points `[bytes, cumulative fraction]`, both
//! non-decreasing, ending at 1. Between two points sizes are uniform (the
//! CDF is piecewise linear); a first point with a fraction above 0 is a
//! point mass at its size. Drawn sizes are whole bytes, at least 1 (one
//! packet).

use std::path::Path;

use metaroce_topo::spec::did_you_mean;
use metaroce_topo::units::ByteSize;
use metaroce_topo::yaml::{self, Node, Value};
use serde::Serialize;

use crate::scenario::decode::Diags;

/// Parts per billion: cumulative fractions are kept exact as integers.
const PPB: u64 = 1_000_000_000;
/// Largest size file read.
const MAX_SIZES_BYTES: u64 = 1 << 20;
/// Most points of one CDF.
const MAX_POINTS: usize = 100_000;

/// The shipped distributions, by name: (name, file text).
pub const NAMED: &[(&str, &str)] = &[
    ("web-search", include_str!("../../sizes/web-search.yaml")),
    ("hadoop", include_str!("../../sizes/hadoop.yaml")),
    ("storage", include_str!("../../sizes/storage.yaml")),
];

/// A flow-size CDF.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SizeCdf {
    /// Where it came from: a shipped name, a file, or "inline".
    pub name: String,
    /// `(bytes, cumulative fraction in parts per billion)`, non-decreasing
    /// in both, the last at one billion.
    pub points: Vec<(u64, u64)>,
}

impl SizeCdf {
    /// The mean flow size in bytes.
    pub fn mean(&self) -> f64 {
        let mut prev = (0u64, 0u64);
        let mut sum = 0.0;
        for (i, &(x, p)) in self.points.iter().enumerate() {
            let mass = (p - prev.1) as f64 / PPB as f64;
            let mid = if i == 0 { x as f64 } else { (prev.0 + x) as f64 / 2.0 };
            sum += mass * mid;
            prev = (x, p);
        }
        sum.max(1.0)
    }

    /// The size at quantile `u` in `[0, 1)`, whole bytes, at least 1.
    pub fn sample(&self, u: f64) -> u64 {
        let q = (u * PPB as f64) as u64;
        let i = self.points.partition_point(|&(_, p)| p <= q).min(self.points.len() - 1);
        let (x1, p1) = self.points[i];
        if i == 0 || p1 == self.points[i - 1].1 {
            return x1.max(1);
        }
        let (x0, p0) = self.points[i - 1];
        let t = (q - p0) as f64 / (p1 - p0) as f64;
        ((x0 as f64 + t * (x1 - x0) as f64).ceil() as u64).max(1)
    }
}

/// Decodes `sizes:`: a shipped name, a file (relative to `base`, the
/// scenario's directory), or an inline list of points.
pub(crate) fn decode(d: &mut Diags, n: &Node, path: &str, base: &Path) -> Option<SizeCdf> {
    if matches!(n.value, Value::Seq(_)) {
        return points(d, n, path, "inline");
    }
    let text = d.str(n, path)?;
    if let Some((name, body)) = NAMED.iter().find(|(k, _)| *k == text) {
        return from_text(d, n, path, body, name);
    }
    if !(text.contains('/') || text.ends_with(".yaml") || text.ends_with(".yml")) {
        let names: Vec<&str> = NAMED.iter().map(|(k, _)| *k).collect();
        let hint = did_you_mean(text, names.iter().copied())
            .map(|k| format!("did you mean \"{k}\"? "))
            .unwrap_or_default();
        let msg = format!(
            "unknown flow-size distribution \"{text}\"; {hint}use one of {}, a file like sizes/mine.yaml, \
             or a list of [bytes, cumulative fraction] points",
            names.join(", ")
        );
        d.err(path, n.pos, msg);
        return None;
    }
    let file = base.join(text);
    let body = match std::fs::metadata(&file).and_then(|m| {
        if m.len() > MAX_SIZES_BYTES {
            Err(std::io::Error::other(format!(
                "{} bytes is more than the limit of {MAX_SIZES_BYTES}",
                m.len()
            )))
        } else {
            std::fs::read_to_string(&file)
        }
    }) {
        Ok(b) => b,
        Err(e) => {
            d.err(path, n.pos, format!("cannot read flow-size file {}: {e}", file.display()));
            return None;
        }
    };
    from_text(d, n, path, &body, &file.display().to_string())
}

/// A CDF document: a list of points, or `{name, source, points}`. Its
/// problems are reported at the `sizes:` field, each naming the
/// document's own line and column.
fn from_text(d: &mut Diags, at: &Node, path: &str, text: &str, origin: &str) -> Option<SizeCdf> {
    let mut inner = Diags::default();
    let cdf = match yaml::parse(text) {
        Ok(root) => document(&mut inner, &root, origin),
        Err(e) => {
            inner.err("", e.pos, e.message);
            None
        }
    };
    for diag in inner.0 {
        d.err(path, at.pos, format!("in {origin}:{diag}"));
    }
    cdf
}

fn document(d: &mut Diags, root: &Node, origin: &str) -> Option<SizeCdf> {
    if matches!(root.value, Value::Seq(_)) {
        return points(d, root, "", origin);
    }
    let mut pts = None;
    for (key, n) in d.map(root, "", &["name", "source", "points"]) {
        match key {
            "points" => pts = Some(n),
            _ => {
                d.str(n, key);
            }
        }
    }
    match pts {
        Some(n) => points(d, n, "points", origin),
        None => {
            d.err("", root.pos, "missing field \"points\": a list of [bytes, cumulative fraction]");
            None
        }
    }
}

/// The points, checked: sizes and fractions non-decreasing, ending at 1,
/// no mass on sizes below one byte.
fn points(d: &mut Diags, n: &Node, path: &str, name: &str) -> Option<SizeCdf> {
    let before = d.0.len();
    let items = d.list(n, path);
    if items.is_empty() {
        d.err(path, n.pos, "a flow-size CDF needs at least one [bytes, cumulative fraction] point");
        return None;
    }
    if items.len() > MAX_POINTS {
        d.err(path, n.pos, format!("{} points is more than the limit of {MAX_POINTS}", items.len()));
        return None;
    }
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let p = if path.is_empty() { format!("[{i}]") } else { format!("{path}[{i}]") };
        let pair = d.list(item, &p);
        if pair.len() != 2 {
            if matches!(item.value, Value::Seq(_)) {
                d.err(&p, item.pos, "a point is [bytes, cumulative fraction], like [10KB, 0.15]");
            }
            continue;
        }
        let (Some(x), Some(f)) = (size(d, &pair[0], &p), d.fraction(&pair[1], &p, 0.0, 1.0)) else {
            continue;
        };
        let f = (f * PPB as f64).round() as u64;
        if let Some(&(px, pf)) = out.last() {
            if x < px {
                d.err(&p, pair[0].pos, format!("the CDF is not monotone: {x} B comes after {px} B"));
            }
            if f < pf {
                let msg = format!(
                    "the CDF is not monotone: fraction {} comes after {}",
                    f as f64 / PPB as f64,
                    pf as f64 / PPB as f64
                );
                d.err(&p, pair[1].pos, msg);
            }
        }
        let mass = f.saturating_sub(out.last().map_or(0, |l| l.1));
        if x == 0 && mass > 0 {
            let msg = "a flow is at least one packet: sizes with probability above 0 start at 1 byte";
            d.err(&p, pair[0].pos, msg);
        }
        out.push((x, f));
    }
    if d.0.len() != before {
        return None;
    }
    let last = out.last().map_or(0, |l| l.1);
    if last != PPB {
        let at = items.last().map_or(n.pos, |l| l.pos);
        d.err(path, at, format!("the CDF ends at {}, not at 1", last as f64 / PPB as f64));
        return None;
    }
    Some(SizeCdf { name: name.to_string(), points: out })
}

/// Bytes: a bare whole number, or a size with unit (`10KB`, `1MiB`).
fn size(d: &mut Diags, n: &Node, path: &str) -> Option<u64> {
    let text = d.str(n, path)?;
    if let Ok(v) = text.replace('_', "").parse::<u64>() {
        return Some(v);
    }
    if text.trim_start().starts_with('-') {
        d.err(path, n.pos, format!("flow size {text} is negative; a flow is at least one packet (1 byte)"));
        return None;
    }
    ByteSize::parse(text).map(|b| b.bytes()).map_err(|e| d.err(path, n.pos, e.0)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> SizeCdf {
        let mut d = Diags::default();
        let body = NAMED.iter().find(|(k, _)| *k == name).map(|(_, b)| *b).unwrap_or("");
        let n = Node { pos: yaml::Pos { line: 1, col: 1 }, value: Value::Null };
        let cdf = from_text(&mut d, &n, "sizes", body, name);
        assert!(d.0.is_empty(), "{:?}", d.0);
        cdf.unwrap_or_else(|| panic!("{name} did not decode"))
    }

    #[test]
    fn shipped_distributions_decode_with_their_published_means() {
        // Means of the piecewise-linear CDFs (as load-balancing studies
        // compute them): web search ~1.7 MB, Hadoop ~120 KB, storage ~41 KB.
        let m = |n: &str| named(n).mean();
        assert!((1.6e6..1.8e6).contains(&m("web-search")), "{}", m("web-search"));
        assert!((1.0e5..1.5e5).contains(&m("hadoop")), "{}", m("hadoop"));
        assert!((3.5e4..4.5e4).contains(&m("storage")), "{}", m("storage"));
    }

    #[test]
    fn samples_follow_the_cdf() {
        let cdf = named("web-search");
        assert_eq!(cdf.sample(0.0), 1);
        let mut rng = crate::rng::Rng::new(3);
        let n = 200_000;
        let draws: Vec<u64> = (0..n).map(|_| cdf.sample(rng.unit())).collect();
        let below = |x: u64| draws.iter().filter(|&&d| d <= x).count() as f64 / n as f64;
        assert!((below(10_000) - 0.15).abs() < 0.01, "{}", below(10_000));
        assert!((below(1_000_000) - 0.70).abs() < 0.01, "{}", below(1_000_000));
        assert!(draws.iter().all(|&d| (1..=30_000_000).contains(&d)));
        let mean = draws.iter().sum::<u64>() as f64 / n as f64;
        assert!((mean / cdf.mean() - 1.0).abs() < 0.03, "{mean} vs {}", cdf.mean());
    }
}
