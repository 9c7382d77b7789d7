//! Drives the router in-process for every route and auth case, and once
//! over a real listener.

use std::path::Path;
use std::sync::Mutex;

use axum::body::Body;
use axum::http::Request;
use serde_json::Value;
use tokio::sync::oneshot;
use tower::ServiceExt;

use super::*;
use crate::obs::metrics::tests::check_openmetrics;
use crate::obs::testutil::capture_logs;
use crate::obs::{CommandError, LazyJson, Refusal};

const VIEW: &str = "viewer-secret-0123456789";
const OPER: &str = "operator-secret-0123456789";
const ADMIN: &str = "admin-secret-0123456789";
const SCHED: &str = "scheduler-secret-0123456789";
const READS: [&str; 9] =
    ["status", "topology", "congestion", "groups", "recommendations", "events", "metrics", "jobs", "flows"];

struct Fixture {
    state: ApiState,
    /// Commands the fake state task received, as text.
    seen: Arc<Mutex<Vec<String>>>,
    _snap_tx: watch::Sender<Arc<Snapshot>>,
}

/// A state whose fake state task answers `answer` to every command.
fn fixture(with_tokens: bool, answer: Result<(), CommandError>) -> Fixture {
    let tokens = with_tokens.then(|| {
        let text = format!("viewer {VIEW}\noperator {OPER}\nadmin {ADMIN}\nscheduler {SCHED}\n");
        Arc::new(Tokens::parse(Path::new("tokens"), &text).unwrap())
    });
    let snapshot = Snapshot {
        status: std::sync::Arc::new(json!({ "mode": "observe" })),
        topology: crate::obs::Document::of(&json!({ "switches": ["leaf1"] })).expect("a literal serializes"),
        congestion: LazyJson::ready(json!({ "leaf1": { "3": 40 } })),
        groups: LazyJson::later(|| json!([{ "switch": "leaf1", "group": 1 }])),
        recommendations: LazyJson::ready(json!([])),
        jobs: LazyJson::ready(json!({ "jobs": [{ "name": "moe-7" }], "flows": 2 })),
        flows: LazyJson::later(|| json!({ "placed": 0, "flows": [] })),
    };
    let (snap_tx, snap_rx) = watch::channel(Arc::new(snapshot));
    let (cmd_tx, mut cmd_rx) = mpsc::channel(4);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Some(cmd) = cmd_rx.recv().await {
            let reply = match cmd {
                Command::SetMode { mode, reply, .. } => {
                    log.lock().unwrap().push(format!("mode {mode}"));
                    reply
                }
                Command::Rollback { snapshot, reply, .. } => {
                    log.lock().unwrap().push(format!("rollback {snapshot}"));
                    reply
                }
                Command::SetLink { link, up, force, reply, .. } => {
                    log.lock().unwrap().push(format!("link {link} up {up} force {force}"));
                    let _ = reply.send(answer.clone().map(|()| json!({ "cut_off": [] })));
                    continue;
                }
                Command::RegisterJob { body, reply, .. } => {
                    log.lock().unwrap().push(format!("job {}", body["name"]));
                    let _ = reply.send(Ok(json!({ "ok": true, "job": { "name": body["name"] } })));
                    continue;
                }
                Command::RemoveJob { name, reply, .. } => {
                    log.lock().unwrap().push(format!("remove {name}"));
                    let answer = match name.as_str() {
                        "nope" => {
                            Err(Refusal { status: 404, body: json!({ "error": "no job named \"nope\"" }) })
                        }
                        _ => Ok(json!({ "ok": true })),
                    };
                    let _ = reply.send(answer);
                    continue;
                }
            };
            let _ = reply.send(answer.clone());
        }
    });
    let metrics = Metrics::new();
    metrics.digest_received("leaf1");
    let events = EventLog::new(16);
    events.record("reroute", Some("leaf1"), "congestion", json!({ "port": 3 }));
    events.record("reroute", Some("leaf1"), "recovery", json!({ "port": 3 }));
    let fabric = metaroce_topo::load_file(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/mininet-2x2.yaml"
    )))
    .unwrap();
    let state = ApiState::new(metrics, events, tokens, snap_rx, cmd_tx).with_fabric(Arc::new(fabric));
    Fixture { state, seen, _snap_tx: snap_tx }
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
    fn error(&self) -> String {
        self.json()["error"].as_str().unwrap_or_else(|| panic!("no error field: {}", self.text)).to_string()
    }
}

