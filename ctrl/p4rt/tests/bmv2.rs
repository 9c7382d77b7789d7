//! L3: the driver against BMv2's P4Runtime server (`simple_switch_grpc`).
//! Skips, saying what is missing, where BMv2 or a program is absent.
//!
//! The first test is program-independent (pipeline push with cookie,
//! wildcard reads, registers through the Thrift fallback) and runs the
//! compiled metaroce program. The others use the small programs BMv2 ships
//! for its own P4Runtime tests (`$METAROCE_BMV2_TESTDATA`, by default its
//! `targets/simple_switch_grpc/tests/testdata` under /opt/p4-src), read at
//! test time and not copied here.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::session::{Bmv2Json, PipelineOutcome};
use metaroce_p4rt::thrift::ThriftConfig;
use metaroce_p4rt::{P4Info, Session, SessionConfig};

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn binary() -> Option<PathBuf> {
    let p = PathBuf::from(
        std::env::var("SIMPLE_SWITCH_GRPC").unwrap_or_else(|_| "/opt/p4/bin/simple_switch_grpc".into()),
    );
    p.exists().then_some(p)
}

/// `(p4info, bmv2 json)` from `$METAROCE_P4INFO`/`$METAROCE_BMV2_JSON`
/// or the first pair in `p4src/build/`.
fn program() -> Option<(PathBuf, PathBuf)> {
    if let (Ok(i), Ok(j)) = (std::env::var("METAROCE_P4INFO"), std::env::var("METAROCE_BMV2_JSON")) {
        return Some((i.into(), j.into()));
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build");
    if dir.join("PENDING").is_file() {
        // Not p4c's output of p4src/ yet (see p4src/build/PENDING).
        return None;
    }
    let files: Vec<PathBuf> = std::fs::read_dir(&dir).ok()?.filter_map(|e| Some(e.ok()?.path())).collect();
    let info = files
        .iter()
        .find(|f| [".p4info.txtpb", ".p4info.txt"].iter().any(|ext| f.to_string_lossy().ends_with(ext)))?
        .clone();
    let json = files
        .iter()
        .find(|f| f.extension().is_some_and(|e| e == "json") && !f.to_string_lossy().contains("p4info"))?
        .clone();
    Some((info, json))
}

/// BMv2's stderr goes here, to explain a start-up failure.
fn log_path(port: u16) -> PathBuf {
    std::env::temp_dir().join(format!("metaroce-p4rt-bmv2-{port}.log"))
}

fn log_file(port: u16) -> Stdio {
    std::fs::File::create(log_path(port)).map(Stdio::from).unwrap_or_else(|_| Stdio::null())
}

fn read_log(port: u16) -> String {
    std::fs::read_to_string(log_path(port)).unwrap_or_default()
}

#[path = "../../../tests/support/ports.rs"]
mod ports;
use ports::free_port;

#[tokio::test]
async fn bmv2_pipeline_reads_and_register_fallback() {
    let Some(bin) = binary() else {
        println!("skipped: simple_switch_grpc not found (set SIMPLE_SWITCH_GRPC)");
        return;
    };
    let Some((info_path, json_path)) = program() else {
        println!("skipped: no compiled program in p4src/build/ (set METAROCE_P4INFO and METAROCE_BMV2_JSON)");
        return;
    };
    let (grpc, thrift) = (free_port(), free_port());
    let _bmv2 = Kill(
        Command::new(bin)
            .args([
                "--no-p4",
                "--device-id",
                "1",
                "--thrift-port",
                &thrift.to_string(),
                "--",
                "--grpc-server-addr",
            ])
            .arg(format!("127.0.0.1:{grpc}"))
            .stdout(Stdio::null())
            .stderr(log_file(grpc))
            .spawn()
            .unwrap(),
    );
    let info = P4Info::load(&info_path).unwrap();
    let json = std::fs::read(&json_path).unwrap();
    let mut cfg = SessionConfig::new(format!("http://127.0.0.1:{grpc}"), 1);
    cfg.connect_attempts = 40;
    cfg.backoff_max = Duration::from_millis(250);
    let s = Session::connect(cfg)
        .await
        .unwrap_or_else(|e| panic!("BMv2 did not come up: {e}; its stderr: {}", read_log(grpc)))
        .with_thrift(ThriftConfig::new(format!("127.0.0.1:{thrift}").parse().unwrap()));
    s.wait_primary().await.unwrap();
    assert_eq!(s.set_pipeline(&info, &Bmv2Json(json.clone()), None).await.unwrap(), PipelineOutcome::Pushed);
    assert_eq!(
        s.set_pipeline(&info, &Bmv2Json(json), None).await.unwrap(),
        PipelineOutcome::AlreadyInstalled
    );
    let entries = s.read(vec![p4::TableEntry::default().into()]).await.unwrap();
    println!("bmv2: {} table entries after push", entries.len());
    let first = info.registers.iter().next().and_then(|r| r.preamble.as_ref()).map(|p| p.name.clone());
    if let Some(name) = first {
        s.write_register(&info, &name, Some(0), 1).await.unwrap();
        assert_eq!(s.read_register(&info, &name, Some(0)).await.unwrap(), vec![(0, 1)]);
    }
}

const TESTDATA: &str = "/opt/p4-src/behavioral-model/targets/simple_switch_grpc/tests/testdata";

struct Bmv2 {
    _child: Kill,
    s: Session,
    info: P4Info,
    thrift: u16,
}

/// Starts BMv2 with one of its test programs, or says what is missing.
async fn launch(program: &str) -> Result<Bmv2, String> {
    launch_with(program, &[]).await
}

/// Like [`launch`], with extra options for the gRPC target (after `--`).
async fn launch_with(program: &str, target_args: &[&str]) -> Result<Bmv2, String> {
    let bin = binary().ok_or("simple_switch_grpc not found (set SIMPLE_SWITCH_GRPC)")?;
    let dir = PathBuf::from(std::env::var("METAROCE_BMV2_TESTDATA").unwrap_or_else(|_| TESTDATA.into()));
    let (info_path, json_path) =
        (dir.join(format!("{program}.proto.txt")), dir.join(format!("{program}.json")));
    if !info_path.exists() || !json_path.exists() {
        return Err(format!(
            "BMv2 test program {program} not found in {} (set METAROCE_BMV2_TESTDATA)",
            dir.display()
        ));
    }
    let (grpc, thrift) = (free_port(), free_port());
    let child = Kill(
        Command::new(bin)
            .args(["--no-p4", "--device-id", "1", "--thrift-port", &thrift.to_string(), "--"])
            .arg("--grpc-server-addr")
            .arg(format!("127.0.0.1:{grpc}"))
            .args(target_args)
            .stdout(Stdio::null())
            .stderr(log_file(grpc))
            .spawn()
            .unwrap(),
    );
    let info = P4Info::load(&info_path).unwrap();
    let mut cfg = SessionConfig::new(format!("http://127.0.0.1:{grpc}"), 1);
    cfg.connect_attempts = 40;
    cfg.backoff_max = Duration::from_millis(250);
    let s = match Session::connect(cfg).await {
        Ok(s) => s,
        Err(e) => panic!("BMv2 did not come up: {e}; its stderr: {}", read_log(grpc)),
    };
    s.wait_primary().await.unwrap();
    s.set_pipeline(&info, &Bmv2Json(std::fs::read(json_path).unwrap()), None).await.unwrap();
    Ok(Bmv2 { _child: child, s, info, thrift })
}

macro_rules! launch_or_skip {
    ($program:expr) => {
        match launch($program).await {
            Ok(b) => b,
            Err(missing) => {
                println!("skipped: {missing}");
                return;
            }
        }
    };
}

#[tokio::test]
async fn bmv2_ternary_entries_and_per_update_errors() {
    use metaroce_p4rt::entity::{delete, insert};
    use metaroce_p4rt::SessionError;
    let b = launch_or_skip!("ternary");
    let e = |v: u16, m: u16, prio: i32, action: &str| {
        b.info
            .table_entry("ingress.ter")
            .unwrap()
            .ternary("h.hdr.f1", v, m)
            .unwrap()
            .priority(prio)
            .action(action, &[])
            .unwrap()
            .build()
    };
    b.s.write(vec![insert(e(0x0100, 0xff00, 10, "send_1")), insert(e(0x0001, 0x00ff, 20, "send_2"))])
        .await
        .unwrap();
    // PI's per-update errors decode into (index, code, message).
    let err =
        b.s.write(vec![insert(e(0x0200, 0xff00, 10, "send_1")), insert(e(0x0100, 0xff00, 10, "send_2"))])
            .await
            .unwrap_err();
    let SessionError::Write { failure, .. } = err else { panic!("{err}") };
    assert_eq!(failure.failed_indexes(), vec![1], "{failure}");
    assert!(failure.only_already_exists(), "{failure:?}");
    let read = b
        .s
        .read(vec![
            p4::TableEntry { table_id: b.info.tables.id_of("ter").unwrap(), ..Default::default() }.into()
        ])
        .await
        .unwrap();
    assert_eq!(read.len(), 3);
    let SessionError::Write { failure, .. } =
        b.s.write(vec![delete(e(0x0300, 0xff00, 10, "send_1"))]).await.unwrap_err()
    else {
        panic!()
    };
    assert!(failure.only_not_found(), "{failure:?}");
}

#[tokio::test]
async fn bmv2_action_profile_members_groups_and_replication() {
    use metaroce_p4rt::entity::{clone_session, insert, multicast_group};
    let b = launch_or_skip!("action_profile");
    let send = |port: u16| b.info.action_call("send", &[("eg_port", port.into())]).unwrap();
    b.s.write(vec![
        insert(b.info.profile_member("ActProfWS", 1, send(1)).unwrap()),
        insert(b.info.profile_member("ActProfWS", 2, send(2)).unwrap()),
    ])
    .await
    .unwrap();
    b.s.write(vec![insert(b.info.profile_group("ActProfWS", 10, &[(1, 1), (2, 1)], 0).unwrap())])
        .await
        .unwrap();
    let entry = b.info.table_entry("IndirectWS").unwrap().exact("h.hdr.in_", 7u8).unwrap().group(10).build();
    b.s.write(vec![insert(entry)]).await.unwrap();
    let groups = b.s.read(vec![p4::ActionProfileGroup::default().into()]).await.unwrap();
    assert_eq!(groups.len(), 1);
    let members =
        b.s.read(vec![p4::ActionProfileMember {
            action_profile_id: b.info.action_profiles.id_of("ActProfWS").unwrap(),
            ..Default::default()
        }
        .into()])
            .await
            .unwrap();
    assert_eq!(members.len(), 2);
    let pre = |e: p4::Entity| p4::Update { r#type: p4::update::Type::Insert as i32, entity: Some(e) };
    b.s.write(vec![pre(multicast_group(1, &[(1, 1), (2, 1)])), pre(clone_session(5, &[(3, 1)], 0, 0))])
        .await
        .unwrap();
    let groups = b.s.read(vec![multicast_group(1, &[])]).await.unwrap();
    assert_eq!(groups.len(), 1);

    // BMv2's Thrift service: queue depth and rate, and a typed register error.
    use metaroce_p4rt::thrift::{ThriftClient, ThriftError};
    let addr = format!("127.0.0.1:{}", b.thrift).parse().unwrap();
    let mut t = ThriftClient::connect(ThriftConfig::new(addr)).await.unwrap();
    t.set_queue_depth(Some(1), 64).await.unwrap();
    t.set_queue_depth(None, 128).await.unwrap();
    t.set_queue_rate(Some(1), 1000).await.unwrap();
    t.set_queue_rate(None, 5000).await.unwrap();
    let e = t.register_read("no_such_register", 0).await.unwrap_err();
    assert!(matches!(e, ThriftError::Register { code: 1, .. }), "{e}");
}

#[tokio::test]
async fn bmv2_digest_config_and_direct_counters() {
    use metaroce_p4rt::entity::{insert, DigestConfig};
    let b = launch_or_skip!("digest");
    let d = b.info.digest_entry("L2_digest", DigestConfig::default()).unwrap();
    b.s.configure_digest(d).await.unwrap();
    // Configuring again modifies.
    b.s.configure_digest(d).await.unwrap();
    // PI wants the digest id in a read (no wildcard).
    let read = b.s.read(vec![p4::DigestEntry { digest_id: d.digest_id, config: None }.into()]).await.unwrap();
    assert_eq!(read.len(), 1);
    let b = launch_or_skip!("counter");
    let t = b.info.tables.id_of("t_redirect").unwrap();
    let table = b.info.tables.by_id(t).unwrap();
    let action = &b.info.actions.by_id(table.action_refs.iter().find(|r| r.scope == 0).unwrap().id).unwrap();
    let aname = action.preamble.as_ref().unwrap().name.clone();
    let params: Vec<(&str, metaroce_p4rt::Bits)> =
        action.params.iter().map(|p| (p.name.as_str(), 1u8.into())).collect();
    let e = b
        .info
        .table_entry("t_redirect")
        .unwrap()
        .exact("sm.packet_length", 64u32)
        .unwrap()
        .action(&aname, &params)
        .unwrap()
        .build();
    b.s.write(vec![insert(e.clone())]).await.unwrap();
    let c = b.s.read(vec![p4::DirectCounterEntry { table_entry: Some(e), data: None }.into()]).await.unwrap();
    assert_eq!(c.len(), 1);
    // A batch of many entries lands in full (the bench relies on it).
    let many: Vec<p4::Update> = (1000u32..1900)
        .map(|len| {
            let e = b.info.table_entry("t_redirect").unwrap().exact("sm.packet_length", len).unwrap();
            insert(e.action(&aname, &params).unwrap().build())
        })
        .collect();
    let started = std::time::Instant::now();
    b.s.write_batched(many, 300).await.unwrap();
    println!("bmv2: 900 entries written in {:?}", started.elapsed());
    let all = b.s.read(vec![p4::TableEntry { table_id: t, ..Default::default() }.into()]).await.unwrap();
    assert_eq!(all.len(), 901);
}

#[tokio::test]
async fn bmv2_packet_out_comes_back_as_packet_in() {
    // BMv2's packet_io program sends every packet to the CPU port.
    let b = match launch_with("packet_io", &["--cpu-port", "64"]).await {
        Ok(b) => b,
        Err(missing) => {
            println!("skipped: {missing}");
            return;
        }
    };
    let mut ev = b.s.subscribe().unwrap();
    let payload = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00, 0xab, 0xcd];
    b.s.packet_out(payload.clone(), vec![]).unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match ev.recv().await {
                Some(metaroce_p4rt::Event::PacketIn(p)) => return p,
                Some(_) => continue,
                None => panic!("subscription closed"),
            }
        }
    })
    .await
    .expect("packet-in within 5 s");
    assert_eq!(got.payload, payload);
}

