//! The write path shared by create, update and upsert: one transaction
//! with the table's [`Ctx`] ([`in_transaction`]), convert cells, write
//! columns and links, bump the other end of link writes, read the records
//! back inside the transaction. Each path hands its events to webhooks
//! ([`crate::webhooks::outbox::Outbox`]) in the same transaction.

use std::collections::BTreeMap;
use std::sync::Arc;

use deadpool_postgres::{GenericClient, Transaction};
use serde_json::{Map, Value};

use super::cells::read;
use super::cells::write::{prepare, Prepared};
use super::cells::ReadSet;
use super::reply::{self, ReadField, Shape};
use super::store;
use super::table::RecordTable;
use crate::attachments::links::Links;
use crate::attachments::shown;
use crate::auth::Held;
use crate::catalog::placements;
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::schema::cache::SchemaCache;
use crate::schema::{DatabaseSchema, TableSchema};
use crate::state::AppState;
use crate::tenant_schema;

/// Runs one record write of `rows` records, timed as `op`: opens a
/// transaction whose first statement takes the write fence and reads the
/// placement's epoch (the `held` check, when it is still to be made) and
/// the schema version (`placements::fence_write`), loads the addressed
/// table's [`Ctx`] (404 when it is not there), runs `write` and commits
/// only when it succeeds; an error rolls everything back. A committed write counts its rows towards the table's
/// next `ANALYZE` ([`super::statistics`]).
pub async fn in_transaction<T>(
    state: &AppState,
    op: DbOp,
    (database_id, table_id, held): (&str, &str, Held),
    rows: usize,
    write: impl AsyncFnOnce(&Transaction<'_>, &Ctx) -> ApiResult<T>,
) -> ApiResult<T> {
    let out = state
        .db
        .in_transaction_fenced_by(
            database_id,
            op,
            async |tx| {
                let fenced = placements::fence_write(tx, database_id).await?;
                held.admits(fenced.epoch)?;
                let schema = state
                    .schemas
                    .at_version(tx, database_id, fenced.schema_version)
                    .await?;
                Ok((schema, fenced.database_name))
            },
            async |tx, (schema, database_name)| {
                let ctx = Ctx::new(schema, database_name, &state.links, table_id)?;
                write(tx, &ctx).await
            },
        )
        .await?;
    if let Ok(qualified) = tenant_schema::table(database_id, table_id) {
        state.statistics.written(&state.db, &qualified, rows);
    }
    Ok(out)
}

/// Everything one write needs about its table.
pub struct Ctx {
    pub record_table: RecordTable,
    pub schema: Arc<DatabaseSchema>,
    /// The database's name (webhook payloads carry it).
    pub database_name: String,
    pub env: filter_lang::Env,
    /// Signs attachment links (replies and payloads show attachment cells
    /// with them).
    pub links: Links,
}

impl Ctx {
    /// The schema from the node's cache (its version key-share locked for
    /// the rest of the transaction `c`) and the addressed table (404).
    pub async fn load(
        c: &impl GenericClient,
        cache: &SchemaCache,
        links: &Links,
        database_id: &str,
        table_id: &str,
    ) -> ApiResult<Ctx> {
        let (schema, database_name) = cache.get_for_write(c, database_id).await?;
        Self::new(schema, database_name, links, table_id)
    }

    /// The context of `table_id` (404 when `schema` has no such table).
    pub fn new(
        schema: Arc<DatabaseSchema>,
        database_name: String,
        links: &Links,
        table_id: &str,
    ) -> ApiResult<Ctx> {
        let record_table = RecordTable::from_schema(&schema, table_id)?;
        let env = filter_lang::Env::new(&record_table.timezone, chrono::Utc::now())
            .or_else(|_| filter_lang::Env::new("UTC", chrono::Utc::now()))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Ctx {
            record_table,
            schema,
            database_name,
            env,
            links: links.clone(),
        })
    }

    pub fn table(&self) -> ApiResult<&TableSchema> {
        self.schema
            .table(&self.record_table.table_id)
            .ok_or(ApiError::NotFound)
    }

    /// Every field of the table, for replies (writes carry every field).
    pub fn read_fields(&self) -> ApiResult<ReadSet> {
        Ok(read::read_set(&self.schema, self.table()?, None))
    }

    /// Replaces the attachment cells of `rows` (read with `fields`) by
    /// the objects a reply shows.
    pub async fn show_attachments(
        &self,
        c: &impl GenericClient,
        fields: &[ReadField],
        rows: &mut [store::StoredRecord],
    ) -> ApiResult<()> {
        shown::expand(
            c,
            &self.links,
            &self.record_table.database_id,
            fields,
            rows,
            shown::Style::Reply,
        )
        .await
    }
}

