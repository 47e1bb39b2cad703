//! Allocation, confirmation and release of databases; placement lookups;
//! the reaper of abandoned allocations.

use anyhow::Context;
use cluster_protocol::control::{
    Allocation, DatabaseFilter, DatabaseInfo, DatabaseList, DatabaseState, Placement, Role,
    ShardRef,
};
use cluster_protocol::ids;

use super::{unknown_database, unknown_user};
use crate::catalog::{databases, members, quotas, shards, users};
use crate::config::{MAX_LOOKUP_IDS, MAX_OWNED_DATABASES};
use crate::error::{ApiError, ApiResult};
use crate::{placement, AppState};

/// Epoch of a freshly placed database; each move bumps it.
const FIRST_EPOCH: i64 = 1;

/// Allocates a database for `user_id` in one transaction, serialised with
/// every other allocation so positions are unique and increasing and the
/// cap of owned databases holds under concurrency.
pub async fn allocate(state: &AppState, user_id: &str) -> ApiResult<Allocation> {
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    let allocation = allocate_in(&tx, user_id).await?;
    tx.commit().await?;
    state
        .redis
        .announce_placement(&allocation.database_id)
        .await;
    Ok(allocation)
}

/// The allocation inside the caller's transaction (a restore records its
/// job with it): the owner's cap checked, a fresh tag and id, the shard
/// normal placement chooses, the catalog row `creating` and the owner's
/// membership. The caller commits and then announces the placement.
pub async fn allocate_in(
    tx: &deadpool_postgres::Transaction<'_>,
    user_id: &str,
) -> ApiResult<Allocation> {
    databases::lock_allocations(&**tx).await?;
    users::get(&**tx, user_id)
        .await?
        .ok_or_else(|| unknown_user(user_id))?;
    let overrides = quotas::overrides(&**tx, user_id).await?;
    let cap = overrides.databases.unwrap_or(MAX_OWNED_DATABASES);
    if databases::count_owned(&**tx, user_id).await? >= cap {
        return Err(ApiError::bad_request(format!(
            "You have reached the limit of {cap} databases."
        )));
    }
    let counter = databases::next_tag_counter(&**tx).await?;
    let tag = ids::tag_for_counter(u64::try_from(counter).context("negative tag counter")?);
    let database_id = ids::new_database_id(&tag);
    let active = shards::active(&**tx).await?;
    let shard = placement::choose(&active, &database_id).context(
        "no active shard to place a database on: register one with `control-plane shards add`",
    )?;
    let position = databases::next_position(&**tx).await?;
    let new = databases::NewDatabase {
        id: &database_id,
        tag: &tag,
        owner_id: user_id,
        shard: &shard.name,
        position,
        epoch: FIRST_EPOCH,
    };
    databases::insert_creating(&**tx, &new).await?;
    members::upsert(&**tx, &database_id, user_id, Role::Owner).await?;
    Ok(Allocation {
        database_id,
        tag,
        position,
        shard: ShardRef {
            name: shard.name.clone(),
            url: shard.url.clone(),
        },
        epoch: FIRST_EPOCH,
        limits: overrides.database_limits(),
    })
}

/// Bumps the access version of everyone with a membership or grant on the
/// database; returns (user, version) pairs to announce after commit.
async fn bump_users(
    tx: &deadpool_postgres::Transaction<'_>,
    database_id: &str,
) -> ApiResult<Vec<(String, i64)>> {
    let mut bumped = Vec::new();
    for user_id in members::users_of_database(&**tx, database_id).await? {
        if let Some(v) = users::bump_access_version(&**tx, &user_id).await? {
            bumped.push((user_id, v));
        }
    }
    Ok(bumped)
}

async fn announce(state: &AppState, database_id: &str, bumped: &[(String, i64)]) {
    for (user_id, version) in bumped {
        state.redis.announce_user(user_id, *version).await;
    }
    state.redis.announce_placement(database_id).await;
}

/// Marks the database active (idempotent); its members now see it.
pub async fn confirm(state: &AppState, database_id: &str) -> ApiResult<()> {
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    match databases::state_for_update(&*tx, database_id).await? {
        None => return Err(unknown_database(database_id)),
        Some(DatabaseState::Active) => return Ok(()),
        Some(DatabaseState::Creating) => {}
    }
    databases::set_active(&*tx, database_id).await?;
    let bumped = bump_users(&tx, database_id).await?;
    tx.commit().await?;
    announce(state, database_id, &bumped).await;
    Ok(())
}

