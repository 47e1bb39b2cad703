//! Every statement over a tenant's record table. Identifiers come only from
//! ids (see `tenant_schema`); values are always bound parameters. Cell
//! values are read as `jsonb` through per-field read expressions, so one
//! row shape serves every costume.

use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use filter_lang::SqlValue;
use serde_json::Value;
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use tokio_postgres::Row;

use super::table::RecordTable;

/// Alias of the record table in every statement (filter-lang reserves
/// `__fl_*`).
pub const ROW: &str = "r";

/// A record as stored: the internal columns and the read cells, in the
/// order of the read expressions the caller passed.
#[derive(Debug, Clone)]
pub struct StoredRecord {
    pub id: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: Option<String>,
    pub deleted_at: Option<DateTime<Utc>>,
    pub cells: Vec<Option<Value>>,
}

const BASE: &str = "r.id, r.created_at, r.updated_at, r.created_by, r.deleted_at";
const BASE_COUNT: usize = 5;

/// A `numeric` parameter as its binary form (`filter_lang::numeric`).
#[derive(Debug)]
struct NumericBinary(Vec<u8>);

impl ToSql for NumericBinary {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }

    to_sql_checked!();
}

/// Binds filter-lang's values as the types its placeholders cast from,
/// with those types (for statements sent unprepared).
pub fn bind(values: &[SqlValue]) -> Vec<(Box<dyn ToSql + Sync + Send>, Type)> {
    values
        .iter()
        .map(|v| -> (Box<dyn ToSql + Sync + Send>, Type) {
            match v {
                SqlValue::Numeric(s) => match filter_lang::numeric::binary(s) {
                    Some(bytes) => (Box::new(NumericBinary(bytes)), Type::NUMERIC),
                    None => (Box::new(s.clone()), Type::TEXT),
                },
                SqlValue::Text(s) => (Box::new(s.clone()), Type::TEXT),
                SqlValue::TextArray(a) => (Box::new(a.clone()), Type::TEXT_ARRAY),
                SqlValue::Bool(b) => (Box::new(*b), Type::BOOL),
                SqlValue::Int(i) => (Box::new(*i), Type::INT8),
                SqlValue::Date(d) => (Box::new(*d), Type::DATE),
                SqlValue::Timestamp(t) => (Box::new(*t), Type::TIMESTAMPTZ),
            }
        })
        .collect()
}

/// Runs `sql` as a statement prepared once per session (its text is fixed
/// per table, schema version and request shape; the values are `bound`
/// with their types): no parse or round trip to describe it per request.
pub async fn query_prepared(
    c: &impl GenericClient,
    sql: &str,
    bound: &[(Box<dyn ToSql + Sync + Send>, Type)],
) -> Result<Vec<Row>, tokio_postgres::Error> {
    let types: Vec<Type> = bound.iter().map(|(_, ty)| ty.clone()).collect();
    let statement = c.prepare_typed_cached(sql, &types).await?;
    let refs: Vec<&(dyn ToSql + Sync)> = bound
        .iter()
        .map(|(b, _)| b.as_ref() as &(dyn ToSql + Sync))
        .collect();
    c.query(&statement, &refs).await
}

/// `bound` as `query_typed` takes it: a statement sent unprepared with
/// the values' types (one round trip, planned for these values).
pub fn typed(bound: &[(Box<dyn ToSql + Sync + Send>, Type)]) -> Vec<(&(dyn ToSql + Sync), Type)> {
    bound
        .iter()
        .map(|(b, ty)| (b.as_ref() as &(dyn ToSql + Sync), ty.clone()))
        .collect()
}

/// `SELECT` list: the internal columns, then each read expression.
pub fn select_list(read_exprs: &[String]) -> String {
    let mut s = String::from(BASE);
    for e in read_exprs {
        s.push_str(", ");
        s.push_str(e);
    }
    s
}

pub fn from_row(row: &Row, cells: usize) -> Result<StoredRecord, tokio_postgres::Error> {
    let mut values = Vec::with_capacity(cells);
    for i in 0..cells {
        values.push(row.try_get::<_, Option<Value>>(BASE_COUNT + i)?);
    }
    Ok(StoredRecord {
        id: row.try_get(0)?,
        created_at: row.try_get(1)?,
        updated_at: row.try_get(2)?,
        created_by: row.try_get(3)?,
        deleted_at: row.try_get(4)?,
        cells: values,
    })
}

