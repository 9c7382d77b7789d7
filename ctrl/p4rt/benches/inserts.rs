//! Batched table inserts per second through the driver into the
//! in-process P4Runtime server over TCP on 127.0.0.1, and into BMv2 when
//! `simple_switch_grpc` and a compiled program are present. Prints the
//! figures; asserts nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use metaroce_p4rt::entity::{delete, insert};
use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::server::{Switch, SwitchOptions};
use metaroce_p4rt::session::Bmv2Json;
use metaroce_p4rt::{P4Info, Session, SessionConfig};

const ENTRIES: u32 = 100_000;

const BATCH: usize = 1_000;
const ROUNDS: usize = 3;

fn entries(info: &P4Info) -> Vec<p4::TableEntry> {
    (0..ENTRIES)
        .map(|i| {
            let addr = 0x0a00_0000u32 + i;
            info.table_entry("ipv4_lpm")
                .unwrap()
                .lpm("dst_addr", addr, 32)
                .unwrap()
                .action("set_group", &[("group", ((i % 1000) as u16).into())])
                .unwrap()
                .build()
        })
        .collect()
}

async fn run(session: &Session, list: &[p4::TableEntry], what: &str, target: &str) -> f64 {
    let mut best = Duration::MAX;
    for _ in 0..ROUNDS {
        let ups: Vec<p4::Update> = list.iter().cloned().map(insert).collect();
        let t = Instant::now();
        session.write_batched(ups, BATCH).await.unwrap();
        best = best.min(t.elapsed());
        let dels: Vec<p4::Update> = list.iter().cloned().map(delete).collect();
        session.write_batched(dels, BATCH).await.unwrap();
    }
    let n = list.len();
    let rate = n as f64 / best.as_secs_f64();
    println!(
        "p4rt inserts/{target}: {n} {what} entries in batches of {BATCH}: best of {ROUNDS} {:.1} ms = {rate:.0} entries/s",
        best.as_secs_f64() * 1e3
    );
    rate
}

/// Entries for the first exact-match, direct-action table of any
/// program (BMv2 runs the metaroce program, whose names this crate must
/// not spell): the widest field counts up, the action's parameters are 0.
fn exact_entries(info: &P4Info, max: usize) -> Option<(String, Vec<p4::TableEntry>)> {
    use metaroce_p4rt::proto::p4::config::v1 as cfg;
    let exact = cfg::match_field::Match::MatchType(cfg::match_field::MatchType::Exact as i32);
    let table = info.tables.iter().find(|t| {
        !t.match_fields.is_empty()
            && t.match_fields.iter().all(|f| f.r#match == Some(exact.clone()))
            && t.implementation_id == 0
            && !t.is_const_table
            && t.action_refs.iter().any(|r| r.scope != cfg::action_ref::Scope::DefaultOnly as i32)
    })?;
    let tname = table.preamble.as_ref()?.name.clone();
    let aref = table.action_refs.iter().find(|r| r.scope != cfg::action_ref::Scope::DefaultOnly as i32)?;
    let action = info.actions.by_id(aref.id).ok()?;
    let aname = action.preamble.as_ref()?.name.clone();
    let wide = table.match_fields.iter().max_by_key(|f| f.bitwidth)?;
    let n = max.min(usize::try_from(table.size).unwrap_or(max).max(1)).min(1usize << wide.bitwidth.min(30));
    let params: Vec<(&str, metaroce_p4rt::Bits)> =
        action.params.iter().map(|p| (p.name.as_str(), 0u8.into())).collect();
    let entries = (0..n)
        .map(|i| {
            let mut b = info.table_entry(&tname).unwrap();
            for f in &table.match_fields {
                let v = if f.id == wide.id { i as u64 } else { 0 };
                b = b.exact(&f.name, v).unwrap();
            }
            b.action(&aname, &params).unwrap().build()
        })
        .collect();
    Some((tname, entries))
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let info =
            P4Info::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/test.p4info.txt"))
                .unwrap();
        let lpm = entries(&info);
        let switch = Switch::new(SwitchOptions::default());
        let (addr, _task) =
            switch.bind("127.0.0.1:0".parse().unwrap(), std::future::pending()).await.unwrap();
        let session = Session::connect(SessionConfig::new(format!("http://{addr}"), 1)).await.unwrap();
        session.wait_primary().await.unwrap();
        session.set_pipeline(&info, &Bmv2Json(vec![]), None).await.unwrap();
        run(&session, &lpm, "LPM", "in-process TCP (target >= 100000)").await;
        let (table, exact) = exact_entries(&info, 1_000_000).unwrap();
        run(&session, &exact, &format!("exact {table}"), "in-process TCP").await;
        drop(session);
        let memory = Switch::new(SwitchOptions::default());
        let session = Session::connect_with(SessionConfig::new("in-memory", 1), memory.in_memory_channel())
            .await
            .unwrap();
        session.wait_primary().await.unwrap();
        session.set_pipeline(&info, &Bmv2Json(vec![]), None).await.unwrap();
        run(&session, &lpm, "LPM", "in-process in-memory").await;
        match bmv2() {
            Err(missing) => println!("p4rt inserts/bmv2: skipped: {missing}"),
            Ok((bin, info_path, json)) => bench_bmv2(&bin, &info_path, &json).await,
        }
    });
}

