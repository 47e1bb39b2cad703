//! `PUT /api/tables/{id}/records`: `{merge_on:[field refs], records:[{fields}]}`.
//!
//! Each record is matched on the values of its `merge_on` cells against the
//! live records; a match is updated, no match creates a record. Refused (400,
//! nothing written): a merge field whose storage is not text, long_text,
//! number, date, checkbox or single_select (or that is computed), a record
//! without every merge field, two batch records sharing a key, a key held by
//! two stored live records. Matching, locking and writing share one
//! transaction: matched rows are locked `FOR UPDATE`, and one that was
//! trashed or purged in between is a 409 with an empty `records` array.
//!
//! Key semantics (the spec is silent): values compare after the write
//! conversion (a choice name matches by its id, dates by day or instant,
//! numbers by value); a null key value matches an unset cell. A checkbox
//! key compares as checked or not, the way the filter's `is` does: `true`
//! matches a checked cell; `false` (or null) matches an unchecked cell or
//! one never written (which reads null).

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use cluster_protocol::ids::{self, Kind};
use deadpool_postgres::Transaction;
use serde_json::{json, Map, Value};

use super::cells::write::{resolve, Prepared};
use super::reply::{self, Shape};
use super::write::{self, Ctx};
use super::{batch, store};
use crate::attachments::fetch::{self, Fetched};
use crate::attachments::place::{self, Mode};
use crate::auth::{Held, HeldWrite};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::http::body::JsonObject;
use crate::schema::{Costume, Family, FieldRow};
use crate::state::AppState;
use crate::webhooks::outbox::{self, Outbox, RecordEvent, Written};

pub async fn handler(
    access: HeldWrite,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Map<String, Value>>> {
    let shape = Shape::from_query(&query)?;
    let merge_on = merge_refs(&body)?;
    let items = batch(&body, "records")?;
    Ok(Json(
        upsert(
            &state,
            (&access.database_id, access.held()),
            &id,
            access.user_id(),
            &merge_on,
            items,
            shape,
        )
        .await?,
    ))
}

/// `merge_on`: a non-empty list of field references (strings).
fn merge_refs(body: &Map<String, Value>) -> ApiResult<Vec<String>> {
    let refs = match body.get("merge_on") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) => {
            return Err(ApiError::bad_request(
                "merge_on must name at least one field.",
            ))
        }
        None | Some(Value::Null) => return Err(ApiError::bad_request("merge_on is required.")),
        Some(_) => {
            return Err(ApiError::bad_request(
                "merge_on must be a list of field names or ids.",
            ))
        }
    };
    refs.iter()
        .map(|r| {
            r.as_str().map(str::to_owned).ok_or_else(|| {
                ApiError::bad_request("merge_on must be a list of field names or ids.")
            })
        })
        .collect()
}

/// Whether a field may be a merge key: stored (not computed) and of a
/// matchable storage kind.
fn mergeable(f: &FieldRow) -> bool {
    use Costume::*;
    !matches!(
        f.costume.family(),
        Family::Formula | Family::Lookup | Family::Rollup | Family::Button | Family::Link
    ) && matches!(
        f.costume,
        SingleLineText
            | LongText
            | Email
            | Phone
            | Url
            | Member
            | Number
            | Currency
            | Percent
            | Rating
            | Duration
            | Date
            | Checkbox
            | SingleSelect
    )
}

/// A key value as shown in a refusal.
fn show(v: &Value) -> String {
    match v {
        Value::Null => "empty".into(),
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    }
}

pub async fn upsert(
    state: &AppState,
    (database_id, held): (&str, Held),
    table_id: &str,
    user_id: &str,
    merge_on: &[String],
    items: &[Value],
    shape: Shape,
) -> ApiResult<Map<String, Value>> {
    let cells = items
        .iter()
        .enumerate()
        .map(|(i, item)| write::cells_of(item, i))
        .collect::<ApiResult<Vec<_>>>()?;
    let fetched = fetch::prefetch(state, database_id, table_id, &cells).await?;
    let outcome = write::in_transaction(
        state,
        DbOp::UpsertRecords,
        (database_id, table_id, held),
        items.len(),
        async |tx, ctx| upsert_in(tx, ctx, user_id, merge_on, items, shape, &fetched).await,
    )
    .await;
    fetched.after_write(state, outcome).await
}

