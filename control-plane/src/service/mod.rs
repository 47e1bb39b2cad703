//! What the routes do: validation, catalog transactions, then Redis.
//! Handlers in `http` only parse and serialise around these functions.

pub mod access;
pub mod databases;
pub mod keys;
pub mod shards;
pub mod users;

use crate::error::ApiError;

pub(crate) fn unknown_user(id: &str) -> ApiError {
    ApiError::not_found(format!("Unknown user {id}."))
}

pub(crate) fn unknown_database(id: &str) -> ApiError {
    ApiError::not_found(format!("Unknown database {id}."))
}
