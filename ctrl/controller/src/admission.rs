//! Admission of jobs by the switches' table capacity. A job is placed on
//! a trial copy of the placement first ([`crate::place::Placement::trial`]);
//! each switch is then asked to hold the job's steer entries next to
//! everything it holds or is meant to hold (other jobs, large-flow
//! placements, entries still being removed). A job whose entries do not
//! fit a switch's table is refused, naming the switch, the table, the
//! entries it needs and the room there is; nothing of it is placed. So no
//! table is written past its size (DESIGN.md, invariant 7).
//!
//! Table sizes come from the P4Info; this module does not spell a P4 name
//! (it asks the pipeline which table a steer entry goes to).

use std::collections::{BTreeMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_pipeline::{Entry, Key, Pipeline};
use metaroce_te::FlowKey;
use serde::Serialize;
use serde_json::{json, Value};

use crate::place::{Steer, SteerHop};
use crate::plan;

/// One table steer entries go to: its P4Info name and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    /// `None` when the P4Info leaves the size to the target (0).
    pub size: Option<usize>,
}

/// The two steer tables: per flow (addresses, source port, queue pair)
/// and per host pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SteerTables {
    pub flow: Table,
    pub pair: Table,
}

/// Why the steer tables could not be found in the P4Info.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    #[error("the pipeline cannot build a {what} steer entry")]
    Build {
        what: &'static str,
        #[source]
        source: Box<metaroce_pipeline::PipelineError>,
    },
    #[error("a {what} steer entry is not a table entry of the P4Info")]
    NotATable { what: &'static str },
    #[error("the P4Info has no table with the id of the {what} steer entry")]
    Unknown {
        what: &'static str,
        #[source]
        source: metaroce_p4rt::P4InfoError,
    },
}

impl SteerTables {
    /// The steer tables of `pipeline`, found by building one entry of each.
    pub fn of(pipeline: &Pipeline) -> Result<Self, AdmissionError> {
        let any = std::net::Ipv4Addr::UNSPECIFIED;
        let hop = SteerHop { port: 1, nhop_id: plan::nhop_id(1), downstream: vec![] };
        let table = |what: &'static str, flow: FlowKey| -> Result<Table, AdmissionError> {
            let entity = pipeline
                .entity(&plan::steer_entry(&flow, &hop))
                .map_err(|e| AdmissionError::Build { what, source: Box::new(e) })?;
            let Some(p4::entity::Entity::TableEntry(t)) = entity.entity else {
                return Err(AdmissionError::NotATable { what });
            };
            let info = pipeline
                .info()
                .tables
                .by_id(t.table_id)
                .map_err(|source| AdmissionError::Unknown { what, source })?;
            let name =
                info.preamble.as_ref().map_or_else(|| format!("table {}", t.table_id), |p| p.name.clone());
            Ok(Table { name, size: usize::try_from(info.size).ok().filter(|s| *s > 0) })
        };
        Ok(SteerTables {
            flow: table("flow", FlowKey::flow(any, any, 0, 0))?,
            pair: table("pair", FlowKey::pair(any, any))?,
        })
    }

    fn of_key(&self, k: &Key) -> Option<&Table> {
        match k {
            Key::SteerFlow(_) => Some(&self.flow),
            Key::SteerPair(..) => Some(&self.pair),
            _ => None,
        }
    }
}

/// A switch table the job does not fit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shortfall {
    pub switch: String,
    pub table: String,
    /// Entries the job needs there.
    pub need: usize,
    /// Entries free for it: the size less `in_use`.
    pub room: usize,
    pub size: usize,
    /// Entries of everything else the switch holds or is meant to hold.
    pub in_use: usize,
}

impl Shortfall {
    pub fn message(&self) -> String {
        format!(
            "{} needs {} entries in {}, which has room for {} (size {}, {} in use by other jobs and flows)",
            self.switch, self.need, self.table, self.room, self.size, self.in_use
        )
    }
}

/// The tables a job's entries (`job`, its flow keys) do not fit: per
/// switch, `steer` is what the switch would be asked to hold with the job
/// placed, `installed` what it holds now. Empty when the job fits.
pub fn check(
    tables: &SteerTables,
    names: &[String],
    job: &[FlowKey],
    steer: &[Arc<Steer>],
    installed: &[Arc<BTreeMap<Key, Entry>>],
) -> Vec<Shortfall> {
    let job: HashSet<Key> = job.iter().map(plan::steer_key).collect();
    let mut out = Vec::new();
    for (s, wanted) in steer.iter().enumerate() {
        let mut need: BTreeMap<&str, usize> = BTreeMap::new();
        let mut others: HashSet<Key> = HashSet::new();
        for k in wanted.keys().map(plan::steer_key) {
            if job.contains(&k) {
                *need.entry(tables.of_key(&k).map_or("", |t| t.name.as_str())).or_default() += 1;
            } else {
                others.insert(k);
            }
        }
        if need.is_empty() {
            continue;
        }
        if let Some(held) = installed.get(s) {
            others.extend(steer_keys(held).filter(|k| !job.contains(k)).copied());
        }
        for table in [&tables.flow, &tables.pair] {
            let (Some(size), Some(&n)) = (table.size, need.get(table.name.as_str())) else { continue };
            let in_use = others.iter().filter(|k| tables.of_key(k) == Some(table)).count();
            let room = size.saturating_sub(in_use);
            if n > room {
                let switch = names.get(s).cloned().unwrap_or_else(|| format!("#{s}"));
                out.push(Shortfall { switch, table: table.name.clone(), need: n, room, size, in_use });
            }
        }
    }
    out
}