/// Deletes a database that is still being created, with its memberships and
/// grants. An active database is a 409.
pub async fn release(state: &AppState, database_id: &str) -> ApiResult<()> {
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    match databases::state_for_update(&*tx, database_id).await? {
        None => return Err(unknown_database(database_id)),
        Some(DatabaseState::Active) => {
            return Err(ApiError::conflict(format!(
                "Database {database_id} is active; only a database still being created can be released."
            )))
        }
        Some(DatabaseState::Creating) => {}
    }
    let bumped = bump_users(&tx, database_id).await?;
    databases::delete_creating(&*tx, database_id).await?;
    tx.commit().await?;
    announce(state, database_id, &bumped).await;
    Ok(())
}

/// Releases every allocation left `creating` longer than the configured TTL.
/// Returns how many were released.
pub async fn reap(state: &AppState) -> anyhow::Result<usize> {
    let stale = {
        let client = state.session().await.context("connect for reaper")?;
        databases::stale_creating(&**client, state.creating_ttl.as_secs_f64()).await?
    };
    let mut released = 0;
    for id in stale {
        match release(state, &id).await {
            Ok(()) => {
                tracing::info!(database_id = id, "released abandoned allocation");
                released += 1;
            }
            // Confirmed or released meanwhile.
            Err(ApiError::NotFound(_) | ApiError::Conflict(_)) => {}
            Err(e) => return Err(anyhow::anyhow!("release {id}: {e:#}")),
        }
    }
    Ok(released)
}

/// Runs [`reap`] and the sweep of ended browser sessions
/// (`sessions::sweep`) every `interval` until the task is dropped.
pub async fn reaper_loop(state: AppState, interval: std::time::Duration) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = reap(&state).await {
            tracing::error!(error = format!("{e:#}"), "reaper pass failed");
        }
        if let Err(e) = super::sessions::sweep(&state).await {
            tracing::error!(error = format!("{e:#}"), "session sweep failed");
        }
    }
}

/// Databases by position matching `filter` (404 for an unknown shard),
/// one page of them when it has a `limit` (see `moves::list_where`).
pub async fn list(state: &AppState, filter: &DatabaseFilter) -> ApiResult<DatabaseList> {
    let limit = super::moves::page_limit(filter.limit)?;
    let shard = filter.shard.as_deref().filter(|s| !s.is_empty());
    let wanted = match filter.state.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some("creating") => Some(DatabaseState::Creating),
        Some("active") => Some(DatabaseState::Active),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "state must be creating or active, not {other:?}."
            )))
        }
    };
    let client = state.session().await?;
    if let Some(name) = shard {
        if shards::get(&**client, name).await?.is_none() {
            return Err(ApiError::not_found(format!("Unknown shard {name}.")));
        }
    }
    let after = match filter.cursor.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(cursor) => Some(
            databases::get(&**client, cursor)
                .await?
                .ok_or_else(|| ApiError::bad_request(format!("Unknown cursor {cursor:?}.")))?
                .position,
        ),
    };
    let mut found = databases::list(&**client, shard, wanted, after, limit.map(|n| n + 1)).await?;
    let next_cursor = super::moves::cut_page(&mut found, limit, |d| d.id.clone());
    Ok(DatabaseList {
        databases: found,
        next_cursor,
    })
}

pub async fn show(state: &AppState, id: &str) -> ApiResult<DatabaseInfo> {
    let client = state.session().await?;
    databases::get(&**client, id)
        .await?
        .ok_or_else(|| unknown_database(id))
}

pub async fn placement(state: &AppState, tag: &str) -> ApiResult<Placement> {
    let client = state.session().await?;
    databases::placement_by_tag(&**client, tag)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("No database has tag {tag}.")))
}

/// Placements of the given ids that exist (unknown ids are left out).
pub async fn lookup(state: &AppState, ids: &[String]) -> ApiResult<Vec<Placement>> {
    if ids.len() > MAX_LOOKUP_IDS {
        return Err(ApiError::bad_request(format!(
            "Look up at most {MAX_LOOKUP_IDS} databases at once."
        )));
    }
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let client = state.session().await?;
    Ok(databases::placements_by_ids(&**client, ids).await?)
}
