//! Structural changes (tables, fields): each is ONE transaction that locks
//! the database row first (serialising structural work per database), and
//! ends by bumping the database's `updated_at`/`updated_by` and its
//! `schema_version`, so catalog rows, DDL and the version move together.

use deadpool_postgres::Transaction;

use crate::catalog::databases;
use crate::error::{ApiError, ApiResult};

/// Raises the transaction's statement time limit to the schema one (a
/// change may rewrite a table) while bounding its lock waits
/// ([`crate::db::SCHEMA_LIMITS_SQL`]), then locks the database row;
/// returns its routing tag. 404 when not held.
pub async fn begin(tx: &Transaction<'_>, database_id: &str) -> ApiResult<String> {
    tx.batch_execute(crate::db::SCHEMA_LIMITS_SQL).await?;
    databases::lock(tx, database_id)
        .await?
        .ok_or(ApiError::NotFound)
}

/// Bumps `updated_at`, `updated_by` and `schema_version`.
pub async fn finish(tx: &Transaction<'_>, database_id: &str, user_id: &str) -> ApiResult<()> {
    databases::touch_structure(tx, database_id, user_id).await?;
    Ok(())
}
