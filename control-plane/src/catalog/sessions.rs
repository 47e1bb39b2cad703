//! `sessions` and `users.password_hash`: the browser's sign-in state. A
//! session row is found by the SHA-256 of its token, never the token.

use chrono::{DateTime, Utc};
use tokio_postgres::Row;

use super::users::UserRow;
use super::Db;

/// A session row with its user and the database's clock at the read.
pub struct SessionRow {
    pub user: UserRow,
    pub csrf_token: String,
    pub last_seen_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub now: DateTime<Utc>,
}

/// A user's password hash (`None`: no password set) with the user.
pub struct Credentials {
    pub user: UserRow,
    pub password_hash: Option<String>,
}

fn user_of(row: &Row) -> Result<UserRow, tokio_postgres::Error> {
    Ok(UserRow {
        user: cluster_protocol::control::User {
            id: row.try_get("id")?,
            email: row.try_get("email")?,
            name: row.try_get("name")?,
            suspended: row.try_get("suspended")?,
        },
        access_version: row.try_get("access_version")?,
    })
}

const USER_COLUMNS: &str =
    "u.id, u.email, u.name, u.suspended_at IS NOT NULL AS suspended, u.access_version";

/// The user with this email (case-insensitively) and their password hash.
pub async fn credentials_by_email(
    db: &impl Db,
    email: &str,
) -> Result<Option<Credentials>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {USER_COLUMNS}, u.password_hash FROM users u WHERE lower(u.email) = lower($1)"
    );
    let Some(row) = db.query_opt(&sql, &[&email]).await? else {
        return Ok(None);
    };
    Ok(Some(Credentials {
        user: user_of(&row)?,
        password_hash: row.try_get("password_hash")?,
    }))
}

/// The password hash of a user (`Some(None)`: no password set).
pub async fn password_hash(
    db: &impl Db,
    user_id: &str,
) -> Result<Option<Option<String>>, tokio_postgres::Error> {
    db.query_opt(
        "SELECT password_hash FROM users WHERE id = $1 FOR UPDATE",
        &[&user_id],
    )
    .await?
    .map(|r| r.try_get(0))
    .transpose()
}

/// Sets a user's password hash; `false` if the user does not exist.
pub async fn set_password_hash(
    db: &impl Db,
    user_id: &str,
    hash: &str,
) -> Result<bool, tokio_postgres::Error> {
    Ok(db
        .execute(
            "UPDATE users SET password_hash = $2 WHERE id = $1",
            &[&user_id, &hash],
        )
        .await?
        > 0)
}

/// Inserts a session living `ttl_secs` from now.
pub async fn insert(
    db: &impl Db,
    token_sha256: &[u8],
    user_id: &str,
    csrf_token: &str,
    ttl_secs: i64,
) -> Result<(), tokio_postgres::Error> {
    db.execute(
        "INSERT INTO sessions (token_sha256, user_id, csrf_token, expires_at)
         VALUES ($1, $2, $3, now() + make_interval(secs => $4::bigint))",
        &[&token_sha256, &user_id, &csrf_token, &ttl_secs],
    )
    .await?;
    Ok(())
}

/// The session with this token hash, its user, and the database's now.
pub async fn get(
    db: &impl Db,
    token_sha256: &[u8],
) -> Result<Option<SessionRow>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {USER_COLUMNS}, s.csrf_token, s.last_seen_at, s.expires_at, now() AS now
         FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.token_sha256 = $1"
    );
    let Some(row) = db.query_opt(&sql, &[&token_sha256]).await? else {
        return Ok(None);
    };
    Ok(Some(SessionRow {
        user: user_of(&row)?,
        csrf_token: row.try_get("csrf_token")?,
        last_seen_at: row.try_get("last_seen_at")?,
        expires_at: row.try_get("expires_at")?,
        now: row.try_get("now")?,
    }))
}

/// Marks the session seen now.
pub async fn touch(db: &impl Db, token_sha256: &[u8]) -> Result<(), tokio_postgres::Error> {
    db.execute(
        "UPDATE sessions SET last_seen_at = now() WHERE token_sha256 = $1",
        &[&token_sha256],
    )
    .await?;
    Ok(())
}

/// Deletes one session; `false` if there was none.
pub async fn delete(db: &impl Db, token_sha256: &[u8]) -> Result<bool, tokio_postgres::Error> {
    Ok(db
        .execute(
            "DELETE FROM sessions WHERE token_sha256 = $1",
            &[&token_sha256],
        )
        .await?
        > 0)
}

/// Deletes every session of a user; returns how many.
pub async fn delete_of_user(db: &impl Db, user_id: &str) -> Result<u64, tokio_postgres::Error> {
    db.execute("DELETE FROM sessions WHERE user_id = $1", &[&user_id])
        .await
}

/// Deletes a user's sessions that ended (expired or idle past `idle_secs`).
pub async fn delete_dead_of_user(
    db: &impl Db,
    user_id: &str,
    idle_secs: i64,
) -> Result<u64, tokio_postgres::Error> {
    db.execute(
        "DELETE FROM sessions WHERE user_id = $1
           AND (expires_at <= now() OR last_seen_at <= now() - make_interval(secs => $2::bigint))",
        &[&user_id, &idle_secs],
    )
    .await
}

/// Deletes every ended session (expired, or idle past `idle_secs`).
pub async fn delete_ended(db: &impl Db, idle_secs: i64) -> Result<u64, tokio_postgres::Error> {
    db.execute(
        "DELETE FROM sessions
         WHERE expires_at <= now() OR last_seen_at <= now() - make_interval(secs => $1::bigint)",
        &[&idle_secs],
    )
    .await
}
