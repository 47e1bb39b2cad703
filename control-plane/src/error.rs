//! The control plane's one API error type and its mapping to the envelope of
//! `cluster_protocol::error`. Only `Internal` carries something a client
//! must not see; it is logged once, here, and answered as the generic 500.

use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use cluster_protocol::error::{ErrorBody, ErrorCode};
use serde::de::DeserializeOwned;
use service_kit::pg_failover;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("missing or invalid control-plane token")]
    Unauthorized,
    /// 403: the acting user's role or the way they act (an API key) does
    /// not allow the change (member management of the public API).
    /// 401 of the account routes: a failed sign-in or a session that is
    /// not live (the message says which).
    #[error("{0}")]
    SignedOut(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// 503 with `Retry-After`: a dependency (Redis) refused a write the
    /// change needs (nothing changed), or the catalog's primary is gone or
    /// moving (a failover: a change whose COMMIT was cut off has an unknown
    /// outcome, never a 200).
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::BadRequest(message.into())
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::NotFound(message.into())
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        ApiError::Conflict(message.into())
    }

    /// The client-visible body of this error.
    pub fn body(&self) -> ErrorBody {
        match self {
            ApiError::BadRequest(m) => ErrorBody::bad_request(m.clone()),
            ApiError::Unauthorized => ErrorBody::new(
                ErrorCode::Unauthorized,
                "Missing or invalid control-plane token. Expected: Bearer <the token of the caller's tier>.",
            ),
            ApiError::SignedOut(m) => ErrorBody::new(ErrorCode::Unauthorized, *m),
            ApiError::Forbidden(m) => ErrorBody::forbidden(m.clone()),
            ApiError::NotFound(m) => ErrorBody::new(ErrorCode::NotFound, m.clone()),
            ApiError::Conflict(m) => ErrorBody::new(ErrorCode::Conflict, m.clone()),
            ApiError::Unavailable(m) => ErrorBody::unavailable(m.clone()),
            ApiError::Internal(_) => ErrorBody::internal(),
        }
    }
}

/// The answer of an error: a failover of the catalog (anywhere along the
/// error's chain, see `service_kit::pg_failover`) is a 503, not a 500.
fn failover_to_unavailable(e: ApiError) -> ApiError {
    match e {
        ApiError::Internal(cause) if pg_failover::in_anyhow(&cause).is_some() => {
            tracing::warn!(error = format!("{cause:#}"), "catalog unavailable");
            ApiError::Unavailable(pg_failover::UNAVAILABLE_MESSAGE.to_owned())
        }
        other => other,
    }
}

impl From<tokio_postgres::Error> for ApiError {
    fn from(e: tokio_postgres::Error) -> Self {
        failover_to_unavailable(ApiError::Internal(
            anyhow::Error::new(e).context("catalog query"),
        ))
    }
}

impl From<deadpool_postgres::PoolError> for ApiError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        failover_to_unavailable(ApiError::Internal(
            anyhow::Error::new(e).context("catalog connection"),
        ))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let this = failover_to_unavailable(self);
        match &this {
            ApiError::Internal(e) => tracing::error!(error = format!("{e:#}"), "internal error"),
            ApiError::Unavailable(m) => tracing::warn!(message = %m, "change refused"),
            _ => {}
        }
        let body = this.body();
        let status =
            StatusCode::from_u16(body.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_json(),
        )
            .into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut().insert(
                header::RETRY_AFTER,
                header::HeaderValue::from(pg_failover::RETRY_AFTER_SECS),
            );
        }
        resp
    }
}

/// A JSON body whose rejection is a 400 in the envelope.
pub struct Body<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(Body(value)),
            Err(rejection) => Err(ApiError::BadRequest(rejection.body_text())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error of connecting with `cfg` (which must fail).
    async fn refused(cfg: &tokio_postgres::Config) -> tokio_postgres::Error {
        match cfg.connect(tokio_postgres::NoTls).await {
            Ok(_) => panic!("nothing listens there"),
            Err(e) => e,
        }
    }

    #[tokio::test]
    async fn a_lost_catalog_primary_is_a_503_with_retry_after() {
        // Nothing listens on port 1: refused, as when the catalog's
        // primary is gone and no other host is read-write yet.
        let cfg: tokio_postgres::Config = "postgres://x@127.0.0.1:1/x".parse().unwrap();
        let lost = refused(&cfg).await;
        let wrapped =
            ApiError::Internal(anyhow::Error::new(refused(&cfg).await).context("create key"));
        for err in [ApiError::from(lost), wrapped] {
            let resp = err.into_response();
            assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        }
    }

    #[test]
    fn other_internal_errors_stay_500() {
        let resp = ApiError::Internal(anyhow::anyhow!("a bug")).into_response();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}
