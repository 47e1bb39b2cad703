//! `moves`: the persisted state of database moves (docs/moves.md), and
//! `databases.hold_until`, the cutover's hold. One small function per query.

use anyhow::Context;
use chrono::{DateTime, Utc};
use cluster_protocol::control::{Move, MoveProgress, MoveState};
use tokio_postgres::Row;

use super::Db;

/// Transaction-scoped advisory lock serialising the start of moves, so two
/// control planes never hand out the same slot ("cpmvslot").
const SLOT_LOCK: i64 = 0x63706d76736c6f74;
/// Class of the session advisory locks a driver holds on its move.
pub const DRIVER_LOCK_CLASS: i32 = 0x6d6f7665; // "move"

const COLUMNS: &str = "id, database_id, from_shard, to_shard, state, abort_requested, abort_reason,
    pause_budget_ms, step_delay_ms, attempts, pause_ms, convergence_ms, new_epoch,
    fence_lsn, flipped_at, error, tables_total, tables_copied, lag_bytes,
    created_at, updated_at, finished_at, batch";

/// A move as the mover sees it: the API's [`Move`] plus the driving fields.
#[derive(Debug, Clone)]
pub struct MoveRow {
    pub api: Move,
    pub abort_requested: bool,
    pub abort_reason: Option<String>,
    pub step_delay_ms: i32,
    pub new_epoch: Option<i64>,
    pub flipped_at: Option<DateTime<Utc>>,
}

fn from_row(row: &Row) -> anyhow::Result<MoveRow> {
    let raw: String = row.try_get("state")?;
    let state =
        MoveState::parse(&raw).with_context(|| format!("unknown move state {raw:?} in catalog"))?;
    let pause_ms: Option<i32> = row.try_get("pause_ms")?;
    let convergence_ms: Option<i32> = row.try_get("convergence_ms")?;
    let budget: i32 = row.try_get("pause_budget_ms")?;
    let total: i32 = row.try_get("tables_total")?;
    let copied: i32 = row.try_get("tables_copied")?;
    Ok(MoveRow {
        api: Move {
            id: row.try_get("id")?,
            database_id: row.try_get("database_id")?,
            from: row.try_get("from_shard")?,
            to: row.try_get("to_shard")?,
            state,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
            pause_ms: pause_ms.map(i64::from),
            error: row.try_get("error")?,
            attempts: row.try_get("attempts")?,
            pause_budget_ms: i64::from(budget),
            convergence_ms: convergence_ms.map(i64::from),
            progress: MoveProgress {
                tables_total: i64::from(total),
                tables_copied: i64::from(copied),
                lag_bytes: row.try_get("lag_bytes")?,
            },
            finished_at: row.try_get("finished_at")?,
            batch: row.try_get("batch")?,
        },
        abort_requested: row.try_get("abort_requested")?,
        abort_reason: row.try_get("abort_reason")?,
        step_delay_ms: row.try_get("step_delay_ms")?,
        new_epoch: row.try_get("new_epoch")?,
        flipped_at: row.try_get("flipped_at")?,
    })
}

fn rows(rows: &[Row]) -> anyhow::Result<Vec<MoveRow>> {
    rows.iter().map(from_row).collect()
}

pub struct NewMove<'a> {
    pub id: &'a str,
    pub database_id: &'a str,
    pub from: &'a str,
    pub to: &'a str,
    pub pause_budget_ms: i32,
    pub step_delay_ms: i32,
    /// The rebalance or drain starting it, if any.
    pub batch: Option<&'a str>,
}

/// Records a `pending` move; `None` when the database already has an
/// unfinished one (the unique index `moves_one_per_database`).
pub async fn insert(db: &impl Db, m: &NewMove<'_>) -> anyhow::Result<Option<MoveRow>> {
    let sql = format!(
        "INSERT INTO moves (id, database_id, from_shard, to_shard, state, pause_budget_ms, step_delay_ms, batch)
         VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7)
         ON CONFLICT (database_id) WHERE state NOT IN ('done', 'aborted') DO NOTHING
         RETURNING {COLUMNS}"
    );
    db.query_opt(
        &sql,
        &[
            &m.id,
            &m.database_id,
            &m.from,
            &m.to,
            &m.pause_budget_ms,
            &m.step_delay_ms,
            &m.batch,
        ],
    )
    .await
    .context("insert move")?
    .as_ref()
    .map(from_row)
    .transpose()
}

pub async fn get(db: &impl Db, id: &str) -> anyhow::Result<Option<MoveRow>> {
    let sql = format!("SELECT {COLUMNS} FROM moves WHERE id = $1");
    db.query_opt(&sql, &[&id])
        .await
        .context("read move")?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// The move, its row locked for the rest of the transaction.
pub async fn get_for_update(db: &impl Db, id: &str) -> anyhow::Result<Option<MoveRow>> {
    let sql = format!("SELECT {COLUMNS} FROM moves WHERE id = $1 FOR UPDATE");
    db.query_opt(&sql, &[&id])
        .await
        .context("lock move")?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// One page of moves, newest first, matching `filter` (validated by the
/// caller: `state` a move state or `unfinished`, `limit` given). `after`
/// is the (created_at, id) of the previous page's last move.
pub struct MoveQuery<'a> {
    pub shard: Option<&'a str>,
    /// Exact states to keep (empty: any).
    pub states: &'a [&'a str],
    pub database: Option<&'a str>,
    pub batch: Option<&'a str>,
    pub after: Option<(DateTime<Utc>, String)>,
    pub limit: Option<i64>,
}

