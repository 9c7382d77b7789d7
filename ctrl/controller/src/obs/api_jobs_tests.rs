//! A command the state task is slow to answer: the client hears what
//! happened (503: nothing changed; 202: taken on, still running), never a
//! timeout that leaves it guessing.

use super::*;
use serde_json::Value;

const JOB: &str = r#"{"name":"moe-7","pattern":"all-to-all","hosts":["h1","h2"],"bytes":1048576}"#;

/// A fixture whose command channel is `rx`'s, with a short timeout.
fn slow_fixture() -> (Fixture, mpsc::Receiver<Command>) {
    let mut f = fixture(true, Ok(()));
    let (tx, rx) = mpsc::channel(4);
    f.state.commands = tx;
    f.state.command_timeout = Duration::from_millis(30);
    (f, rx)
}

fn outcome_of_last(f: &Fixture) -> Value {
    let recent = f.state.events.recent(0, 100);
    recent.events.last().map(|e| e.details["outcome"].clone()).unwrap_or(Value::Null)
}

#[tokio::test]
async fn obs_api_a_job_command_not_taken_on_in_time_is_withdrawn() {
    let (f, mut rx) = slow_fixture();
    for (method, uri, body) in [("DELETE", "/api/v1/jobs/moe-7", ""), ("POST", "/api/v1/jobs", JOB)] {
        let a = call(&f.state, method, uri, Some(SCHED), body).await;
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{method}: {}", a.text);
        assert!(a.error().contains("nothing changed"), "{}", a.text);
        assert!(outcome_of_last(&f).as_str().is_some_and(|o| o.contains("nothing changed")));
        // The state task reads it late and cannot take it on.
        let claim = match rx.recv().await {
            Some(Command::RemoveJob { claim, .. } | Command::RegisterJob { claim, .. }) => claim,
            other => panic!("expected a job command, got {other:?}"),
        };
        assert!(claim.send(()).is_err(), "{method}: a withdrawn command must not be taken on");
    }
}

#[tokio::test]
async fn obs_api_a_job_command_taken_on_but_slow_is_202_pending() {
    let (f, mut rx) = slow_fixture();
    // Takes every command on and keeps its reply unanswered.
    let (held_tx, mut held) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(cmd) = rx.recv().await {
            let (claim, reply) = match cmd {
                Command::RemoveJob { claim, reply, .. } | Command::RegisterJob { claim, reply, .. } => {
                    (claim, reply)
                }
                _ => continue,
            };
            assert!(claim.send(()).is_ok());
            let _ = held_tx.send(reply);
        }
    });
    let a = call(&f.state, "DELETE", "/api/v1/jobs/moe-7", Some(SCHED), "").await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    let v = a.json();
    assert_eq!(
        (v["ok"].clone(), v["pending"].clone(), v["job"].clone()),
        (json!(true), json!(true), json!("moe-7"))
    );
    assert!(v["message"].as_str().is_some_and(|m| m.contains("the job is removed")), "{v}");
    assert_eq!(outcome_of_last(&f), json!("taken on, not finished in time"));

    let a = call(&f.state, "POST", "/api/v1/jobs", Some(SCHED), JOB).await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{}", a.text);
    assert!(a.json()["message"].as_str().is_some_and(|m| m.contains("GET /api/v1/jobs")), "{}", a.text);
    // Both replies were held, not dropped: the 202 came from the timeout.
    assert!(held.recv().await.is_some() && held.recv().await.is_some());
}

#[tokio::test]
async fn obs_api_a_mode_change_is_either_withdrawn_or_answered() {
    let (f, mut rx) = slow_fixture();
    let a = call(&f.state, "POST", "/api/v1/mode", Some(OPER), r#"{"mode":"act"}"#).await;
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{}", a.text);
    assert!(a.error().contains("nothing changed"), "{}", a.text);
    match rx.recv().await {
        Some(Command::SetMode { claim, .. }) => assert!(claim.send(()).is_err(), "withdrawn"),
        other => panic!("expected a mode change, got {other:?}"),
    }
    // Taken on in time, answered after the timeout: the answer is served.
    tokio::spawn(async move {
        while let Some(cmd) = rx.recv().await {
            if let Command::SetMode { claim, reply, .. } = cmd {
                assert!(claim.send(()).is_ok());
                tokio::time::sleep(Duration::from_millis(100)).await;
                let _ = reply.send(Ok(()));
            }
        }
    });
    let a = call(&f.state, "POST", "/api/v1/mode", Some(OPER), r#"{"mode":"act"}"#).await;
    assert_eq!((a.status, a.json()), (StatusCode::OK, json!({"ok": true, "mode": "act"})));
}

#[tokio::test]
async fn obs_api_one_job_is_served_by_name_and_an_unknown_one_is_404() {
    let f = fixture(true, Ok(()));
    let a = call(&f.state, "GET", "/api/v1/jobs/moe-7", Some(VIEW), "").await;
    assert_eq!((a.status, a.json()), (StatusCode::OK, json!({ "name": "moe-7" })));
    let a = call(&f.state, "GET", "/api/v1/jobs/nope", Some(VIEW), "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert!(a.error().contains("no job named \"nope\""), "{}", a.text);
    assert_eq!(call(&f.state, "GET", "/api/v1/jobs/moe-7", None, "").await.status, StatusCode::UNAUTHORIZED);
}
