//! The vector schema (see `tests/p4/README.md`): files of cases, each with
//! its control-plane setup, timed steps (packets in, control-plane writes)
//! and what must come out.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use yaml_rust2::YamlLoader;

use crate::packet::Template;
use crate::yaml::{Node, Range, VectorError};

/// The CPU port as vectors write it (`port: cpu`): outputs there arrive as
/// P4Runtime packet-ins.
pub const CPU_PORT: u32 = 255;

/// Which targets a case holds on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Every faithful implementation of the contract.
    Any,
    /// Depends on BMv2 behaviour (queue rate limits, packet units).
    Bmv2,
}

/// How a match field is given; its kind comes from the P4Info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatchValue {
    Value(u128),
    Prefix(u128, i32),
    Masked(u128, u128),
}

/// An action by name with parameters by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionCall {
    pub name: String,
    pub params: Vec<(String, u128)>,
}

/// What a table entry does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryAction {
    Action(ActionCall),
    Member(u32),
    Group(u32),
    /// Only for deletes: the key is enough.
    None,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub table: String,
    pub default: bool,
    pub matches: Vec<(String, MatchValue)>,
    pub priority: i32,
    pub action: EntryAction,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub profile: String,
    pub id: u32,
    pub action: ActionCall,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub profile: String,
    pub id: u32,
    pub members: Vec<(u32, i32)>,
}

/// A control-plane object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    Entry(Entry),
    Member(Member),
    Group(Group),
    CloneSession { id: u32, ports: Vec<u32> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Insert,
    Modify,
    Delete,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestSub {
    pub name: String,
    pub max_timeout_ns: i64,
    pub max_list_size: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterCell {
    pub name: String,
    pub index: i64,
    pub value: u128,
}

/// An egress queue setting (BMv2: `set_queue_rate` / `set_queue_depth`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    pub port: u32,
    pub rate_pps: Option<u64>,
    pub depth_pkts: Option<u32>,
}

/// Everything installed before the first step, in this order: members,
/// groups, entries, clone sessions, digests, registers, queues.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Setup {
    pub members: Vec<Member>,
    pub groups: Vec<Group>,
    pub entries: Vec<Entry>,
    pub clone_sessions: Vec<(u32, Vec<u32>)>,
    pub digests: Vec<DigestSub>,
    pub registers: Vec<RegisterCell>,
    pub queues: Vec<Queue>,
}

/// Copies of a packet: copy `i` adds `i * step` to each `vary` field and
/// takes `values[i % len]` for each `cycle` field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Repeat {
    pub count: u64,
    pub interval_us: u64,
    pub vary: Vec<(String, u128)>,
    pub cycle: Vec<(String, Vec<u128>)>,
}

impl Repeat {
    pub fn once() -> Self {
        Repeat { count: 1, ..Default::default() }
    }

