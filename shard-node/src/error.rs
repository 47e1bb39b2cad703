//! The one error type of the shard node and its only mapping to HTTP.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cluster_protocol::error::{ErrorBody, ErrorCode};

/// Message of the 421 a shard answers for a database it does not hold.
pub const MISPLACED_MESSAGE: &str = "This database is not held by this shard.";

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 with a message written for the caller.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// 401, identical for every credential failure.
    #[error("unauthorized")]
    Unauthorized,
    /// 403 with one of `cluster_protocol::error::forbidden`.
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    /// 404, identical for a missing id and a foreign one.
    #[error("not found")]
    NotFound,
    /// 409 with a message written for the caller.
    #[error("conflict: {0}")]
    Conflict(String),
    /// 409 whose error object also carries `records` (stale `if_updated_at`,
    /// an upsert match removed mid-write).
    #[error("conflict: {0}")]
    ConflictWithRecords(String, Vec<serde_json::Value>),
    /// 421: the principal's database is not in this shard's catalog.
    #[error("misplaced database")]
    Misplaced,
    /// 500; the cause is logged once, when the response is built, never shown.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::BadRequest(message.into())
    }
}

impl From<tokio_postgres::Error> for ApiError {
    fn from(e: tokio_postgres::Error) -> Self {
        ApiError::Internal(anyhow::Error::new(e).context("postgres"))
    }
}

impl From<deadpool_postgres::PoolError> for ApiError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        ApiError::Internal(anyhow::Error::new(e).context("postgres pool"))
    }
}

fn envelope(status: StatusCode, body: ErrorBody) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_json(),
    )
        .into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::BadRequest(m) => envelope(StatusCode::BAD_REQUEST, ErrorBody::bad_request(m)),
            ApiError::Unauthorized => envelope(StatusCode::UNAUTHORIZED, ErrorBody::unauthorized()),
            ApiError::Forbidden(m) => envelope(StatusCode::FORBIDDEN, ErrorBody::forbidden(m)),
            ApiError::NotFound => envelope(StatusCode::NOT_FOUND, ErrorBody::not_found()),
            ApiError::Conflict(m) => {
                envelope(StatusCode::CONFLICT, ErrorBody::new(ErrorCode::Conflict, m))
            }
            ApiError::ConflictWithRecords(m, records) => {
                let mut body = ErrorBody::new(ErrorCode::Conflict, m);
                body.records = Some(serde_json::Value::Array(records));
                envelope(StatusCode::CONFLICT, body)
            }
            ApiError::Misplaced => envelope(
                StatusCode::from_u16(cluster_protocol::MISPLACED_STATUS)
                    .unwrap_or(StatusCode::MISDIRECTED_REQUEST),
                ErrorBody::new(ErrorCode::NotFound, MISPLACED_MESSAGE),
            ),
            ApiError::Internal(cause) => {
                tracing::error!(error = format!("{cause:#}"), "internal error");
                envelope(StatusCode::INTERNAL_SERVER_ERROR, ErrorBody::internal())
            }
        }
    }
}
