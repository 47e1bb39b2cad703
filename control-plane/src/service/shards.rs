//! The shard registry.

use cluster_protocol::control::{AddShard, DrainReply, Shard, ShardState};

use crate::catalog::shards;
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
    let client = state.pool.get().await?;
    Ok(shards::list(&**client).await?)
}

pub async fn add(state: &AppState, mut req: AddShard) -> ApiResult<Shard> {
    req.url = req.url.trim().trim_end_matches('/').to_string();
    let weight = validate(&req)?;
    let client = state.pool.get().await?;
    shards::insert(&**client, &req, weight)
        .await?
        .ok_or_else(|| ApiError::conflict(format!("A shard named {} already exists.", req.name)))
}

/// Marks a shard draining: it receives no new databases. (Moving its
/// databases off is not built yet.)
pub async fn drain(state: &AppState, name: &str) -> ApiResult<DrainReply> {
    let client = state.pool.get().await?;
    let shard = shards::set_state(&**client, name, ShardState::Draining)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Unknown shard {name}.")))?;
    Ok(DrainReply {
        shard,
        moves: Vec::new(),
    })
}

/// Makes a shard eligible for new databases again.
pub async fn activate(state: &AppState, name: &str) -> ApiResult<Shard> {
    let client = state.pool.get().await?;
    shards::set_state(&**client, name, ShardState::Active)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("Unknown shard {name}.")))
}
