//! The `share_links` catalog table (migration 0007): read-only links to a
//! view. Only the SHA-256 of a token is stored; revoking deletes the row.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use tokio_postgres::Row;

/// A share link as the listing shows it (no token: it is not stored).
#[derive(Debug, Clone, Serialize)]
pub struct ShareLink {
    pub id: String,
    pub view_id: String,
    pub table_id: String,
    #[serde(serialize_with = "crate::json::ts")]
    pub created_at: DateTime<Utc>,
    pub created_by: String,
}

const COLUMNS: &str = "id, view_id, table_id, created_at, created_by";

fn from_row(row: &Row) -> Result<ShareLink, tokio_postgres::Error> {
    Ok(ShareLink {
        id: row.try_get("id")?,
        view_id: row.try_get("view_id")?,
        table_id: row.try_get("table_id")?,
        created_at: row.try_get("created_at")?,
        created_by: row.try_get("created_by")?,
    })
}

/// Lowercase hex SHA-256 of a token: what the table stores and looks up.
pub fn token_digest(token: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(token.as_bytes()))
}

pub struct New<'a> {
    pub id: &'a str,
    pub database_id: &'a str,
    pub table_id: &'a str,
    pub view_id: &'a str,
    pub token_sha256: &'a str,
    pub created_by: &'a str,
}

pub async fn insert(
    c: &impl GenericClient,
    new: &New<'_>,
) -> Result<ShareLink, tokio_postgres::Error> {
    let sql = format!(
        "INSERT INTO share_links (id, database_id, table_id, view_id, token_sha256, created_by)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
    );
    let row = c
        .query_one(
            &sql,
            &[
                &new.id,
                &new.database_id,
                &new.table_id,
                &new.view_id,
                &new.token_sha256,
                &new.created_by,
            ],
        )
        .await?;
    from_row(&row)
}

/// The view's links, oldest first.
pub async fn list_for_view(
    c: &impl GenericClient,
    database_id: &str,
    view_id: &str,
) -> Result<Vec<ShareLink>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM share_links WHERE view_id = $1 AND database_id = $2
         ORDER BY created_at, id"
    );
    let rows = c.query(&sql, &[&view_id, &database_id]).await?;
    rows.iter().map(from_row).collect()
}

pub async fn delete(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
) -> Result<bool, tokio_postgres::Error> {
    let n = c
        .execute(
            "DELETE FROM share_links WHERE id = $1 AND database_id = $2",
            &[&id, &database_id],
        )
        .await?;
    Ok(n > 0)
}

/// The live link whose token hashes to `token_sha256`, in `database_id`.
/// Its view and table exist (they cascade), so a hit is always servable.
pub async fn by_digest(
    c: &impl GenericClient,
    database_id: &str,
    token_sha256: &str,
) -> Result<Option<ShareLink>, tokio_postgres::Error> {
    let sql =
        format!("SELECT {COLUMNS} FROM share_links WHERE token_sha256 = $1 AND database_id = $2");
    let row = c.query_opt(&sql, &[&token_sha256, &database_id]).await?;
    row.as_ref().map(from_row).transpose()
}