async fn wait_for(
    ev: &mut tokio::sync::mpsc::UnboundedReceiver<metaroce_p4rt::Event>,
    secs: u64,
    want: impl Fn(&metaroce_p4rt::Event) -> bool,
) -> metaroce_p4rt::Event {
    tokio::time::timeout(Duration::from_secs(secs), async {
        loop {
            let e = ev.recv().await.expect("subscription open");
            if want(&e) {
                return e;
            }
        }
    })
    .await
    .expect("event in time")
}

#[tokio::test]
async fn bmv2_digests_are_delivered_acked_and_entries_age_out() {
    use metaroce_p4rt::entity::{insert, DigestConfig};
    use metaroce_p4rt::Event;
    // BMv2's digest program digests every unknown source MAC.
    let b = match launch_with("digest", &["--cpu-port", "64"]).await {
        Ok(b) => b,
        Err(missing) => {
            println!("skipped: {missing}");
            return;
        }
    };
    let mut ev = b.s.subscribe().unwrap();
    let cfg = DigestConfig { max_timeout_ns: 0, max_list_size: 1, ack_timeout_ns: 1_000_000_000 };
    b.s.configure_digest(b.info.digest_entry("L2_digest", cfg).unwrap()).await.unwrap();
    let frame = |smac: u8| vec![0x02, 0, 0, 0, 0, 9, 0x02, 0, 0, 0, 0, smac, 0x08, 0x00, 0, 0];
    for smac in [1u8, 2] {
        b.s.packet_out(frame(smac), vec![]).unwrap();
        let Event::Digest(list) = wait_for(&mut ev, 5, |e| matches!(e, Event::Digest(_))).await else {
            unreachable!()
        };
        let Some(p4::p4_data::Data::Struct(s)) = &list.data[0].data else { panic!("{list:?}") };
        let Some(p4::p4_data::Data::Bitstring(mac)) = &s.members[0].data else { panic!("{s:?}") };
        assert_eq!(mac.last(), Some(&smac), "digest carries the source MAC");
    }
    // An entry with an idle timeout is reported once it ages.
    let e = b.info.table_entry("smac").unwrap().exact("h.ethernet.smac", [2, 0, 0, 0, 0, 7]).unwrap();
    let e = e.action("NoAction", &[]).unwrap().idle_timeout_ns(200_000_000).build();
    b.s.write(vec![insert(e)]).await.unwrap();
    let Event::IdleTimeout(n) = wait_for(&mut ev, 15, |e| matches!(e, Event::IdleTimeout(_))).await else {
        unreachable!()
    };
    assert_eq!(n.table_entry.len(), 1);
}