pub async fn list_where(db: &impl Db, q: &MoveQuery<'_>) -> anyhow::Result<Vec<MoveRow>> {
    let (after_at, after_id) = match &q.after {
        Some((at, id)) => (Some(*at), Some(id.as_str())),
        None => (None, None),
    };
    let states: Vec<&str> = q.states.to_vec();
    let sql = format!(
        "SELECT {COLUMNS} FROM moves
         WHERE ($1::text IS NULL OR from_shard = $1 OR to_shard = $1)
           AND (cardinality($2::text[]) = 0 OR state = ANY($2))
           AND ($3::text IS NULL OR database_id = $3)
           AND ($4::text IS NULL OR batch = $4)
           AND ($5::timestamptz IS NULL OR (created_at, id) < ($5, $6::text))
         ORDER BY created_at DESC, id DESC
         LIMIT $7"
    );
    rows(
        &db.query(
            &sql,
            &[
                &q.shard,
                &states,
                &q.database,
                &q.batch,
                &after_at,
                &after_id,
                &q.limit,
            ],
        )
        .await
        .context("list moves")?,
    )
}

/// How many moves are in each state (states with none are absent).
pub async fn count_by_state(db: &impl Db) -> anyhow::Result<Vec<(MoveState, i64)>> {
    let rows = db
        .query("SELECT state, count(*) FROM moves GROUP BY state", &[])
        .await
        .context("count moves by state")?;
    rows.iter()
        .map(|row| {
            let raw: String = row.try_get(0)?;
            let state = MoveState::parse(&raw)
                .with_context(|| format!("unknown move state {raw:?} in catalog"))?;
            Ok((state, row.try_get(1)?))
        })
        .collect()
}

/// Unfinished moves, oldest first.
pub async fn unfinished(db: &impl Db) -> anyhow::Result<Vec<MoveRow>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM moves WHERE state NOT IN ('done', 'aborted') ORDER BY created_at, id"
    );
    rows(&db.query(&sql, &[]).await.context("list unfinished moves")?)
}

/// Blocks until this transaction holds the slot lock.
pub async fn lock_slots(db: &impl Db) -> anyhow::Result<()> {
    db.execute("SELECT pg_advisory_xact_lock($1)", &[&SLOT_LOCK])
        .await
        .context("take move slot lock")?;
    Ok(())
}

/// Tries the session lock that makes this connection the move's one driver.
pub async fn try_lock_driver(db: &impl Db, id: &str) -> anyhow::Result<bool> {
    let row = db
        .query_one(
            "SELECT pg_try_advisory_lock($1, hashtext($2))",
            &[&DRIVER_LOCK_CLASS, &id],
        )
        .await
        .context("take move driver lock")?;
    Ok(row.try_get(0)?)
}

/// Moves `pending -> copying` (slot granted); false when it was not pending.
pub async fn start(db: &impl Db, id: &str) -> anyhow::Result<bool> {
    let n = db
        .execute(
            "UPDATE moves SET state = 'copying', updated_at = now()
             WHERE id = $1 AND state = 'pending'",
            &[&id],
        )
        .await
        .context("start move")?;
    Ok(n > 0)
}

/// Sets the state (not `done`/`aborted`: see [`finish`]) and clears the error.
pub async fn set_state(db: &impl Db, id: &str, state: MoveState) -> anyhow::Result<()> {
    db.execute(
        "UPDATE moves SET state = $2, error = NULL, updated_at = now() WHERE id = $1",
        &[&id, &state.as_str()],
    )
    .await
    .context("set move state")?;
    Ok(())
}

/// Enters `cutover`, counting the attempt; returns the attempts so far.
pub async fn begin_cutover(db: &impl Db, id: &str) -> anyhow::Result<i32> {
    let row = db
        .query_one(
            "UPDATE moves SET state = 'cutover', attempts = attempts + 1, error = NULL,
                    fence_lsn = NULL, updated_at = now()
             WHERE id = $1 RETURNING attempts",
            &[&id],
        )
        .await
        .context("begin cutover")?;
    Ok(row.try_get(0)?)
}

/// Ends a move `done` or `aborted` (with `error` for the latter).
pub async fn finish(
    db: &impl Db,
    id: &str,
    state: MoveState,
    error: Option<&str>,
) -> anyhow::Result<()> {
    db.execute(
        "UPDATE moves SET state = $2, error = $3, updated_at = now(), finished_at = now()
         WHERE id = $1",
        &[&id, &state.as_str(), &error],
    )
    .await
    .context("finish move")?;
    Ok(())
}

