//! The JSON body of a delivery (part C, "Payload"): written once when the
//! delivery is enqueued and sent byte for byte on every attempt.
//!
//! Cells use the record read shapes (`records::reply`: link cells
//! `[{id, display}]`, select names, dates as read, unset null) keyed by
//! field name or by `fld_` id as the webhook's `payload_key` says, with the
//! matching companion map (`field_ids` name -> id, or `field_names`
//! id -> name) covering every field of the table.

use serde::Serialize;
use serde_json::Value;

use crate::records::reply::{self, ReadField, Shape};
use crate::records::store::StoredRecord;
use crate::schema::rules::PayloadKey;

/// Where the event happened.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub database_id: &'a str,
    pub database_name: &'a str,
    pub table_id: &'a str,
    pub table_name: &'a str,
    /// Every field of the table, in column order (`cells::read::read_set`).
    pub fields: &'a [ReadField],
}

/// A button press's extra keys (part C): `trigger: 'button'`,
/// `button: {field_id, label}`, `pressed_by` (the user id), `pressed_at`.
#[derive(Debug, Clone, Serialize)]
pub struct ButtonPress<'a> {
    pub trigger: &'static str,
    pub button: ButtonRef<'a>,
    pub pressed_by: &'a str,
    pub pressed_at: &'a str,
}

#[derive(Debug, Clone, Serialize)]
pub struct ButtonRef<'a> {
    pub field_id: &'a str,
    pub label: &'a str,
}

/// One event about one record (or none, on a test delivery).
#[derive(Debug, Clone)]
pub struct Event<'a> {
    /// `record.created`, `record.updated`, ...
    pub kind: &'static str,
    pub record_id: Option<&'a str>,
    /// The fields the write supplied (empty on create, delete, clock-driven
    /// match and button press).
    pub changed_field_ids: &'a [String],
    pub before: Option<&'a StoredRecord>,
    pub after: Option<&'a StoredRecord>,
    pub button: Option<ButtonPress<'a>>,
    pub test: bool,
}

#[derive(Serialize)]
struct Named<'a> {
    id: &'a str,
    name: &'a str,
}

#[derive(Serialize)]
struct Body<'a> {
    delivery_id: &'a str,
    event: &'a str,
    occurred_at: &'a str,
    database: Named<'a>,
    table: Named<'a>,
    record_id: Option<&'a str>,
    changed_field_ids: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    field_ids: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    field_names: Option<Value>,
    before: Option<Value>,
    after: Option<Value>,
    test: bool,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    button: Option<&'a ButtonPress<'a>>,
}

/// The shape of cells a payload keyed by `key` carries.
fn shape(key: PayloadKey) -> Shape {
    Shape {
        key_by_id: key == PayloadKey::Id,
        ..Shape::default()
    }
}

/// `{fields: {...}}` of a record, keyed by `key`.
pub fn fields_object(rec: &StoredRecord, fields: &[ReadField], key: PayloadKey) -> Value {
    let mut full = reply::record_json(rec.clone(), fields, shape(key), &[]);
    let cells = full
        .get_mut("fields")
        .map(Value::take)
        .unwrap_or(Value::Null);
    serde_json::json!({ "fields": cells })
}

