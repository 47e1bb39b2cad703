//! Rebalance: the plan that evens out database counts by shard weight,
//! and starting its moves.

use cluster_protocol::control::{RebalanceReply, RebalanceRequest};

use crate::error::{ApiError, ApiResult};
use crate::AppState;

pub async fn rebalance(_state: &AppState, _req: &RebalanceRequest) -> ApiResult<RebalanceReply> {
    Err(ApiError::Internal(anyhow::anyhow!(
        "rebalance is not implemented yet"
    )))
}
