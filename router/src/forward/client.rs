//! Forwarding to shard nodes: a pooled keep-alive HTTP/1 client, header
//! hygiene (hop-by-hop, `x-cluster-*`, the client's credential), and request
//! bodies read whole under a deadline and the router's budget of buffered
//! bytes (`crate::forward::body_budget`; the principal's signature covers their
//! digest; a buffered body also lets a 421 be retried).

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{header, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::edge::trace::{RequestSpan, TRACEPARENT};
use crate::errors::{ApiError, Body};
use crate::forward::body_budget::{BodyBudget, Reservation};
use crate::forward::shard_conn::{self, ShardPool};
use crate::forward::stream_body::Progress;

const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
pub const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");

const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    KEEP_ALIVE,
    PROXY_CONNECTION,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

/// This core's connections to the shards.
pub struct Forwarder {
    pool: ShardPool,
}

impl Forwarder {
    /// `response_timeout`: how long a shard may take to answer (504 after).
    pub fn new(max_idle_per_host: usize, response_timeout: Duration) -> Self {
        Self {
            pool: ShardPool::new(max_idle_per_host, response_timeout),
        }
    }

    /// Sends a request to the shard at `shard_url`; only the path and query
    /// of `uri` are used.
    pub async fn send(
        &self,
        shard_url: &str,
        method: &Method,
        uri: &Uri,
        headers: HeaderMap,
        body: Body,
    ) -> Result<Response<Incoming>, shard_conn::Error> {
        let req = shard_request(method, uri, headers, body);
        self.pool.send(shard_url, req).await
    }
}

impl Forwarder {
    /// Like [`Forwarder::send`] for a body streamed from the client as it
    /// arrives (see `ShardPool::send_streamed`).
    pub async fn send_streamed(
        &self,
        shard_url: &str,
        method: &Method,
        uri: &Uri,
        headers: HeaderMap,
        body: Body,
        progress: &Progress,
    ) -> Result<Response<Incoming>, shard_conn::Error> {
        let req = shard_request(method, uri, headers, body);
        self.pool.send_streamed(shard_url, req, progress).await
    }
}

/// The request a shard receives: origin-form target, the given headers.
fn shard_request(method: &Method, uri: &Uri, headers: HeaderMap, body: Body) -> Request<Body> {
    let mut req = Request::new(body);
    *req.method_mut() = method.clone();
    *req.uri_mut() = if uri.scheme().is_none() && uri.authority().is_none() {
        uri.clone()
    } else {
        // Absolute-form from the client: the shard gets origin-form.
        uri.path_and_query()
            .map_or(Uri::from_static("/"), |p| p.clone().into())
    };
    *req.headers_mut() = headers;
    req
}

fn named_in_connection(headers: &HeaderMap) -> Vec<HeaderName> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::try_from(n.trim()).ok())
        .collect()
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for name in named_in_connection(headers) {
        headers.remove(name);
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

/// Headers a shard never receives from a client: only the router sets
/// `x-cluster-*`, the trace context and `x-forwarded-*`; the credential and
/// Host stay here; framing (and `Expect: 100-continue`, which the router
/// answers itself when it starts reading) is the router's own.
fn withheld(name: &HeaderName) -> bool {
    name == header::AUTHORIZATION
        // The browser's session cookie is the router's alone.
        || name == header::COOKIE
        || name == header::HOST
        || name == header::TRANSFER_ENCODING
        || name == header::EXPECT
        || name == TRACEPARENT
        || name == TRACESTATE
        || name == X_FORWARDED_FOR
        || HOP_BY_HOP.contains(name)
        || name.as_str().starts_with("x-cluster-")
}

/// The headers a shard receives: the client's, minus hop-by-hop ones (and
/// those its `Connection` names), any `x-cluster-*` (only the router may set
/// those), the credential (key or session cookie) and Host; plus `x-forwarded-for` /
/// `x-forwarded-host`.
pub fn request_headers(incoming: &HeaderMap, client_address: &str) -> HeaderMap {
    let named = named_in_connection(incoming);
    let mut out = HeaderMap::with_capacity(incoming.len() + 6);
    for (name, value) in incoming {
        if !withheld(name) && !named.contains(name) {
            out.append(name.clone(), value.clone());
        }
    }
    if let Some(host) = incoming.get(header::HOST) {
        out.insert(X_FORWARDED_HOST, host.clone());
    }
    if let Ok(v) = HeaderValue::try_from(client_address) {
        out.insert(X_FORWARDED_FOR, v);
    }
    out
}

/// The shard's response as the client sees it (hop-by-hop headers removed,
/// body streamed).
pub fn client_response(resp: Response<Incoming>) -> Response<Body> {
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove(header::TRANSFER_ENCODING);
    Response::from_parts(parts, body.map_err(Into::into).boxed_unsync())
}

/// How much of an over-limit body is still read (and dropped) before the
/// 400 naming the limit, so a client that sends its body whole reads that
/// answer instead of a reset connection. Beyond it the answer goes at once.
const DRAIN_LIMIT: u64 = 4 * cluster_protocol::MAX_BODY_BYTES as u64;

/// Reads the whole request body (the principal's signature covers its
/// digest; a buffered body also lets a 421 be retried): at most `limit`
/// bytes, a larger one is a 400 naming the limit; it must arrive whole
/// within `time` (408 otherwise), and fit in the router's `budget` (503
/// otherwise). The reservation is held until the request is done.
pub async fn prepare_body(
    headers: &HeaderMap,
    body: Incoming,
    limit: usize,
    time: Duration,
    budget: &Arc<BodyBudget>,
) -> Result<(Bytes, Reservation), ApiError> {
    read_limited(body, declared_length(headers), limit, time, budget).await
}

/// The body length a request declares in `Content-Length`, if any.
pub fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// Reads a whole body of at most `limit` bytes (400 beyond it, after
/// draining up to [`DRAIN_LIMIT`]) that must arrive within `time` (408
/// otherwise). Its bytes are reserved in `budget` before they are held
/// (the declared length at once, else as they arrive): 503 when they do
/// not fit. The returned reservation gives them back when dropped.
pub async fn read_limited(
    body: Incoming,
    declared: Option<u64>,
    limit: usize,
    time: Duration,
    budget: &Arc<BodyBudget>,
) -> Result<(Bytes, Reservation), ApiError> {
    let reserved = budget.reservation();
    match tokio::time::timeout(time, read_or_drain(body, declared, limit, reserved)).await {
        Err(_) => Err(ApiError::RequestTimeout),
        Ok(read) => read,
    }
}

async fn read_or_drain(
    mut body: Incoming,
    declared: Option<u64>,
    limit: usize,
    mut reserved: Reservation,
) -> Result<(Bytes, Reservation), ApiError> {
    let too_large = || {
        ApiError::BadRequest(format!(
            "Request body is larger than the {} limit.",
            limit_text(limit)
        ))
    };
    if declared.is_some_and(|n| n > DRAIN_LIMIT) {
        return Err(too_large());
    }
    let limit = limit as u64;
    // A body declared over the limit is only counted (and dropped).
    let keep = declared.is_none_or(|n| n <= limit);
    let capacity = if keep { declared.unwrap_or(0) } else { 0 };
    reserved.cover(capacity)?;
    let mut buf = BytesMut::with_capacity(capacity as usize);
    let mut seen: u64 = 0;
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|_| ApiError::BadRequest("Request body could not be read.".into()))?;
        if let Ok(data) = frame.into_data() {
            seen += data.len() as u64;
            if seen > DRAIN_LIMIT {
                return Err(too_large());
            }
            if keep && seen <= limit {
                reserved.cover(seen)?;
                buf.extend_from_slice(&data);
            }
        }
    }
    if seen > limit {
        return Err(too_large());
    }
    Ok((buf.freeze(), reserved))
}