/// Stops BMv2 however the bench leaves.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[path = "../../../tests/support/ports.rs"]
mod ports;
use ports::free_port;

async fn bench_bmv2(bin: &Path, info_path: &Path, json: &Path) {
    let port = free_port();
    let _child = Kill(
        std::process::Command::new(bin)
            .args(["--no-p4", "--device-id", "1", "--thrift-port", &free_port().to_string(), "--"])
            .arg("--grpc-server-addr")
            .arg(format!("127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let info = P4Info::load(info_path).unwrap();
    let mut cfg = SessionConfig::new(format!("http://127.0.0.1:{port}"), 1);
    cfg.connect_attempts = 40;
    cfg.backoff_max = Duration::from_millis(250);
    let session = Session::connect(cfg).await.unwrap();
    session.wait_primary().await.unwrap();
    session.set_pipeline(&info, &Bmv2Json(std::fs::read(json).unwrap()), None).await.unwrap();
    let Some((table, list)) = exact_entries(&info, 10_000) else {
        println!("p4rt inserts/bmv2: skipped: the program has no exact-match table with a direct action");
        return;
    };
    let ours = run(&session, &list, &format!("exact {table}"), "bmv2").await;
    drop(session);
    match p4runtime_shell() {
        Err(missing) => println!("p4rt inserts/p4runtime-shell: skipped: {missing}"),
        Ok(python) => {
            let theirs = shell_rate(&python, port, &list, &info);
            println!(
                "p4rt inserts/p4runtime-shell: the same {} entries one by one: {theirs:.0} entries/s; p4rt batched is {:.1}x that",
                list.len(),
                ours / theirs
            );
        }
    }
}

/// simple_switch_grpc and a compiled program, or what is missing.
fn bmv2() -> Result<(PathBuf, PathBuf, PathBuf), String> {
    let grpc =
        std::env::var("SIMPLE_SWITCH_GRPC").unwrap_or_else(|_| "/opt/p4/bin/simple_switch_grpc".into());
    if !Path::new(&grpc).exists() {
        return Err(format!("{grpc} not found (set SIMPLE_SWITCH_GRPC)"));
    }
    if let (Ok(i), Ok(j)) = (std::env::var("METAROCE_P4INFO"), std::env::var("METAROCE_BMV2_JSON")) {
        return Ok((grpc.into(), i.into(), j.into()));
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build");
    let files: Vec<PathBuf> =
        std::fs::read_dir(&dir).map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect()).unwrap_or_default();
    // p4src/compile.sh writes main.p4info.txtpb; BMv2's own testdata uses .txt.
    let info = files.iter().find(|f| {
        let name = f.to_string_lossy();
        name.ends_with(".p4info.txtpb") || name.ends_with(".p4info.txt")
    });
    let json = files.iter().find(|f| f.extension().is_some_and(|e| e == "json"));
    if let (Some(i), Some(j)) = (info, json) {
        return Ok((grpc.into(), i.clone(), j.clone()));
    }
    // Else the counter program BMv2 ships for its own P4Runtime tests.
    let testdata =
        PathBuf::from(std::env::var("METAROCE_BMV2_TESTDATA").unwrap_or_else(|_| {
            "/opt/p4-src/behavioral-model/targets/simple_switch_grpc/tests/testdata".into()
        }));
    let (i, j) = (testdata.join("counter.proto.txt"), testdata.join("counter.json"));
    if i.exists() && j.exists() {
        return Ok((grpc.into(), i, j));
    }
    Err("no compiled program in p4src/build/ nor BMv2's testdata (set METAROCE_P4INFO and METAROCE_BMV2_JSON)".into())
}

/// A Python with `p4runtime_sh`: `$METAROCE_P4RUNTIME_SH_PYTHON`, else
/// the p4rt venv's if it has the package.
fn p4runtime_shell() -> Result<PathBuf, String> {
    let python = std::env::var("METAROCE_P4RUNTIME_SH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/p4rt-venv/bin/python"));
    let ok = std::process::Command::new(&python)
        .args(["-c", "import p4runtime_sh.shell"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(python)
    } else {
        Err(format!(
            "PyPI package p4runtime-shell not importable by {} (set METAROCE_P4RUNTIME_SH_PYTHON)",
            python.display()
        ))
    }
}

/// Our own driver script for p4runtime-shell: the same entries, inserted
/// the way its users do, one `TableEntry.insert()` each.
const SHELL_SCRIPT: &str = r#"
import json, sys, time
import p4runtime_sh.shell as sh
spec = json.loads(sys.argv[1])
sh.setup(device_id=1, grpc_addr=spec["addr"], election_id=(0, 2))
entries = []
for e in spec["entries"]:
    te = sh.TableEntry(spec["table"])(action=spec["action"])
    for name, value in e.items():
        te.match[name] = str(value)
    for name in spec["params"]:
        te.action[name] = "0"
    entries.append(te)
start = time.perf_counter()
for te in entries:
    te.insert()
print(len(entries) / (time.perf_counter() - start))
sh.teardown()
"#;

/// Entries per second p4runtime-shell reaches inserting `list`.
fn shell_rate(python: &Path, port: u16, list: &[p4::TableEntry], info: &P4Info) -> f64 {
    use metaroce_p4rt::proto::p4::v1::field_match::FieldMatchType;
    let table = info.tables.by_id(list[0].table_id).unwrap();
    let Some(p4::table_action::Type::Action(a)) = list[0].action.as_ref().and_then(|a| a.r#type.clone())
    else {
        panic!("bench entries have direct actions")
    };
    let action = info.actions.by_id(a.action_id).unwrap();
    let quote = |s: &str| format!("\"{s}\"");
    let entries: Vec<String> = list
        .iter()
        .map(|e| {
            let fields: Vec<String> = e
                .r#match
                .iter()
                .map(|m| {
                    let f = metaroce_p4rt::p4info::match_field_by_id(table, m.field_id).unwrap();
                    let Some(FieldMatchType::Exact(x)) = &m.field_match_type else { panic!("exact only") };
                    let v = metaroce_p4rt::codec::decode_u128(&x.value, f.bitwidth).unwrap();
                    format!("{}: {v}", quote(&f.name))
                })
                .collect();
            format!("{{{}}}", fields.join(", "))
        })
        .collect();
    let params: Vec<String> = action.params.iter().map(|p| quote(&p.name)).collect();
    let spec = format!(
        "{{\"addr\": \"127.0.0.1:{port}\", \"table\": {}, \"action\": {}, \"params\": [{}], \"entries\": [{}]}}",
        quote(&table.preamble.as_ref().unwrap().name),
        quote(&action.preamble.as_ref().unwrap().name),
        params.join(", "),
        entries.join(", ")
    );
    let out = std::process::Command::new(python).args(["-c", SHELL_SCRIPT, &spec]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .lines()
        .last()
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("p4runtime-shell run failed: {}", String::from_utf8_lossy(&out.stderr)))
}
