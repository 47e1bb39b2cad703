//! The `comments` catalog table (migration 0007): comments on records.
//!
//! A comment names its record by id only (records live in the tenant
//! schema), so whatever removes records for good (trash purge, the trash
//! purger) calls [`delete_for_records`] in its own transaction; tables and
//! databases take their comments with them by foreign key.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use serde_json::{json, Value};
use tokio_postgres::Row;

/// A comment as the API returns it (README "Comments").
#[derive(Debug, Clone)]
pub struct Comment {
    pub id: String,
    pub table_id: String,
    pub record_id: String,
    pub author_id: String,
    pub text: String,
    pub edited: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Serialize for Comment {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

impl Comment {
    /// `author` is what the service knows of the writer: the principal
    /// carries only the user id, so the object holds `id` alone (clients
    /// must accept more keys later, part C "Versioning").
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "table_id": self.table_id,
            "record_id": self.record_id,
            "author_id": self.author_id,
            "author": { "id": self.author_id },
            "text": self.text,
            "edited": self.edited,
            "created_at": crate::json::format_ts(&self.created_at),
            "updated_at": crate::json::format_ts(&self.updated_at),
        })
    }
}

const COLUMNS: &str = "id, table_id, record_id, author_id, body, edited, created_at, updated_at";

fn from_row(row: &Row) -> Result<Comment, tokio_postgres::Error> {
    Ok(Comment {
        id: row.try_get("id")?,
        table_id: row.try_get("table_id")?,
        record_id: row.try_get("record_id")?,
        author_id: row.try_get("author_id")?,
        text: row.try_get("body")?,
        edited: row.try_get("edited")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// What a new comment is made of.
pub struct New<'a> {
    pub id: &'a str,
    pub database_id: &'a str,
    pub table_id: &'a str,
    pub record_id: &'a str,
    pub author_id: &'a str,
    pub text: &'a str,
}

pub async fn insert(
    c: &impl GenericClient,
    new: &New<'_>,
) -> Result<Comment, tokio_postgres::Error> {
    let sql = format!(
        "INSERT INTO comments (id, database_id, table_id, record_id, author_id, body)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
    );
    let row = c
        .query_one(
            &sql,
            &[
                &new.id,
                &new.database_id,
                &new.table_id,
                &new.record_id,
                &new.author_id,
                &new.text,
            ],
        )
        .await?;
    from_row(&row)
}

/// The comment, only if it belongs to `database_id`; `lock` takes the row
/// `FOR UPDATE` (an edit or a delete reads it in its transaction).
pub async fn get(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
    lock: bool,
) -> Result<Option<Comment>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM comments WHERE id = $1 AND database_id = $2{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    let row = c.query_opt(&sql, &[&id, &database_id]).await?;
    row.as_ref().map(from_row).transpose()
}

/// Replaces the text, marks the comment edited and bumps `updated_at`
/// (never before `created_at`, whatever the clock did).
pub async fn update_text(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
    text: &str,
) -> Result<Option<Comment>, tokio_postgres::Error> {
    let sql = format!(
        "UPDATE comments SET body = $3, edited = true,
                updated_at = greatest(clock_timestamp(), updated_at)
          WHERE id = $1 AND database_id = $2 RETURNING {COLUMNS}"
    );
    let row = c.query_opt(&sql, &[&id, &database_id, &text]).await?;
    row.as_ref().map(from_row).transpose()
}

pub async fn delete(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
) -> Result<bool, tokio_postgres::Error> {
    let n = c
        .execute(
            "DELETE FROM comments WHERE id = $1 AND database_id = $2",
            &[&id, &database_id],
        )
        .await?;
    Ok(n > 0)
}

/// One page of a record's comments oldest first, strictly after `after`
/// (`created_at`, `id`), at most `limit` rows.
pub async fn page(
    c: &impl GenericClient,
    table_id: &str,
    record_id: &str,
    after: Option<(DateTime<Utc>, &str)>,
    limit: i64,
) -> Result<Vec<Comment>, tokio_postgres::Error> {
    let rows = match after {
        None => {
            let sql = format!(
                "SELECT {COLUMNS} FROM comments WHERE table_id = $1 AND record_id = $2
                 ORDER BY created_at, id LIMIT $3"
            );
            c.query(&sql, &[&table_id, &record_id, &limit]).await?
        }
        Some((at, id)) => {
            let sql = format!(
                "SELECT {COLUMNS} FROM comments WHERE table_id = $1 AND record_id = $2
                   AND (created_at, id) > ($3, $4)
                 ORDER BY created_at, id LIMIT $5"
            );
            c.query(&sql, &[&table_id, &record_id, &at, &id, &limit])
                .await?
        }
    };
    rows.iter().map(from_row).collect()
}

/// Deletes every comment of the table's records `record_ids` (purge).
pub async fn delete_for_records(
    c: &impl GenericClient,
    table_id: &str,
    record_ids: &[&str],
) -> Result<u64, tokio_postgres::Error> {
    if record_ids.is_empty() {
        return Ok(0);
    }
    c.execute(
        "DELETE FROM comments WHERE table_id = $1 AND record_id = ANY($2)",
        &[&table_id, &record_ids],
    )
    .await
}

/// One page of the database's comments for the export, oldest first,
/// after `after` (`created_at`, `id`), with the table's name.
pub async fn export_page(
    c: &impl GenericClient,
    database_id: &str,
    after: Option<(DateTime<Utc>, String)>,
    limit: i64,
) -> Result<Vec<(Comment, String)>, tokio_postgres::Error> {
    let (at, id) = match after {
        Some((at, id)) => (Some(at), id),
        None => (None, String::new()),
    };
    let rows = c
        .query(
            "SELECT c.id, c.table_id, c.record_id, c.author_id, c.body, c.edited,
                    c.created_at, c.updated_at, t.name AS table_name
               FROM comments c JOIN tables t ON t.id = c.table_id
              WHERE c.database_id = $1
                AND ($2::timestamptz IS NULL OR (c.created_at, c.id) > ($2, $3))
              ORDER BY c.created_at, c.id LIMIT $4",
            &[&database_id, &at, &id, &limit],
        )
        .await?;
    rows.iter()
        .map(|r| Ok((from_row(r)?, r.try_get("table_name")?)))
        .collect()
}
