//! How records are shaped for a reply: cells keyed by name or id, spread
//! onto the record with `flat`, select cells as names or ids, and the
//! companion map covering exactly the fields carried.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::cells::wire::Wire;
use super::store::StoredRecord;
use crate::error::{ApiError, ApiResult};
use crate::json::format_ts;

/// Reply options shared by reads and writes (`cell_format`, `key_by`, `flat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    pub key_by_id: bool,
    pub flat: bool,
    pub select_ids: bool,
    /// GET only: linked records per link cell that carry display text.
    pub link_display_cap: Option<usize>,
}

/// A reply option as sent: a query string or a JSON body value.
pub enum Raw<'a> {
    Text(&'a str),
    Json(&'a Value),
}

impl<'a> Raw<'a> {
    fn text(&self) -> Option<String> {
        match self {
            Raw::Text(s) => Some((*s).to_owned()),
            Raw::Json(Value::String(s)) => Some(s.clone()),
            Raw::Json(Value::Bool(b)) => Some(b.to_string()),
            Raw::Json(Value::Number(n)) => Some(n.to_string()),
            Raw::Json(_) => None,
        }
    }
}

impl Shape {
    /// Reads the three options through `get` (absent = default); 400 on an
    /// unknown value.
    pub fn parse<'a>(get: impl Fn(&str) -> Option<Raw<'a>>) -> ApiResult<Shape> {
        let mut shape = Shape::default();
        if let Some(raw) = get("cell_format") {
            shape.select_ids = match raw.text().as_deref() {
                Some("names") => false,
                Some("ids") => true,
                _ => {
                    return Err(ApiError::bad_request(
                        "cell_format must be 'names' or 'ids'.",
                    ))
                }
            };
        }
        if let Some(raw) = get("key_by") {
            shape.key_by_id = match raw.text().as_deref() {
                Some("name") => false,
                Some("id") => true,
                _ => return Err(ApiError::bad_request("key_by must be 'name' or 'id'.")),
            };
        }
        if let Some(raw) = get("flat") {
            shape.flat = match raw.text().as_deref() {
                Some("true" | "1") => true,
                Some("false" | "0") => false,
                _ => return Err(ApiError::bad_request("flat must be true, false, 1 or 0.")),
            };
        }
        Ok(shape)
    }

    pub fn from_query(query: &HashMap<String, String>) -> ApiResult<Shape> {
        Shape::parse(|k| query.get(k).map(|v| Raw::Text(v.as_str())))
    }
}

/// How a read cell's JSON becomes the reply value.
#[derive(Debug, Clone)]
pub enum Post {
    /// As read.
    Plain,
    /// A choice id (or list of ids) shown by name unless `cell_format=ids`;
    /// the map is id -> name.
    Choices(HashMap<String, String>),
    /// A link cell `[{id, display}]`; display text beyond the cap is null.
    Link,
    /// An attachment cell: stored `att_` ids, shown as objects by
    /// `attachments::shown` before the reply is shaped.
    Attachments,
}

/// One field carried in a reply: its id, name, and how its cell reads.
#[derive(Debug, Clone)]
pub struct ReadField {
    pub id: String,
    pub name: String,
    /// SQL producing the cell (row alias `r`): `jsonb`, or on a list page
    /// the plain column(s) `wire` names.
    pub expr: String,
    pub post: Post,
    pub wire: Wire,
}

fn choice_value(v: Value, names: &HashMap<String, String>) -> Value {
    match v {
        Value::String(id) => Value::String(names.get(&id).cloned().unwrap_or(id)),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|i| choice_value(i, names)).collect())
        }
        other => other,
    }
}

/// The record as a reply object. `extra` keys (e.g. `deleted_at`,
/// `created`) are written after the internal ones.
pub fn record_json(
    rec: StoredRecord,
    fields: &[ReadField],
    shape: Shape,
    extra: &[(&str, Value)],
) -> Value {
    let mut cells = Map::new();
    for (field, cell) in fields.iter().zip(rec.cells) {
        let mut v = cell.unwrap_or(Value::Null);
        match (&field.post, shape.select_ids, shape.link_display_cap) {
            (Post::Choices(names), false, _) => v = choice_value(v, names),
            (Post::Link, _, Some(cap)) => {
                if let Value::Array(items) = &mut v {
                    for item in items.iter_mut().skip(cap) {
                        item["display"] = Value::Null;
                    }
                }
            }
            _ => {}
        }
        let key = if shape.key_by_id {
            &field.id
        } else {
            &field.name
        };
        cells.insert(key.clone(), v);
    }
    let mut out = Map::new();
    if shape.flat {
        // Cells first; the internal keys are written last and win collisions.
        out = cells;
    } else {
        out.insert("id".into(), Value::String(rec.id.clone()));
        out.insert("fields".into(), Value::Object(cells));
    }
    out.insert("id".into(), Value::String(rec.id.clone()));
    out.insert("created_at".into(), format_ts(&rec.created_at).into());
    out.insert("updated_at".into(), format_ts(&rec.updated_at).into());
    for (k, v) in extra {
        out.insert((*k).to_owned(), v.clone());
    }
    Value::Object(out)
}

/// `("field_ids", {name: id})` or, with `key_by=id`, `("field_names", {id: name})`.
pub fn companion(fields: &[ReadField], shape: Shape) -> (&'static str, Value) {
    let mut map = Map::new();
    for f in fields {
        if shape.key_by_id {
            map.insert(f.id.clone(), Value::String(f.name.clone()));
        } else {
            map.insert(f.name.clone(), Value::String(f.id.clone()));
        }
    }
    let key = if shape.key_by_id {
        "field_names"
    } else {
        "field_ids"
    };
    (key, Value::Object(map))
}

/// `{records, <companion>}`.
pub fn records_reply(
    records: Vec<Value>,
    fields: &[ReadField],
    shape: Shape,
) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("records".into(), Value::Array(records));
    let (k, v) = companion(fields, shape);
    out.insert(k.into(), v);
    out
}