/// The ids a record could have: one holding NUL (which PostgreSQL text
/// cannot hold, and a query would fail on) names no record, so it is left
/// out, and the caller answers as for any unknown id.
fn storable(ids: &[String]) -> std::borrow::Cow<'_, [String]> {
    if ids.iter().any(|id| id.contains('\0')) {
        ids.iter()
            .filter(|id| !id.contains('\0'))
            .cloned()
            .collect()
    } else {
        std::borrow::Cow::Borrowed(ids)
    }
}

/// Records among `ids` (live or trashed), in the order of `ids`.
/// `values` are those the read expressions bind (`ReadSet::values`).
pub async fn by_ids(
    c: &impl GenericClient,
    t: &RecordTable,
    read_exprs: &[String],
    values: &[SqlValue],
    ids: &[String],
) -> Result<Vec<StoredRecord>, tokio_postgres::Error> {
    let ids = &storable(ids)[..];
    let n = values.len() + 1;
    let mut bound = bind(values);
    // One id is compared as text: PostgreSQL keeps one generic plan for
    // that statement, where `= ANY($n)` (its generic plan guesses ten
    // ids) is planned afresh on every call.
    let condition = match ids {
        [one] => {
            bound.push((Box::new(one.clone()), Type::TEXT));
            format!("r.id = ${n}")
        }
        _ => {
            bound.push((Box::new(ids.to_vec()), Type::TEXT_ARRAY));
            format!("r.id = ANY(${n}::text[])")
        }
    };
    let sql = format!(
        "SELECT {} FROM {} AS r WHERE {condition}",
        select_list(read_exprs),
        t.qualified
    );
    let rows = query_prepared(c, &sql, &bound).await?;
    let mut found: Vec<StoredRecord> = rows
        .iter()
        .map(|r| from_row(r, read_exprs.len()))
        .collect::<Result<_, _>>()?;
    found.sort_by_key(|r| ids.iter().position(|i| *i == r.id));
    Ok(found)
}

/// The state of each of `ids` that exists: (id, created_by, trashed).
pub async fn states(
    c: &impl GenericClient,
    t: &RecordTable,
    ids: &[String],
    lock: bool,
) -> Result<Vec<(String, Option<String>, bool)>, tokio_postgres::Error> {
    let ids = &storable(ids)[..];
    let sql = format!(
        "SELECT id, created_by, deleted_at IS NOT NULL FROM {} WHERE id = ANY($1::text[]) ORDER BY id{}",
        t.qualified,
        if lock { " FOR UPDATE" } else { "" }
    );
    let rows = c.query(&sql, &[&ids]).await?;
    rows.iter()
        .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
        .collect()
}

/// Moves live records to the trash.
pub async fn trash(
    c: &impl GenericClient,
    t: &RecordTable,
    ids: &[String],
) -> Result<u64, tokio_postgres::Error> {
    let sql = format!(
        "UPDATE {} SET deleted_at = now() WHERE id = ANY($1::text[]) AND deleted_at IS NULL",
        t.qualified
    );
    c.execute(&sql, &[&ids]).await
}

/// Brings trashed records back.
pub async fn restore(
    c: &impl GenericClient,
    t: &RecordTable,
    ids: &[String],
) -> Result<u64, tokio_postgres::Error> {
    let sql = format!(
        "UPDATE {} SET deleted_at = NULL WHERE id = ANY($1::text[]) AND deleted_at IS NOT NULL",
        t.qualified
    );
    c.execute(&sql, &[&ids]).await
}

/// Removes trashed records for good (connector rows go with them through
/// their foreign keys).
pub async fn purge(
    c: &impl GenericClient,
    t: &RecordTable,
    ids: &[String],
) -> Result<u64, tokio_postgres::Error> {
    let sql = format!(
        "DELETE FROM {} WHERE id = ANY($1::text[]) AND deleted_at IS NOT NULL",
        t.qualified
    );
    c.execute(&sql, &[&ids]).await
}

