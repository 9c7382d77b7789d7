//! The P4Info index: every named object of a P4 program by id, full name
//! and unique dotted suffix, with "did you mean" for names that miss.

use std::collections::HashMap;
use std::path::Path;

use prost::Message;

use crate::codec::ValueError;
use crate::proto::p4::config::v1 as cfg;

/// The serialized `FileDescriptorSet` the protos were generated from; used
/// to parse text-format P4Info by reflection.
static DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/p4runtime_fds.bin"));

/// Largest P4Info read from a file.
pub const MAX_P4INFO_BYTES: u64 = 64 << 20;

/// Why a P4Info could not be used, or a name or value did not resolve.
#[derive(Debug, thiserror::Error)]
pub enum P4InfoError {
    #[error("cannot read P4Info {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("P4Info {path} is larger than {MAX_P4INFO_BYTES} bytes")]
    TooLarge { path: String },
    #[error("binary P4Info does not decode")]
    Binary(#[source] prost::DecodeError),
    #[error("text P4Info does not parse: {message}")]
    Text { message: String },
    #[error("P4Info is inconsistent: {message}")]
    Invalid { message: String },
    #[error("no {kind} named {name:?}{}", suggestion.as_ref().map(|s| format!("; did you mean {s:?}?")).unwrap_or_default())]
    UnknownName { kind: &'static str, name: String, suggestion: Option<String> },
    #[error("{kind} name {name:?} is ambiguous: {}", candidates.join(", "))]
    Ambiguous { kind: &'static str, name: String, candidates: Vec<String> },
    #[error("no {kind} with id {id:#x}")]
    UnknownId { kind: &'static str, id: u32 },
    #[error("{object}: {field} is a {actual} match, not {wanted}")]
    MatchKind { object: String, field: String, actual: String, wanted: &'static str },
    #[error("{object}: {field}")]
    Value {
        object: String,
        field: String,
        #[source]
        source: ValueError,
    },
    #[error("{object}: {message}")]
    Usage { object: String, message: String },
}

/// Objects indexed by id, full name, alias and unique suffix.
#[derive(Debug, Clone)]
pub struct Objects<T> {
    kind: &'static str,
    items: Vec<T>,
    by_id: HashMap<u32, usize>,
    by_name: HashMap<String, usize>,
    /// Every dotted suffix of every name; more than one index = ambiguous.
    by_suffix: HashMap<String, Vec<usize>>,
}

/// Anything with a P4Info preamble.
pub trait HasPreamble {
    fn preamble(&self) -> Option<&cfg::Preamble>;
}

macro_rules! has_preamble {
    ($($t:ty),*) => {$(
        impl HasPreamble for $t {
            fn preamble(&self) -> Option<&cfg::Preamble> {
                self.preamble.as_ref()
            }
        }
    )*};
}
has_preamble!(
    cfg::Table,
    cfg::Action,
    cfg::ActionProfile,
    cfg::Counter,
    cfg::DirectCounter,
    cfg::Meter,
    cfg::DirectMeter,
    cfg::Register,
    cfg::Digest,
    cfg::ControllerPacketMetadata
);

impl<T: HasPreamble> Objects<T> {
    fn new(kind: &'static str, items: Vec<T>) -> Result<Self, P4InfoError> {
        let mut o = Objects {
            kind,
            items,
            by_id: HashMap::new(),
            by_name: HashMap::new(),
            by_suffix: HashMap::new(),
        };
        for (i, item) in o.items.iter().enumerate() {
            let p = item.preamble().ok_or_else(|| invalid(format!("a {kind} has no preamble")))?;
            if p.id == 0 || p.name.is_empty() {
                return Err(invalid(format!(
                    "{kind} {:?} id {:#x}: needs a non-zero id and a name",
                    p.name, p.id
                )));
            }
            if o.by_id.insert(p.id, i).is_some() {
                return Err(invalid(format!("{kind} id {:#x} is used twice", p.id)));
            }
            if o.by_name.insert(p.name.clone(), i).is_some() {
                return Err(invalid(format!("{kind} name {:?} is used twice", p.name)));
            }
            for suffix in suffixes(&p.name).chain(Some(p.alias.as_str()).filter(|a| !a.is_empty())) {
                let v = o.by_suffix.entry(suffix.to_owned()).or_default();
                if !v.contains(&i) {
                    v.push(i);
                }
            }
        }
        Ok(o)
    }

    /// All objects, in P4Info order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    pub fn by_id(&self, id: u32) -> Result<&T, P4InfoError> {
        self.by_id.get(&id).map(|i| &self.items[*i]).ok_or(P4InfoError::UnknownId { kind: self.kind, id })
    }

    /// By full name, alias or unique dotted suffix (`"routing.nhop"` finds
    /// `"Ingress.routing.nhop"`).
    pub fn by_name(&self, name: &str) -> Result<&T, P4InfoError> {
        if let Some(i) = self.by_name.get(name) {
            return Ok(&self.items[*i]);
        }
        match self.by_suffix.get(name).map(Vec::as_slice) {
            Some([i]) => Ok(&self.items[*i]),
            Some(many) => Err(P4InfoError::Ambiguous {
                kind: self.kind,
                name: name.to_owned(),
                candidates: many.iter().map(|i| full_name(&self.items[*i])).collect(),
            }),
            None => Err(P4InfoError::UnknownName {
                kind: self.kind,
                name: name.to_owned(),
                suggestion: closest(name, self.by_name.keys().map(String::as_str)),
            }),
        }
    }

    pub fn id_of(&self, name: &str) -> Result<u32, P4InfoError> {
        self.by_name(name).map(|t| t.preamble().map(|p| p.id).unwrap_or_default())
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

fn full_name<T: HasPreamble>(t: &T) -> String {
    t.preamble().map(|p| p.name.clone()).unwrap_or_default()
}

fn invalid(message: String) -> P4InfoError {
    P4InfoError::Invalid { message }
}

/// `"a.b.c"` → `"a.b.c"`, `"b.c"`, `"c"`.
fn suffixes(name: &str) -> impl Iterator<Item = &str> {
    std::iter::once(name).chain(name.match_indices('.').map(move |(i, _)| &name[i + 1..]))
}

/// The candidate closest to `name` by edit distance, comparing against
/// both full names and their last component; `None` if nothing is close.
pub(crate) fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = suffixes(c).map(|s| levenshtein(name, s)).min().unwrap_or(usize::MAX);
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.filter(|(d, _)| *d <= name.len().max(3) / 2).map(|(_, c)| c.to_owned())
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A loaded, validated P4Info with its indexes.
#[derive(Debug, Clone)]
pub struct P4Info {
    raw: cfg::P4Info,
    pub tables: Objects<cfg::Table>,
    pub actions: Objects<cfg::Action>,
    pub action_profiles: Objects<cfg::ActionProfile>,
    pub counters: Objects<cfg::Counter>,
    pub direct_counters: Objects<cfg::DirectCounter>,
    pub meters: Objects<cfg::Meter>,
    pub direct_meters: Objects<cfg::DirectMeter>,
    pub registers: Objects<cfg::Register>,
    pub digests: Objects<cfg::Digest>,
    pub packet_metadata: Objects<cfg::ControllerPacketMetadata>,
}

impl P4Info {
    /// Indexes and validates a decoded P4Info.
    pub fn new(raw: cfg::P4Info) -> Result<Self, P4InfoError> {
        let info = P4Info {
            tables: Objects::new("table", raw.tables.clone())?,
            actions: Objects::new("action", raw.actions.clone())?,
            action_profiles: Objects::new("action profile", raw.action_profiles.clone())?,
            counters: Objects::new("counter", raw.counters.clone())?,
            direct_counters: Objects::new("direct counter", raw.direct_counters.clone())?,
            meters: Objects::new("meter", raw.meters.clone())?,
            direct_meters: Objects::new("direct meter", raw.direct_meters.clone())?,
            registers: Objects::new("register", raw.registers.clone())?,
            digests: Objects::new("digest", raw.digests.clone())?,
            packet_metadata: Objects::new(
                "controller packet metadata",
                raw.controller_packet_metadata.clone(),
            )?,
            raw,
        };
        info.check_references()?;
        Ok(info)
    }

    fn check_references(&self) -> Result<(), P4InfoError> {
        for t in self.tables.iter() {
            let name = full_name(t);
            for f in &t.match_fields {
                if f.bitwidth <= 0 && f.r#match.is_some() {
                    return Err(invalid(format!(
                        "table {name}: match field {:?} has bitwidth {}",
                        f.name, f.bitwidth
                    )));
                }
            }
            for a in &t.action_refs {
                if self.actions.by_id(a.id).is_err() {
                    return Err(invalid(format!("table {name} refers to unknown action id {:#x}", a.id)));
                }
            }
            if t.implementation_id != 0 && self.action_profiles.by_id(t.implementation_id).is_err() {
                return Err(invalid(format!("table {name} refers to unknown action profile")));
            }
        }
        Ok(())
    }

    /// Decodes a binary (wire-format) P4Info.
    pub fn from_binary(bytes: &[u8]) -> Result<Self, P4InfoError> {
        Self::new(cfg::P4Info::decode(bytes).map_err(P4InfoError::Binary)?)
    }

    /// Parses a text-format P4Info, as p4c's `--p4runtime-files x.txt` writes.
    pub fn from_text(text: &str) -> Result<Self, P4InfoError> {
        let text_err = |message: String| P4InfoError::Text { message };
        let pool = prost_reflect::DescriptorPool::decode(DESCRIPTORS).map_err(|e| text_err(e.to_string()))?;
        let desc = pool
            .get_message_by_name("p4.config.v1.P4Info")
            .ok_or_else(|| text_err("descriptor for p4.config.v1.P4Info missing".into()))?;
        let msg = prost_reflect::DynamicMessage::parse_text_format(desc, text)
            .map_err(|e| text_err(e.to_string()))?;
        Self::from_binary(&msg.encode_to_vec())
    }

    /// Reads a P4Info file: `.txt`/`.pb.txt`/`.txtpb`/`.textproto` as text
    /// (p4c writes `.txtpb`), anything else as binary.
    pub fn load(path: &Path) -> Result<Self, P4InfoError> {
        let shown = path.display().to_string();
        let meta =
            std::fs::metadata(path).map_err(|source| P4InfoError::Io { path: shown.clone(), source })?;
        if meta.len() > MAX_P4INFO_BYTES {
            return Err(P4InfoError::TooLarge { path: shown });
        }
        let bytes = std::fs::read(path).map_err(|source| P4InfoError::Io { path: shown.clone(), source })?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if [".txt", ".txtpb", ".textproto"].iter().any(|ext| name.ends_with(ext)) {
            let text = String::from_utf8(bytes)
                .map_err(|_| P4InfoError::Text { message: format!("{shown} is not UTF-8") })?;
            Self::from_text(&text)
        } else {
            Self::from_binary(&bytes)
        }
    }

    /// The P4Info message itself, for SetForwardingPipelineConfig.
    pub fn raw(&self) -> &cfg::P4Info {
        &self.raw
    }

    pub fn table(&self, name: &str) -> Result<&cfg::Table, P4InfoError> {
        self.tables.by_name(name)
    }

    pub fn action(&self, name: &str) -> Result<&cfg::Action, P4InfoError> {
        self.actions.by_name(name)
    }

    pub fn digest(&self, name: &str) -> Result<&cfg::Digest, P4InfoError> {
        self.digests.by_name(name)
    }

    pub fn register(&self, name: &str) -> Result<&cfg::Register, P4InfoError> {
        self.registers.by_name(name)
    }
}

/// The name of a P4Info object, for messages.
pub fn name_of<T: HasPreamble>(t: &T) -> String {
    full_name(t)
}

/// A table's match field by name (full or last component).
pub fn match_field<'a>(table: &'a cfg::Table, name: &str) -> Result<&'a cfg::MatchField, P4InfoError> {
    find_local(&table.match_fields, name, |f| &f.name, "match field", &full_name(table))
}

/// A table's match field by id.
pub fn match_field_by_id(table: &cfg::Table, id: u32) -> Result<&cfg::MatchField, P4InfoError> {
    table.match_fields.iter().find(|f| f.id == id).ok_or(P4InfoError::UnknownId { kind: "match field", id })
}

/// An action's parameter by id.
pub fn action_param_by_id(action: &cfg::Action, id: u32) -> Result<&cfg::action::Param, P4InfoError> {
    action.params.iter().find(|p| p.id == id).ok_or(P4InfoError::UnknownId { kind: "action parameter", id })
}

/// An action's parameter by name.
pub fn action_param<'a>(action: &'a cfg::Action, name: &str) -> Result<&'a cfg::action::Param, P4InfoError> {
    find_local(&action.params, name, |p| &p.name, "action parameter", &full_name(action))
}

/// Packet metadata field by name.
pub fn packet_metadata_field<'a>(
    header: &'a cfg::ControllerPacketMetadata,
    name: &str,
) -> Result<&'a cfg::controller_packet_metadata::Metadata, P4InfoError> {
    find_local(&header.metadata, name, |m| &m.name, "packet metadata field", &full_name(header))
}

fn find_local<'a, T>(
    items: &'a [T],
    name: &str,
    name_of: impl Fn(&T) -> &String,
    kind: &'static str,
    owner: &str,
) -> Result<&'a T, P4InfoError> {
    if let Some(t) = items.iter().find(|t| name_of(t) == name) {
        return Ok(t);
    }
    let by_suffix: Vec<&T> = items.iter().filter(|t| suffixes(name_of(t)).any(|s| s == name)).collect();
    match by_suffix.as_slice() {
        [one] => Ok(one),
        [] => Err(P4InfoError::UnknownName {
            kind,
            name: format!("{owner}: {name}"),
            suggestion: closest(name, items.iter().map(|t| name_of(t).as_str())),
        }),
        many => Err(P4InfoError::Ambiguous {
            kind,
            name: name.to_owned(),
            candidates: many.iter().map(|t| name_of(t).clone()).collect(),
        }),
    }
}
