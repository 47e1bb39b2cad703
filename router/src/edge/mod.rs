//! The edge: each request's way in. `handler` runs one request start to
//! finish; `routes` classifies it once from the route table; `trace` and
//! `metrics` observe it. (The accept loop is `crate::server`, the threads
//! `crate::cores`.)

pub mod handler;
pub mod metrics;
pub mod routes;
pub mod trace;
