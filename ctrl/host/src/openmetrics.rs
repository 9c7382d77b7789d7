//! The exporter's OpenMetrics text: written from a [`Snapshot`], and read
//! back by the scrape client into counters and rates.
//!
//! Families (every sample carries `host`):
//! - `metaroce_rdma_counter_total{device,port,source,counter}` and
//!   `metaroce_rdma_counter_rate` (per second) for `counters/` and `hw_counters/`;
//! - `metaroce_netdev_counter_total{netdev,source,counter}` and
//!   `metaroce_netdev_counter_rate` for `statistics/`, ethtool pause and DCB PFC;
//! - `metaroce_rdma_port_active{device,port,netdev}` (1 or 0), which also
//!   tells a scraper which netdev each RDMA device runs over;
//! - `metaroce_host_read_problems`: files or requests that failed this poll.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::sample::{CounterKey, PortState, Source};

/// What one poll produced, ready to render.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub host: String,
    pub ports: Vec<PortState>,
    pub counters: BTreeMap<CounterKey, u64>,
    pub rates: BTreeMap<CounterKey, f64>,
    pub problems: usize,
}

pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Renders a snapshot as OpenMetrics text, ending with `# EOF`.
pub fn render(s: &Snapshot) -> String {
    let mut out = String::new();
    let host = escape(&s.host);
    let labels = |k: &CounterKey| match k.port {
        Some(p) => format!(
            "host=\"{host}\",device=\"{}\",port=\"{p}\",source=\"{}\",counter=\"{}\"",
            escape(&k.device),
            k.source.as_str(),
            escape(&k.name)
        ),
        None => format!(
            "host=\"{host}\",netdev=\"{}\",source=\"{}\",counter=\"{}\"",
            escape(&k.device),
            k.source.as_str(),
            escape(&k.name)
        ),
    };
    for (family, rdma, help) in [
        ("metaroce_rdma_counter", true, "RDMA port counter from sysfs counters/ and hw_counters/."),
        ("metaroce_netdev_counter", false, "Netdev counter: sysfs statistics/, ethtool pause, DCB PFC."),
    ] {
        let keys = s.counters.iter().filter(|(k, _)| k.source.is_rdma() == rdma);
        let _ = writeln!(out, "# TYPE {family} counter\n# HELP {family} {help}");
        for (k, v) in keys.clone() {
            let _ = writeln!(out, "{family}_total{{{}}} {v}", labels(k));
        }
        let _ = writeln!(
            out,
            "# TYPE {family}_rate gauge\n# HELP {family}_rate Increase per second over the last poll."
        );
        for (k, _) in keys {
            if let Some(r) = s.rates.get(k) {
                let _ = writeln!(out, "{family}_rate{{{}}} {}", labels(k), number(*r));
            }
        }
    }
    let _ = writeln!(out, "# TYPE metaroce_rdma_port_active gauge\n# HELP metaroce_rdma_port_active 1 when the port state is ACTIVE.");
    for p in &s.ports {
        let _ = writeln!(
            out,
            "metaroce_rdma_port_active{{host=\"{host}\",device=\"{}\",port=\"{}\",netdev=\"{}\"}} {}",
            escape(&p.device),
            p.port,
            escape(p.netdev.as_deref().unwrap_or("")),
            u8::from(p.active())
        );
    }
    let _ = writeln!(
        out,
        "# TYPE metaroce_host_read_problems gauge\n# HELP metaroce_host_read_problems Files or requests that failed in the last poll.\nmetaroce_host_read_problems{{host=\"{host}\"}} {}\n# EOF",
        s.problems
    );
    out
}

fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "NaN".to_string()
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
    /// The value as written, so that a u64 counter above 2^53 stays exact.
    pub text: String,
}

/// A line of exposition text that is not a sample: its 1-based number and
/// what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct ParseError {
    pub line: usize,
    pub problem: LineError,
}

/// What was wrong with a sample line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    #[error("a sample needs a value after its name and labels")]
    NoValue,
    #[error("the value {text:?} is not a number")]
    NotANumber { text: String },
    #[error("a label needs key=\"value\", found {found:?}")]
    Label { found: String },
    #[error("the value of label {key:?} has no closing quote")]
    Unterminated { key: String },
}

