//! Two guards every route passes through, so that no client input reaches
//! a 500 and no refusal leaves without part C's envelope:
//!
//! * [`refuse_nul_in_address`]: a `%00` in the path or the query is
//!   refused before any handler runs (PostgreSQL text cannot hold NUL, so
//!   it could only fail later, as a 500). Bodies are checked where they are
//!   parsed (`body::parse_object`).
//! * [`envelope_rejections`]: a refusal produced by the framework rather
//!   than a handler (a path or query that does not decode, a body axum
//!   refused, ...) is plain text; it is rewritten as the envelope with the
//!   status part C gives it. Handlers' own errors are already envelopes
//!   (`application/json`) and pass untouched.

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::http::body::{nul_refused, too_large};

/// The first query parameter whose name or value holds `%00`, by its name
/// as sent (still percent-encoded, NULs shown as `%00`).
fn nul_parameter(query: &str) -> Option<&str> {
    query
        .split('&')
        .find(|pair| pair.contains("%00"))
        .map(|pair| pair.split('=').next().unwrap_or(pair))
}

/// 400 for a NUL in a query parameter (naming it), 404 for one in the path
/// (no id holds a NUL, so no such resource).
pub async fn refuse_nul_in_address(request: Request, next: Next) -> Response {
    let uri = request.uri();
    if uri.path().contains("%00") {
        return ApiError::NotFound.into_response();
    }
    if let Some(name) = uri.query().and_then(nul_parameter) {
        return nul_refused(&format!("The query parameter '{name}'")).into_response();
    }
    next.run(request).await
}

/// Whether a response is already part C's envelope (or a success).
fn is_envelope(response: &Response) -> bool {
    response.status().as_u16() < 400
        || response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"))
}

/// Rewrites the framework's plain-text refusals as the envelope: a body
/// over the limit is the 400 naming it (as `body::JsonObject` answers), a
/// request the routes cannot take is 400 with the framework's reason (it
/// names what did not decode), an unknown route or method 404; anything
/// else is the internal 500 (its text is logged, never shown).
pub async fn envelope_rejections(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if is_envelope(&response) {
        return response;
    }
    let status = response.status();
    let text = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let error = match status {
        StatusCode::PAYLOAD_TOO_LARGE => too_large(),
        StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED => ApiError::NotFound,
        StatusCode::UNAUTHORIZED => ApiError::Unauthorized,
        s if s.is_client_error() => ApiError::bad_request(if text.is_empty() {
            format!(
                "The request was refused: {}.",
                s.canonical_reason().unwrap_or("bad request")
            )
        } else {
            format!("The request was refused: {text}")
        }),
        _ => ApiError::Internal(anyhow::anyhow!(
            "framework response {status} without the envelope: {text}"
        )),
    };
    error.into_response()
}

#[cfg(test)]
mod tests {
    use super::nul_parameter;

    #[test]
    fn names_the_parameter_holding_a_nul() {
        assert_eq!(nul_parameter("a=1&search=x%00y&b=2"), Some("search"));
        assert_eq!(nul_parameter("k%00=1"), Some("k%00"));
        assert_eq!(nul_parameter("a=1&b=%20"), None);
    }
}
