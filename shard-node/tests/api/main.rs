//! Integration tests: the real shard node over HTTP, real PostgreSQL.

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

mod attachments;
mod auth;
mod comments;
mod databases;
mod deliveries;
mod export;
mod export_limits;
mod fields;
mod help;
mod helpers;
mod imports;
mod kept_plans;
mod metrics;
mod outbox;
mod placements;
mod records;
mod schema_load;
mod shares;
mod tables;
mod time_limits;
mod trash;
mod views;
mod webhooks;
