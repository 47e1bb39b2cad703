//! Plumbing the three services share, kept out of the wire contract
//! (`cluster-protocol`): each piece exists once, here.
//!
//! * [`telemetry`]: tracing set-up (`RUST_LOG`, `LOG_FORMAT`, `ACCESS_LOG`,
//!   OTLP export).
//! * [`trace`]: W3C trace context in and out, HTTP server spans.
//! * [`process`]: the process's CPU, memory, descriptors and start time.
//! * [`shutdown`]: the SIGINT/SIGTERM future the binaries drain on.
//! * [`serve`]: an axum app on a listener until shutdown.
//! * [`metrics`]: the Prometheus recorder, the series every service has and
//!   the request-metrics middleware.
//! * [`secret`]: a setting that never prints.
//! * [`parse`]: value parsers of settings (durations, counts, sizes).
//! * [`listen`]: a PostgreSQL `LISTEN` session that wakes a worker.
//! * [`migrations`]: numbered catalog migrations, one transaction each.
//! * [`pg_failover`]: following a PostgreSQL primary that moves (timeouts,
//!   the failover error classes, discarding sessions to a lost primary).
//! * [`redis_target`]: `REDIS_URL` naming one Redis or a Redis Cluster,
//!   hash slots, one connection type for both.

pub mod listen;
pub mod metrics;
pub mod migrations;
pub mod parse;
pub mod pg_failover;
pub mod process;
pub mod redis_target;
pub mod secret;
pub mod serve;
pub mod shutdown;
pub mod telemetry;
pub mod trace;

pub use secret::Secret;
