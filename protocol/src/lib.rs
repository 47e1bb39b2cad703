//! The contract between the three tiers of the cluster.
//!
//! * [`ids`]: public ids, their routing tags, and tag allocation.
//! * [`error`]: the one error envelope every tier answers with.
//! * [`principal`]: the caller identity a router signs and a shard verifies.
//! * [`control`]: the control plane's internal API (types) and [`control::client`].
//! * [`routes`]: the one table of the public API's routes.
//!
//! Service plumbing (telemetry, shutdown, metrics, configuration helpers)
//! is not part of the contract: it lives in the `service-kit` crate.

pub mod control;
pub mod error;
pub mod ids;
pub mod principal;
pub mod routes;

/// Name the service reports on `GET /api/health`.
pub const SERVICE_NAME: &str = "tabula";

/// The largest request body a router forwards and a shard reads: the router
/// buffers a body whole to sign its digest, and refuses (400) a larger one.
/// The streamed routes (uploads, imports: [`routes::Body::Streamed`] in
/// the route table) are not buffered and have caps of their own.
pub const MAX_BODY_BYTES: usize = 10 * 1024 * 1024;
/// [`MAX_BODY_BYTES`] as messages name it.
pub const MAX_BODY_TEXT: &str = "10 MiB";

/// Header a shard uses (with status 421) to say it does not own a database.
pub const MISPLACED_STATUS: u16 = 421;

/// Response header of a shard's 400 refusing a link whose `target_table_id`
/// carries another database's routing tag; its value is that table id. A
/// shard knows only its own databases, so the router, which knows the
/// caller's memberships, settles the answer: 404 unless the id names an
/// existing table of a database the caller can see (then the 400 stands).
/// The router never passes the header on to a client.
pub const HEADER_FOREIGN_TABLE: &str = "x-cluster-foreign-table";
