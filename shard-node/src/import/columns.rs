//! A run's plan checked against the file and the target table, and every
//! cell converted, before anything is written (part B: "A run validates
//! plan and every cell before writing").
//!
//! [`resolve`] turns the plan into the imported columns, each with the
//! field it writes: an existing field (`map`) or a field still to be made
//! (`create`), both as a [`FieldRow`] as the write path sees them. A field
//! to be made carries a stand-in id until it exists ([`stand_in_id`]);
//! select choices the file needs are added to the field's settings here,
//! with their ids minted now, so the converted cells already hold the ids
//! the created (or updated) field will have.
//!
//! [`convert`] then runs every row through the record write path's own
//! conversion (`records::cells::write::prepare`).

use std::collections::{HashMap, HashSet};

use chrono::Utc;
use cluster_protocol::ids;
use serde_json::{json, Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::fields::name_taken;
use crate::fields::options::{self, scalar, select};
use crate::import::convert::{cell_json, select_values};
use crate::import::plan::{importable, not_importable, Action, Entry};
use crate::import::sheet::Sheet;
use crate::records::cells::write::{prepare, Prepared};
use crate::schema::{Costume, DatabaseSchema, Family, FieldRow, TableSchema};

/// Most distinct values one select column may bring (part C).
pub const MAX_SELECT_VALUES: usize = 100;
/// Longest cell value quoted in a refusal.
const QUOTE_CHARS: usize = 80;

/// What an imported column writes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A new field, made by the run with these settings.
    Create,
    /// An existing field; `Some(options)` when choices must be added to it
    /// first (the stored settings with the longer choice list).
    Map {
        new_options: Option<Map<String, Value>>,
    },
}

/// One imported column.
#[derive(Debug, Clone)]
pub struct Column {
    pub index: usize,
    pub header: String,
    /// The field as the write sees it: an existing field's row (with any
    /// added choices), or the field to make under its stand-in id.
    pub field: FieldRow,
    pub source: Source,
}

/// The stand-in id of the field a `create` entry for column `index` makes.
pub fn stand_in_id(index: usize) -> String {
    format!("import_column_{index}")
}

/// Checks the plan against the file and, for an existing table, its
/// fields; returns the imported columns in plan order.
pub fn resolve(
    table: Option<&TableSchema>,
    plan: &[Entry],
    sheet: &Sheet,
) -> ApiResult<Vec<Column>> {
    let mut columns: Vec<Column> = Vec::new();
    for (i, entry) in plan.iter().enumerate() {
        let at = format!("plan[{i}]");
        let index = entry.column_index;
        let Some(header) = sheet.headers.get(index) else {
            return Err(ApiError::bad_request(format!(
                "{at}.columnIndex is {index}, but the file has {} columns (0 to {}).",
                sheet.headers.len(),
                sheet.headers.len().saturating_sub(1)
            )));
        };
        if let Some(sent) = &entry.source_header {
            if sent.trim() != header {
                return Err(ApiError::bad_request(format!(
                    "{at}.sourceHeader is '{sent}', but column {index} of the file is headed '{header}'."
                )));
            }
        }
        let (field, source) = match &entry.action {
            Action::Skip => continue,
            Action::Map { target_field_id } => {
                let Some(table) = table else {
                    return Err(ApiError::bad_request(format!(
                        "{at}.action maps onto a field, but a new_table target has no fields; use create."
                    )));
                };
                let field = table.field(target_field_id).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "{at}.action.targetFieldId '{target_field_id}' is not a field of table '{}'.",
                        table.name
                    ))
                })?;
                if !importable(field.costume) {
                    return Err(not_importable(
                        &format!("{at}.action.targetFieldId ('{}')", field.name),
                        field.costume,
                    ));
                }
                if let Some(other) = columns.iter().find(|c| c.field.id == field.id) {
                    return Err(ApiError::bad_request(format!(
                        "{at} maps column {index} onto field '{}', which column {} already fills.",
                        field.name, other.index
                    )));
                }
                (field.clone(), Source::Map { new_options: None })
            }
            Action::Create {
                name,
                costume,
                options,
            } => {
                if table.and_then(|t| t.field_named(name)).is_some() {
                    return Err(name_taken(name));
                }
                if let Some(other) = columns
                    .iter()
                    .find(|c| c.source == Source::Create && c.field.name == *name)
                {
                    return Err(ApiError::bad_request(format!(
                        "{at} creates a field named '{name}', as column {} already does.",
                        other.index
                    )));
                }
                let field = planned_field(&at, index, name, *costume, options)?;
                (field, Source::Create)
            }
        };
        columns.push(Column {
            index,
            header: header.clone(),
            field,
            source,
        });
    }
    if columns.is_empty() {
        return Err(ApiError::bad_request(
            "The plan imports no column: give at least one column a map or create action.",
        ));
    }
    for column in &mut columns {
        if column.field.costume.family() == Family::Select {
            add_choices(column, sheet)?;
        }
    }
    Ok(columns)
}

