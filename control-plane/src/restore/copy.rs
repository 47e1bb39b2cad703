//! `copying`: the original's tenant schema and its shard catalog rows, as
//! the scratch instance holds them, become the new database on its shard,
//! re-tagged, in ONE transaction there: a crash or an error leaves nothing
//! of it on the shard. What is copied (docs/restore.md, "What is copied"):
//! the database's row (new id, tag, name, position, limits), its tables,
//! fields, views and comments, every tenant table with its rows, indexes
//! and constraints. Not copied: webhooks, their matches and deliveries (a
//! restore must not call anyone), share links (their tokens would be public
//! twice), attachments (their bytes are keyed by the original's ids).

use anyhow::Context;
use chrono::{DateTime, SecondsFormat, Utc};
use cluster_protocol::control::quotas::DatabaseLimits;
use cluster_protocol::control::Shard;
use cluster_protocol::ids::{self, Kind};
use serde_json::{Map, Value};
use tokio_postgres::{Client, Transaction};

use super::retag::Retag;
use super::rows::{self, Progress};
use super::schema;
use crate::mover::admin::{self, Admin};
use crate::mover::context::fatal;
use crate::mover::ddl::SchemaCopy;
use crate::mover::sql::{self, quote_ident};
use crate::mover::{schema_copy, shard_catalog};
use crate::AppState;

/// Shard catalog tables copied after the database's row, parents first.
/// Every one has a `database_id` column.
pub const COPIED_CATALOG_TABLES: &[&str] = &["tables", "fields", "views", "comments"];

/// What the new database is, from the control plane's catalog.
pub struct NewDatabase<'a> {
    pub restore_id: &'a str,
    pub as_of: DateTime<Utc>,
    pub into: Option<&'a str>,
    pub owner_id: &'a str,
    pub position: i64,
    pub epoch: i64,
    pub limits: DatabaseLimits,
    pub shard: &'a Shard,
}

/// A session on the scratch instance, as its DSN says (UTC).
pub async fn connect_scratch(
    dsn: &str,
    state: &AppState,
) -> anyhow::Result<(Client, tokio::task::JoinHandle<()>)> {
    let (client, conn) = tokio_postgres::connect(dsn, state.moves.pg_tls.clone())
        .await
        .context("connect to the scratch instance")?;
    let task = tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "scratch connection ended");
        }
    });
    client
        .batch_execute("SET TimeZone = 'UTC'; SET default_transaction_read_only = on")
        .await
        .context("set up the scratch session")?;
    Ok((client, task))
}

/// Drops whatever an earlier try left of the new database on its shard.
pub async fn drop_leftovers(target: &mut Admin, new_database_id: &str) -> anyhow::Result<()> {
    shard_catalog::drop_copy(&mut target.client, new_database_id).await
}

