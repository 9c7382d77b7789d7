//! L2: jobs against the size of the switches' tables (issue 32 item 1).
//! A job larger than a steer table is refused with 400 naming the switch,
//! the table, the need and the room, and nothing of it is written: every
//! switch stays programmed and no session drops. Entries a switch refuses
//! anyway (its table smaller than the P4Info says) are that entry's error:
//! the rest is written, the session stays up and the refused entries are
//! retried with backoff, not on every pass.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::rig::{start_on, start_with, Running, SCHED, VIEW};
use common::{http, installed, pipeline, wait_for};
use metaroce_controller::agent::identity;
use metaroce_controller::mode::Mode;
use metaroce_p4rt::session::Bmv2Json;
use metaroce_p4rt::{P4Info, Session, SessionConfig};
use metaroce_pipeline::{Entry, Key};
use serde_json::Value;

/// A job of `n` flows from h3 (leaf2) to h2 (leaf1), each with its own
/// source port and queue pair.
fn job(name: &str, n: u32) -> String {
    let flows: Vec<Value> = (0..n)
        .map(|i| serde_json::json!({"src": "h3", "dst": "h2", "sport": 1024 + i, "qp": i + 1, "bytes": 1_048_576}))
        .collect();
    serde_json::json!({"name": name, "flows": flows}).to_string()
}

fn steer_flows(st: &BTreeMap<Key, Entry>) -> usize {
    st.keys().filter(|k| matches!(k, Key::SteerFlow(_))).count()
}

async fn events(r: &Running, kind: &str) -> Vec<Value> {
    let (_, ev) = http(r.listen, "GET", "/api/v1/events?limit=4096", VIEW, "").await;
    ev["events"].as_array().unwrap().iter().filter(|e| e["kind"] == kind).cloned().collect()
}

/// Every switch connected, primary and programmed, with no error.
async fn all_programmed(r: &Running) -> Result<(), Value> {
    let (_, st) = http(r.listen, "GET", "/api/v1/status", VIEW, "").await;
    let ok = st["switches"].as_array().is_some_and(|v| {
        v.len() == 4
            && v.iter().all(|s| {
                s["connected"] == true
                    && s["primary"] == true
                    && s["programmed"] == true
                    && s["last_error"].is_null()
            })
    });
    if ok {
        Ok(())
    } else {
        Err(st)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_larger_than_the_tables_is_refused_and_every_switch_stays_programmed() {
    let r = start_with(Mode::Act, "capacity", |c| c.core.place.limits.max_flows = 10_000).await;
    wait_for("every switch programmed", 15, || async { all_programmed(&r).await.is_ok() }).await;
    let p = pipeline();

    // 5,000 flows, each its own steer_flow entry on leaf2 (4,096 entries).
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, &job("big", 5000)).await;
    assert_eq!(status, 400, "{v}");
    let c = &v["capacity"][0];
    assert_eq!(c["switch"], "leaf2", "{v}");
    assert!(c["table"].as_str().unwrap().ends_with("steer_flow"), "{v}");
    assert_eq!(
        (c["need"].as_u64(), c["room"].as_u64(), c["size"].as_u64()),
        (Some(5000), Some(4096), Some(4096))
    );
    let error = v["error"].as_str().unwrap();
    assert!(error.contains("leaf2 needs 5000 entries") && error.contains("room for 4096"), "{v}");
    let (_, jobs) = http(r.listen, "GET", "/api/v1/jobs", VIEW, "").await;
    assert_eq!(jobs["jobs"], serde_json::json!([]), "nothing of it registered");

    // One that fits is placed and written in full; then the room left is
    // what the next job is measured against.
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, &job("fits", 4000)).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["placement"]["applied"], true, "{v}");
    wait_for("4,000 steer entries on leaf2", 30, || async {
        steer_flows(&installed(r.addrs[1], 2, &p).await) == 4000
    })
    .await;
    let more = job("more", 200).replace("\"sport\":1", "\"sport\":3");
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, &more).await;
    assert_eq!(status, 400, "{v}");
    let c = &v["capacity"][0];
    assert_eq!(
        (c["need"].as_u64(), c["room"].as_u64(), c["in_use"].as_u64()),
        (Some(200), Some(96), Some(4000)),
        "{v}"
    );

    // Nothing was refused by a switch, no session dropped, all programmed.
    wait_for("every switch programmed", 15, || async { all_programmed(&r).await.is_ok() }).await;
    assert!(events(&r, "switch_down").await.is_empty(), "{:?}", events(&r, "switch_down").await);
    assert!(events(&r, "entries_refused").await.is_empty());
    assert!(events(&r, "write_failed").await.is_empty());
    let refused = events(&r, "job_refused").await;
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(refused[0]["details"]["capacity"][0]["need"], 5000);
    assert_eq!(steer_flows(&installed(r.addrs[1], 2, &p).await), 4000);
    r.stop().await;
}

