//! `shards`: the registry of shard nodes.

use anyhow::Context;
use cluster_protocol::control::{AddShard, Shard, ShardState};
use tokio_postgres::Row;

use super::Db;

const COLUMNS: &str = "name, url, postgres, weight, state";

fn state_str(state: ShardState) -> &'static str {
    match state {
        ShardState::Active => "active",
        ShardState::Draining => "draining",
    }
}

fn from_row(row: &Row) -> anyhow::Result<Shard> {
    let raw: String = row.try_get("state")?;
    let state = match raw.as_str() {
        "active" => ShardState::Active,
        "draining" => ShardState::Draining,
        other => anyhow::bail!("unknown shard state {other:?} in catalog"),
    };
    let weight: i32 = row.try_get("weight")?;
    Ok(Shard {
        name: row.try_get("name")?,
        url: row.try_get("url")?,
        postgres: row.try_get("postgres")?,
        weight: u32::try_from(weight).context("negative shard weight in catalog")?,
        state,
        databases: None,
        bytes: None,
    })
}

pub async fn list(db: &impl Db) -> anyhow::Result<Vec<Shard>> {
    let sql = format!("SELECT {COLUMNS} FROM shards ORDER BY name");
    db.query(&sql, &[])
        .await
        .context("list shards")?
        .iter()
        .map(from_row)
        .collect()
}

pub async fn active(db: &impl Db) -> anyhow::Result<Vec<Shard>> {
    let sql = format!("SELECT {COLUMNS} FROM shards WHERE state = $1 ORDER BY name");
    db.query(&sql, &[&state_str(ShardState::Active)])
        .await
        .context("list active shards")?
        .iter()
        .map(from_row)
        .collect()
}

/// Registers a shard; `None` if the name is taken.
pub async fn insert(db: &impl Db, shard: &AddShard, weight: i32) -> anyhow::Result<Option<Shard>> {
    let sql = format!(
        "INSERT INTO shards (name, url, postgres, weight) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name) DO NOTHING RETURNING {COLUMNS}"
    );
    db.query_opt(&sql, &[&shard.name, &shard.url, &shard.postgres, &weight])
        .await
        .context("insert shard")?
        .as_ref()
        .map(from_row)
        .transpose()
}

pub async fn set_state(
    db: &impl Db,
    name: &str,
    state: ShardState,
) -> anyhow::Result<Option<Shard>> {
    let sql = format!("UPDATE shards SET state = $2 WHERE name = $1 RETURNING {COLUMNS}");
    db.query_opt(&sql, &[&name, &state_str(state)])
        .await
        .context("update shard state")?
        .as_ref()
        .map(from_row)
        .transpose()
}

/// Marks `name` draining unless no other shard would stay active; `None`
/// when it is unknown or the last active one (nothing changed either way).
pub async fn start_draining(db: &impl Db, name: &str) -> anyhow::Result<Option<Shard>> {
    let sql = format!(
        "UPDATE shards SET state = $2 WHERE name = $1
           AND EXISTS (SELECT 1 FROM shards o WHERE o.name <> $1 AND o.state = $3)
         RETURNING {COLUMNS}"
    );
    let draining = state_str(ShardState::Draining);
    let active = state_str(ShardState::Active);
    db.query_opt(&sql, &[&name, &draining, &active])
        .await
        .context("start draining shard")?
        .as_ref()
        .map(from_row)
        .transpose()
}

pub async fn get(db: &impl Db, name: &str) -> anyhow::Result<Option<Shard>> {
    let sql = format!("SELECT {COLUMNS} FROM shards WHERE name = $1");
    db.query_opt(&sql, &[&name])
        .await
        .context("read shard")?
        .as_ref()
        .map(from_row)
        .transpose()
}
