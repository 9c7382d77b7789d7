//! One match-action table of the in-process switch: entry validation the
//! way the P4Runtime spec asks for it, and real match semantics for
//! lookups (exact, LPM, ternary, range, optional; priorities).

use std::collections::HashMap;

use tokio::time::Instant;
use tonic::Status;

use crate::codec;
use crate::proto::p4::config::v1 as cfg;
use crate::proto::p4::v1 as p4;

use cfg::match_field::{Match as Kind, MatchType};
use p4::field_match::FieldMatchType as Fm;

/// Entries are keyed by their canonical match and priority.
pub(crate) type Key = (Vec<p4::FieldMatch>, i32);

#[derive(Debug, Clone)]
pub(crate) struct Installed {
    pub entry: p4::TableEntry,
    pub counter: p4::CounterData,
    pub last_hit: Instant,
    pub idle_notified: bool,
}

#[derive(Debug)]
pub(crate) struct Table {
    pub info: cfg::Table,
    /// Boxed, so that a bucket is a key and a pointer: the map of a
    /// table that grows to a thousand entries as a controller writes it
    /// then rehashes 40-byte buckets, not ~300-byte entries (at 1,280
    /// switches the rehashes, mostly the kernel zeroing the new tables'
    /// pages, were a fifth of `sim serve`'s CPU while it was programmed).
    pub entries: super::FastMap<Key, Box<Installed>>,
    pub default_action: Option<p4::Action>,
    pub default_counter: p4::CounterData,
    /// Ternary, range or optional fields make priorities mandatory.
    pub needs_priority: bool,
    pub exact_only: bool,
    pub has_direct_counter: bool,
}

fn kind(f: &cfg::MatchField) -> Option<MatchType> {
    match f.r#match {
        Some(Kind::MatchType(m)) => MatchType::try_from(m).ok(),
        _ => None,
    }
}

fn bad(msg: String) -> Status {
    Status::invalid_argument(msg)
}

fn range_err(field: &str, e: codec::ValueError) -> Status {
    match e {
        codec::ValueError::TooWide { .. } => Status::out_of_range(format!("match field {field}: {e}")),
        other => Status::invalid_argument(format!("match field {field}: {other}")),
    }
}

impl Table {
    pub fn new(info: cfg::Table, has_direct_counter: bool) -> Self {
        let kinds: Vec<_> = info.match_fields.iter().map(kind).collect();
        let needs_priority = kinds
            .iter()
            .any(|k| matches!(k, Some(MatchType::Ternary | MatchType::Range | MatchType::Optional)));
        let exact_only = kinds.iter().all(|k| *k == Some(MatchType::Exact));
        Table {
            info,
            entries: HashMap::default(),
            default_action: None,
            default_counter: p4::CounterData::default(),
            needs_priority,
            exact_only,
            has_direct_counter,
        }
    }

    pub fn name(&self) -> &str {
        self.info.preamble.as_ref().map(|p| p.name.as_str()).unwrap_or("?")
    }

    /// Validates a match and returns it in canonical form, sorted by field.
    pub fn canonical_match(&self, matches: &[p4::FieldMatch], priority: i32) -> Result<Key, Status> {
        let mut out = Vec::with_capacity(matches.len());
        for m in matches {
            let f = self
                .info
                .match_fields
                .iter()
                .find(|f| f.id == m.field_id)
                .ok_or_else(|| bad(format!("table {}: no match field id {}", self.name(), m.field_id)))?;
            if out.iter().any(|o: &p4::FieldMatch| o.field_id == m.field_id) {
                return Err(bad(format!("match field {} given twice", f.name)));
            }
            out.push(p4::FieldMatch { field_id: m.field_id, field_match_type: Some(canonical_field(f, m)?) });
        }
        for f in &self.info.match_fields {
            if kind(f) == Some(MatchType::Exact) && !out.iter().any(|o| o.field_id == f.id) {
                return Err(bad(format!("exact match field {} is missing", f.name)));
            }
        }
        if self.needs_priority && priority <= 0 {
            return Err(bad(format!("table {} needs a priority > 0", self.name())));
        }
        if !self.needs_priority && priority != 0 {
            return Err(bad(format!(
                "table {} has no ternary/range/optional field; priority must be 0",
                self.name()
            )));
        }
        out.sort_by_key(|m| m.field_id);
        Ok((out, priority))
    }

