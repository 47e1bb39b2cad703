//! One test binary for the formula crate (links once).

mod gen;
mod literals;
mod parse;
mod postgres;
mod props;
mod sqlgen;
mod typing;
