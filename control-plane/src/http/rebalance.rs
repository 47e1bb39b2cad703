//! `POST /internal/rebalance`: plan (and start) the moves that even out the shards.

use axum::extract::State;
use axum::Json;
use cluster_protocol::control::{RebalanceReply, RebalanceRequest};

use crate::error::{ApiResult, Body};
use crate::{service, AppState};

pub async fn rebalance(
    State(state): State<AppState>,
    Body(req): Body<RebalanceRequest>,
) -> ApiResult<Json<RebalanceReply>> {
    Ok(Json(service::rebalance::rebalance(&state, &req).await?))
}
