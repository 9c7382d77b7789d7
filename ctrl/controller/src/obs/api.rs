//! The HTTP status API on axum: `/metrics`, `/healthz` and `/api/v1/*`.
//!
//! Without a token file the API is read-only: reads are open and mutating
//! endpoints answer 403 saying how to enable them. With one, every endpoint
//! but `/healthz` needs a bearer token: `viewer` to read (including
//! `/metrics`), `operator` to change the mode, roll back or report a link
//! down or up, `scheduler` (or operator) to register and remove jobs.
//! Errors are JSON `{"error": "..."}`; a refused job body is 400 with
//! `{"error": ..., "problems": [{"path", "message"}, ...]}`. The live page
//! and its stream are routed here too (`super::page`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, RawQuery, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use super::{Command, EventLog, Metrics, ObsError, Role, Snapshot, Tokens};

/// The content type of `GET /metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Largest request body accepted (a rollback snapshot document).
pub const MAX_BODY_BYTES: usize = 4 << 20;

const DEFAULT_EVENTS_LIMIT: usize = 100;
const MAX_EVENTS_LIMIT: usize = 1000;

/// Everything the handlers need; cheap to clone.
#[derive(Debug, Clone)]
pub struct ApiState {
    pub metrics: Metrics,
    pub events: EventLog,
    /// `None`: read-only API without authentication.
    pub tokens: Option<Arc<Tokens>>,
    pub snapshot: watch::Receiver<Arc<Snapshot>>,
    pub commands: mpsc::Sender<Command>,
    /// How long a mutating request waits for the state task (then 503).
    pub command_timeout: Duration,
    /// The fabric, to check the links a client names before asking the
    /// state task (`None`: link reports are refused).
    pub fabric: Option<Arc<metaroce_topo::Topology>>,
}

impl ApiState {
    pub fn new(
        metrics: Metrics,
        events: EventLog,
        tokens: Option<Arc<Tokens>>,
        snapshot: watch::Receiver<Arc<Snapshot>>,
        commands: mpsc::Sender<Command>,
    ) -> Self {
        ApiState {
            metrics,
            events,
            tokens,
            snapshot,
            commands,
            command_timeout: Duration::from_secs(5),
            fabric: None,
        }
    }

    /// Lets clients report links of `fabric` down or up.
    pub fn with_fabric(mut self, fabric: Arc<metaroce_topo::Topology>) -> Self {
        self.fabric = Some(fabric);
        self
    }
}

/// The API's routes, for [`serve`] or for driving in-process in tests.
pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/api/v1/status", get(status))
        .route("/api/v1/topology", get(topology))
        .route("/api/v1/congestion", get(congestion))
        .route("/api/v1/groups", get(groups))
        .route("/api/v1/recommendations", get(recommendations))
        .route("/api/v1/events", get(events))
        .route("/api/v1/mode", post(set_mode))
        .route("/api/v1/rollback", post(rollback))
        .route("/api/v1/links", post(set_link))
        .route("/api/v1/jobs", post(jobs::register).get(jobs_list))
        .route("/api/v1/jobs/{name}", axum::routing::delete(jobs::remove).get(jobs::one))
        .route("/api/v1/flows", get(flows::flows))
        .merge(super::page::routes())
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such endpoint") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this endpoint")
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Only `GET /metrics` (and `/healthz`), without authentication: for a
/// scraper on its own listener (`--metrics-listen`), so that a stock
/// Prometheus scrape config works while the API needs tokens.
pub fn metrics_router(metrics: Metrics) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route(
            "/metrics",
            get(|State(m): State<Metrics>| async move {
                (StatusCode::OK, [(CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], m.encode()).into_response()
            }),
        )
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "only /metrics and /healthz are served here")
        })
        .with_state(metrics)
}

/// Serves [`metrics_router`] on `listener` until `shutdown` completes.
pub async fn serve_metrics(
    listener: TcpListener,
    metrics: Metrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ObsError> {
    let addr = listener.local_addr().map_err(|source| ObsError::Serve { source })?;
    tracing::info!(%addr, "metrics listening (no authentication)");
    axum::serve(listener, metrics_router(metrics))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| ObsError::Serve { source })
}

/// Serves the API on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    state: ApiState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ObsError> {
    let addr = listener.local_addr().map_err(|source| ObsError::Serve { source })?;
    tracing::info!(%addr, read_only = state.tokens.is_none(), "status API listening");
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| ObsError::Serve { source })
}

/// An error answer: JSON `{"error": message}` with its status.
#[derive(Debug)]
pub(super) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = json_response(self.status, &json!({ "error": self.message }));
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

pub(super) fn json_response(status: StatusCode, value: &impl Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (status, [(CONTENT_TYPE, "application/json")], body).into_response(),
        Err(error) => {
            tracing::error!(%error, "cannot serialize an API response");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(CONTENT_TYPE, "application/json")],
                "{\"error\":\"internal\"}",
            )
                .into_response()
        }
    }
}

