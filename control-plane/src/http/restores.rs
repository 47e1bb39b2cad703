//! Point-in-time restores: `POST /internal/databases/{id}/restore` (202
//! and the recorded job), `GET /internal/restores[/{id}]`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use cluster_protocol::control::{CreateRestore, Restore, RestoreList};

use crate::error::{ApiResult, Body};
use crate::{service, AppState};

pub async fn create(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(req): Body<CreateRestore>,
) -> ApiResult<(StatusCode, Json<Restore>)> {
    let job = service::restores::create(&state, &id, &req).await?;
    Ok((StatusCode::ACCEPTED, Json(job)))
}

pub async fn list(State(state): State<AppState>) -> ApiResult<Json<RestoreList>> {
    Ok(Json(service::restores::list(&state).await?))
}

pub async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Restore>> {
    Ok(Json(service::restores::show(&state, &id).await?))
}
