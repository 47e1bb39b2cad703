use axum::extract::{Path, Query, State};
use axum::Json;
use cluster_protocol::control::{CreateUser, KeyList, Page, User, UserAccess, UserList};

use crate::error::{ApiResult, Body};
use crate::{service, AppState};

pub async fn create(
    State(state): State<AppState>,
    Body(req): Body<CreateUser>,
) -> ApiResult<Json<User>> {
    Ok(Json(service::users::create(&state, req).await?))
}

pub async fn list(
    State(state): State<AppState>,
    Query(page): Query<Page>,
) -> ApiResult<Json<UserList>> {
    Ok(Json(service::users::list(&state, &page).await?))
}

pub async fn keys(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<KeyList>> {
    Ok(Json(service::users::keys_of(&state, &id).await?))
}

pub async fn access(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<UserAccess>> {
    Ok(Json(service::access::user_access(&state, &id).await?))
}

pub async fn suspend(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<User>> {
    Ok(Json(
        service::users::set_suspended(&state, &id, true).await?,
    ))
}

pub async fn unsuspend(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<User>> {
    Ok(Json(
        service::users::set_suspended(&state, &id, false).await?,
    ))
}