/// A batch item's `fields` object (absent or null = no cells).
pub fn cells_of(item: &Value, i: usize) -> ApiResult<Option<&Map<String, Value>>> {
    let Some(obj) = item.as_object() else {
        return Err(ApiError::bad_request(format!(
            "records[{i}] must be an object."
        )));
    };
    match obj.get("fields") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(cells)) => Ok(Some(cells)),
        Some(_) => Err(ApiError::bad_request(format!(
            "records[{i}].fields must be an object."
        ))),
    }
}

/// Converts the `i`-th batch item: its `fields` object, then its cells.
pub fn prepare_item(ctx: &Ctx, item: &Value, i: usize) -> ApiResult<Prepared> {
    prepare_cells(ctx, cells_of(item, i)?, i)
}

/// Converts one record's cells (prefixing refusals with its position).
pub fn prepare_cells(
    ctx: &Ctx,
    cells: Option<&Map<String, Value>>,
    i: usize,
) -> ApiResult<Prepared> {
    let mut p = match cells {
        None => Prepared::default(),
        Some(cells) => {
            prepare(&ctx.schema, ctx.table()?, cells, &ctx.env).map_err(|e| match e {
                ApiError::BadRequest(m) => ApiError::BadRequest(format!("records[{i}]: {m}")),
                other => other,
            })?
        }
    };
    p.index = i;
    Ok(p)
}

fn column_types(ctx: &Ctx, rows: &[(String, Prepared)]) -> ApiResult<Vec<(String, String)>> {
    let table = ctx.table()?;
    let mut cols: BTreeMap<String, String> = BTreeMap::new();
    for (_, p) in rows {
        for id in p.columns.keys() {
            if let Some(ty) = table.field(id).and_then(|f| f.sql_type.clone()) {
                cols.insert(id.clone(), ty);
            }
        }
    }
    Ok(cols.into_iter().collect())
}

/// Inserts new records with their cells and links.
pub async fn insert(
    tx: &impl GenericClient,
    ctx: &Ctx,
    user_id: &str,
    rows: &[(String, Prepared)],
) -> ApiResult<()> {
    let cols = column_types(ctx, rows)?;
    let written =
        store::insert_rows(tx, &ctx.record_table, user_id, &cols, &docs(rows, false)).await;
    then_links(tx, ctx, rows, written).await
}

/// [`insert`], and the new records read back with every field when the
/// insert itself can return them (no link cells: links are written by
/// later statements the insert's own read would not see). `None`: read
/// them back after the write ([`reply`] does).
pub async fn insert_returning(
    tx: &impl GenericClient,
    ctx: &Ctx,
    user_id: &str,
    rows: &[(String, Prepared)],
) -> ApiResult<Option<Vec<store::StoredRecord>>> {
    if rows.iter().any(|(_, p)| !p.links.is_empty()) {
        insert(tx, ctx, user_id, rows).await?;
        return Ok(None);
    }
    let cols = column_types(ctx, rows)?;
    let read = ctx.read_fields()?;
    let written = store::insert_rows_returning(
        tx,
        &ctx.record_table,
        user_id,
        &cols,
        &docs(rows, false),
        &read.exprs(),
        &read.values,
    )
    .await;
    let table = ctx.table()?;
    written
        .map(Some)
        .map_err(|e| super::cells::unique_violation(e, table))
}

/// Updates the cells each record names (and bumps `updated_at`).
pub async fn update(
    tx: &impl GenericClient,
    ctx: &Ctx,
    rows: &[(String, Prepared)],
) -> ApiResult<()> {
    let cols = column_types(ctx, rows)?;
    let written = store::update_rows(tx, &ctx.record_table, &cols, &docs(rows, true)).await;
    then_links(tx, ctx, rows, written).await
}

/// The rows as the JSON documents `store` writes: each record's columns
/// and `id`, with `keys` the names of the columns it sets (`__keys`).
fn docs(rows: &[(String, Prepared)], keys: bool) -> Value {
    let docs = rows
        .iter()
        .map(|(id, p)| {
            let mut o = p.columns.clone();
            if keys {
                let keys: Vec<Value> = p.columns.keys().map(|k| Value::String(k.clone())).collect();
                o.insert("__keys".into(), Value::Array(keys));
            }
            o.insert("id".into(), Value::String(id.clone()));
            Value::Object(o)
        })
        .collect();
    Value::Array(docs)
}

