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
///
/// Record ids (here and in connector tables) compare byte by byte
/// (`COLLATE "C"`): they are ASCII, the order is the same as the code-point
/// order of `C.UTF-8`, and PostgreSQL then compares with `memcmp` instead of
/// `strcoll` in every index descent, keyset seek and id tie-break (sorted
/// record pages: 29 and 52 % more per second in docs/performance.md, "Records").
pub async fn create_table(
    c: &impl GenericClient,
    database_id: &str,
    table_id: &str,
) -> anyhow::Result<()> {
    let qualified = table(database_id, table_id)?;
    let live_index = ident_suffix(table_id, "live")?;
    // The trash listing's order (newest first, then id) over trashed rows only.
    let trash_index = ident_suffix(table_id, "trash")?;
    let sql = format!(
        "CREATE TABLE {qualified} (
             id text COLLATE \"C\" PRIMARY KEY,
             created_at timestamptz NOT NULL DEFAULT now(),
             updated_at timestamptz NOT NULL DEFAULT now(),
             created_by text,
             deleted_at timestamptz
         );
         CREATE INDEX {live_index} ON {qualified} (id) WHERE deleted_at IS NULL;
         CREATE INDEX {trash_index} ON {qualified} (deleted_at DESC, id) WHERE deleted_at IS NOT NULL;"
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

/// `"fld_..."`: the real column of a field.
pub fn column(field_id: &str) -> anyhow::Result<String> {
    ident(Kind::Field, field_id)
}

/// The connector table of a link pair (unquoted): `lnk_<forward field id>`.
pub fn connector_name(forward_field_id: &str) -> String {
    format!("lnk_{forward_field_id}")
}

/// `"db_..."."lnk_fld_..."`: the connector table of a link pair, named by
/// the forward field.
pub fn connector(database_id: &str, forward_field_id: &str) -> anyhow::Result<String> {
    ident(Kind::Field, forward_field_id)?;
    Ok(format!(
        "{}.\"{}\"",
        schema(database_id)?,
        connector_name(forward_field_id)
    ))
}

/// Name of the partial unique index of a field (`"uq_fld_..."`), bare and
/// schema-qualified.
fn unique_index(database_id: &str, field_id: &str) -> anyhow::Result<(String, String)> {
    ident(Kind::Field, field_id)?;
    let bare = format!("\"uq_{field_id}\"");
    Ok((bare.clone(), format!("{}.{bare}", schema(database_id)?)))
}

/// Column types a field column may have (never user text).
fn checked_type(sql_type: &str) -> anyhow::Result<&str> {
    match sql_type {
        "text" | "numeric" | "date" | "timestamptz" | "boolean" | "text[]" => Ok(sql_type),
        other => bail!("refusing column type {other:?}"),
    }
}

/// Adds a plain nullable column for a stored field.
pub async fn add_column(
    c: &impl GenericClient,
    database_id: &str,
    table_id: &str,
    field_id: &str,
    sql_type: &str,
) -> anyhow::Result<()> {
    let sql = format!(
        "ALTER TABLE {} ADD COLUMN {} {}",
        table(database_id, table_id)?,
        column(field_id)?,
        checked_type(sql_type)?
    );
    c.batch_execute(&sql).await.context("add field column")
}

/// Adds a formula's generated stored column. `expression` comes from the
/// formula compiler, which only joins fixed SQL, quoted identifiers and
/// quoted literals. Errors are returned raw: the caller decides what the
/// user is told (never the datastore's text).
pub async fn add_generated_column(
    c: &impl GenericClient,
    database_id: &str,
    table_id: &str,
    field_id: &str,
    sql_type: &str,
    expression: &str,
) -> anyhow::Result<Result<(), tokio_postgres::Error>> {
    let sql = format!(
        "ALTER TABLE {} ADD COLUMN {} {} GENERATED ALWAYS AS ({expression}) STORED",
        table(database_id, table_id)?,
        column(field_id)?,
        checked_type(sql_type)?
    );
    Ok(c.batch_execute(&sql).await)
}

pub async fn drop_column(
    c: &impl GenericClient,
    database_id: &str,
    table_id: &str,
    field_id: &str,
) -> anyhow::Result<()> {
    let sql = format!(
        "ALTER TABLE {} DROP COLUMN IF EXISTS {}",
        table(database_id, table_id)?,
        column(field_id)?
    );
    c.batch_execute(&sql).await.context("drop field column")
}

/// The conversions a type change may run (part A, "Field type change").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cast {
    /// text -> numeric; blank text becomes NULL, anything else non-numeric
    /// fails the statement.
    TextToNumber,
    /// numeric or boolean -> text.
    ToText,
    /// single select (text) -> multi select (text[]).
    SingleToMulti,
}