/// The field a `create` entry makes, with its settings checked as a field
/// create checks them.
fn planned_field(
    at: &str,
    index: usize,
    name: &str,
    costume: Costume,
    sent: &Map<String, Value>,
) -> ApiResult<FieldRow> {
    let in_plan = |e: ApiError| match e {
        ApiError::BadRequest(m) => ApiError::BadRequest(format!("{at}.action.options: {m}")),
        other => other,
    };
    options::check_known_keys(sent, None).map_err(in_plan)?;
    let mut opts = scalar::normalize(sent.clone(), None).map_err(in_plan)?;
    if costume.family() == Family::Select {
        opts = select::normalize(opts, None).map_err(in_plan)?;
    }
    let sql_type = costume
        .column_type(scalar::include_time(&opts))
        .ok_or_else(|| anyhow::anyhow!("{costume:?} has no column type"))?;
    Ok(FieldRow {
        id: stand_in_id(index),
        table_id: String::new(),
        name: name.to_owned(),
        costume,
        options: opts,
        position: 0,
        sql_type: Some(sql_type.to_owned()),
        created_at: Utc::now(),
    })
}

/// Adds the select values of the column that are not yet choices (by name
/// or id) to its field, with minted ids; existing choices keep their ids
/// and colours. More than [`MAX_SELECT_VALUES`] distinct values is refused.
fn add_choices(column: &mut Column, sheet: &Sheet) -> ApiResult<()> {
    let f = &column.field;
    let mut distinct: Vec<&str> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for row in &sheet.rows {
        for v in select_values(f.costume, &row[column.index]) {
            if seen.insert(v) {
                distinct.push(v);
            }
        }
    }
    if distinct.len() > MAX_SELECT_VALUES {
        return Err(ApiError::bad_request(format!(
            "Column {} ('{}') has {} distinct values; a select column may bring at most \
             {MAX_SELECT_VALUES}. Import it as text instead.",
            column.index,
            column.header,
            distinct.len()
        )));
    }
    let known: HashSet<String> = f
        .choices()
        .into_iter()
        .flat_map(|(id, name)| [id, name])
        .collect();
    let new: Vec<&str> = distinct
        .into_iter()
        .filter(|v| !known.contains(*v))
        .collect();
    if new.is_empty() {
        return Ok(());
    }
    let mut list = f
        .options
        .get("choices")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for name in new {
        list.push(json!({
            "id": ids::random_token(select::CHOICE_ID_LEN),
            "name": name,
            "color": Value::Null,
        }));
    }
    let list = select::normalize_choices(Some(&Value::Array(list))).map_err(|e| match e {
        ApiError::BadRequest(m) => ApiError::BadRequest(format!(
            "Column {} ('{}') cannot become select choices: {m}",
            column.index, column.header
        )),
        other => other,
    })?;
    let mut options = f.options.clone();
    options.insert("choices".into(), Value::Array(list));
    column.field.options = options.clone();
    if let Source::Map { new_options } = &mut column.source {
        *new_options = Some(options);
    }
    Ok(())
}

/// The table as the conversion sees it: the imported columns' fields only.
fn planned_table(
    table: Option<&TableSchema>,
    database_id: &str,
    columns: &[Column],
) -> TableSchema {
    TableSchema {
        id: table.map(|t| t.id.clone()).unwrap_or_default(),
        database_id: database_id.to_owned(),
        name: table.map(|t| t.name.clone()).unwrap_or_default(),
        position: 0,
        display_field_id: None,
        created_at: Utc::now(),
        updated_at: Utc::now(),
        fields: columns.iter().map(|c| c.field.clone()).collect(),
    }
}