    /// The field overrides of copy `i`, given the written base values.
    pub fn overrides(&self, i: u64, base: &BTreeMap<String, u128>) -> BTreeMap<String, u128> {
        let mut o = BTreeMap::new();
        for (f, step) in &self.vary {
            let b = base.get(f).copied().unwrap_or(0);
            o.insert(f.clone(), b.wrapping_add(step.wrapping_mul(u128::from(i))));
        }
        for (f, values) in &self.cycle {
            if !values.is_empty() {
                o.insert(f.clone(), values[(i % values.len() as u64) as usize]);
            }
        }
        o
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `port` [`CPU_PORT`] is a P4Runtime packet-out with `packet_out`
    /// metadata by name.
    Send {
        port: u32,
        packet: Template,
        repeat: Repeat,
        packet_out: Vec<(String, u128)>,
    },
    Write(Vec<(Op, Object)>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub at_us: u64,
    pub action: Action,
}

/// Where an expected output may leave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortSpec {
    /// `None`: any port.
    pub any_of: Option<Vec<u32>>,
    pub bind: Option<String>,
    pub same_as: Option<String>,
    pub not: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub port: PortSpec,
    pub packet: Template,
    /// Packet-in metadata by name (CPU port only).
    pub packet_in: Vec<(String, u128)>,
    pub repeat: Repeat,
    pub where_: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterCheck {
    pub name: String,
    /// Summed over these cells.
    pub index: Vec<i64>,
    pub packets: Range,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterCheck {
    pub name: String,
    pub index: i64,
    pub value: Range,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expect {
    pub outputs: Vec<Output>,
    pub port_counts: Vec<(u32, Range)>,
    pub tallies: Vec<(String, u128, Range)>,
    /// Digests in order: name and field ranges.
    pub digests: Vec<(String, Vec<(String, Range)>)>,
    pub counters: Vec<CounterCheck>,
    pub registers: Vec<RegisterCheck>,
    pub settle_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub name: String,
    pub file: String,
    pub description: String,
    pub target: Target,
    pub setup: Setup,
    pub steps: Vec<Step>,
    pub expect: Expect,
}

/// Reads every `*.yaml` file of a directory, sorted by name, and checks
/// that case names are unique.
pub fn load_dir(dir: &Path) -> Result<Vec<Case>, VectorError> {
    let io = |m: String| VectorError { file: dir.display().to_string(), path: "$".into(), message: m };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| io(format!("cannot list the directory: {e}")))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut cases = vec![];
    let mut seen = HashSet::new();
    for f in files {
        for c in load_file(&f)? {
            if !seen.insert(c.name.clone()) {
                return Err(VectorError {
                    file: c.file.clone(),
                    path: "$.cases".into(),
                    message: format!("case name `{}` is used twice", c.name),
                });
            }
            cases.push(c);
        }
    }
    Ok(cases)
}

pub fn load_file(path: &Path) -> Result<Vec<Case>, VectorError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| VectorError {
        file: file.clone(),
        path: "$".into(),
        message: format!("cannot read: {e}"),
    })?;
    let docs = YamlLoader::load_from_str(&text).map_err(|e| VectorError {
        file: file.clone(),
        path: "$".into(),
        message: format!("not YAML: {e}"),
    })?;
    let Some(doc) = docs.first() else {
        return Err(VectorError { file, path: "$".into(), message: "empty file".into() });
    };
    let root = Node::root(doc, &file);
    root.only(&["description", "setup", "cases"])?;
    let common = root.get("setup").map(|s| setup(&s)).transpose()?.unwrap_or_default();
    root.req("cases")?.list()?.iter().map(|c| case(c, &common)).collect()
}

fn case(n: &Node<'_>, common: &Setup) -> Result<Case, VectorError> {
    n.only(&["name", "description", "target", "setup", "steps", "expect"])?;
    let name = n.req("name")?.text()?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return Err(n.req("name")?.err("case names are snake_case"));
    }
    let target = match n.get("target").map(|t| t.text()).transpose()?.as_deref() {
        None | Some("any") => Target::Any,
        Some("bmv2") => Target::Bmv2,
        Some(o) => return Err(n.req("target")?.err(format!("target `{o}`: expected any or bmv2"))),
    };
    let mut s = common.clone();
    if let Some(own) = n.get("setup") {
        let own = setup(&own)?;
        s.members.extend(own.members);
        s.groups.extend(own.groups);
        s.entries.extend(own.entries);
        // A case's clone session replaces the file's session of the same id.
        s.clone_sessions.retain(|(id, _)| !own.clone_sessions.iter().any(|(o, _)| o == id));
        s.clone_sessions.extend(own.clone_sessions);
        s.digests.extend(own.digests);
        s.registers.extend(own.registers);
        s.queues.extend(own.queues);
    }
    let mut steps = vec![];
    for st in n.req("steps")?.list()? {
        st.only(&["at_us", "send", "write"])?;
        let at_us = st.get("at_us").map(|a| a.u64()).transpose()?.unwrap_or(0);
        let action = match (st.get("send"), st.get("write")) {
            (Some(s), None) => {
                s.only(&["port", "packet", "repeat", "packet_out"])?;
                let packet = Template::parse(&s.req("packet")?)?;
                let repeat = s.get("repeat").map(|r| repeat(&r)).transpose()?.unwrap_or_else(Repeat::once);
                check_repeat(&s, &packet, &repeat)?;
                let port = port_number(&s.req("port")?)?;
                let packet_out = params(s.get("packet_out"))?;
                if (port == CPU_PORT) != s.get("packet_out").is_some() {
                    return Err(s.err(
                        "a packet from the controller (port: cpu) has `packet_out` metadata, others none",
                    ));
                }
                Action::Send { port, packet, repeat, packet_out }
            }
            (None, Some(w)) => Action::Write(w.list()?.iter().map(write_op).collect::<Result<_, _>>()?),
            _ => return Err(st.err("a step has exactly one of `send` and `write`")),
        };
        if steps.last().is_some_and(|p: &Step| p.at_us > at_us) {
            return Err(st.err("steps must be in time order"));
        }
        steps.push(Step { at_us, action });
    }
    Ok(Case {
        name,
        file: n.file.to_owned(),
        description: n.get("description").map(|d| d.text()).transpose()?.unwrap_or_default(),
        target,
        setup: s,
        steps,
        expect: n.get("expect").map(|e| expect(&e)).transpose()?.unwrap_or_default(),
    })
}

