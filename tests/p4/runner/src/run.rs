//! Running one case on BMv2: start the switch, push the pipeline, install
//! the setup over P4Runtime (registers and queues over Thrift), play the
//! steps on time, then gather outputs, packet-ins, digests, counters and
//! registers for [`crate::check`].

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use metaroce_p4rt::codec::{self, Bits};
use metaroce_p4rt::entity::{self, DigestConfig};
use metaroce_p4rt::p4info::{match_field, name_of};
use metaroce_p4rt::proto::p4::config::v1 as cfg;
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::session::{Bmv2Json, Event};
use metaroce_p4rt::thrift::{ThriftClient, ThriftConfig};
use metaroce_p4rt::{P4Info, Session, SessionConfig};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::bmv2::{PacketIo, Switch, Tools, Veths};
use crate::case::{Action, Case, Entry, EntryAction, MatchValue, Object, Op, CPU_PORT};
use crate::check::{Observed, Sent};

/// The compiled program.
#[derive(Debug)]
pub struct Program {
    pub info: P4Info,
    pub json: Vec<u8>,
}

impl Program {
    /// Loads `main.p4info.txtpb` (text format) and `main.json`.
    pub fn load(build: &Path) -> Result<Self> {
        let info_path = build.join("main.p4info.txtpb");
        let text = std::fs::read_to_string(&info_path)
            .with_context(|| format!("reading {}", info_path.display()))?;
        let info = P4Info::from_text(&text).with_context(|| format!("parsing {}", info_path.display()))?;
        let json_path = build.join("main.json");
        let json = std::fs::read(&json_path).with_context(|| format!("reading {}", json_path.display()))?;
        Ok(Program { info, json })
    }
}

pub(crate) fn bits(v: u128) -> Bits {
    Bits(v.to_be_bytes().to_vec())
}

fn mask_of(width: i32) -> u128 {
    if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

fn table_entry(info: &P4Info, e: &Entry) -> Result<p4::TableEntry> {
    use cfg::match_field::{Match as K, MatchType as T};
    let mut b = info.table_entry(&e.table)?;
    let table = info.table(&e.table)?;
    for (field, v) in &e.matches {
        let f = match_field(table, field)?;
        let kind = match f.r#match {
            Some(K::MatchType(m)) => T::try_from(m).unwrap_or(T::Unspecified),
            _ => T::Unspecified,
        };
        b = match (kind, v) {
            (T::Exact, MatchValue::Value(x)) => b.exact(field, bits(*x))?,
            (T::Lpm, MatchValue::Prefix(x, len)) => b.lpm(field, bits(*x), *len)?,
            (T::Lpm, MatchValue::Value(x)) => b.lpm(field, bits(*x), f.bitwidth)?,
            (T::Ternary, MatchValue::Masked(x, m)) => b.ternary(field, bits(*x), bits(*m))?,
            (T::Ternary, MatchValue::Value(x)) => b.ternary(field, bits(*x), bits(mask_of(f.bitwidth)))?,
            (k, v) => {
                bail!("{}: match field {field} is {}; {v:?} does not suit it", e.table, k.as_str_name())
            }
        };
    }
    if e.priority != 0 {
        b = b.priority(e.priority);
    }
    b = match &e.action {
        EntryAction::Action(a) => {
            let params: Vec<(&str, Bits)> = a.params.iter().map(|(n, v)| (n.as_str(), bits(*v))).collect();
            b.action(&a.name, &params)?
        }
        EntryAction::Member(m) => b.member(*m),
        EntryAction::Group(g) => b.group(*g),
        EntryAction::None => b,
    };
    if e.default {
        b = b.default_action();
    }
    Ok(b.build())
}

