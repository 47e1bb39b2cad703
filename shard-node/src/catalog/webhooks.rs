//! The `webhooks` catalog table as the configuration routes use it, and
//! the match memory those routes clear (`webhook_matches`).
//!
//! The signing secret is read with the row but printed by nobody: it is a
//! [`SigningSecret`], whose `Debug` hides it. What a reply shows of it is
//! the route's decision (`webhooks::api`).

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde::Serialize;
use serde_json::Value;
use tokio_postgres::Row;

/// A webhook's signing secret: 48 lowercase hex characters, used as text
/// for the HMAC key (ARCHITECTURE.md "Decisions").
#[derive(Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct SigningSecret(pub String);

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret(..)")
    }
}

/// A webhook row as the API returns it (part A "Webhook", plus
/// `updated_at`). `matches_recorded` is internal and not carried.
#[derive(Debug, Clone, Serialize)]
pub struct Webhook {
    pub id: String,
    pub database_id: String,
    pub table_id: Option<String>,
    pub name: String,
    pub url: String,
    pub trigger_type: String,
    pub payload_key: String,
    pub secret: SigningSecret,
    pub is_active: bool,
    pub conditions: Option<Value>,
    pub watched_field_ids: Option<Vec<String>>,
    pub consecutive_failures: i32,
    pub last_status: Option<i32>,
    #[serde(serialize_with = "crate::json::ts_opt")]
    pub last_attempt_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "crate::json::ts_opt")]
    pub paused_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "crate::json::ts")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::json::ts")]
    pub updated_at: DateTime<Utc>,
}

impl Webhook {
    /// The webhook as every reply but create and regenerate shows it: the
    /// secret blank (part C: shown once).
    pub fn secret_hidden(mut self) -> Webhook {
        self.secret = SigningSecret(String::new());
        self
    }
}

/// What a create or an update writes: the whole configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings<'a> {
    pub name: &'a str,
    pub url: &'a str,
    pub table_id: Option<&'a str>,
    pub trigger_type: &'a str,
    pub payload_key: &'a str,
    pub conditions: Option<&'a Value>,
    pub watched_field_ids: Option<&'a [String]>,
    pub is_active: bool,
}

const COLUMNS: &str = "id, database_id, table_id, name, url, trigger_type, payload_key, secret, \
     is_active, conditions, watched_field_ids, consecutive_failures, last_status, \
     last_attempt_at, paused_at, created_at, updated_at";

