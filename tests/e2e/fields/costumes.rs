//! The 28 costumes: storage kinds (real column types), operators, the
//! doors, unknown types and option keys.

use serde_json::{json, Value};

use super::{id, Db};

const TEXT_OPS: &[&str] = &[
    "is",
    "is_not",
    "contains",
    "not_contains",
    "empty",
    "not_empty",
];
const NUMBER_OPS: &[&str] = &[
    "is",
    "is_not",
    "greater",
    "greater_or_equal",
    "less",
    "less_or_equal",
    "empty",
    "not_empty",
];
const DATE_OPS: &[&str] = &[
    "is",
    "is_not",
    "before",
    "after",
    "on_or_before",
    "on_or_after",
    "empty",
    "not_empty",
];
const SINGLE_OPS: &[&str] = &["is", "is_not", "any_of", "none_of", "empty", "not_empty"];
const MULTI_OPS: &[&str] = &[
    "has_any",
    "has_all",
    "has_none",
    "is_exactly",
    "empty",
    "not_empty",
];

/// The stored costumes with a column: (type, extra options, column type, operators).
fn columned() -> Vec<(&'static str, Value, &'static str, &'static [&'static str])> {
    vec![
        ("single_line_text", json!({}), "text", TEXT_OPS),
        ("long_text", json!({"rich": true}), "text", TEXT_OPS),
        ("email", json!({}), "text", TEXT_OPS),
        ("phone", json!({}), "text", TEXT_OPS),
        ("url", json!({}), "text", TEXT_OPS),
        (
            "number",
            json!({"decimals": 2, "separators": true}),
            "numeric",
            NUMBER_OPS,
        ),
        (
            "currency",
            json!({"symbol": "€", "symbol_position": "after"}),
            "numeric",
            NUMBER_OPS,
        ),
        ("percent", json!({}), "numeric", NUMBER_OPS),
        (
            "rating",
            json!({"max": 5, "shape": "star", "color": "saffron"}),
            "numeric",
            NUMBER_OPS,
        ),
        (
            "duration",
            json!({"duration_format": "h:mm:ss"}),
            "numeric",
            NUMBER_OPS,
        ),
        ("date", json!({"date_format": "eu"}), "date", DATE_OPS),
        ("checkbox", json!({"icon": "check"}), "boolean", &["is"]),
        ("member", json!({}), "text", TEXT_OPS),
        ("multi_member", json!({}), "ARRAY", MULTI_OPS),
        (
            "single_select",
            json!({"choices": [{"name": "A"}]}),
            "text",
            SINGLE_OPS,
        ),
        (
            "multi_select",
            json!({"choices": [{"name": "A"}]}),
            "ARRAY",
            MULTI_OPS,
        ),
        ("attachment", json!({}), "ARRAY", &["empty", "not_empty"]),
    ]
}

