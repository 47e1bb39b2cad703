//! The shard registry.

use std::collections::HashMap;

use cluster_protocol::control::{AddShard, DrainReply, Shard, ShardState};

use super::planner::{self, ShardLoad};
use super::rebalance;
use crate::catalog::{load, shards};
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

pub async fn list(state: &AppState) -> ApiResult<Vec<Shard>> {
    let client = state.session().await?;
    Ok(shards::list(&**client).await?)
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
/// starts moves for what is left on it.
pub async fn drain(state: &AppState, name: &str) -> ApiResult<DrainReply> {
    let mut planning = state.session().await?;
    let planning = planning.transaction().await?;
    load::lock_planning(&*planning).await?;
    // Committed at once (its own connection), so no row lock of ours is
    // held while the moves are created.
    let client = state.session().await?;
    let Some(shard) = shards::start_draining(&**client, name).await? else {
        return Err(match shards::get(&**client, name).await? {
            None => unknown_shard(name),
            Some(_) => ApiError::conflict(format!(
                "Shard {name} cannot be drained: no other shard is active to take its \
                 databases (it is the last active shard). Add or activate another shard first."
            )),
        });
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
    let moves = rebalance::start_moves(state, &plan).await?;
    planning.commit().await?;
    Ok(DrainReply { shard, moves })
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