/// At most how many flows a job body declares: its `flows`, or every
/// ordered pair of its `hosts` (patterns); `None` when the body says
/// neither (then only the trial can tell).
pub fn flows_bound(body: &Value) -> Option<usize> {
    if let Some(f) = body.get("flows").and_then(Value::as_array) {
        return Some(f.len());
    }
    body.get("hosts").and_then(Value::as_array).map(|h| h.len().saturating_mul(h.len()))
}

/// True when a job of at most `bound` flows fits every switch whatever
/// the placement does with it: a flow has at most one steer entry per
/// switch, so each switch's entries (`steer` desired now, `installed`
/// held) plus `bound` within the smaller steer table leave no doubt, and
/// the trial is not needed. It keeps a job's registration from paying
/// for a second placement while the tables are far from full.
pub fn surely_fits(
    tables: &SteerTables,
    bound: usize,
    steer: impl IntoIterator<Item = usize>,
    installed: &[Arc<BTreeMap<Key, Entry>>],
) -> bool {
    let (Some(flow), Some(pair)) = (tables.flow.size, tables.pair.size) else { return false };
    let held = |s: usize| installed.get(s).map_or(0, |i| steer_keys(i).count());
    steer
        .into_iter()
        .enumerate()
        .all(|(s, n)| n.saturating_add(held(s)).saturating_add(bound) <= flow.min(pair))
}

/// The steer entries among what a switch holds, read as one range of the
/// map: `SteerFlow` and `SteerPair` are adjacent in `Key`'s order (the
/// lowest flow key first, `LargeFlowConfig` just after), so a job's
/// admission reads these and not the thousands of routes and groups
/// beside them (that scan was most of a job's registration time).
fn steer_keys(held: &BTreeMap<Key, Entry>) -> impl Iterator<Item = &Key> {
    let any = Ipv4Addr::UNSPECIFIED;
    let first = Key::SteerFlow(metaroce_pipeline::FlowKey { src: any, dst: any, sport: 0, qp: 0 });
    held.range(first..Key::LargeFlowConfig).map(|(k, _)| k)
}

