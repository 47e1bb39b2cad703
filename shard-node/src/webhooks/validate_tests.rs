//! Unit tests of the save-time checks, against a schema built in memory:
//! Orders (with every field family) linking to Items.

use chrono::Utc;
use serde_json::{json, Map, Value};

use super::*;
use crate::schema::{Costume, DatabaseSchema, FieldRow, TableSchema};

const DB: &str = "db_Ab3dZ1234567";
const ITEMS: &str = "tbl_Ab3dZItems01";
const ORDERS: &str = "tbl_Ab3dZOrder01";

fn field(table: &str, id: &str, name: &str, costume: Costume, options: Value) -> FieldRow {
    let sql_type = match costume.family() {
        Family::Link | Family::Button | Family::Lookup | Family::Rollup => None,
        _ => Some(match costume {
            Costume::Number | Costume::FormulaNumber => "numeric",
            Costume::Date => "date",
            Costume::Checkbox => "boolean",
            _ => "text",
        }),
    };
    FieldRow {
        id: id.to_owned(),
        table_id: table.to_owned(),
        name: name.to_owned(),
        costume,
        options: options.as_object().cloned().unwrap_or_default(),
        position: 0,
        sql_type: sql_type.map(str::to_owned),
        created_at: Utc::now(),
    }
}

fn table(id: &str, name: &str, fields: Vec<FieldRow>) -> TableSchema {
    TableSchema {
        id: id.to_owned(),
        database_id: DB.to_owned(),
        name: name.to_owned(),
        position: 0,
        display_field_id: None,
        created_at: Utc::now(),
        updated_at: Utc::now(),
        fields,
    }
}

fn schema() -> DatabaseSchema {
    let items = table(
        ITEMS,
        "Items",
        vec![
            field(
                ITEMS,
                "fld_Ab3dZCode001",
                "Code",
                Costume::SingleLineText,
                json!({}),
            ),
            field(
                ITEMS,
                "fld_Ab3dZBack001",
                "Orders",
                Costume::Link,
                json!({"target_table_id": ORDERS, "direction": "reverse",
                       "pair_field_id": "fld_Ab3dZLine001"}),
            ),
        ],
    );
    let orders = table(
        ORDERS,
        "Orders",
        vec![
            field(
                ORDERS,
                "fld_Ab3dZTitl001",
                "Title",
                Costume::SingleLineText,
                json!({}),
            ),
            field(
                ORDERS,
                "fld_Ab3dZCnt0001",
                "Count",
                Costume::Number,
                json!({}),
            ),
            field(ORDERS, "fld_Ab3dZDue0001", "Due", Costume::Date, json!({})),
            field(
                ORDERS,
                "fld_Ab3dZStat001",
                "Status",
                Costume::SingleSelect,
                json!({"choices": [{"id": "choOpen1", "name": "Open"}]}),
            ),
            field(
                ORDERS,
                "fld_Ab3dZLine001",
                "Lines",
                Costume::Link,
                json!({"target_table_id": ITEMS, "pair_field_id": "fld_Ab3dZBack001"}),
            ),
            field(
                ORDERS,
                "fld_Ab3dZLkup001",
                "Codes",
                Costume::LookupText,
                json!({"link_field_id": "fld_Ab3dZLine001",
                       "target_field_id": "fld_Ab3dZCode001"}),
            ),
            field(
                ORDERS,
                "fld_Ab3dZRoll001",
                "Line count",
                Costume::RollupNumber,
                json!({"link_field_id": "fld_Ab3dZLine001", "aggregation": "count"}),
            ),
            field(
                ORDERS,
                "fld_Ab3dZForm001",
                "Double",
                Costume::FormulaNumber,
                json!({"expression": "{Count} * 2"}),
            ),
            field(
                ORDERS,
                "fld_Ab3dZButn001",
                "Ping",
                Costume::Button,
                json!({"action": "link", "url_template": "https://example.com"}),
            ),
        ],
    );
    DatabaseSchema::new(DB.into(), 1, "UTC".into(), vec![items, orders])
}

fn body(v: Value) -> Map<String, Value> {
    v.as_object().cloned().expect("an object")
}

#[track_caller]
fn bad(r: ApiResult<impl std::fmt::Debug>) -> String {
    match r {
        Err(ApiError::BadRequest(m)) => m,
        other => panic!("expected 400, got {other:?}"),
    }
}

fn created(v: Value) -> ApiResult<Config> {
    let changes = parse_create(&body(v))?;
    settle(&schema(), draft_new(&changes), &changes)
}

fn orders_with(v: Value) -> Value {
    let mut b = body(
        json!({"url": "https://x.example/", "trigger_type": "record_updated",
                            "table_id": ORDERS}),
    );
    b.extend(body(v));
    Value::Object(b)
}

