//! `api_keys`: hashed secrets, access and database scope of every key.

use anyhow::Context;
use cluster_protocol::control::{Access, DatabaseScope, KeyInfo, KeyRecord, User};
use tokio_postgres::Row;

use super::Db;

pub struct NewKey<'a> {
    pub id: &'a str,
    pub user_id: &'a str,
    pub name: &'a str,
    pub secret_hash: &'a str,
    pub access: Access,
    pub databases: &'a DatabaseScope,
}

/// `NULL` stores "all"; a list stores itself.
fn scope_column(scope: &DatabaseScope) -> Option<Vec<String>> {
    match scope {
        DatabaseScope::All => None,
        DatabaseScope::Only(ids) => Some(ids.clone()),
    }
}

fn scope_of(row: &Row) -> anyhow::Result<DatabaseScope> {
    let ids: Option<Vec<String>> = row.try_get("databases")?;
    Ok(ids.map_or(DatabaseScope::All, DatabaseScope::Only))
}

fn access_of(row: &Row) -> anyhow::Result<Access> {
    let raw: String = row.try_get("access")?;
    Access::parse(&raw).with_context(|| format!("unknown access {raw:?} in catalog"))
}

fn info_of(row: &Row) -> anyhow::Result<KeyInfo> {
    Ok(KeyInfo {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        user_id: row.try_get("user_id")?,
        access: access_of(row)?,
        databases: scope_of(row)?,
        created_at: row.try_get("created_at")?,
    })
}

/// Inserts a key; returns it with its first version.
pub async fn insert(db: &impl Db, key: &NewKey<'_>) -> anyhow::Result<(KeyInfo, i64)> {
    let row = db
        .query_one(
            "INSERT INTO api_keys (id, user_id, name, secret_hash, access, databases)
             VALUES ($1, $2, $3, $4, $5, $6)
             RETURNING id, user_id, name, access, databases, created_at, version",
            &[
                &key.id,
                &key.user_id,
                &key.name,
                &key.secret_hash,
                &key.access.as_str(),
                &scope_column(key.databases),
            ],
        )
        .await
        .context("insert api key")?;
    Ok((info_of(&row)?, row.try_get("version")?))
}

/// The key with its user, as routers need it, share-locking both rows
/// until the transaction ends.
pub async fn get_record_for_share(db: &impl Db, id: &str) -> anyhow::Result<Option<KeyRecord>> {
    let Some(row) = db
        .query_opt(
            "SELECT k.id, k.name, k.user_id, k.secret_hash, k.access, k.databases, k.created_at, k.version,
                    u.email, u.name AS user_name, u.suspended_at IS NOT NULL AS suspended,
                    q.requests_per_minute
             FROM api_keys k JOIN users u ON u.id = k.user_id
                  LEFT JOIN account_quotas q ON q.user_id = k.user_id
             WHERE k.id = $1
             FOR SHARE OF k, u",
            &[&id],
        )
        .await
        .context("read api key")?
    else {
        return Ok(None);
    };
    Ok(Some(KeyRecord {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        user: User {
            id: row.try_get("user_id")?,
            email: row.try_get("email")?,
            name: row.try_get("user_name")?,
            suspended: row.try_get("suspended")?,
        },
        secret_hash: row.try_get("secret_hash")?,
        access: access_of(&row)?,
        databases: scope_of(&row)?,
        created_at: row.try_get("created_at")?,
        version: row.try_get("version")?,
        requests_per_minute: row
            .try_get::<_, Option<i64>>("requests_per_minute")?
            .map(u64::try_from)
            .transpose()
            .context("negative requests_per_minute in catalog")?,
    }))
}

/// What an update returns: the key, its new version, and whether its user is suspended.
pub struct UpdatedKey {
    pub info: KeyInfo,
    pub version: i64,
    pub user_suspended: bool,
}

/// Changes name, access and/or scope and bumps the version; `None` if unknown.
pub async fn update(
    db: &impl Db,
    id: &str,
    name: Option<&str>,
    access: Option<Access>,
    databases: Option<&DatabaseScope>,
) -> anyhow::Result<Option<UpdatedKey>> {
    let access = access.map(Access::as_str);
    let set_scope = databases.is_some();
    let scope = databases.and_then(scope_column);
    let Some(row) = db
        .query_opt(
            "UPDATE api_keys SET access = COALESCE($2, access), name = COALESCE($5, name),
                    databases = CASE WHEN $3 THEN $4 ELSE databases END,
                    version = version + 1
             WHERE id = $1
             RETURNING id, user_id, name, access, databases, created_at, version,
                       (SELECT suspended_at IS NOT NULL FROM users WHERE users.id = api_keys.user_id) AS suspended",
            &[&id, &access, &set_scope, &scope, &name],
        )
        .await
        .context("update api key")?
    else {
        return Ok(None);
    };
    Ok(Some(UpdatedKey {
        info: info_of(&row)?,
        version: row.try_get("version")?,
        user_suspended: row.try_get("suspended")?,
    }))
}

/// Deletes a key: its user's id, `None` if it did not exist.
pub async fn delete(db: &impl Db, id: &str) -> anyhow::Result<Option<String>> {
    db.query_opt(
        "DELETE FROM api_keys WHERE id = $1 RETURNING user_id",
        &[&id],
    )
    .await
    .context("delete api key")?
    .map(|row| row.try_get("user_id").context("user_id of deleted key"))
    .transpose()
}

/// Every key of a user, oldest first.
pub async fn of_user(db: &impl Db, user_id: &str) -> anyhow::Result<Vec<KeyInfo>> {
    db.query(
        "SELECT id, user_id, name, access, databases, created_at FROM api_keys
         WHERE user_id = $1 ORDER BY created_at, id",
        &[&user_id],
    )
    .await
    .context("list keys of user")?
    .iter()
    .map(info_of)
    .collect()
}

/// Every key of a user with its version.
pub async fn versions_of_user(db: &impl Db, user_id: &str) -> anyhow::Result<Vec<(String, i64)>> {
    let rows = db
        .query(
            "SELECT id, version FROM api_keys WHERE user_id = $1 ORDER BY id",
            &[&user_id],
        )
        .await
        .context("list keys of user")?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}

/// Bumps the version of every key of a user (what routers cache about
/// them changed, e.g. the owner's request budget); returns the keys with
/// their new versions.
pub async fn bump_versions_of_user(
    db: &impl Db,
    user_id: &str,
) -> anyhow::Result<Vec<(String, i64)>> {
    let rows = db
        .query(
            "UPDATE api_keys SET version = version + 1 WHERE user_id = $1 RETURNING id, version",
            &[&user_id],
        )
        .await
        .context("bump versions of the user's keys")?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}
