//! `POST /api/webhooks/{id}/test` (editor): sends one signed sample
//! request now and replies with what that attempt got.
//!
//! The sample is a `webhook.test` payload (`test: true`, `record_id` null,
//! a fresh `delivery_id`) keyed like the webhook's real deliveries: a
//! table-bound webhook gets its table and that table's real fields with
//! sample cells (null where no sample fits), a whole-database webhook a
//! placeholder table and one placeholder field. One attempt, no retry,
//! nothing stored and nothing counted toward the failure streak; it works
//! on a paused or switched-off webhook too (to check a receiver before
//! resuming).
//!
//! Reply `{delivery_id, succeeded, status, duration_ms, body, error}`:
//! `status` is the receiver's HTTP status (0 when no reply came), `body`
//! the first 4000 characters of its reply, `error` why the attempt failed
//! (null when it succeeded). A refused address or a dead receiver is a 200
//! reply describing that failure.

use axum::extract::{Path, State};
use axum::Json;
use chrono::Utc;
use cluster_protocol::ids::{self, Kind};
use serde_json::{json, Map, Value};

use crate::auth::Editor;
use crate::catalog::{databases, webhooks};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::json::format_ts;
use crate::schema::{Costume, FieldRow, StorageKind, TableSchema};
use crate::state::AppState;
use crate::webhooks::send::{self, Outcome, Request};

/// The event of a test delivery.
pub const EVENT: &str = "webhook.test";
/// The whole-database sample: a placeholder table and field.
pub const PLACEHOLDER_TABLE_ID: &str = "tbl_000000000000";
pub const PLACEHOLDER_TABLE_NAME: &str = "Example table";
pub const PLACEHOLDER_FIELD_ID: &str = "fld_000000000000";
pub const PLACEHOLDER_FIELD_NAME: &str = "Example field";
pub const PLACEHOLDER_VALUE: &str = "Example value";

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let sample = sample(&state, &access.database_id, access.schema_version, &id).await?;
    let outcome = send::send(
        &state.egress,
        state.webhooks.timeout,
        Request {
            url: &sample.url,
            secret: &sample.secret,
            delivery_id: &sample.delivery_id,
            attempt: 1,
            body: &sample.body,
        },
    )
    .await;
    Ok(Json(reply(&sample.delivery_id, &outcome)))
}

/// The test request of one webhook.
pub struct Sample {
    pub delivery_id: String,
    pub url: String,
    pub secret: String,
    pub body: String,
}

async fn sample(
    state: &AppState,
    database_id: &str,
    schema_version: i64,
    webhook_id: &str,
) -> ApiResult<Sample> {
    state
        .db
        .measured(DbOp::TestWebhook, async {
            let mut client = state.db.client_for(database_id).await?;
            let webhook = webhooks::get(&*client, database_id, webhook_id)
                .await?
                .ok_or(ApiError::NotFound)?;
            let database = databases::get(&*client, database_id)
                .await?
                .ok_or(ApiError::NotFound)?;
            let schema = state
                .schemas
                .get_at(&mut client, database_id, schema_version)
                .await?;
            let table = webhook.table_id.as_deref().and_then(|t| schema.table(t));
            let tag = ids::tag_of(Kind::Database, database_id).ok_or_else(|| {
                ApiError::Internal(anyhow::anyhow!("database id {database_id} has no tag"))
            })?;
            let delivery_id = ids::new_tagged(Kind::Delivery, tag);
            let payload = payload(&PayloadOf {
                delivery_id: &delivery_id,
                database_id,
                database_name: &database.name,
                table,
                key_by_id: webhook.payload_key == "id",
                today: Utc::now(),
            });
            Ok(Sample {
                delivery_id,
                url: webhook.url,
                secret: webhook.secret.0,
                body: payload.to_string(),
            })
        })
        .await
}

/// What a sample payload is built from.
pub struct PayloadOf<'a> {
    pub delivery_id: &'a str,
    pub database_id: &'a str,
    pub database_name: &'a str,
    /// The webhook's table; `None` for a whole-database webhook.
    pub table: Option<&'a TableSchema>,
    pub key_by_id: bool,
    pub today: chrono::DateTime<Utc>,
}

/// The `webhook.test` payload (part C "Payload").
pub fn payload(of: &PayloadOf<'_>) -> Value {
    let (table, fields): (Value, Vec<(&str, &str, Value)>) = match of.table {
        Some(t) => (
            json!({ "id": t.id, "name": t.name }),
            t.fields
                .iter()
                .filter(|f| f.costume.storage() != StorageKind::None)
                .map(|f| (f.id.as_str(), f.name.as_str(), sample_cell(f, of.today)))
                .collect(),
        ),
        None => (
            json!({ "id": PLACEHOLDER_TABLE_ID, "name": PLACEHOLDER_TABLE_NAME }),
            vec![(
                PLACEHOLDER_FIELD_ID,
                PLACEHOLDER_FIELD_NAME,
                json!(PLACEHOLDER_VALUE),
            )],
        ),
    };
    let mut cells = Map::new();
    let mut companion = Map::new();
    for (id, name, value) in fields {
        if of.key_by_id {
            cells.insert(id.to_owned(), value);
            companion.insert(id.to_owned(), json!(name));
        } else {
            cells.insert(name.to_owned(), value);
            companion.insert(name.to_owned(), json!(id));
        }
    }
    let companion_key = if of.key_by_id {
        "field_names"
    } else {
        "field_ids"
    };
    let mut body = json!({
        "delivery_id": of.delivery_id,
        "event": EVENT,
        "occurred_at": format_ts(&of.today),
        "database": { "id": of.database_id, "name": of.database_name },
        "table": table,
        "record_id": null,
        "changed_field_ids": [],
        "before": null,
        "after": { "fields": cells },
        "test": true,
    });
    body[companion_key] = Value::Object(companion);
    body
}