/// `ALTER COLUMN ... TYPE ... USING ...`. The inner result is the
/// datastore's refusal (a value that does not convert), for the caller to
/// turn into a 400 without its text.
pub async fn alter_column_type(
    c: &impl GenericClient,
    database_id: &str,
    table_id: &str,
    field_id: &str,
    cast: Cast,
) -> anyhow::Result<Result<(), tokio_postgres::Error>> {
    let col = column(field_id)?;
    let (ty, using) = match cast {
        Cast::TextToNumber => ("numeric", format!("NULLIF(btrim({col}), '')::numeric")),
        Cast::ToText => ("text", format!("{col}::text")),
        Cast::SingleToMulti => (
            "text[]",
            format!("CASE WHEN {col} IS NULL THEN NULL ELSE ARRAY[{col}] END"),
        ),
    };
    let sql = format!(
        "ALTER TABLE {} ALTER COLUMN {col} TYPE {ty} USING {using}",
        table(database_id, table_id)?
    );
    Ok(c.batch_execute(&sql).await)
}

/// A view's sort index (see `views::sort_index`): btree over live records
/// on what the ordering compares first, built without blocking writes. A
/// build that fails leaves no invalid index behind. A text column is
/// indexed on `left(col, SORT_PREFIX_CHARS)` (`"<field>_sort_prefix"`):
/// an entry on the whole column would refuse a text longer than a btree
/// entry holds (every later write of such a value a 500), and text keys
/// order by that prefix first (filter-lang). A plain-column index an
/// earlier version built on a text column is dropped once the prefix one
/// stands. Other columns: `"<field>_sort"` on the column.
pub async fn create_sort_index(
    c: &impl GenericClient,
    database_id: &str,
    table_id: &str,
    field_id: &str,
    text: bool,
) -> anyhow::Result<()> {
    let col = column(field_id)?;
    let (bare, key) = if text {
        (
            format!("\"{field_id}_sort_prefix\""),
            format!("left({col}, {})", filter_lang::SORT_PREFIX_CHARS),
        )
    } else {
        (format!("\"{field_id}_sort\""), col)
    };
    let sql = format!(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS {bare} ON {} ({key}) WHERE deleted_at IS NULL",
        table(database_id, table_id)?,
    );
    if let Err(e) = c.batch_execute(&sql).await {
        let drop = format!(
            "DROP INDEX CONCURRENTLY IF EXISTS {}.{bare}",
            schema(database_id)?
        );
        let _ = c.batch_execute(&drop).await;
        return Err(e).context("create sort index");
    }
    if text {
        let old = format!(
            "DROP INDEX CONCURRENTLY IF EXISTS {}.\"{field_id}_sort\"",
            schema(database_id)?
        );
        c.batch_execute(&old)
            .await
            .context("drop a whole-column text sort index")?;
    }
    Ok(())
}

/// Drops a field's sort indexes (before its column changes type: an index
/// on `left(col, N)` cannot follow a text column to numeric).
pub async fn drop_sort_indexes(
    c: &impl GenericClient,
    database_id: &str,
    field_id: &str,
) -> anyhow::Result<()> {
    ident(Kind::Field, field_id)?;
    let s = schema(database_id)?;
    c.batch_execute(&format!(
        "DROP INDEX IF EXISTS {s}.\"{field_id}_sort\"; DROP INDEX IF EXISTS {s}.\"{field_id}_sort_prefix\";"
    ))
    .await
    .context("drop sort indexes")
}