#[tokio::test]
async fn every_costume_has_its_storage_operators_and_column() {
    let d = Db::new().await;
    let other = d.table("Other").await;
    let other_name = d
        .field(&other, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    let other_score = d
        .field(&other, json!({"name": "Score", "type": "number"}))
        .await;
    let other_choice =
        d.field(&other, json!({"name": "Pick", "type": "single_select", "options": {"choices": [{"name": "x"}]}})).await;
    let tid = d.table("All").await;
    let mut seen = Vec::new();
    for (costume, options, column, ops) in columned() {
        let f = d
            .field(
                &tid,
                json!({"name": format!("F {costume}"), "type": costume, "options": options}),
            )
            .await;
        assert_eq!(f["type"], costume);
        assert_eq!(f["operators"], json!(ops), "{costume}");
        for (k, v) in options.as_object().unwrap() {
            if k != "choices" {
                assert_eq!(&f["options"][k], v, "{costume} keeps {k}");
            }
        }
        assert_eq!(
            d.column_type(&tid, &id(&f)).await.as_deref(),
            Some(column),
            "{costume}"
        );
        seen.push(costume.to_owned());
    }
    // Date with time is a timestamp with zone.
    let dt = d
        .field(
            &tid,
            json!({"name": "When", "type": "date", "options": {"include_time": true}}),
        )
        .await;
    assert_eq!(
        d.column_type(&tid, &id(&dt)).await.as_deref(),
        Some("timestamp with time zone")
    );

    // The costumes without a column.
    let link = d
        .field(
            &tid,
            json!({"name": "Other", "type": "link", "options": {"target_table_id": other}}),
        )
        .await;
    assert_eq!(link["operators"], json!(MULTI_OPS));
    let button = d
        .field(
            &tid,
            json!({"name": "Go", "type": "button", "options": {"url_template": "https://x.test/"}}),
        )
        .await;
    assert_eq!(button["operators"], json!([]));
    let lookup = d
        .field(&tid, json!({"type": "lookup", "options": {"link_field_id": id(&link), "target_field_id": id(&other_name)}}))
        .await;
    assert_eq!(
        (lookup["type"].as_str(), lookup["name"].as_str()),
        (Some("lookup_text"), Some("Name (from Other)"))
    );
    assert_eq!(lookup["operators"], json!(TEXT_OPS));
    let lookup_select = d
        .field(&tid, json!({"type": "lookup", "options": {"link_field_id": id(&link), "target_field_id": id(&other_choice)}}))
        .await;
    assert_eq!(lookup_select["type"], "lookup_text");
    assert_eq!(
        lookup_select["operators"],
        json!([]),
        "a lookup surfacing a select is not filterable"
    );
    let lookup_link = d
        .field(&tid, json!({"name": "Back", "type": "lookup", "options": {"link_field_id": id(&link), "target_field_id": link["options"]["pair_field_id"]}}))
        .await;
    assert_eq!(
        (
            lookup_link["type"].as_str(),
            lookup_link["operators"].clone()
        ),
        (Some("lookup_text"), json!([]))
    );
    let rollup = d
        .field(&tid, json!({"type": "rollup", "options": {"link_field_id": id(&link), "aggregation": "sum", "target_field_id": id(&other_score)}}))
        .await;
    assert_eq!(rollup["type"], "rollup_number");
    assert_eq!(rollup["operators"], json!(NUMBER_OPS));
    for f in [&link, &button, &lookup, &lookup_select, &rollup] {
        assert_eq!(
            d.column_type(&tid, &id(f)).await,
            None,
            "{} has no column",
            f["type"]
        );
    }
    // The three formula costumes, inferred through the door or from a
    // concrete formula type (treated as the door).
    let fnum = d
        .field(
            &tid,
            json!({"name": "FN", "type": "formula", "options": {"expression": "1 + 1"}}),
        )
        .await;
    let ftext = d
        .field(
            &tid,
            json!({"name": "FT", "type": "formula_number", "options": {"expression": "'a'"}}),
        )
        .await;
    let fdate =
        d.field(&tid, json!({"name": "FD", "type": "formula", "options": {"expression": "DATEADD({F date}, 1, 'days')"}})).await;
    assert_eq!(
        (fnum["type"].as_str(), fnum["operators"].clone()),
        (Some("formula_number"), json!(NUMBER_OPS))
    );
    assert_eq!(
        (ftext["type"].as_str(), ftext["operators"].clone()),
        (Some("formula_text"), json!(TEXT_OPS))
    );
    assert_eq!(
        (fdate["type"].as_str(), fdate["operators"].clone()),
        (Some("formula_date"), json!(DATE_OPS))
    );
    let t = d.get_table(&tid).await;
    let types: std::collections::BTreeSet<String> = t["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["type"].as_str().unwrap().to_owned())
        .collect();
    for missing in [
        "link",
        "button",
        "lookup_text",
        "rollup_number",
        "formula_number",
        "formula_text",
        "formula_date",
    ] {
        assert!(types.contains(missing), "{missing}");
    }
    // Every field carries operators in the table responses too.
    assert!(t["fields"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["operators"].is_array()));
    let listed = d
        .owner
        .api
        .get(&format!("/api/databases/{}/tables", d.id))
        .await;
    let tables = listed.expect_ok()["tables"].as_array().unwrap().clone();
    let all = tables.iter().find(|x| x["id"] == tid.as_str()).unwrap();
    assert_eq!(all["fields"], t["fields"]);
    // lookup_number/_date/_checkbox and rollup_date: see lookups.rs.
    let _ = seen;
}

#[tokio::test]
async fn unknown_type_lists_the_28_costumes_without_the_doors() {
    let d = Db::new().await;
    let tid = d.table("T").await;
    let msg = d
        .create(&tid, json!({"name": "X", "type": "spreadsheet"}))
        .await
        .expect_error(400, "bad_request");
    let list = msg
        .split("Valid types: ")
        .nth(1)
        .expect("lists the valid types")
        .trim_end_matches('.');
    let listed: Vec<&str> = list.split(", ").collect();
    assert_eq!(listed.len(), 28, "{msg}");
    for door in ["formula", "lookup", "rollup"] {
        assert!(!listed.contains(&door), "{msg}");
    }
    for costume in [
        "single_line_text",
        "multi_member",
        "button",
        "formula_date",
        "lookup_checkbox",
        "rollup_date",
    ] {
        assert!(listed.contains(&costume), "{msg}");
    }
    // Shape checks of the body.
    d.create(&tid, json!({"name": "X"}))
        .await
        .expect_error(400, "bad_request");
    d.create(&tid, json!({"name": "X", "type": ""}))
        .await
        .expect_error(400, "bad_request");
    d.create(&tid, json!({"name": "X", "type": 3}))
        .await
        .expect_error(400, "bad_request");
    d.create(&tid, json!({"type": "number"}))
        .await
        .expect_error(400, "bad_request");
    d.create(&tid, json!({"name": "   ", "type": "number"}))
        .await
        .expect_error(400, "bad_request");
    d.create(&tid, json!({"name": 7, "type": "number"}))
        .await
        .expect_error(400, "bad_request");
    d.create(&tid, json!({"name": "X", "type": "number", "options": [1]}))
        .await
        .expect_error(400, "bad_request");
    let raw = d
        .owner
        .api
        .post_raw(&format!("/api/tables/{tid}/fields"), "{nope")
        .await;
    raw.expect_error(400, "bad_request");
    // Unknown table: 404; nothing was created.
    d.create("tbl_nosuchtable1", json!({"name": "X", "type": "number"}))
        .await
        .expect_error(404, "not_found");
    assert!(d.fields(&tid).await.is_empty());
}

#[tokio::test]
async fn unknown_option_keys_are_named_and_stored_keys_tolerated() {
    let d = Db::new().await;
    let tid = d.table("T").await;
    let msg = d
        .create(
            &tid,
            json!({"name": "N", "type": "number", "options": {"decimals": 1, "sparkle": true}}),
        )
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("'sparkle'"), "{msg}");
    for valid in [
        "unique",
        "decimals",
        "choices",
        "target_table_id",
        "expression",
        "aggregation",
        "url_template",
    ] {
        assert!(msg.contains(valid), "lists {valid}: {msg}");
    }
    // A key of another costume is known (one flat shared set).
    let n = d
        .field(
            &tid,
            json!({"name": "N", "type": "number", "options": {"rich": true}}),
        )
        .await;
    // An unknown key already stored is tolerated on update; a new one is not.
    d.pg.execute(
        "UPDATE fields SET options = options || '{\"legacy\": 1}' WHERE id = $1",
        &[&id(&n)],
    )
    .await
    .unwrap();
    d.bump_schema_version().await;
    let r = d
        .patch(&id(&n), json!({"options": {"legacy": 2, "decimals": 0}}))
        .await;
    assert_eq!(
        r.expect_ok()["field"]["options"],
        json!({"legacy": 2, "decimals": 0})
    );
    let msg = d
        .patch(&id(&n), json!({"options": {"fresh": 1}}))
        .await
        .expect_error(400, "bad_request");
    assert!(
        msg.contains("'fresh'") && msg.contains("symbol_position"),
        "{msg}"
    );
    // A type change re-normalises too.
    let msg = d
        .patch(
            &id(&n),
            json!({"type": "currency", "options": {"fresh": 1}}),
        )
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("'fresh'"), "{msg}");
}
