//! A small OpenMetrics registry and text encoder.
//!
//! Why our own rather than the `prometheus-client` crate: we export a fixed,
//! known set of families (counters, gauges, histograms) and need two things
//! that crate makes awkward: dropping the series of one switch when its
//! groups are replaced, and listing the exported sample names so a test can
//! check the Grafana dashboard against them. This is ~250 lines with no new
//! dependency, and its output is checked line by line in the tests.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What kind of metric a family is; decides the sample suffixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// The fixed description of one metric family.
#[derive(Debug)]
pub(crate) struct Spec {
    /// Family name; counters carry no `_total` here (OpenMetrics adds it to
    /// the sample), other names end in their unit where they have one.
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    /// Emitted as `# UNIT`; must be the suffix of `name`.
    pub unit: Option<&'static str>,
    pub labels: &'static [&'static str],
    /// Upper bounds for histograms, ascending, without +Inf.
    pub buckets: &'static [f64],
}

impl Spec {
    /// The sample names a scrape shows for this family.
    pub fn sample_names(&self) -> Vec<String> {
        match self.kind {
            Kind::Counter => vec![format!("{}_total", self.name)],
            Kind::Gauge => vec![self.name.to_string()],
            Kind::Histogram => {
                ["_bucket", "_sum", "_count"].iter().map(|s| format!("{}{s}", self.name)).collect()
            }
        }
    }
}

#[derive(Debug, Clone)]
struct Histogram {
    /// Per bucket (not cumulative), one more than `Spec::buckets` for +Inf.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

#[derive(Debug, Clone)]
enum Series {
    Counter(u64),
    Gauge(f64),
    Histogram(Histogram),
}

#[derive(Debug)]
struct Family {
    spec: &'static Spec,
    /// Keyed by label values, in `spec.labels` order; sorted for stable output.
    series: BTreeMap<Vec<String>, Series>,
}

/// Every family, indexed by its position in the spec list.
#[derive(Debug)]
pub(crate) struct Registry {
    families: Vec<Family>,
}

impl Registry {
    pub fn new(specs: &'static [Spec]) -> Self {
        Registry { families: specs.iter().map(|spec| Family { spec, series: BTreeMap::new() }).collect() }
    }

    fn family(&mut self, id: usize) -> Option<&mut Family> {
        let fam = self.families.get_mut(id);
        debug_assert!(fam.is_some(), "metric family {id} is not registered");
        fam
    }

    pub fn add(&mut self, id: usize, labels: Vec<String>, n: u64) {
        if let Some(fam) = self.family(id) {
            let s = fam.series.entry(labels).or_insert(Series::Counter(0));
            if let Series::Counter(v) = s {
                *v = v.saturating_add(n);
            }
        }
    }

    /// Sets a counter to a total counted elsewhere (a switch's own
    /// counter; it restarts from 0 when the switch does, which scrapers
    /// read as a counter reset).
    pub fn set_counter(&mut self, id: usize, labels: Vec<String>, total: u64) {
        if let Some(fam) = self.family(id) {
            fam.series.insert(labels, Series::Counter(total));
        }
    }

    pub fn set(&mut self, id: usize, labels: Vec<String>, value: f64) {
        if let Some(fam) = self.family(id) {
            fam.series.insert(labels, Series::Gauge(value));
        }
    }

    pub fn observe(&mut self, id: usize, labels: Vec<String>, value: f64) {
        let Some(fam) = self.family(id) else { return };
        let bounds = fam.spec.buckets;
        let s = fam.series.entry(labels).or_insert_with(|| {
            Series::Histogram(Histogram { counts: vec![0; bounds.len() + 1], sum: 0.0, count: 0 })
        });
        if let Series::Histogram(h) = s {
            let i = bounds.iter().position(|b| value <= *b).unwrap_or(bounds.len());
            if let Some(c) = h.counts.get_mut(i) {
                *c += 1;
            }
            h.sum += value;
            h.count += 1;
        }
    }

    /// Drops one series of family `id`.
    pub fn remove(&mut self, id: usize, labels: &[String]) {
        if let Some(fam) = self.family(id) {
            fam.series.remove(labels);
        }
    }

    /// Drops every series of family `id` whose label `label` equals `value`.
    pub fn remove_where(&mut self, id: usize, label: &str, value: &str) {
        let Some(fam) = self.family(id) else { return };
        let Some(i) = fam.spec.labels.iter().position(|l| *l == label) else { return };
        if i > 0 {
            fam.series.retain(|k, _| k.get(i).map(String::as_str) != Some(value));
            return;
        }
        // Series are sorted by their first label: those with this value
        // are one run, found without scanning the others (a fabric has
        // thousands of group-weight series, cleared per switch).
        let from = vec![value.to_string()];
        let run: Vec<Vec<String>> = fam
            .series
            .range(from..)
            .map(|(k, _)| k)
            .take_while(|k| k.first().map(String::as_str) == Some(value))
            .cloned()
            .collect();
        for k in run {
            fam.series.remove(&k);
        }
    }

