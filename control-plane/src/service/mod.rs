//! What the routes do: validation, catalog transactions, then Redis.
//! Handlers in `http` only parse and serialise around these functions.

pub mod access;
pub mod databases;
pub mod keys;
pub mod members;
pub mod moves;
pub mod passwords;
pub mod planner;
pub mod quotas;
pub mod rebalance;
pub mod restores;
pub mod sessions;
pub mod shards;
pub mod usage;
pub mod users;

use crate::error::ApiError;

pub(crate) fn unknown_user(id: &str) -> ApiError {
    ApiError::not_found(format!("Unknown user {id}."))
}

/// The 503 of a change whose version delete Redis did not confirm: the
/// transaction was rolled back, so nothing changed (see `liveness`).
pub(crate) fn redis_refused(what: &str, e: anyhow::Error) -> ApiError {
    tracing::warn!(error = format!("{e:#}"), "redis: {what} failed");
    ApiError::Unavailable(format!(
        "Redis did not accept the change ({what}), so routers could keep the old rights: \
         nothing was changed. Retry when Redis accepts writes."
    ))
}

pub(crate) fn unknown_database(id: &str) -> ApiError {
    ApiError::not_found(format!("Unknown database {id}."))
}
