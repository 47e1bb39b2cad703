//! The shard registry.

use std::collections::HashMap;
use std::time::Duration;

use cluster_protocol::control::{AddShard, DrainReply, DrainRequest, Shard, ShardState};

use super::planner::{self, ShardLoad};
use super::rebalance;
use crate::catalog::{databases, load, shards};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

const MAX_NAME_LEN: usize = 63;

fn validate(req: &AddShard) -> ApiResult<i32> {
    let name_ok = !req.name.is_empty()
        && req.name.len() <= MAX_NAME_LEN
        && req
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !name_ok {
        return Err(ApiError::bad_request(format!(
            "Shard name must be 1 to {MAX_NAME_LEN} characters of a-z, 0-9, '-' and '_'."
        )));
    }
    if !(req.url.starts_with("http://") || req.url.starts_with("https://")) {
        return Err(ApiError::bad_request(
            "Shard url must start with http:// or https://.",
        ));
    }
    if req.postgres.trim().is_empty() {
        return Err(ApiError::bad_request("Shard postgres DSN is required."));
    }
    match i32::try_from(req.weight) {
        Ok(w) if w >= 1 => Ok(w),
        _ => Err(ApiError::bad_request(
            "Shard weight must be between 1 and 2147483647.",
        )),
    }
}

/// Every shard with its database count and, when its PostgreSQL answers
/// within [`SIZE_TIMEOUT`], the size of its database.
pub async fn list(state: &AppState) -> ApiResult<Vec<Shard>> {
    let client = state.session().await?;
    let mut list = shards::list(&**client).await?;
    let counts: HashMap<String, i64> = databases::count_by_shard(&**client)
        .await?
        .into_iter()
        .collect();
    drop(client);
    // All shards at once: one that does not answer costs SIZE_TIMEOUT, not one each.
    let mut reads = tokio::task::JoinSet::new();
    for (i, shard) in list.iter().enumerate() {
        let (state, shard) = (state.clone(), shard.clone());
        reads.spawn(async move { (i, database_size(&state, &shard).await) });
    }
    while let Some(read) = reads.join_next().await {
        if let Ok((i, bytes)) = read {
            if let Some(shard) = list.get_mut(i) {
                shard.bytes = bytes;
            }
        }
    }
    for shard in &mut list {
        shard.databases = Some(counts.get(&shard.name).copied().unwrap_or(0));
    }
    Ok(list)
}

/// How long `shards list` waits for one shard's size.
const SIZE_TIMEOUT: Duration = Duration::from_secs(2);

/// `pg_database_size` of the shard's database (one catalog lookup and a
/// directory walk on the shard), read as the mover's administrator;
/// `None` (logged) when the shard does not answer in time.
async fn database_size(state: &AppState, shard: &Shard) -> Option<i64> {
    let read = async {
        let admin = crate::mover::admin::connect(shard, &state.moves).await?;
        let row = admin
            .query_one("SELECT pg_database_size(current_database())", &[])
            .await?;
        anyhow::Ok(row.try_get::<_, i64>(0)?)
    };
    match tokio::time::timeout(SIZE_TIMEOUT, read).await {
        Ok(Ok(bytes)) => Some(bytes),
        Ok(Err(e)) => {
            tracing::debug!(shard = %shard.name, error = format!("{e:#}"), "shard size unreadable");
            None
        }
        Err(_) => {
            tracing::debug!(shard = %shard.name, "shard size timed out");
            None
        }
    }
}

pub async fn add(state: &AppState, mut req: AddShard) -> ApiResult<Shard> {
    req.url = req.url.trim().trim_end_matches('/').to_string();
    let weight = validate(&req)?;
    let client = state.session().await?;
    shards::insert(&**client, &req, weight)
        .await?
        .ok_or_else(|| ApiError::conflict(format!("A shard named {} already exists.", req.name)))
}

/// Drains a shard: it becomes `draining` (no new databases) and each of
/// its active databases without an unfinished move gets one, to the least
/// loaded active shard (databases per unit of weight, a moving database
/// counted at its destination). Refused, changing nothing, for an unknown
/// shard and when no other shard is active. Draining a draining shard again
/// starts moves for what is left on it. With `dry_run` the same checks
/// and plan, and nothing changes (`plan` holds the moves it would start).
pub async fn drain(state: &AppState, name: &str, req: &DrainRequest) -> ApiResult<DrainReply> {
    let mut planning = state.session().await?;
    let planning = planning.transaction().await?;
    load::lock_planning(&*planning).await?;
    // Committed at once (its own connection), so no row lock of ours is
    // held while the moves are created.
    let client = state.session().await?;
    let last_active = || {
        ApiError::conflict(format!(
            "Shard {name} cannot be drained: no other shard is active to take its \
             databases (it is the last active shard). Add or activate another shard first."
        ))
    };
    let shard = if req.dry_run {
        let shard = shards::get(&**client, name)
            .await?
            .ok_or_else(|| unknown_shard(name))?;
        let others = shards::active(&**client).await?;
        if !others.iter().any(|s| s.name != name) {
            return Err(last_active());
        }
        shard
    } else {
        match shards::start_draining(&**client, name).await? {
            Some(shard) => shard,
            None => {
                return Err(match shards::get(&**client, name).await? {
                    None => unknown_shard(name),
                    Some(_) => last_active(),
                })
            }
        }
    };
    drop(client);
    let loads: Vec<ShardLoad> = shards::list(&*planning)
        .await?
        .iter()
        .map(ShardLoad::from)
        .collect();
    let counts: HashMap<String, usize> = load::counts(&*planning)
        .await?
        .into_iter()
        .map(|(shard, n)| (shard, usize::try_from(n).unwrap_or(0)))
        .collect();
    let settled = load::settled_on(&*planning, name).await?;
    let plan = planner::drain_targets(&loads, counts, name, &settled);
    if req.dry_run {
        return Ok(DrainReply {
            shard,
            moves: Vec::new(),
            plan: Some(plan),
            batch: None,
        });
    }
    let (batch, moves) = rebalance::start_batch(state, &plan, rebalance::DRAIN_BATCH).await?;
    planning.commit().await?;
    Ok(DrainReply {
        shard,
        moves,
        plan: Some(plan),
        batch,
    })
}

/// Makes a shard eligible for new databases again.
pub async fn activate(state: &AppState, name: &str) -> ApiResult<Shard> {
    let client = state.session().await?;
    shards::set_state(&**client, name, ShardState::Active)
        .await?
        .ok_or_else(|| unknown_shard(name))
}

fn unknown_shard(name: &str) -> ApiError {
    ApiError::not_found(format!("Unknown shard {name}."))
}
