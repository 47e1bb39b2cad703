//! `usage --user` and the fleet view `usage --top N`: figures read from
//! each shard's own catalog and statistics (`shard_use`), never by
//! scanning a tenant table.

use std::collections::HashMap;

use cluster_protocol::control::quotas::{
    AccountTotals, AccountUsage, DatabaseUsage, TopUsage, UsageMeasure,
};

use super::unknown_user;
use crate::catalog::{quotas, shards, users};
use crate::error::{ApiError, ApiResult};
use crate::{shard_use, AppState};

/// The most accounts `usage --top` lists.
pub const MAX_TOP: u32 = 1000;

fn unreachable(shard: &str, e: anyhow::Error) -> ApiError {
    ApiError::Unavailable(format!("Shard {shard} could not be reached ({e:#})."))
}

/// Sums of `databases` as one account's totals.
pub fn totals(user_id: &str, databases: &[DatabaseUsage]) -> AccountTotals {
    let mut t = AccountTotals {
        user_id: user_id.to_string(),
        database_count: databases.len() as i64,
        ..Default::default()
    };
    for d in databases {
        t.records += d.records;
        t.attachment_bytes += d.attachment_bytes;
        t.requests_last_hour += d.requests_last_hour;
        t.requests_last_day += d.requests_last_day;
    }
    t
}

pub async fn of_user(state: &AppState, user_id: &str) -> ApiResult<AccountUsage> {
    let client = state.session().await?;
    users::get(&**client, user_id)
        .await?
        .ok_or_else(|| unknown_user(user_id))?;
    let owned = quotas::owned_databases(&**client, user_id).await?;
    let mut by_shard: HashMap<String, Vec<String>> = HashMap::new();
    for (db, shard) in &owned {
        by_shard.entry(shard.clone()).or_default().push(db.clone());
    }
    let mut found: HashMap<String, DatabaseUsage> = HashMap::new();
    for (shard_name, dbs) in &by_shard {
        let Some(shard) = shards::get(&**client, shard_name).await? else {
            continue;
        };
        let admin = shard_use::connect(&shard, &state.moves)
            .await
            .map_err(|e| unreachable(shard_name, e))?;
        for u in shard_use::usage(&*admin, shard_name, dbs).await? {
            found.insert(u.database_id.clone(), u);
        }
    }
    // A database allocated but not yet on its shard counts with zeros.
    let databases: Vec<DatabaseUsage> = owned
        .into_iter()
        .map(|(id, shard)| {
            found.remove(&id).unwrap_or(DatabaseUsage {
                database_id: id,
                shard,
                ..Default::default()
            })
        })
        .collect();
    let t = totals(user_id, &databases);
    Ok(AccountUsage {
        user_id: t.user_id,
        database_count: t.database_count,
        records: t.records,
        attachment_bytes: t.attachment_bytes,
        requests_last_hour: t.requests_last_hour,
        requests_last_day: t.requests_last_day,
        databases,
    })
}

/// The `top` accounts highest by `by` (ties by user id).
pub fn rank(mut accounts: Vec<AccountTotals>, by: UsageMeasure, top: usize) -> Vec<AccountTotals> {
    accounts.sort_by(|a, b| {
        by.of(b)
            .cmp(&by.of(a))
            .then_with(|| a.user_id.cmp(&b.user_id))
    });
    accounts.truncate(top);
    accounts
}

pub async fn top(state: &AppState, top: u32, by: UsageMeasure) -> ApiResult<TopUsage> {
    if !(1..=MAX_TOP).contains(&top) {
        return Err(ApiError::bad_request(format!(
            "top must be from 1 to {MAX_TOP}, got {top}."
        )));
    }
    let client = state.session().await?;
    let placed = quotas::all_databases(&**client).await?;
    let mut per_db: HashMap<String, DatabaseUsage> = HashMap::new();
    for shard in shards::list(&**client).await? {
        let admin = shard_use::connect(&shard, &state.moves)
            .await
            .map_err(|e| unreachable(&shard.name, e))?;
        for u in shard_use::usage_of_all(&*admin, &shard.name).await? {
            per_db.insert(u.database_id.clone(), u);
        }
    }
    let mut by_owner: HashMap<String, Vec<DatabaseUsage>> = HashMap::new();
    for (db, owner, shard) in placed {
        // Only the copy on the shard the catalog places it on counts.
        let u = match per_db.remove(&db) {
            Some(u) if u.shard == shard => u,
            _ => DatabaseUsage {
                database_id: db,
                shard,
                ..Default::default()
            },
        };
        by_owner.entry(owner).or_default().push(u);
    }
    let accounts = by_owner
        .iter()
        .map(|(owner, dbs)| totals(owner, dbs))
        .collect();
    Ok(TopUsage {
        by,
        accounts: rank(accounts, by, top as usize),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acct(id: &str, requests: i64, records: i64) -> AccountTotals {
        AccountTotals {
            user_id: id.into(),
            requests_last_day: requests,
            records,
            ..Default::default()
        }
    }

    #[test]
    fn ranking_is_by_the_measure_then_id() {
        let all = vec![
            acct("usr_b", 5, 1),
            acct("usr_a", 5, 9),
            acct("usr_c", 9, 0),
        ];
        let ids = |v: Vec<AccountTotals>| v.into_iter().map(|a| a.user_id).collect::<Vec<_>>();
        assert_eq!(
            ids(rank(all.clone(), UsageMeasure::RequestsLastDay, 2)),
            ["usr_c", "usr_a"]
        );
        assert_eq!(ids(rank(all, UsageMeasure::Records, 1)), ["usr_a"]);
    }

    #[test]
    fn totals_add_up_the_databases() {
        let d = |records, bytes| DatabaseUsage {
            records,
            attachment_bytes: bytes,
            requests_last_day: 1,
            ..Default::default()
        };
        let t = totals("usr_a", &[d(2, 10), d(3, 5)]);
        assert_eq!(
            (
                t.database_count,
                t.records,
                t.attachment_bytes,
                t.requests_last_day
            ),
            (2, 5, 15, 2)
        );
    }
}