/// A plausible cell in the record read shape of `field`, or null.
fn sample_cell(field: &FieldRow, now: chrono::DateTime<Utc>) -> Value {
    use Costume::*;
    match field.costume {
        SingleLineText | LongText => json!("Sample text"),
        Email => json!("someone@example.com"),
        Phone => json!("+1 555 0100"),
        Url => json!("https://example.com"),
        Number | Currency | Percent | Rating | Duration => json!(1),
        Date if field.has_time() => json!(format_ts(&now)),
        Date => json!(now.format("%Y-%m-%d").to_string()),
        Checkbox => json!(true),
        SingleSelect => field
            .choices()
            .first()
            .map_or(Value::Null, |(_, name)| json!(name)),
        MultiSelect => json!(field
            .choices()
            .first()
            .map(|(_, name)| vec![name.clone()])
            .unwrap_or_default()),
        Link | Attachment | MultiMember => json!([]),
        _ => Value::Null,
    }
}

/// The reply: what the one attempt got.
pub fn reply(delivery_id: &str, outcome: &Outcome) -> Value {
    json!({
        "delivery_id": delivery_id,
        "succeeded": outcome.succeeded(),
        "status": outcome.status_code(),
        "duration_ms": outcome.duration_ms,
        "body": outcome.response_body,
        "error": outcome.error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn field(id: &str, name: &str, costume: Costume) -> FieldRow {
        FieldRow {
            id: id.into(),
            table_id: "tbl_Ab3dZ0000001".into(),
            name: name.into(),
            costume,
            options: Map::new(),
            position: 0,
            sql_type: costume.column_type(false).map(String::from),
            created_at: Utc::now(),
        }
    }

    fn table() -> TableSchema {
        TableSchema {
            id: "tbl_Ab3dZ0000001".into(),
            database_id: "db_Ab3dZ0000000".into(),
            name: "Tasks".into(),
            position: 0,
            display_field_id: None,
            created_at: Utc::now(),
            updated_at: Utc::now(),
            fields: vec![
                field("fld_Ab3dZ0000001", "Name", Costume::SingleLineText),
                field("fld_Ab3dZ0000002", "Done", Costume::Checkbox),
                field("fld_Ab3dZ0000003", "Due", Costume::Date),
                field("fld_Ab3dZ0000004", "Go", Costume::Button),
                field("fld_Ab3dZ0000005", "Total", Costume::FormulaNumber),
            ],
        }
    }

    fn of<'a>(table: Option<&'a TableSchema>, key_by_id: bool) -> PayloadOf<'a> {
        PayloadOf {
            delivery_id: "dlv_Ab3dZ1234567",
            database_id: "db_Ab3dZ0000000",
            database_name: "Work",
            table,
            key_by_id,
            today: Utc.with_ymd_and_hms(2026, 3, 4, 5, 6, 7).unwrap(),
        }
    }

    #[test]
    fn a_table_bound_sample_carries_the_real_fields_by_name() {
        let t = table();
        let p = payload(&of(Some(&t), false));
        assert_eq!(p["event"], "webhook.test");
        assert_eq!(p["test"], true);
        assert_eq!(p["record_id"], Value::Null);
        assert_eq!(p["before"], Value::Null);
        assert_eq!(p["changed_field_ids"], json!([]));
        assert_eq!(p["delivery_id"], "dlv_Ab3dZ1234567");
        assert_eq!(p["occurred_at"], "2026-03-04T05:06:07.000Z");
        assert_eq!(
            p["database"],
            json!({"id": "db_Ab3dZ0000000", "name": "Work"})
        );
        assert_eq!(
            p["table"],
            json!({"id": "tbl_Ab3dZ0000001", "name": "Tasks"})
        );
        assert_eq!(
            p["after"]["fields"],
            json!({"Name": "Sample text", "Done": true, "Due": "2026-03-04", "Total": null})
        );
        assert_eq!(p["field_ids"]["Name"], "fld_Ab3dZ0000001");
        assert_eq!(p["field_ids"].as_object().unwrap().len(), 4);
        assert!(p.get("field_names").is_none());
    }

    #[test]
    fn id_keying_swaps_the_companion_map() {
        let t = table();
        let p = payload(&of(Some(&t), true));
        assert_eq!(p["after"]["fields"]["fld_Ab3dZ0000002"], true);
        assert_eq!(p["field_names"]["fld_Ab3dZ0000002"], "Done");
        assert!(p.get("field_ids").is_none());
    }

    #[test]
    fn a_whole_database_sample_is_a_placeholder_pair() {
        let p = payload(&of(None, false));
        assert_eq!(p["table"]["id"], PLACEHOLDER_TABLE_ID);
        assert_eq!(
            p["after"]["fields"],
            json!({ PLACEHOLDER_FIELD_NAME: PLACEHOLDER_VALUE })
        );
        assert_eq!(p["field_ids"][PLACEHOLDER_FIELD_NAME], PLACEHOLDER_FIELD_ID);
    }
}
