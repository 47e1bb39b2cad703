use axum::extract::{Path, Query, State};
use axum::Json;
use cluster_protocol::control::{
    AllocateRequest, Allocation, DatabaseFilter, DatabaseInfo, DatabaseList, Ok as OkReply,
    Placement, PlacementLookup, Placements,
};

use crate::error::{ApiResult, Body};
use crate::{service, AppState};

pub async fn list(
    State(state): State<AppState>,
    Query(filter): Query<DatabaseFilter>,
) -> ApiResult<Json<DatabaseList>> {
    Ok(Json(service::databases::list(&state, &filter).await?))
}

pub async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<DatabaseInfo>> {
    Ok(Json(service::databases::show(&state, &id).await?))
}

pub async fn allocate(
    State(state): State<AppState>,
    Body(req): Body<AllocateRequest>,
) -> ApiResult<Json<Allocation>> {
    Ok(Json(
        service::databases::allocate(&state, &req.user_id).await?,
    ))
}

pub async fn confirm(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<OkReply>> {
    service::databases::confirm(&state, &id).await?;
    Ok(super::ok())
}

pub async fn release(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<OkReply>> {
    service::databases::release(&state, &id).await?;
    Ok(super::ok())
}

pub async fn placement(
    State(state): State<AppState>,
    Path(tag): Path<String>,
) -> ApiResult<Json<Placement>> {
    Ok(Json(service::databases::placement(&state, &tag).await?))
}

pub async fn lookup(
    State(state): State<AppState>,
    Body(req): Body<PlacementLookup>,
) -> ApiResult<Json<Placements>> {
    Ok(Json(Placements {
        placements: service::databases::lookup(&state, &req.database_ids).await?,
    }))
}
