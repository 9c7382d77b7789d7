//! Packets as the vectors write them: a list of layers with named fields,
//! built into exact bytes plus a mask. Lengths and checksums left out are
//! computed; a field written `"*"` is masked (not compared); a field written
//! `{any_of: [..], tally: NAME}` must take one of the values, and the value
//! seen is counted under NAME.

use std::collections::BTreeMap;

use crate::yaml::{parse_hex, Node, VectorError};

/// How a field gets its value when the vector leaves it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Def {
    Value(u128),
    Required,
    EthType,
    IpProto,
    IpTotalLen,
    IpChecksum,
    UdpLen,
    ShimLen,
    ReportLen,
}

use Def::{Required as R, Value as V};

type FieldDefs = &'static [(&'static str, u32, Def)];

const ETH: FieldDefs = &[("dst", 48, R), ("src", 48, R), ("type", 16, Def::EthType)];
const IPV4: FieldDefs = &[
    ("version", 4, V(4)),
    ("ihl", 4, V(5)),
    ("dscp", 6, V(0)),
    ("ecn", 2, V(0)),
    ("total_len", 16, Def::IpTotalLen),
    ("id", 16, V(0)),
    ("flags", 3, V(0)),
    ("frag", 13, V(0)),
    ("ttl", 8, V(64)),
    ("proto", 8, Def::IpProto),
    ("checksum", 16, Def::IpChecksum),
    ("src", 32, R),
    ("dst", 32, R),
];
const UDP: FieldDefs =
    &[("sport", 16, R), ("dport", 16, R), ("len", 16, Def::UdpLen), ("checksum", 16, V(0))];
const TCP: FieldDefs = &[
    ("sport", 16, R),
    ("dport", 16, R),
    ("seq", 32, V(0)),
    ("ack", 32, V(0)),
    ("data_offset", 4, V(5)),
    ("res", 4, V(0)),
    ("flags", 8, V(0x10)),
    ("window", 16, V(0xffff)),
    ("checksum", 16, V(0)),
    ("urgent", 16, V(0)),
];
const BTH: FieldDefs = &[
    ("opcode", 8, V(0x04)),
    ("se", 1, V(0)),
    ("migreq", 1, V(0)),
    ("pad", 2, V(0)),
    ("tver", 4, V(0)),
    ("pkey", 16, V(0xffff)),
    ("fecn", 1, V(0)),
    ("becn", 1, V(0)),
    ("resv6", 6, V(0)),
    ("dqp", 24, R),
    ("ackreq", 1, V(0)),
    ("resv7", 7, V(0)),
    ("psn", 24, V(0)),
];
const AETH: FieldDefs = &[("syndrome", 8, V(0)), ("msn", 24, V(0))];
const INT_SHIM: FieldDefs = &[
    ("type", 4, V(1)),
    ("npt", 2, V(0)),
    ("res0", 2, V(0)),
    ("len", 8, Def::ShimLen),
    ("res1", 8, V(0)),
    ("dscp", 6, V(0)),
    ("res2", 2, V(0)),
];
const INT_MD: FieldDefs = &[
    ("version", 4, V(2)),
    ("d", 1, V(0)),
    ("e", 1, V(0)),
    ("m", 1, V(0)),
    ("reserved", 12, V(0)),
    ("hop_ml", 5, V(6)),
    ("remaining_hops", 8, R),
    ("instructions", 16, V(0xF400)),
    ("domain_id", 16, V(0)),
    ("ds_instructions", 16, V(0)),
    ("ds_flags", 16, V(0)),
];
const INT_HOP: FieldDefs = &[
    ("node_id", 32, R),
    ("in_port", 16, R),
    ("out_port", 16, R),
    ("latency", 32, R),
    ("queue_id", 8, V(0)),
    ("occupancy", 24, R),
    ("egress_ts", 64, R),
];
const REPORT_GROUP: FieldDefs =
    &[("version", 4, V(2)), ("hw_id", 6, V(0)), ("seq", 22, R), ("node_id", 32, R)];
