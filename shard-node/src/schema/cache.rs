//! Per-database cache of the schema model, keyed by `schema_version`.
//!
//! A read checks the version (one primary-key lookup, or the one its
//! authorization already made) and reuses the loaded model when it matches; otherwise it reloads tables, fields and webhooks in one
//! REPEATABLE READ snapshot, so a model is never a mix of two versions.
//!
//! The cache is bounded (`SHARD_SCHEMA_CACHE_FIELDS`): each model weighs
//! one plus its tables, fields and webhooks ([`weight`]), and once the
//! models held weigh more than the bound, the least recently used are
//! dropped until they weigh at most nine tenths of it (one sort per tenth
//! of the bound loaded, not one per miss). A dropped model is loaded again
//! on its database's next request (three catalog reads, about a
//! millisecond). A shard of 10,000 small databases holds every model
//! within the default bound; one of larger databases keeps its busiest.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use deadpool_postgres::GenericClient;

use super::DatabaseSchema;
use crate::catalog;
use crate::error::{ApiError, ApiResult};

/// `SHARD_SCHEMA_CACHE_FIELDS` when not set: the weight of the models kept
/// (about 1 kB of the node's memory per unit, docs/capacity.md "A shard
/// with 10,000 databases").
pub const DEFAULT_MAX_WEIGHT: u64 = 200_000;

/// What a model counts against the bound: one for the database, and one
/// per table, field and webhook (a field's options are most of a model's
/// memory).
pub fn weight(schema: &DatabaseSchema) -> u64 {
    let fields: usize = schema.tables.iter().map(|t| t.fields.len()).sum();
    (1 + schema.tables.len() + fields + schema.webhooks.len()) as u64
}

struct Entry {
    schema: Arc<DatabaseSchema>,
    weight: u64,
    /// The cache's clock at the last use (larger is more recent).
    used: u64,
}

#[derive(Default)]
struct Models {
    by_database: HashMap<String, Entry>,
    /// Sum of the entries' weights.
    weight: u64,
}

pub struct SchemaCache {
    loaded: Mutex<Models>,
    /// The most the models held may weigh.
    max_weight: u64,
    clock: AtomicU64,
}

impl Default for SchemaCache {
    fn default() -> Self {
        Self::new()
    }
}

impl SchemaCache {
    /// A cache of at most [`DEFAULT_MAX_WEIGHT`].
    pub fn new() -> Self {
        Self::bounded(DEFAULT_MAX_WEIGHT)
    }