/// What a field's unique index is built on, for a column of `sql_type`
/// over the row alias `row` (empty: the bare column): `md5(col)` for text,
/// so any text fits a btree entry (the whole text would not: "index row
/// size" on every long write); the column itself otherwise. Two texts are
/// then duplicates when their MD5s are equal: the same text, or a crafted
/// MD5 collision (which can only make a tenant's own two values clash).
pub fn unique_key(field_id: &str, sql_type: &str, row: &str) -> anyhow::Result<String> {
    let col = column(field_id)?;
    let col = if row.is_empty() {
        col
    } else {
        format!("{row}.{col}")
    };
    Ok(if sql_type == "text" {
        format!("md5({col})")
    } else {
        col
    })
}

/// The partial UNIQUE index of a field over live records
/// ([`unique_key`]). The inner result is the datastore's refusal
/// (duplicates already stored).
pub async fn create_unique_index(
    c: &impl GenericClient,
    database_id: &str,
    table_id: &str,
    field_id: &str,
    sql_type: &str,
) -> anyhow::Result<Result<(), tokio_postgres::Error>> {
    let (bare, _) = unique_index(database_id, field_id)?;
    let sql = format!(
        "CREATE UNIQUE INDEX {bare} ON {} (({})) WHERE deleted_at IS NULL",
        table(database_id, table_id)?,
        unique_key(field_id, checked_type(sql_type)?, "")?
    );
    Ok(c.batch_execute(&sql).await)
}

pub async fn drop_unique_index(
    c: &impl GenericClient,
    database_id: &str,
    field_id: &str,
) -> anyhow::Result<()> {
    let (_, qualified) = unique_index(database_id, field_id)?;
    c.batch_execute(&format!("DROP INDEX IF EXISTS {qualified}"))
        .await
        .context("drop unique index")
}

/// The connector table of a link pair: one row per (record, linked record),
/// `position` keeping link order, a primary key (moves replicate it) and an
/// index for the reverse side. Rows vanish with either record.
pub async fn create_connector(
    c: &impl GenericClient,
    database_id: &str,
    forward_field_id: &str,
    from_table_id: &str,
    to_table_id: &str,
) -> anyhow::Result<()> {
    let name = connector(database_id, forward_field_id)?;
    let reverse_index = format!("\"lnk_{forward_field_id}_to\"");
    let sql = format!(
        "CREATE TABLE {name} (
             from_id text COLLATE \"C\" NOT NULL REFERENCES {from} (id) ON DELETE CASCADE,
             to_id text COLLATE \"C\" NOT NULL REFERENCES {to} (id) ON DELETE CASCADE,
             position bigint GENERATED BY DEFAULT AS IDENTITY,
             created_at timestamptz NOT NULL DEFAULT now(),
             PRIMARY KEY (from_id, to_id)
         );
         CREATE INDEX {reverse_index} ON {name} (to_id);",
        from = table(database_id, from_table_id)?,
        to = table(database_id, to_table_id)?,
    );
    c.batch_execute(&sql)
        .await
        .context("create connector table")
}

pub async fn drop_connector(
    c: &impl GenericClient,
    database_id: &str,
    forward_field_id: &str,
) -> anyhow::Result<()> {
    let sql = format!(
        "DROP TABLE IF EXISTS {}",
        connector(database_id, forward_field_id)?
    );
    c.batch_execute(&sql).await.context("drop connector table")
}

/// Clears select cells holding a choice id no longer in `kept`.
pub async fn clear_removed_choices(
    c: &impl GenericClient,
    database_id: &str,
    table_id: &str,
    field_id: &str,
    multi: bool,
    kept: &[String],
) -> anyhow::Result<()> {
    let col = column(field_id)?;
    let set = if multi {
        format!(
            "{col} = ARRAY(SELECT v FROM unnest({col}) AS v WHERE v = ANY($1)) \
             WHERE NOT ({col} <@ $1)"
        )
    } else {
        format!("{col} = NULL WHERE {col} IS NOT NULL AND NOT ({col} = ANY($1))")
    };
    let sql = format!("UPDATE {} SET {set}", table(database_id, table_id)?);
    c.execute(&sql, &[&kept])
        .await
        .context("clear removed choices")?;
    Ok(())
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
