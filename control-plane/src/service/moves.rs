//! Database moves as the API sees them: validation and recording of a new
//! move, listing, showing and aborting. The mover (`crate::mover`) drives
//! recorded moves through their states.

use cluster_protocol::control::{
    CreateMove, DatabaseState, Move, MoveFilter, MoveList, MoveState, ShardState,
};
use cluster_protocol::ids::{self, Kind};

use super::unknown_database;
use crate::catalog::{databases, moves, shards};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// Longest pause budget a move may ask for.
const MAX_PAUSE_BUDGET_MS: i64 = 60_000;
/// Longest test step delay a move may ask for.
const MAX_STEP_DELAY_MS: i64 = 600_000;

fn unknown_move(id: &str) -> ApiError {
    ApiError::not_found(format!("Unknown move {id}."))
}

fn checked_ms(value: Option<i64>, default: i64, max: i64, what: &str) -> ApiResult<i32> {
    let v = value.unwrap_or(default);
    if !(0..=max).contains(&v) {
        return Err(ApiError::bad_request(format!(
            "{what} must be between 0 and {max} milliseconds."
        )));
    }
    i32::try_from(v).map_err(|_| ApiError::bad_request(format!("{what} is too large.")))
}

/// Validates and records a move (`pending`); refused input changes nothing.
/// With `dry_run` every check runs (the insert too, rolled back) and the
/// move is answered as it would have been recorded.
pub async fn create(state: &AppState, req: &CreateMove) -> ApiResult<Move> {
    create_in_batch(state, req, None).await
}

/// [`create`], recording the rebalance or drain that starts the move.
pub async fn create_in_batch(
    state: &AppState,
    req: &CreateMove,
    batch: Option<&str>,
) -> ApiResult<Move> {
    let knobs = &state.moves;
    let budget = checked_ms(
        req.pause_budget_ms,
        i64::try_from(knobs.pause_budget.as_millis()).unwrap_or(MAX_PAUSE_BUDGET_MS),
        MAX_PAUSE_BUDGET_MS,
        "pause_budget_ms",
    )?;
    if budget == 0 {
        return Err(ApiError::bad_request(
            "pause_budget_ms must be at least 1 millisecond.",
        ));
    }
    let step_delay = checked_ms(
        req.step_delay_ms,
        i64::try_from(knobs.step_delay.as_millis()).unwrap_or(0),
        MAX_STEP_DELAY_MS,
        "step_delay_ms",
    )?;
    if !ids::is_valid(Kind::Database, &req.database_id) {
        return Err(unknown_database(&req.database_id));
    }
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    let db = databases::get(&*tx, &req.database_id)
        .await?
        .ok_or_else(|| unknown_database(&req.database_id))?;
    let target = shards::list(&*tx)
        .await?
        .into_iter()
        .find(|s| s.name == req.to)
        .ok_or_else(|| ApiError::not_found(format!("Unknown shard {}.", req.to)))?;
    if db.state != DatabaseState::Active {
        return Err(ApiError::bad_request(format!(
            "Database {} is still being created; only an active database can be moved.",
            db.id
        )));
    }
    if db.shard == target.name {
        return Err(ApiError::bad_request(format!(
            "Database {} is already on shard {}.",
            db.id, target.name
        )));
    }
    if target.state == ShardState::Draining {
        return Err(ApiError::bad_request(format!(
            "Shard {} is draining: it takes no databases.",
            target.name
        )));
    }
    let id = ids::new_untagged(Kind::Move);
    let new = moves::NewMove {
        id: &id,
        database_id: &db.id,
        from: &db.shard,
        to: &target.name,
        pause_budget_ms: budget,
        step_delay_ms: step_delay,
        batch,
    };
    let Some(row) = moves::insert(&*tx, &new).await? else {
        return Err(ApiError::conflict(format!(
            "Database {} is already being moved: wait for that move to finish or abort it.",
            db.id
        )));
    };
    if req.dry_run {
        tx.rollback().await?;
        return Ok(row.api);
    }
    tx.commit().await?;
    state.mover_wake.notify_one();
    Ok(row.api)
}

/// The largest page `GET /internal/moves` (and the other paged lists) serve.
pub const MAX_PAGE: u32 = 1000;

/// A page's `limit`, checked: 1 to [`MAX_PAGE`].
pub fn page_limit(limit: Option<u32>) -> ApiResult<Option<i64>> {
    match limit {
        None => Ok(None),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(Some(i64::from(n))),
        Some(_) => Err(ApiError::bad_request(format!(
            "limit must be between 1 and {MAX_PAGE}."
        ))),
    }
}

