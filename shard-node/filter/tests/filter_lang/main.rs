//! One test binary for the crate (links once): parser refusals, the SQL of
//! every operator, property tests, and runs against real PostgreSQL.

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

mod common;
mod compile_sql;
mod conditions;
mod injection;
mod paging;
mod parse_errors;
mod postgres;
mod props;
mod sort_bookmark;
