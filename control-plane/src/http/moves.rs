//! `/internal/moves`: create, list, show and abort database moves.

use axum::extract::{Path, Query, State};
use axum::Json;
use cluster_protocol::control::{CreateMove, Move, MoveFilter, MoveList};

use crate::error::{ApiResult, Body};
use crate::{service, AppState};

pub async fn create(
    State(state): State<AppState>,
    Body(req): Body<CreateMove>,
) -> ApiResult<Json<Move>> {
    Ok(Json(service::moves::create(&state, &req).await?))
}

pub async fn list(
    State(state): State<AppState>,
    Query(filter): Query<MoveFilter>,
) -> ApiResult<Json<MoveList>> {
    Ok(Json(service::moves::list_where(&state, &filter).await?))
}

pub async fn show(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Move>> {
    Ok(Json(service::moves::show(&state, &id).await?))
}

pub async fn abort(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Move>> {
    Ok(Json(service::moves::abort(&state, &id).await?))
}
