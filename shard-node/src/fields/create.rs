//! `POST /api/tables/{id}/fields`: validate, then in ONE structural
//! transaction insert the field row(s), run the DDL (column, unique index,
//! generated column, connector), pick the display field, bump the database.

use axum::extract::{Path, State};
use axum::Json;
use chrono::Utc;
use cluster_protocol::ids::{self, Kind};
use serde_json::{Map, Value};

use crate::auth::Editor;
use crate::catalog::placements::Need;
use crate::catalog::{self, tables};
use crate::db::{fenced_transaction_on, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::fields::options::{self, formula, link, lookup_rollup, scalar, select};
use crate::fields::{field_reply, filter_env, formulas, name_taken, settle_button, string_member};
use crate::http::body::JsonObject;
use crate::schema::costume::{unknown_type_message, Requested};
use crate::schema::{structural, Costume, Family, FieldRow, TableSchema};
use crate::state::AppState;
use crate::tenant_schema;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let new = parse(&body)?;
    let write = create(&state, &access.database_id, access.user_id(), &id, new);
    field_reply(&state, DbOp::CreateField, write).await
}

/// A create request that passed the shape checks.
pub struct NewField {
    /// Trimmed; `None` only for a lookup/rollup (derived).
    pub name: Option<String>,
    pub requested: Requested,
    pub options: Map<String, Value>,
}

pub fn parse(body: &Map<String, Value>) -> ApiResult<NewField> {
    let requested = match string_member(body, "type")? {
        None => return Err(ApiError::bad_request("type is required.")),
        Some("") => return Err(ApiError::bad_request("type must not be blank.")),
        Some(t) => {
            Requested::parse(t).ok_or_else(|| ApiError::bad_request(unknown_type_message(t)))?
        }
    };
    let derived_allowed = matches!(requested.family(), Family::Lookup | Family::Rollup);
    let name = match body.get("name") {
        None | Some(Value::Null) if derived_allowed => None,
        _ => match string_member(body, "name")? {
            None => return Err(ApiError::bad_request("name is required.")),
            Some(n) if n.trim().is_empty() && derived_allowed => None,
            Some(n) if n.trim().is_empty() => {
                return Err(ApiError::bad_request("name must not be blank."))
            }
            Some(n) => Some(n.trim().to_owned()),
        },
    };
    let options = options::options_of(body)?.unwrap_or_default();
    options::check_known_keys(&options, None)?;
    Ok(NewField {
        name,
        requested,
        options,
    })
}