/// The upsert inside its transaction (committed by the caller on success).
async fn upsert_in(
    tx: &Transaction<'_>,
    ctx: &Ctx,
    user_id: &str,
    merge_on: &[String],
    items: &[Value],
    shape: Shape,
    fetched: &Fetched,
) -> ApiResult<Map<String, Value>> {
    let table = ctx.table()?;

    // The merge fields, each once, in the order named.
    let mut keys: Vec<&FieldRow> = Vec::new();
    for r in merge_on {
        let f = resolve(table, r).map_err(|e| match e {
            ApiError::BadRequest(m) => ApiError::BadRequest(format!("merge_on: {m}")),
            other => other,
        })?;
        if !mergeable(f) {
            return Err(ApiError::bad_request(format!(
                "merge_on: field '{}' ({}) cannot be a merge key; use a text, long text, number, date, checkbox or single select field.",
                f.name,
                f.costume.as_str()
            )));
        }
        if !keys.iter().any(|k| k.id == f.id) {
            keys.push(f);
        }
    }

    // Convert every record and take its key.
    let mut rows: Vec<Prepared> = Vec::with_capacity(items.len());
    let mut key_values: Vec<Vec<Value>> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let prepared = write::prepare_item(ctx, item, i)?;
        let mut key = Vec::with_capacity(keys.len());
        for f in &keys {
            let Some(v) = prepared.columns.get(&f.id) else {
                return Err(ApiError::bad_request(format!(
                    "records[{i}] must carry the merge field '{}'.",
                    f.name
                )));
            };
            key.push(match (f.costume, v) {
                (Costume::Checkbox, Value::Null) => Value::Bool(false),
                _ => v.clone(),
            });
        }
        if let Some(j) = key_values.iter().position(|k| *k == key) {
            let shown: Vec<String> = keys
                .iter()
                .zip(&key)
                .map(|(f, v)| format!("'{}' = {}", f.name, show(v)))
                .collect();
            return Err(ApiError::bad_request(format!(
                "records[{j}] and records[{i}] share the merge key ({}).",
                shown.join(", ")
            )));
        }
        key_values.push(key);
        rows.push(prepared);
    }

    // Match against the live records.
    let cols: Vec<store::KeyColumn> = keys
        .iter()
        .enumerate()
        .map(|(k, f)| store::KeyColumn {
            field_id: f.id.clone(),
            sql_type: f.sql_type.clone().unwrap_or_else(|| "text".into()),
            boolean: f.costume == Costume::Checkbox,
            nullable: key_values.iter().any(|kv| kv[k].is_null()),
            unique: f.costume.supports_unique()
                && crate::fields::options::scalar::wants_unique(&f.options),
        })
        .collect();
    let docs: Vec<Value> = key_values
        .iter()
        .enumerate()
        .map(|(n, kv)| {
            let mut o = Map::new();
            o.insert("n".into(), json!(n));
            for (f, v) in keys.iter().zip(kv) {
                o.insert(f.id.clone(), v.clone());
            }
            Value::Object(o)
        })
        .collect();
    let matches = store::match_keys(tx, &ctx.record_table, &cols, &Value::Array(docs)).await?;
    let mut matched: Vec<Option<String>> = vec![None; items.len()];
    for (n, id) in matches {
        let slot = matched
            .get_mut(n)
            .ok_or_else(|| anyhow::anyhow!("match for an unknown batch row"))?;
        if let Some(first) = slot {
            let names: Vec<&str> = keys.iter().map(|f| f.name.as_str()).collect();
            return Err(ApiError::bad_request(format!(
                "records[{n}]: stored records {first} and {id} share its merge key ({}); merge_on must identify one record.",
                names.join(", ")
            )));
        }
        *slot = Some(id);
    }

    // Lock the matched rows; one trashed or purged since the match is a 409.
    let to_update: Vec<String> = matched.iter().flatten().cloned().collect();
    if !to_update.is_empty() {
        let states = store::states(tx, &ctx.record_table, &to_update, true).await?;
        let gone = to_update
            .iter()
            .any(|id| !states.iter().any(|(s, _, trashed)| s == id && !trashed));
        if gone {
            return Err(ApiError::ConflictWithRecords(
                "A record matched by merge_on was removed during this write; nothing was written."
                    .into(),
                Vec::new(),
            ));
        }
    }

    let mut creates: Vec<(String, Prepared)> = Vec::new();
    let mut updates: Vec<(String, Prepared)> = Vec::new();
    let mut order: Vec<(String, bool)> = Vec::with_capacity(items.len());
    for (prepared, m) in rows.into_iter().zip(matched) {
        match m {
            Some(id) => {
                order.push((id.clone(), false));
                updates.push((id, prepared));
            }
            None => {
                let id = ids::new_tagged(Kind::Record, &ctx.record_table.tag);
                order.push((id.clone(), true));
                creates.push((id, prepared));
            }
        }
    }
    let supplied: Vec<Vec<String>> = updates
        .iter()
        .map(|(_, p)| outbox::supplied_fields(ctx, p))
        .collect();
    let mut outbox = Outbox::open(ctx, items.len());
    let updated_ids: Vec<String> = updates.iter().map(|(id, _)| id.clone()).collect();
    outbox.read_before(tx, &updated_ids).await?;
    place::settle(tx, ctx, user_id, &mut creates, Mode::Create, fetched).await?;
    place::settle(tx, ctx, user_id, &mut updates, Mode::Append, fetched).await?;
    if !creates.is_empty() {
        write::insert(tx, ctx, user_id, &creates).await?;
    }
    if !updates.is_empty() {
        write::update(tx, ctx, &updates).await?;
    }
    let created_ids: Vec<String> = creates.into_iter().map(|(id, _)| id).collect();
    let written = [
        Written::new(RecordEvent::Created, &created_ids),
        Written {
            event: RecordEvent::Updated,
            ids: &updated_ids,
            supplied: &supplied,
        },
    ];
    outbox.written(tx, &written).await?;

    let fields = ctx.read_fields()?;
    let all: Vec<String> = order.iter().map(|(id, _)| id.clone()).collect();
    let records = write::read_back(tx, ctx, &fields, &all, shape, |id| {
        let created = order.iter().any(|(o, c)| o == id && *c);
        vec![("created", Value::Bool(created))]
    })
    .await?;
    let mut out = reply::records_reply(records, &fields.fields, shape);
    out.insert("created_records".into(), json!(created_ids));
    out.insert("updated_records".into(), json!(updated_ids));
    Ok(out)
}