/// After the rows are written: a unique index refusal names its field
/// (400); otherwise the link cells are written.
async fn then_links(
    tx: &impl GenericClient,
    ctx: &Ctx,
    rows: &[(String, Prepared)],
    written: ApiResult<u64>,
) -> ApiResult<()> {
    let table = ctx.table()?;
    written.map_err(|e| super::cells::unique_violation(e, table))?;
    write_links(tx, ctx, rows).await
}

/// Replaces each written link cell; linked ids must be live records of the
/// target table; records at the other end (before and after) get their
/// `updated_at` bumped.
async fn write_links(
    tx: &impl GenericClient,
    ctx: &Ctx,
    rows: &[(String, Prepared)],
) -> ApiResult<()> {
    let table = ctx.table()?;
    // Per link field: the records written, then (record, linked) pairs.
    type Writes = (Vec<String>, Vec<String>, Vec<String>);
    let mut by_field: BTreeMap<&str, Writes> = BTreeMap::new();
    for (rid, p) in rows {
        for (fid, targets) in &p.links {
            let e = by_field.entry(fid.as_str()).or_default();
            e.0.push(rid.clone());
            for t in targets {
                e.1.push(rid.clone());
                e.2.push(t.clone());
            }
        }
    }
    for (fid, (owners, own_col, other_col)) in by_field {
        let f = table.field(fid).ok_or(ApiError::NotFound)?;
        let target = ctx
            .schema
            .link_target(f)
            .ok_or_else(|| anyhow::anyhow!("link {fid} has no target table"))?;
        let target_q = tenant_schema::table(&ctx.schema.database_id, &target.id)?;
        let mut wanted = other_col.clone();
        wanted.sort();
        wanted.dedup();
        let live = store::live_ids(tx, &target_q, &wanted).await?;
        let live: std::collections::HashSet<&String> = live.iter().collect();
        if let Some(missing) = wanted.iter().find(|w| !live.contains(w)) {
            return Err(ApiError::bad_request(format!(
                "Field '{}' cannot link {missing}: no such live record in the linked table.",
                f.name
            )));
        }
        let owner = f
            .connector_owner()
            .ok_or_else(|| anyhow::anyhow!("link {fid} without a pair"))?;
        let connector = tenant_schema::connector(&ctx.schema.database_id, owner)?;
        let (own, other) = f.connector_columns();
        let mut old =
            store::replace_links(tx, &connector, own, other, &owners, (&own_col, &other_col))
                .await?;
        old.extend(wanted);
        old.sort();
        old.dedup();
        store::touch(tx, &target_q, &old).await?;
    }
    Ok(())
}

/// Reads `ids` back (inside the write's transaction) as reply objects;
/// `extra(i)` adds keys to the i-th record.
pub async fn read_back(
    tx: &impl GenericClient,
    ctx: &Ctx,
    read: &ReadSet,
    ids: &[String],
    shape: Shape,
    extra: impl Fn(&str) -> Vec<(&'static str, Value)>,
) -> ApiResult<Vec<Value>> {
    let mut rows = store::by_ids(tx, &ctx.record_table, &read.exprs(), &read.values, ids).await?;
    ctx.show_attachments(tx, &read.fields, &mut rows).await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let extras = extra(&r.id);
            reply::record_json(r, &read.fields, shape, &extras)
        })
        .collect())
}

/// The reply of a create or update: `ids` read back inside the write's
/// transaction with every field, shaped as `shape` asks. `read` are the
/// records as already read after the write with every field (by the
/// outbox, `outbox::Outbox::records_read`), when it has them all.
pub async fn reply(
    tx: &impl GenericClient,
    ctx: &Ctx,
    ids: &[String],
    shape: Shape,
    read: Option<Vec<store::StoredRecord>>,
) -> ApiResult<Map<String, Value>> {
    let fields = ctx.read_fields()?;
    let records = match read {
        Some(mut rows) => {
            ctx.show_attachments(tx, &fields.fields, &mut rows).await?;
            rows.into_iter()
                .map(|r| reply::record_json(r, &fields.fields, shape, &[]))
                .collect()
        }
        None => read_back(tx, ctx, &fields, ids, shape, |_| Vec::new()).await?,
    };
    Ok(reply::records_reply(records, &fields.fields, shape))
}
