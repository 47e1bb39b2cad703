//! A list page's reply written as JSON bytes straight from the rows: no
//! `serde_json::Value` tree per record and cell. The bytes are those
//! `reply::records_reply` of `reply::record_json` records would print
//! (serde_json's maps sort their keys, so every object here is written in
//! key order; a key written twice keeps the later value, as a map insert
//! does).

use std::collections::BTreeMap;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio_postgres::Row;

use super::cells::wire;
use super::reply::{Post, ReadField, Shape};
use crate::attachments::shown::{Shown, Style};

/// A reply body that is JSON already.
pub struct JsonBytes(pub Vec<u8>);

impl IntoResponse for JsonBytes {
    fn into_response(self) -> Response {
        ([(header::CONTENT_TYPE, "application/json")], self.0).into_response()
    }
}

/// One key of a record object, in written order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Id,
    CreatedAt,
    UpdatedAt,
    /// The nested `fields` object.
    Fields,
    /// The cell of the read field at this index.
    Cell(usize),
}

/// The keys of every record of the page, sorted, built once per page.
struct Layout<'a> {
    record: Vec<(&'a str, Slot)>,
    /// The `fields` object's keys (empty with `flat`).
    cells: Vec<(&'a str, Slot)>,
}

fn key(f: &ReadField, shape: Shape) -> &str {
    if shape.key_by_id {
        &f.id
    } else {
        &f.name
    }
}

impl<'a> Layout<'a> {
    fn new(fields: &'a [ReadField], shape: Shape) -> Self {
        let mut cells: BTreeMap<&str, Slot> = BTreeMap::new();
        for (i, f) in fields.iter().enumerate() {
            cells.insert(key(f, shape), Slot::Cell(i));
        }
        let mut record = if shape.flat {
            std::mem::take(&mut cells)
        } else {
            BTreeMap::from([("fields", Slot::Fields)])
        };
        // The internal keys are written last and win collisions.
        record.insert("id", Slot::Id);
        record.insert("created_at", Slot::CreatedAt);
        record.insert("updated_at", Slot::UpdatedAt);
        Layout {
            record: record.into_iter().collect(),
            cells: cells.into_iter().collect(),
        }
    }
}

/// Where each read field's cell starts in a page row: after the five
/// internal columns, `wire.columns()` per field.
fn starts(fields: &[ReadField]) -> Vec<usize> {
    let mut at = 5;
    fields
        .iter()
        .map(|f| {
            let s = at;
            at += f.wire.columns();
            s
        })
        .collect()
}

/// Result columns the cells of `fields` take (the bookmark keys follow).
pub fn cell_columns(fields: &[ReadField]) -> usize {
    fields.iter().map(|f| f.wire.columns()).sum()
}

/// A `Value` cell after the field's post-processing (`reply::record_json`).
fn post_json(mut v: Value, field: &ReadField, shape: Shape) -> Value {
    match (&field.post, shape.select_ids, shape.link_display_cap) {
        (Post::Choices(names), false, _) => choice_value(v, names),
        (Post::Link, _, Some(cap)) => {
            if let Value::Array(items) = &mut v {
                for item in items.iter_mut().skip(cap) {
                    item["display"] = Value::Null;
                }
            }
            v
        }
        _ => v,
    }
}

fn choice_value(v: Value, names: &std::collections::HashMap<String, String>) -> Value {
    match v {
        Value::String(id) => Value::String(names.get(&id).cloned().unwrap_or(id)),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|i| choice_value(i, names)).collect())
        }
        other => other,
    }
}

fn write_object(
    out: &mut Vec<u8>,
    slots: &[(&str, Slot)],
    mut each: impl FnMut(&mut Vec<u8>, Slot) -> Result<(), tokio_postgres::Error>,
) -> Result<(), tokio_postgres::Error> {
    out.push(b'{');
    for (n, (k, slot)) in slots.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        wire::write_str(out, k);
        out.push(b':');
        each(out, *slot)?;
    }
    out.push(b'}');
    Ok(())
}

