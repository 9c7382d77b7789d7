//! Serve mode's switches behave like a P4Runtime target to a controller:
//! they refuse a program the twin does not implement (naming why), take
//! ours, and answer bad writes with the error classes BMv2's P4Runtime server
//! (PI) gives.

// Tests may panic on what they set up themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use metaroce_p4rt::proto::p4::v1 as p4;
use metaroce_p4rt::session::Bmv2Json;
use metaroce_p4rt::{P4Info, Session, SessionConfig, SessionError};
use metaroce_pipeline::{Entry, Pipeline};
use metaroce_sim::serve::{Fabric, Options};
use tokio::sync::watch;
use tonic::Code;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[path = "../../../tests/support/ports.rs"]
mod ports;
use ports::free_port;

/// The Mininet-sized fabric on free ports.
fn topology() -> metaroce_topo::Topology {
    let mut text = std::fs::read_to_string(repo().join("topologies/mininet-2x2.yaml")).unwrap();
    for n in 1..=4 {
        text = text.replace(&format!("127.0.0.1:5000{n}"), &format!("127.0.0.1:{}", free_port()));
    }
    metaroce_topo::load_str(&text, "mininet-2x2 on free ports").unwrap()
}

fn pipeline() -> Arc<Pipeline> {
    let dir = repo().join("p4src/build");
    Arc::new(Pipeline::load(&dir.join("main.p4info.txtpb"), &dir.join("main.json")).unwrap())
}

fn code_of(e: &SessionError) -> Option<Code> {
    match e {
        SessionError::Write { failure, .. } => {
            failure.failures.first().map(|f| f.code).or(Some(failure.code))
        }
        SessionError::Rpc { status, .. } => Some(status.code()),
        _ => None,
    }
}

#[tokio::test]
async fn serving_another_program_fails_at_start_naming_the_mismatch() {
    let other = P4Info::load(&repo().join("ctrl/p4rt/tests/data/test.p4info.txt")).unwrap();
    let why = metaroce_sim::serve::check_program(&other).unwrap_err();
    assert!(matches!(why, metaroce_sim::serve::ProgramError::Contract(_)), "{why:?}");
    assert!(why.to_string().contains("MetaroceIngress"), "{why}");
    assert!(metaroce_sim::serve::check_program(pipeline().info()).is_ok());
}

#[tokio::test]
async fn switches_sharing_a_port_are_refused_before_any_listens() {
    let mut text = std::fs::read_to_string(repo().join("topologies/mininet-2x2.yaml")).unwrap();
    let port = free_port();
    for n in 1..=4 {
        text = text.replace(&format!("127.0.0.1:5000{n}"), &format!("sw{n}.lab:{port}"));
    }
    let topo = metaroce_topo::load_str(&text, "hardware-style").unwrap();
    let (_stop, rx) = watch::channel(false);
    let opts = Options { ip: IpAddr::V4(Ipv4Addr::LOCALHOST), dilation: 1.0 };
    let err = Fabric::bind(&topo, pipeline(), &opts, &rx).await.unwrap_err().to_string();
    assert!(err.contains("leaf1 and leaf2 both have P4Runtime port"), "{err}");
}

#[tokio::test]
async fn served_switches_check_programs_and_writes_like_a_target() {
    let topo = topology();
    let p = pipeline();
    let (_stop, rx) = watch::channel(false);
    let opts = Options { ip: IpAddr::V4(Ipv4Addr::LOCALHOST), dilation: 1.0 };
    let fabric = Fabric::bind(&topo, p.clone(), &opts, &rx).await.unwrap();
    assert_eq!(fabric.switches.len(), 4);
    assert_eq!(fabric.unprogrammed().len(), 4, "nothing is programmed before a controller comes");

    let leaf1 = &fabric.switches[0];
    let mut cfg = SessionConfig::new(format!("http://{}", leaf1.addr), leaf1.device_id);
    cfg.rpc_timeout = Duration::from_secs(5);
    let s = Session::connect(cfg).await.unwrap();
    s.wait_primary().await.unwrap();

    // Another program: refused, with what the twin misses named.
    let other = P4Info::load(&repo().join("ctrl/p4rt/tests/data/test.p4info.txt")).unwrap();
    let err = s.set_pipeline(&other, &Bmv2Json(b"{}".to_vec()), None).await.unwrap_err();
    let text = err.to_string();
    assert_eq!(code_of(&err), Some(Code::InvalidArgument), "{text}");
    assert!(text.contains("cannot run the pushed program"), "{text}");
    assert!(text.contains("MetaroceIngress"), "the message names what is missing: {text}");
    assert!(leaf1.switch.p4info().is_none(), "nothing was committed");

    // Another build of ours (same contract, other P4Info): refused, naming the file to push.
    let mut raw = p.info().raw().clone();
    raw.pkg_info.get_or_insert_with(Default::default).name = "main-rebuilt".into();
    let rebuilt = P4Info::new(raw).unwrap();
    let err = s.set_pipeline(&rebuilt, &Bmv2Json(b"{}".to_vec()), None).await.unwrap_err().to_string();
    assert!(err.contains("another build") && err.contains("--p4info"), "{err}");

    // Ours: taken.
    s.set_pipeline(p.info(), &Bmv2Json(p.device_config().to_vec()), None).await.unwrap();
    assert!(leaf1.switch.p4info().is_some());

    let nhop = Entry::Nhop { id: 1, port: 3, src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2] };
    let insert = p.update(p4::update::Type::Insert, &nhop).unwrap();
    s.write(vec![insert.clone()]).await.unwrap();
    let again = s.write(vec![insert.clone()]).await.unwrap_err();
    assert_eq!(code_of(&again), Some(Code::AlreadyExists), "{again}");

    let missing = Entry::Nhop { id: 9, port: 3, src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2] };
    let delete = p.update(p4::update::Type::Delete, &missing).unwrap();
    let gone = s.write(vec![delete]).await.unwrap_err();
    assert_eq!(code_of(&gone), Some(Code::NotFound), "{gone}");

    // A port parameter wider than its 9 bits: OUT_OF_RANGE, as the
    // P4Runtime spec asks of a bytestring that does not fit (BMv2's PI too).
    let mut wide = insert;
    if let Some(p4::entity::Entity::TableEntry(t)) = wide.entity.as_mut().and_then(|e| e.entity.as_mut()) {
        t.r#match[0].field_match_type =
            Some(p4::field_match::FieldMatchType::Exact(p4::field_match::Exact { value: vec![2] }));
        if let Some(p4::table_action::Type::Action(a)) = t.action.as_mut().and_then(|a| a.r#type.as_mut()) {
            a.params[0].value = vec![0xff, 0xff];
        }
    }
    let bad = s.write(vec![wide]).await.unwrap_err();
    assert_eq!(code_of(&bad), Some(Code::OutOfRange), "{bad}");
}