/// Removes every trashed record, or only those `created_by` made; returns
/// their ids.
pub async fn purge_all(
    c: &impl GenericClient,
    t: &RecordTable,
    created_by: Option<&str>,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let sql = format!(
        "DELETE FROM {} WHERE deleted_at IS NOT NULL AND ($1::text IS NULL OR created_by = $1) \
         RETURNING id",
        t.qualified
    );
    let rows = c.query(&sql, &[&created_by]).await?;
    rows.iter().map(|r| r.try_get(0)).collect()
}

/// Removes records trashed before `cutoff` from one real table; returns
/// their ids.
pub async fn purge_expired(
    c: &impl GenericClient,
    qualified: &str,
    cutoff: DateTime<Utc>,
) -> Result<Vec<String>, tokio_postgres::Error> {
    let sql = format!(
        "DELETE FROM {qualified} WHERE deleted_at IS NOT NULL AND deleted_at < $1 RETURNING id"
    );
    let rows = c.query(&sql, &[&cutoff]).await?;
    rows.iter().map(|r| r.try_get(0)).collect()
}

/// One page of the trash, newest first (`deleted_at` descending, then id),
/// resuming strictly after `after` = (deleted_at, id); fetches `limit` rows.
/// `values` are those the read expressions bind (`ReadSet::values`).
pub async fn trash_page(
    c: &impl GenericClient,
    t: &RecordTable,
    read_exprs: &[String],
    values: &[SqlValue],
    after: Option<(DateTime<Utc>, String)>,
    limit: i64,
) -> Result<Vec<StoredRecord>, tokio_postgres::Error> {
    let n = values.len();
    let (at, id) = match &after {
        Some((at, id)) => (Some(*at), Some(id.clone())),
        None => (None, None),
    };
    let sql = format!(
        "SELECT {} FROM {} AS r
         WHERE r.deleted_at IS NOT NULL
           AND (${a}::timestamptz IS NULL
                OR r.deleted_at < ${a} OR (r.deleted_at = ${a} AND r.id > ${b}))
         ORDER BY r.deleted_at DESC, r.id
         LIMIT ${l}",
        select_list(read_exprs),
        t.qualified,
        a = n + 1,
        b = n + 2,
        l = n + 3,
    );
    let bound = bind(values);
    let mut all: Vec<&(dyn ToSql + Sync)> = bound
        .iter()
        .map(|(b, _)| b.as_ref() as &(dyn ToSql + Sync))
        .collect();
    all.push(&at);
    all.push(&id);
    all.push(&limit);
    let rows = c.query(&sql, &all).await?;
    rows.iter().map(|r| from_row(r, read_exprs.len())).collect()
}

/// Inserts records with no cells.
pub async fn insert_bare(
    c: &impl GenericClient,
    t: &RecordTable,
    ids: &[String],
    created_by: &str,
) -> Result<u64, tokio_postgres::Error> {
    let sql = format!(
        "INSERT INTO {} (id, created_by) SELECT unnest($1::text[]), $2",
        t.qualified
    );
    c.execute(&sql, &[&ids, &created_by]).await
}

/// Refreshes the planner's statistics of the table (after a large import,
/// so its first reads are planned for its real size).
pub async fn analyze(c: &impl GenericClient, t: &RecordTable) -> Result<(), tokio_postgres::Error> {
    c.batch_execute(&format!("ANALYZE {}", t.qualified)).await
}

/// `jsonb_to_recordset` column list: `id text, "fld_a" numeric, ...`.
fn recordset_columns(cols: &[(String, String)], extra: &str) -> anyhow::Result<String> {
    let mut s = String::from("id text");
    s.push_str(extra);
    for (id, ty) in cols {
        s.push_str(&format!(", {} {ty}", crate::tenant_schema::column(id)?));
    }
    Ok(s)
}

