//! Tagged routes: authorize against the cached placement and the caller's
//! access, then forward to the owning shard with a principal signed over the
//! request (method, path and query, body digest: the body is read whole, at
//! most `cluster_protocol::MAX_BODY_BYTES`). A 421 from the shard drops the
//! placement and retries once; a refused link target in another database
//! is settled by `link_target`. Uploads and imports stream their bodies
//! instead (`streamed`).

use cluster_protocol::MISPLACED_STATUS;
use http::Response;
use hyper::body::Incoming;

use crate::auth::Caller;
use crate::errors::{full, ApiError, Body};
use crate::forward::{client_response, prepare_body, request_headers, shard_failure};
use crate::link_target;
use crate::principal_sign::Request;
use crate::state::AppState;
use crate::streamed::{self, Destination, StreamedRoute};
use crate::trace::{self, RequestSpan};

pub async fn forward(
    state: &AppState,
    caller: &Caller,
    tag: &str,
    import: bool,
    req: http::Request<Incoming>,
    span: &RequestSpan,
) -> Result<Response<Body>, ApiError> {
    let streamed = StreamedRoute::of(req.method(), req.uri().path());
    if let Some(route) = streamed {
        route.check_declared(req.headers())?;
    }
    let placement = state.placements.get(tag).await.map_err(|e| {
        span.log(|| tracing::error!(error = %e, tag, "placement lookup failed"));
        ApiError::dependency_down()
    })?;
    let placement = placement.ok_or(ApiError::NotFound)?;
    let db = placement.database_id.as_str();
    if !caller.key.record.databases.allows(db) {
        return Err(ApiError::NotFound);
    }
    let access = state
        .access
        .get(caller.user_id(), caller.user_version())
        .await
        .map_err(|e| {
            span.log(|| tracing::error!(error = %e, "user access lookup failed"));
            ApiError::dependency_down()
        })?;
    let role = access.role_in(db);
    let support = role.is_none() && access.has_support(db);
    if role.is_none() && !support && !import {
        return Err(ApiError::NotFound);
    }
    if let Some(route) = streamed {
        let to = Destination {
            tag,
            placement: &placement,
            role,
            support,
        };
        return streamed::forward(state, caller, route, to, req, span).await;
    }

    let (parts, body) = req.into_parts();
    let body = prepare_body(
        &parts.headers,
        body,
        cluster_protocol::MAX_BODY_BYTES,
        state.config.connections.body_timeout,
    )
    .await?;
    let signed = Request {
        method: &parts.method,
        uri: &parts.uri,
        body: &body,
    };

    let mut shard_url = placement.shard.url.clone();
    let mut epoch = placement.epoch;
    for try_no in 0..2 {
        // Built per attempt (a retry is rare) rather than cloned per request.
        let mut headers = request_headers(&parts.headers, &caller.address);
        trace::propagate(span, &parts.headers, &mut headers);
        state.signer.attach_with(
            &mut headers,
            &caller.key.record.id,
            |p| caller.is_principal(p, Some(db), role, support, Some(epoch)),
            || caller.principal(Some(db), role, support, Some(epoch)),
            signed,
        );
        let resp = state
            .forwarder
            .send(
                &shard_url,
                &parts.method,
                &parts.uri,
                headers,
                full(body.clone()),
            )
            .await
            .map_err(|e| shard_failure(span, &shard_url, e))?;
        if resp.status().as_u16() != MISPLACED_STATUS {
            if let Some(table_id) = link_target::foreign_table(&resp) {
                let headers = &parts.headers;
                return link_target::answer(state, caller, &access, &table_id, resp, headers, span)
                    .await;
            }
            return Ok(client_response(resp));
        }
        state.placements.forget_tag(tag);
        if try_no > 0 {
            break;
        }
        span.log(|| {
            let what = "misplaced: refreshing placement and retrying";
            tracing::info!(shard = %shard_url, db, "{what}")
        });
        let fresh = state.placements.get(tag).await.map_err(|e| {
            span.log(|| tracing::error!(error = %e, tag, "placement refresh failed"));
            ApiError::dependency_down()
        })?;
        let fresh = fresh.ok_or(ApiError::NotFound)?;
        shard_url = fresh.shard.url.clone();
        epoch = fresh.epoch;
    }
    span.log(|| tracing::error!(db, "shard still says misplaced after a refresh"));
    Err(ApiError::dependency_down())
}
