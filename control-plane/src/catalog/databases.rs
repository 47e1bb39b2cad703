//! `databases`: placement, state, global position and the tag counter.

use anyhow::Context;
use cluster_protocol::control::{DatabaseInfo, DatabaseState, Placement, ShardRef};
use tokio_postgres::Row;

use super::Db;

/// Transaction-scoped advisory lock serialising allocations, so positions
/// and the per-owner cap are decided one allocation at a time.
const ALLOCATION_LOCK: i64 = 0x6370616c6c6f63; // "cpalloc"

const COLUMNS: &str = "id, tag, owner_id, shard, state, position, epoch, created_at";
const PLACEMENT: &str =
    "SELECT d.id, d.tag, d.epoch, d.state, CASE WHEN d.hold_until > now() THEN d.hold_until END AS hold_until, s.name AS shard_name, s.url AS shard_url
                         FROM databases d JOIN shards s ON s.name = d.shard";

fn state_str(state: DatabaseState) -> &'static str {
    match state {
        DatabaseState::Creating => "creating",
        DatabaseState::Active => "active",
    }
}

fn state_of(row: &Row) -> anyhow::Result<DatabaseState> {
    let raw: String = row.try_get("state")?;
    match raw.as_str() {
        "creating" => Ok(DatabaseState::Creating),
        "active" => Ok(DatabaseState::Active),
        other => anyhow::bail!("unknown database state {other:?} in catalog"),
    }
}

fn info_of(row: &Row) -> anyhow::Result<DatabaseInfo> {
    Ok(DatabaseInfo {
        id: row.try_get("id")?,
        tag: row.try_get("tag")?,
        owner_id: row.try_get("owner_id")?,
        shard: row.try_get("shard")?,
        state: state_of(row)?,
        position: row.try_get("position")?,
        epoch: row.try_get("epoch")?,
        created_at: row.try_get("created_at")?,
    })
}

fn placement_of(row: &Row) -> anyhow::Result<Placement> {
    Ok(Placement {
        database_id: row.try_get("id")?,
        tag: row.try_get("tag")?,
        shard: ShardRef {
            name: row.try_get("shard_name")?,
            url: row.try_get("shard_url")?,
        },
        epoch: row.try_get("epoch")?,
        state: state_of(row)?,
        hold_until: row.try_get("hold_until")?,
    })
}

/// Blocks until this transaction holds the allocation lock.
pub async fn lock_allocations(db: &impl Db) -> anyhow::Result<()> {
    db.execute("SELECT pg_advisory_xact_lock($1)", &[&ALLOCATION_LOCK])
        .await
        .context("take allocation lock")?;
    Ok(())
}

/// Databases recorded as owned by the user, in any state.
pub async fn count_owned(db: &impl Db, owner_id: &str) -> anyhow::Result<i64> {
    let row = db
        .query_one(
            "SELECT count(*) FROM databases WHERE owner_id = $1",
            &[&owner_id],
        )
        .await
        .context("count owned databases")?;
    Ok(row.try_get(0)?)
}

pub async fn next_tag_counter(db: &impl Db) -> anyhow::Result<i64> {
    let row = db
        .query_one("SELECT nextval('database_tag_counter')", &[])
        .await
        .context("next tag counter")?;
    Ok(row.try_get(0)?)
}

/// One past the greatest position of any database (0 for the first).
pub async fn next_position(db: &impl Db) -> anyhow::Result<i64> {
    let row = db
        .query_one("SELECT COALESCE(max(position), -1) + 1 FROM databases", &[])
        .await
        .context("next position")?;
    Ok(row.try_get(0)?)
}

pub struct NewDatabase<'a> {
    pub id: &'a str,
    pub tag: &'a str,
    pub owner_id: &'a str,
    pub shard: &'a str,
    pub position: i64,
    pub epoch: i64,
}

pub async fn insert_creating(db: &impl Db, d: &NewDatabase<'_>) -> anyhow::Result<()> {
    db.execute(
        "INSERT INTO databases (id, tag, owner_id, shard, state, position, epoch)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[
            &d.id,
            &d.tag,
            &d.owner_id,
            &d.shard,
            &state_str(DatabaseState::Creating),
            &d.position,
            &d.epoch,
        ],
    )
    .await
    .context("insert database")?;
    Ok(())
}