/// Every row's cells converted by the record write path (keyed by the
/// columns' field ids, stand-in ids for fields still to be made; blank
/// cells left out). The first cell that does not fit is a 400 naming its
/// data row, column and value; so is a value repeated in a unique field.
pub fn convert(
    schema: &DatabaseSchema,
    table: Option<&TableSchema>,
    columns: &[Column],
    sheet: &Sheet,
    env: &filter_lang::Env,
) -> ApiResult<Vec<Prepared>> {
    let planned = planned_table(table, &schema.database_id, columns);
    let mut out = Vec::with_capacity(sheet.rows.len());
    for (r, row) in sheet.rows.iter().enumerate() {
        let mut cells = Map::with_capacity(columns.len());
        for c in columns {
            let v = cell_json(&c.field, &row[c.index]);
            if !v.is_null() {
                cells.insert(c.field.id.clone(), v);
            }
        }
        match prepare(schema, &planned, &cells, env) {
            Ok(p) => out.push(p),
            Err(e) => return Err(culprit(schema, &planned, columns, row, r, env).unwrap_or(e)),
        }
    }
    refuse_repeats(columns, sheet, &out)?;
    Ok(out)
}

/// The refusal naming the first cell of `row` that does not convert.
fn culprit(
    schema: &DatabaseSchema,
    planned: &TableSchema,
    columns: &[Column],
    row: &[String],
    r: usize,
    env: &filter_lang::Env,
) -> Option<ApiError> {
    columns.iter().find_map(|c| {
        let v = cell_json(&c.field, &row[c.index]);
        let cells = Map::from_iter([(c.field.id.clone(), v)]);
        match prepare(schema, planned, &cells, env) {
            Err(ApiError::BadRequest(m)) => Some(ApiError::bad_request(format!(
                "Data row {}, column {} ('{}'): the value '{}' cannot be imported. {m}",
                r + 1,
                c.index,
                c.header,
                quote(&row[c.index])
            ))),
            Err(other) => Some(other),
            Ok(_) => None,
        }
    })
}

fn quote(v: &str) -> String {
    let v = v.trim();
    if v.chars().count() <= QUOTE_CHARS {
        v.to_owned()
    } else {
        let head: String = v.chars().take(QUOTE_CHARS).collect();
        format!("{head}...")
    }
}

/// A value repeated within the file in a field that must be unique
/// (the clash would otherwise only show mid-write).
fn refuse_repeats(columns: &[Column], sheet: &Sheet, rows: &[Prepared]) -> ApiResult<()> {
    for c in columns {
        let f = &c.field;
        if !(f.costume.supports_unique() && scalar::wants_unique(&f.options)) {
            continue;
        }
        let mut first: HashMap<String, usize> = HashMap::new();
        for (r, p) in rows.iter().enumerate() {
            let Some(v) = p.columns.get(&f.id).filter(|v| !v.is_null()) else {
                continue;
            };
            if let Some(earlier) = first.insert(v.to_string(), r) {
                return Err(ApiError::bad_request(format!(
                    "Data rows {} and {} both hold '{}' in column {} ('{}'), but field '{}' \
                     must be unique.",
                    earlier + 1,
                    r + 1,
                    quote(&sheet.rows[r][c.index]),
                    c.index,
                    c.header,
                    f.name
                )));
            }
        }
    }
    Ok(())
}

/// `prepared` with stand-in ids replaced by the ids of the made fields.
pub fn rekey(prepared: Vec<Prepared>, made: &HashMap<String, String>) -> Vec<Prepared> {
    if made.is_empty() {
        return prepared;
    }
    prepared
        .into_iter()
        .map(|p| Prepared {
            columns: p
                .columns
                .into_iter()
                .map(|(k, v)| (made.get(&k).cloned().unwrap_or(k), v))
                .collect(),
            links: p.links,
            attachments: p.attachments,
            index: p.index,
        })
        .collect()
}

#[cfg(test)]
#[path = "columns_tests.rs"]
mod tests;
