//! W3C trace context: continue the caller's trace (or start one) and hand it
//! to the shard in `traceparent`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use http::{HeaderMap, HeaderValue, Method, Uri};
use opentelemetry::propagation::{Extractor, Injector};
use rand::Rng;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Whether spans are exported (the condition `telemetry::init` uses).
fn exporting() -> bool {
    static EXPORTING: OnceLock<bool> = OnceLock::new();
    *EXPORTING.get_or_init(|| std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some())
}

/// The span of one request. Its `method`, `path` and `status` fields are
/// recorded only when they can be seen: at once when spans are exported,
/// otherwise by [`RequestSpan::describe`] right before something is logged
/// under it. (The fmt layer formats a span's fields into a string when they
/// are recorded, logged or not: about 5 % of the router's CPU per request.)
pub struct RequestSpan {
    span: tracing::Span,
    method: Method,
    uri: Uri,
    described: AtomicBool,
}

impl RequestSpan {
    /// Opens the span, as a child of the incoming trace context if any.
    pub fn new(method: &Method, uri: &Uri, headers: &HeaderMap) -> Self {
        let span = tracing::info_span!("request", method = Empty, path = Empty, status = Empty);
        adopt_parent(&span, headers);
        let this = Self {
            span,
            method: method.clone(),
            uri: uri.clone(),
            described: AtomicBool::new(false),
        };
        if exporting() {
            this.describe();
        }
        this
    }

    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Records method and path (once); call before logging under the span.
    pub fn describe(&self) -> &Self {
        if !self.described.swap(true, Ordering::Relaxed) {
            self.span
                .record("method", tracing::field::display(&self.method));
            self.span
                .record("path", tracing::field::display(self.uri.path()));
        }
        self
    }

    /// Records the response status when spans are exported.
    pub fn finish(&self, status: http::StatusCode) {
        if exporting() {
            self.span.record("status", status.as_u16());
        }
    }
}

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
    let _ = span.set_parent(parent);
}

/// Sets `traceparent` on the outgoing headers: from the span's OpenTelemetry
/// context when export is on, else the incoming trace id with a new span id
/// (or a fresh trace).
pub fn propagate(span: &tracing::Span, incoming: &HeaderMap, out: &mut HeaderMap) {
    if exporting() {
        let cx = span.context();
        opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut Inject(out)));
        if out.contains_key(TRACEPARENT) {
            return;
        }
    }
    let value = fallback(incoming.get(TRACEPARENT).and_then(|v| v.to_str().ok()));
    if let Ok(v) = HeaderValue::from_bytes(&value) {
        out.insert(TRACEPARENT, v);
    }
}

pub const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");

/// `00-<trace>-<span>-<flags>`, keeping a valid incoming trace id and flags.
pub fn fallback_traceparent(incoming: Option<&str>) -> String {
    String::from_utf8_lossy(&fallback(incoming)).into_owned()
}

/// The incoming trace id and flags, when `incoming` is a valid traceparent.
fn parse(incoming: &str) -> Option<(&str, &str)> {
    let mut parts = incoming.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, n| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(version, 2)
        && version != "ff"
        && hex(trace, 32)
        && trace.bytes().any(|b| b != b'0')
        && hex(span, 16)
        && hex(flags, 2))
    .then_some((trace, flags))
}

fn fallback(incoming: Option<&str>) -> [u8; 55] {
    let mut out = [0u8; 55];
    out[..3].copy_from_slice(b"00-");
    out[35] = b'-';
    out[52] = b'-';
    let mut random = [0u8; 24];
    rand::thread_rng().fill(&mut random[..]);
    match incoming.and_then(parse) {
        Some((trace, flags)) => {
            out[3..35].copy_from_slice(trace.as_bytes());
            out[53..55].copy_from_slice(flags.as_bytes());
            out.make_ascii_lowercase();
        }
        None => {
            hex_into(&random[..16], &mut out[3..35]);
            out[53..55].copy_from_slice(b"01");
        }
    }
    hex_into(&random[16..], &mut out[36..52]);
    out
}

fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[(b >> 4) as usize];
        out[2 * i + 1] = DIGITS[(b & 15) as usize];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_valid_incoming_trace() {
        let t = fallback_traceparent(Some(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ));
        assert!(t.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
        assert!(t.ends_with("-01"));
        assert_ne!(&t[36..52], "00f067aa0ba902b7");
    }

    #[test]
    fn lowercases_and_keeps_the_flags() {
        let t = fallback_traceparent(Some(
            " 00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-00-extra ",
        ));
        assert!(t.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
        assert!(t.ends_with("-00"));
        let span = &t[36..52];
        assert!(span
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    }

    #[test]
    fn starts_a_trace_when_missing_or_invalid() {
        for incoming in [
            None,
            Some("garbage"),
            Some("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
        ] {
            let t = fallback_traceparent(incoming);
            assert_eq!(t.len(), 55);
            assert!(!t.contains("00000000000000000000000000000000"));
        }
    }
}