/// Copies the database from the scratch instance into `new` on its shard.
pub async fn run(
    state: &AppState,
    scratch: &Client,
    retag: &Retag,
    new: &NewDatabase<'_>,
) -> anyhow::Result<()> {
    let old_id = retag.old_database();
    let new_id = retag.new_database();
    let original: Option<String> = scratch
        .query_opt(
            "SELECT row_to_json(d)::text FROM databases d WHERE id = $1",
            &[&old_id],
        )
        .await
        .context("read the database's row on the scratch instance")?
        .map(|r| r.try_get(0))
        .transpose()?;
    let Some(original) = original else {
        return Err(fatal(format!(
            "the backup of shard {} at {} holds no database {old_id} (not created yet, or \
             on another shard then)",
            new.shard.name, new.as_of
        )));
    };
    let source_schema = schema_copy::introspect(scratch, old_id).await?;
    let target_schema = schema::retag(&source_schema, retag);
    let total = count_rows(scratch, old_id, &source_schema).await?;
    let mut progress = Progress::new(state, new.restore_id, total);
    progress.write().await?;

    let mut target = admin::connect(new.shard, &state.moves).await?;
    drop_leftovers(&mut target, new_id).await?;
    let tx = target
        .client
        .transaction()
        .await
        .context("begin the copy on the target")?;
    // Rows come from one consistent snapshot in table-name order (connector
    // tables before the tables they reference): foreign keys and triggers
    // are not checked while copying, as a move's replication apply does
    // not check them either.
    tx.batch_execute("SET LOCAL session_replication_role = replica")
        .await
        .context("enter replica role")?;
    let row = database_row(&original, retag, new)?;
    tx.execute(
        "INSERT INTO databases SELECT * FROM json_populate_record(NULL::databases, $1::text::json)",
        &[&row],
    )
    .await
    .context("insert the new database's row")?;
    progress.add(1).await?;
    shard_catalog::own(&tx, new_id, new.epoch).await?;
    for table in COPIED_CATALOG_TABLES {
        copy_catalog_table(scratch, &tx, table, retag, &mut progress).await?;
    }
    schema_copy::create_in(&tx, new_id, &target_schema).await?;
    for (from, to) in source_schema.tables.iter().zip(&target_schema.tables) {
        let cols = |names: Vec<&str>| {
            names
                .into_iter()
                .map(quote_ident)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let copy_out = format!(
            "COPY {} ({}) TO STDOUT",
            sql::qualified(old_id, &from.name)?,
            cols(schema::copied_columns(from))
        );
        let copy_in = format!(
            "COPY {} ({}) FROM STDIN",
            sql::qualified(new_id, &to.name)?,
            cols(schema::copied_columns(to))
        );
        rows::stream(scratch, &tx, &copy_out, &copy_in, retag, &mut progress).await?;
    }
    reset_identities(&tx, new_id, &target_schema).await?;
    schema_copy::create_after_copy(&tx, new_id, &target_schema).await?;
    tx.commit().await.context("commit the copy on the target")?;
    progress.write().await
}

/// The new database's row: the original's at `as_of`, re-tagged, with the
/// new tag, name, owner, position and limits, no attachment bytes (none are
/// copied) and no move marker.
pub fn database_row(
    original: &str,
    retag: &Retag,
    new: &NewDatabase<'_>,
) -> anyhow::Result<String> {
    let mut row: Map<String, Value> =
        serde_json::from_str(&retag.text(original)).context("parse the database's row")?;
    let tag = ids::tag_of(Kind::Database, retag.new_database())
        .context("the new database id has no tag")?;
    let old_name = row
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("database")
        .to_string();
    let name = match new.into {
        Some(n) => n.to_string(),
        None => default_name(&old_name, new.as_of),
    };
    let now = Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true);
    let set = [
        ("id", Value::from(retag.new_database())),
        ("tag", Value::from(tag)),
        ("name", Value::from(name)),
        ("owner_id", Value::from(new.owner_id)),
        ("position", Value::from(new.position)),
        ("max_tables", Value::from(new.limits.tables_per_database)),
        (
            "max_fields_per_table",
            Value::from(new.limits.fields_per_table),
        ),
        (
            "max_attachment_bytes",
            Value::from(new.limits.attachment_bytes),
        ),
        ("attachment_bytes", Value::from(0)),
        ("move_marker", Value::Null),
        ("created_at", Value::from(now.clone())),
        ("updated_at", Value::from(now)),
    ];
    for (k, v) in set {
        row.insert(k.to_string(), v);
    }
    Ok(Value::Object(row).to_string())
}

/// `<name> (restored <as_of>)`.
pub fn default_name(name: &str, as_of: DateTime<Utc>) -> String {
    format!(
        "{name} (restored {})",
        as_of.to_rfc3339_opts(SecondsFormat::Secs, true)
    )
}

/// Rows the copy will write: tenant rows and copied catalog rows.
async fn count_rows(scratch: &Client, old_id: &str, copy: &SchemaCopy) -> anyhow::Result<i64> {
    let mut total = 1;
    for t in &copy.tables {
        let n: i64 = scratch
            .query_one(
                &format!("SELECT count(*) FROM {}", sql::qualified(old_id, &t.name)?),
                &[],
            )
            .await
            .context("count a tenant table's rows")?
            .try_get(0)?;
        total += n;
    }
    for table in COPIED_CATALOG_TABLES {
        let n: i64 = scratch
            .query_one(
                &format!(
                    "SELECT count(*) FROM {} WHERE database_id = $1",
                    quote_ident(table)
                ),
                &[&old_id],
            )
            .await
            .with_context(|| format!("count the database's {table} rows"))?
            .try_get(0)?;
        total += n;
    }
    Ok(total)
}

