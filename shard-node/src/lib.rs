//! A shard node: serves the `/api` routes of the databases placed on this
//! shard from its own PostgreSQL (catalog tables plus one schema per tenant
//! database), trusting only principals signed by a router.
//!
//! Layout (one module per resource, split by verb; later resources follow
//! the same shape):
//! * [`http`]: router assembly, the one body parser, request spans, health.
//! * [`auth`]: the verified principal and the extractors that carry a
//!   permission (`Reader`, `Editor`, `Owner<Act>`, `Creator`).
//! * [`databases`], [`tables`], [`fields`]: handlers (authorize, parse, call, serialise)
//!   and the service function each one calls.
//! * [`catalog`]: all SQL over the shard catalog, one file per concern;
//!   [`tenant_schema`]: all DDL of tenant schemas and tables.
//! * [`schema`]: the schema model of a database (tables, fields, costumes,
//!   columns, operators), cached per database by `schema_version`.
//! * [`export`]: the database as a streamed zip (part B, Export).
//! * [`error`]: the one error type and its HTTP mapping.
//! * [`metrics`]: the Prometheus series and `GET /metrics`.
//! * [`settings`]: every setting (flags, environment, `--help`), which
//!   make the [`config::Config`].
//! * [`db`]: the pool, its time limits and the transaction runners;
//!   [`state`]: what every handler is handed; [`fair_share`]: each
//!   database's and each owner's share of the pool ([`owners`]: each
//!   database's owner, read once); [`cancel`]: what an abandoned request
//!   does to the statements it left running.

pub mod attachments;
pub mod auth;
pub mod cancel;
pub mod catalog;
pub mod comments;
pub mod config;
pub mod databases;
pub mod db;
pub mod egress;
pub mod error;
pub mod export;
pub mod fair_share;
pub mod fields;
pub mod http;
pub mod import;
pub mod json;
pub mod metrics;
pub mod owners;
pub mod records;
pub mod request_counts;
pub mod schema;
pub mod settings;
pub mod shares;
pub mod state;
pub mod tables;
pub mod tenant_schema;
pub mod trash;
pub mod views;
pub mod webhooks;

use std::future::Future;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::config::Config;
use crate::db::{Db, DbOp};
use crate::state::AppState;

/// Connects, migrates the catalog, and serves on `listener` until SIGTERM
/// or SIGINT, draining in-flight requests.
pub async fn run(config: Config, listener: TcpListener) -> anyhow::Result<()> {
    run_until(config, listener, service_kit::shutdown::signal()).await
}

/// As [`run`], stopping gracefully when `shutdown` completes.
pub async fn run_until(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let db = Db::connect_with(
        config.database_url.expose(),
        config.pool_size,
        config.db_limits,
    )?;
    migrate(&db).await?;
    let _purger = trash::purger::spawn(db.clone(), config.trash);
    let state = AppState::new(&config, db)?;
    crate::metrics::describe();
    check_blob_store(state.blobs.clone());
    webhooks::deliverer::spawn(
        state.db.clone(),
        state.egress.clone(),
        state.webhooks.clone(),
    );
    attachments::sweeper::spawn(state.db.clone(), state.blobs.clone());
    let _request_counts = request_counts::spawn(state.db.clone(), state.requests.clone());
    let _match_clock = webhooks::clock::spawn(state.clone(), config.webhooks.match_clock_interval);
    let app = http::router(state).layer(axum::middleware::from_fn(abandon_scope));
    tracing::info!(
        shard = %config.shard_name,
        addr = %listener.local_addr().context("listener address")?,
        "shard node listening"
    );
    service_kit::serve::until(listener, app, shutdown).await?;
    tracing::info!("shard node stopped");
    Ok(())
}

/// Says in the log, once, whether the blob store answers: a bucket that
/// is missing or refuses the credentials fails only the routes that need
/// it, so the node serves on either way.
fn check_blob_store(blobs: blobstore::BlobStore) {
    tokio::spawn(async move {
        match blobs.check().await {
            Ok(()) => tracing::info!(store = blobs.kind(), "blob store ready"),
            Err(e) => tracing::warn!(
                store = blobs.kind(),
                error = format!("{e:#}"),
                "blob store unavailable: attachment uploads and downloads will fail"
            ),
        }
    });
}

/// Every request runs inside [`cancel::abandon_on_drop`]: dropped
/// unfinished, it cancels the statements it left running.
async fn abandon_scope(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    cancel::abandon_on_drop(next.run(req)).await
}

/// Applies pending catalog migrations, on a session of their own under the
/// maintenance time limit (a migration may rewrite a catalog table, and
/// waits for another node's migration run).
pub async fn migrate(db: &Db) -> anyhow::Result<()> {
    db.measured(DbOp::Migrate, async {
        let mut client = db.maintenance_client().await?;
        catalog::migrations::run(&mut client).await?;
        Ok(())
    })
    .await
    .map_err(|e| anyhow::anyhow!("catalog migrations failed: {e:#}"))
}
