//! DDL of tenant storage: one PostgreSQL schema per database, named by the
//! database id, and one real table per table, named by the table id.
//!
//! Identifiers are only ever built from well-formed ids (checked here, so a
//! malformed id can never reach SQL text) and are always double-quoted.

use anyhow::{bail, Context};
use cluster_protocol::ids::{self, Kind};
use deadpool_postgres::GenericClient;

/// A quoted identifier built from an id of `kind`.
fn ident(kind: Kind, id: &str) -> anyhow::Result<String> {
    if !ids::is_valid(kind, id) {
        bail!("refusing to build an identifier from malformed {kind:?} id {id:?}");
    }
    // Ids are [0-9A-Za-z] after a fixed prefix: nothing to escape.
    Ok(format!("\"{id}\""))
}

/// `"db_..."`
pub fn schema(database_id: &str) -> anyhow::Result<String> {
    ident(Kind::Database, database_id)
}

/// `"db_..."."tbl_..."`
pub fn table(database_id: &str, table_id: &str) -> anyhow::Result<String> {
    Ok(format!(
        "{}.{}",
        schema(database_id)?,
        ident(Kind::Table, table_id)?
    ))
}

pub async fn create_schema(c: &impl GenericClient, database_id: &str) -> anyhow::Result<()> {
    let sql = format!("CREATE SCHEMA {}", schema(database_id)?);
    c.batch_execute(&sql).await.context("create tenant schema")
}

pub async fn drop_schema(c: &impl GenericClient, database_id: &str) -> anyhow::Result<()> {
    let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", schema(database_id)?);
    c.batch_execute(&sql).await.context("drop tenant schema")
}

/// The real table behind a new table: the five internal columns of part A
/// and a partial index over live records.
pub async fn create_table(
    c: &impl GenericClient,
    database_id: &str,
    table_id: &str,
) -> anyhow::Result<()> {
    let qualified = table(database_id, table_id)?;
    let live_index = ident_suffix(table_id, "live")?;
    let sql = format!(
        "CREATE TABLE {qualified} (
             id text PRIMARY KEY,
             created_at timestamptz NOT NULL DEFAULT now(),
             updated_at timestamptz NOT NULL DEFAULT now(),
             created_by text,
             deleted_at timestamptz
         );
         CREATE INDEX {live_index} ON {qualified} (id) WHERE deleted_at IS NULL;"
    );
    c.batch_execute(&sql).await.context("create tenant table")
}

pub async fn drop_table(
    c: &impl GenericClient,
    database_id: &str,
    table_id: &str,
) -> anyhow::Result<()> {
    let sql = format!(
        "DROP TABLE IF EXISTS {} CASCADE",
        table(database_id, table_id)?
    );
    c.batch_execute(&sql).await.context("drop tenant table")
}

/// `"tbl_..._suffix"`, for indexes and constraints of a table.
fn ident_suffix(table_id: &str, suffix: &str) -> anyhow::Result<String> {
    ident(Kind::Table, table_id)?;
    debug_assert!(suffix.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    Ok(format!("\"{table_id}_{suffix}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_come_only_from_ids() {
        assert_eq!(schema("db_Ab3dZ1234567").unwrap(), "\"db_Ab3dZ1234567\"");
        assert_eq!(
            table("db_Ab3dZ1234567", "tbl_Ab3dZabcdefg").unwrap(),
            "\"db_Ab3dZ1234567\".\"tbl_Ab3dZabcdefg\""
        );
        assert!(schema("db_x\"; DROP").is_err());
        assert!(table("db_Ab3dZ1234567", "fld_Ab3dZabcdefg").is_err());
        assert!(schema("My Database").is_err());
    }
}
