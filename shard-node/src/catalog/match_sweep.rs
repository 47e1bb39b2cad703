//! What the match clock (`webhooks::clock`) reads and writes to work
//! through one `record_matches` webhook's records in keyset batches: the
//! next window of record ids after its cursor (over the records of the
//! tables it covers and its match memory), what matches and what the
//! memory holds inside that window, and the cursor itself
//! (`webhooks.match_cursor`, migration 0008).
//!
//! A window is at most `limit` ids: the first `limit` of each table and of
//! the memory after the cursor, merged, the first `limit` of those kept;
//! everything of those tables and of the memory between the cursor and the
//! window's last id is therefore in the window, so the two reads inside it
//! return at most `limit` ids each. Trashed records count toward the window
//! (the work is bounded whatever the trash holds) but never match.

use deadpool_postgres::GenericClient;
use filter_lang::SqlValue;
use tokio_postgres::types::{ToSql, Type};

use crate::records::store::{bind, typed};

/// Where a sweep starts: every id is after the empty string.
pub const START: &str = "";

/// The next at most `limit` distinct ids after `after`, in id order, of
/// the real tables `qualified` (trashed records included) and of the
/// webhook's match memory.
pub async fn window(
    c: &impl GenericClient,
    qualified: &[String],
    webhook_id: &str,
    after: &str,
    limit: i64,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let mut parts: Vec<String> = qualified
        .iter()
        .map(|t| format!("(SELECT r.id FROM {t} AS r WHERE r.id > $2 ORDER BY r.id LIMIT $3)"))
        .collect();
    parts.push(
        "(SELECT m.record_id FROM webhook_matches m
          WHERE m.webhook_id = $1 AND m.record_id > $2 ORDER BY m.record_id LIMIT $3)"
            .to_owned(),
    );
    let sql = format!(
        "SELECT w.id FROM ({}) AS w(id) ORDER BY w.id LIMIT $3",
        parts.join(" UNION ")
    );
    let rows = c.query(&sql, &[&webhook_id, &after, &limit]).await?;
    rows.iter().map(|r| r.try_get(0)).collect()
}

/// Ids of the live records of the real table `qualified` in `(after,
/// upto]` satisfying `condition` (boolean SQL over `r`, its values
/// numbered from `$1`).
pub async fn matching_between(
    c: &tokio_postgres::Transaction<'_>,
    qualified: &str,
    condition: &str,
    values: &[SqlValue],
    after: &str,
    upto: &str,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let (a, b) = (values.len() + 1, values.len() + 2);
    let sql = format!(
        "SELECT r.id FROM {qualified} AS r
         WHERE r.deleted_at IS NULL AND r.id > ${a}::text AND r.id <= ${b}::text AND ({condition})"
    );
    let mut bound = bind(values);
    let bounds: [(Box<dyn ToSql + Sync + Send>, Type); 2] = [
        (Box::new(after.to_owned()), Type::TEXT),
        (Box::new(upto.to_owned()), Type::TEXT),
    ];
    bound.extend(bounds);
    let rows = c.query_typed(&sql, &typed(&bound)).await?;
    rows.iter().map(|r| r.try_get(0)).collect()
}

/// The records in `(after, upto]` the webhook's match memory holds.
pub async fn memory_between(
    c: &impl GenericClient,
    webhook_id: &str,
    after: &str,
    upto: &str,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let statement = c
        .prepare_cached(
            "SELECT record_id FROM webhook_matches
             WHERE webhook_id = $1 AND record_id > $2 AND record_id <= $3",
        )
        .await?;
    let rows = c.query(&statement, &[&webhook_id, &after, &upto]).await?;
    rows.iter().map(|r| r.try_get(0)).collect()
}

/// Sets where the next batch starts; `None` starts the next sweep from the
/// first record.
pub async fn set_cursor(
    c: &impl GenericClient,
    webhook_id: &str,
    cursor: Option<&str>,
) -> Result<(), tokio_postgres::Error> {
    c.execute(
        "UPDATE webhooks SET match_cursor = $2 WHERE id = $1",
        &[&webhook_id, &cursor],
    )
    .await?;
    Ok(())
}
