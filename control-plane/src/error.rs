//! The control plane's one API error type and its mapping to the envelope of
//! `cluster_protocol::error`. Only `Internal` carries something a client
//! must not see; it is logged once, here, and answered as the generic 500.

use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use cluster_protocol::error::{ErrorBody, ErrorCode};
use serde::de::DeserializeOwned;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("missing or invalid control-plane token")]
    Unauthorized,
    /// 403: the acting user's role or the way they act (an API key) does
    /// not allow the change (member management of the public API).
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// 503: a dependency (Redis) refused a write the change needs; nothing changed.
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
            ApiError::Forbidden(m) => ErrorBody::forbidden(m.clone()),
            ApiError::NotFound(m) => ErrorBody::new(ErrorCode::NotFound, m.clone()),
            ApiError::Conflict(m) => ErrorBody::new(ErrorCode::Conflict, m.clone()),
            ApiError::Unavailable(m) => ErrorBody::unavailable(m.clone()),
            ApiError::Internal(_) => ErrorBody::internal(),
        }
    }
}

impl From<tokio_postgres::Error> for ApiError {
    fn from(e: tokio_postgres::Error) -> Self {
        ApiError::Internal(anyhow::Error::new(e).context("catalog query"))
    }
}

impl From<deadpool_postgres::PoolError> for ApiError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        ApiError::Internal(anyhow::Error::new(e).context("catalog connection"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match &self {
            ApiError::Internal(e) => tracing::error!(error = format!("{e:#}"), "internal error"),
            ApiError::Unavailable(m) => tracing::warn!(message = %m, "change refused"),
            _ => {}
        }
        let body = self.body();
        let status =
            StatusCode::from_u16(body.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_json(),
        )
            .into_response()
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
