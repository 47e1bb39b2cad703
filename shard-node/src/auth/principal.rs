//! The signed principal: verified once per request, by a middleware that
//! guards every `/api/*` route and the internal lookup.
//!
//! The signature (version 2 of `cluster_protocol::principal`) covers the
//! method, the path and query and the body's SHA-256 besides the principal
//! and the timestamp. The middleware checks the headers first, then reads
//! the body whole (at most `BODY_LIMIT_BYTES`), checks its digest and hands
//! the handler the very bytes it checked. Version 1 signatures are refused.
//!
//! On the two streamed routes (uploads and imports: `Body::Streamed` in
//! `cluster_protocol::routes`) a router signs `STREAMED_BODY` instead of a
//! digest and streams the body unread; the middleware then hands the body to the handler unread too,
//! and the handler caps what it reads.

use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cluster_protocol::principal::{
    body_matches, Presented, Principal, Target, VerifyError, HEADER_BODY_SHA256, HEADER_PRINCIPAL,
    HEADER_SIGNATURE, HEADER_SIGNATURE_VERSION, HEADER_TIMESTAMP, STREAMED_BODY,
};

use crate::config::BODY_LIMIT_BYTES;
use crate::error::ApiError;
use crate::http::body::too_large;
use crate::state::AppState;

/// The verified principal of the request.
#[derive(Debug, Clone)]
pub struct Caller(pub Principal);

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn refused(reason: VerifyError) -> ApiError {
    tracing::debug!(%reason, "principal refused");
    ApiError::Unauthorized
}

/// Verifies the `x-cluster-*` headers against the cluster secret and the
/// request's method and target; the body digest is checked by the caller.
pub fn verify(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    secret: &[u8],
) -> Result<Principal, ApiError> {
    let presented = Presented {
        principal: header(headers, HEADER_PRINCIPAL),
        timestamp: header(headers, HEADER_TIMESTAMP),
        signature: header(headers, HEADER_SIGNATURE),
        version: header(headers, HEADER_SIGNATURE_VERSION),
        body_sha256: header(headers, HEADER_BODY_SHA256),
    };
    let target = Target {
        method: method.as_str(),
        path_and_query: uri.path_and_query().map_or("/", |p| p.as_str()),
    };
    Principal::verify_request(secret, presented, target, chrono::Utc::now().timestamp())
        .map_err(refused)
}

/// Reads the body and checks it against the signed digest: other bytes
/// than the router signed are a 401 like any other signature failure; a
/// body over the limit (which no router forwards) is the 400 naming it.
///
/// A body signed as [`STREAMED_BODY`] (which `verify` accepts only on the
/// streamed routes) is handed on unread.
async fn checked_body(headers: &HeaderMap, body: Body) -> Result<Body, ApiError> {
    let digest = header(headers, HEADER_BODY_SHA256).unwrap_or_default();
    if digest == STREAMED_BODY {
        return Ok(body);
    }
    let bytes = match axum::body::to_bytes(body, BODY_LIMIT_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => {
            let over =
                std::iter::successors(Some(&e as &(dyn std::error::Error + 'static)), |err| {
                    err.source()
                })
                .any(|err| err.is::<http_body_util::LengthLimitError>());
            return Err(if over {
                too_large()
            } else {
                ApiError::bad_request("Request body could not be read.")
            });
        }
    };
    if !body_matches(digest, &bytes) {
        return Err(refused(VerifyError::BodyMismatch));
    }
    Ok(Body::from(bytes))
}

/// Whether `path` is the shared-view read (`/api/share/{token}/records`),
/// the one route a share principal may reach.
pub fn is_share_read(path: &str) -> bool {
    path.strip_prefix("/api/share/")
        .and_then(|rest| rest.strip_suffix("/records"))
        .is_some_and(|token| !token.is_empty() && !token.contains('/'))
}

/// Whether a path needs a signed principal: everything but the health
/// check, the signed file route (its link's signature is the credential,
/// checked by `attachments::files`) and `/metrics` (the admin token is its
/// credential, checked by `crate::metrics`).
fn is_guarded(path: &str) -> bool {
    path != "/internal/health"
        && path != service_kit::metrics::METRICS_ROUTE
        && !path.starts_with(crate::attachments::links::FILES_PATH)
}

/// Middleware: refuses (401) any guarded request whose principal, method,
/// target or body does not verify, including requests for unknown paths,
/// and stores the principal for the extractors.
pub async fn require_principal(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if !is_guarded(request.uri().path()) {
        return next.run(request).await;
    }
    let secret = state.secret.expose().as_bytes();
    let principal = match verify(request.method(), request.uri(), request.headers(), secret) {
        Ok(principal) => principal,
        Err(e) => return e.into_response(),
    };
    // An anonymous share read grants nothing but that read; a keyed
    // principal has no business on the share route either.
    if principal.share != is_share_read(request.uri().path()) {
        return ApiError::NotFound.into_response();
    }
    let (mut parts, body) = request.into_parts();
    let body = match checked_body(&parts.headers, body).await {
        Ok(body) => body,
        Err(e) => return e.into_response(),
    };
    let counted = principal.database_id.clone();
    parts.extensions.insert(Caller(principal));
    let response = next.run(Request::from_parts(parts, body)).await;
    // Usage (`request_counts`): a 421 is retried by the router elsewhere.
    if let Some(database_id) = counted {
        if response.status().as_u16() != cluster_protocol::MISPLACED_STATUS {
            state.requests.count(&database_id);
        }
    }
    response
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    /// Only [`require_principal`] verifies (it alone sees the body): a route
    /// outside it has no caller.
    /// A share principal is never a caller (it reads through
    /// `roles::ShareReader` alone).
    async fn from_request_parts(parts: &mut Parts, _state: &AppState) -> Result<Self, ApiError> {
        match parts.extensions.get::<Caller>() {
            Some(Caller(p)) if p.share => Err(ApiError::NotFound),
            Some(caller) => Ok(caller.clone()),
            None => Err(ApiError::Unauthorized),
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use cluster_protocol::principal::body_sha256;

    use super::*;

    fn digest_headers(digest: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(HEADER_BODY_SHA256, HeaderValue::from_str(digest).unwrap());
        h
    }

    async fn bytes_of(body: Body) -> Vec<u8> {
        axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap()
            .to_vec()
    }

    #[test]
    fn only_the_share_read_path_is_a_share_read() {
        assert!(is_share_read("/api/share/shrAb3dZx/records"));
        for p in [
            "/api/share//records",
            "/api/share/a/b/records",
            "/api/share/a/records/x",
            "/api/tables/tbl_x/records",
            "/api/share/a",
        ] {
            assert!(!is_share_read(p), "{p}");
        }
    }

    #[tokio::test]
    async fn a_digest_must_match_the_body() {
        let h = digest_headers(&body_sha256(b"{}"));
        let body = checked_body(&h, Body::from("{}")).await.expect("matches");
        assert_eq!(bytes_of(body).await, b"{}");
        assert!(matches!(
            checked_body(&h, Body::from("[]")).await,
            Err(ApiError::Unauthorized)
        ));
    }

    #[tokio::test]
    async fn a_streamed_body_is_handed_on_unread_and_uncapped() {
        // Larger than the node's buffered-body limit: not read here.
        let big = vec![b'x'; BODY_LIMIT_BYTES + 1];
        let h = digest_headers(STREAMED_BODY);
        let body = checked_body(&h, Body::from(big.clone()))
            .await
            .expect("passes");
        assert_eq!(bytes_of(body).await.len(), big.len());
    }
}