/// Columns (not generated) of a shard catalog table on one instance.
async fn catalog_columns(
    c: &impl tokio_postgres::GenericClient,
    table: &str,
) -> anyhow::Result<Vec<String>> {
    c.query(
        "SELECT a.attname::text FROM pg_attribute a
          WHERE a.attrelid = to_regclass($1::text) AND a.attnum > 0
            AND NOT a.attisdropped AND a.attgenerated = ''
          ORDER BY a.attnum",
        &[&table],
    )
    .await
    .with_context(|| format!("read the columns of {table}"))?
    .iter()
    .map(|r| Ok(r.try_get(0)?))
    .collect()
}

/// The database's rows of one shard catalog table, over the columns both
/// instances have (the scratch's migrations may be older than the shard's).
async fn copy_catalog_table(
    scratch: &Client,
    tx: &Transaction<'_>,
    table: &str,
    retag: &Retag,
    progress: &mut Progress,
) -> anyhow::Result<u64> {
    let source = catalog_columns(scratch, table).await?;
    let columns: Vec<String> = catalog_columns(tx, table)
        .await?
        .into_iter()
        .filter(|c| source.contains(c))
        .map(|c| quote_ident(&c))
        .collect();
    let list = columns.join(", ");
    let copy_out = format!(
        "COPY (SELECT {list} FROM {} WHERE database_id = {}) TO STDOUT",
        quote_ident(table),
        sql::database_literal(retag.old_database())?
    );
    let copy_in = format!("COPY {} ({list}) FROM STDIN", quote_ident(table));
    rows::stream(scratch, tx, &copy_out, &copy_in, retag, progress).await
}

/// Identity sequences start after the greatest copied value.
async fn reset_identities(
    tx: &Transaction<'_>,
    new_id: &str,
    copy: &SchemaCopy,
) -> anyhow::Result<()> {
    for (table, column) in schema_copy::identity_columns(new_id, copy)? {
        let sql = format!(
            "SELECT setval(pg_get_serial_sequence($1, $2),
                           COALESCE((SELECT max({col}) FROM {table}), 0) + 1, false)",
            col = quote_ident(&column)
        );
        tx.query_one(&sql, &[&table, &column])
            .await
            .with_context(|| format!("reset the identity of {table}.{column}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard() -> Shard {
        serde_json::from_value(serde_json::json!({
            "name": "shard-1", "url": "http://x", "postgres": "postgres://x/y",
            "weight": 100, "state": "active"
        }))
        .unwrap()
    }

    #[test]
    fn the_row_gets_the_new_identity_and_keeps_the_rest() {
        let r = Retag::new("db_AbCdE1234567", "db_XyZ09abcdefg").unwrap();
        let s = shard();
        let as_of = DateTime::parse_from_rfc3339("2026-11-29T02:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let new = NewDatabase {
            restore_id: "rst_AbCdEf012345",
            as_of,
            into: None,
            owner_id: "usr_owner0000000",
            position: 42,
            epoch: 1,
            limits: DatabaseLimits {
                tables_per_database: Some(7),
                ..DatabaseLimits::default()
            },
            shard: &s,
        };
        let original = r#"{"id":"db_AbCdE1234567","tag":"AbCdE","name":"CRM","timezone":"Europe/Paris",
            "position":3,"owner_id":"usr_owner0000000","attachment_bytes":99,"move_marker":"m",
            "max_tables":null,"weekend":[6,7]}"#;
        let row: Value = serde_json::from_str(&database_row(original, &r, &new).unwrap()).unwrap();
        assert_eq!(row["id"], "db_XyZ09abcdefg");
        assert_eq!(row["tag"], "XyZ09");
        assert_eq!(row["name"], "CRM (restored 2026-11-29T02:00:00Z)");
        assert_eq!(row["timezone"], "Europe/Paris");
        assert_eq!(row["position"], 42);
        assert_eq!(row["max_tables"], 7);
        assert_eq!(row["max_fields_per_table"], Value::Null);
        assert_eq!(row["attachment_bytes"], 0);
        assert_eq!(row["move_marker"], Value::Null);
        assert_eq!(row["weekend"], serde_json::json!([6, 7]));
        let named = NewDatabase {
            into: Some("Recovered"),
            ..new
        };
        let row: Value =
            serde_json::from_str(&database_row(original, &r, &named).unwrap()).unwrap();
        assert_eq!(row["name"], "Recovered");
    }
}
