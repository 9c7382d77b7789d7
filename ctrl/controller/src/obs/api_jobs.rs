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
use crate::obs::{Claim, Command, JobReply, Refusal, Role};

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

/// How a job command went, as the API saw it.
enum Asked {
    /// The state task's answer.
    Done(Value),
    /// Taken on (see [`Claim`]) but not finished within `command_timeout`.
    Pending,
    /// A refusal or a failure: the response and the audit log's outcome.
    Failed(Response, String),
}

/// Sends a job command and waits for the answer, up to `command_timeout`.
/// A command the state task has not taken on by then is withdrawn (it
/// will change nothing), so the client hears 503 "nothing changed"; one
/// taken on is [`Asked::Pending`].
async fn ask(state: &ApiState, make: impl FnOnce(Claim, JobReply) -> Command) -> Asked {
    let unavailable = |msg: &str| {
        let resp = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, msg).into_response();
        Asked::Failed(resp, msg.to_string())
    };
    let (claim, mut claimed) = oneshot::channel();
    let (tx, rx) = oneshot::channel();
    let exchange = async {
        state
            .commands
            .send(make(claim, tx))
            .await
            .map_err(|_| unavailable("the controller is shutting down"))?;
        rx.await.map_err(|_| unavailable("the controller dropped the request"))
    };
    match tokio::time::timeout(state.command_timeout, exchange).await {
        Err(_) => {
            // Closing first settles the race: after this the state task
            // either has taken the command on or never will.
            claimed.close();
            if claimed.try_recv().is_ok() {
                return Asked::Pending;
            }
            let msg = format!(
                "the controller did not take the request on within {} ms; nothing changed: try again",
                state.command_timeout.as_millis()
            );
            unavailable(&msg)
        }
        Ok(Err(failed)) => failed,
        Ok(Ok(Err(r))) => {
            let outcome = format!("refused ({})", r.status);
            Asked::Failed(refused(r), outcome)
        }
        Ok(Ok(Ok(v))) => Asked::Done(v),
    }
}

impl Asked {
    /// The audit log's outcome.
    fn outcome(&self) -> Result<(), ApiError> {
        match self {
            Asked::Done(_) => Ok(()),
            Asked::Pending => Err(ApiError::new(StatusCode::ACCEPTED, "taken on, not finished in time")),
            Asked::Failed(resp, why) => Err(ApiError::new(resp.status(), why.clone())),
        }
    }

    /// The response: `done` with the answer's status, or 202 with `pending`'s message.
    fn respond(self, status: StatusCode, job: &str, pending: &str) -> Response {
        match self {
            Asked::Done(v) => json_response(status, &v),
            Asked::Pending => json_response(
                StatusCode::ACCEPTED,
                &json!({"ok": true, "pending": true, "job": job, "message": pending}),
            ),
            Asked::Failed(resp, _) => resp,
        }
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
    let answer = ask(&state, |claim, reply| Command::RegisterJob { body, received, claim, reply }).await;
    audit(&state, role, "jobs", &format!("register job {name:?}"), json!({ "job": name }), &answer.outcome());
    let pending = "the controller took the job on and is still checking and placing it; \
                   GET /api/v1/jobs lists it once registered, a refusal is a job_refused event";
    Ok(answer.respond(StatusCode::CREATED, &name, pending))
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
    let answer = ask(&state, |claim, reply| Command::RemoveJob { name, received, claim, reply }).await;
    audit(&state, role, "jobs", &format!("remove job {shown:?}"), json!({ "job": shown }), &answer.outcome());
    let pending = "the job is removed; its steer entries are still being withdrawn \
                   (a job_removed event follows, and GET /api/v1/jobs no longer lists it)";
    Ok(answer.respond(StatusCode::OK, &shown, pending))
}

/// `GET /api/v1/jobs/NAME`: the job's summary as `GET /api/v1/jobs` lists
/// it, with its `recommendation` (start offset, expected iteration and
/// first completion with and without it) when it is periodic; 404 if no
/// job has that name.
pub async fn one(State(state): State<ApiState>, headers: HeaderMap, Path(name): Path<String>) -> Response {
    if let Err(e) = authorize(&state, &headers, Role::Viewer, "jobs") {
        return e.into_response();
    }
    let snapshot = std::sync::Arc::clone(&state.snapshot.borrow());
    let found = snapshot.jobs.get()["jobs"]
        .as_array()
        .and_then(|jobs| jobs.iter().find(|j| j["name"].as_str() == Some(name.as_str())).cloned());
    match found {
        Some(job) => json_response(StatusCode::OK, &job),
        None => ApiError::new(
            StatusCode::NOT_FOUND,
            format!(
                "no job named {:?}; GET /api/v1/jobs lists them",
                name.chars().take(64).collect::<String>()
            ),
        )
        .into_response(),
    }
}
