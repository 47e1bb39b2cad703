use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::control::{
    CreateKey, CreatedKey, KeyInfo, KeyRecord, Ok as OkReply, UpdateKey,
};

use crate::error::{ApiResult, Body};
use crate::{service, AppState};

pub async fn create(
    State(state): State<AppState>,
    Body(req): Body<CreateKey>,
) -> ApiResult<Json<CreatedKey>> {
    Ok(Json(service::keys::create(&state, req).await?))
}

pub async fn fetch(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<KeyRecord>> {
    Ok(Json(service::keys::fetch(&state, &id).await?))
}

pub async fn update(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<UpdateKey>,
) -> ApiResult<Json<KeyInfo>> {
    Ok(Json(service::keys::update(&state, &id, req).await?))
}

pub async fn revoke(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<OkReply>> {
    service::keys::revoke(&state, &id).await?;
    Ok(super::ok())
}
