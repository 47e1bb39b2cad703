//! Memberships, support grants and the access summary routers cache.
//! Every change bumps the user's access version in the same transaction and,
//! before committing, deletes the version from Redis (failing closed: if
//! Redis does not confirm, the change is rolled back and answered 503);
//! after the commit the new version is stored and an invalidation published
//! (best effort). See `liveness`.

use cluster_protocol::control::{MemberChange, SupportChange, UserAccess};
use deadpool_postgres::Transaction;

use super::{redis_refused, unknown_database, unknown_user};
use crate::catalog::{databases, members, users};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// Which change to apply once user and database are known to exist.
enum Change {
    AddMember(cluster_protocol::control::Role),
    RemoveMember,
    GrantSupport,
    RevokeSupport,
}

async fn apply(
    state: &AppState,
    database_id: &str,
    user_id: &str,
    change: Change,
) -> ApiResult<()> {
    let mut client = state.session().await?;
    let tx: Transaction<'_> = client.transaction().await?;
    users::get(&*tx, user_id)
        .await?
        .ok_or_else(|| unknown_user(user_id))?;
    databases::get(&*tx, database_id)
        .await?
        .ok_or_else(|| unknown_database(database_id))?;
    match change {
        Change::AddMember(role) => members::upsert(&*tx, database_id, user_id, role).await?,
        Change::RemoveMember => drop(members::delete(&*tx, database_id, user_id).await?),
        Change::GrantSupport => members::grant_support(&*tx, database_id, user_id).await?,
        Change::RevokeSupport => drop(members::revoke_support(&*tx, database_id, user_id).await?),
    }
    commit_access_change(state, tx, user_id).await
}

/// Ends a transaction that changed what `user_id` may reach: bumps the
/// user's access version, deletes it from Redis before the commit (if Redis
/// does not confirm, the transaction is rolled back: 503, nothing changed),
/// commits, then stores the new version and announces it (best effort).
pub(crate) async fn commit_access_change(
    state: &AppState,
    tx: Transaction<'_>,
    user_id: &str,
) -> ApiResult<()> {
    let version = users::bump_access_version(&*tx, user_id)
        .await?
        .ok_or_else(|| unknown_user(user_id))?;
    if let Err(e) = state.redis.clear_user(user_id).await {
        drop(tx);
        return Err(redis_refused("clear the user's access version", e));
    }
    tx.commit().await?;
    state.redis.announce_user(user_id, version).await;
    Ok(())
}

pub async fn add_member(state: &AppState, req: MemberChange) -> ApiResult<()> {
    let role = req
        .role
        .ok_or_else(|| ApiError::bad_request("role is required: viewer, editor or owner."))?;
    apply(
        state,
        &req.database_id,
        &req.user_id,
        Change::AddMember(role),
    )
    .await
}

/// Removing a membership that does not exist is a no-op.
pub async fn remove_member(state: &AppState, req: MemberChange) -> ApiResult<()> {
    apply(state, &req.database_id, &req.user_id, Change::RemoveMember).await
}

pub async fn grant_support(state: &AppState, req: SupportChange) -> ApiResult<()> {
    apply(state, &req.database_id, &req.user_id, Change::GrantSupport).await
}

pub async fn revoke_support(state: &AppState, req: SupportChange) -> ApiResult<()> {
    apply(state, &req.database_id, &req.user_id, Change::RevokeSupport).await
}

/// Memberships and support grants of active databases with the version they
/// belong to; re-seeds the version in Redis. The user's row is share-locked
/// from the first read to after the seed: a change (which bumps the version
/// under a row lock) cannot commit in between, so the lists match the
/// version, and a seed of this version cannot land after a change's delete.
pub async fn user_access(state: &AppState, user_id: &str) -> ApiResult<UserAccess> {
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    let user = users::get_for_share(&*tx, user_id)
        .await?
        .ok_or_else(|| unknown_user(user_id))?;
    let memberships = members::active_memberships(&*tx, user_id).await?;
    let support = members::active_support(&*tx, user_id).await?;
    if let Err(e) = state
        .redis
        .set_user_version(user_id, user.access_version)
        .await
    {
        tracing::warn!(
            error = format!("{e:#}"),
            user_id,
            "redis: seed user access version failed; continuing"
        );
    }
    tx.commit().await?;
    Ok(UserAccess {
        user_id: user_id.to_string(),
        version: user.access_version,
        memberships,
        support,
    })
}
