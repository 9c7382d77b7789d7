//! The job API: a scheduler announces a training job's flows before they
//! start, and the controller places them (`POST /api/v1/jobs`), lists the
//! jobs (`GET /api/v1/jobs`, in `api.rs`) and forgets one with its steer
//! entries (`DELETE /api/v1/jobs/NAME`). Validation is the planner crate's
//! (`metaroce_te::job`), run in the state task against the registered
//! jobs; a refusal lists every problem with its field.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::commands::audit;
use super::{authorize, json_response, ApiError, ApiState};
use crate::obs::{Command, JobReply, Refusal, Role};

/// A refusal answer: its status and JSON body as the state task gave them.
fn refused(r: Refusal) -> Response {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_REQUEST);
    json_response(status, &r.body)
}

/// The body of a 400 for a job: `{"error", "problems": [{"path", "message"}]}`.
pub fn problems_body(problems: &[metaroce_te::job::Problem]) -> Value {
    json!({
        "error": format!("job refused: {} problem(s)", problems.len()),
        "problems": problems,
    })
}

/// Sends a job command and waits for the answer, up to `command_timeout`.
async fn ask(state: &ApiState, make: impl FnOnce(JobReply) -> Command) -> Result<Value, Response> {
    let unavailable = |msg: &str| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, msg).into_response();
    let (tx, rx) = oneshot::channel();
    let exchange = async {
        state.commands.send(make(tx)).await.map_err(|_| unavailable("the controller is shutting down"))?;
        rx.await.map_err(|_| unavailable("the controller dropped the request"))
    };
    match tokio::time::timeout(state.command_timeout, exchange).await {
        Err(_) => Err(unavailable("the controller did not answer in time; try again")),
        Ok(Err(resp)) => Err(resp),
        Ok(Ok(Err(r))) => Err(refused(r)),
        Ok(Ok(Ok(v))) => Ok(v),
    }
}

fn outcome_of(r: &Result<Value, Response>) -> Result<(), ApiError> {
    match r {
        Ok(_) => Ok(()),
        Err(resp) => Err(ApiError::new(resp.status(), "refused")),
    }
}

/// `POST /api/v1/jobs` with a job body (see `metaroce_te::job`): 201 and
/// `{"ok": true, "job": {...}, "placement": {...}}` once the job's flows are
/// placed and their steer entries published, 400 with every problem.
pub(super) async fn register(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let received = tokio::time::Instant::now();
    let role = authorize(&state, &headers, Role::Scheduler, "jobs")?;
    let bytes = body.map_err(super::body_error)?;
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            let p = metaroce_te::job::Problem::new("", format!("the body is not JSON: {e}"));
            return Ok(json_response(StatusCode::BAD_REQUEST, &problems_body(&[p])));
        }
    };
    let name = body.get("name").and_then(Value::as_str).unwrap_or("").chars().take(64).collect::<String>();
    let answer = ask(&state, |reply| Command::RegisterJob { body, received, reply }).await;
    audit(
        &state,
        role,
        "jobs",
        &format!("register job {name:?}"),
        json!({ "job": name }),
        &outcome_of(&answer),
    );
    Ok(match answer {
        Ok(v) => json_response(StatusCode::CREATED, &v),
        Err(resp) => resp,
    })
}

/// `DELETE /api/v1/jobs/NAME`: 200 and `{"ok": true, "removed": {...}}`,
/// 404 for an unknown job.
pub(super) async fn remove(
    State(state): State<ApiState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let received = tokio::time::Instant::now();
    let role = authorize(&state, &headers, Role::Scheduler, "jobs")?;
    let shown: String = name.chars().take(64).collect();
    let answer = ask(&state, |reply| Command::RemoveJob { name, received, reply }).await;
    audit(
        &state,
        role,
        "jobs",
        &format!("remove job {shown:?}"),
        json!({ "job": shown }),
        &outcome_of(&answer),
    );
    Ok(match answer {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(resp) => resp,
    })
}
