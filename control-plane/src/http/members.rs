use axum::extract::State;
use axum::Json;
use cluster_protocol::control::{MemberChange, Ok as OkReply, SupportChange};

use crate::error::{ApiResult, Body};
use crate::{service, AppState};

pub async fn add(
    State(state): State<AppState>,
    Body(req): Body<MemberChange>,
) -> ApiResult<Json<OkReply>> {
    service::access::add_member(&state, req).await?;
    Ok(super::ok())
}

pub async fn remove(
    State(state): State<AppState>,
    Body(req): Body<MemberChange>,
) -> ApiResult<Json<OkReply>> {
    service::access::remove_member(&state, req).await?;
    Ok(super::ok())
}

pub async fn grant(
    State(state): State<AppState>,
    Body(req): Body<SupportChange>,
) -> ApiResult<Json<OkReply>> {
    service::access::grant_support(&state, req).await?;
    Ok(super::ok())
}

pub async fn revoke(
    State(state): State<AppState>,
    Body(req): Body<SupportChange>,
) -> ApiResult<Json<OkReply>> {
    service::access::revoke_support(&state, req).await?;
    Ok(super::ok())
}
