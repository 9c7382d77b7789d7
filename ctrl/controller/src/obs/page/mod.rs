//! The live fabric page: `GET /` (with `/page.js`, `/draw.js`, `/page.css`), the
//! layout it draws (`GET /api/v1/layout`), who the token is
//! (`GET /api/v1/whoami`) and its live updates as Server-Sent Events
//! (`GET /api/v1/stream`).
//!
//! The assets are compiled into the binary: no CDN, nothing fetched from
//! elsewhere (an air-gapped management network works). They are plain SVG
//! and JavaScript, no library: the drawing is lines and boxes, the history
//! one polyline, so a library would cost more bytes than it saves.
//!
//! The page itself holds no data and is served to anyone; everything it
//! shows comes from the API with the token typed into its login box, sent
//! in the `Authorization` header and never in a URL. The stream is read
//! with `fetch()` for that reason (`EventSource` cannot send a header),
//! which also spares the server a cookie or ticket store and the page a
//! CSRF surface.

mod frame;
mod hub;
mod layout;

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};

use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

use super::api::{authorize, json_response, ApiError, ApiState};
use super::Role;
use frame::Fabric;
#[cfg(test)]
use hub::CLIENT_FRAMES;
use hub::{Hub, MAX_CLIENTS};

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("page.js");
const DRAW: &str = include_str!("draw.js");
const STYLE: &str = include_str!("page.css");

/// Scripts and styles only from this server; no frames, no plugins.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// What the page's handlers share: the hub and the fabric, built once.
#[derive(Debug, Clone, Default)]
struct Page {
    hub: Hub,
    fabric: Arc<OnceLock<Arc<Fabric>>>,
    layout: Arc<OnceLock<Arc<Value>>>,
}

impl Page {
    fn fabric(&self, state: &ApiState) -> Result<Arc<Fabric>, ApiError> {
        let topo = state.fabric.as_ref().ok_or_else(|| {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the page needs the fabric; none was given")
        })?;
        Ok(Arc::clone(self.fabric.get_or_init(|| Arc::new(Fabric::new(Arc::clone(topo))))))
    }
}

/// The page's routes, merged into the API router.
pub fn routes() -> Router<ApiState> {
    let page = Page::default();
    let (p1, p2) = (page.clone(), page.clone());
    Router::new()
        .route("/", get(|| async { asset("text/html; charset=utf-8", INDEX) }))
        .route("/page.js", get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }))
        .route("/draw.js", get(|| async { asset("text/javascript; charset=utf-8", DRAW) }))
        .route("/page.css", get(|| async { asset("text/css; charset=utf-8", STYLE) }))
        .route("/api/v1/whoami", get(whoami))
        .route("/api/v1/layout", get(move |s: State<ApiState>, h: HeaderMap| layout(p1.clone(), s, h)))
        .route("/api/v1/stream", get(move |s: State<ApiState>, h: HeaderMap| stream(p2.clone(), s, h)))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        StatusCode::OK,
        [
            (CONTENT_TYPE, content_type),
            (CACHE_CONTROL, "no-cache"),
            (axum::http::header::CONTENT_SECURITY_POLICY, CSP),
            (axum::http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// The caller's role, so the page offers operator controls only to those
/// who may use them (the API checks again on every action).
async fn whoami(State(state): State<ApiState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let role = authorize(&state, &headers, Role::Viewer, "whoami")?;
    let may_operate = role.is_some_and(|r| r.may(Role::Operator));
    Ok(json_response(
        StatusCode::OK,
        &json!({ "role": role, "read_only": state.tokens.is_none(), "may_operate": may_operate }),
    ))
}

async fn layout(page: Page, State(state): State<ApiState>, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&state, &headers, Role::Viewer, "layout")?;
    let fabric = page.fabric(&state)?;
    let cached = page.layout.get().cloned();
    let doc = match cached {
        Some(doc) => doc,
        None => {
            let built =
                tokio::task::spawn_blocking(move || Arc::new(layout::build(&fabric.topo))).await.map_err(
                    |_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "building the layout failed"),
                )?;
            Arc::clone(page.layout.get_or_init(|| built))
        }
    };
    Ok(json_response(StatusCode::OK, &*doc))
}

async fn stream(page: Page, State(state): State<ApiState>, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&state, &headers, Role::Viewer, "stream")?;
    let sources = hub::Sources {
        fabric: page.fabric(&state)?,
        snapshot: state.snapshot.clone(),
        events: state.events.clone(),
    };
    let rx = page.hub.subscribe(&sources).map_err(|hub::TooManyClients| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{MAX_CLIENTS} page streams are open already; close one and retry"),
        )
    })?;
    let events =
        ReceiverStream::new(rx).map(|f| Ok::<_, Infallible>(Event::default().event("frame").data(&*f)));
    let mut resp = Sse::new(events).keep_alive(KeepAlive::default()).into_response();
    resp.headers_mut().insert(CACHE_CONTROL, axum::http::HeaderValue::from_static("no-cache"));
    Ok(resp)
}

#[cfg(test)]
mod tests;
