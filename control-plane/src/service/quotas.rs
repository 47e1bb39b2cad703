//! Account quotas: `quotas show` and `quotas set` (docs/operations.md,
//! "Quotas and usage").
//!
//! Where each figure takes effect:
//! * databases owned: checked by [`super::databases::allocate`];
//! * requests per minute: carried by the key record routers cache
//!   (`KeyRecord::requests_per_minute`); a change bumps the version of each
//!   of the account's keys, so routers re-read them on their next request;
//! * tables per database, fields per table, attachment bytes per database:
//!   enforced by the shard from its catalog row of the database
//!   (`databases.max_*`), set here on every shard holding one of the
//!   account's databases, carried by the allocation of a new database, and
//!   copied with the row by a move.
//!
//! A value below what the account already uses is refused (400, nothing
//! changed): the shards' rows are locked and checked before anything is
//! written, and written before the catalog commits.

use cluster_protocol::control::quotas::{AccountQuotas, QuotaChange, QuotaFigures, QuotaSetting};

use super::{redis_refused, unknown_user};
use crate::catalog::{databases, keys, quotas, shards, users};
use crate::error::{ApiError, ApiResult};
use crate::{shard_use, AppState};

/// The largest value each quota may be set to.
pub mod maxima {
    pub const DATABASES: i64 = 100_000;
    pub const REQUESTS_PER_MINUTE: i64 = 1_000_000;
    /// 100 TB.
    pub const ATTACHMENT_BYTES: i64 = 100_000_000_000_000;
    pub const TABLES_PER_DATABASE: i64 = 10_000;
    /// Below PostgreSQL's 1600 columns per table (dropped columns count).
    pub const FIELDS_PER_TABLE: i64 = 1_000;
}

fn reply(user_id: &str, overrides: QuotaFigures) -> AccountQuotas {
    AccountQuotas {
        user_id: user_id.to_string(),
        quotas: overrides.effective(),
        overrides,
    }
}

pub async fn show(state: &AppState, user_id: &str) -> ApiResult<AccountQuotas> {
    let client = state.session().await?;
    users::get(&**client, user_id)
        .await?
        .ok_or_else(|| unknown_user(user_id))?;
    Ok(reply(user_id, quotas::overrides(&**client, user_id).await?))
}

/// One setting checked against its range: the override it stores.
fn checked(
    name: &str,
    setting: Option<QuotaSetting>,
    max: i64,
    old: Option<i64>,
) -> ApiResult<Option<i64>> {
    match setting {
        None => Ok(old),
        Some(s) => match s.value() {
            Some(v) if !(1..=max).contains(&v) => Err(ApiError::bad_request(format!(
                "{name} must be a whole number from 1 to {max} (or \"default\"), got {v}."
            ))),
            v => Ok(v),
        },
    }
}

/// The overrides after `change`, every value range-checked.
pub fn apply(old: &QuotaFigures, change: &QuotaChange) -> ApiResult<QuotaFigures> {
    if change.is_empty() {
        return Err(ApiError::bad_request(
            "Nothing to change: give at least one of databases, requests_per_minute, \
             attachment_bytes, tables_per_database, fields_per_table.",
        ));
    }
    Ok(QuotaFigures {
        databases: checked(
            "databases",
            change.databases,
            maxima::DATABASES,
            old.databases,
        )?,
        requests_per_minute: checked(
            "requests_per_minute",
            change.requests_per_minute,
            maxima::REQUESTS_PER_MINUTE,
            old.requests_per_minute,
        )?,
        attachment_bytes: checked(
            "attachment_bytes",
            change.attachment_bytes,
            maxima::ATTACHMENT_BYTES,
            old.attachment_bytes,
        )?,
        tables_per_database: checked(
            "tables_per_database",
            change.tables_per_database,
            maxima::TABLES_PER_DATABASE,
            old.tables_per_database,
        )?,
        fields_per_table: checked(
            "fields_per_table",
            change.fields_per_table,
            maxima::FIELDS_PER_TABLE,
            old.fields_per_table,
        )?,
    })
}

/// 400 when a shard-side figure in force would be below `used`.
pub fn check_floor(new: &QuotaFigures, used: &shard_use::Use) -> ApiResult<()> {
    let e = new.effective();
    let below = |limit: Option<i64>, used: &Option<(String, i64)>, what: &str, unit: &str| match (
        limit, used,
    ) {
        (Some(limit), Some((holder, n))) if *n > limit => Err(ApiError::bad_request(format!(
            "{what} cannot be {limit}: {holder} already has {n} {unit}. \
                 Nothing was changed."
        ))),
        _ => Ok(()),
    };
    below(
        e.tables_per_database,
        &used.tables,
        "tables_per_database",
        "tables",
    )?;
    below(
        e.fields_per_table,
        &used.fields,
        "fields_per_table",
        "fields",
    )?;
    below(
        e.attachment_bytes,
        &used.attachment_bytes,
        "attachment_bytes",
        "bytes of attachments",
    )
}

