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
//! A [`Converter`] then runs a row through the record write path's own
//! conversion (`records::cells::write::prepare`); [`check`] converts every
//! row once, keeping nothing but what [`repeats`] needs, and the run
//! converts them again batch by batch as it writes.

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
    sheet: &mut Sheet,
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
    let selects: Vec<usize> = (0..columns.len())
        .filter(|&i| columns[i].field.costume.family() == Family::Select)
        .collect();
    if !selects.is_empty() {
        let values = select_values_of(&columns, &selects, sheet)?;
        for (&i, values) in selects.iter().zip(values) {
            add_choices(&mut columns[i], values)?;
        }
    }
    Ok(columns)
}

/// The distinct select values of each of `selects` (indexes into
/// `columns`), in first-seen order: one pass, refused as soon as a column
/// brings more than [`MAX_SELECT_VALUES`].
fn select_values_of(
    columns: &[Column],
    selects: &[usize],
    sheet: &mut Sheet,
) -> ApiResult<Vec<Vec<String>>> {
    let mut values: Vec<Vec<String>> = vec![Vec::new(); selects.len()];
    let mut seen: Vec<HashSet<String>> = vec![HashSet::new(); selects.len()];
    sheet.for_each_row(|_, row| {
        for (k, &i) in selects.iter().enumerate() {
            let c = &columns[i];
            for v in select_values(c.field.costume, &row[c.index]) {
                if !seen[k].contains(v) {
                    if values[k].len() == MAX_SELECT_VALUES {
                        return Err(ApiError::bad_request(format!(
                            "Column {} ('{}') has {} distinct values or more; a select column \
                             may bring at most {MAX_SELECT_VALUES}. Import it as text instead.",
                            c.index,
                            c.header,
                            MAX_SELECT_VALUES + 1
                        )));
                    }
                    seen[k].insert(v.to_owned());
                    values[k].push(v.to_owned());
                }
            }
        }
        Ok(())
    })?;
    Ok(values)
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

/// Adds the column's select values that are not yet choices (by name or
/// id) to its field, with minted ids; existing choices keep their ids and
/// colours.
fn add_choices(column: &mut Column, distinct: Vec<String>) -> ApiResult<()> {
    let f = &column.field;
    let known: HashSet<String> = f
        .choices()
        .into_iter()
        .flat_map(|(id, name)| [id, name])
        .collect();
    let new: Vec<String> = distinct
        .into_iter()
        .filter(|v| !known.contains(v))
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

/// Converts rows of the file as the record write path does (keyed by the
/// columns' field ids, stand-in ids for fields still to be made; blank
/// cells left out).
pub struct Converter<'a> {
    schema: &'a DatabaseSchema,
    planned: TableSchema,
    pub columns: &'a [Column],
    env: &'a filter_lang::Env,
}

impl<'a> Converter<'a> {
    pub fn new(
        schema: &'a DatabaseSchema,
        table: Option<&TableSchema>,
        columns: &'a [Column],
        env: &'a filter_lang::Env,
    ) -> Converter<'a> {
        Converter {
            schema,
            planned: planned_table(table, &schema.database_id, columns),
            columns,
            env,
        }
    }

    /// Data row `r`; the first cell that does not fit is a 400 naming its
    /// data row, column and value.
    pub fn row(&self, r: usize, row: &[String]) -> ApiResult<Prepared> {
        let mut cells = Map::with_capacity(self.columns.len());
        for c in self.columns {
            let v = cell_json(&c.field, &row[c.index]);
            if !v.is_null() {
                cells.insert(c.field.id.clone(), v);
            }
        }
        prepare(self.schema, &self.planned, &cells, self.env)
            .map_err(|e| self.culprit(row, r).unwrap_or(e))
    }

    /// The value column `c` of `row` converts to (null when blank).
    pub fn value(&self, c: &Column, row: &[String]) -> ApiResult<Value> {
        let v = cell_json(&c.field, &row[c.index]);
        if v.is_null() {
            return Ok(v);
        }
        let cells = Map::from_iter([(c.field.id.clone(), v)]);
        let p = prepare(self.schema, &self.planned, &cells, self.env)?;
        Ok(p.columns.get(&c.field.id).cloned().unwrap_or(Value::Null))
    }

    /// The refusal naming the first cell of `row` that does not convert.
    fn culprit(&self, row: &[String], r: usize) -> Option<ApiError> {
        self.columns.iter().find_map(|c| {
            let v = cell_json(&c.field, &row[c.index]);
            let cells = Map::from_iter([(c.field.id.clone(), v)]);
            match prepare(self.schema, &self.planned, &cells, self.env) {
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
}

pub fn quote(v: &str) -> String {
    let v = v.trim();
    if v.chars().count() <= QUOTE_CHARS {
        v.to_owned()
    } else {
        let head: String = v.chars().take(QUOTE_CHARS).collect();
        format!("{head}...")
    }
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