fn update(info: &P4Info, op: Op, obj: &Object) -> Result<p4::Update> {
    let ent: p4::Entity = match obj {
        Object::Entry(e) => table_entry(info, e)?.into(),
        Object::Member(m) => {
            let params: Vec<(&str, Bits)> =
                m.action.params.iter().map(|(n, v)| (n.as_str(), bits(*v))).collect();
            info.profile_member(&m.profile, m.id, info.action_call(&m.action.name, &params)?)?.into()
        }
        Object::Group(g) => info.profile_group(&g.profile, g.id, &g.members, 0)?.into(),
        Object::CloneSession { id, ports } => {
            let replicas: Vec<(u32, u32)> = ports.iter().map(|p| (*p, 1)).collect();
            entity::clone_session(*id, &replicas, 0, 0)
        }
    };
    // A keyless table's default entry can only be modified.
    let op = match obj {
        Object::Entry(e) if e.default => Op::Modify,
        _ => op,
    };
    Ok(match op {
        Op::Insert => entity::insert(ent),
        Op::Modify => entity::modify(ent),
        Op::Delete => entity::delete(ent),
    })
}

pub(crate) async fn write(s: &Session, info: &P4Info, ops: &[(Op, Object)], what: &str) -> Result<()> {
    let updates = ops.iter().map(|(op, o)| update(info, *op, o)).collect::<Result<Vec<_>>>()?;
    if updates.is_empty() {
        return Ok(());
    }
    s.write(updates).await.map_err(|e| anyhow!("{what}: {e}: {:?}", std::error::Error::source(&e)))
}