fn setup(n: &Node<'_>) -> Result<Setup, VectorError> {
    n.only(&["members", "groups", "entries", "clone_sessions", "digests", "registers", "queues"])?;
    let list = |k: &str| n.get(k).map(|l| l.list()).transpose().map(|o| o.unwrap_or_default());
    let mut s = Setup::default();
    for m in list("members")? {
        s.members.push(member(&m)?);
    }
    for g in list("groups")? {
        s.groups.push(group(&g)?);
    }
    for e in list("entries")? {
        s.entries.push(entry(&e, false)?);
    }
    for c in list("clone_sessions")? {
        let Object::CloneSession { id, ports } = clone_session(&c)? else { continue };
        s.clone_sessions.push((id, ports));
    }
    for d in list("digests")? {
        d.only(&["name", "max_timeout_ns", "max_list_size"])?;
        s.digests.push(DigestSub {
            name: d.req("name")?.text()?,
            max_timeout_ns: d.get("max_timeout_ns").map(|v| v.u64()).transpose()?.unwrap_or(0) as i64,
            max_list_size: d.get("max_list_size").map(|v| v.uint(31)).transpose()?.unwrap_or(1) as i32,
        });
    }
    for r in list("registers")? {
        r.only(&["name", "index", "value"])?;
        s.registers.push(RegisterCell {
            name: r.req("name")?.text()?,
            index: r.req("index")?.uint(31)? as i64,
            value: r.req("value")?.uint(64)?,
        });
    }
    for q in list("queues")? {
        q.only(&["port", "rate_pps", "depth_pkts"])?;
        s.queues.push(Queue {
            port: q.req("port")?.uint(9)? as u32,
            rate_pps: q.get("rate_pps").map(|v| v.u64()).transpose()?,
            depth_pkts: q.get("depth_pkts").map(|v| v.uint(31).map(|x| x as u32)).transpose()?,
        });
    }
    Ok(s)
}

fn params(n: Option<Node<'_>>) -> Result<Vec<(String, u128)>, VectorError> {
    let Some(n) = n else { return Ok(vec![]) };
    if n.is_null() {
        return Ok(vec![]);
    }
    n.map_entries()?.into_iter().map(|(k, v)| Ok((k, v.uint(128)?))).collect()
}

fn action_call(n: &Node<'_>) -> Result<ActionCall, VectorError> {
    Ok(ActionCall { name: n.req("action")?.text()?, params: params(n.get("params"))? })
}

fn member(n: &Node<'_>) -> Result<Member, VectorError> {
    n.only(&["profile", "id", "action", "params"])?;
    Ok(Member {
        profile: n.req("profile")?.text()?,
        id: n.req("id")?.uint(32)? as u32,
        action: action_call(n)?,
    })
}

