//! The account routes the router's pages call (`service::sessions`).

use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::control::accounts::{
    AccountSettings, AccountView, ChangePassword, OpenedSession, SessionCreateKey, SessionInfo,
    SessionToken, SessionUpdateKey, SetPassword, SignIn, SignUp,
};
use cluster_protocol::control::{CreatedKey, KeyInfo, Ok as OkReply};

use crate::error::{ApiResult, Body};
use crate::service::sessions;
use crate::AppState;

pub async fn settings(State(state): State<AppState>) -> Json<AccountSettings> {
    Json(AccountSettings {
        signup_open: state.accounts.signup_open,
    })
}

pub async fn sign_up(
    State(state): State<AppState>,
    Body(req): Body<SignUp>,
) -> ApiResult<Json<OpenedSession>> {
    Ok(Json(sessions::sign_up(&state, req).await?))
}

pub async fn sign_in(
    State(state): State<AppState>,
    Body(req): Body<SignIn>,
) -> ApiResult<Json<OpenedSession>> {
    Ok(Json(sessions::sign_in(&state, req).await?))
}

pub async fn resolve(
    State(state): State<AppState>,
    Body(req): Body<SessionToken>,
) -> ApiResult<Json<SessionInfo>> {
    Ok(Json(sessions::resolve(&state, &req.token).await?))
}

pub async fn account(
    State(state): State<AppState>,
    Body(req): Body<SessionToken>,
) -> ApiResult<Json<AccountView>> {
    Ok(Json(sessions::account(&state, &req.token).await?))
}

pub async fn sign_out(
    State(state): State<AppState>,
    Body(req): Body<SessionToken>,
) -> ApiResult<Json<OkReply>> {
    sessions::sign_out(&state, &req.token).await?;
    Ok(super::ok())
}

pub async fn change_password(
    State(state): State<AppState>,
    Body(req): Body<ChangePassword>,
) -> ApiResult<Json<OkReply>> {
    sessions::change_password(&state, req).await?;
    Ok(super::ok())
}

pub async fn set_password(
    State(state): State<AppState>,
    Path(user_id): Path<String>,
    Body(req): Body<SetPassword>,
) -> ApiResult<Json<OkReply>> {
    sessions::set_password(&state, &user_id, req.password).await?;
    Ok(super::ok())
}

pub async fn create_key(
    State(state): State<AppState>,
    Body(req): Body<SessionCreateKey>,
) -> ApiResult<Json<CreatedKey>> {
    Ok(Json(sessions::create_key(&state, req).await?))
}

pub async fn update_key(
    State(state): State<AppState>,
    Path(key_id): Path<String>,
    Body(req): Body<SessionUpdateKey>,
) -> ApiResult<Json<KeyInfo>> {
    Ok(Json(sessions::update_key(&state, &key_id, req).await?))
}

pub async fn revoke_key(
    State(state): State<AppState>,
    Path(key_id): Path<String>,
    Body(req): Body<SessionToken>,
) -> ApiResult<Json<OkReply>> {
    sessions::revoke_key(&state, &req.token, &key_id).await?;
    Ok(super::ok())
}
