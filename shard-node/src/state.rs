//! Shared state handed to every handler: the pool and the cluster secret.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use deadpool_postgres::{Object, Pool, Runtime, Transaction};
use tokio_postgres::NoTls;

use crate::config::{Config, Secret, POOL_WAIT_TIMEOUT};
use crate::error::ApiResult;

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    /// The schema model of each database, reloaded when its version moves.
    pub schemas: Arc<crate::schema::cache::SchemaCache>,
    pub secret: Arc<Secret>,
    pub shard_name: Arc<str>,
}

impl AppState {
    pub fn new(config: &Config, db: Db) -> Self {
        Self {
            db,
            schemas: Arc::new(crate::schema::cache::SchemaCache::new()),
            secret: Arc::new(config.cluster_secret.clone()),
            shard_name: Arc::from(config.shard_name.as_str()),
        }
    }
}

/// Every database operation of the node, by name, for timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbOp {
    Health,
    Migrate,
    DatabaseHeld,
    LookupDatabases,
    CreateDatabase,
    GetDatabase,
    RenameDatabase,
    RecolorDatabase,
    DeleteDatabase,
    ListTables,
    CreateTable,
    GetTable,
    RenameTable,
    DeleteTable,
    LoadSchema,
    CreateField,
    UpdateField,
    DeleteField,
    ListViews,
    CreateView,
    UpdateView,
    DeleteView,
    CreateRecords,
    TrashRecords,
    ListTrash,
    RestoreRecords,
    PurgeRecords,
    PurgeExpired,
    UpdateRecords,
    UpsertRecords,
    ListRecords,
    GetRecord,
    PressButton,
}

impl DbOp {
    pub const fn as_str(self) -> &'static str {
        match self {
            DbOp::Health => "health",
            DbOp::Migrate => "migrate",
            DbOp::DatabaseHeld => "database_held",
            DbOp::LookupDatabases => "lookup_databases",
            DbOp::CreateDatabase => "create_database",
            DbOp::GetDatabase => "get_database",
            DbOp::RenameDatabase => "rename_database",
            DbOp::RecolorDatabase => "recolor_database",
            DbOp::DeleteDatabase => "delete_database",
            DbOp::ListTables => "list_tables",
            DbOp::CreateTable => "create_table",
            DbOp::GetTable => "get_table",
            DbOp::RenameTable => "rename_table",
            DbOp::DeleteTable => "delete_table",
            DbOp::LoadSchema => "load_schema",
            DbOp::CreateField => "create_field",
            DbOp::UpdateField => "update_field",
            DbOp::DeleteField => "delete_field",
            DbOp::ListViews => "list_views",
            DbOp::CreateView => "create_view",
            DbOp::UpdateView => "update_view",
            DbOp::DeleteView => "delete_view",
            DbOp::CreateRecords => "create_records",
            DbOp::TrashRecords => "trash_records",
            DbOp::ListTrash => "list_trash",
            DbOp::RestoreRecords => "restore_records",
            DbOp::PurgeRecords => "purge_records",
            DbOp::PurgeExpired => "purge_expired",
            DbOp::UpdateRecords => "update_records",
            DbOp::UpsertRecords => "upsert_records",
            DbOp::ListRecords => "list_records",
            DbOp::GetRecord => "get_record",
            DbOp::PressButton => "press_button",
        }
    }
}

/// The pool to this shard's PostgreSQL.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
}

impl Db {
    pub fn connect(url: &str, pool_size: usize) -> anyhow::Result<Self> {
        let mut cfg = deadpool_postgres::Config::new();
        cfg.url = Some(url.to_owned());
        let mut pool = deadpool_postgres::PoolConfig::new(pool_size.max(1));
        pool.timeouts.wait = Some(POOL_WAIT_TIMEOUT);
        pool.timeouts.create = Some(POOL_WAIT_TIMEOUT);
        cfg.pool = Some(pool);
        let pool = cfg
            .create_pool(Some(Runtime::Tokio1), NoTls)
            .context("create the postgres pool")?;
        Ok(Self { pool })
    }

    pub async fn client(&self) -> ApiResult<Object> {
        Ok(self.pool.get().await?)
    }

    /// Runs `work` in one transaction, timed as `op`: commits only when it
    /// succeeds; an error rolls everything back.
    pub async fn in_transaction<T>(
        &self,
        op: DbOp,
        work: impl AsyncFnOnce(&Transaction<'_>) -> ApiResult<T>,
    ) -> ApiResult<T> {
        self.measured(op, async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let out = work(&tx).await?;
            tx.commit().await?;
            Ok(out)
        })
        .await
    }

    /// Runs one named database operation, timing it (debug level).
    pub async fn measured<T, F>(&self, op: DbOp, work: F) -> ApiResult<T>
    where
        F: Future<Output = ApiResult<T>>,
    {
        let start = Instant::now();
        let result = work.await;
        tracing::debug!(
            db_op = op.as_str(),
            elapsed_us = start.elapsed().as_micros() as u64,
            ok = result.is_ok(),
            "db operation"
        );
        result
    }
}
