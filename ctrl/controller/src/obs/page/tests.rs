//! The page's routes in-process: assets, who may read, the layout, the
//! stream, and the hub's bounds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use axum::body::Body;
use axum::http::Request;
use tokio::sync::{mpsc, watch};
use tower::ServiceExt;

use super::frame::tests::two_by_two;
use super::*;
use crate::obs::{EventLog, Metrics, Snapshot, Tokens};

const VIEW: &str = "viewer-secret-0123456789";
const OPER: &str = "operator-secret-0123456789";

struct Fixture {
    state: ApiState,
    snap_tx: watch::Sender<Arc<Snapshot>>,
}

fn fixture(with_tokens: bool) -> Fixture {
    let tokens = with_tokens.then(|| {
        Arc::new(Tokens::parse(Path::new("tokens"), &format!("viewer {VIEW}\noperator {OPER}\n")).unwrap())
    });
    let (snap_tx, snap_rx) = watch::channel(Arc::new(Snapshot::default()));
    let (cmd_tx, _cmd_rx) = mpsc::channel(1);
    let state =
        ApiState::new(Metrics::new(), EventLog::new(64), tokens, snap_rx, cmd_tx).with_fabric(two_by_two());
    Fixture { state, snap_tx }
}

async fn get(state: &ApiState, path: &str, token: Option<&str>) -> Response {
    let mut req = Request::get(path);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    crate::obs::router(state.clone()).oneshot(req.body(Body::empty()).unwrap()).await.unwrap()
}