    /// The installed entry a lookup key hits, highest priority (or longest
    /// prefix) first.
    pub fn lookup(&mut self, key: &[(u32, Vec<u8>)], now: Instant) -> Option<&mut Installed> {
        let found = if self.exact_only {
            let mut m: Vec<p4::FieldMatch> = key
                .iter()
                .filter_map(|(id, v)| {
                    let f = self.info.match_fields.iter().find(|f| f.id == *id)?;
                    let value = codec::canonical(v, f.bitwidth).ok()?;
                    Some(p4::FieldMatch {
                        field_id: *id,
                        field_match_type: Some(Fm::Exact(p4::field_match::Exact { value })),
                    })
                })
                .collect();
            m.sort_by_key(|m| m.field_id);
            let k = (m, 0);
            self.entries.contains_key(&k).then_some(k)
        } else {
            // The key padded to its fields' widths once, not per entry.
            let key: Vec<(u32, i32, Vec<u8>)> = key
                .iter()
                .filter_map(|(id, v)| {
                    let f = self.info.match_fields.iter().find(|f| f.id == *id)?;
                    Some((*id, f.bitwidth, codec::padded(v, f.bitwidth).ok()?))
                })
                .collect();
            self.entries
                .iter()
                .filter(|(k, _)| k.0.iter().all(|m| field_hits(m, &key)))
                .max_by_key(|(k, _)| (k.1, prefix_len(&k.0)))
                .map(|(k, _)| k.clone())
        };
        let e = self.entries.get_mut(&found?)?;
        e.last_hit = now;
        e.idle_notified = false;
        Some(e)
    }
}

fn prefix_len(m: &[p4::FieldMatch]) -> i32 {
    m.iter()
        .filter_map(|m| if let Some(Fm::Lpm(l)) = &m.field_match_type { Some(l.prefix_len) } else { None })
        .sum()
}

/// Byte `i` of big-endian `b` left-padded with zeros to `len` bytes.
fn byte_at(b: &[u8], len: usize, i: usize) -> u8 {
    let off = len.saturating_sub(b.len());
    if i < off {
        0
    } else {
        b.get(i - off).copied().unwrap_or(0)
    }
}

/// Byte `i` of the mask of a `prefix_len`-bit prefix of a `width`-bit
/// field held in `len` bytes (as [`codec::prefix_mask`], without allocating).
fn prefix_byte(prefix_len: i32, width: i32, len: usize, i: usize) -> u8 {
    let lead = len as i64 * 8 - i64::from(width);
    let (lo, hi) = (i as i64 * 8, i as i64 * 8 + 8);
    let (s, e) = ((lead).max(lo), (lead + i64::from(prefix_len)).min(hi));
    if s >= e {
        return 0;
    }
    (((0xffu16 << (8 - (e - s))) & 0xff) as u8) >> (s - lo)
}

/// Whether one field match hits the padded key `(field id, width, value)`;
/// per entry and field of every lookup, so it does not allocate.
fn field_hits(m: &p4::FieldMatch, key: &[(u32, i32, Vec<u8>)]) -> bool {
    let Some((_, w, v)) = key.iter().find(|(id, _, _)| *id == m.field_id) else { return false };
    let n = v.len();
    let eq = |value: &[u8], mask: &dyn Fn(usize) -> u8| {
        (0..n).all(|i| v[i] & mask(i) == byte_at(value, n, i) & mask(i))
    };
    match &m.field_match_type {
        Some(Fm::Exact(e)) => eq(&e.value, &|_| 0xff),
        Some(Fm::Optional(o)) => eq(&o.value, &|_| 0xff),
        Some(Fm::Lpm(l)) => eq(&l.value, &|i| prefix_byte(l.prefix_len, *w, n, i)),
        Some(Fm::Ternary(t)) => eq(&t.value, &|i| byte_at(&t.mask, n, i)),
        Some(Fm::Range(r)) => {
            codec::cmp(v, &r.low) != std::cmp::Ordering::Less
                && codec::cmp(v, &r.high) != std::cmp::Ordering::Greater
        }
        _ => false,
    }
}

