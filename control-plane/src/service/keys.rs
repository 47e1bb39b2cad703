//! API keys: minting, updating, revoking, and answering routers.

use anyhow::Context;
use cluster_protocol::control::{
    CreateKey, CreatedKey, DatabaseScope, KeyInfo, KeyRecord, UpdateKey,
};
use cluster_protocol::ids::{self, Kind};

use super::{redis_refused, unknown_user};
use crate::catalog::{keys, users};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// Length of the secret half of a token (`[0-9A-Za-z]`).
pub const SECRET_LEN: usize = 40;
const MAX_NAME_LEN: usize = 200;

fn unknown_key(id: &str) -> ApiError {
    ApiError::not_found(format!("Unknown API key {id}."))
}

fn validate_scope(scope: &DatabaseScope) -> ApiResult<()> {
    if let DatabaseScope::Only(list) = scope {
        if list.is_empty() {
            return Err(ApiError::bad_request(
                "databases must be \"all\" or a non-empty list of database ids.",
            ));
        }
        if let Some(bad) = list.iter().find(|d| !ids::is_valid(Kind::Database, d)) {
            return Err(ApiError::bad_request(format!(
                "{bad:?} is not a database id."
            )));
        }
    }
    Ok(())
}

fn validate_name(raw: &str) -> ApiResult<&str> {
    let name = raw.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_LEN {
        return Err(ApiError::bad_request(format!(
            "Key name must be 1 to {MAX_NAME_LEN} characters."
        )));
    }
    Ok(name)
}

pub async fn create(state: &AppState, req: CreateKey) -> ApiResult<CreatedKey> {
    let name = validate_name(&req.name)?;
    validate_scope(&req.databases)?;
    let client = state.session().await?;
    let user = users::get(&**client, &req.user_id)
        .await?
        .ok_or_else(|| unknown_user(&req.user_id))?;
    let id = ids::new_untagged(Kind::Key);
    let secret = ids::random_token(SECRET_LEN);
    let secret_hash = super::passwords::hash(secret.clone()).await?;
    let new = keys::NewKey {
        id: &id,
        user_id: &user.user.id,
        name,
        secret_hash: &secret_hash,
        access: req.access,
        databases: &req.databases,
    };
    let (info, version) = keys::insert(&**client, &new).await?;
    state
        .redis
        .announce_key(
            &user.user.id,
            &id,
            (!user.user.suspended).then_some(version),
        )
        .await;
    Ok(CreatedKey {
        token: format!("{id}.{secret}"),
        id: info.id,
        name: info.name,
        access: info.access,
        databases: info.databases,
    })
}

/// Changes a key's name, access and/or scope. Its version is deleted from Redis
/// before the commit (a failure rolls back: 503, nothing changed) and the
/// new one stored after it (best effort: absent, routers ask again).
pub async fn update(state: &AppState, id: &str, req: UpdateKey) -> ApiResult<KeyInfo> {
    if req.name.is_none() && req.access.is_none() && req.databases.is_none() {
        return Err(ApiError::bad_request(
            "Nothing to update: give name, access and/or databases.",
        ));
    }
    let name = req.name.as_deref().map(validate_name).transpose()?;
    if let Some(scope) = &req.databases {
        validate_scope(scope)?;
    }
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    let updated = keys::update(&*tx, id, name, req.access, req.databases.as_ref())
        .await?
        .ok_or_else(|| unknown_key(id))?;
    // Fail closed: routers must not keep the old access or scope.
    let user_id = updated.info.user_id.as_str();
    if let Err(e) = state.redis.clear_keys(user_id, &[id.to_string()]).await {
        drop(tx);
        return Err(redis_refused("clear the key's version", e));
    }
    tx.commit().await?;
    // A suspended user's keys stay without liveness until unsuspension.
    state
        .redis
        .announce_key(
            user_id,
            id,
            (!updated.user_suspended).then_some(updated.version),
        )
        .await;
    Ok(updated.info)
}

/// Revokes (deletes) a key. The liveness key is cleared before the commit
/// (a Redis failure then aborts the revocation: 503, nothing changed) and
/// again after it (a failure is a 500 asking for a retry). A retry on the
/// now unknown key answers 404: its version was already deleted before the
/// commit, and a deleted key is never re-seeded.
pub async fn revoke(state: &AppState, id: &str) -> ApiResult<()> {
    let ids = [id.to_string()];
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    let Some(user_id) = keys::delete(&*tx, id).await? else {
        drop(tx);
        return Err(unknown_key(id));
    };
    if let Err(e) = state.redis.clear_keys(&user_id, &ids).await {
        drop(tx);
        return Err(redis_refused("clear the key's liveness", e));
    }
    tx.commit().await?;
    state
        .redis
        .clear_keys(&user_id, &ids)
        .await
        .context("clear key liveness after revocation")?;
    state.redis.announce_key(&user_id, id, None).await;
    Ok(())
}

/// The key for a router, re-seeding its liveness when it is live. The key's
/// and its user's rows are share-locked from the read to after the seed, so
/// an update, revocation or suspension (which delete the version under a
/// row lock before committing) cannot slip between them: a seed can never
/// outlive a change.
pub async fn fetch(state: &AppState, id: &str) -> ApiResult<KeyRecord> {
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    let record = keys::get_record_for_share(&*tx, id)
        .await?
        .ok_or_else(|| unknown_key(id))?;
    if !record.user.suspended {
        if let Err(e) = state
            .redis
            .set_key_version(&record.user.id, id, record.version)
            .await
        {
            tracing::warn!(
                error = format!("{e:#}"),
                id,
                "redis: seed key liveness failed; continuing"
            );
        }
    }
    tx.commit().await?;
    Ok(record)
}
