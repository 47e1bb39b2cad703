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

/// Queues every variant of an attachment that has no registry row (its
/// write failed and the immediate delete did too) for the blob sweeper.
pub async fn queue_garbage(
    c: &impl GenericClient,
    database_id: &str,
    attachment_id: &str,
    error: &str,
) -> Result<(), tokio_postgres::Error> {
    c.execute(
        "INSERT INTO blob_garbage (attachment_id, database_id, thumbnails, last_error) \
         VALUES ($1, $2, true, $3) ON CONFLICT (attachment_id) DO NOTHING",
        &[&attachment_id, &database_id, &error],
    )
    .await?;
    c.execute("SELECT pg_notify('blob_garbage', '')", &[])
        .await?;
    Ok(())
}

/// One queued attachment whose bytes are to be deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Garbage {
    pub attachment_id: String,
    pub database_id: String,
    pub attempts: i32,
}

/// Claims up to `limit` due rows of `blob_garbage`, leasing each for
/// `lease` (its `due_at` moves forward, so another sweeper skips it and a
/// crashed one's claim comes due again).
pub async fn claim_garbage(
    c: &impl GenericClient,
    limit: i64,
    lease: std::time::Duration,
) -> Result<Vec<Garbage>, tokio_postgres::Error> {
    let lease_secs = lease.as_secs_f64();
    let rows = c
        .query(
            "UPDATE blob_garbage g SET due_at = now() + make_interval(secs => $2) \
             FROM (SELECT attachment_id FROM blob_garbage WHERE due_at <= now() \
                   ORDER BY due_at LIMIT $1 FOR UPDATE SKIP LOCKED) due \
             WHERE g.attachment_id = due.attachment_id \
             RETURNING g.attachment_id, g.database_id, g.attempts",
            &[&limit, &lease_secs],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(Garbage {
                attachment_id: r.try_get(0)?,
                database_id: r.try_get(1)?,
                attempts: r.try_get(2)?,
            })
        })
        .collect()
}

/// The bytes are gone: forgets the row.
pub async fn garbage_done(
    c: &impl GenericClient,
    attachment_id: &str,
) -> Result<(), tokio_postgres::Error> {
    c.execute(
        "DELETE FROM blob_garbage WHERE attachment_id = $1",
        &[&attachment_id],
    )
    .await?;
    Ok(())
}

/// Deleting the bytes failed: counts the attempt, keeps the error and
/// retries after `retry_in`.
pub async fn garbage_failed(
    c: &impl GenericClient,
    attachment_id: &str,
    error: &str,
    retry_in: std::time::Duration,
) -> Result<(), tokio_postgres::Error> {
    let secs = retry_in.as_secs_f64();
    c.execute(
        "UPDATE blob_garbage SET attempts = attempts + 1, last_error = $2, \
         due_at = now() + make_interval(secs => $3) WHERE attachment_id = $1",
        &[&attachment_id, &error, &secs],
    )
    .await?;
    Ok(())
}

/// Deletes uploads no cell took within `ttl` (the trigger queues their
/// bytes) in the databases served here (placement `owned` or `moving`,
/// `FOR KEY SHARE` locked by the statement: the write fence); returns how
/// many.
pub async fn delete_unplaced(
    c: &impl GenericClient,
    ttl: std::time::Duration,
) -> Result<u64, tokio_postgres::Error> {
    let secs = ttl.as_secs_f64();
    c.execute(
        "DELETE FROM attachments a WHERE NOT a.placed \
         AND a.created_at < now() - make_interval(secs => $1) \
         AND EXISTS (SELECT 1 FROM placements pl \
                     WHERE pl.database_id = a.database_id \
                       AND pl.state IN ('owned', 'moving') \
                     FOR KEY SHARE)",
        &[&secs],
    )
    .await
}