/// A byte limit as people read it (`10 MiB`, `64 KiB`).
fn limit_text(limit: usize) -> String {
    if limit >= 1 << 20 && limit.is_multiple_of(1 << 20) {
        format!("{} MiB", limit >> 20)
    } else {
        format!("{} KiB", limit.div_ceil(1 << 10))
    }
}

/// The answer for a request a shard did not answer: 504 when the shard
/// took too long, otherwise 503 (unreachable, retryable). Logged here.
pub fn shard_failure(span: &RequestSpan, shard: &str, e: shard_conn::Error) -> ApiError {
    if let shard_conn::Error::Timeout(..) = e {
        span.log(|| tracing::warn!(error = %e, "shard did not answer in time"));
        return ApiError::GatewayTimeout;
    }
    span.log(|| tracing::error!(error = %e, shard, "shard unreachable"));
    ApiError::dependency_down()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwarded_headers_are_cleaned() {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer key_x.y"),
        );
        h.insert(header::HOST, HeaderValue::from_static("api.example"));
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret"),
        );
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("x-cluster-principal", HeaderValue::from_static("forged"));
        h.insert("X-Cluster-Signature", HeaderValue::from_static("forged"));
        h.insert("x-forwarded-for", HeaderValue::from_static("6.6.6.6"));
        h.insert("traceparent", HeaderValue::from_static("00-forged"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.append(header::CONNECTION, HeaderValue::from_static("X-Other"));
        h.insert("x-other", HeaderValue::from_static("1"));
        h.insert(header::TE, HeaderValue::from_static("trailers"));
        h.insert(header::EXPECT, HeaderValue::from_static("100-continue"));
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let out = request_headers(&h, "1.2.3.4");
        assert!(out.get(header::AUTHORIZATION).is_none());
        assert!(out.get(header::HOST).is_none());
        assert!(out.get(header::CONNECTION).is_none());
        assert!(out.get("x-secret").is_none());
        assert!(out.get("x-cluster-principal").is_none());
        assert!(out.get("x-cluster-signature").is_none());
        for gone in ["traceparent", "keep-alive", "x-other", "te", "expect"] {
            assert!(out.get(gone).is_none(), "{gone}");
        }
        assert_eq!(out["x-forwarded-for"], "1.2.3.4");
        assert_eq!(out["x-forwarded-host"], "api.example");
        assert_eq!(out[header::CONTENT_TYPE], "application/json");
    }
}
