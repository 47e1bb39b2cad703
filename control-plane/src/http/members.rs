//! `/internal/members` and `/internal/support` (the operator's changes) and
//! `/internal/databases/{id}/members` (member management of the public API).

use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::control::{
    ActedBy, AddMember, ChangeRole, MemberChange, MemberList, MemberReply, Ok as OkReply,
    RemovedMember, SupportChange,
};

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

// ---- member management of the public API (service::members) ----

pub async fn list_of_database(
    State(state): State<AppState>,
    Path(database_id): Path<String>,
) -> ApiResult<Json<MemberList>> {
    let members = service::members::list(&state, &database_id).await?;
    Ok(Json(MemberList { members }))
}

pub async fn add_to_database(
    State(state): State<AppState>,
    Path(database_id): Path<String>,
    Body(req): Body<AddMember>,
) -> ApiResult<Json<MemberReply>> {
    let member = service::members::add(&state, &database_id, req).await?;
    Ok(Json(MemberReply { member }))
}

pub async fn change_role(
    State(state): State<AppState>,
    Path((database_id, user_id)): Path<(String, String)>,
    Body(req): Body<ChangeRole>,
) -> ApiResult<Json<MemberReply>> {
    let member = service::members::change_role(&state, &database_id, &user_id, req).await?;
    Ok(Json(MemberReply { member }))
}

pub async fn remove_from_database(
    State(state): State<AppState>,
    Path((database_id, user_id)): Path<(String, String)>,
    Body(req): Body<ActedBy>,
) -> ApiResult<Json<RemovedMember>> {
    Ok(Json(
        service::members::remove(&state, &database_id, &user_id, req).await?,
    ))
}