/// The states a `state` filter keeps: one state, or `unfinished`.
pub fn states_of(filter: Option<&str>) -> ApiResult<Vec<&'static str>> {
    match filter {
        None => Ok(Vec::new()),
        Some("unfinished") => Ok(MoveState::ALL
            .into_iter()
            .filter(|s| !s.is_finished())
            .map(MoveState::as_str)
            .collect()),
        Some(raw) => MoveState::parse(raw)
            .map(|s| vec![s.as_str()])
            .ok_or_else(|| {
                let names: Vec<&str> = MoveState::ALL.into_iter().map(MoveState::as_str).collect();
                ApiError::bad_request(format!(
                    "state must be unfinished or one of {}.",
                    names.join(", ")
                ))
            }),
    }
}

/// The moves matching `filter`, newest first, one page of them when it
/// has a `limit` (then `next_cursor` names the last one if more follow).
pub async fn list_where(state: &AppState, filter: &MoveFilter) -> ApiResult<MoveList> {
    let limit = page_limit(filter.limit)?;
    let states = states_of(filter.state.as_deref())?;
    let client = state.session().await?;
    let after = match filter.cursor.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(cursor) => {
            let m = moves::get(&**client, cursor)
                .await?
                .ok_or_else(|| ApiError::bad_request(format!("Unknown cursor {cursor:?}.")))?;
            Some((m.api.created_at, m.api.id))
        }
    };
    let q = moves::MoveQuery {
        shard: filter.shard.as_deref().filter(|s| !s.is_empty()),
        states: &states,
        database: filter.database.as_deref().filter(|s| !s.is_empty()),
        batch: filter.batch.as_deref().filter(|s| !s.is_empty()),
        after,
        limit: limit.map(|n| n + 1),
    };
    let mut found: Vec<Move> = moves::list_where(&**client, &q)
        .await?
        .into_iter()
        .map(|m| m.api)
        .collect();
    let next_cursor = cut_page(&mut found, limit, |m| m.id.clone());
    Ok(MoveList {
        moves: found,
        next_cursor,
    })
}

/// Cuts a page read with one item past `limit` back to `limit`; the
/// cursor of its last item when there was more.
pub fn cut_page<T>(
    items: &mut Vec<T>,
    limit: Option<i64>,
    id: impl Fn(&T) -> String,
) -> Option<String> {
    let limit = usize::try_from(limit?).ok()?;
    if items.len() <= limit {
        return None;
    }
    items.truncate(limit);
    items.last().map(id)
}

pub async fn show(state: &AppState, id: &str) -> ApiResult<Move> {
    if !ids::is_valid(Kind::Move, id) {
        return Err(unknown_move(id));
    }
    let client = state.session().await?;
    moves::get(&**client, id)
        .await?
        .map(|m| m.api)
        .ok_or_else(|| unknown_move(id))
}

/// Asks the mover to roll the move back; 409 (naming the move's state)
/// when it already finished or switched over. A `pending` move has done
/// nothing yet, so it ends `aborted` at once.
pub async fn abort(state: &AppState, id: &str) -> ApiResult<Move> {
    if !ids::is_valid(Kind::Move, id) {
        return Err(unknown_move(id));
    }
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    let m = moves::get_for_update(&*tx, id)
        .await?
        .ok_or_else(|| unknown_move(id))?;
    match m.api.state {
        MoveState::Cleanup | MoveState::Done | MoveState::Aborted => {
            return Err(ApiError::conflict(format!(
                "Move {id} is {}: only a move that has not switched over can be aborted.",
                m.api.state.as_str()
            )));
        }
        MoveState::Pending => {
            moves::finish(&*tx, id, MoveState::Aborted, Some(ABORTED_BY_OPERATOR)).await?;
        }
        MoveState::Copying | MoveState::CatchingUp | MoveState::Cutover => {
            if !m.abort_requested {
                moves::request_abort(&*tx, id, ABORTED_BY_OPERATOR).await?;
            }
        }
    }
    let after = moves::get(&*tx, id)
        .await?
        .ok_or_else(|| unknown_move(id))?;
    tx.commit().await?;
    state.mover_wake.notify_one();
    Ok(after.api)
}

/// The `error` of a move aborted with `moves abort`.
pub const ABORTED_BY_OPERATOR: &str = "aborted by the operator (moves abort)";
