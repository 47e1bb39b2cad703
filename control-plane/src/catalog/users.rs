//! `users`: accounts, their suspension and access version.

use cluster_protocol::control::User;
use tokio_postgres::Row;

use super::Db;

const COLUMNS: &str = "id, email, name, suspended_at IS NOT NULL AS suspended, access_version";

/// A user and the version of what they may reach.
#[derive(Debug, Clone)]
pub struct UserRow {
    pub user: User,
    pub access_version: i64,
}

fn from_row(row: &Row) -> Result<UserRow, tokio_postgres::Error> {
    Ok(UserRow {
        user: User {
            id: row.try_get("id")?,
            email: row.try_get("email")?,
            name: row.try_get("name")?,
            suspended: row.try_get("suspended")?,
        },
        access_version: row.try_get("access_version")?,
    })
}

/// Inserts a user; `None` when the email is taken (case-insensitively).
pub async fn insert(
    db: &impl Db,
    id: &str,
    email: &str,
    name: &str,
) -> Result<Option<UserRow>, tokio_postgres::Error> {
    let sql = format!(
        "INSERT INTO users (id, email, name) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING {COLUMNS}"
    );
    db.query_opt(&sql, &[&id, &email, &name])
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

pub async fn get(db: &impl Db, id: &str) -> Result<Option<UserRow>, tokio_postgres::Error> {
    let sql = format!("SELECT {COLUMNS} FROM users WHERE id = $1");
    db.query_opt(&sql, &[&id])
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// The user with this email address, compared case-insensitively (as the
/// unique index does).
pub async fn get_by_email(
    db: &impl Db,
    email: &str,
) -> Result<Option<UserRow>, tokio_postgres::Error> {
    let sql = format!("SELECT {COLUMNS} FROM users WHERE lower(email) = lower($1)");
    db.query_opt(&sql, &[&email])
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// Like [`get`], share-locking the row until the transaction ends.
pub async fn get_for_share(
    db: &impl Db,
    id: &str,
) -> Result<Option<UserRow>, tokio_postgres::Error> {
    let sql = format!("SELECT {COLUMNS} FROM users WHERE id = $1 FOR SHARE");
    db.query_opt(&sql, &[&id])
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// Users oldest first, after the user `after` (by creation, then id), at
/// most `limit` (`None`: all).
pub async fn list(
    db: &impl Db,
    after: Option<&str>,
    limit: Option<i64>,
) -> Result<Vec<UserRow>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM users
         WHERE $1::text IS NULL
            OR (created_at, id) > (SELECT created_at, id FROM users WHERE id = $1)
         ORDER BY created_at, id LIMIT $2"
    );
    db.query(&sql, &[&after, &limit])
        .await?
        .iter()
        .map(from_row)
        .collect()
}

/// Sets or clears `suspended_at` (keeping the first suspension time).
pub async fn set_suspended(
    db: &impl Db,
    id: &str,
    suspended: bool,
) -> Result<Option<UserRow>, tokio_postgres::Error> {
    let sql = format!(
        "UPDATE users SET suspended_at = CASE WHEN $2 THEN COALESCE(suspended_at, now()) ELSE NULL END
         WHERE id = $1 RETURNING {COLUMNS}"
    );
    db.query_opt(&sql, &[&id, &suspended])
        .await?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// Bumps the access version; `None` if the user does not exist.
pub async fn bump_access_version(
    db: &impl Db,
    id: &str,
) -> Result<Option<i64>, tokio_postgres::Error> {
    db.query_opt(
        "UPDATE users SET access_version = access_version + 1 WHERE id = $1 RETURNING access_version",
        &[&id],
    )
    .await?
    .map(|r| r.try_get(0))
    .transpose()
}
