//! Rebalance: the plan that evens out database counts by shard weight
//! (`planner::plan`), and starting its moves. Drain starts its moves here too.

use cluster_protocol::control::{CreateMove, Move, PlannedMove, RebalanceReply, RebalanceRequest};

use cluster_protocol::ids::{self, Kind};

use super::planner::{self, Placed, ShardLoad};
use crate::catalog::{load, shards};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// Plans from the catalog under the planning lock; with `dry_run` returns
/// the plan and changes nothing, otherwise starts its moves in order.
pub async fn rebalance(state: &AppState, req: &RebalanceRequest) -> ApiResult<RebalanceReply> {
    let mut client = state.session().await?;
    let planning = client.transaction().await?;
    load::lock_planning(&*planning).await?;
    let loads: Vec<ShardLoad> = shards::list(&*planning)
        .await?
        .iter()
        .map(ShardLoad::from)
        .collect();
    let databases: Vec<Placed> = load::databases(&*planning)
        .await?
        .into_iter()
        .map(|d| Placed {
            movable: d.active && d.moving_to.is_none(),
            shard: d.moving_to.unwrap_or(d.shard),
            database_id: d.id,
            position: d.position,
        })
        .collect();
    let plan = planner::plan(&loads, &databases);
    if req.dry_run {
        return Ok(RebalanceReply {
            moves: plan,
            started: None,
            batch: None,
        });
    }
    let (batch, started) = start_batch(state, &plan, REBALANCE_BATCH).await?;
    planning.commit().await?;
    Ok(RebalanceReply {
        moves: plan,
        started: Some(started),
        batch,
    })
}

/// [`start_moves`] under a new batch id (`prefix` and the random body of
/// a move id), recorded on each move; none when the plan is empty.
pub async fn start_batch(
    state: &AppState,
    plan: &[PlannedMove],
    prefix: &str,
) -> ApiResult<(Option<String>, Vec<Move>)> {
    if plan.is_empty() {
        return Ok((None, Vec::new()));
    }
    let batch = new_batch_id(prefix);
    let started = start_moves(state, plan, Some(&batch)).await?;
    Ok((Some(batch), started))
}

fn new_batch_id(prefix: &str) -> String {
    let id = ids::new_untagged(Kind::Move);
    let body = id.strip_prefix(Kind::Move.prefix()).unwrap_or(&id);
    format!("{prefix}{body}")
}

/// The batch id prefix of a rebalance's moves (`rebalance --abort` stops
/// the unfinished moves whose batch has it).
pub const REBALANCE_BATCH: &str = cluster_protocol::control::REBALANCE_BATCH_PREFIX;
/// The batch id prefix of a drain's moves.
pub const DRAIN_BATCH: &str = cluster_protocol::control::DRAIN_BATCH_PREFIX;

/// Records one move per planned entry (the mover starts them as slots free
/// up). A database that raced into a move of its own, or away, since the
/// plan was made is skipped with a warning; any other refusal stops here
/// (the moves already recorded go on, and planning again counts them).
pub async fn start_moves(
    state: &AppState,
    plan: &[PlannedMove],
    batch: Option<&str>,
) -> ApiResult<Vec<Move>> {
    let mut started = Vec::with_capacity(plan.len());
    for p in plan {
        let req = CreateMove {
            database_id: p.database_id.clone(),
            to: p.to.clone(),
            pause_budget_ms: None,
            step_delay_ms: None,
            dry_run: false,
        };
        match super::moves::create_in_batch(state, &req, batch).await {
            Ok(m) => started.push(m),
            Err(ApiError::Conflict(reason)) | Err(ApiError::NotFound(reason)) => {
                tracing::warn!(database_id = %p.database_id, to = %p.to, %reason, "planned move skipped");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(started)
}