const REPORT_INDIVIDUAL: FieldDefs = &[
    ("rep_type", 4, V(1)),
    ("in_type", 4, V(4)),
    ("report_len", 8, Def::ReportLen),
    ("md_len", 8, V(5)),
    ("d", 1, V(0)),
    ("q", 1, V(0)),
    ("f", 1, V(1)),
    ("i", 1, V(0)),
    ("reserved", 4, V(0)),
    ("rep_md_bits", 16, V(0x7400)),
    ("domain_id", 16, V(0)),
    ("ds_md_bits", 16, V(0)),
    ("ds_md_status", 16, V(0)),
];
const REPORT_SINK_MD: FieldDefs = &[
    ("in_port", 16, R),
    ("out_port", 16, R),
    ("latency", 32, R),
    ("queue_id", 8, V(0)),
    ("occupancy", 24, R),
    ("egress_ts", 64, R),
];
const ARP: FieldDefs = &[
    ("htype", 16, V(1)),
    ("ptype", 16, V(0x0800)),
    ("hlen", 8, V(6)),
    ("plen", 8, V(4)),
    ("op", 16, V(1)),
    ("sha", 48, R),
    ("spa", 32, R),
    ("tha", 48, V(0)),
    ("tpa", 32, R),
];

/// Every header layer a vector may use, with its fields in wire order.
const LAYERS: &[(&str, FieldDefs)] = &[
    ("eth", ETH),
    ("ipv4", IPV4),
    ("udp", UDP),
    ("tcp", TCP),
    ("bth", BTH),
    ("aeth", AETH),
    ("int_shim", INT_SHIM),
    ("int_md", INT_MD),
    ("int_hop", INT_HOP),
    ("report_group", REPORT_GROUP),
    ("report_individual", REPORT_INDIVIDUAL),
    ("report_sink_md", REPORT_SINK_MD),
    ("arp", ARP),
];

/// What a vector says about one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spec {
    Value(u128),
    /// `"*"`: not compared.
    Any,
    /// One of these; the value seen is counted under the tally name.
    AnyOf(Vec<u128>, Option<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Layer {
    Header { kind: &'static str, defs: FieldDefs, fields: Vec<Option<Spec>> },
    Words(Vec<Spec>),
    Bytes(Vec<u8>),
}

/// A packet as written in a vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    layers: Vec<Layer>,
    truncate: Option<usize>,
    where_: String,
}

/// A field whose value is checked against a set, at a bit offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldCheck {
    pub name: String,
    pub bit: usize,
    pub bits: u32,
    pub allowed: Vec<u128>,
    pub tally: Option<String>,
}

/// A built packet: bytes, a mask of the compared bits, and set checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    pub bytes: Vec<u8>,
    pub mask: Vec<u8>,
    pub checks: Vec<FieldCheck>,
    /// `(name, first bit, bits)` of every header field, for messages.
    pub fields: Vec<(String, usize, u32)>,
}

fn spec_of(n: &Node<'_>, bits: u32) -> Result<Spec, VectorError> {
    if n.text().ok().as_deref() == Some("*") {
        return Ok(Spec::Any);
    }
    if n.get("any_of").is_some() {
        n.only(&["any_of", "tally"])?;
        let values = n.req("any_of")?.list()?.iter().map(|v| v.uint(bits)).collect::<Result<Vec<_>, _>>()?;
        let tally = n.get("tally").map(|t| t.text()).transpose()?;
        return Ok(Spec::AnyOf(values, tally));
    }
    Ok(Spec::Value(n.uint(bits)?))
}

impl Template {
    /// Parses a list of layers.
    pub fn parse(n: &Node<'_>) -> Result<Self, VectorError> {
        let mut layers = vec![];
        let mut truncate = None;
        for item in n.list()? {
            let entries = item.map_entries()?;
            let [(kind, body)] = entries.as_slice() else {
                return Err(item.err("a layer is a mapping with one key, the layer's name"));
            };
            match kind.as_str() {
                "payload" => layers.push(Layer::Bytes(payload(body)?)),
                "raw" => layers.push(Layer::Bytes(parse_hex(&body.text()?).map_err(|m| body.err(m))?)),
                "int_words" => layers.push(Layer::Words(
                    body.list()?.iter().map(|w| spec_of(w, 32)).collect::<Result<_, _>>()?,
                )),
                "truncate" => truncate = Some(body.u64()? as usize),
                k => {
                    let Some((kind, defs)) = LAYERS.iter().find(|(name, _)| *name == k) else {
                        let names: Vec<&str> = LAYERS.iter().map(|(n, _)| *n).collect();
                        return Err(item.err(format!(
                            "unknown layer `{k}`; expected one of {}, int_words, payload, raw, truncate",
                            names.join(", ")
                        )));
                    };
                    let mut fields = vec![None; defs.len()];
                    if !body.is_null() {
                        for (fname, v) in body.map_entries()? {
                            let Some(i) = defs.iter().position(|(f, _, _)| *f == fname) else {
                                let names: Vec<&str> = defs.iter().map(|(f, _, _)| *f).collect();
                                return Err(v.err(format!(
                                    "{kind} has no field `{fname}`; its fields are {}",
                                    names.join(", ")
                                )));
                            };
                            fields[i] = Some(spec_of(&v, defs[i].1)?);
                        }
                    }
                    layers.push(Layer::Header { kind, defs, fields });
                }
            }
        }
        let t = Template { layers, truncate, where_: format!("{}: {}", n.file, n.path()) };
        t.build(&BTreeMap::new()).map_err(|m| n.err(m))?;
        Ok(t)
    }

