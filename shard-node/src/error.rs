//! The one error type of the shard node and its only mapping to HTTP.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cluster_protocol::error::{ErrorBody, ErrorCode};
use service_kit::pg_failover;

/// Message of the 421 a shard answers for a database it does not hold.
pub const MISPLACED_MESSAGE: &str = "This database is not held by this shard.";
/// 400 for a statement stopped by `statement_timeout` (a ceiling on the
/// work one request may ask for: retrying the same request does not help).
pub const TOO_SLOW_MESSAGE: &str = "This request took longer than the statement time limit \
     and was stopped; nothing was changed. Ask for less at once (a narrower filter, a smaller \
     page_size or fewer fields), or split the change.";
/// 503 when every pooled session stayed busy for the whole pool wait.
pub const POOL_BUSY_MESSAGE: &str = "The shard holding this database is busy. Retry in about 1s.";
/// 503 when the requests of one database already hold all the sessions
/// one database may hold at once (`SHARD_SESSIONS_PER_DATABASE`) for the
/// whole pool wait; other databases on the shard are not held up.
pub const DATABASE_BUSY_MESSAGE: &str = "This database has too many requests in progress \
     on its shard (each database may use only part of the shard's connections at once). \
     Retry in about 1s, or send fewer requests at once.";
/// 503 when the requests of all the databases of one owner on this shard
/// already hold all the sessions one owner may hold at once
/// (`SHARD_SESSIONS_PER_OWNER`) for the whole pool wait.
pub const OWNER_BUSY_MESSAGE: &str = "The databases of this database's owner have too many \
     requests in progress on their shard (each owner's databases may use only part of the \
     shard's connections at once). Retry in about 1s, or send fewer requests at once.";
/// 503 when the shard already streams as many exports as it allows at once
/// (`SHARD_MAX_EXPORTS`).
pub const EXPORTS_BUSY_MESSAGE: &str = "Too many exports are running on the shard holding \
     this database. Retry in about 1s.";