fn group(n: &Node<'_>) -> Result<Group, VectorError> {
    n.only(&["profile", "id", "members"])?;
    let mut members = vec![];
    for m in n.get("members").map(|m| m.list()).transpose()?.unwrap_or_default() {
        m.only(&["member", "weight"])?;
        let w = m.get("weight").map(|w| w.uint(31)).transpose()?.unwrap_or(1) as i32;
        members.push((m.req("member")?.uint(32)? as u32, w));
    }
    Ok(Group { profile: n.req("profile")?.text()?, id: n.req("id")?.uint(32)? as u32, members })
}

fn match_value(n: &Node<'_>) -> Result<MatchValue, VectorError> {
    let t = n.text()?;
    if let Some((v, m)) = t.split_once("&&&") {
        let p = |s: &str| crate::yaml::parse_value(s).map_err(|e| n.err(e));
        return Ok(MatchValue::Masked(p(v)?, p(m)?));
    }
    if let Some((v, len)) = t.split_once('/') {
        let v = crate::yaml::parse_value(v).map_err(|e| n.err(e))?;
        let len = len.trim().parse::<i32>().map_err(|_| n.err(format!("`{len}` is not a prefix length")))?;
        return Ok(MatchValue::Prefix(v, len));
    }
    Ok(MatchValue::Value(n.uint(128)?))
}

fn entry(n: &Node<'_>, key_only: bool) -> Result<Entry, VectorError> {
    n.only(&["table", "default", "match", "priority", "action", "params", "member", "group"])?;
    let default = n.get("default").map(|d| d.bool()).transpose()?.unwrap_or(false);
    let mut matches = vec![];
    if let Some(m) = n.get("match") {
        for (k, v) in m.map_entries()? {
            matches.push((k, match_value(&v)?));
        }
    }
    let action = match (n.get("action"), n.get("member"), n.get("group")) {
        (Some(_), None, None) => EntryAction::Action(action_call(n)?),
        (None, Some(m), None) => EntryAction::Member(m.uint(32)? as u32),
        (None, None, Some(g)) => EntryAction::Group(g.uint(32)? as u32),
        (None, None, None) if key_only => EntryAction::None,
        _ => return Err(n.err("an entry has exactly one of `action`, `member` and `group`")),
    };
    Ok(Entry {
        table: n.req("table")?.text()?,
        default,
        matches,
        priority: n.get("priority").map(|p| p.uint(31)).transpose()?.unwrap_or(0) as i32,
        action,
    })
}

fn clone_session(n: &Node<'_>) -> Result<Object, VectorError> {
    n.only(&["id", "ports"])?;
    let ports =
        n.req("ports")?.list()?.iter().map(|p| p.uint(9).map(|v| v as u32)).collect::<Result<_, _>>()?;
    Ok(Object::CloneSession { id: n.req("id")?.uint(32)? as u32, ports })
}

fn write_op(n: &Node<'_>) -> Result<(Op, Object), VectorError> {
    n.only(&["op", "entry", "member", "group", "clone_session"])?;
    let op = match n.req("op")?.text()?.as_str() {
        "insert" => Op::Insert,
        "modify" => Op::Modify,
        "delete" => Op::Delete,
        o => return Err(n.req("op")?.err(format!("op `{o}`: expected insert, modify or delete"))),
    };
    let obj = if let Some(e) = n.get("entry") {
        Object::Entry(entry(&e, op == Op::Delete)?)
    } else if let Some(m) = n.get("member") {
        Object::Member(member(&m)?)
    } else if let Some(g) = n.get("group") {
        Object::Group(group(&g)?)
    } else if let Some(c) = n.get("clone_session") {
        clone_session(&c)?
    } else {
        return Err(n.err("a write names one of `entry`, `member`, `group`, `clone_session`"));
    };
    Ok((op, obj))
}

fn repeat(n: &Node<'_>) -> Result<Repeat, VectorError> {
    n.only(&["count", "interval_us", "vary", "cycle"])?;
    let mut r = Repeat {
        count: n.req("count")?.u64()?,
        interval_us: n.get("interval_us").map(|v| v.u64()).transpose()?.unwrap_or(0),
        ..Default::default()
    };
    if let Some(v) = n.get("vary") {
        for (k, s) in v.map_entries()? {
            r.vary.push((k, s.uint(128)?));
        }
    }
    if let Some(c) = n.get("cycle") {
        for (k, vs) in c.map_entries()? {
            r.cycle.push((k, vs.list()?.iter().map(|x| x.uint(128)).collect::<Result<_, _>>()?));
        }
    }
    Ok(r)
}