    /// The OpenMetrics text exposition, ending with `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(4096);
        for fam in &self.families {
            encode_family(&mut out, fam);
        }
        out.push_str("# EOF\n");
        out
    }
}

fn encode_family(out: &mut String, fam: &Family) {
    let spec = fam.spec;
    let _ = writeln!(out, "# TYPE {} {}", spec.name, spec.kind.as_str());
    if let Some(unit) = spec.unit {
        let _ = writeln!(out, "# UNIT {} {unit}", spec.name);
    }
    let _ = writeln!(out, "# HELP {} {}", spec.name, escape_help(spec.help));
    for (values, series) in &fam.series {
        let labels = render_labels(spec.labels, values, None);
        match series {
            Series::Counter(v) => {
                let _ = writeln!(out, "{}_total{labels} {v}", spec.name);
            }
            Series::Gauge(v) => {
                let _ = writeln!(out, "{}{labels} {}", spec.name, fmt_f64(*v));
            }
            Series::Histogram(h) => encode_histogram(out, spec, values, h),
        }
    }
}

fn encode_histogram(out: &mut String, spec: &Spec, values: &[String], h: &Histogram) {
    let mut cumulative = 0u64;
    let bounds = spec.buckets.iter().copied().chain(std::iter::once(f64::INFINITY));
    for (le, n) in bounds.zip(&h.counts) {
        cumulative += n;
        let labels = render_labels(spec.labels, values, Some(("le", &fmt_f64(le))));
        let _ = writeln!(out, "{}_bucket{labels} {cumulative}", spec.name);
    }
    let labels = render_labels(spec.labels, values, None);
    let _ = writeln!(out, "{}_sum{labels} {}", spec.name, fmt_f64(h.sum));
    let _ = writeln!(out, "{}_count{labels} {}", spec.name, h.count);
}

fn render_labels(names: &[&str], values: &[String], extra: Option<(&str, &str)>) -> String {
    let pairs = names.iter().copied().zip(values.iter().map(String::as_str)).chain(extra);
    let body: Vec<String> = pairs.map(|(k, v)| format!("{k}=\"{}\"", escape_label(v))).collect();
    if body.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", body.join(","))
    }
}

/// OpenMetrics floats: `+Inf`, `-Inf`, `NaN`, otherwise Rust's shortest
/// round-trip form, which always has a `.` or an exponent (`1.0`, `2.5e-5`).
pub(crate) fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v:?}")
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    static SPECS: [Spec; 3] = [
        Spec { name: "t_hits", help: "Hits.", kind: Kind::Counter, unit: None, labels: &["a"], buckets: &[] },
        Spec {
            name: "t_level",
            help: "Level\nnext.",
            kind: Kind::Gauge,
            unit: None,
            labels: &["a", "b"],
            buckets: &[],
        },
        Spec {
            name: "t_seconds",
            help: "Time.",
            kind: Kind::Histogram,
            unit: Some("seconds"),
            labels: &[],
            buckets: &[0.001, 0.01],
        },
    ];

    #[test]
    fn obs_encodes_each_kind() {
        let mut r = Registry::new(&SPECS);
        r.add(0, vec!["x\"y".into()], 2);
        r.add(0, vec!["x\"y".into()], 3);
        r.set(1, vec!["p".into(), "q".into()], 0.5);
        r.set(1, vec!["p".into(), "r".into()], 1.0);
        r.observe(2, vec![], 0.0005);
        r.observe(2, vec![], 0.005);
        r.observe(2, vec![], 5.0);
        let text = r.encode();
        assert!(text.contains("t_hits_total{a=\"x\\\"y\"} 5\n"), "{text}");
        assert!(text.contains("# HELP t_level Level\\nnext.\n"));
        assert!(text.contains("t_level{a=\"p\",b=\"q\"} 0.5\n"));
        assert!(text.contains("# UNIT t_seconds seconds\n"));
        assert!(text.contains("t_seconds_bucket{le=\"0.001\"} 1\n"));
        assert!(text.contains("t_seconds_bucket{le=\"0.01\"} 2\n"));
        assert!(text.contains("t_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(text.contains("t_seconds_count 3\n"));
        assert!(text.ends_with("# EOF\n"));
        r.remove_where(1, "b", "q");
        let text = r.encode();
        assert!(!text.contains("b=\"q\"") && text.contains("b=\"r\""));
        // By the first label: only that value's run goes ("p1" and "p10" stay).
        for a in ["p1", "p10", "o"] {
            r.set(1, vec![a.into(), "z".into()], 1.0);
        }
        r.remove_where(1, "a", "p");
        let text = r.encode();
        assert!(!text.contains("a=\"p\","), "{text}");
        assert!(["p1", "p10", "o"].iter().all(|a| text.contains(&format!("a=\"{a}\",b=\"z\""))), "{text}");
    }

    #[test]
    fn obs_floats_are_openmetrics_numbers() {
        assert_eq!(fmt_f64(1.0), "1.0");
        assert_eq!(fmt_f64(f64::INFINITY), "+Inf");
        assert_eq!(fmt_f64(f64::NAN), "NaN");
        assert_eq!(fmt_f64(0.00025), "0.00025");
    }
}