/// Inserts records with their column values: `rows` is a JSON list of
/// objects `{id, <field id>: value}`; `cols` (field id, SQL type) the union
/// of columns written.
pub async fn insert_rows(
    c: &impl GenericClient,
    t: &RecordTable,
    created_by: &str,
    cols: &[(String, String)],
    rows: &Value,
) -> Result<u64, crate::error::ApiError> {
    let mut names = String::from("id, created_by");
    let mut values = String::from("x.id, $2");
    for (id, _) in cols {
        let col = crate::tenant_schema::column(id)?;
        names.push_str(&format!(", {col}"));
        values.push_str(&format!(", x.{col}"));
    }
    let sql = format!(
        "INSERT INTO {} ({names}) SELECT {values} FROM jsonb_to_recordset($1::jsonb) AS x({})",
        t.qualified,
        recordset_columns(cols, "")?
    );
    let statement = c.prepare_cached(&sql).await?;
    c.execute(&statement, &[rows, &created_by])
        .await
        .map_err(crate::error::ApiError::from)
}

/// [`insert_rows`] that also reads the new records back in the same
/// statement: the read expressions over the rows the `INSERT` returns
/// (aliased `r`, as everywhere), in the order of `rows`. Only for rows
/// whose every read is of the new rows themselves: a link written after
/// the insert is not visible to this statement. `values` bind the read
/// expressions (`$1`, ...); the rows and author come after them.
pub async fn insert_rows_returning(
    c: &impl GenericClient,
    t: &RecordTable,
    created_by: &str,
    cols: &[(String, String)],
    rows: &Value,
    read_exprs: &[String],
    values: &[SqlValue],
) -> Result<Vec<StoredRecord>, crate::error::ApiError> {
    let (docs, author) = (values.len() + 1, values.len() + 2);
    let mut names = String::from("id, created_by");
    let mut selected = format!("x.id, ${author}");
    for (id, _) in cols {
        let col = crate::tenant_schema::column(id)?;
        names.push_str(&format!(", {col}"));
        selected.push_str(&format!(", x.{col}"));
    }
    let sql = format!(
        "WITH r AS (INSERT INTO {} ({names}) SELECT {selected} \
         FROM jsonb_to_recordset(${docs}::jsonb) AS x({}) RETURNING *) SELECT {} FROM r",
        t.qualified,
        recordset_columns(cols, "")?,
        select_list(read_exprs),
    );
    let mut bound = bind(values);
    bound.push((Box::new(rows.clone()), Type::JSONB));
    bound.push((Box::new(created_by.to_owned()), Type::TEXT));
    let found = query_prepared(c, &sql, &bound).await?;
    let mut found: Vec<StoredRecord> = found
        .iter()
        .map(|r| from_row(r, read_exprs.len()))
        .collect::<Result<_, _>>()?;
    let order: std::collections::HashMap<&str, usize> = rows
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, d)| Some((d.get("id")?.as_str()?, i)))
        .collect();
    found.sort_by_key(|r| order.get(r.id.as_str()).copied());
    Ok(found)
}

/// Updates the named cells of each record and bumps `updated_at`: `rows`
/// is a JSON list of `{id, __keys: [field ids written], <field id>: value}`.
pub async fn update_rows(
    c: &impl GenericClient,
    t: &RecordTable,
    cols: &[(String, String)],
    rows: &Value,
) -> Result<u64, crate::error::ApiError> {
    let mut set = String::from("updated_at = now()");
    // Each field id is bound too ($2, $3, ...), never written into the text.
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![rows];
    for (n, (id, _)) in cols.iter().enumerate() {
        let col = crate::tenant_schema::column(id)?;
        set.push_str(&format!(
            ", {col} = CASE WHEN ${}::text = ANY(x.__keys) THEN x.{col} ELSE r.{col} END",
            n + 2
        ));
        params.push(id);
    }
    let sql = format!(
        "UPDATE {} AS r SET {set} FROM jsonb_to_recordset($1::jsonb) AS x({}) WHERE r.id = x.id",
        t.qualified,
        recordset_columns(cols, ", __keys text[]")?
    );
    let statement = c.prepare_cached(&sql).await?;
    c.execute(&statement, &params)
        .await
        .map_err(crate::error::ApiError::from)
}