async fn connect(sw: &mut Switch, prog: &Program) -> Result<Session> {
    let mut cfg = SessionConfig::new(format!("http://127.0.0.1:{}", sw.grpc), 1);
    cfg.connect_attempts = 1;
    cfg.connect_timeout = Duration::from_millis(500);
    let mut tries = 0;
    let s = loop {
        // A switch that died (bad option, missing library) fails at once,
        // with the end of its log.
        sw.alive()?;
        match Session::connect(cfg.clone()).await {
            Ok(s) => break s,
            Err(e) if tries >= 100 => {
                return Err(anyhow!(e).context(format!("connecting to BMv2 (log {})", sw.log.display())));
            }
            Err(_) => tries += 1,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let s = s.with_thrift(ThriftConfig::new(([127, 0, 0, 1], sw.thrift).into()));
    s.wait_primary().await?;
    s.set_pipeline(&prog.info, &Bmv2Json(prog.json.clone()), None).await.context("pushing the pipeline")?;
    sw.alive()?;
    Ok(s)
}

/// Installs a case's setup over P4Runtime, except its queues (a target's
/// own knob): members, groups, entries, clone sessions, digests,
/// registers (BMv2's over Thrift, which its P4Runtime server lacks).
pub(crate) async fn install(s: &Session, info: &P4Info, case: &Case) -> Result<()> {
    let st = &case.setup;
    let ops: Vec<(Op, Object)> = st
        .members
        .iter()
        .map(|m| (Op::Insert, Object::Member(m.clone())))
        .chain(st.groups.iter().map(|g| (Op::Insert, Object::Group(g.clone()))))
        .collect();
    write(s, info, &ops, "setup members and groups").await?;
    for e in &st.entries {
        write(s, info, &[(Op::Insert, Object::Entry(e.clone()))], &format!("setup entry in {}", e.table))
            .await?;
    }
    let sessions: Vec<(Op, Object)> = st
        .clone_sessions
        .iter()
        .map(|(id, ports)| (Op::Insert, Object::CloneSession { id: *id, ports: ports.clone() }))
        .collect();
    write(s, info, &sessions, "setup clone sessions").await?;
    for d in &st.digests {
        let c = DigestConfig {
            max_timeout_ns: d.max_timeout_ns,
            max_list_size: d.max_list_size,
            // The session acks every list as it arrives, so this only
            // bounds how long the switch holds a list for a late ack. At
            // 1 ms a loaded machine (a CI run beside builds) acked after
            // the twin had dropped the list, and the late ack was refused
            // as a stream error.
            ack_timeout_ns: 1_000_000_000,
        };
        s.configure_digest(info.digest_entry(&d.name, c)?)
            .await
            .with_context(|| format!("digest {}", d.name))?;
    }
    for r in &st.registers {
        s.write_register(info, &r.name, Some(r.index), r.value)
            .await
            .with_context(|| format!("register {}[{}]", r.name, r.index))?;
    }
    Ok(())
}

async fn setup(s: &Session, sw: &Switch, prog: &Program, case: &Case) -> Result<()> {
    install(s, &prog.info, case).await?;
    let st = &case.setup;
    if !st.queues.is_empty() {
        let mut t = ThriftClient::connect(ThriftConfig::new(([127, 0, 0, 1], sw.thrift).into())).await?;
        for q in &st.queues {
            if let Some(d) = q.depth_pkts {
                t.set_queue_depth(Some(q.port as i32), d as i32)
                    .await
                    .with_context(|| format!("queue depth of port {}", q.port))?;
            }
            if let Some(r) = q.rate_pps {
                t.set_queue_rate(Some(q.port as i32), r as i64)
                    .await
                    .with_context(|| format!("queue rate of port {}", q.port))?;
            }
        }
    }
    Ok(())
}

pub(crate) async fn read_counters(
    s: &Session,
    info: &P4Info,
    case: &Case,
) -> Result<HashMap<(String, i64), u64>> {
    let mut out = HashMap::new();
    for c in &case.expect.counters {
        for i in &c.index {
            let e = info.counter_entry(&c.name, Some(*i))?;
            let got =
                s.read(vec![e.into()]).await.with_context(|| format!("reading counter {}[{i}]", c.name))?;
            let n = got
                .into_iter()
                .find_map(|e| match e.entity? {
                    p4::entity::Entity::CounterEntry(c) => c.data,
                    _ => None,
                })
                .map(|d| d.packet_count as u64)
                .unwrap_or(0);
            out.insert((c.name.clone(), *i), n);
        }
    }
    Ok(out)
}

fn struct_fields(info: &P4Info, spec: Option<&cfg::P4DataTypeSpec>) -> Vec<(String, i32)> {
    use cfg::p4_bitstring_like_type_spec::TypeSpec as B;
    use cfg::p4_data_type_spec::TypeSpec as T;
    let Some(T::Struct(named)) = spec.and_then(|s| s.type_spec.as_ref()) else { return vec![] };
    let Some(st) = info.raw().type_info.as_ref().and_then(|t| t.structs.get(&named.name)) else {
        return vec![];
    };
    st.members
        .iter()
        .map(|m| {
            let w = match m.type_spec.as_ref().and_then(|t| t.type_spec.as_ref()) {
                Some(T::Bitstring(b)) => match b.type_spec.as_ref() {
                    Some(B::Bit(x)) => x.bitwidth,
                    Some(B::Int(x)) => x.bitwidth,
                    _ => 128,
                },
                _ => 128,
            };
            (m.name.clone(), w)
        })
        .collect()
}

pub(crate) fn decode_event(info: &P4Info, ev: Event, obs: &mut Observed) -> Result<()> {
    match ev {
        Event::PacketIn(p) => {
            let h = info.packet_metadata.by_name("packet_in")?;
            let mut meta = vec![];
            for m in &p.metadata {
                let d = h.metadata.iter().find(|d| d.id == m.metadata_id);
                let (name, w) =
                    d.map(|d| (d.name.clone(), d.bitwidth)).unwrap_or((format!("#{}", m.metadata_id), 128));
                meta.push((
                    name,
                    codec::decode_u128(&m.value, w).map_err(|e| anyhow!("packet-in metadata: {e}"))?,
                ));
            }
            obs.outputs.push(Sent { port: CPU_PORT, bytes: p.payload, meta });
        }
        Event::Digest(list) => {
            let d = info.digests.by_id(list.digest_id)?;
            let fields = struct_fields(info, d.type_spec.as_ref());
            for data in list.data {
                let members = match data.data {
                    Some(p4::p4_data::Data::Struct(s)) => s.members,
                    other => bail!("digest {}: data is not a struct: {other:?}", name_of(d)),
                };
                let mut got = vec![];
                for (i, m) in members.into_iter().enumerate() {
                    let (name, w) = fields.get(i).cloned().unwrap_or((format!("#{i}"), 128));
                    let v = match m.data {
                        Some(p4::p4_data::Data::Bitstring(b)) => {
                            codec::decode_u128(&b, w).map_err(|e| anyhow!("digest field {name}: {e}"))?
                        }
                        other => bail!("digest field {name} is not a bitstring: {other:?}"),
                    };
                    got.push((name, v));
                }
                obs.digests.push((name_of(d), got));
            }
        }
        Event::StreamError(e) => bail!("stream error from BMv2: {e:?}"),
        Event::Disconnected { reason } => bail!("stream to BMv2 dropped: {reason}"),
        _ => {}
    }
    Ok(())
}

async fn play(case: &Case, s: &Session, info: &P4Info, io: &mut PacketIo) -> Result<()> {
    let t0 = Instant::now();
    for step in &case.steps {
        let at = t0 + Duration::from_micros(step.at_us);
        match &step.action {
            Action::Send { port, packet, repeat, packet_out } => {
                let base = packet.written();
                let meta: Vec<(&str, Bits)> =
                    packet_out.iter().map(|(n, v)| (n.as_str(), bits(*v))).collect();
                for i in 0..repeat.count {
                    let due = at + Duration::from_micros(repeat.interval_us * i);
                    tokio::time::sleep_until(due.into()).await;
                    let built = packet.build(&repeat.overrides(i, &base)).map_err(|m| anyhow!(m))?;
                    if *port == CPU_PORT {
                        s.packet_out(built.bytes, info.packet_metadata("packet_out", &meta)?)?;
                    } else {
                        io.send(*port, &built.bytes)?;
                    }
                }
            }
            Action::Write(ops) => {
                tokio::time::sleep_until(at.into()).await;
                write(s, info, ops, &format!("write step at {} us", step.at_us)).await?;
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(case.expect.settle_ms)).await;
    Ok(())
}

/// Runs one case; `Ok` holds the observation, `Err` a failure to run it.
pub async fn run_case(
    case: &Case,
    tools: &Tools,
    veths: &Veths,
    io: &mut PacketIo,
    prog: &Program,
    log: &Path,
) -> Result<Observed> {
    let mut sw = Switch::start(tools, veths, log)?;
    let s = connect(&mut sw, prog).await?;
    let mut events: UnboundedReceiver<Event> = s.subscribe()?;
    setup(&s, &sw, prog, case).await?;
    let before = read_counters(&s, &prog.info, case).await?;
    io.reset();
    while events.try_recv().is_ok() {}
    play(case, &s, &prog.info, io).await?;
    sw.alive()?;
    let mut obs = Observed { outputs: io.take(), ..Default::default() };
    while let Ok(ev) = events.try_recv() {
        decode_event(&prog.info, ev, &mut obs)?;
    }
    let after = read_counters(&s, &prog.info, case).await?;
    for (k, v) in after {
        let b = before.get(&k).copied().unwrap_or(0);
        obs.counters.insert(k, v.saturating_sub(b));
    }
    for r in &case.expect.registers {
        let got = s
            .read_register(&prog.info, &r.name, Some(r.index))
            .await
            .with_context(|| format!("reading register {}[{}]", r.name, r.index))?;
        if let Some((_, v)) = got.first() {
            obs.registers.insert((r.name.clone(), r.index), *v);
        }
    }
    drop(s);
    drop(sw);
    Ok(obs)
}