/// Parses exposition text into sample lines; the error gives the 1-based
/// line number and what was wrong.
pub fn parse(text: &str) -> Result<Vec<Line>, ParseError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        if line == "# EOF" {
            break;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(parse_line(line).map_err(|problem| ParseError { line: i + 1, problem })?);
    }
    Ok(out)
}

fn parse_line(line: &str) -> Result<Line, LineError> {
    let name_end = line.find(['{', ' ']).ok_or(LineError::NoValue)?;
    let name = line[..name_end].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(body) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(body)?;
        labels = parsed;
        rest = after;
    }
    let text = rest.split_whitespace().next().ok_or(LineError::NoValue)?.to_string();
    let value: f64 = text.parse().map_err(|_| LineError::NotANumber { text: text.clone() })?;
    Ok(Line { name, labels, value, text })
}

/// Parses `k="v",...}` and returns the labels and the text after `}`.
fn parse_labels(mut s: &str) -> Result<(BTreeMap<String, String>, &str), LineError> {
    let mut labels = BTreeMap::new();
    loop {
        s = s.trim_start_matches(',');
        if let Some(after) = s.strip_prefix('}') {
            return Ok((labels, after));
        }
        let found = || s.chars().take(40).collect();
        let (key, after) = s.split_once("=\"").ok_or_else(|| LineError::Label { found: found() })?;
        let unterminated = || LineError::Unterminated { key: key.trim().to_string() };
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err(unterminated()),
                },
                Some((_, c)) => value.push(c),
                None => return Err(unterminated()),
            }
        };
        labels.insert(key.trim().to_string(), value);
        s = &after[end + 1..];
    }
}

/// Turns parsed lines back into counters, rates and `(device, netdev)` pairs.
#[allow(clippy::type_complexity)]
pub fn decode(
    lines: &[Line],
) -> (String, Vec<(String, Option<String>)>, BTreeMap<CounterKey, u64>, BTreeMap<CounterKey, f64>) {
    let mut host = String::new();
    let (mut ports, mut counters, mut rates) = (Vec::new(), BTreeMap::new(), BTreeMap::new());
    for l in lines {
        if let Some(h) = l.labels.get("host") {
            host.clone_from(h);
        }
        if l.name == "metaroce_rdma_port_active" {
            if let Some(d) = l.labels.get("device") {
                let n = l.labels.get("netdev").filter(|n| !n.is_empty()).cloned();
                ports.push((d.clone(), n));
            }
            continue;
        }
        let Some(key) = key_of(l) else { continue };
        if l.name.ends_with("_total") {
            if let Ok(v) = l.text.parse::<u64>() {
                counters.insert(key, v);
            }
        } else if l.name.ends_with("_rate") {
            rates.insert(key, l.value);
        }
    }
    (host, ports, counters, rates)
}

fn key_of(l: &Line) -> Option<CounterKey> {
    let source = Source::parse(l.labels.get("source")?)?;
    let name = l.labels.get("counter")?.clone();
    if l.name.starts_with("metaroce_rdma_counter") {
        let port = l.labels.get("port")?.parse().ok()?;
        Some(CounterKey { device: l.labels.get("device")?.clone(), port: Some(port), source, name })
    } else if l.name.starts_with("metaroce_netdev_counter") {
        Some(CounterKey { device: l.labels.get("netdev")?.clone(), port: None, source, name })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_with_escapes_round_trip() {
        let lines = parse("# TYPE x counter\nx_total{a=\"q\\\"u\\\\o\\nte\",b=\"\"} 3\n# EOF\nignored")
            .unwrap_or_default();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].labels.get("a").map(String::as_str), Some("q\"u\\o\nte"));
        assert_eq!(lines[0].value, 3.0);
        let nan = LineError::NotANumber { text: "notanumber".into() };
        assert_eq!(parse("x{a=\"1\"} notanumber"), Err(ParseError { line: 1, problem: nan }));
        let open = parse("# HELP x\nx{a=\"1} 2").unwrap_err();
        assert_eq!(open, ParseError { line: 2, problem: LineError::Unterminated { key: "a".into() } });
        assert_eq!(open.to_string(), "line 2: the value of label \"a\" has no closing quote");
        let bare = parse("x{a} 2").unwrap_err();
        assert_eq!(bare.problem, LineError::Label { found: "a} 2".into() });
        assert_eq!(parse("x_total").unwrap_err().problem, LineError::NoValue);
    }
}