fn check_repeat(n: &Node<'_>, packet: &Template, r: &Repeat) -> Result<(), VectorError> {
    for f in r.vary.iter().map(|(f, _)| f).chain(r.cycle.iter().map(|(f, _)| f)) {
        if !packet.has_field(f) {
            return Err(n.err(format!("repeat changes `{f}`, which the packet does not have")));
        }
    }
    Ok(())
}

/// A port number, or `cpu`.
fn port_number(p: &Node<'_>) -> Result<u32, VectorError> {
    if p.text()? == "cpu" {
        Ok(CPU_PORT)
    } else {
        Ok(p.uint(9)? as u32)
    }
}

fn port_spec(n: &Node<'_>) -> Result<PortSpec, VectorError> {
    let one = port_number;
    if n.map_entries().is_err() {
        return Ok(PortSpec { any_of: Some(vec![one(n)?]), ..Default::default() });
    }
    n.only(&["any_of", "bind", "same_as", "not"])?;
    let s = |k: &str| n.get(k).map(|v| v.text()).transpose();
    Ok(PortSpec {
        any_of: n.get("any_of").map(|l| l.list()?.iter().map(one).collect()).transpose()?,
        bind: s("bind")?,
        same_as: s("same_as")?,
        not: s("not")?,
    })
}

fn expect(n: &Node<'_>) -> Result<Expect, VectorError> {
    n.only(&["outputs", "port_counts", "tallies", "digests", "counters", "registers", "settle_ms"])?;
    let list = |k: &str| n.get(k).map(|l| l.list()).transpose().map(|o| o.unwrap_or_default());
    let mut e = Expect { settle_ms: 300, ..Default::default() };
    if let Some(s) = n.get("settle_ms") {
        e.settle_ms = s.u64()?;
    }
    for o in list("outputs")? {
        o.only(&["port", "packet", "packet_in", "repeat"])?;
        let packet = Template::parse(&o.req("packet")?)?;
        let repeat = o.get("repeat").map(|r| repeat(&r)).transpose()?.unwrap_or_else(Repeat::once);
        check_repeat(&o, &packet, &repeat)?;
        e.outputs.push(Output {
            port: port_spec(&o.req("port")?)?,
            packet,
            packet_in: params(o.get("packet_in"))?,
            repeat,
            where_: format!("{}: {}", o.file, o.path()),
        });
    }
    if let Some(pc) = n.get("port_counts") {
        for (k, v) in pc.map_entries()? {
            let port = crate::yaml::parse_value(&k).map_err(|m| v.err(m))? as u32;
            e.port_counts.push((port, v.range()?));
        }
    }
    if let Some(t) = n.get("tallies") {
        for (name, values) in t.map_entries()? {
            for (value, r) in values.map_entries()? {
                let v = crate::yaml::parse_value(&value).map_err(|m| r.err(m))?;
                e.tallies.push((name.clone(), v, r.range()?));
            }
        }
    }
    for d in list("digests")? {
        let mut name = String::new();
        let mut fields = vec![];
        for (k, v) in d.map_entries()? {
            if k == "name" {
                name = v.text()?;
            } else {
                fields.push((k, v.range()?));
            }
        }
        e.digests.push((name, fields));
    }
    for c in list("counters")? {
        c.only(&["name", "index", "packets"])?;
        let index = c
            .req("index")?
            .list_or_one()
            .iter()
            .map(|i| i.uint(31).map(|v| v as i64))
            .collect::<Result<_, _>>()?;
        e.counters.push(CounterCheck {
            name: c.req("name")?.text()?,
            index,
            packets: c.req("packets")?.range()?,
        });
    }
    for r in list("registers")? {
        r.only(&["name", "index", "value"])?;
        e.registers.push(RegisterCheck {
            name: r.req("name")?.text()?,
            index: r.req("index")?.uint(31)? as i64,
            value: r.req("value")?.range()?,
        });
    }
    Ok(e)
}