    /// Checks that `layer.field` names a field of this packet.
    pub fn has_field(&self, path: &str) -> bool {
        let Some((layer, field)) = path.split_once('.') else { return false };
        self.layers.iter().any(|l| match l {
            Layer::Header { kind, defs, .. } => *kind == layer && defs.iter().any(|(f, _, _)| *f == field),
            _ => false,
        })
    }

    /// The written values of every `layer.field` (first layer of a kind).
    pub fn written(&self) -> BTreeMap<String, u128> {
        let mut out = BTreeMap::new();
        for l in &self.layers {
            if let Layer::Header { kind, defs, fields } = l {
                for ((f, _, def), spec) in defs.iter().zip(fields) {
                    let v = match (spec, def) {
                        (Some(Spec::Value(v)), _) | (None, Def::Value(v)) => *v,
                        _ => continue,
                    };
                    out.entry(format!("{kind}.{f}")).or_insert(v);
                }
            }
        }
        out
    }

    /// Builds the packet, with `overrides` (`layer.field` of the first layer
    /// of that kind) replacing written values.
    pub fn build(&self, overrides: &BTreeMap<String, u128>) -> Result<Built, String> {
        let mut layers = self.layers.clone();
        for (path, v) in overrides {
            let (layer, field) =
                path.split_once('.').ok_or_else(|| format!("`{path}` is not layer.field"))?;
            let slot = layers.iter_mut().find_map(|l| match l {
                Layer::Header { kind, defs, fields } if *kind == layer => {
                    defs.iter().position(|(f, _, _)| *f == field).map(|i| &mut fields[i])
                }
                _ => None,
            });
            *slot.ok_or_else(|| format!("{}: no field {path} to vary", self.where_))? = Some(Spec::Value(*v));
        }
        build_layers(&layers, self.truncate).map_err(|m| format!("{}: {m}", self.where_))
    }
}

fn payload(n: &Node<'_>) -> Result<Vec<u8>, VectorError> {
    if let Ok(t) = n.str() {
        return parse_hex(t).map_err(|m| n.err(m));
    }
    n.only(&["len", "fill"])?;
    let len = n.req("len")?.u64()? as usize;
    match n.get("fill") {
        Some(f) => Ok(vec![f.uint(8)? as u8; len]),
        None => Ok((0..len).map(|i| i as u8).collect()),
    }
}

fn len_of(l: &Layer) -> usize {
    match l {
        Layer::Header { defs, .. } => defs.iter().map(|(_, b, _)| *b as usize).sum::<usize>() / 8,
        Layer::Words(w) => w.len() * 4,
        Layer::Bytes(b) => b.len(),
    }
}

fn kind_of(l: Option<&Layer>) -> &'static str {
    match l {
        Some(Layer::Header { kind, .. }) => kind,
        Some(Layer::Words(_)) => "int_words",
        Some(Layer::Bytes(_)) => "bytes",
        None => "end",
    }
}

fn put_bits(buf: &mut [u8], bit: usize, bits: u32, v: u128) {
    for i in 0..bits as usize {
        let set = (v >> (bits as usize - 1 - i)) & 1 == 1;
        let (byte, off) = ((bit + i) / 8, (bit + i) % 8);
        if set {
            buf[byte] |= 0x80 >> off;
        } else {
            buf[byte] &= !(0x80 >> off);
        }
    }
}

/// Reads `bits` bits at bit offset `bit`.
pub fn get_bits(buf: &[u8], bit: usize, bits: u32) -> u128 {
    (0..bits as usize).fold(0u128, |acc, i| {
        let (byte, off) = ((bit + i) / 8, (bit + i) % 8);
        (acc << 1) | u128::from(buf.get(byte).is_some_and(|b| b & (0x80 >> off) != 0))
    })
}