#[test]
fn create_needs_url_and_trigger_and_knows_its_keys() {
    let m = bad(parse_create(&body(
        json!({"trigger_type": "record_created"}),
    )));
    assert_eq!(m, "url is required.");
    let m = bad(parse_create(&body(json!({"url": "https://x.example/"}))));
    assert!(m.starts_with("trigger_type is required"), "{m}");
    let m = bad(parse_create(&body(
        json!({"url": "https://x.example/", "trigger_type": "record_created", "secret": "s"}),
    )));
    assert!(
        m.starts_with("Unknown key 'secret'. Valid keys: url, "),
        "{m}"
    );
    // resume is an update's key only.
    let m = bad(parse_create(&body(
        json!({"url": "https://x.example/", "trigger_type": "record_created", "resume": true}),
    )));
    assert!(m.starts_with("Unknown key 'resume'"), "{m}");
    let m = bad(parse_update(&body(json!({}))));
    assert!(m.starts_with("Send at least one of: url, "), "{m}");
    let m = bad(parse_update(&body(json!({"id": "whk_x"}))));
    assert!(m.starts_with("Unknown key 'id'"), "{m}");
}

#[test]
fn wrong_types_are_refused_naming_the_key() {
    let cases = [
        (json!({"url": 5}), "url must be a string, not a number."),
        (json!({"url": "  "}), "url must not be blank."),
        (
            json!({"trigger_type": null}),
            "trigger_type must be a string, not null.",
        ),
        (
            json!({"name": ["x"]}),
            "name must be a string, not an array.",
        ),
        (
            json!({"table_id": 7}),
            "table_id must be a string or null, not a number.",
        ),
        (
            json!({"payload_key": true}),
            "payload_key must be a string, not a boolean.",
        ),
        (
            json!({"is_active": "yes"}),
            "is_active must be true or false, not a string.",
        ),
        (
            json!({"resume": 1}),
            "resume must be true or false, not a number.",
        ),
        (
            json!({"conditions": "[]"}),
            "conditions must be a filter object ({join, conditions}) or null, not a string.",
        ),
        (
            json!({"conditions": []}),
            "conditions must be a filter object ({join, conditions}) or null, not an array.",
        ),
        (
            json!({"watched_field_ids": "fld_x"}),
            "watched_field_ids must be a list of field ids or null, not a string.",
        ),
        (
            json!({"watched_field_ids": ["fld_x", 3]}),
            "watched_field_ids[1] must be a field id, not a number.",
        ),
        (
            json!({"trigger_type": "record_changed"}),
            "Unknown trigger_type 'record_changed'. Valid trigger types: record_created, \
             record_updated, record_matches, record_deleted.",
        ),
        (
            json!({"payload_key": "names"}),
            "Unknown payload_key 'names'. Valid payload keys: name, id.",
        ),
    ];
    for (b, want) in cases {
        assert_eq!(bad(parse_update(&body(b.clone()))), want, "{b}");
    }
}

#[test]
fn lengths_are_capped() {
    let name = "n".repeat(MAX_NAME_CHARS);
    assert!(parse_update(&body(json!({ "name": name }))).is_ok());
    let m = bad(parse_update(&body(json!({ "name": format!("{name}é") }))));
    assert_eq!(m, "name may be at most 255 characters; this one has 256.");
    let url = format!("https://x.example/{}", "a".repeat(MAX_URL_CHARS));
    let m = bad(parse_update(&body(json!({ "url": url }))));
    assert!(m.starts_with("url may be at most 2048 characters"), "{m}");
}

#[test]
fn defaults_and_stored_forms() {
    let c =
        created(json!({"url": "https://x.example/", "trigger_type": "record_deleted"})).unwrap();
    assert_eq!(c.name, "");
    assert_eq!(c.table_id, None);
    assert_eq!(c.payload_key, PayloadKey::Name);
    assert!(c.is_active);
    assert_eq!(c.conditions, None);
    let c = created(orders_with(json!({
        "is_active": false,
        "payload_key": "id",
        "watched_field_ids": ["Title", "fld_Ab3dZCnt0001", "fld_Ab3dZTitl001", "Lines"],
        "conditions": {"join": "or", "conditions": [
            {"field": "Count", "op": "greater", "value": 3},
            {"conditions": [{"field": "fld_Ab3dZStat001", "op": "is", "value": "Open"}]},
        ]},
    })))
    .unwrap();
    assert!(!c.is_active);
    assert_eq!(c.payload_key, PayloadKey::Id);
    // Names become ids, de-duplicated in the order sent.
    assert_eq!(
        c.watched_field_ids.unwrap(),
        ["fld_Ab3dZTitl001", "fld_Ab3dZCnt0001", "fld_Ab3dZLine001"]
    );
    // Field references become ids; values and the rest stay as sent.
    assert_eq!(
        c.conditions.unwrap(),
        json!({"join": "or", "conditions": [
            {"field": "fld_Ab3dZCnt0001", "op": "greater", "value": 3},
            {"conditions": [{"field": "fld_Ab3dZStat001", "op": "is", "value": "Open"}]},
        ]})
    );
}