/// Creates the field; returns it as the API shows it (with operators).
pub async fn create(
    state: &AppState,
    database_id: &str,
    user_id: &str,
    table_id: &str,
    new: NewField,
) -> ApiResult<Value> {
    let mut client = state.db.client_for(database_id).await?;
    let field_id = fenced_transaction_on(&mut client, database_id, Need::Structure, async |tx| {
        let tag = structural::begin(tx, database_id).await?;
        let schema = state.schemas.get_locked(tx, database_id).await?;
        let table = schema.table(table_id).ok_or(ApiError::NotFound)?;
        // The owner's quota (`databases.max_fields_per_table`) or the default.
        let cap = catalog::databases::limits(tx, database_id, 0)
            .await?
            .fields_per_table;
        check_cap(table, 1, cap)?;
        let field_id = ids::new_tagged(Kind::Field, &tag);
        let position = next_position(table);
        let env = filter_env(&schema)?;
        let family = new.requested.family();
        if let Some(name) = &new.name {
            if table.field_named(name).is_some() {
                return Err(name_taken(name));
            }
        }
        let mut row = FieldRow {
            id: field_id.clone(),
            table_id: table.id.clone(),
            name: new.name.clone().unwrap_or_default(),
            costume: Costume::SingleLineText,
            options: Map::new(),
            position,
            sql_type: None,
            created_at: Utc::now(),
        };

        match (family, new.requested) {
            (Family::Scalar | Family::Attachment | Family::Select, Requested::Stored(costume)) => {
                let mut opts = scalar::normalize(new.options, None)?;
                if family == Family::Select {
                    opts = select::normalize(opts, None)?;
                }
                let sql_type = costume
                    .column_type(scalar::include_time(&opts))
                    .ok_or_else(|| anyhow::anyhow!("{costume:?} has no column type"))?;
                row.costume = costume;
                tenant_schema::add_column(tx, database_id, table_id, &field_id, sql_type).await?;
                if costume.supports_unique() && scalar::wants_unique(&opts) {
                    tenant_schema::create_unique_index(
                        tx,
                        database_id,
                        table_id,
                        &field_id,
                        sql_type,
                    )
                    .await??;
                }
                row.options = opts;
                row.sql_type = Some(sql_type.to_owned());
            }
            (Family::Button, _) => {
                row.options = settle_button(tx, database_id, &new.options).await?;
                row.costume = Costume::Button;
            }
            (Family::Formula, _) => {
                let expression = formula::expression(&new.options)?.to_owned();
                let compiled = formula::compile(&expression, table, None)?;
                row.costume = formula::costume_of(compiled.result);
                row.options = formula::settle(Map::new(), new.options, &compiled, false)?;
                let sql_type = compiled.result.sql_type();
                formulas::store_generated(
                    tx,
                    database_id,
                    table_id,
                    &field_id,
                    sql_type,
                    &compiled.sql,
                    &row.name,
                )
                .await?;
                row.sql_type = Some(sql_type.to_owned());
            }
            (Family::Lookup | Family::Rollup, _) => {
                let settled = lookup_rollup::settle(family, &new.options, &schema, table, &env)?;
                row.costume = settled.costume;
                row.options = settled.options;
                if new.name.is_none() {
                    row.name = lookup_rollup::dedupe(table, &settled.derived_name);
                }
            }
            (Family::Link, _) => {
                let mirror_id = ids::new_tagged(Kind::Field, &tag);
                let plan = link::plan_create(
                    new.options,
                    &schema,
                    table,
                    &tag,
                    &field_id,
                    &row.name,
                    &mirror_id,
                    &env,
                )?;
                let target = schema
                    .table(&plan.target_table_id)
                    .ok_or_else(|| anyhow::anyhow!("link target vanished"))?;
                if target.id == table.id {
                    check_cap(table, 2, cap)?;
                } else {
                    check_cap(target, 1, cap)?;
                }
                row.costume = Costume::Link;
                row.options = plan.forward;
                let mirror = FieldRow {
                    id: mirror_id,
                    table_id: target.id.clone(),
                    name: plan.mirror_name,
                    costume: Costume::Link,
                    options: plan.mirror,
                    position: if target.id == table.id {
                        position + 1
                    } else {
                        next_position(target)
                    },
                    sql_type: None,
                    created_at: Utc::now(),
                };
                tenant_schema::create_connector(tx, database_id, &field_id, &table.id, &target.id)
                    .await?;
                catalog::fields::insert(tx, database_id, &row).await?;
                catalog::fields::insert(tx, database_id, &mirror).await?;
            }
            (Family::Scalar | Family::Attachment | Family::Select, Requested::Door(_)) => {
                return Err(anyhow::anyhow!("a door resolved to a stored family").into())
            }
        }
        lookup_rollup::check_expansion(&schema, std::slice::from_ref(&row))?;
        if row.costume != Costume::Link {
            catalog::fields::insert(tx, database_id, &row).await?;
        }
        if table.display_field_id.is_none() && row.costume.can_name_record() {
            tables::set_display_field(tx, table_id, Some(&field_id)).await?;
        }
        structural::finish(tx, database_id, user_id).await?;
        Ok(field_id)
    })
    .await?;

    let schema = state.schemas.get(&mut client, database_id).await?;
    let field = schema
        .field(&field_id)
        .ok_or_else(|| anyhow::anyhow!("created field not in the reloaded schema"))?;
    Ok(field.to_json(Some(schema.operators(field))))
}

/// 400 when `adding` more fields would pass `cap` (fields per table).
fn check_cap(table: &TableSchema, adding: i64, cap: i64) -> ApiResult<()> {
    if table.fields.len() as i64 + adding > cap {
        return Err(ApiError::bad_request(format!(
            "A table can have at most {cap} fields ('{}' is full).",
            table.name
        )));
    }
    Ok(())
}

fn next_position(table: &TableSchema) -> i64 {
    table.fields.iter().map(|f| f.position).max().unwrap_or(-1) + 1
}