/// 503 when a structural change could not get its table's lock in time.
pub const LOCKED_MESSAGE: &str = "The table is busy with another change. Retry in about 1s.";
/// 400 for a link whose target table is in another database.
pub const FOREIGN_LINK_TARGET_MESSAGE: &str = "A link's target table must be in the same database.";
/// `Retry-After` of every 503 the node answers, in seconds.
pub const RETRY_AFTER_SECS: u64 = 1;

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
    /// 400 for a link target carrying another database's routing tag, with
    /// that table id in `cluster_protocol::HEADER_FOREIGN_TABLE`: the router
    /// turns it into a 404 unless the caller can see that table.
    #[error("link target in another database: {0}")]
    ForeignLinkTarget(String),
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
    /// 503 with `Retry-After`: no session free in time (in the pool or in
    /// the database's share of it), a table lock not granted in time, or
    /// the shard's primary gone or moved (a failover; a write whose COMMIT
    /// was cut off has an unknown outcome, never a 200). Transient; the
    /// message says so.
    #[error("unavailable: {0}")]
    Unavailable(&'static str),
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

/// The answer a PostgreSQL error earns when it is not a fault of ours: a
/// time limit (400 or 503), or the primary gone or moved (503 with the
/// failover message; see `service_kit::pg_failover`, which also marks the
/// pool's older sessions to be discarded). `None` for anything else.
fn retryable(e: &tokio_postgres::Error) -> Option<ApiError> {
    use tokio_postgres::error::SqlState;
    if let Some(failover) = pg_failover::classify(e) {
        pg_failover::note(failover);
        return Some(ApiError::Unavailable(pg_failover::UNAVAILABLE_MESSAGE));
    }
    match e.code()? {
        c if *c == SqlState::QUERY_CANCELED => Some(ApiError::bad_request(TOO_SLOW_MESSAGE)),
        c if *c == SqlState::LOCK_NOT_AVAILABLE => Some(ApiError::Unavailable(LOCKED_MESSAGE)),
        _ => None,
    }
}

/// The answer a pool error earns: every session stayed busy (503 busy),
/// or no session to the primary could be opened (503 failover).
fn pool_answer(e: &deadpool_postgres::PoolError) -> Option<ApiError> {
    use deadpool_postgres::{PoolError, TimeoutType};
    match e {
        PoolError::Timeout(TimeoutType::Wait) | PoolError::Timeout(TimeoutType::Recycle) => {
            Some(ApiError::Unavailable(POOL_BUSY_MESSAGE))
        }
        e => pg_failover::classify_pool(e).map(|failover| {
            pg_failover::note(failover);
            ApiError::Unavailable(pg_failover::UNAVAILABLE_MESSAGE)
        }),
    }
}

/// The answer for an internal error whose cause is a time limit, pool
/// exhaustion or a failover (it may have been wrapped with context on the
/// way up).
fn limit_in_chain(cause: &anyhow::Error) -> Option<ApiError> {
    cause.chain().find_map(|e| {
        if let Some(pg) = e.downcast_ref::<tokio_postgres::Error>() {
            return retryable(pg);
        }
        pool_answer(e.downcast_ref::<deadpool_postgres::PoolError>()?)
    })
}

impl From<tokio_postgres::Error> for ApiError {
    fn from(e: tokio_postgres::Error) -> Self {
        retryable(&e)
            .unwrap_or_else(|| ApiError::Internal(anyhow::Error::new(e).context("postgres")))
    }
}

impl From<deadpool_postgres::PoolError> for ApiError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match pool_answer(&e) {
            Some(answer) => {
                tracing::warn!(error = %e, "no pooled postgres session in time");
                answer
            }
            None => ApiError::Internal(anyhow::Error::new(e).context("postgres pool")),
        }
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
            ApiError::ForeignLinkTarget(table_id) => {
                let mut resp = envelope(
                    StatusCode::BAD_REQUEST,
                    ErrorBody::bad_request(FOREIGN_LINK_TARGET_MESSAGE),
                );
                if let Ok(v) = axum::http::HeaderValue::from_str(&table_id) {
                    resp.headers_mut()
                        .insert(cluster_protocol::HEADER_FOREIGN_TABLE, v);
                }
                resp
            }
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
            ApiError::Unavailable(m) => {
                let mut resp = envelope(StatusCode::SERVICE_UNAVAILABLE, ErrorBody::unavailable(m));
                resp.headers_mut().insert(
                    axum::http::header::RETRY_AFTER,
                    axum::http::HeaderValue::from(RETRY_AFTER_SECS),
                );
                resp
            }
            ApiError::Internal(cause) => match limit_in_chain(&cause) {
                Some(answer) => answer.into_response(),
                None => {
                    tracing::error!(error = format!("{cause:#}"), "internal error");
                    envelope(StatusCode::INTERNAL_SERVER_ERROR, ErrorBody::internal())
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_link_target_is_a_400_naming_the_table_for_the_router() {
        let resp = ApiError::ForeignLinkTarget("tbl_Ab3dZ1234567".into()).into_response();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            resp.headers()[cluster_protocol::HEADER_FOREIGN_TABLE],
            "tbl_Ab3dZ1234567"
        );
        let plain = ApiError::bad_request(FOREIGN_LINK_TARGET_MESSAGE).into_response();
        assert!(plain
            .headers()
            .get(cluster_protocol::HEADER_FOREIGN_TABLE)
            .is_none());
    }

    /// The error of connecting with `cfg` (which must fail).
    async fn refused(cfg: &tokio_postgres::Config) -> tokio_postgres::Error {
        match cfg.connect(tokio_postgres::NoTls).await {
            Ok(_) => panic!("nothing listens there"),
            Err(e) => e,
        }
    }

    #[tokio::test]
    async fn a_lost_primary_is_a_503_with_retry_after_not_a_500() {
        // Nothing listens on port 1: the connection is refused, as when
        // the primary's host is gone and no other host is read-write.
        let cfg: tokio_postgres::Config = "postgres://x@127.0.0.1:1/x".parse().unwrap();
        let e = refused(&cfg).await;
        for err in [
            ApiError::from(refused(&cfg).await),
            ApiError::Internal(anyhow::Error::new(e).context("insert record")),
        ] {
            let resp = err.into_response();
            assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(resp.headers()[axum::http::header::RETRY_AFTER], "1");
        }
    }

    #[test]
    fn a_pool_that_cannot_open_a_session_is_a_503_and_a_busy_one_too() {
        use deadpool_postgres::{PoolError, TimeoutType};
        for e in [
            PoolError::Timeout(TimeoutType::Create),
            PoolError::Timeout(TimeoutType::Wait),
        ] {
            let resp = ApiError::from(e).into_response();
            assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        }
    }
}
