//! `POST /api/tables/{id}/records/{rid}/press`: `{field_id}` names a button
//! field of the table (id or exact name; another costume is 400). The
//! record must be live (404 otherwise). The record is never changed.
//!
//! * A `link` button replies `{action:'link', url}`: the `url_template` with
//!   each `{Field Name}` (or `{fld_...}`) placeholder replaced by the
//!   URL-encoded text of that cell as the record reads now (lists joined
//!   with `, `, link cells by display text, unset cells empty). A
//!   placeholder naming no field is left as written.
//! * A `webhook` button enqueues one `button.pressed` delivery for its
//!   webhook (`outbox::button_pressed`, in a transaction of its own) and
//!   replies `{action:'webhook', delivered:true, webhook_id}`; 404 when the
//!   webhook is gone.
//!
//! The button's `condition` is not evaluated here (the spec gives it no
//! server-side meaning on press).

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Map, Value};

use super::cells::read;
use super::cells::write::resolve;
use super::reply::{self, Shape};
use super::table::RecordTable;
use super::{store, write};
use crate::auth::Held;
use crate::auth::{Access, Editor};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::http::body::JsonObject;
use crate::schema::{Family, TableSchema};
use crate::state::AppState;
use crate::webhooks::outbox;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path((id, rid)): Path<(String, String)>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let field_ref = match body.get("field_id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err(ApiError::bad_request("field_id is required.")),
    };
    let db = &state.db;
    let reply = db
        .measured(DbOp::PressButton, async {
            let mut client = db.client_for(&access.database_id).await?;
            let schema = state.schemas.get(&mut client, &access.database_id).await?;
            let rt = RecordTable::from_schema(&schema, &id)?;
            let table = schema.table(&id).ok_or(ApiError::NotFound)?;
            let button = resolve(table, &field_ref)?;
            if button.costume.family() != Family::Button {
                return Err(ApiError::bad_request(format!(
                    "Field '{}' is not a button.",
                    button.name
                )));
            }
            let action = button.option_str("action").unwrap_or("link");
            if action == "webhook" {
                let field_id = button.id.clone();
                drop(client);
                return press_webhook(&state, &access, &id, &rid, &field_id).await;
            }
            let template = button.option_str("url_template").unwrap_or_default();
            let (ids, _) = placeholders(table, template);
            let read = read::read_set(&schema, table, Some(&ids));
            let fields = &read.fields;
            let rec = store::by_ids(
                &*client,
                &rt,
                &read.exprs(),
                &read.values,
                std::slice::from_ref(&rid),
            )
            .await?
            .into_iter()
            .find(|r| r.deleted_at.is_none())
            .ok_or(ApiError::NotFound)?;
            let shape = Shape {
                key_by_id: true,
                ..Shape::default()
            };
            let cells = reply::record_json(rec, fields, shape, &[]);
            let url = fill(table, template, &cells["fields"]);
            Ok(json!({"action": "link", "url": url}))
        })
        .await?;
    Ok(Json(reply))
}

/// A webhook button's press: one `button.pressed` delivery, enqueued in
/// its own transaction; the record is not changed.
async fn press_webhook(
    state: &AppState,
    access: &Access,
    table_id: &str,
    record_id: &str,
    field_id: &str,
) -> ApiResult<Value> {
    write::in_transaction(
        state,
        DbOp::PressButton,
        (&access.database_id, table_id, Held::Checked),
        1,
        async |tx, ctx| {
            let button = ctx.table()?.field(field_id).ok_or(ApiError::NotFound)?;
            let webhook_id = button
                .option_str("webhook_id")
                .filter(|w| !w.is_empty())
                .ok_or(ApiError::NotFound)?;
            outbox::button_pressed(tx, ctx, button, record_id, webhook_id, access.user_id())
                .await?;
            Ok(json!({"action": "webhook", "delivered": true, "webhook_id": webhook_id}))
        },
    )
    .await
}

/// The field a placeholder's inner text names: an id first, then the exact
/// name.
fn placeholder_field<'a>(table: &'a TableSchema, inner: &str) -> Option<&'a str> {
    table
        .field(inner)
        .or_else(|| table.fields.iter().find(|f| f.name == inner))
        .map(|f| f.id.as_str())
}

/// A placeholder's (start, end, field id or None) in a template.
type Span = (usize, usize, Option<String>);

/// The `{...}` spans of a template: the field ids they name (each once),
/// and the spans as (start, end, field id or None).
fn placeholders(table: &TableSchema, template: &str) -> (Vec<String>, Vec<Span>) {
    let mut ids: Vec<String> = Vec::new();
    let mut spans = Vec::new();
    let mut at = 0;
    while let Some(open) = template[at..].find('{').map(|i| i + at) {
        let Some(close) = template[open + 1..].find('}').map(|i| i + open + 1) else {
            break;
        };
        let id = placeholder_field(table, &template[open + 1..close]).map(str::to_owned);
        if let Some(id) = &id {
            if !ids.contains(id) {
                ids.push(id.clone());
            }
        }
        spans.push((open, close + 1, id));
        at = close + 1;
    }
    (ids, spans)
}

/// A cell as plain text for a URL.
fn cell_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::Object(o) => match o.get("display") {
                    Some(Value::String(d)) => d.clone(),
                    _ => o.get("id").map(cell_text).unwrap_or_default(),
                },
                other => cell_text(other),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Value::Object(_) => v.to_string(),
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The template with every resolvable placeholder replaced.
fn fill(table: &TableSchema, template: &str, cells: &Value) -> String {
    let (_, spans) = placeholders(table, template);
    let empty = Map::new();
    let cells = cells.as_object().unwrap_or(&empty);
    let mut out = String::with_capacity(template.len());
    let mut at = 0;
    for (start, end, id) in spans {
        out.push_str(&template[at..start]);
        match id {
            Some(id) => out.push_str(&url_encode(&cell_text(
                cells.get(&id).unwrap_or(&Value::Null),
            ))),
            None => out.push_str(&template[start..end]),
        }
        at = end;
    }
    out.push_str(&template[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::{cell_text, url_encode};
    use serde_json::json;

    #[test]
    fn encodes_cells() {
        assert_eq!(url_encode("a b&c/é~"), "a%20b%26c%2F%C3%A9~");
        assert_eq!(cell_text(&json!(["x", "y"])), "x, y");
        assert_eq!(
            cell_text(
                &json!([{"id": "rec_1", "display": "Ann"}, {"id": "rec_2", "display": null}])
            ),
            "Ann, rec_2"
        );
        assert_eq!(cell_text(&json!(2.5)), "2.5");
        assert_eq!(cell_text(&json!(null)), "");
    }
}