#[test]
fn table_must_be_one_of_the_database() {
    let r = created(
        json!({"url": "https://x.example/", "trigger_type": "record_created",
                           "table_id": "tbl_Ab3dZNoSuch01"}),
    );
    assert!(matches!(r, Err(ApiError::NotFound)), "{r:?}");
}

#[test]
fn conditions_compile_against_the_table() {
    let cond = |c: Value| created(orders_with(json!({ "conditions": c })));
    let m = bad(cond(
        json!({"conditions": [{"field": "Nope", "op": "is", "value": "x"}]}),
    ));
    assert!(m.starts_with("conditions.conditions[0].field: "), "{m}");
    assert!(m.contains("Nope"), "{m}");
    let m = bad(cond(
        json!({"conditions": [{"field": "Count", "op": "contains", "value": "x"}]}),
    ));
    assert!(
        m.starts_with("conditions.conditions[0].op: Operator 'contains'"),
        "{m}"
    );
    let m = bad(cond(
        json!({"conditions": [{"field": "Count", "op": "is", "value": "3"}]}),
    ));
    assert!(m.starts_with("conditions.conditions[0].value: "), "{m}");
    let m = bad(cond(json!({"join": "xor"})));
    assert!(m.starts_with("conditions.join: "), "{m}");
    let m = bad(cond(
        json!({"conditions": [{"field": "Ping", "op": "is", "value": "x"}]}),
    ));
    assert!(m.starts_with("conditions.conditions[0].op: "), "{m}");
    // Relative dates (the clock's business) are fine, bad ones are not.
    assert!(cond(json!({"conditions": [
        {"field": "Due", "op": "before", "value": {"relative": "today", "offset": -3}}]}))
    .is_ok());
    let m = bad(cond(json!({"conditions": [
        {"field": "Due", "op": "before", "value": {"relative": "yesterday"}}]})));
    assert!(m.starts_with("conditions.conditions[0].value"), "{m}");
    // Formulas may be conditions.
    assert!(
        cond(json!({"conditions": [{"field": "Double", "op": "greater", "value": 1}]})).is_ok()
    );
}

#[test]
fn lookups_and_rollups_are_not_conditions() {
    for (name, costume) in [("Codes", "lookup_text"), ("Line count", "rollup_number")] {
        let op = if costume == "lookup_text" {
            "contains"
        } else {
            "greater"
        };
        let value = if costume == "lookup_text" {
            json!("a")
        } else {
            json!(1)
        };
        let m = bad(created(orders_with(json!({"conditions": {"conditions": [
            {"field": "Title", "op": "empty"},
            {"conditions": [{"field": name, "op": op, "value": value}]},
        ]}}))));
        assert_eq!(
            m,
            format!(
                "conditions.conditions[1].conditions[0].field: field '{name}' is a {costume}; \
                 lookup and rollup fields can't be webhook conditions."
            )
        );
    }
}

#[test]
fn conditions_are_capped_at_two_levels_and_200_nodes() {
    let leaf = json!({"field": "Title", "op": "empty"});
    let two = json!({"conditions": [{"conditions": [leaf.clone()]}]});
    assert!(created(orders_with(json!({ "conditions": two }))).is_ok());
    let three = json!({"conditions": [{"conditions": [{"conditions": [leaf.clone()]}]}]});
    let m = bad(created(orders_with(json!({ "conditions": three }))));
    assert!(
        m.starts_with("conditions.conditions[0].conditions[0]: Filters nest at most 2"),
        "{m}"
    );
    // The top group counts: 199 conditions make 200 nodes.
    let wide = |n: usize| json!({"conditions": vec![leaf.clone(); n]});
    assert!(created(orders_with(json!({ "conditions": wide(199) }))).is_ok());
    let m = bad(created(orders_with(json!({ "conditions": wide(200) }))));
    assert!(
        m.starts_with("conditions.conditions[199]: A filter may have at most 200"),
        "{m}"
    );
}

