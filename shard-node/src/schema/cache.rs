//! Per-database cache of the schema model, keyed by `schema_version`.
//!
//! A read checks the version (one primary-key lookup, or the one its
//! authorization already made) and reuses the loaded model when it matches; otherwise it reloads tables, fields and webhooks in one
//! REPEATABLE READ snapshot, so a model is never a mix of two versions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use deadpool_postgres::GenericClient;

use super::DatabaseSchema;
use crate::catalog;
use crate::error::{ApiError, ApiResult};

#[derive(Default)]
pub struct SchemaCache {
    loaded: Mutex<HashMap<String, Arc<DatabaseSchema>>>,
}

impl SchemaCache {
    pub fn new() -> Self {
        Self::default()
    }

    fn cached(&self, database_id: &str, version: i64) -> Option<Arc<DatabaseSchema>> {
        let map = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        map.get(database_id)
            .filter(|s| s.version == version)
            .cloned()
    }

    /// The model cached for a database, whatever its version (a read
    /// that checks the version in the same round trip starts with it:
    /// `auth::HeldRead`).
    pub fn latest(&self, database_id: &str) -> Option<Arc<DatabaseSchema>> {
        let map = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        map.get(database_id).cloned()
    }

    fn store(&self, schema: Arc<DatabaseSchema>) {
        let mut map = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(schema.database_id.clone(), schema);
    }

    /// Forgets a database (deleted or moved away).
    pub fn forget(&self, database_id: &str) {
        let mut map = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(database_id);
    }

    /// The model for reads, on a fresh pooled client. 404 when the
    /// database is not held here.
    pub async fn get(
        &self,
        client: &mut deadpool_postgres::Object,
        database_id: &str,
    ) -> ApiResult<Arc<DatabaseSchema>> {
        let version = catalog::databases::schema_version(&*client, database_id)
            .await?
            .ok_or(ApiError::NotFound)?;
        self.get_at(client, database_id, version).await
    }

    /// The model for reads when the caller already read `version` (the
    /// held check of `auth`, earlier in the same request): the cached
    /// model of that version, or the current one loaded afresh.
    pub async fn get_at(
        &self,
        client: &mut deadpool_postgres::Object,
        database_id: &str,
        version: i64,
    ) -> ApiResult<Arc<DatabaseSchema>> {
        if let Some(s) = self.cached(database_id, version) {
            return Ok(s);
        }
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let schema = Arc::new(load(&tx, database_id).await?);
        tx.commit().await?;
        self.store(schema.clone());
        Ok(schema)
    }

    /// The model inside a record write's transaction, and the database's
    /// name: the database row is key-share locked until commit, so the
    /// schema cannot change under the write (structural work locks it
    /// `FOR UPDATE`).
    pub async fn get_for_write(
        &self,
        c: &impl GenericClient,
        database_id: &str,
    ) -> ApiResult<(Arc<DatabaseSchema>, String)> {
        let (version, name) = catalog::databases::schema_version_key_share(c, database_id)
            .await?
            .ok_or(ApiError::NotFound)?;
        Ok((self.at_version(c, database_id, version).await?, name))
    }

    /// The model of `version`, which the caller read under a lock that
    /// keeps it (a record write's fence, `placements::fence_write`): the
    /// cached one, or loaded in the caller's transaction `c`.
    pub async fn at_version(
        &self,
        c: &impl GenericClient,
        database_id: &str,
        version: i64,
    ) -> ApiResult<Arc<DatabaseSchema>> {
        if let Some(s) = self.cached(database_id, version) {
            return Ok(s);
        }
        let schema = Arc::new(load(c, database_id).await?);
        self.store(schema.clone());
        Ok(schema)
    }

    /// The model inside a structural transaction (the database row is
    /// already locked, so the version read here cannot move under us).
    pub async fn get_locked(
        &self,
        c: &impl GenericClient,
        database_id: &str,
    ) -> ApiResult<Arc<DatabaseSchema>> {
        let version = catalog::databases::schema_version(c, database_id)
            .await?
            .ok_or(ApiError::NotFound)?;
        if let Some(s) = self.cached(database_id, version) {
            return Ok(s);
        }
        let schema = Arc::new(load(c, database_id).await?);
        self.store(schema.clone());
        Ok(schema)
    }
}

/// Loads the model from the catalog: tables, fields and webhooks.
pub async fn load(c: &impl GenericClient, database_id: &str) -> ApiResult<DatabaseSchema> {
    let (version, timezone) = catalog::databases::schema_version_and_timezone(c, database_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let tables = catalog::tables::list(c, database_id).await?;
    let mut fields = catalog::fields::list_for_database(c, database_id).await?;
    let tables = tables
        .into_iter()
        .map(|t| super::TableSchema {
            fields: fields.remove(&t.id).unwrap_or_default(),
            id: t.id,
            database_id: t.database_id,
            name: t.name,
            position: t.position,
            display_field_id: t.display_field_id,
            created_at: t.created_at,
            updated_at: t.updated_at,
        })
        .collect();
    let webhooks = catalog::outbox::rules(c, database_id).await?;
    Ok(
        DatabaseSchema::new(database_id.to_owned(), version, timezone, tables)
            .with_webhooks(webhooks),
    )
}
