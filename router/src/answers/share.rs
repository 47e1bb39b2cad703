//! `GET /api/share/{token}/records`: the read behind a view's share link.
//! No API key: the token in the path is the credential, and the shard
//! checks it (it stores only the token's SHA-256). The router charges the
//! address shield as for `GET /api/health` (60 a minute per address
//! without a bearer), routes by the routing tag inside the token (a
//! malformed token or an unknown tag: 404), waits out a move's hold and
//! retries 421s (`misplaced`), and signs a share principal
//! (`Principal::share_read`: no user, no key, no role) that the shard
//! accepts on this route only. The client's credential is never forwarded.

use std::sync::Arc;

use cluster_protocol::principal::Principal;
use http::{Request, Response};
use hyper::body::Incoming;

use crate::edge::trace::{self, RequestSpan};
use crate::errors::{empty, ApiError, Body};
use crate::forward::client::{client_response, request_headers, shard_failure};
use crate::forward::placement::Placement;
use crate::forward::principal_sign;
use crate::forward::{hold, misplaced};
use crate::gate::auth;
use crate::state::AppState;

/// Answers a share read; `tag` is `None` for a malformed token (404).
pub async fn serve(
    state: &AppState,
    req: Request<Incoming>,
    address: &str,
    tag: Option<&str>,
    span: &RequestSpan,
) -> Response<Body> {
    match forward(state, req, address, tag, span).await {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    }
}

async fn forward(
    state: &AppState,
    req: Request<Incoming>,
    address: &str,
    tag: Option<&str>,
    span: &RequestSpan,
) -> Result<Response<Body>, ApiError> {
    auth::shield(state, req.headers(), address).await?;
    let tag = tag.ok_or(ApiError::NotFound)?;
    // A GET's body is not read: the shard gets (and the signature covers)
    // an empty one.
    let (parts, _unread) = req.into_parts();
    let placement = hold::placement(state, tag, span).await?;
    let (method, uri) = (&parts.method, &parts.uri);
    let one_attempt = |p: Arc<Placement>| {
        let mut headers = request_headers(&parts.headers, address);
        trace::propagate(span, &parts.headers, &mut headers);
        let principal = Principal::share_read(&p.database_id, Some(p.epoch));
        let signed = principal_sign::Request {
            method,
            uri,
            body: &[],
        };
        state.signer.attach(&mut headers, &principal, signed);
        async move {
            let shard_url = p.shard.url.as_str();
            state
                .forwarder
                .send(shard_url, method, uri, headers, empty())
                .await
                .map_err(|e| shard_failure(span, shard_url, e))
        }
    };
    let resp = misplaced::send(state, tag, placement, span, one_attempt).await?;
    Ok(client_response(resp))
}