    /// A cache whose models weigh at most `max_weight` ([`weight`]; at
    /// least one model is always kept, whatever it weighs).
    pub fn bounded(max_weight: u64) -> Self {
        Self {
            loaded: Mutex::new(Models::default()),
            max_weight: max_weight.max(1),
            clock: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Models> {
        self.loaded.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    fn cached(&self, database_id: &str, version: i64) -> Option<Arc<DatabaseSchema>> {
        let now = self.tick();
        let mut models = self.lock();
        let entry = models.by_database.get_mut(database_id)?;
        if entry.schema.version != version {
            return None;
        }
        entry.used = now;
        Some(entry.schema.clone())
    }

    /// The model cached for a database, whatever its version (a read
    /// that checks the version in the same round trip starts with it:
    /// `auth::HeldRead`).
    pub fn latest(&self, database_id: &str) -> Option<Arc<DatabaseSchema>> {
        let now = self.tick();
        let mut models = self.lock();
        let entry = models.by_database.get_mut(database_id)?;
        entry.used = now;
        Some(entry.schema.clone())
    }

    fn store(&self, schema: Arc<DatabaseSchema>) {
        let entry = Entry {
            weight: weight(&schema),
            used: self.tick(),
            schema,
        };
        let mut models = self.lock();
        let added = entry.weight;
        if let Some(old) = models
            .by_database
            .insert(entry.schema.database_id.clone(), entry)
        {
            models.weight -= old.weight;
        }
        models.weight += added;
        if models.weight > self.max_weight {
            evict(&mut models, self.max_weight - self.max_weight / 10);
        }
    }

    /// Forgets a database (deleted or moved away).
    pub fn forget(&self, database_id: &str) {
        let mut models = self.lock();
        if let Some(old) = models.by_database.remove(database_id) {
            models.weight -= old.weight;
        }
    }

    /// Databases whose model is held, and what they weigh together.
    pub fn held(&self) -> (usize, u64) {
        let models = self.lock();
        (models.by_database.len(), models.weight)
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

/// Drops the least recently used models until those left weigh at most
/// `keep` (the most recent one always stays).
fn evict(models: &mut Models, keep: u64) {
    let mut by_age: Vec<(u64, u64, String)> = models
        .by_database
        .iter()
        .map(|(id, e)| (e.used, e.weight, id.clone()))
        .collect();
    by_age.sort_unstable_by_key(|(used, _, _)| std::cmp::Reverse(*used));
    let mut kept = 0u64;
    for (i, (_, weight, id)) in by_age.into_iter().enumerate() {
        if i == 0 || kept + weight <= keep {
            kept += weight;
            continue;
        }
        if let Some(old) = models.by_database.remove(&id) {
            models.weight -= old.weight;
        }
    }
}

/// Loads the model from the catalog: tables, fields and webhooks.
///
/// The four reads are prepared once per session and sent together
/// (tokio-postgres pipelines statements polled at the same time on one
/// session): one round trip instead of eight on the first request of a
/// database, the one a shard of many databases mostly serves
/// (docs/capacity.md, "A shard with 10,000 databases").
pub async fn load(c: &impl GenericClient, database_id: &str) -> ApiResult<DatabaseSchema> {
    let (version, tables, fields, webhooks) = tokio::try_join!(
        async {
            Ok::<_, ApiError>(
                catalog::databases::schema_version_and_timezone(c, database_id).await?,
            )
        },
        async { Ok::<_, ApiError>(catalog::tables::list(c, database_id).await?) },
        async { Ok::<_, ApiError>(catalog::fields::list_for_database(c, database_id).await?) },
        async { Ok::<_, ApiError>(catalog::outbox::rules(c, database_id).await?) },
    )?;
    let (version, timezone) = version.ok_or(ApiError::NotFound)?;
    let mut fields = fields;
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
    Ok(
        DatabaseSchema::new(database_id.to_owned(), version, timezone, tables)
            .with_webhooks(webhooks),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model of `tables` tables without fields (weight 1 + tables).
    fn model(id: &str, version: i64, tables: usize) -> Arc<DatabaseSchema> {
        let tables = (0..tables)
            .map(|i| super::super::TableSchema {
                id: format!("tbl_{id}{i}"),
                database_id: id.to_owned(),
                name: format!("t{i}"),
                position: i as i64,
                display_field_id: None,
                created_at: chrono::Utc::now(),
                updated_at: chrono::Utc::now(),
                fields: Vec::new(),
            })
            .collect();
        Arc::new(DatabaseSchema::new(
            id.to_owned(),
            version,
            "UTC".to_owned(),
            tables,
        ))
    }

    #[test]
    fn models_past_the_bound_are_dropped_least_recently_used_first() {
        let cache = SchemaCache::bounded(40);
        for i in 0..10 {
            // Weight 4 each: the ten fill the bound exactly.
            cache.store(model(&format!("db_{i}"), 1, 3));
        }
        assert_eq!(cache.held(), (10, 40));
        // db_0 is used again: it is the most recent now.
        assert!(cache.cached("db_0", 1).is_some());
        cache.store(model("db_10", 1, 3));
        // Over 40: down to at most 36, the oldest (db_1, db_2) dropped.
        let (held, weight) = cache.held();
        assert!(weight <= 36, "{weight}");
        assert_eq!(held, 9);
        assert!(cache.latest("db_0").is_some(), "recently used stays");
        assert!(cache.latest("db_10").is_some(), "the newest stays");
        assert!(cache.latest("db_1").is_none(), "the oldest goes first");
        assert!(cache.latest("db_2").is_none());
        assert!(cache.latest("db_3").is_some());
    }

    #[test]
    fn a_new_version_replaces_the_old_weight_and_forget_gives_it_back() {
        let cache = SchemaCache::bounded(1_000);
        cache.store(model("db_a", 1, 3));
        cache.store(model("db_a", 2, 9));
        assert_eq!(cache.held(), (1, 10));
        assert!(cache.cached("db_a", 1).is_none(), "an old version misses");
        assert!(cache.cached("db_a", 2).is_some());
        cache.forget("db_a");
        assert_eq!(cache.held(), (0, 0));
    }

    #[test]
    fn one_model_heavier_than_the_bound_is_still_kept() {
        let cache = SchemaCache::bounded(5);
        cache.store(model("db_small", 1, 1));
        cache.store(model("db_big", 1, 20));
        assert_eq!(cache.held(), (1, 21));
        assert!(cache.latest("db_big").is_some());
    }
}
