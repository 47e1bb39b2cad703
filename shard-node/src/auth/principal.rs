//! The signed principal: verified once per request, by a middleware that
//! guards every `/api/*` route and the internal lookup.

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cluster_protocol::principal::{
    Principal, HEADER_PRINCIPAL, HEADER_SIGNATURE, HEADER_TIMESTAMP,
};

use crate::error::ApiError;
use crate::state::AppState;

/// The verified principal of the request.
#[derive(Debug, Clone)]
pub struct Caller(pub Principal);

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Verifies the `x-cluster-*` headers against the cluster secret.
pub fn verify(headers: &HeaderMap, secret: &[u8]) -> Result<Principal, ApiError> {
    Principal::verify(
        secret,
        header(headers, HEADER_PRINCIPAL),
        header(headers, HEADER_TIMESTAMP),
        header(headers, HEADER_SIGNATURE),
        chrono::Utc::now().timestamp(),
    )
    .map_err(|e| {
        tracing::debug!(reason = %e, "principal refused");
        ApiError::Unauthorized
    })
}

/// Whether a path needs a signed principal: everything but the health check.
fn is_guarded(path: &str) -> bool {
    path != "/internal/health"
}

/// Middleware: refuses (401) any guarded request whose principal does not
/// verify, including requests for unknown paths, and stores the principal
/// for the extractors.
pub async fn require_principal(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    if is_guarded(request.uri().path()) {
        match verify(request.headers(), state.secret.expose().as_bytes()) {
            Ok(principal) => {
                request.extensions_mut().insert(Caller(principal));
            }
            Err(e) => return e.into_response(),
        }
    }
    next.run(request).await
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if let Some(caller) = parts.extensions.get::<Caller>() {
            return Ok(caller.clone());
        }
        let principal = verify(&parts.headers, state.secret.expose().as_bytes())?;
        parts.extensions.insert(Caller(principal.clone()));
        Ok(Caller(principal))
    }
}