/// leaf2 runs the program with a steer_flow table of 8 entries under the
/// cookie of the real one, so the controller (which admits by the P4Info
/// it pushes, 4,096) sends more than the switch takes.
async fn fabric_with_a_small_leaf2(
) -> (Vec<metaroce_p4rt::server::Switch>, Vec<std::net::SocketAddr>, tokio::sync::watch::Sender<bool>) {
    let f = common::fabric().await;
    let p = pipeline();
    let mut raw = p.info().raw().clone();
    let t = raw
        .tables
        .iter_mut()
        .find(|t| t.preamble.as_ref().is_some_and(|p| p.name.ends_with("steer_flow")))
        .unwrap();
    t.size = 8;
    let small = P4Info::new(raw).unwrap();
    let cookie = identity::cookie(p.program_cookie(), "jobs-2x2", "leaf2");
    let s = Session::connect(SessionConfig::new(format!("http://{}", f.1[1]), 2)).await.unwrap();
    s.wait_primary().await.unwrap();
    s.set_pipeline(&small, &Bmv2Json(p.device_config().to_vec()), Some(cookie)).await.unwrap();
    drop(s);
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_a_switch_refuses_are_held_back_and_its_session_stays_up() {
    let r = start_on(fabric_with_a_small_leaf2().await, Mode::Act, "refused", |c| {
        c.core.place.limits.max_flows = 2000;
    })
    .await;
    wait_for("every switch programmed", 15, || async { all_programmed(&r).await.is_ok() }).await;
    let p = pipeline();
    // 1,500 flows: the switch takes 8 and refuses 1,492, which it answers
    // with a per-update error each (over 100 kB of trailer: before the
    // session took large trailers, this dropped the connection on every
    // pass). The status says so, and the switch stays connected, primary
    // and programmed.
    let (status, v) = http(r.listen, "POST", "/api/v1/jobs", SCHED, &job("j1500", 1500)).await;
    assert_eq!(status, 201, "{v}");
    let leaf2 = || async {
        let (_, st) = http(r.listen, "GET", "/api/v1/status", VIEW, "").await;
        st["switches"][1].clone()
    };
    wait_for("1,492 refused entries in the status", 15, || async {
        leaf2().await["refused_entries"] == 1492
    })
    .await;
    let s = leaf2().await;
    assert_eq!(
        (s["connected"].clone(), s["primary"].clone(), s["programmed"].clone()),
        (true.into(), true.into(), true.into()),
        "{s}"
    );
    let error = s["last_error"].as_str().unwrap();
    assert!(
        error.starts_with("write refused: 1492 entries held back") && error.contains("ResourceExhausted"),
        "{s}"
    );
    assert_eq!(steer_flows(&installed(r.addrs[1], 2, &p).await), 8);
    // Retried with backoff, not on every pass: over two seconds a handful
    // of retries at most (100 ms, doubling), no session dropped.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let refusals = events(&r, "entries_refused").await;
    assert!((1..=6).contains(&refusals.len()), "{} entries_refused events: {refusals:?}", refusals.len());
    assert!(refusals.iter().all(|e| e["switch"] == "leaf2"));
    assert!(events(&r, "switch_down").await.is_empty());
    let (_, metrics) = common::http_text(r.listen, "GET", "/metrics", Some(VIEW), "")
        .await
        .split_once("\r\n\r\n")
        .map(|(_, b)| (0, b.to_string()))
        .unwrap();
    assert!(metrics.contains("metaroce_switch_refused_entries{switch=\"leaf2\"} 1492"), "{metrics}");
    assert!(metrics.contains("metaroce_switch_session_failures_total{switch=\"leaf2\"} 0"), "{metrics}");
    // The job goes: its desired state changes, the refusals with it.
    let (status, _) = http(r.listen, "DELETE", "/api/v1/jobs/j1500", SCHED, "").await;
    assert_eq!(status, 200);
    wait_for("leaf2 clean and programmed", 15, || async { all_programmed(&r).await.is_ok() }).await;
    assert_eq!(leaf2().await["refused_entries"], 0);
    assert_eq!(steer_flows(&installed(r.addrs[1], 2, &p).await), 0);
    r.stop().await;
}

/// spine2 is not there when the controller starts: one outage, however
/// many attempts, named by what failed (connect), and the switch shown
/// down and not primary; when it comes up, one `switch_up` with the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_switch_is_one_outage_named_by_what_failed() {
    let (switches, mut addrs, stop) = common::fabric().await;
    let dead = common::free_addr();
    addrs[3] = dead;
    // The outage must not last long enough for the core to route around
    // spine2 (3 s by default), which adds a second `switch_up` when it
    // returns: on a loaded machine the three attempts alone can take that.
    let long = |c: &mut metaroce_controller::daemon::Config| c.core.switch_down_after_ns = 120_000_000_000;
    let r = start_on((switches, addrs, stop), Mode::Act, "outage", long).await;
    let spine2 = || async {
        let (_, st) = http(r.listen, "GET", "/api/v1/status", VIEW, "").await;
        st["switches"][3].clone()
    };
    wait_for("three failed attempts on spine2", 15, || async {
        spine2().await["failed_attempts"].as_u64().is_some_and(|n| n >= 3)
    })
    .await;
    let s = spine2().await;
    assert_eq!((s["connected"].clone(), s["primary"].clone()), (false.into(), false.into()), "{s}");
    assert!(s["last_error"].as_str().unwrap().starts_with("connect: "), "{s}");
    let down = events(&r, "switch_down").await;
    assert_eq!(down.len(), 1, "one outage, one event: {down:?}");
    assert_eq!(
        (down[0]["switch"].clone(), down[0]["details"]["failure"].clone()),
        ("spine2".into(), "connect".into())
    );
    // It comes up: back with the count, the outage closed.
    let sw = metaroce_p4rt::server::Switch::new(metaroce_p4rt::server::SwitchOptions {
        device_id: 4,
        ..Default::default()
    });
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    sw.bind(dead, async move {
        let _ = rx.await;
    })
    .await
    .unwrap();
    wait_for("every switch programmed", 20, || async { all_programmed(&r).await.is_ok() }).await;
    let up: Vec<Value> =
        events(&r, "switch_up").await.into_iter().filter(|e| e["switch"] == "spine2").collect();
    assert_eq!(up.len(), 1, "{up:?}");
    assert!(up[0]["details"]["attempts"].as_u64().is_some_and(|n| n >= 3), "{up:?}");
    assert_eq!(events(&r, "switch_down").await.len(), 1);
    assert_eq!(spine2().await["failed_attempts"], 0);
    r.stop().await;
    let _ = tx.send(());
}
