use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::control::{AddShard, DrainReply, DrainRequest, Shard, ShardList};

use crate::error::{ApiResult, Body};
use crate::{service, AppState};

pub async fn list(State(state): State<AppState>) -> ApiResult<Json<ShardList>> {
    Ok(Json(ShardList {
        shards: service::shards::list(&state).await?,
    }))
}

pub async fn add(
    State(state): State<AppState>,
    Body(req): Body<AddShard>,
) -> ApiResult<Json<Shard>> {
    Ok(Json(service::shards::add(&state, req).await?))
}

pub async fn drain(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Body(req): Body<DrainRequest>,
) -> ApiResult<Json<DrainReply>> {
    Ok(Json(service::shards::drain(&state, &name, &req).await?))
}

pub async fn activate(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<Shard>> {
    Ok(Json(service::shards::activate(&state, &name).await?))
}