async fn call(state: &ApiState, method: &str, uri: &str, token: Option<&str>, body: &str) -> Answer {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let req = req.body(Body::from(body.to_string())).unwrap();
    let resp = router(state.clone()).oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    Answer { status: parts.status, headers: parts.headers, text: String::from_utf8(bytes.to_vec()).unwrap() }
}

async fn get(state: &ApiState, what: &str, token: Option<&str>) -> Answer {
    let uri = if what == "metrics" { "/metrics".into() } else { format!("/api/v1/{what}") };
    call(state, "GET", &uri, token, "").await
}

#[tokio::test]
async fn obs_api_read_only_without_tokens() {
    let f = fixture(false, Ok(()));
    for what in READS {
        assert_eq!(get(&f.state, what, None).await.status, StatusCode::OK, "{what}");
    }
    assert_eq!(get(&f.state, "topology", None).await.json(), json!({ "switches": ["leaf1"] }));
    assert_eq!(get(&f.state, "congestion", None).await.json()["leaf1"]["3"], 40);
    assert_eq!(get(&f.state, "groups", None).await.json()[0]["group"], 1);
    assert_eq!(get(&f.state, "status", None).await.json()["mode"], "observe");
    for uri in ["/api/v1/mode", "/api/v1/rollback"] {
        let a = call(&f.state, "POST", uri, None, r#"{"mode":"act"}"#).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN);
        assert!(a.error().contains("--tokens FILE"), "{}", a.text);
    }
    assert!(f.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn obs_api_metrics_are_openmetrics() {
    let f = fixture(true, Ok(()));
    let a = get(&f.state, "metrics", Some(VIEW)).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.headers[CONTENT_TYPE], OPENMETRICS_CONTENT_TYPE);
    check_openmetrics(&a.text);
    assert!(a.text.contains("metaroce_digests_total{switch=\"leaf1\"} 1"));
}

#[tokio::test]
async fn obs_api_tokens_gate_every_endpoint_but_healthz() {
    let f = fixture(true, Ok(()));
    let h = call(&f.state, "GET", "/healthz", None, "").await;
    assert_eq!((h.status, h.json()), (StatusCode::OK, json!({ "status": "ok" })));
    for what in READS {
        let a = get(&f.state, what, None).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{what}");
        assert_eq!(a.headers[WWW_AUTHENTICATE], "Bearer");
        assert!(a.error().contains("missing bearer token"));
        assert_eq!(
            get(&f.state, what, Some("no-such-token-0123456789")).await.status,
            StatusCode::UNAUTHORIZED
        );
        for token in [VIEW, OPER, ADMIN, SCHED] {
            assert_eq!(get(&f.state, what, Some(token)).await.status, StatusCode::OK, "{what}");
        }
    }
    let basic = Request::get("/api/v1/status").header("authorization", format!("Basic {VIEW}"));
    let resp = router(f.state.clone()).oneshot(basic.body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn obs_api_mode_needs_operator() {
    let f = fixture(true, Ok(()));
    let body = r#"{"mode":"act"}"#;
    assert_eq!(call(&f.state, "POST", "/api/v1/mode", None, body).await.status, StatusCode::UNAUTHORIZED);
    let v = call(&f.state, "POST", "/api/v1/mode", Some(VIEW), body).await;
    assert_eq!(v.status, StatusCode::FORBIDDEN);
    assert!(v.error().contains("needs the operator role"), "{}", v.text);
    for token in [OPER, ADMIN] {
        let a = call(&f.state, "POST", "/api/v1/mode", Some(token), body).await;
        assert_eq!((a.status, a.json()), (StatusCode::OK, json!({ "ok": true, "mode": "act" })));
    }
    assert_eq!(*f.seen.lock().unwrap(), vec!["mode act", "mode act"]);
    let audit = f.state.events.recent(2, 10);
    assert_eq!(audit.events.len(), 2);
    assert_eq!(audit.events[0].kind, "api");
    assert_eq!(audit.events[0].details["role"], "operator");
    assert_eq!(audit.events[1].details["role"], "admin");
}

#[tokio::test]
async fn obs_api_bad_bodies_are_400_naming_the_problem() {
    let f = fixture(true, Ok(()));
    let cases = [
        ("/api/v1/mode", "{", "invalid JSON body"),
        ("/api/v1/mode", r#"{"mode":"acting"}"#, "unknown variant `acting`"),
        ("/api/v1/mode", r#"{"mode":"act","x":1}"#, "unknown field `x`"),
        ("/api/v1/mode", "{}", "missing field `mode`"),
        ("/api/v1/rollback", "[1,2]", "must be a snapshot object"),
        ("/api/v1/rollback", "", "invalid JSON body"),
    ];
    for (uri, body, want) in cases {
        let a = call(&f.state, "POST", uri, Some(OPER), body).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{body}");
        assert!(a.error().contains(want), "{body}: {}", a.text);
    }
    let big = format!("{{\"x\":\"{}\"}}", "a".repeat(MAX_BODY_BYTES));
    let a = call(&f.state, "POST", "/api/v1/rollback", Some(OPER), &big).await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(a.error().contains(&format!("limit of {MAX_BODY_BYTES} bytes (4 MiB)")), "{}", a.text);
    let a = call(&f.state, "POST", "/api/v1/jobs", Some(SCHED), &big).await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(a.error().contains("limit of"), "{}", a.text);
    assert!(f.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn obs_api_links_are_reported_by_operators_and_checked_against_the_fabric() {
    let f = fixture(true, Ok(()));
    let down = r#"{"link":"spine1:1","state":"down"}"#;
    let v = call(&f.state, "POST", "/api/v1/links", Some(VIEW), down).await;
    assert_eq!(v.status, StatusCode::FORBIDDEN, "{}", v.text);
    let a = call(&f.state, "POST", "/api/v1/links", Some(OPER), down).await;
    assert_eq!(
        (a.status, a.json()),
        (StatusCode::OK, json!({ "ok": true, "link": "spine1:1", "state": "down", "cut_off": [] }))
    );
    let up = r#"{"link":"leaf1:3","state":"up","force":true}"#;
    assert_eq!(call(&f.state, "POST", "/api/v1/links", Some(ADMIN), up).await.status, StatusCode::OK);
    // Either end names the same link (leaf1:3 is spine1:1's peer).
    assert_eq!(*f.seen.lock().unwrap(), vec!["link 0 up false force false", "link 0 up true force true"]);
    let cases = [
        (r#"{"link":"leef1:3","state":"down"}"#, "did you mean \"leaf1\""),
        (r#"{"link":"leaf1:1","state":"down"}"#, "leads to a host"),
        (r#"{"link":"leaf1:9","state":"down"}"#, "no link on port 9"),
        (r#"{"link":"leaf1:3","state":"sideways"}"#, "unknown variant `sideways`"),
        (r#"{"link":"leaf1:3"}"#, "missing field `state`"),
    ];
    for (body, want) in cases {
        let a = call(&f.state, "POST", "/api/v1/links", Some(OPER), body).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{body}");
        assert!(a.error().contains(want), "{body}: {}", a.text);
    }
    assert_eq!(f.seen.lock().unwrap().len(), 2, "nothing bad reaches the controller");
}

#[tokio::test]
async fn obs_api_rollback_and_controller_answers() {
    let f = fixture(true, Ok(()));
    let a =
        call(&f.state, "POST", "/api/v1/rollback", Some(OPER), &snapshot_doc("mininet-2x2", "leaf1")).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(f.seen.lock().unwrap().len(), 1);
    assert!(f.seen.lock().unwrap()[0].starts_with("rollback {"));
    // A document that does not fit the fabric is a bad body, never asked.
    for (doc, want) in [
        (snapshot_doc("leaf-spine-4x4", "leaf1"), "not \"mininet-2x2\""),
        (snapshot_doc("mininet-2x2", "leaf9"), "switch \"leaf9\""),
        (r#"{"groups":[]}"#.to_string(), "not a valid document"),
    ] {
        let a = call(&f.state, "POST", "/api/v1/rollback", Some(OPER), &doc).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{doc}: {}", a.text);
        assert!(a.error().contains(want), "{doc}: {}", a.text);
    }
    assert_eq!(f.seen.lock().unwrap().len(), 1);

    let standby =
        CommandError::Standby { leader: Some("c1".into()), leader_url: Some("http://c1:9000".into()) };
    let text = "this controller is a standby; the leader is c1 at http://c1:9000: send changes there";
    let refused = fixture(true, Err(standby));
    let a = call(&refused.state, "POST", "/api/v1/mode", Some(OPER), r#"{"mode":"act"}"#).await;
    assert_eq!((a.status, a.error()), (StatusCode::CONFLICT, text.to_string()));
    assert_eq!(refused.state.events.recent(2, 1).events[0].details["outcome"], text);

    // Nobody answers: the receiver is alive but never read.
    let mut silent = fixture(true, Ok(()));
    let (tx, _rx) = mpsc::channel(1);
    silent.state.commands = tx;
    silent.state.command_timeout = Duration::from_millis(20);
    let doc = snapshot_doc("mininet-2x2", "leaf1");
    let a = call(&silent.state, "POST", "/api/v1/rollback", Some(OPER), &doc).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(a.error().contains("nothing changed"), "{}", a.text);

    // The state task is gone.
    let (tx, rx) = mpsc::channel(1);
    drop(rx);
    silent.state.commands = tx;
    let a = call(&silent.state, "POST", "/api/v1/mode", Some(OPER), r#"{"mode":"observe"}"#).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(a.error().contains("shutting down"));
}

/// A snapshot document of `fabric` holding no entries for `switch`.
fn snapshot_doc(fabric: &str, switch: &str) -> String {
    json!({
        "version": crate::snapshot::SNAPSHOT_VERSION, "topology": fabric, "taken_at_unix_ms": 1,
        "switches": { switch: [] },
    })
    .to_string()
}

#[tokio::test]
async fn obs_api_events_since_and_limit() {
    let f = fixture(false, Ok(()));
    let all = get(&f.state, "events", None).await.json();
    assert_eq!(all["last_id"], 2);
    assert_eq!(all["events"][0]["reason"], "congestion");
    assert_eq!(all["events"][1]["switch"], "leaf1");
    let a = call(&f.state, "GET", "/api/v1/events?since=1&limit=5", None, "").await.json();
    assert_eq!(a["events"].as_array().map(Vec::len), Some(1));
    assert_eq!(a["events"][0]["id"], 2);
    let a = call(&f.state, "GET", "/api/v1/events?limit=1", None, "").await.json();
    assert_eq!(a["events"][0]["id"], 1);
    for (q, want) in
        [("since=x", "since must be an event id"), ("limit=-1", "limit must be"), ("from=1", "unknown")]
    {
        let a = call(&f.state, "GET", &format!("/api/v1/events?{q}"), None, "").await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST);
        assert!(a.error().contains(want), "{q}: {}", a.text);
    }
}

#[tokio::test]
async fn obs_api_unknown_paths_and_methods_answer_json() {
    let f = fixture(false, Ok(()));
    let a = call(&f.state, "GET", "/api/v1/nope", None, "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(a.error(), "no such endpoint");
    let a = call(&f.state, "GET", "/api/v1/mode", None, "").await;
    assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(a.error().contains("method not allowed"));
}

#[tokio::test]
async fn obs_api_never_logs_tokens() {
    let (logs, _guard) = capture_logs();
    let f = fixture(true, Ok(()));
    let wrong = "wrong-secret-0123456789";
    get(&f.state, "status", Some(wrong)).await;
    call(&f.state, "POST", "/api/v1/mode", Some(VIEW), r#"{"mode":"act"}"#).await;
    call(&f.state, "POST", "/api/v1/mode", Some(OPER), r#"{"mode":"act"}"#).await;
    let out = format!("{} {:?} {:?}", logs.text(), f.state, f.state.events.recent(0, 100));
    assert!(out.contains("API request refused"), "{out}");
    for secret in [VIEW, OPER, ADMIN, wrong] {
        assert!(!out.contains(secret), "token leaked: {out}");
    }
}

#[tokio::test]
async fn obs_api_serves_on_a_real_listener_until_shutdown() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let f = fixture(false, Ok(()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, f.state.clone(), async {
        let _ = stop_rx.await;
    }));
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut reply = String::new();
    conn.read_to_string(&mut reply).await.unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.ends_with(r#"{"status":"ok"}"#), "{reply}");
    let _ = stop_tx.send(());
    assert!(matches!(server.await, Ok(Ok(()))));
}

/// `--metrics-listen`: a scraper needs no token there, and gets nothing
/// but the metrics, while the API itself still wants one.
#[tokio::test]
async fn obs_metrics_listener_is_anonymous_and_serves_only_metrics() {
    let f = fixture(true, Ok(()));
    assert_eq!(get(&f.state, "metrics", None).await.status, StatusCode::UNAUTHORIZED);
    let scrape = |uri: &'static str| {
        let app = metrics_router(f.state.metrics.clone());
        async move {
            let req = Request::builder().uri(uri).body(Body::empty()).unwrap();
            let resp = app.oneshot(req).await.unwrap();
            let status = resp.status();
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.unwrap();
            (status, String::from_utf8(bytes.to_vec()).unwrap())
        }
    };
    let (status, text) = scrape("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    check_openmetrics(&text);
    assert!(text.contains("metaroce_digests_total{switch=\"leaf1\"} 1"), "{text}");
    for uri in ["/api/v1/status", "/api/v1/events"] {
        assert_eq!(scrape(uri).await.0, StatusCode::NOT_FOUND, "{uri}");
    }
}

#[tokio::test]
async fn obs_api_jobs_need_the_scheduler_role_which_can_do_nothing_else() {
    let f = fixture(true, Ok(()));
    let job = r#"{"name":"moe-7","pattern":"all-to-all","hosts":["h1","h2"],"bytes":1048576}"#;
    let v = call(&f.state, "POST", "/api/v1/jobs", Some(VIEW), job).await;
    assert_eq!(v.status, StatusCode::FORBIDDEN, "{}", v.text);
    assert!(v.error().contains("needs the scheduler role"), "{}", v.text);
    assert_eq!(call(&f.state, "POST", "/api/v1/jobs", None, job).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        call(&f.state, "DELETE", "/api/v1/jobs/moe-7", Some(VIEW), "").await.status,
        StatusCode::FORBIDDEN
    );
    for token in [SCHED, OPER, ADMIN] {
        let a = call(&f.state, "POST", "/api/v1/jobs", Some(token), job).await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.text);
        assert_eq!(a.json()["job"]["name"], "moe-7");
    }
    let a = call(&f.state, "DELETE", "/api/v1/jobs/moe-7", Some(SCHED), "").await;
    assert_eq!((a.status, a.json()), (StatusCode::OK, json!({ "ok": true })));
    let a = call(&f.state, "DELETE", "/api/v1/jobs/nope", Some(SCHED), "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(a.error().contains("no job named"), "{}", a.text);
    // Nothing an operator does.
    for (uri, body) in [
        ("/api/v1/mode", r#"{"mode":"act"}"#),
        ("/api/v1/rollback", "{}"),
        ("/api/v1/links", r#"{"link":"leaf1:3","state":"down"}"#),
    ] {
        let a = call(&f.state, "POST", uri, Some(SCHED), body).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{uri}: {}", a.text);
    }
    assert_eq!(
        *f.seen.lock().unwrap(),
        vec!["job \"moe-7\"", "job \"moe-7\"", "job \"moe-7\"", "remove moe-7", "remove nope"]
    );
    let audit = f.state.events.recent(2, 100);
    let job_audits: Vec<_> = audit.events.iter().filter(|e| e.details["endpoint"] == "jobs").collect();
    assert_eq!(job_audits[0].details["role"], "scheduler");
    assert_eq!(job_audits.last().map(|e| e.details["outcome"].clone()), Some(json!("refused (404)")));
    assert_eq!(get(&f.state, "jobs", Some(SCHED)).await.json()["flows"], 2);
}

#[tokio::test]
async fn obs_api_a_job_body_that_is_not_json_is_400_with_problems() {
    let f = fixture(true, Ok(()));
    let a = call(&f.state, "POST", "/api/v1/jobs", Some(SCHED), "{\"name\": ").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    let v = a.json();
    assert!(v["error"].as_str().unwrap().contains("1 problem"), "{v}");
    assert!(v["problems"][0]["message"].as_str().unwrap().contains("not JSON"), "{v}");
    assert_eq!(v["problems"][0]["path"], "");
    let a = call(&f.state, "POST", "/api/v1/jobs", None, "{}").await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    let ro = fixture(false, Ok(()));
    let a = call(&ro.state, "POST", "/api/v1/jobs", None, "{}").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(a.error().contains("--tokens FILE"), "{}", a.text);
    assert!(f.seen.lock().unwrap().is_empty() && ro.seen.lock().unwrap().is_empty());
}

#[path = "api_jobs_tests.rs"]
mod jobs_timing;
