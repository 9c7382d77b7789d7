//! Field-level decoding of the positioned YAML tree, recording every
//! problem with its path and position and carrying on, so that one run
//! reports all of them.

use metaroce_topo::spec::did_you_mean;
use metaroce_topo::units::{Bandwidth, ByteSize, Duration, QueueDepth};
use metaroce_topo::yaml::{Node, Pos, Value};

use crate::error::Diagnostic;

/// Collects diagnostics while decoding.
#[derive(Debug, Default)]
pub(crate) struct Diags(pub Vec<Diagnostic>);

impl Diags {
    pub fn err(&mut self, path: &str, pos: Pos, message: impl Into<String>) {
        self.0.push(Diagnostic { path: path.to_string(), pos: Some(pos), message: message.into() });
    }

    /// The entries of a mapping; unknown keys are reported (with a
    /// did-you-mean) and skipped.
    pub fn map<'n>(&mut self, node: &'n Node, path: &str, known: &[&str]) -> Vec<(&'n str, &'n Node)> {
        let Value::Map(entries) = &node.value else {
            if !matches!(node.value, Value::Null) {
                self.err(path, node.pos, format!("expected a mapping, found {}", node.kind()));
            }
            return Vec::new();
        };
        let mut out = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let Some(key) = k.as_str() else {
                self.err(path, k.pos, format!("keys must be names, found {}", k.kind()));
                continue;
            };
            if known.contains(&key) {
                out.push((key, v));
            } else {
                let hint = did_you_mean(key, known.iter().copied())
                    .map(|k| format!("; did you mean \"{k}\"?"))
                    .unwrap_or_else(|| format!("; known fields: {}", known.join(", ")));
                self.err(path, k.pos, format!("unknown field \"{key}\"{hint}"));
            }
        }
        out
    }

    pub fn str<'n>(&mut self, node: &'n Node, path: &str) -> Option<&'n str> {
        let s = node.as_str();
        if s.is_none() {
            self.err(path, node.pos, format!("expected text, found {}", node.kind()));
        }
        s
    }

    pub fn list<'n>(&mut self, node: &'n Node, path: &str) -> &'n [Node] {
        match &node.value {
            Value::Seq(items) => items,
            _ => {
                self.err(path, node.pos, format!("expected a list, found {}", node.kind()));
                &[]
            }
        }
    }

    pub fn bool(&mut self, node: &Node, path: &str) -> Option<bool> {
        match node.as_str() {
            Some("true" | "on" | "yes") => Some(true),
            Some("false" | "off" | "no") => Some(false),
            _ => {
                self.err(path, node.pos, "expected true or false");
                None
            }
        }
    }

    pub fn u64(&mut self, node: &Node, path: &str, min: u64, max: u64) -> Option<u64> {
        let v = node.as_str().and_then(|s| s.replace('_', "").parse::<u64>().ok());
        match v {
            Some(v) if (min..=max).contains(&v) => Some(v),
            Some(v) => {
                self.err(path, node.pos, format!("{v} is out of range; use {min}..={max}"));
                None
            }
            None => {
                self.err(path, node.pos, format!("expected a whole number in {min}..={max}"));
                None
            }
        }
    }

    /// An 802.1p priority, 0..=7.
    pub fn priority(&mut self, node: &Node, path: &str) -> Option<u8> {
        let v = node.as_str().and_then(|s| s.parse::<u64>().ok());
        match v {
            Some(p) if p < u64::from(crate::scenario::config::PRIORITIES) => Some(p as u8),
            Some(p) => {
                self.err(path, node.pos, format!("priority {p} does not exist; 802.1Q priorities are 0..=7"));
                None
            }
            None => {
                self.err(path, node.pos, "expected a priority, a whole number in 0..=7");
                None
            }
        }
    }

    /// A fraction in `[min, max]`, written `0.2` or `20%`.
    pub fn fraction(&mut self, node: &Node, path: &str, min: f64, max: f64) -> Option<f64> {
        let text = node.as_str().unwrap_or("");
        let v = match text.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().ok().map(|v| v / 100.0),
            None => text.parse::<f64>().ok(),
        };
        match v {
            Some(v) if v.is_finite() && v >= min && v <= max => Some(v),
            _ => {
                self.err(
                    path,
                    node.pos,
                    format!("expected a fraction between {min} and {max}, like 0.2 or 20%"),
                );
                None
            }
        }
    }

    pub fn bytes(&mut self, node: &Node, path: &str) -> Option<u64> {
        let text = self.str(node, path)?;
        ByteSize::parse(text).map(|b| b.bytes()).map_err(|e| self.err(path, node.pos, e.0)).ok()
    }

    pub fn duration_ps(&mut self, node: &Node, path: &str) -> Option<u64> {
        let text = self.str(node, path)?;
        Duration::parse(text).map(|d| d.ns() * 1_000).map_err(|e| self.err(path, node.pos, e.0)).ok()
    }

    pub fn bandwidth(&mut self, node: &Node, path: &str) -> Option<u64> {
        let text = self.str(node, path)?;
        Bandwidth::parse(text).map(|b| b.bps()).map_err(|e| self.err(path, node.pos, e.0)).ok()
    }

    /// A queue depth in bytes; packets count as `packet_bytes` each.
    pub fn depth(&mut self, node: &Node, path: &str, packet_bytes: u64) -> Option<u64> {
        let text = self.str(node, path)?;
        match QueueDepth::parse(text) {
            Ok(QueueDepth::Packets(p)) => Some(p.saturating_mul(packet_bytes)),
            Ok(QueueDepth::Bytes(b)) => Some(b),
            Err(e) => {
                self.err(path, node.pos, e.0);
                None
            }
        }
    }
}