/// The body of delivery `delivery_id`, enqueued at `occurred_at`.
pub fn body(
    source: &Source<'_>,
    event: &Event<'_>,
    key: PayloadKey,
    delivery_id: &str,
    occurred_at: &str,
) -> String {
    let (map_name, map) = reply::companion(source.fields, shape(key));
    let (field_ids, field_names) = if map_name == "field_names" {
        (None, Some(map))
    } else {
        (Some(map), None)
    };
    let body = Body {
        delivery_id,
        event: event.kind,
        occurred_at,
        database: Named {
            id: source.database_id,
            name: source.database_name,
        },
        table: Named {
            id: source.table_id,
            name: source.table_name,
        },
        record_id: event.record_id,
        changed_field_ids: event.changed_field_ids,
        field_ids,
        field_names,
        before: event.before.map(|r| fields_object(r, source.fields, key)),
        after: event.after.map(|r| fields_object(r, source.fields, key)),
        test: event.test,
        button: event.button.as_ref(),
    };
    // Serialising plain maps, strings and numbers cannot fail.
    serde_json::to_string(&body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::cells::wire::Wire;
    use crate::records::reply::Post;
    use serde_json::json;

    fn field(id: &str, name: &str, post: Post) -> ReadField {
        ReadField {
            id: id.into(),
            name: name.into(),
            expr: String::new(),
            post,
            wire: Wire::Json,
        }
    }

    fn fixture() -> (Vec<ReadField>, StoredRecord) {
        let choices = [("ch1".to_owned(), "Open".to_owned())]
            .into_iter()
            .collect();
        let fields = vec![
            field("fld_name", "Name", Post::Plain),
            field("fld_stat", "Status", Post::Choices(choices)),
            field("fld_link", "Owner", Post::Link),
            field("fld_due", "Due", Post::Plain),
        ];
        let now = chrono::Utc::now();
        let rec = StoredRecord {
            id: "rec_1".into(),
            created_at: now,
            updated_at: now,
            created_by: None,
            deleted_at: None,
            cells: vec![
                Some(json!("Ann")),
                Some(json!("ch1")),
                Some(json!([{"id": "rec_9", "display": "Bo"}])),
                None,
            ],
        };
        (fields, rec)
    }

    fn source(fields: &[ReadField]) -> Source<'_> {
        Source {
            database_id: "db_1",
            database_name: "Sales",
            table_id: "tbl_1",
            table_name: "Deals",
            fields,
        }
    }

    #[test]
    fn keyed_by_name() {
        let (fields, rec) = fixture();
        let changed = vec!["fld_name".to_owned()];
        let event = Event {
            kind: "record.updated",
            record_id: Some("rec_1"),
            changed_field_ids: &changed,
            before: Some(&rec),
            after: Some(&rec),
            button: None,
            test: false,
        };
        let v: Value = serde_json::from_str(&body(
            &source(&fields),
            &event,
            PayloadKey::Name,
            "dlv_1",
            "2026-01-01T00:00:00.000Z",
        ))
        .unwrap();
        assert_eq!(
            v,
            json!({
                "delivery_id": "dlv_1",
                "event": "record.updated",
                "occurred_at": "2026-01-01T00:00:00.000Z",
                "database": {"id": "db_1", "name": "Sales"},
                "table": {"id": "tbl_1", "name": "Deals"},
                "record_id": "rec_1",
                "changed_field_ids": ["fld_name"],
                "field_ids": {"Name": "fld_name", "Status": "fld_stat", "Owner": "fld_link", "Due": "fld_due"},
                "before": {"fields": {"Name": "Ann", "Status": "Open", "Owner": [{"id": "rec_9", "display": "Bo"}], "Due": null}},
                "after": {"fields": {"Name": "Ann", "Status": "Open", "Owner": [{"id": "rec_9", "display": "Bo"}], "Due": null}},
                "test": false
            })
        );
    }

    #[test]
    fn keyed_by_id_with_button_extras() {
        let (fields, rec) = fixture();
        let event = Event {
            kind: "button.pressed",
            record_id: Some("rec_1"),
            changed_field_ids: &[],
            before: None,
            after: Some(&rec),
            button: Some(ButtonPress {
                trigger: "button",
                button: ButtonRef {
                    field_id: "fld_btn",
                    label: "Ship",
                },
                pressed_by: "usr_1",
                pressed_at: "2026-01-01T00:00:01.000Z",
            }),
            test: false,
        };
        let v: Value = serde_json::from_str(&body(
            &source(&fields),
            &event,
            PayloadKey::Id,
            "dlv_2",
            "2026-01-01T00:00:01.000Z",
        ))
        .unwrap();
        assert!(v.get("field_ids").is_none());
        assert_eq!(
            v["field_names"],
            json!({"fld_name": "Name", "fld_stat": "Status", "fld_link": "Owner", "fld_due": "Due"})
        );
        assert_eq!(
            v["after"],
            json!({"fields": {"fld_name": "Ann", "fld_stat": "Open", "fld_link": [{"id": "rec_9", "display": "Bo"}], "fld_due": null}})
        );
        assert_eq!(v["before"], Value::Null);
        assert_eq!(v["changed_field_ids"], json!([]));
        assert_eq!(v["trigger"], "button");
        assert_eq!(v["button"], json!({"field_id": "fld_btn", "label": "Ship"}));
        assert_eq!(v["pressed_by"], "usr_1");
        assert_eq!(v["pressed_at"], "2026-01-01T00:00:01.000Z");
    }
}