/// The Internet checksum of `data`.
pub fn csum16(data: &[u8]) -> u16 {
    let mut sum: u32 =
        data.chunks(2).map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0))).sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn build_layers(layers: &[Layer], truncate: Option<usize>) -> Result<Built, String> {
    let lens: Vec<usize> = layers.iter().map(len_of).collect();
    let total: usize = lens.iter().sum();
    let mut bytes = vec![0u8; total];
    let mut mask = vec![0xffu8; total];
    let mut checks = vec![];
    let mut names = vec![];
    let mut start = 0usize;
    for (li, layer) in layers.iter().enumerate() {
        let after: usize = lens[li + 1..].iter().sum();
        match layer {
            Layer::Bytes(b) => bytes[start..start + b.len()].copy_from_slice(b),
            Layer::Words(ws) => {
                for (wi, w) in ws.iter().enumerate() {
                    let name = format!("int_words[{wi}]");
                    apply(&mut bytes, &mut mask, &mut checks, &name, (start + wi * 4) * 8, 32, w);
                    names.push((name, (start + wi * 4) * 8, 32));
                }
            }
            Layer::Header { kind, defs, fields } => {
                let mut bit = start * 8;
                let mut checksum_at = None;
                let mut masked = false;
                for ((fname, bits, def), spec) in defs.iter().zip(fields) {
                    let name = format!("{kind}.{fname}");
                    let spec = match (spec, def) {
                        (Some(s), _) => s.clone(),
                        (None, Def::Value(v)) => Spec::Value(*v),
                        (None, Def::Required) => return Err(format!("{name} must be given")),
                        (None, Def::IpChecksum) => {
                            checksum_at = Some(bit);
                            Spec::Value(0)
                        }
                        (None, auto) => Spec::Value(auto_value(*auto, layers, li, after, &name)?),
                    };
                    masked |= !matches!(spec, Spec::Value(_));
                    apply(&mut bytes, &mut mask, &mut checks, &name, bit, *bits, &spec);
                    names.push((name, bit, *bits));
                    bit += *bits as usize;
                }
                if let Some(at) = checksum_at {
                    if masked {
                        put_bits(&mut mask, at, 16, 0);
                    } else {
                        let c = csum16(&bytes[start..start + lens[li]]);
                        put_bits(&mut bytes, at, 16, u128::from(c));
                    }
                }
            }
        }
        start += lens[li];
    }
    if let Some(n) = truncate {
        if n > total {
            return Err(format!("truncate {n} is longer than the packet ({total} bytes)"));
        }
        bytes.truncate(n);
        mask.truncate(n);
        checks.retain(|c| c.bit + c.bits as usize <= n * 8);
    }
    Ok(Built { bytes, mask, checks, fields: names })
}

fn apply(
    bytes: &mut [u8],
    mask: &mut [u8],
    checks: &mut Vec<FieldCheck>,
    name: &str,
    bit: usize,
    bits: u32,
    spec: &Spec,
) {
    match spec {
        Spec::Value(v) => put_bits(bytes, bit, bits, *v),
        Spec::Any => put_bits(mask, bit, bits, 0),
        Spec::AnyOf(allowed, tally) => {
            put_bits(mask, bit, bits, 0);
            checks.push(FieldCheck {
                name: name.to_owned(),
                bit,
                bits,
                allowed: allowed.clone(),
                tally: tally.clone(),
            });
        }
    }
}

fn auto_value(def: Def, layers: &[Layer], li: usize, after: usize, name: &str) -> Result<u128, String> {
    let next = kind_of(layers.get(li + 1));
    Ok(match def {
        Def::EthType => match next {
            "ipv4" => 0x0800,
            "arp" => 0x0806,
            other => return Err(format!("{name} must be given (next layer is {other})")),
        },
        Def::IpProto => match next {
            "udp" => 17,
            "tcp" => 6,
            other => return Err(format!("{name} must be given (next layer is {other})")),
        },
        Def::IpTotalLen => (20 + after) as u128,
        Def::UdpLen => (8 + after) as u128,
        Def::ReportLen => {
            if !after.is_multiple_of(4) {
                return Err(format!("{name}: {after} bytes follow, not whole words"));
            }
            ((8 + after) / 4) as u128
        }
        Def::ShimLen => layers[li + 1..]
            .iter()
            .map_while(|l| match l {
                Layer::Header { kind: "int_md", .. } => Some(3),
                Layer::Header { kind: "int_hop", .. } => Some(6),
                Layer::Words(w) => Some(w.len()),
                _ => None,
            })
            .sum::<usize>() as u128,
        Def::Value(_) | Def::Required | Def::IpChecksum => unreachable_default(name)?,
    })
}

fn unreachable_default(name: &str) -> Result<u128, String> {
    Err(format!("{name}: internal error: no automatic value"))
}

