//! `GET /api/v1/flows?offset=N&limit=M`: the placed flows a page at a
//! time (a fabric with 50,000 flows made a 12.7 MB answer), each flow with
//! its hosts' names beside their addresses.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{json, Map, Value};

use super::{authorize, json_response, ApiError, ApiState};
use crate::obs::Role;

/// Flows per page unless `limit` says otherwise.
const DEFAULT_FLOWS_LIMIT: usize = 1000;
/// The most flows one page holds.
const MAX_FLOWS_LIMIT: usize = 10_000;

pub(super) async fn flows(
    State(state): State<ApiState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    authorize(&state, &headers, Role::Viewer, "flows")?;
    let (offset, limit) = page_query(query.as_deref().unwrap_or(""))?;
    let snapshot = Arc::clone(&state.snapshot.borrow());
    let fabric = state.fabric.clone();
    // The whole document is built on demand: off the runtime.
    tokio::task::spawn_blocking(move || {
        let names: HashMap<String, &str> = fabric
            .as_deref()
            .map(|t| t.hosts.iter().map(|h| (h.ip.to_string(), h.name.as_str())).collect())
            .unwrap_or_default();
        json_response(StatusCode::OK, &page(snapshot.flows.get(), offset, limit, &names))
    })
    .await
    .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "building the answer failed"))
}

/// `offset=N&limit=M`, both optional; `limit` is at most [`MAX_FLOWS_LIMIT`].
fn page_query(query: &str) -> Result<(usize, usize), ApiError> {
    let bad = |msg: String| ApiError::new(StatusCode::BAD_REQUEST, msg);
    let (mut offset, mut limit) = (0usize, DEFAULT_FLOWS_LIMIT);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let n: usize = value.parse().map_err(|_| bad(format!("{key} must be a count, got \"{value}\"")))?;
        match key {
            "offset" => offset = n,
            "limit" if n == 0 || n > MAX_FLOWS_LIMIT => {
                return Err(bad(format!("limit must be 1 to {MAX_FLOWS_LIMIT}, got {n}")));
            }
            "limit" => limit = n,
            _ => return Err(bad(format!("unknown query parameter \"{key}\"; expected offset and limit"))),
        }
    }
    Ok((offset, limit))
}

/// The flows document with `flows` cut to `[offset, offset + limit)`, a
/// `page` object (`offset`, `limit`, `total`, `next_offset`: null on the
/// last page) and `src_host` / `dst_host` in each flow's key.
fn page(doc: &Value, offset: usize, limit: usize, names: &HashMap<String, &str>) -> Value {
    let all = doc.get("flows").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let total = all.len();
    let flows: Vec<Value> = all.iter().skip(offset).take(limit).map(|f| named(f, names)).collect();
    let end = offset.saturating_add(flows.len());
    let mut out: Map<String, Value> = doc
        .as_object()
        .map(|o| o.iter().filter(|(k, _)| *k != "flows").map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    out.insert("flows".into(), Value::Array(flows));
    let next = (end < total).then_some(end);
    out.insert("page".into(), json!({"offset": offset, "limit": limit, "total": total, "next_offset": next}));
    Value::Object(out)
}

/// A flow with its hosts' names (null for an address no host has).
fn named(flow: &Value, names: &HashMap<String, &str>) -> Value {
    let mut flow = flow.clone();
    if let Some(key) = flow.get_mut("flow").and_then(Value::as_object_mut) {
        for (ip, name) in [("src", "src_host"), ("dst", "dst_host")] {
            let host = key.get(ip).and_then(Value::as_str).and_then(|a| names.get(a).copied());
            key.insert(name.into(), json!(host));
        }
    }
    flow
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(n: usize) -> Value {
        let flows: Vec<Value> = (0..n)
            .map(|i| json!({"flow": {"kind": "pair", "src": format!("10.0.0.{i}"), "dst": "10.0.1.1"}, "job": null}))
            .collect();
        json!({"mode": "act", "placed": n, "flows": flows, "last_decision": {"unplaced": 0}})
    }

    #[test]
    fn obs_flows_pages_cover_every_flow_once_and_name_hosts() {
        let names: HashMap<String, &str> =
            [("10.0.0.1".to_string(), "h1"), ("10.0.1.1".to_string(), "h9")].into();
        let d = doc(5);
        let (mut seen, mut offset) = (vec![], Some(0));
        while let Some(o) = offset {
            let p = page(&d, o, 2, &names);
            assert_eq!((p["placed"].clone(), p["page"]["total"].clone()), (json!(5), json!(5)));
            assert_eq!(p["last_decision"]["unplaced"], 0);
            seen.extend(p["flows"].as_array().unwrap().iter().map(|f| f["flow"]["src"].clone()));
            offset = p["page"]["next_offset"].as_u64().map(|n| n as usize);
        }
        let want: Vec<Value> = (0..5).map(|i| json!(format!("10.0.0.{i}"))).collect();
        assert_eq!(seen, want);
        let p = page(&d, 1, 1, &names);
        assert_eq!(p["flows"][0]["flow"]["src_host"], "h1");
        assert_eq!(p["flows"][0]["flow"]["dst_host"], "h9");
        assert_eq!(page(&d, 0, 1, &names)["flows"][0]["flow"]["src_host"], Value::Null);
        let past = page(&d, 9, 2, &names);
        assert_eq!((past["flows"].clone(), past["page"]["next_offset"].clone()), (json!([]), Value::Null));
    }

    #[test]
    fn obs_flows_query_is_checked() {
        assert_eq!(page_query("").ok(), Some((0, DEFAULT_FLOWS_LIMIT)));
        assert_eq!(page_query("offset=20&limit=5").ok(), Some((20, 5)));
        for bad in ["limit=0", "limit=10001", "offset=-1", "page=2", "limit=x"] {
            let e = page_query(bad).err().unwrap_or_else(|| panic!("{bad} accepted"));
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{bad}");
        }
    }
}
