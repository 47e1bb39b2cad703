//! Public file links: `GET`/`HEAD /api/files/{att_id}/{variant}?expires=..&signature=..`.
//! No API key: the HMAC in the query is the credential, and the shard
//! checks it. The router charges the address's file shield (a budget of its
//! own, `ROUTER_FILES_LIMIT_PER_MIN`: a grid shows many thumbnails at once),
//! routes by the routing tag inside the attachment id (waiting out a move's
//! hold, retrying 421s: `misplaced`), forwards only the
//! conditional and range headers, sends no principal, and streams the
//! answer back keeping only the headers a file response needs.

use std::sync::Arc;

use http::{header, HeaderMap, HeaderName, Request, Response};
use hyper::body::Incoming;

use crate::edge::trace::{self, RequestSpan};
use crate::errors::{empty, ApiError, Body};
use crate::forward::client::{shard_failure, X_FORWARDED_FOR};
use crate::forward::placement::Placement;
use crate::forward::{hold, misplaced};
use crate::state::AppState;

/// Redis key prefix of the per-address file shield.
const SHIELD_PREFIX: &str = "router:rl:files:";

/// Request headers a file request passes on.
const FORWARDED: [HeaderName; 4] = [
    header::RANGE,
    header::IF_RANGE,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
];

/// Response headers a client receives from a file answer.
const KEPT: [HeaderName; 12] = [
    header::CONTENT_TYPE,
    header::CONTENT_LENGTH,
    header::CONTENT_RANGE,
    header::ACCEPT_RANGES,
    header::CONTENT_DISPOSITION,
    header::ETAG,
    header::LAST_MODIFIED,
    header::CACHE_CONTROL,
    header::EXPIRES,
    header::VARY,
    header::X_CONTENT_TYPE_OPTIONS,
    header::CONTENT_SECURITY_POLICY,
];

/// Answers a file link; `tag` is `None` for a malformed one (404).
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
    let limit = state.config.files_limit_per_min;
    let shield = state
        .limiter
        .charge_budget(SHIELD_PREFIX, address, limit)
        .await;
    if !shield.allowed {
        return Err(ApiError::RateLimited {
            retry_after_ms: shield.retry_after_ms,
        });
    }
    let tag = tag.ok_or(ApiError::NotFound)?;
    let (parts, _unread) = req.into_parts();
    let placement = hold::placement(state, tag, span).await?;
    let (method, uri) = (&parts.method, &parts.uri);
    let one_attempt = |p: Arc<Placement>| {
        let mut headers = request_headers(&parts.headers, address);
        trace::propagate(span, &parts.headers, &mut headers);
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

/// What a shard receives of a file request: the range and conditional
/// headers and the client's address. No credential, no principal.
pub fn request_headers(incoming: &HeaderMap, client_address: &str) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(FORWARDED.len() + 2);
    for name in &FORWARDED {
        for value in incoming.get_all(name) {
            out.append(name.clone(), value.clone());
        }
    }
    if let Ok(v) = http::HeaderValue::try_from(client_address) {
        out.insert(X_FORWARDED_FOR, v);
    }
    out
}

/// The shard's file answer as the client sees it: status, body streamed,
/// only the [`KEPT`] headers.
pub fn client_response(resp: Response<Incoming>) -> Response<Body> {
    use http_body_util::BodyExt;
    let (parts, body) = resp.into_parts();
    let mut out = Response::new(body.map_err(Into::into).boxed_unsync());
    *out.status_mut() = parts.status;
    for name in &KEPT {
        for value in parts.headers.get_all(name) {
            out.headers_mut().append(name.clone(), value.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn only_range_and_conditional_headers_reach_the_shard() {
        let mut h = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer key_abcdefghijkl.secret"),
            ("cookie", "session=1"),
            ("x-cluster-principal", "forged"),
            ("range", "bytes=0-99"),
            ("if-range", "\"e1\""),
            ("if-none-match", "\"e1\""),
            ("if-modified-since", "Tue, 24 Nov 2026 10:00:00 GMT"),
            ("x-forwarded-for", "6.6.6.6"),
        ] {
            h.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let out = request_headers(&h, "1.2.3.4");
        for gone in ["authorization", "cookie", "x-cluster-principal"] {
            assert!(out.get(gone).is_none(), "{gone}");
        }
        assert_eq!(out["range"], "bytes=0-99");
        assert_eq!(out["if-range"], "\"e1\"");
        assert_eq!(out["if-none-match"], "\"e1\"");
        assert_eq!(out["if-modified-since"], "Tue, 24 Nov 2026 10:00:00 GMT");
        assert_eq!(out["x-forwarded-for"], "1.2.3.4");
        assert_eq!(out.len(), 5);
    }
}