/// The body of the 400 for a job the tables cannot hold.
pub fn refusal_body(job: &str, short: &[Shortfall]) -> Value {
    let first = short.first().map(Shortfall::message).unwrap_or_default();
    let problems: Vec<Value> =
        short.iter().map(|s| json!({"path": "flows", "message": s.message()})).collect();
    json!({
        "error": format!("job {job:?} does not fit the switches' tables: {first}"),
        "problems": problems,
        "capacity": short,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables() -> SteerTables {
        SteerTables {
            flow: Table { name: "steer_flow".into(), size: Some(4) },
            pair: Table { name: "steer_pair".into(), size: Some(2) },
        }
    }

    fn flow(i: u8) -> FlowKey {
        FlowKey::flow(Ipv4Addr::new(10, 0, 2, 1), Ipv4Addr::new(10, 0, 1, 2), 49152 + u16::from(i), 7)
    }

    fn pair(i: u8) -> FlowKey {
        FlowKey::pair(Ipv4Addr::new(10, 0, 2, i), Ipv4Addr::new(10, 0, 1, 1))
    }

    fn steer(keys: &[FlowKey]) -> Arc<Steer> {
        let hop = SteerHop { port: 3, nhop_id: 4, downstream: vec![] };
        Arc::new(keys.iter().map(|k| (*k, hop.clone())).collect())
    }

    fn held(keys: &[FlowKey]) -> Arc<BTreeMap<Key, Entry>> {
        let hop = SteerHop { port: 3, nhop_id: 4, downstream: vec![] };
        Arc::new(keys.iter().map(|k| (plan::steer_key(k), plan::steer_entry(k, &hop))).collect())
    }

    #[test]
    fn a_job_fits_up_to_the_size_less_what_others_hold() {
        let names = vec!["leaf1".to_string(), "leaf2".to_string()];
        let job: Vec<FlowKey> = (0..3).map(flow).collect();
        // leaf2: the job's 3 and another job's 1: exactly the size (4).
        let mut on_leaf2: Vec<FlowKey> = job.clone();
        on_leaf2.push(flow(10));
        let fits = [steer(&[]), steer(&on_leaf2)];
        let none = [held(&[]), held(&[])];
        assert!(check(&tables(), &names, &job, &fits, &none).is_empty());
        // A large flow still installed (being removed) takes the last entry.
        let installed = [held(&[]), held(&[flow(11)])];
        let short = check(&tables(), &names, &job, &fits, &installed);
        assert_eq!(
            short,
            vec![Shortfall {
                switch: "leaf2".into(),
                table: "steer_flow".into(),
                need: 3,
                room: 2,
                size: 4,
                in_use: 2
            }]
        );
        // An entry both held and desired counts once; the job's own held entries are its need.
        let installed = [held(&[]), held(&[flow(10), flow(0)])];
        assert!(check(&tables(), &names, &job, &fits, &installed).is_empty());
    }

    #[test]
    fn each_table_is_counted_on_its_own_and_the_body_names_everything() {
        let names = vec!["leaf1".to_string()];
        let job = vec![pair(1), pair(2), pair(3), flow(0)];
        let short = check(&tables(), &names, &job, &[steer(&job)], &[held(&[pair(9)])]);
        assert_eq!(short.len(), 1, "{short:?}");
        assert_eq!((short[0].table.as_str(), short[0].need, short[0].room), ("steer_pair", 3, 1));
        let body = refusal_body("a2a", &short);
        let error = body["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("leaf1 needs 3 entries in steer_pair, which has room for 1 (size 2"),
            "{body}"
        );
        assert_eq!(body["capacity"][0]["need"], 3);
        assert_eq!(body["capacity"][0]["room"], 1);
        assert_eq!(body["problems"][0]["path"], "flows");
        // A table whose size the P4Info leaves to the target is not checked.
        let mut open_size = tables();
        open_size.pair.size = None;
        assert!(check(&open_size, &names, &job, &[steer(&job)], &[held(&[])]).is_empty());
    }

    #[test]
    fn a_small_job_far_from_full_tables_needs_no_trial() {
        let body = serde_json::json!({"name": "x", "pattern": "all-to-all", "hosts": ["h1", "h2", "h3"]});
        assert_eq!(flows_bound(&body), Some(9));
        assert_eq!(flows_bound(&serde_json::json!({"flows": [{}, {}]})), Some(2));
        assert_eq!(flows_bound(&serde_json::json!({"name": "x"})), None);
        // Sizes 4 and 2: the smaller bounds every switch.
        let none = [held(&[]), held(&[])];
        assert!(surely_fits(&tables(), 2, [0, 0], &none));
        assert!(!surely_fits(&tables(), 3, [0, 0], &none));
        assert!(!surely_fits(&tables(), 1, [0, 2], &none), "desired entries count");
        assert!(!surely_fits(&tables(), 1, [0, 1], &[held(&[]), held(&[flow(1)])]), "held entries count");
        let mut open_size = tables();
        open_size.flow.size = None;
        assert!(!surely_fits(&open_size, 0, [0], &none), "no size: no shortcut (and no check either)");
    }

    #[test]
    fn the_committed_program_has_both_steer_tables_with_their_sizes() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build");
        let p = Pipeline::load(&dir.join("main.p4info.txtpb"), &dir.join("main.json"))
            .unwrap_or_else(|e| panic!("{e}"));
        let t = SteerTables::of(&p).unwrap_or_else(|e| panic!("{e}"));
        // p4src/shared/sizes.p4: STEER_FLOW_TABLE_SIZE, STEER_PAIR_TABLE_SIZE.
        assert_eq!((t.flow.size, t.pair.size), (Some(4096), Some(1024)), "{t:?}");
        assert_ne!(t.flow.name, t.pair.name);
    }

    #[test]
    fn the_steer_range_holds_every_steer_key_and_nothing_else() {
        // One key of every kind around the steer ones, at their extremes:
        // if `Key`'s variants are ever reordered, the range read misses or
        // over-counts here.
        let hop = SteerHop { port: 3, nhop_id: 4, downstream: vec![] };
        let top = Ipv4Addr::BROADCAST;
        let extremes = [
            FlowKey::flow(Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED, 0, 0),
            FlowKey::flow(top, top, u16::MAX, u32::MAX),
            FlowKey::pair(Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED),
            pair(1),
            FlowKey::pair(top, top),
            flow(3),
        ];
        let mut held: BTreeMap<Key, Entry> =
            extremes.iter().map(|k| (plan::steer_key(k), plan::steer_entry(k, &hop))).collect();
        let others = [
            Key::Config,
            Key::Route(u32::MAX, 32),
            Key::GroupEntry(u16::MAX),
            Key::PortDown(u16::MAX),
            Key::LargeFlowConfig,
            Key::DrainConfig,
            Key::QpPair(0, 0, 0),
            Key::CloneSession(0),
        ];
        let filler = plan::steer_entry(&flow(0), &hop);
        for k in others {
            held.insert(k, filler.clone());
        }
        let by_range: Vec<Key> = steer_keys(&held).copied().collect();
        let by_kind: Vec<Key> = held.keys().filter(|k| tables().of_key(k).is_some()).copied().collect();
        assert_eq!(by_range, by_kind);
        assert_eq!(by_range.len(), extremes.len());
    }
}