impl Built {
    /// Compares an actual packet; on a match returns the tallied values.
    pub fn compare(&self, actual: &[u8]) -> Result<Vec<(String, u128)>, String> {
        if actual.len() != self.bytes.len() {
            return Err(format!("length {} bytes, expected {}", actual.len(), self.bytes.len()));
        }
        let mut diffs = vec![];
        for (i, ((a, e), m)) in actual.iter().zip(&self.bytes).zip(&self.mask).enumerate() {
            if (a ^ e) & m != 0 {
                let field = self.field_at(i * 8 + ((a ^ e) & m).leading_zeros() as usize);
                diffs.push(format!("byte {i} ({field}): got {a:#04x}, expected {e:#04x} (mask {m:#04x})"));
            }
        }
        if !diffs.is_empty() {
            let n = diffs.len();
            diffs.truncate(4);
            return Err(format!("{n} differing bytes: {}", diffs.join("; ")));
        }
        let mut tallies = vec![];
        for c in &self.checks {
            let v = get_bits(actual, c.bit, c.bits);
            if !c.allowed.contains(&v) {
                return Err(format!("{} is {v}, expected one of {:?}", c.name, c.allowed));
            }
            if let Some(t) = &c.tally {
                tallies.push((t.clone(), v));
            }
        }
        Ok(tallies)
    }

    fn field_at(&self, bit: usize) -> String {
        self.fields
            .iter()
            .find(|(_, b, n)| *b <= bit && bit < b + *n as usize)
            .map(|(name, _, _)| name.clone())
            .unwrap_or_else(|| "payload".into())
    }
}

/// Hex dump for messages.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use yaml_rust2::YamlLoader;

    fn template(text: &str) -> Template {
        let docs = YamlLoader::load_from_str(text).unwrap();
        Template::parse(&Node::root(&docs[0], "test.yaml")).unwrap()
    }

    #[test]
    fn lengths_and_int_words_are_computed() {
        let t = template(
            "- eth: {dst: 1, src: 2}\n- ipv4: {src: 10.0.0.1, dst: 10.0.0.2, dscp: 1}\n\
             - udp: {sport: 1, dport: 4791}\n- int_shim: {}\n- int_md: {remaining_hops: 3}\n\
             - int_hop: {node_id: 7, in_port: 1, out_port: 2, latency: 5, occupancy: 0, egress_ts: 9}\n\
             - bth: {dqp: 17}\n- payload: {len: 4}",
        );
        let b = t.build(&BTreeMap::new()).unwrap();
        assert_eq!(b.bytes.len(), 14 + 20 + 8 + 4 + 12 + 24 + 12 + 4);
        assert_eq!(&b.bytes[12..14], &[0x08, 0x00]);
        assert_eq!(u16::from_be_bytes([b.bytes[16], b.bytes[17]]), 20 + 8 + 4 + 12 + 24 + 12 + 4);
        assert_eq!(b.bytes[23], 17); // protocol
        assert_eq!(csum16(&b.bytes[14..34]), 0);
        assert_eq!(b.bytes[42 + 1], 9); // shim length: 3 + 6 words
        assert!(b.mask.iter().all(|m| *m == 0xff));
    }

    #[test]
    fn masks_tallies_overrides_and_truncation() {
        let t = template(
            "- eth: {dst: 1, src: 2, type: 0x0800}\n- ipv4: {src: 1, dst: 2, proto: 17, ecn: {any_of: [0, 3], tally: ce}, ttl: \"*\"}\n- truncate: 30",
        );
        let b = t.build(&BTreeMap::new()).unwrap();
        assert_eq!(b.bytes.len(), 30);
        assert_eq!(b.mask[15], 0xfc); // ECN bits not compared byte-wise...
        assert_eq!(b.checks.len(), 1); // ...but checked as a set
        assert_eq!(b.mask[22], 0); // TTL masked, and so the checksum
        assert_eq!((b.mask[24], b.mask[25]), (0, 0));
        let mut actual = b.bytes.clone();
        actual[15] |= 3;
        actual[22] = 9;
        assert_eq!(b.compare(&actual).unwrap(), vec![("ce".to_string(), 3)]);
        actual[15] = (actual[15] & 0xfc) | 1;
        assert!(b.compare(&actual).unwrap_err().contains("ipv4.ecn"));
        let o = BTreeMap::from([("ipv4.src".to_string(), 5u128)]);
        assert_eq!(t.build(&o).unwrap().bytes[29], 5);
        assert!(t.build(&BTreeMap::from([("udp.sport".to_string(), 1)])).is_err());
    }
}
