//! One span per request, parented on the router's W3C `traceparent`.

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::propagation::Extractor;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

pub async fn request_span(request: Request, next: Next) -> Response {
    let span = tracing::info_span!(
        "request",
        method = %request.method(),
        path = %cluster_protocol::ids::loggable_path(request.uri().path()),
        status = tracing::field::Empty,
    );
    let parent =
        opentelemetry::global::get_text_map_propagator(|p| p.extract(&Headers(request.headers())));
    // Fails only when no OpenTelemetry layer is installed; nothing to do then.
    let _ = span.set_parent(parent);
    let response = next.run(request).instrument(span.clone()).await;
    span.record("status", response.status().as_u16());
    tracing::debug!(parent: &span, status = response.status().as_u16(), "request done");
    response
}