pub async fn set(state: &AppState, user_id: &str, change: QuotaChange) -> ApiResult<AccountQuotas> {
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    let user = users::get(&*tx, user_id)
        .await?
        .ok_or_else(|| unknown_user(user_id))?;
    // Serialised with allocations: the owned count cannot grow meanwhile.
    databases::lock_allocations(&*tx).await?;
    let old = quotas::lock(&*tx, user_id).await?;
    let new = apply(&old, &change)?;
    if new.databases != old.databases {
        let owned = databases::count_owned(&*tx, user_id).await?;
        let limit = new.effective().databases.unwrap_or(owned);
        if owned > limit {
            return Err(ApiError::bad_request(format!(
                "databases cannot be {limit}: {user_id} already owns {owned} databases. \
                 Nothing was changed."
            )));
        }
    }
    // The shards' rows stay locked (their transactions open) until the
    // catalog commits.
    let mut pushed = Vec::new();
    if new.database_limits() != old.database_limits() {
        let owned = quotas::owned_databases(&*tx, user_id).await?;
        let mut by_shard: Vec<(String, Vec<String>)> = Vec::new();
        for (db, shard) in owned {
            match by_shard.iter_mut().find(|(s, _)| *s == shard) {
                Some((_, dbs)) => dbs.push(db),
                None => by_shard.push((shard, vec![db])),
            }
        }
        for (shard_name, dbs) in by_shard {
            let shard = shards::get(&*tx, &shard_name).await?.ok_or_else(|| {
                anyhow::anyhow!("shard {shard_name} of a database is not registered")
            })?;
            let admin = shard_use::connect(&shard, &state.moves)
                .await
                .map_err(|e| {
                    ApiError::Unavailable(format!(
                        "Shard {shard_name} could not be reached ({e:#}): nothing was changed."
                    ))
                })?;
            admin
                .batch_execute("BEGIN")
                .await
                .map_err(anyhow::Error::from)?;
            shard_use::lock_databases(&*admin, &dbs).await?;
            let used = shard_use::largest_use(&*admin, &dbs).await?;
            check_floor(&new, &used)?;
            shard_use::set_limits(&*admin, &dbs, &new.database_limits()).await?;
            pushed.push(admin);
        }
    }
    quotas::store(&*tx, user_id, &new).await?;
    let bumped = if new.requests_per_minute != old.requests_per_minute {
        let bumped = keys::bump_versions_of_user(&*tx, user_id).await?;
        let ids: Vec<String> = bumped.iter().map(|(k, _)| k.clone()).collect();
        // Fail closed: routers must not keep the old budget.
        if let Err(e) = state.redis.clear_keys(user_id, &ids).await {
            return Err(redis_refused("clear the versions of the account's keys", e));
        }
        bumped
    } else {
        Vec::new()
    };
    for admin in &pushed {
        admin
            .batch_execute("COMMIT")
            .await
            .map_err(|e| anyhow::anyhow!("commit the limits on shard {}: {e}", admin.shard))?;
    }
    tx.commit().await?;
    for (key_id, version) in &bumped {
        state
            .redis
            .announce_key(user_id, key_id, (!user.user.suspended).then_some(*version))
            .await;
    }
    Ok(reply(user_id, new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cluster_protocol::control::quotas::DefaultWord;

    #[test]
    fn settings_are_range_checked_and_default_drops_an_override() {
        let old = QuotaFigures {
            databases: Some(5),
            tables_per_database: Some(9),
            ..Default::default()
        };
        let change = QuotaChange {
            databases: Some(QuotaSetting::Default(DefaultWord::Default)),
            fields_per_table: Some(QuotaSetting::Value(20)),
            ..Default::default()
        };
        let new = apply(&old, &change).unwrap();
        assert_eq!(new.databases, None);
        assert_eq!(new.tables_per_database, Some(9));
        assert_eq!(new.fields_per_table, Some(20));
        for bad in [0, -1, maxima::FIELDS_PER_TABLE + 1] {
            let change = QuotaChange {
                fields_per_table: Some(QuotaSetting::Value(bad)),
                ..Default::default()
            };
            let e = apply(&old, &change).unwrap_err();
            assert!(e.to_string().contains("fields_per_table must be"), "{e}");
        }
        assert!(apply(&old, &QuotaChange::default()).is_err());
    }

    #[test]
    fn a_floor_names_what_holds_more() {
        let used = shard_use::Use {
            tables: Some(("db_a".into(), 7)),
            fields: None,
            attachment_bytes: Some(("db_b".into(), 10)),
        };
        let fits = QuotaFigures {
            tables_per_database: Some(7),
            attachment_bytes: Some(10),
            ..Default::default()
        };
        assert!(check_floor(&fits, &used).is_ok());
        let tight = QuotaFigures {
            tables_per_database: Some(6),
            ..Default::default()
        };
        let e = check_floor(&tight, &used).unwrap_err().to_string();
        assert!(e.contains("db_a already has 7 tables"), "{e}");
    }
}
