//! W3C trace context across the tiers, and the spans of HTTP calls with
//! OpenTelemetry's HTTP semantic-convention attribute names.
//!
//! * [`server`]: the axum middleware of the shard node and the control
//!   plane: one `server` span per request, a child of the caller's
//!   `traceparent`, named `METHOD route-template`.
//! * [`inject`]: puts a span's context in outgoing headers (the
//!   control-plane client's calls: `cluster_protocol::control::client`).
//!
//! Without an OpenTelemetry layer ([`crate::telemetry::traced`] false)
//! there is no context: nothing is extracted or injected.

use std::borrow::Cow;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderMap, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector};
use tracing::field::Empty;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::metrics::UNKNOWN_ROUTE;

/// The W3C trace-context header.
pub const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");

struct Extract<'a>(&'a HeaderMap);

impl Extractor for Extract<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct Inject<'a>(&'a mut HeaderMap);

impl Injector for Inject<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::try_from(key),
            HeaderValue::try_from(value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// Makes `span` a child of the incoming trace context, if any.
pub fn adopt_parent(span: &tracing::Span, incoming: &HeaderMap) {
    if !incoming.contains_key(TRACEPARENT) {
        return;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Extract(incoming)));
    // Fails only when no OpenTelemetry layer is installed; nothing to do then.
    let _ = span.set_parent(parent);
}

/// Sets `traceparent` (and `tracestate`) of `span` on outgoing headers;
/// nothing when the span has no OpenTelemetry context.
pub fn inject(span: &tracing::Span, out: &mut HeaderMap) {
    let cx = span.context();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut Inject(out)));
}

/// The `server` span of one request: named `METHOD route`, with
/// `http.request.method`, `http.route`, `url.path` (as `loggable` shows
/// it) and, once answered, `http.response.status_code`.
pub fn server_span(method: &http::Method, route: &str, path: &str) -> tracing::Span {
    tracing::info_span!(
        "request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = %method,
        http.route = %route,
        url.path = %path,
        http.response.status_code = Empty,
    )
}

/// Records the answer's status on a span of [`server_span`] (a 5xx is an
/// error status).
pub fn record_status(span: &tracing::Span, status: http::StatusCode) {
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
}

/// Axum middleware: runs the request inside its [`server_span`], a child
/// of the caller's trace context. `loggable` is how the path may appear
/// (credentials in it cut). Layer it outermost, on the whole router.
pub async fn server(request: Request, next: Next, loggable: fn(&str) -> Cow<'_, str>) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNKNOWN_ROUTE, |m| m.as_str());
    let span = server_span(request.method(), route, &loggable(request.uri().path()));
    adopt_parent(&span, request.headers());
    let response = next.run(request).instrument(span.clone()).await;
    record_status(&span, response.status());
    response
}
