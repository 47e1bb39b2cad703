//! W3C trace context: continue the caller's trace (or start one) and hand it
//! to the shard in `traceparent`.

use std::sync::OnceLock;

use http::{HeaderMap, HeaderValue, Method, Uri};
use rand::Rng;
pub use service_kit::trace::TRACEPARENT;
use service_kit::trace::{adopt_parent, inject};

/// Whether spans carry OpenTelemetry contexts: they are exported (the
/// condition `telemetry::init` uses) or logged with their ids (JSON lines).
fn exporting() -> bool {
    static EXPORTING: OnceLock<bool> = OnceLock::new();
    *EXPORTING.get_or_init(|| std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some())
        || service_kit::telemetry::traced()
}

/// The span of one request (a `server` span with OpenTelemetry's HTTP
/// attribute names, `service_kit::trace::server_span`), opened only when
/// something uses it: at once when spans are exported (the export is what
/// it is for), the access log is on (its line is written inside the span,
/// with the trace id) or debug logging is on (what logs at debug during the
/// request then says which request it is), otherwise when the router logs
/// something about the request ([`RequestSpan::log`]). An open span costs
/// the tracing registry and the fmt layer's formatting of its fields on
/// every request, logged or not.
pub struct RequestSpan {
    span: OnceLock<tracing::Span>,
    method: Method,
    uri: Uri,
    route: &'static str,
}

impl RequestSpan {
    /// Opens the span at once when it is exported (as a child of the
    /// incoming trace context, if any), the access log is on or debug
    /// logging is on. `route` is the request's route template.
    pub fn new(method: &Method, uri: &Uri, headers: &HeaderMap, route: &'static str) -> Self {
        let this = Self {
            span: OnceLock::new(),
            method: method.clone(),
            uri: uri.clone(),
            route,
        };
        if exporting()
            || service_kit::telemetry::access_log()
            || tracing::enabled!(tracing::Level::DEBUG)
        {
            adopt_parent(this.open(), headers);
        }
        this
    }

    fn open(&self) -> &tracing::Span {
        self.span.get_or_init(|| {
            service_kit::trace::server_span(
                &self.method,
                self.route,
                &cluster_protocol::ids::loggable_path(self.uri.path()),
            )
        })
    }

    /// The span when it was opened at once: the request runs inside it.
    pub fn opened(&self) -> Option<&tracing::Span> {
        self.span.get()
    }

    /// Runs `log` (a `tracing` event) inside the span, opening it if need
    /// be, so the line names the request's method and path.
    pub fn log<R>(&self, log: impl FnOnce() -> R) -> R {
        self.open().in_scope(log)
    }

    /// Records the response status when spans are exported.
    pub fn finish(&self, status: http::StatusCode) {
        if let Some(span) = self.span.get().filter(|_| exporting()) {
            service_kit::trace::record_status(span, status);
        }
    }
}

/// Sets `traceparent` on the outgoing headers: from the span's OpenTelemetry
/// context when export is on, else the incoming trace id with a new span id
/// (or a fresh trace).
pub fn propagate(span: &RequestSpan, incoming: &HeaderMap, out: &mut HeaderMap) {
    if exporting() {
        inject(span.open(), out);
        if out.contains_key(TRACEPARENT) {
            return;
        }
    }
    let value = fallback(incoming.get(TRACEPARENT).and_then(|v| v.to_str().ok()));
    if let Ok(v) = HeaderValue::from_bytes(&value) {
        out.insert(TRACEPARENT, v);
    }
}

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