/// Shows why the current step failed (it is retried).
pub async fn set_error(db: &impl Db, id: &str, error: Option<&str>) -> anyhow::Result<()> {
    db.execute(
        "UPDATE moves SET error = $2, updated_at = now() WHERE id = $1",
        &[&id, &error],
    )
    .await
    .context("record move error")?;
    Ok(())
}

/// Asks the mover to roll the move back (with the reason shown as `error`).
pub async fn request_abort(db: &impl Db, id: &str, reason: &str) -> anyhow::Result<()> {
    db.execute(
        "UPDATE moves SET abort_requested = true, abort_reason = $2, error = $2, updated_at = now()
         WHERE id = $1",
        &[&id, &reason],
    )
    .await
    .context("request move abort")?;
    Ok(())
}

pub async fn set_progress(
    db: &impl Db,
    id: &str,
    total: i32,
    copied: i32,
    lag_bytes: Option<i64>,
) -> anyhow::Result<()> {
    db.execute(
        "UPDATE moves SET tables_total = $2, tables_copied = $3, lag_bytes = $4 WHERE id = $1",
        &[&id, &total, &copied, &lag_bytes],
    )
    .await
    .context("record move progress")?;
    Ok(())
}

pub async fn set_fence_lsn(db: &impl Db, id: &str, lsn: &str) -> anyhow::Result<()> {
    db.execute(
        "UPDATE moves SET fence_lsn = $2 WHERE id = $1",
        &[&id, &lsn],
    )
    .await
    .context("record fence lsn")?;
    Ok(())
}

/// The flip's move half: `cleanup`, with the pause and the new epoch.
/// Moves the move to `cleanup` unless an abort was requested; false then
/// (the caller rolls its flip back). The row lock orders it with
/// `request_abort`: whichever commits first wins.
pub async fn set_flipped(
    db: &impl Db,
    id: &str,
    pause_ms: i32,
    new_epoch: i64,
) -> anyhow::Result<bool> {
    let n = db
        .execute(
            "UPDATE moves SET state = 'cleanup', pause_ms = $2, new_epoch = $3, flipped_at = now(),
                    error = NULL, updated_at = now()
             WHERE id = $1 AND NOT abort_requested",
            &[&id, &pause_ms, &new_epoch],
        )
        .await
        .context("record flip")?;
    Ok(n == 1)
}

pub async fn set_convergence(db: &impl Db, id: &str, ms: Option<i32>) -> anyhow::Result<()> {
    db.execute(
        "UPDATE moves SET convergence_ms = $2 WHERE id = $1",
        &[&id, &ms],
    )
    .await
    .context("record convergence")?;
    Ok(())
}

// ---- databases: placement and hold ----

/// The database's shard and epoch, its row locked for the transaction.
pub async fn placement_for_update(
    db: &impl Db,
    database_id: &str,
) -> anyhow::Result<Option<(String, i64)>> {
    let row = db
        .query_opt(
            "SELECT shard, epoch FROM databases WHERE id = $1 FOR UPDATE",
            &[&database_id],
        )
        .await
        .context("lock database placement")?;
    row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
}

/// The database's shard and epoch.
pub async fn placement(db: &impl Db, database_id: &str) -> anyhow::Result<Option<(String, i64)>> {
    let row = db
        .query_opt(
            "SELECT shard, epoch FROM databases WHERE id = $1",
            &[&database_id],
        )
        .await
        .context("read database placement")?;
    row.map(|r| Ok((r.try_get(0)?, r.try_get(1)?))).transpose()
}

/// Routers hold the database's requests until `ms` from now (or a change).
pub async fn set_hold(db: &impl Db, database_id: &str, ms: i64) -> anyhow::Result<()> {
    db.execute(
        "UPDATE databases SET hold_until = now() + make_interval(secs => $2::float8 / 1000)
         WHERE id = $1",
        &[&database_id, &(ms as f64)],
    )
    .await
    .context("set hold")?;
    Ok(())
}

pub async fn clear_hold(db: &impl Db, database_id: &str) -> anyhow::Result<()> {
    db.execute(
        "UPDATE databases SET hold_until = NULL WHERE id = $1 AND hold_until IS NOT NULL",
        &[&database_id],
    )
    .await
    .context("clear hold")?;
    Ok(())
}

/// The flip's placement half: the database now lives on `to` at `epoch`.
pub async fn flip_placement(
    db: &impl Db,
    database_id: &str,
    to: &str,
    epoch: i64,
) -> anyhow::Result<()> {
    db.execute(
        "UPDATE databases SET shard = $2, epoch = $3, hold_until = NULL WHERE id = $1",
        &[&database_id, &to, &epoch],
    )
    .await
    .context("flip placement")?;
    Ok(())
}

pub async fn set_lag(db: &impl Db, id: &str, lag_bytes: Option<i64>) -> anyhow::Result<()> {
    db.execute(
        "UPDATE moves SET lag_bytes = $2 WHERE id = $1",
        &[&id, &lag_bytes],
    )
    .await
    .context("record move lag")?;
    Ok(())
}