/// Checks one field match against its P4Info declaration (§9.1.1).
fn canonical_field(f: &cfg::MatchField, m: &p4::FieldMatch) -> Result<Fm, Status> {
    let w = f.bitwidth;
    let c = |b: &[u8]| codec::canonical(b, w).map_err(|e| range_err(&f.name, e));
    let wrong = |got: &str| bad(format!("match field {} is {:?}, got a {got} match", f.name, kind(f)));
    match (&m.field_match_type, kind(f)) {
        (Some(Fm::Exact(e)), Some(MatchType::Exact)) => {
            Ok(Fm::Exact(p4::field_match::Exact { value: c(&e.value)? }))
        }
        (Some(Fm::Optional(o)), Some(MatchType::Optional)) => {
            Ok(Fm::Optional(p4::field_match::Optional { value: c(&o.value)? }))
        }
        (Some(Fm::Lpm(l)), Some(MatchType::Lpm)) => {
            if l.prefix_len <= 0 || l.prefix_len > w {
                return Err(bad(format!(
                    "match field {}: prefix length {} not in 1..={w}",
                    f.name, l.prefix_len
                )));
            }
            let v = codec::padded(&c(&l.value)?, w).map_err(|e| range_err(&f.name, e))?;
            let mask = codec::prefix_mask(l.prefix_len, w).map_err(|e| range_err(&f.name, e))?;
            if codec::and(&v, &mask) != v {
                return Err(bad(format!("match field {}: bits set past the prefix", f.name)));
            }
            Ok(Fm::Lpm(p4::field_match::Lpm { value: c(&v)?, prefix_len: l.prefix_len }))
        }
        (Some(Fm::Ternary(t)), Some(MatchType::Ternary)) => {
            let v = codec::padded(&c(&t.value)?, w).map_err(|e| range_err(&f.name, e))?;
            let mask = codec::padded(&c(&t.mask)?, w).map_err(|e| range_err(&f.name, e))?;
            if mask.iter().all(|b| *b == 0) {
                return Err(bad(format!("match field {}: an all-zero mask must be omitted", f.name)));
            }
            if codec::and(&v, &mask) != v {
                return Err(bad(format!("match field {}: value has bits outside the mask", f.name)));
            }
            Ok(Fm::Ternary(p4::field_match::Ternary { value: c(&v)?, mask: c(&mask)? }))
        }
        (Some(Fm::Range(r)), Some(MatchType::Range)) => {
            let (low, high) = (c(&r.low)?, c(&r.high)?);
            if codec::cmp(&low, &high) == std::cmp::Ordering::Greater {
                return Err(bad(format!("match field {}: low > high", f.name)));
            }
            Ok(Fm::Range(p4::field_match::Range { low, high }))
        }
        (Some(Fm::Exact(_)), _) => Err(wrong("exact")),
        (Some(Fm::Optional(_)), _) => Err(wrong("optional")),
        (Some(Fm::Lpm(_)), _) => Err(wrong("LPM")),
        (Some(Fm::Ternary(_)), _) => Err(wrong("ternary")),
        (Some(Fm::Range(_)), _) => Err(wrong("range")),
        (Some(Fm::Other(_)), _) | (None, _) => Err(bad(format!("match field {}: unsupported match", f.name))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_bytes_are_the_codecs_prefix_mask() {
        for width in 1..=64 {
            for prefix in 0..=width {
                let want = codec::prefix_mask(prefix, width).unwrap_or_default();
                let got: Vec<u8> =
                    (0..want.len()).map(|i| prefix_byte(prefix, width, want.len(), i)).collect();
                assert_eq!(got, want, "width {width}, prefix {prefix}");
            }
        }
        assert_eq!(byte_at(&[1, 2], 4, 2), 1);
        assert_eq!(byte_at(&[1, 2], 4, 1), 0);
    }
}
