//! Integration tests: the real server in-process against a real PostgreSQL
//! (a throwaway database per test) and Redis, one test binary.
//! Set SKIP_DB_TESTS to skip them.

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

mod access;
mod accounts;
mod allocation;
mod basics;
mod cli;
mod fail_closed;
mod help;
mod helpers;
mod keys;
mod members;
mod metrics;
mod moves;
mod operator_cli;
mod pg_tls;
mod quotas;
mod replication_secret;
mod scale_cli;
mod scopes;
mod shards_dsn;