#[test]
fn conditions_and_watches_need_a_table() {
    let m = bad(created(
        json!({"url": "https://x.example/", "trigger_type": "record_matches",
                               "conditions": {"conditions": []}}),
    ));
    assert!(m.starts_with("conditions need a specific table_id"), "{m}");
    let m = bad(created(
        json!({"url": "https://x.example/", "trigger_type": "record_updated",
                               "watched_field_ids": ["fld_Ab3dZTitl001"]}),
    ));
    assert!(
        m.starts_with("watched_field_ids need a specific table_id"),
        "{m}"
    );
    // Null and empty watch every field, with or without a table.
    for w in [json!(null), json!([])] {
        let c = created(
            json!({"url": "https://x.example/", "trigger_type": "record_updated",
                               "watched_field_ids": w}),
        )
        .unwrap();
        assert!(c.watched_field_ids.unwrap_or_default().is_empty());
    }
}

#[test]
fn watched_fields_are_fields_a_write_touches() {
    let watch = |w: Value| created(orders_with(json!({ "watched_field_ids": w })));
    for (name, costume) in [
        ("Double", "formula_number"),
        ("Codes", "lookup_text"),
        ("Line count", "rollup_number"),
        ("Ping", "button"),
    ] {
        let m = bad(watch(json!(["Title", name])));
        assert!(
            m.starts_with(&format!(
                "watched_field_ids[1]: field '{name}' is a {costume}; "
            )),
            "{m}"
        );
    }
    let m = bad(watch(json!(["fld_Ab3dZCode001"])));
    assert_eq!(
        m,
        "watched_field_ids[0]: unknown field 'fld_Ab3dZCode001' in table 'Orders'."
    );
    // Other triggers keep a checked watch list too.
    let c = created(orders_with(json!({"trigger_type": "record_created",
                                       "watched_field_ids": ["Count"]})))
    .unwrap();
    assert_eq!(c.watched_field_ids.unwrap(), ["fld_Ab3dZCnt0001"]);
    assert!(bad(created(orders_with(
        json!({"trigger_type": "record_deleted",
                                            "watched_field_ids": ["Nope"]})
    )))
    .starts_with("watched_field_ids[0]: unknown field"));
}

#[test]
fn an_update_checks_what_it_changes() {
    let stored = created(orders_with(json!({
        "conditions": {"conditions": [{"field": "Count", "op": "greater", "value": 1}]},
        "watched_field_ids": ["Count"],
    })))
    .unwrap();
    let update = |v: Value| {
        let changes = parse_update(&body(v))?;
        settle(&schema(), apply(&stored, &changes), &changes)
    };
    // A rename leaves conditions alone (even ones a schema change broke).
    let mut broken = stored.clone();
    broken.conditions = Some(json!({"conditions": [{"field": "fld_gone", "op": "empty"}]}));
    let changes = parse_update(&body(json!({"name": "renamed"}))).unwrap();
    let renamed = settle(&schema(), apply(&broken, &changes), &changes).unwrap();
    assert_eq!(renamed.name, "renamed");
    assert_eq!(renamed.conditions, broken.conditions);
    // Moving to another table re-checks the conditions and watches it keeps.
    let m = bad(update(json!({ "table_id": ITEMS })));
    assert!(m.starts_with("conditions.conditions[0].field: "), "{m}");
    let m = bad(update(json!({ "table_id": ITEMS, "conditions": null })));
    assert!(m.starts_with("watched_field_ids[0]: unknown field"), "{m}");
    let moved =
        update(json!({"table_id": ITEMS, "conditions": null, "watched_field_ids": null})).unwrap();
    assert_eq!(moved.table_id.as_deref(), Some(ITEMS));
    // Database-wide with conditions kept: refused.
    let m = bad(update(json!({ "table_id": null })));
    assert!(m.starts_with("conditions need a specific table_id"), "{m}");
    // Clearing conditions.
    assert_eq!(
        update(json!({ "conditions": null })).unwrap().conditions,
        None
    );
}

#[test]
fn what_clears_the_match_memory() {
    let base = created(orders_with(json!({"trigger_type": "record_matches"}))).unwrap();
    let with = |f: &dyn Fn(&mut Config)| {
        let mut c = base.clone();
        f(&mut c);
        base.clears_matches(&c)
    };
    assert!(!with(&|_| {}));
    assert!(!with(&|c| c.name = "x".into()));
    assert!(!with(&|c| c.url = "https://y.example/".into()));
    assert!(!with(&|c| c.payload_key = PayloadKey::Id));
    assert!(!with(&|c| c.watched_field_ids = Some(vec![])));
    assert!(with(&|c| c.table_id = None));
    assert!(with(&|c| c.trigger = Trigger::RecordCreated));
    assert!(with(&|c| c.conditions = Some(json!({}))));
    assert!(with(&|c| c.is_active = false));
}

#[test]
fn trigger_and_payload_key_names_round_trip() {
    for t in Trigger::ALL {
        assert_eq!(Trigger::parse(t.as_str()), Some(t));
    }
    for k in [PayloadKey::Name, PayloadKey::Id] {
        assert_eq!(PayloadKey::parse(k.as_str()), Some(k));
    }
}