/// Whether a record `id` (live or trashed) is in any of the real tables
/// `qualified` (quoted names from `tenant_schema::table`).
pub async fn exists_in_any(
    c: &impl GenericClient,
    qualified: &[String],
    id: &str,
) -> Result<bool, tokio_postgres::Error> {
    if qualified.is_empty() || id.contains('\0') {
        return Ok(false);
    }
    let union = qualified
        .iter()
        .map(|t| format!("SELECT 1 FROM {t} WHERE id = $1"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let row = c
        .query_opt(&format!("SELECT EXISTS ({union})"), &[&id])
        .await?;
    Ok(row.map(|r| r.get::<_, bool>(0)).unwrap_or(false))
}

/// Whether `id` is a live (not trashed) record of the table `qualified`.
pub async fn is_live(
    c: &impl GenericClient,
    qualified: &str,
    id: &str,
) -> Result<bool, tokio_postgres::Error> {
    let sql = format!("SELECT 1 FROM {qualified} WHERE id = $1 AND deleted_at IS NULL");
    Ok(c.query_opt(&sql, &[&id]).await?.is_some())
}

/// [`is_live`], holding a key-share lock on the live record: a purge
/// racing with the caller's transaction waits for it.
pub async fn lock_live(
    c: &impl GenericClient,
    qualified: &str,
    id: &str,
) -> Result<bool, tokio_postgres::Error> {
    let sql =
        format!("SELECT 1 FROM {qualified} WHERE id = $1 AND deleted_at IS NULL FOR KEY SHARE");
    Ok(c.query_opt(&sql, &[&id]).await?.is_some())
}

/// Live ids among `ids` in the table `qualified`.
pub async fn live_ids(
    c: &impl GenericClient,
    qualified: &str,
    ids: &[String],
) -> Result<Vec<String>, tokio_postgres::Error> {
    let sql =
        format!("SELECT id FROM {qualified} WHERE id = ANY($1::text[]) AND deleted_at IS NULL");
    let rows = c.query(&sql, &[&ids]).await?;
    rows.iter().map(|r| r.try_get(0)).collect()
}

/// Replaces the links of `owners` in a connector: returns the ids at the
/// other end before and after (for the `updated_at` bump).
pub async fn replace_links(
    c: &impl GenericClient,
    connector: &str,
    own: &str,
    other: &str,
    owners: &[String],
    pairs: (&[String], &[String]),
) -> Result<Vec<String>, tokio_postgres::Error> {
    let sql = format!("DELETE FROM {connector} WHERE {own} = ANY($1::text[]) RETURNING {other}");
    let old: Vec<String> = c
        .query(&sql, &[&owners])
        .await?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    let sql = format!(
        "INSERT INTO {connector} ({own}, {other})
         SELECT o, t FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS p(o, t, n)
         ORDER BY n ON CONFLICT DO NOTHING"
    );
    c.execute(&sql, &[&pairs.0, &pairs.1]).await?;
    Ok(old)
}

/// Bumps `updated_at` of records (the other end of a link write).
pub async fn touch(
    c: &impl GenericClient,
    qualified: &str,
    ids: &[String],
) -> Result<u64, tokio_postgres::Error> {
    let sql = format!("UPDATE {qualified} SET updated_at = now() WHERE id = ANY($1::text[])");
    c.execute(&sql, &[&ids]).await
}

/// One merge key column of an upsert.
#[derive(Debug, Clone)]
pub struct KeyColumn {
    pub field_id: String,
    /// The column's SQL type (`text`, `numeric`, `date`, `timestamptz`, `boolean`).
    pub sql_type: String,
    /// A checkbox: never written (NULL) and `false` are the same key, as
    /// in the filter's `is false`.
    pub boolean: bool,
    /// Some batch key holds null here: compare with `IS NOT DISTINCT FROM`
    /// (otherwise plain `=`, which an index on the column can serve).
    pub nullable: bool,
    /// The field is unique: its index is on `tenant_schema::unique_key`
    /// (`md5(col)` for text), so the match also compares that, for the
    /// index to serve it.
    pub unique: bool,
}

/// Live records whose key columns equal a batch key: `keys` is a JSON list
/// of `{n, <field id>: value}`; returns (n, record id) ordered by n, id.
pub async fn match_keys(
    c: &impl GenericClient,
    t: &RecordTable,
    cols: &[KeyColumn],
    keys: &Value,
) -> Result<Vec<(usize, String)>, crate::error::ApiError> {
    let mut on = String::from("r.deleted_at IS NULL");
    let mut defs = String::from("n int");
    for k in cols {
        let col = crate::tenant_schema::column(&k.field_id)?;
        defs.push_str(&format!(", {col} {}", k.sql_type));
        if k.boolean {
            on.push_str(&format!(
                " AND coalesce(r.{col}, false) = coalesce(x.{col}, false)"
            ));
        } else if k.nullable {
            on.push_str(&format!(" AND r.{col} IS NOT DISTINCT FROM x.{col}"));
        } else {
            on.push_str(&format!(" AND r.{col} = x.{col}"));
        }
        if k.unique && !k.nullable && k.sql_type == "text" {
            let key = |row: &str| crate::tenant_schema::unique_key(&k.field_id, &k.sql_type, row);
            on.push_str(&format!(" AND {} = {}", key("r")?, key("x")?));
        }
    }
    let sql = format!(
        "SELECT x.n, r.id FROM jsonb_to_recordset($1::jsonb) AS x({defs})
         JOIN {} AS r ON {on} ORDER BY x.n, r.id",
        t.qualified
    );
    let rows = c.query(&sql, &[keys]).await?;
    rows.iter()
        .map(|r| {
            let n: i32 = r.try_get(0)?;
            Ok((usize::try_from(n).unwrap_or(usize::MAX), r.try_get(1)?))
        })
        .collect::<Result<_, tokio_postgres::Error>>()
        .map_err(Into::into)
}

/// [`by_ids`] with one boolean column per `conditions` expression after
/// the cells: `values` bind the read expressions (`$1`...), the ids come
/// next, then `condition_values` (compile the conditions with
/// `Params::new(values.len() + 2)`). Returns each record with the outcome
/// of every condition. Without conditions the statement (its text is fixed
/// per table and schema version) is prepared once per session; with them
/// it is sent typed and unprepared, so the request leaves on the future's
/// first poll (`outbox::guarded` pipelines it between savepoint commands).
pub async fn by_ids_checked(
    c: &deadpool_postgres::Transaction<'_>,
    t: &RecordTable,
    read_exprs: &[String],
    values: &[SqlValue],
    ids: &[String],
    conditions: &[String],
    condition_values: &[SqlValue],
) -> Result<Vec<(StoredRecord, Vec<bool>)>, tokio_postgres::Error> {
    let ids = storable(ids).into_owned();
    let n = values.len() + 1;
    let mut select = select_list(read_exprs);
    for cond in conditions {
        select.push_str(&format!(", ({cond})"));
    }
    let sql = format!(
        "SELECT {select} FROM {} AS r WHERE r.id = ANY(${n}::text[])",
        t.qualified
    );
    let mut bound = bind(values);
    bound.push((Box::new(ids), Type::TEXT_ARRAY));
    bound.extend(bind(condition_values));
    let rows = if conditions.is_empty() {
        query_prepared(c, &sql, &bound).await?
    } else {
        c.query_typed(&sql, &typed(&bound)).await?
    };
    rows.iter()
        .map(|row| {
            let rec = from_row(row, read_exprs.len())?;
            let at = BASE_COUNT + read_exprs.len();
            let outcomes = (0..conditions.len())
                .map(|k| row.try_get::<_, bool>(at + k))
                .collect::<Result<_, _>>()?;
            Ok((rec, outcomes))
        })
        .collect()
}

/// Ids of the live records of the real table `qualified` satisfying
/// `condition` (boolean SQL over `r`, its values numbered from `$1`).
pub async fn live_matching(
    c: &tokio_postgres::Transaction<'_>,
    qualified: &str,
    condition: &str,
    values: &[SqlValue],
) -> Result<Vec<String>, tokio_postgres::Error> {
    let sql =
        format!("SELECT r.id FROM {qualified} AS r WHERE r.deleted_at IS NULL AND ({condition})");
    let bound = bind(values);
    let rows = c.query_typed(&sql, &typed(&bound)).await?;
    rows.iter().map(|r| r.try_get(0)).collect()
}
