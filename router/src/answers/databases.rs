//! `GET /api/databases` (fan-out to the shards holding the caller's
//! databases, after any move's hold, merged by position then created_at) and `POST /api/databases`
//! (allocate, forward to the allocated shard, confirm or release).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use cluster_protocol::control::{client::ClientError, Access};
use cluster_protocol::error::forbidden;
use http::{header, HeaderMap, HeaderValue, Method, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;

use crate::edge::trace::{self, RequestSpan};
use crate::errors::{full, json, ApiError, Body};
use crate::forward::client::{client_response, read_limited, request_headers, shard_failure};
use crate::forward::hold;
use crate::forward::placement::Placement;
use crate::forward::principal_sign::Request;
use crate::gate::auth::Caller;
use crate::state::AppState;

const CREATE_BODY_LIMIT: usize = 64 * 1024;
const LOOKUP_REPLY_LIMIT: usize = 16 * 1024 * 1024;

/// 503: the control plane could not be asked (logged here).
fn down(span: &RequestSpan, what: &str, e: impl std::fmt::Display) -> ApiError {
    span.log(|| tracing::error!(error = %e, "{what}"));
    ApiError::dependency_down()
}

/// The 503 of a creation the shard made but the catalog did not confirm.
const OUTCOME_UNKNOWN_MESSAGE: &str = "The database may or may not have been created: part of \
     the service could not be reached while it was. List your databases before creating it again.";

fn internal(span: &RequestSpan, what: &str, e: impl std::fmt::Display) -> ApiError {
    span.log(|| tracing::error!(error = %e, "{what}"));
    ApiError::Internal
}

pub async fn list(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    span: &RequestSpan,
) -> Result<Response<Body>, ApiError> {
    let access = state
        .access
        .get(caller.user_id(), caller.user_version())
        .await
        .map_err(|e| down(span, "user access lookup failed", e))?;
    let scope = &caller.key.record.databases;
    let mut ids: Vec<String> = access
        .memberships
        .iter()
        .map(|m| m.database_id.clone())
        .chain(access.support.iter().cloned())
        .filter(|id| scope.allows(id))
        .collect();
    ids.sort();
    ids.dedup();

    let mut found = Vec::new();
    let mut pending = ids;
    for round in 0..2 {
        if pending.is_empty() {
            break;
        }
        let placements = state
            .placements
            .many(&pending)
            .await
            .map_err(|e| down(span, "placement lookup failed", e))?;
        let placements = released(state, placements, span).await?;
        let mut by_shard: HashMap<&str, Vec<String>> = HashMap::new();
        for p in &placements {
            by_shard
                .entry(p.shard.url.as_str())
                .or_default()
                .push(p.database_id.clone());
        }
        let calls = by_shard
            .iter()
            .map(|(url, ids)| lookup(state, caller, headers, span, url, ids));
        for reply in futures::future::join_all(calls).await {
            found.extend(reply?);
        }
        // Databases a shard no longer holds have moved: refresh and ask again once.
        let seen: std::collections::HashSet<&str> = found
            .iter()
            .filter_map(|d| d.get("id").and_then(Value::as_str))
            .collect();
        pending.retain(|id| !seen.contains(id.as_str()));
        if round == 0 {
            for id in &pending {
                state.placements.forget_database(id);
            }
        }
    }
    found.sort_by(|a, b| {
        let pos = |v: &Value| v.get("position").and_then(Value::as_f64).unwrap_or(0.0);
        let created = |v: &Value| {
            v.get("created_at")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        pos(a)
            .total_cmp(&pos(b))
            .then_with(|| created(a).cmp(&created(b)))
    });
    Ok(json(
        StatusCode::OK,
        serde_json::json!({ "databases": found }).to_string(),
    ))
}

/// `placements` once no move holds them (`hold`; a database gone meanwhile
/// is left out).
async fn released(
    state: &AppState,
    placements: Vec<Arc<Placement>>,
    span: &RequestSpan,
) -> Result<Vec<Arc<Placement>>, ApiError> {
    if placements.iter().all(|p| p.hold_until.is_none()) {
        return Ok(placements);
    }
    let waits = placements.into_iter().map(|p| async move {
        let tag = p.tag.clone();
        hold::released(state, &tag, p, span).await
    });
    let mut out = Vec::new();
    for released in futures::future::join_all(waits).await {
        match released {
            Ok(p) => out.push(p),
            Err(ApiError::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

async fn lookup(
    state: &AppState,
    caller: &Caller,
    incoming: &HeaderMap,
    span: &RequestSpan,
    shard_url: &str,
    ids: &[String],
) -> Result<Vec<Value>, ApiError> {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    trace::propagate(span, incoming, &mut headers);
    let body = Bytes::from(serde_json::json!({ "database_ids": ids }).to_string());
    let uri = Uri::from_static("/internal/databases/lookup");
    let request = Request {
        method: &Method::POST,
        uri: &uri,
        body: &body,
    };
    state.signer.attach(
        &mut headers,
        &caller.principal(None, None, false, None),
        request,
    );
    let resp = state
        .forwarder
        .send(shard_url, &Method::POST, &uri, headers, full(body))
        .await
        .map_err(|e| shard_failure(span, shard_url, e))?;
    let status = resp.status();
    let bytes = http_body_util::Limited::new(resp.into_body(), LOOKUP_REPLY_LIMIT)
        .collect()
        .await
        .map_err(|e| internal(span, "database lookup reply unreadable", e))?
        .to_bytes();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        // The shard is busy or failing over: retryable, as it said.
        return Err(down(span, "database lookup unavailable", shard_url));
    }
    if !status.is_success() {
        return Err(internal(
            span,
            "database lookup refused",
            format!("{status} from {shard_url}"),
        ));
    }
    #[derive(serde::Deserialize)]
    struct Reply {
        databases: Vec<Value>,
    }
    serde_json::from_slice::<Reply>(&bytes)
        .map(|r| r.databases)
        .map_err(|e| internal(span, "database lookup reply undecodable", e))
}

pub async fn create(
    state: &AppState,
    caller: &Caller,
    req: http::Request<Incoming>,
    span: &RequestSpan,
) -> Result<Response<Body>, ApiError> {
    let record = &caller.key.record;
    if record.databases.is_narrowed() {
        return Err(ApiError::Forbidden(forbidden::NARROWED_KEY_CREATE));
    }
    if record.access == Access::ReadOnly {
        return Err(ApiError::Forbidden(forbidden::KEY_READ_ONLY));
    }
    let (parts, body) = req.into_parts();
    let body_time = state.config.connections.body_timeout;
    let (body, _reserved): (Bytes, _) =
        read_limited(body, None, CREATE_BODY_LIMIT, body_time, &state.body_budget).await?;
    let allocation = match state.control.allocate_database(caller.user_id()).await {
        Ok(a) => a,
        Err(ClientError::Api { status, body }) if (400..500).contains(&status) => {
            return Err(ApiError::Upstream { status, body });
        }
        // Nothing was created yet: a retry is safe.
        Err(e) => return Err(down(span, "database allocation failed", e)),
    };
    let mut headers = request_headers(&parts.headers, &caller.address);
    trace::propagate(span, &parts.headers, &mut headers);
    let mut principal = caller.principal(None, None, false, Some(allocation.epoch));
    principal.new_database = Some(allocation.clone());
    let request = Request {
        method: &Method::POST,
        uri: &parts.uri,
        body: &body,
    };
    state.signer.attach(&mut headers, &principal, request);
    let sent = state
        .forwarder
        .send(
            &allocation.shard.url,
            &Method::POST,
            &parts.uri,
            headers,
            full(body),
        )
        .await;
    let id = allocation.database_id.as_str();
    let result = match sent {
        Ok(resp) if resp.status().is_success() => match confirm(state, id).await {
            Ok(()) => Ok(client_response(resp)),
            // The shard created it, the catalog (failing over?) did not
            // confirm it: the outcome is unknown to the client, a 503.
            Err(e) => {
                span.log(|| tracing::error!(error = %e, db = id, "database confirmation failed"));
                Err(ApiError::Unavailable {
                    message: OUTCOME_UNKNOWN_MESSAGE,
                    retry_after_secs: 1,
                })
            }
        },
        Ok(resp) => {
            if let Err(e) = state.control.release_database(id).await {
                span.log(
                    || tracing::error!(error = %e, db = id, "releasing a failed allocation failed"),
                );
            }
            Ok(client_response(resp))
        }
        Err(e) => {
            if let Err(e) = state.control.release_database(id).await {
                span.log(
                    || tracing::error!(error = %e, db = id, "releasing a failed allocation failed"),
                );
            }
            Err(shard_failure(span, &allocation.shard.url, e))
        }
    };
    state.access.forget(caller.user_id());
    result
}

async fn confirm(state: &AppState, id: &str) -> Result<(), ClientError> {
    match state.control.confirm_database(id).await {
        Ok(_) => Ok(()),
        Err(_) => state.control.confirm_database(id).await.map(|_| ()),
    }
}