/// A body that could not be read: 413 names the limit, so a client knows
/// how far to cut (a rollback document is the largest body there is).
pub(super) fn body_error(rejection: axum::extract::rejection::BytesRejection) -> ApiError {
    let status = rejection.status();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        let msg = format!(
            "the request body is larger than the limit of {MAX_BODY_BYTES} bytes ({} MiB)",
            MAX_BODY_BYTES >> 20
        );
        return ApiError::new(status, msg);
    }
    ApiError::new(status, format!("cannot read the request body: {}", rejection.body_text()))
}

/// Checks the caller may do what needs `need`; returns its role (`None`
/// when the API runs without tokens). Never logs the token.
pub(super) fn authorize(
    state: &ApiState,
    headers: &HeaderMap,
    need: Role,
    what: &str,
) -> Result<Option<Role>, ApiError> {
    let Some(tokens) = &state.tokens else {
        if need == Role::Viewer {
            return Ok(None);
        }
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "the API is read-only; start the controller with --tokens FILE to enable mode changes, rollback and jobs",
        ));
    };
    let unauthorized = |why: &'static str| {
        tracing::warn!(endpoint = what, why, "API request refused");
        ApiError::new(StatusCode::UNAUTHORIZED, why)
    };
    let header = headers.get(AUTHORIZATION).ok_or_else(|| unauthorized("missing bearer token"))?;
    let value = header.to_str().map_err(|_| unauthorized("malformed Authorization header"))?;
    let token = match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
        _ => return Err(unauthorized("Authorization must be `Bearer <token>`")),
    };
    let role = tokens.role_of(token).ok_or_else(|| unauthorized("unknown token"))?;
    if !role.may(need) {
        tracing::warn!(endpoint = what, %role, need = %need, "API request refused: role too low");
        let msg = format!("this needs the {need} role; the token has the {role} role");
        return Err(ApiError::new(StatusCode::FORBIDDEN, msg));
    }
    Ok(Some(role))
}

async fn healthz() -> Response {
    json_response(StatusCode::OK, &json!({ "status": "ok" }))
}

async fn metrics(State(state): State<ApiState>, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&state, &headers, Role::Viewer, "metrics")?;
    Ok((StatusCode::OK, [(CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], state.metrics.encode()).into_response())
}

/// Serves one field of the latest snapshot. A field built on demand may
/// cover the whole fabric, so it is built (and serialized) off the runtime.
async fn resource<T: Serialize + 'static>(
    state: &ApiState,
    headers: &HeaderMap,
    what: &str,
    field: fn(&Snapshot) -> &T,
) -> Result<Response, ApiError> {
    authorize(state, headers, Role::Viewer, what)?;
    // Clone the Arc so the watch lock is not held while serializing.
    let snapshot = Arc::clone(&state.snapshot.borrow());
    tokio::task::spawn_blocking(move || json_response(StatusCode::OK, field(&snapshot)))
        .await
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "building the answer failed"))
}

async fn status(State(s): State<ApiState>, h: HeaderMap) -> Result<Response, ApiError> {
    resource(&s, &h, "status", |snap| &*snap.status).await
}

async fn topology(State(s): State<ApiState>, h: HeaderMap) -> Result<Response, ApiError> {
    resource(&s, &h, "topology", |snap| &snap.topology).await
}

async fn congestion(State(s): State<ApiState>, h: HeaderMap) -> Result<Response, ApiError> {
    resource(&s, &h, "congestion", |snap| snap.congestion.get()).await
}

async fn groups(State(s): State<ApiState>, h: HeaderMap) -> Result<Response, ApiError> {
    resource(&s, &h, "groups", |snap| snap.groups.get()).await
}

async fn recommendations(State(s): State<ApiState>, h: HeaderMap) -> Result<Response, ApiError> {
    resource(&s, &h, "recommendations", |snap| snap.recommendations.get()).await
}

async fn jobs_list(State(s): State<ApiState>, h: HeaderMap) -> Result<Response, ApiError> {
    resource(&s, &h, "jobs", |snap| snap.jobs.get()).await
}

async fn events(
    State(state): State<ApiState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    authorize(&state, &headers, Role::Viewer, "events")?;
    let (since, limit) = events_query(query.as_deref().unwrap_or(""))?;
    Ok(json_response(StatusCode::OK, &state.events.recent(since, limit)))
}

/// `since=ID&limit=N`, both optional; `limit` is capped at 1000.
fn events_query(query: &str) -> Result<(u64, usize), ApiError> {
    let bad = |msg: String| ApiError::new(StatusCode::BAD_REQUEST, msg);
    let (mut since, mut limit) = (0u64, DEFAULT_EVENTS_LIMIT);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "since" => {
                since =
                    value.parse().map_err(|_| bad(format!("since must be an event id, got \"{value}\"")))?;
            }
            "limit" => {
                let n: usize =
                    value.parse().map_err(|_| bad(format!("limit must be a count, got \"{value}\"")))?;
                limit = n.min(MAX_EVENTS_LIMIT);
            }
            _ => return Err(bad(format!("unknown query parameter \"{key}\"; expected since and limit"))),
        }
    }
    Ok((since, limit))
}

#[path = "api_commands.rs"]
mod commands;
use commands::{rollback, set_link, set_mode};

#[path = "api_jobs.rs"]
mod jobs;

#[path = "api_flows.rs"]
mod flows;
pub use jobs::problems_body as job_problems_body;

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