/// The database's state, locking its row for the rest of the transaction.
pub async fn state_for_update(db: &impl Db, id: &str) -> anyhow::Result<Option<DatabaseState>> {
    db.query_opt(
        "SELECT state FROM databases WHERE id = $1 FOR UPDATE",
        &[&id],
    )
    .await
    .context("lock database")?
    .as_ref()
    .map(state_of)
    .transpose()
}

pub async fn set_active(db: &impl Db, id: &str) -> anyhow::Result<()> {
    db.execute(
        "UPDATE databases SET state = $2 WHERE id = $1",
        &[&id, &state_str(DatabaseState::Active)],
    )
    .await
    .context("activate database")?;
    Ok(())
}

/// Deletes a database that is still `creating` (memberships and grants cascade).
pub async fn delete_creating(db: &impl Db, id: &str) -> anyhow::Result<bool> {
    let n = db
        .execute(
            "DELETE FROM databases WHERE id = $1 AND state = $2",
            &[&id, &state_str(DatabaseState::Creating)],
        )
        .await
        .context("delete creating database")?;
    Ok(n > 0)
}

/// Ids of databases `creating` for longer than `older_than_secs`, except
/// those an unfinished restore is making (the restorer releases them).
pub async fn stale_creating(db: &impl Db, older_than_secs: f64) -> anyhow::Result<Vec<String>> {
    let rows = db
        .query(
            "SELECT id FROM databases d
             WHERE state = $1 AND created_at < now() - make_interval(secs => $2)
               AND NOT EXISTS (SELECT 1 FROM restores r
                                WHERE r.new_database_id = d.id
                                  AND r.state NOT IN ('done', 'failed'))
             ORDER BY created_at",
            &[&state_str(DatabaseState::Creating), &older_than_secs],
        )
        .await
        .context("find stale allocations")?;
    rows.iter().map(|r| Ok(r.try_get(0)?)).collect()
}

pub async fn get(db: &impl Db, id: &str) -> anyhow::Result<Option<DatabaseInfo>> {
    let sql = format!("SELECT {COLUMNS} FROM databases WHERE id = $1");
    db.query_opt(&sql, &[&id])
        .await
        .context("read database")?
        .as_ref()
        .map(info_of)
        .transpose()
}

/// Databases by position: those on `shard` and in `state` if given, after
/// position `after`, at most `limit` (`None`: all).
pub async fn list(
    db: &impl Db,
    shard: Option<&str>,
    state: Option<DatabaseState>,
    after: Option<i64>,
    limit: Option<i64>,
) -> anyhow::Result<Vec<DatabaseInfo>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM databases
         WHERE ($1::text IS NULL OR shard = $1) AND ($2::text IS NULL OR state = $2)
           AND ($3::bigint IS NULL OR position > $3)
         ORDER BY position LIMIT $4"
    );
    db.query(&sql, &[&shard, &state.map(state_str), &after, &limit])
        .await
        .context("list databases")?
        .iter()
        .map(info_of)
        .collect()
}

/// How many databases each shard holds (shards without any are absent).
pub async fn count_by_shard(db: &impl Db) -> anyhow::Result<Vec<(String, i64)>> {
    db.query("SELECT shard, count(*) FROM databases GROUP BY shard", &[])
        .await
        .context("count databases per shard")?
        .iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
        .collect()
}

pub async fn placement_by_tag(db: &impl Db, tag: &str) -> anyhow::Result<Option<Placement>> {
    let sql = format!("{PLACEMENT} WHERE d.tag = $1");
    db.query_opt(&sql, &[&tag])
        .await
        .context("read placement")?
        .as_ref()
        .map(placement_of)
        .transpose()
}

pub async fn placements_by_ids(db: &impl Db, ids: &[String]) -> anyhow::Result<Vec<Placement>> {
    let sql = format!("{PLACEMENT} WHERE d.id = ANY($1) ORDER BY d.position");
    db.query(&sql, &[&ids])
        .await
        .context("look up placements")?
        .iter()
        .map(placement_of)
        .collect()
}
