//! One test binary for the formula crate (links once).

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

mod gen;
mod literals;
mod parse;
mod postgres;
mod props;
mod sqlgen;
mod typing;
