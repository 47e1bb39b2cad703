//! Tagged routes: authorize against the cached placement and the caller's
//! access, then forward to the owning shard with a principal signed over the
//! request (method, path and query, body digest: the body is read whole, at
//! most `cluster_protocol::MAX_BODY_BYTES`). A move's hold is waited out
//! and 421 answers are retried (`misplaced`); a refused link target in
//! another database is settled by `link_target`. A record write that may
//! fetch attachment URLs carries the account's upload allowance, and the
//! fetches the shard reports are added to it (`upload_limit`). Uploads and
//! imports stream their bodies instead (`streamed`).

use std::sync::Arc;

use cluster_protocol::routes::Streamed;
use http::{HeaderValue, Response};
use hyper::body::Incoming;

use crate::edge::trace::{self, RequestSpan};
use crate::errors::{full, ApiError, Body};
use crate::forward::client::{client_response, prepare_body, request_headers, shard_failure};
use crate::forward::placement::Placement;
use crate::forward::principal_sign::Request;
use crate::forward::streamed::{self, Destination};
use crate::forward::{hold, link_target, misplaced};
use crate::gate::auth::Caller;
use crate::gate::upload_limit;
use crate::state::AppState;

pub async fn forward(
    state: &AppState,
    caller: &Caller,
    tag: &str,
    streamed: Option<Streamed>,
    req: http::Request<Incoming>,
    span: &RequestSpan,
) -> Result<Response<Body>, ApiError> {
    if let Some(route) = streamed {
        streamed::check_declared(route, req.headers())?;
    }
    // The import preview does not check membership (part B): the shard
    // settles who may import.
    let import = streamed == Some(Streamed::Import);
    let placement = hold::placement(state, tag, span).await?;
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
        // Waited out before a byte is read: the body cannot be sent twice.
        let placement = hold::released(state, tag, placement.clone(), span).await?;
        let to = Destination {
            tag,
            placement: &placement,
            role,
            support,
        };
        return streamed::forward(state, caller, route, to, req, span).await;
    }

    let (parts, body) = req.into_parts();
    // Held until the request is done: the body's bytes in the budget.
    let (body, _reserved) = prepare_body(
        &parts.headers,
        body,
        cluster_protocol::MAX_BODY_BYTES,
        state.config.connections.body_timeout,
        &state.body_budget,
    )
    .await?;
    let signed = Request {
        method: &parts.method,
        uri: &parts.uri,
        body: &body,
    };

    let (method, uri) = (&parts.method, &parts.uri);
    // A write that may fetch URLs takes what is left of the upload limit.
    let allowance = if upload_limit::may_fetch(method, uri.path(), &body) {
        let a = state
            .uploads
            .allowance(&state.limiter, caller.user_id())
            .await;
        HeaderValue::try_from(a.header_value()).ok()
    } else {
        None
    };
    let one_attempt = |p: Arc<Placement>| {
        // Built per attempt (a retry is rare) rather than cloned per request.
        let mut headers = request_headers(&parts.headers, &caller.address);
        trace::propagate(span, &parts.headers, &mut headers);
        if let Some(a) = &allowance {
            headers.insert(upload_limit::ALLOWANCE_HEADER, a.clone());
        }
        let epoch = Some(p.epoch);
        state.signer.attach_with(
            &mut headers,
            &caller.key.record.id,
            |pr| caller.is_principal(pr, Some(db), role, support, epoch),
            || caller.principal(Some(db), role, support, epoch),
            signed,
        );
        let body = full(body.clone());
        async move {
            let shard_url = p.shard.url.as_str();
            state
                .forwarder
                .send(shard_url, method, uri, headers, body)
                .await
                .map_err(|e| shard_failure(span, shard_url, e))
        }
    };
    let mut resp = misplaced::send(state, tag, placement.clone(), span, one_attempt).await?;
    let fetched = upload_limit::take_fetched(resp.headers_mut());
    if fetched > 0 {
        let user = caller.user_id();
        state
            .uploads
            .add_fetches(&state.limiter, user, fetched)
            .await;
    }
    if let Some(table_id) = link_target::foreign_table(&resp) {
        let headers = &parts.headers;
        return link_target::answer(state, caller, &access, &table_id, resp, headers, span).await;
    }
    Ok(client_response(resp))
}
