//! Database moves as the API sees them: validation and recording of a new
//! move, listing, showing and aborting. The mover (`crate::mover`) drives
//! recorded moves through their states.

use cluster_protocol::control::{CreateMove, Move};

use crate::error::{ApiError, ApiResult};
use crate::AppState;

fn not_yet() -> ApiError {
    ApiError::Internal(anyhow::anyhow!("database moves are not implemented yet"))
}

/// Validates and records a move (`pending`); refused input changes nothing.
pub async fn create(_state: &AppState, _req: &CreateMove) -> ApiResult<Move> {
    Err(not_yet())
}

/// Every move, newest first.
pub async fn list(_state: &AppState) -> ApiResult<Vec<Move>> {
    Err(not_yet())
}

pub async fn show(_state: &AppState, _id: &str) -> ApiResult<Move> {
    Err(not_yet())
}

/// Asks the mover to roll the move back; 409 when it already finished or switched over.
pub async fn abort(_state: &AppState, _id: &str) -> ApiResult<Move> {
    Err(not_yet())
}