/// The `att_` ids stored in the attachment cells of the first `take` rows
/// (looked up once for the whole page, `attachments::shown`).
pub fn attachment_ids<'r>(
    rows: &'r [Row],
    take: usize,
    fields: &[ReadField],
) -> Result<Vec<&'r str>, tokio_postgres::Error> {
    let starts = starts(fields);
    let mut out = Vec::new();
    for row in rows.iter().take(take) {
        for (i, f) in fields.iter().enumerate() {
            if matches!(f.post, Post::Attachments) {
                if let Some(ids) = row.try_get::<_, Option<Vec<&str>>>(starts[i])? {
                    out.extend(ids);
                }
            }
        }
    }
    Ok(out)
}

/// `{"bookmark"?, <companion>, "records": [...]}` for the first `take`
/// rows of a page read with `fields` (cells from column 5 on); attachment
/// cells are shown from `shown`.
pub fn write(
    rows: &[Row],
    take: usize,
    fields: &[ReadField],
    shape: Shape,
    bookmark: Option<&str>,
    shown: &Shown,
) -> Result<Vec<u8>, tokio_postgres::Error> {
    let layout = Layout::new(fields, shape);
    let starts = starts(fields);
    let mut out: Vec<u8> = Vec::with_capacity(1024 + take * 160 * (fields.len() + 3));
    out.push(b'{');
    if let Some(b) = bookmark {
        out.extend_from_slice(b"\"bookmark\":");
        wire::write_str(&mut out, b);
        out.push(b',');
    }
    // The companion map: {name: id} (or {id: name} with key_by=id).
    let mut companion: BTreeMap<&str, &str> = BTreeMap::new();
    for f in fields {
        if shape.key_by_id {
            companion.insert(&f.id, &f.name);
        } else {
            companion.insert(&f.name, &f.id);
        }
    }
    out.extend_from_slice(if shape.key_by_id {
        b"\"field_names\":{"
    } else {
        b"\"field_ids\":{"
    });
    for (n, (k, v)) in companion.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        wire::write_str(&mut out, k);
        out.push(b':');
        wire::write_str(&mut out, v);
    }
    out.extend_from_slice(b"},\"records\":[");
    for (r, row) in rows.iter().take(take).enumerate() {
        if r > 0 {
            out.push(b',');
        }
        let cell = |out: &mut Vec<u8>, i: usize| -> Result<(), tokio_postgres::Error> {
            let field = &fields[i];
            if matches!(field.post, Post::Attachments) {
                let ids = row.try_get::<_, Option<Vec<&str>>>(starts[i])?;
                let cell = shown.cell(ids.into_iter().flatten(), Style::Reply);
                // Writing a `Value` into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut *out, &cell);
                return Ok(());
            }
            let names = match (&field.post, shape.select_ids) {
                (Post::Choices(names), false) => Some(names),
                _ => None,
            };
            let cap = match field.post {
                Post::Link => shape.link_display_cap,
                _ => None,
            };
            let json = |v: Value| post_json(v, field, shape);
            wire::write_cell(out, row, starts[i], field.wire, names, cap, &json)
        };
        write_object(&mut out, &layout.record, |out, slot| match slot {
            Slot::Id => {
                wire::write_str(out, row.try_get::<_, &str>(0)?);
                Ok(())
            }
            Slot::CreatedAt => wire::write_stamp(out, row, 1),
            Slot::UpdatedAt => wire::write_stamp(out, row, 2),
            Slot::Fields => write_object(out, &layout.cells, |out, s| match s {
                Slot::Cell(i) => cell(out, i),
                _ => Ok(()),
            }),
            Slot::Cell(i) => cell(out, i),
        })?;
    }
    out.extend_from_slice(b"]}");
    Ok(out)
}
