//! W3C trace context: continue the caller's trace (or start one) and hand it
//! to the shard in `traceparent`.

use http::{HeaderMap, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector};
use rand::Rng;
use tracing_opentelemetry::OpenTelemetrySpanExt;

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
    if !incoming.contains_key("traceparent") {
        return;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Extract(incoming)));
    let _ = span.set_parent(parent);
}

/// Sets `traceparent` on the outgoing headers: from the span's OpenTelemetry
/// context when export is on, else the incoming trace id with a new span id
/// (or a fresh trace).
pub fn propagate(span: &tracing::Span, incoming: Option<&HeaderValue>, out: &mut HeaderMap) {
    let cx = span.context();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut Inject(out)));
    if out.contains_key("traceparent") {
        return;
    }
    let value = fallback_traceparent(incoming.and_then(|v| v.to_str().ok()));
    if let Ok(v) = HeaderValue::try_from(value) {
        out.insert("traceparent", v);
    }
}

fn random_hex<const N: usize>() -> String {
    let mut bytes = [0u8; N];
    rand::thread_rng().fill(&mut bytes[..]);
    hex::encode(bytes)
}

/// `00-<trace>-<span>-<flags>`, keeping a valid incoming trace id and flags.
pub fn fallback_traceparent(incoming: Option<&str>) -> String {
    let parsed = incoming.and_then(|v| {
        let parts: Vec<&str> = v.trim().split('-').collect();
        let hex = |s: &str, n| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
        (parts.len() >= 4
            && hex(parts[0], 2)
            && parts[0] != "ff"
            && hex(parts[1], 32)
            && parts[1] != "0".repeat(32)
            && hex(parts[2], 16)
            && hex(parts[3], 2))
        .then(|| (parts[1].to_ascii_lowercase(), parts[3].to_ascii_lowercase()))
    });
    let (trace, flags) = parsed.unwrap_or_else(|| (random_hex::<16>(), "01".to_string()));
    format!("00-{trace}-{}-{flags}", random_hex::<8>())
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