async fn json_of(resp: Response) -> Value {
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn page_assets_are_served_to_anyone_with_a_strict_policy() {
    let fx = fixture(true);
    for (path, kind, needle) in [
        ("/", "text/html", "id=\"login\""),
        ("/page.js", "text/javascript", "Authorization"),
        ("/draw.js", "text/javascript", "viewBox"),
        ("/page.css", "text/css", "#legend"),
    ] {
        let resp = get(&fx.state, path, None).await;
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        let h = resp.headers();
        assert!(h[CONTENT_TYPE].to_str().unwrap().starts_with(kind), "{path}");
        assert!(h["content-security-policy"].to_str().unwrap().contains("script-src 'self'"));
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
        assert!(String::from_utf8_lossy(&body).contains(needle), "{path}");
    }
    // Nothing is fetched from elsewhere.
    for asset in [INDEX, SCRIPT, DRAW, STYLE] {
        assert!(!asset.contains("https://") && !asset.contains("//cdn"), "no outside URLs");
    }
    assert!(INDEX.len() + SCRIPT.len() + DRAW.len() + STYLE.len() < 64 << 10, "the page stays small");
}

#[tokio::test]
async fn page_whoami_tells_the_role_and_refuses_bad_tokens_as_json() {
    let fx = fixture(true);
    for token in [None, Some("not-a-known-token-at-all")] {
        let resp = get(&fx.state, "/api/v1/whoami", token).await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        assert!(json_of(resp).await["error"].is_string());
    }
    let me = json_of(get(&fx.state, "/api/v1/whoami", Some(VIEW)).await).await;
    assert_eq!(me, json!({ "role": "viewer", "read_only": false, "may_operate": false }));
    let me = json_of(get(&fx.state, "/api/v1/whoami", Some(OPER)).await).await;
    assert_eq!(me["may_operate"], true);
    let open = fixture(false);
    let me = json_of(get(&open.state, "/api/v1/whoami", None).await).await;
    assert_eq!(me, json!({ "role": null, "read_only": true, "may_operate": false }));
}

#[tokio::test]
async fn page_layout_places_every_switch_link_and_host() {
    let fx = fixture(true);
    assert_eq!(get(&fx.state, "/api/v1/layout", None).await.status(), StatusCode::UNAUTHORIZED);
    let l = json_of(get(&fx.state, "/api/v1/layout", Some(VIEW)).await).await;
    assert_eq!(l["switches"].as_array().unwrap().len(), 4);
    assert_eq!(l["links"].as_array().unwrap().len(), 4);
    assert_eq!(l["hosts"].as_array().unwrap().len(), 4);
    assert!(l["overview"].is_null());
    let spine = l["switches"].as_array().unwrap().iter().find(|s| s["role"] == "spine").unwrap();
    let leaf = l["switches"].as_array().unwrap().iter().find(|s| s["role"] == "leaf").unwrap();
    assert!(spine["y"].as_f64() < leaf["y"].as_f64(), "spines above leaves, as topo render draws them");
    let big = metaroce_topo::gen::leaf_spine(
        &metaroce_topo::gen::Common::new("big", metaroce_topo::units::Bandwidth::gbps(400)),
        64,
        16,
        8,
        1,
    )
    .unwrap();
    let l = layout::build(&big);
    assert_eq!(l["overview"]["boxes"].as_array().unwrap().len(), 32, "16 spines and 16 blocks of leaves");
}

#[tokio::test]
async fn page_stream_needs_a_token_and_sends_frames() {
    let fx = fixture(true);
    assert_eq!(get(&fx.state, "/api/v1/stream", None).await.status(), StatusCode::UNAUTHORIZED);
    fx.state.events.record("reroute", Some("leaf1"), "congestion", json!({}));
    let resp = get(&fx.state, "/api/v1/stream", Some(VIEW)).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(resp.headers()[CONTENT_TYPE].to_str().unwrap().starts_with("text/event-stream"));
    let mut body = resp.into_body().into_data_stream();
    let chunk = tokio::time::timeout(Duration::from_secs(5), body.next()).await.unwrap().unwrap().unwrap();
    let text = String::from_utf8_lossy(&chunk);
    assert!(text.starts_with("event: frame\ndata: {"), "{text}");
    let frame: Value =
        serde_json::from_str(text.lines().nth(1).unwrap().trim_start_matches("data: ")).unwrap();
    assert_eq!(frame["events"][0]["kind"], "reroute");
    drop(fx.snap_tx);
}

use std::time::Duration;

fn sources(fx: &Fixture) -> hub::Sources {
    hub::Sources {
        fabric: Arc::new(Fabric::new(two_by_two())),
        snapshot: fx.state.snapshot.clone(),
        events: fx.state.events.clone(),
    }
}

/// A client that never reads is dropped when its queue is full; one that
/// reads keeps its stream, and the writer of events never waits.
#[tokio::test]
async fn page_stream_drops_a_client_that_never_reads() {
    let fx = fixture(true);
    let tick = Duration::from_millis(10);
    let (hub, src) = (Hub::with_tick(tick), sources(&fx));
    let mut stuck = hub.subscribe(&src).unwrap();
    let mut reader = hub.subscribe(&src).unwrap();
    let mut read = 0;
    for i in 0..200 {
        fx.state.events.record("reroute", None, "congestion", json!({ "i": i }));
        fx.snap_tx.send_replace(Arc::new(Snapshot::default()));
        tokio::time::sleep(tick * 3).await;
        while reader.try_recv().is_ok() {
            read += 1;
        }
        if hub.clients() == 1 {
            break;
        }
    }
    assert_eq!(hub.clients(), 1, "the stuck client was dropped");
    let mut queued = 0;
    while stuck.try_recv().is_ok() {
        queued += 1;
    }
    assert_eq!(queued, CLIENT_FRAMES, "it held one full queue, no more");
    assert!(matches!(stuck.try_recv(), Err(mpsc::error::TryRecvError::Disconnected)));
    assert!(read > CLIENT_FRAMES, "the reading client kept getting frames ({read})");
    // Nobody left: the hub stops.
    drop(reader);
    tokio::time::sleep(tick * 5).await;
    assert_eq!(hub.clients(), 0);
}

#[tokio::test]
async fn page_stream_clients_are_bounded() {
    let fx = fixture(true);
    let (hub, src) = (Hub::default(), sources(&fx));
    let mut open: Vec<_> = (0..MAX_CLIENTS).map(|_| hub.subscribe(&src).unwrap()).collect();
    assert_eq!(hub.subscribe(&src).err(), Some(hub::TooManyClients));
    open.pop();
    assert!(hub.subscribe(&src).is_ok(), "a closed stream frees its place");
}
