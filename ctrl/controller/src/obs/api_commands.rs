//! The mutating endpoints: they ask the state task over its command
//! channel and answer with its reply, logging who asked in the event log.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::{authorize, json_response, ApiError, ApiState};
use crate::mode::Mode;
use crate::obs::{Claim, Command, CommandError, Role};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModeBody {
    mode: Mode,
}

/// `POST /api/v1/mode` with `{"mode": "observe" | "advise" | "act"}`.
pub(super) async fn set_mode(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let role = authorize(&state, &headers, Role::Operator, "mode")?;
    let ModeBody { mode } = parse_body(body)?;
    let outcome = ask(&state, |claim, reply| Command::SetMode { mode, claim, reply }).await;
    audit(&state, role, "mode", &format!("set mode to {mode}"), json!({ "mode": mode }), &outcome);
    outcome?;
    Ok(json_response(StatusCode::OK, &json!({ "ok": true, "mode": mode })))
}

/// `POST /api/v1/rollback` with a snapshot document (a JSON object).
pub(super) async fn rollback(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let role = authorize(&state, &headers, Role::Operator, "rollback")?;
    let snapshot: Value = parse_body(body)?;
    if !snapshot.is_object() {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "the rollback body must be a snapshot object"));
    }
    // A document that does not fit this fabric is a bad body (400), told
    // before the state task is asked; its refusals (a standby, say) are 409.
    if let Some(fabric) = &state.fabric {
        let names: Vec<&str> = fabric.switches.iter().map(|s| s.name.as_str()).collect();
        if let Err(e) = crate::snapshot::SnapshotDoc::from_value(snapshot.clone(), &fabric.name, &names) {
            return Err(ApiError::new(StatusCode::BAD_REQUEST, e.to_string()));
        }
    }
    let size = snapshot.as_object().map_or(0, serde_json::Map::len);
    let outcome = ask(&state, |claim, reply| Command::Rollback { snapshot, claim, reply }).await;
    audit(&state, role, "rollback", "roll back to a snapshot", json!({ "fields": size }), &outcome);
    outcome?;
    Ok(json_response(StatusCode::OK, &json!({ "ok": true })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkBody {
    /// Either end of the link, `switch:port`.
    link: String,
    state: LinkState,
    /// Take it down even if that leaves some leaf pair without a path.
    #[serde(default)]
    force: bool,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum LinkState {
    Down,
    Up,
}

/// `POST /api/v1/links` with `{"link": "leaf1:3", "state": "down" | "up"}`
/// (and `"force": true` to accept a partition): a link monitor (or an
/// operator) reports a fabric link; the controller routes around it at
/// once, or puts it back. The answer names the leaf pairs it cut off; a
/// link-down that would cut some off is refused (409) unless forced.
pub(super) async fn set_link(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let role = authorize(&state, &headers, Role::Operator, "links")?;
    let LinkBody { link: name, state: link_state, force } = parse_body(body)?;
    let fabric = state.fabric.as_ref().ok_or_else(|| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "this controller takes no link reports")
    })?;
    let link =
        fabric.fabric_link(&name).map_err(|why| ApiError::new(StatusCode::BAD_REQUEST, why.to_string()))?;
    let up = matches!(link_state, LinkState::Up);
    let outcome = ask(&state, |claim, reply| Command::SetLink { link, up, force, claim, reply }).await;
    let what = if up { "up" } else { "down" };
    let audited = match &outcome {
        Ok(_) => Ok(()),
        Err(e) => Err(ApiError::new(e.status, e.message.clone())),
    };
    audit(
        &state,
        role,
        "links",
        &format!("link {name} {what}"),
        json!({ "link": name, "state": what, "force": force }),
        &audited,
    );
    let mut answer = json!({ "ok": true, "link": name, "state": what });
    if let (Some(obj), Value::Object(extra)) = (answer.as_object_mut(), outcome?) {
        obj.extend(extra);
    }
    Ok(json_response(StatusCode::OK, &answer))
}

fn parse_body<T: serde::de::DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let bytes = body.map_err(super::body_error)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}")))
}

/// Sends a command and waits for the reply, up to `command_timeout`. A
/// command not taken on by then is withdrawn ([`Claim`]): 503, nothing
/// changed. One taken on is answered in the same step of the state task,
/// so its reply is waited for.
async fn ask<T>(
    state: &ApiState,
    make: impl FnOnce(Claim, oneshot::Sender<Result<T, CommandError>>) -> Command,
) -> Result<T, ApiError> {
    let unavailable = |msg: &str| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, msg);
    let (claim, mut claimed) = oneshot::channel();
    let (tx, mut rx) = oneshot::channel();
    let exchange = async {
        state
            .commands
            .send(make(claim, tx))
            .await
            .map_err(|_| unavailable("the controller is shutting down"))?;
        (&mut rx).await.map_err(|_| unavailable("the controller dropped the request"))
    };
    let answer = match tokio::time::timeout(state.command_timeout, exchange).await {
        Err(_) => {
            claimed.close();
            if claimed.try_recv().is_err() {
                let ms = state.command_timeout.as_millis();
                let msg = format!(
                    "the controller did not take the request on within {ms} ms; nothing changed: try again"
                );
                return Err(unavailable(&msg));
            }
            rx.await.map_err(|_| unavailable("the controller dropped the request"))
        }
        Ok(r) => r,
    };
    match answer {
        Err(e) => Err(e),
        Ok(Err(refused)) => {
            let status = StatusCode::from_u16(refused.status()).unwrap_or(StatusCode::CONFLICT);
            Err(ApiError::new(status, refused.to_string()))
        }
        Ok(Ok(v)) => Ok(v),
    }
}

/// Records who asked for what and how it went; the state task records the
/// change itself.
pub(super) fn audit(
    state: &ApiState,
    role: Option<Role>,
    what: &str,
    reason: &str,
    mut details: Value,
    outcome: &Result<(), ApiError>,
) {
    let role = role.map_or("none", Role::as_str);
    if let Some(obj) = details.as_object_mut() {
        obj.insert("role".into(), json!(role));
        obj.insert("outcome".into(), json!(outcome.as_ref().map_or_else(|e| e.message.as_str(), |()| "ok")));
        obj.insert("endpoint".into(), json!(what));
    }
    tracing::info!(endpoint = what, role, ok = outcome.is_ok(), "API command");
    state.events.record("api", None, &format!("{role} requested: {reason}"), details);
}
