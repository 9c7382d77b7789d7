//! L2: a controller changes nothing on a switch that has not shown it
//! belongs to this fabric (issue 32 item 5). spine1 runs our program under
//! another fabric's cookie, as a switch of a second fabric on the address
//! this one names would: the controller refuses it (a `switch_foreign`
//! event, `metaroce_switch_foreign` 1, `foreign` in the status) and writes
//! nothing to it, while the rest of the fabric is programmed. With
//! `--adopt` it takes the switch over: pushes its own cookie and programs it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::rig::{start_on, Running, VIEW};
use common::{http, http_text, installed, pipeline, wait_for};
use metaroce_controller::agent::identity;
use metaroce_controller::mode::Mode;
use metaroce_p4rt::server::Switch;
use metaroce_p4rt::session::Bmv2Json;
use metaroce_p4rt::{Session, SessionConfig};
use serde_json::Value;

/// The rig's fabric name (`common::rig::topology`).
const FABRIC: &str = "jobs-2x2";
const SPINE1: usize = 2;

fn program() -> u64 {
    pipeline().program_cookie()
}

/// The four switches, spine1 running our program as `fabric`'s `switch`.
async fn fabric_with_spine1_of(
    fabric: &str,
    switch: &str,
) -> (Vec<Switch>, Vec<SocketAddr>, tokio::sync::watch::Sender<bool>) {
    let f = common::fabric().await;
    let p = pipeline();
    let s = Session::connect(SessionConfig::new(format!("http://{}", f.1[SPINE1]), 3)).await.unwrap();
    s.wait_primary().await.unwrap();
    let cookie = identity::cookie(program(), fabric, switch);
    s.set_pipeline(p.info(), &Bmv2Json(p.device_config().to_vec()), Some(cookie)).await.unwrap();
    drop(s);
    f
}

async fn cookie_of(addr: SocketAddr, device_id: u64) -> Option<u64> {
    let mut cfg = SessionConfig::new(format!("http://{addr}"), device_id);
    cfg.election_id = 2;
    // A reader beside the controller's own session: retry a connect the
    // loaded machine refuses once.
    cfg.connect_attempts = 20;
    Session::connect(cfg).await.unwrap().installed_cookie().await.unwrap()
}

async fn spine1_status(r: &Running) -> Value {
    let (_, st) = http(r.listen, "GET", "/api/v1/status", VIEW, "").await;
    st["switches"][SPINE1].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_of_another_fabric_is_refused_and_left_untouched() {
    let r =
        start_on(fabric_with_spine1_of("other-fabric", "spine1").await, Mode::Act, "foreign", |_| {}).await;
    wait_for("spine1 refused as foreign", 10, || async { spine1_status(&r).await["foreign"] == true }).await;
    let st = spine1_status(&r).await;
    assert_eq!((st["connected"].clone(), st["programmed"].clone()), (Value::Bool(false), Value::Bool(false)));
    let err = st["last_error"].as_str().unwrap_or_default().to_string();
    assert!(
        err.starts_with("identity:") && err.contains("another fabric") && err.contains("--adopt"),
        "{err}"
    );

    let (_, ev) = http(r.listen, "GET", "/api/v1/events?limit=4096", VIEW, "").await;
    let foreign: Vec<&Value> =
        ev["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "switch_foreign").collect();
    assert_eq!(foreign.len(), 1, "said once however many retries: {foreign:?}");
    assert_eq!(foreign[0]["switch"], "spine1");
    let metrics = http_text(r.listen, "GET", "/metrics", Some(VIEW), "").await;
    assert!(metrics.contains("metaroce_switch_foreign{switch=\"spine1\"} 1"), "{metrics}");
    assert!(metrics.contains("metaroce_switch_foreign{switch=\"spine2\"} 0"), "{metrics}");

    // The rest of the fabric is programmed; spine1 got nothing: no push,
    // no write, its cookie still the other fabric's.
    let p = pipeline();
    wait_for("spine2 programmed", 10, || async { !installed(r.addrs[3], 4, &p).await.is_empty() }).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!((r.switches[SPINE1].pipeline_pushes(), r.switches[SPINE1].writes()), (1, 0));
    assert!(installed(r.addrs[SPINE1], 3, &p).await.is_empty());
    assert_eq!(
        cookie_of(r.addrs[SPINE1], 3).await,
        Some(identity::cookie(program(), "other-fabric", "spine1"))
    );
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adopt_takes_a_foreign_switch_over() {
    // Another switch's cookie in this very fabric (spine1 wired where
    // spine2 was meant): refused the same way unless adopted.
    let f = fabric_with_spine1_of(FABRIC, "spine2").await;
    let r = start_on(f, Mode::Act, "adopt", |cfg| cfg.adopt = true).await;
    let p = pipeline();
    wait_for("spine1 programmed", 10, || async { !installed(r.addrs[SPINE1], 3, &p).await.is_empty() }).await;
    let st = spine1_status(&r).await;
    assert_eq!(st["foreign"], false, "{st}");
    assert_eq!(cookie_of(r.addrs[SPINE1], 3).await, Some(identity::cookie(program(), FABRIC, "spine1")));
    assert_eq!(r.switches[SPINE1].pipeline_pushes(), 2, "pushed again with this fabric's cookie");
    r.stop().await;
}
