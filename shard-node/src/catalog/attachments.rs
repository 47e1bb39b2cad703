//! The `attachments` registry (part A "Attachment registry entry") and the
//! per-database byte count it is charged against. Bytes live in the blob
//! store; a deleted row's bytes are queued in `blob_garbage` by a trigger
//! (migration 0005) and removed after commit by the blob sweeper.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

/// One registry row.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    pub id: String,
    pub database_id: String,
    pub table_id: String,
    pub field_id: String,
    pub record_id: String,
    pub filename: String,
    pub size_bytes: i64,
    pub content_type: String,
    /// Whether the WebP derivatives exist.
    pub thumbnails: bool,
    /// Whether a cell holds it.
    pub placed: bool,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

/// What an upload or a URL fetch registers.
#[derive(Debug, Clone)]
pub struct NewAttachment<'a> {
    pub id: &'a str,
    pub database_id: &'a str,
    pub table_id: &'a str,
    pub field_id: &'a str,
    pub record_id: &'a str,
    pub filename: &'a str,
    pub size_bytes: i64,
    pub content_type: &'a str,
    pub thumbnails: bool,
    /// A URL fetch places its file in the same write; an upload does not.
    pub placed: bool,
    pub created_by: &'a str,
}

const COLUMNS: &str = "id, database_id, table_id, field_id, record_id, filename, size_bytes, \
                       content_type, thumbnails, placed, created_by, created_at";

fn from_row(row: &Row) -> Result<Attachment, tokio_postgres::Error> {
    Ok(Attachment {
        id: row.try_get("id")?,
        database_id: row.try_get("database_id")?,
        table_id: row.try_get("table_id")?,
        field_id: row.try_get("field_id")?,
        record_id: row.try_get("record_id")?,
        filename: row.try_get("filename")?,
        size_bytes: row.try_get("size_bytes")?,
        content_type: row.try_get("content_type")?,
        thumbnails: row.try_get("thumbnails")?,
        placed: row.try_get("placed")?,
        created_by: row.try_get("created_by")?,
        created_at: row.try_get("created_at")?,
    })
}

/// Adds `bytes` to the database's original bytes unless that would pass
/// `ceiling`; false (nothing changed) when it would, or when the database
/// is not here.
pub async fn charge(
    c: &impl GenericClient,
    database_id: &str,
    bytes: i64,
    ceiling: i64,
) -> Result<bool, tokio_postgres::Error> {
    let n = c
        .execute(
            "UPDATE databases SET attachment_bytes = attachment_bytes + $2 \
             WHERE id = $1 AND attachment_bytes + $2 <= $3",
            &[&database_id, &bytes, &ceiling],
        )
        .await?;
    Ok(n == 1)
}

/// Original bytes the database holds now (0 when it is not here).
pub async fn bytes_held(
    c: &impl GenericClient,
    database_id: &str,
) -> Result<i64, tokio_postgres::Error> {
    let row = c
        .query_opt(
            "SELECT attachment_bytes FROM databases WHERE id = $1",
            &[&database_id],
        )
        .await?;
    Ok(row.map(|r| r.get(0)).unwrap_or(0))
}

/// Registers one attachment (the bytes are already stored).
pub async fn insert(
    c: &impl GenericClient,
    a: &NewAttachment<'_>,
) -> Result<Attachment, tokio_postgres::Error> {
    let sql = format!(
        "INSERT INTO attachments (id, database_id, table_id, field_id, record_id, filename, \
         size_bytes, content_type, thumbnails, placed, created_by) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING {COLUMNS}"
    );
    let row = c
        .query_one(
            &sql,
            &[
                &a.id,
                &a.database_id,
                &a.table_id,
                &a.field_id,
                &a.record_id,
                &a.filename,
                &a.size_bytes,
                &a.content_type,
                &a.thumbnails,
                &a.placed,
                &a.created_by,
            ],
        )
        .await?;
    from_row(&row)
}

/// One attachment by id, wherever it belongs (the signed file route).
pub async fn get(
    c: &impl GenericClient,
    id: &str,
) -> Result<Option<Attachment>, tokio_postgres::Error> {
    let sql = format!("SELECT {COLUMNS} FROM attachments WHERE id = $1");
    let row = c.query_opt(&sql, &[&id]).await?;
    row.as_ref().map(from_row).transpose()
}

/// The database's attachments among `ids` (any order; missing ids are
/// simply absent).
pub async fn by_ids(
    c: &impl GenericClient,
    database_id: &str,
    ids: &[&str],
) -> Result<Vec<Attachment>, tokio_postgres::Error> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!("SELECT {COLUMNS} FROM attachments WHERE database_id = $1 AND id = ANY($2)");
    let rows = c.query(&sql, &[&database_id, &ids]).await?;
    rows.iter().map(from_row).collect()
}

/// Marks `ids` as held by a cell.
pub async fn place(c: &impl GenericClient, ids: &[&str]) -> Result<u64, tokio_postgres::Error> {
    if ids.is_empty() {
        return Ok(0);
    }
    c.execute(
        "UPDATE attachments SET placed = true WHERE id = ANY($1) AND NOT placed",
        &[&ids],
    )
    .await
}

/// Deletes the registry rows of `ids` (their bytes are queued for the
/// sweeper by the trigger).
pub async fn delete(
    c: &impl GenericClient,
    database_id: &str,
    ids: &[&str],
) -> Result<u64, tokio_postgres::Error> {
    if ids.is_empty() {
        return Ok(0);
    }
    c.execute(
        "DELETE FROM attachments WHERE database_id = $1 AND id = ANY($2)",
        &[&database_id, &ids],
    )
    .await
}

/// Deletes every attachment of the table's records `record_ids` (purge).
pub async fn delete_for_records(
    c: &impl GenericClient,
    table_id: &str,
    record_ids: &[&str],
) -> Result<u64, tokio_postgres::Error> {
    if record_ids.is_empty() {
        return Ok(0);
    }
    c.execute(
        "DELETE FROM attachments WHERE table_id = $1 AND record_id = ANY($2)",
        &[&table_id, &record_ids],
    )
    .await
}

/// Where an export's registry page starts: after this `(created_at, id)`.
pub type ExportCursor = (DateTime<Utc>, String);

/// Up to `limit` of the database's placed attachments after `after`,
/// oldest first (`created_at`, then `id`), for the export: keyset pages, so
/// a database with many attachments is never read whole. No trash filter
/// (a trashed record's cells still hold theirs); unplaced uploads, which no
/// cell holds yet, are left out.
pub async fn export_page(
    c: &impl GenericClient,
    database_id: &str,
    after: Option<&ExportCursor>,
    limit: i64,
) -> Result<Vec<Attachment>, tokio_postgres::Error> {
    let rows = match after {
        None => {
            let sql = format!(
                "SELECT {COLUMNS} FROM attachments WHERE database_id = $1 AND placed \
                 ORDER BY created_at, id LIMIT $2"
            );
            c.query(&sql, &[&database_id, &limit]).await?
        }
        Some((at, id)) => {
            let sql = format!(
                "SELECT {COLUMNS} FROM attachments WHERE database_id = $1 AND placed \
                 AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $4"
            );
            c.query(&sql, &[&database_id, at, id, &limit]).await?
        }
    };
    rows.iter().map(from_row).collect()
}
