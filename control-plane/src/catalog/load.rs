//! Reads behind drain and rebalance: where databases are, counting a
//! database with an unfinished move at its destination, and a lock that
//! serialises planners so two of them never plan from the same counts.

use anyhow::Context;
use cluster_protocol::control::MoveState;

use super::Db;

/// Transaction-scoped advisory lock held while a drain or a rebalance
/// plans and starts its moves.
const PLANNING_LOCK: i64 = 0x6370706c616e; // "cpplan"

/// The final move states, as bound parameters (`state <> ALL($n)`).
fn finished() -> Vec<&'static str> {
    MoveState::ALL
        .into_iter()
        .filter(|s| s.is_finished())
        .map(MoveState::as_str)
        .collect()
}

const ACTIVE: &str = "active";

/// Blocks until this transaction holds the planning lock.
pub async fn lock_planning(db: &impl Db) -> anyhow::Result<()> {
    db.execute("SELECT pg_advisory_xact_lock($1)", &[&PLANNING_LOCK])
        .await
        .context("take planning lock")?;
    Ok(())
}

/// One database for the planner.
#[derive(Debug, Clone)]
pub struct Located {
    pub id: String,
    pub shard: String,
    pub position: i64,
    /// `false` while it is still being created.
    pub active: bool,
    /// Destination of its unfinished move, if any.
    pub moving_to: Option<String>,
}

/// Every database with the destination of its unfinished move, by position.
pub async fn databases(db: &impl Db) -> anyhow::Result<Vec<Located>> {
    let rows = db
        .query(
            "SELECT d.id, d.shard, d.position, d.state, m.to_shard
             FROM databases d
             LEFT JOIN moves m ON m.database_id = d.id AND m.state <> ALL($1)
             ORDER BY d.position",
            &[&finished()],
        )
        .await
        .context("list databases with their moves")?;
    rows.iter()
        .map(|r| {
            let state: &str = r.try_get("state")?;
            Ok(Located {
                id: r.try_get("id")?,
                shard: r.try_get("shard")?,
                position: r.try_get("position")?,
                active: state == ACTIVE,
                moving_to: r.try_get("to_shard")?,
            })
        })
        .collect()
}

/// Databases counted on each shard: a database with an unfinished move at
/// its destination, any other on its shard. Shards without any are absent.
pub async fn counts(db: &impl Db) -> anyhow::Result<Vec<(String, i64)>> {
    let rows = db
        .query(
            "SELECT COALESCE(m.to_shard, d.shard) AS shard, count(*) AS n
             FROM databases d
             LEFT JOIN moves m ON m.database_id = d.id AND m.state <> ALL($1)
             GROUP BY 1",
            &[&finished()],
        )
        .await
        .context("count databases per shard")?;
    rows.iter()
        .map(|r| Ok((r.try_get("shard")?, r.try_get("n")?)))
        .collect()
}

/// Active databases on `shard` without an unfinished move, oldest first.
pub async fn settled_on(db: &impl Db, shard: &str) -> anyhow::Result<Vec<String>> {
    let rows = db
        .query(
            "SELECT d.id FROM databases d
             WHERE d.shard = $1 AND d.state = $2
               AND NOT EXISTS (SELECT 1 FROM moves m
                               WHERE m.database_id = d.id AND m.state <> ALL($3))
             ORDER BY d.position",
            &[&shard, &ACTIVE, &finished()],
        )
        .await
        .context("list settled databases of a shard")?;
    rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
}