fn from_row(row: &Row) -> Result<Webhook, tokio_postgres::Error> {
    Ok(Webhook {
        id: row.try_get("id")?,
        database_id: row.try_get("database_id")?,
        table_id: row.try_get("table_id")?,
        name: row.try_get("name")?,
        url: row.try_get("url")?,
        trigger_type: row.try_get("trigger_type")?,
        payload_key: row.try_get("payload_key")?,
        secret: SigningSecret(row.try_get("secret")?),
        is_active: row.try_get("is_active")?,
        conditions: row.try_get("conditions")?,
        watched_field_ids: row.try_get("watched_field_ids")?,
        consecutive_failures: row.try_get("consecutive_failures")?,
        last_status: row.try_get("last_status")?,
        last_attempt_at: row.try_get("last_attempt_at")?,
        paused_at: row.try_get("paused_at")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// The database's webhooks by `created_at`, then id.
pub async fn list(
    c: &impl GenericClient,
    database_id: &str,
) -> Result<Vec<Webhook>, tokio_postgres::Error> {
    let sql =
        format!("SELECT {COLUMNS} FROM webhooks WHERE database_id = $1 ORDER BY created_at, id");
    let rows = c.query(&sql, &[&database_id]).await?;
    rows.iter().map(from_row).collect()
}

/// The webhook, only if it belongs to `database_id`.
pub async fn get(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
) -> Result<Option<Webhook>, tokio_postgres::Error> {
    let sql = format!("SELECT {COLUMNS} FROM webhooks WHERE id = $1 AND database_id = $2");
    let row = c.query_opt(&sql, &[&id, &database_id]).await?;
    row.as_ref().map(from_row).transpose()
}

/// As [`get`], locking the row until the transaction ends.
pub async fn get_for_update(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
) -> Result<Option<Webhook>, tokio_postgres::Error> {
    let sql =
        format!("SELECT {COLUMNS} FROM webhooks WHERE id = $1 AND database_id = $2 FOR UPDATE");
    let row = c.query_opt(&sql, &[&id, &database_id]).await?;
    row.as_ref().map(from_row).transpose()
}

/// How many webhooks the database has.
pub async fn count(
    c: &impl GenericClient,
    database_id: &str,
) -> Result<i64, tokio_postgres::Error> {
    let row = c
        .query_one(
            "SELECT count(*) FROM webhooks WHERE database_id = $1",
            &[&database_id],
        )
        .await?;
    row.try_get(0)
}

/// Inserts a new webhook; its match memory starts unrecorded.
pub async fn insert(
    c: &impl GenericClient,
    id: &str,
    database_id: &str,
    settings: &Settings<'_>,
    secret: &SigningSecret,
) -> Result<Webhook, tokio_postgres::Error> {
    let sql = format!(
        "INSERT INTO webhooks (id, database_id, table_id, name, url, trigger_type, payload_key,
                               secret, is_active, conditions, watched_field_ids)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
         RETURNING {COLUMNS}"
    );
    let row = c
        .query_one(
            &sql,
            &[
                &id,
                &database_id,
                &settings.table_id,
                &settings.name,
                &settings.url,
                &settings.trigger_type,
                &settings.payload_key,
                &secret.0,
                &settings.is_active,
                &settings.conditions,
                &settings.watched_field_ids,
            ],
        )
        .await?;
    from_row(&row)
}

/// Writes the whole configuration. `resume` clears an auto-pause and the
/// failure streak; `forget_matches` marks the match memory unrecorded
/// (the caller deletes its rows with [`forget_matches`]).
pub async fn update(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
    settings: &Settings<'_>,
    resume: bool,
    forget_matches: bool,
) -> Result<Option<Webhook>, tokio_postgres::Error> {
    let sql = format!(
        "UPDATE webhooks
         SET table_id = $3, name = $4, url = $5, trigger_type = $6, payload_key = $7,
             is_active = $8, conditions = $9, watched_field_ids = $10,
             paused_at = CASE WHEN $11 THEN NULL ELSE paused_at END,
             consecutive_failures = CASE WHEN $11 THEN 0 ELSE consecutive_failures END,
             matches_recorded = matches_recorded AND NOT $12,
             match_cursor = CASE WHEN $12 THEN NULL ELSE match_cursor END,
             updated_at = now()
         WHERE id = $1 AND database_id = $2
         RETURNING {COLUMNS}"
    );
    let row = c
        .query_opt(
            &sql,
            &[
                &id,
                &database_id,
                &settings.table_id,
                &settings.name,
                &settings.url,
                &settings.trigger_type,
                &settings.payload_key,
                &settings.is_active,
                &settings.conditions,
                &settings.watched_field_ids,
                &resume,
                &forget_matches,
            ],
        )
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// Deletes the webhook's match memory (its rows of `webhook_matches`).
pub async fn forget_matches(
    c: &impl GenericClient,
    webhook_id: &str,
) -> Result<u64, tokio_postgres::Error> {
    c.execute(
        "DELETE FROM webhook_matches WHERE webhook_id = $1",
        &[&webhook_id],
    )
    .await
}

/// Replaces the signing secret; `None` when not found.
pub async fn set_secret(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
    secret: &SigningSecret,
) -> Result<Option<Webhook>, tokio_postgres::Error> {
    let sql = format!(
        "UPDATE webhooks SET secret = $3, updated_at = now()
         WHERE id = $1 AND database_id = $2
         RETURNING {COLUMNS}"
    );
    let row = c.query_opt(&sql, &[&id, &database_id, &secret.0]).await?;
    row.as_ref().map(from_row).transpose()
}

/// Deletes the webhook (its match memory cascades). Its deliveries go
/// first, in the order the deliverer locks rows when it records attempts
/// (deliveries, then their webhook): deleting the webhook first and letting
/// the deliveries cascade takes the two locks the other way round, and a
/// delete racing an attempt being recorded was a deadlock.
pub async fn delete(
    c: &impl GenericClient,
    database_id: &str,
    id: &str,
) -> Result<bool, tokio_postgres::Error> {
    c.execute(
        "DELETE FROM deliveries WHERE webhook_id = $1 AND database_id = $2",
        &[&id, &database_id],
    )
    .await?;
    Ok(c.execute(
        "DELETE FROM webhooks WHERE id = $1 AND database_id = $2",
        &[&id, &database_id],
    )
    .await?
        == 1)
}
