//! Every refusal of the filter parser: the path and the message.

use crate::common::*;
use filter_lang::*;
use serde_json::{json, Value};

#[track_caller]
fn refused(v: Value, path: &str, message_part: &str) {
    match parse(&v) {
        Ok(f) => panic!("accepted {v}: {f:?}"),
        Err(e) => {
            assert_eq!(e.path, path, "{v}: {e}");
            assert!(
                e.message.contains(message_part),
                "{v}: message {:?} lacks {message_part:?}",
                e.message
            );
        }
    }
}

#[track_caller]
fn accepted(v: Value) -> Filter {
    parse(&v).unwrap_or_else(|e| panic!("{v}: {e}"))
}

#[test]
fn structure() {
    refused(json!([]), "filter", "JSON object");
    refused(json!(null), "filter", "JSON object");
    refused(json!(3), "filter", "JSON object");
    refused(json!("{"), "filter", "not valid JSON");
    refused(json!("[1]"), "filter", "JSON object");
    accepted(json!("{\"join\":\"or\"}"));
    refused(json!({"join": "xor"}), "filter.join", "Unknown join 'xor'");
    refused(json!({"join": 1}), "filter.join", "'join' must be");
    refused(json!({"join": "AND"}), "filter.join", "Unknown join");
    refused(
        json!({"conditions": {}}),
        "filter.conditions",
        "must be a list",
    );
    refused(
        json!({"conditions": "x"}),
        "filter.conditions",
        "must be a list",
    );
    refused(
        json!({"conditions": [1]}),
        "filter.conditions[0]",
        "must be an object",
    );
    refused(
        json!({"conditions": [{"field": "Name", "op": "empty"}, []]}),
        "filter.conditions[1]",
        "must be an object",
    );
    refused(
        json!({"conditions": [{"field": "Name", "op": "empty", "conditions": []}]}),
        "filter.conditions[0]",
        "not both",
    );
    refused(
        json!({"conditions": [{}]}),
        "filter.conditions[0].field",
        "needs 'field'",
    );
}

#[test]
fn absent_null_and_empty_constrain_nothing() {
    for v in [
        json!({}),
        json!({"join": null, "conditions": null}),
        json!({"join": "or", "conditions": []}),
        json!({"conditions": [{"conditions": []}, {"join": "or"}]}),
    ] {
        let f = accepted(v);
        let mut p = Params::new(1);
        assert_eq!(filter::compile(&f, &schema(), &env(), "r", &mut p), "TRUE");
    }
}

#[test]
fn nesting_two_levels() {
    accepted(
        json!({"conditions": [{"join": "or", "conditions": [{"field": "Name", "op": "empty"}]}]}),
    );
    refused(
        json!({"conditions": [{"conditions": [{"conditions": []}]}]}),
        "filter.conditions[0].conditions[0]",
        "at most 2 levels",
    );
    refused(
        json!({"conditions": [{"field": "Name", "op": "empty"}, {"conditions": [{"field": "Name", "op": "empty"}, {"join": "and"}]}]}),
        "filter.conditions[1].conditions[1]",
        "at most 2 levels",
    );
}

fn conds(n: usize) -> Vec<Value> {
    (0..n)
        .map(|_| json!({"field": "Name", "op": "empty"}))
        .collect()
}

#[test]
fn two_hundred_nodes() {
    // Top level + 199 conditions = 200 nodes.
    accepted(json!({"conditions": conds(199)}));
    refused(
        json!({"conditions": conds(200)}),
        "filter.conditions[199]",
        "at most 200 nodes",
    );
    // Top + group + 198 conditions inside = 200; one more anywhere is 201.
    accepted(json!({"conditions": [{"conditions": conds(198)}]}));
    refused(
        json!({"conditions": [{"conditions": conds(198)}, {"field": "Name", "op": "empty"}]}),
        "filter.conditions[1]",
        "at most 200 nodes",
    );
    // Empty groups count too.
    let groups: Vec<Value> = (0..200).map(|_| json!({"conditions": []})).collect();
    refused(
        json!({"conditions": groups}),
        "filter.conditions[199]",
        "at most 200 nodes",
    );
}

#[test]
fn field_references() {
    let v = |f: Value| json!({"conditions": [{"field": f, "op": "empty"}]});
    refused(
        v(json!("Foo")),
        "filter.conditions[0].field",
        "Unknown field 'Foo'.",
    );
    assert_eq!(
        parse(&v(json!("Foo"))).unwrap_err().message,
        "Unknown field 'Foo'."
    );
    refused(
        v(json!("name")),
        "filter.conditions[0].field",
        "Unknown field 'name'.",
    );
    refused(
        v(json!(3)),
        "filter.conditions[0].field",
        "field id or name",
    );
    refused(
        v(json!(null)),
        "filter.conditions[0].field",
        "needs 'field'",
    );
    refused(
        v(json!("Dup")),
        "filter.conditions[0].field",
        "refer to it by its id",
    );
    accepted(v(json!(DUP2)));
    accepted(v(json!(NAME)));
    accepted(v(json!("Name")));
    // View configs name the field with `fieldId`.
    let view = json!({"conditions": [{"fieldId": "Name", "op": "empty"}]});
    let s = schema();
    assert!(filter::parse(&view, &s, &env(), FieldKey::FieldId).is_ok());
    let e = filter::parse(&view, &s, &env(), FieldKey::Field).unwrap_err();
    assert_eq!(e.path, "filter.conditions[0].field");
}

#[test]
fn operators() {
    let v = |f: &str, op: Value| json!({"conditions": [{"field": f, "op": op, "value": "x"}]});
    refused(
        v("Name", json!(null)),
        "filter.conditions[0].op",
        "needs 'op'",
    );
    refused(
        json!({"conditions": [{"field": "Name"}]}),
        "filter.conditions[0].op",
        "needs 'op'",
    );
    refused(
        v("Name", json!(1)),
        "filter.conditions[0].op",
        "operator name",
    );
    refused(
        v("Name", json!("like")),
        "filter.conditions[0].op",
        "Unknown operator 'like'.",
    );
    refused(
        v("Price", json!("contains")),
        "filter.conditions[0].op",
        "does not apply to field 'Price'",
    );
    refused(
        v("Done", json!("is_not")),
        "filter.conditions[0].op",
        "use one of: is.",
    );
    refused(
        v("Due", json!("greater")),
        "filter.conditions[0].op",
        "does not apply",
    );
    refused(
        v("Stage", json!("has_any")),
        "filter.conditions[0].op",
        "does not apply",
    );
    refused(
        v("Tags", json!("is")),
        "filter.conditions[0].op",
        "does not apply",
    );
    refused(
        v("Related", json!("any_of")),
        "filter.conditions[0].op",
        "does not apply",
    );
    refused(
        v("Files", json!("is")),
        "filter.conditions[0].op",
        "does not apply",
    );
    refused(
        v("Go", json!("is")),
        "filter.conditions[0].op",
        "cannot be filtered",
    );
    refused(
        v("Go", json!("empty")),
        "filter.conditions[0].op",
        "cannot be filtered",
    );
    refused(
        v("Related Stage", json!("empty")),
        "filter.conditions[0].op",
        "cannot be filtered",
    );
    refused(
        v("Total", json!("contains")),
        "filter.conditions[0].op",
        "does not apply",
    );
    refused(
        v("Related Price", json!("before")),
        "filter.conditions[0].op",
        "does not apply",
    );
}

#[test]
fn operator_table_matches_part_a() {
    let s = schema();
    let ops = |id: &str| -> Vec<&str> {
        s.fields
            .iter()
            .find(|f| f.id == id)
            .unwrap()
            .operators()
            .iter()
            .map(|o| o.name())
            .collect()
    };
    assert_eq!(
        ops(NAME),
        [
            "is",
            "is_not",
            "contains",
            "not_contains",
            "empty",
            "not_empty"
        ]
    );
    assert_eq!(ops(NOTES), ops(NAME));
    assert_eq!(
        ops(PRICE),
        [
            "is",
            "is_not",
            "greater",
            "greater_or_equal",
            "less",
            "less_or_equal",
            "empty",
            "not_empty"
        ]
    );
    assert_eq!(
        ops(DUE),
        [
            "is",
            "is_not",
            "before",
            "after",
            "on_or_before",
            "on_or_after",
            "empty",
            "not_empty"
        ]
    );
    assert_eq!(ops(DONE), ["is"]);
    assert_eq!(
        ops(STAGE),
        ["is", "is_not", "any_of", "none_of", "empty", "not_empty"]
    );
    assert_eq!(
        ops(TAGS),
        [
            "has_any",
            "has_all",
            "has_none",
            "is_exactly",
            "empty",
            "not_empty"
        ]
    );
    assert_eq!(ops(RELATED), ops(TAGS));
    assert_eq!(ops(FILES), ["empty", "not_empty"]);
    assert!(ops(GO).is_empty());
    assert!(ops(REL_STAGE).is_empty());
    assert_eq!(ops(REL_PRICE), ops(PRICE));
    assert_eq!(ops(TOTAL), ops(PRICE));
    assert_eq!(ops(LATEST), ops(DUE));
}

#[test]
fn value_presence() {
    let p = "filter.conditions[0].value";
    refused(cond("Name", "empty", json!("x")), p, "takes no value");
    refused(cond("Tags", "not_empty", json!([])), p, "takes no value");
    accepted(cond("Name", "empty", json!(null)));
    accepted(cond0("Files", "not_empty"));
    refused(cond0("Name", "is"), p, "needs a value");
    refused(cond("Price", "greater", json!(null)), p, "needs a value");
}

#[test]
fn value_shapes() {
    let p = "filter.conditions[0].value";
    refused(cond("Name", "is", json!(1)), p, "Expected a string");
    refused(
        cond("Notes", "contains", json!(["a"])),
        p,
        "Expected a string",
    );
    refused(cond("Name", "is", json!("a\u{0}b")), p, "NUL");
    refused(cond("Price", "is", json!("5")), p, "written as a string");
    refused(cond("Price", "less", json!(true)), p, "finite number");
    refused(cond("Done", "is", json!("true")), p, "true or false");
    refused(cond("Done", "is", json!(1)), p, "true or false");
    refused(cond("Due", "is", json!("2024-13-01")), p, "YYYY-MM-DD");
    refused(cond("Due", "is", json!("2024-02-30")), p, "YYYY-MM-DD");
    refused(cond("Due", "is", json!("15/03/2024")), p, "YYYY-MM-DD");
    refused(
        cond("Due", "is", json!("2024-03-15T10:00:00Z")),
        p,
        "YYYY-MM-DD",
    );
    refused(cond("Due", "is", json!(20240315)), p, "YYYY-MM-DD");
    accepted(cond("At", "is", json!("2024-03-15T10:00:00Z")));
    accepted(cond("At", "is", json!("2024-03-15")));
    refused(
        cond("At", "is", json!("2024-03-15T10")),
        p,
        "full timestamp",
    );
    refused(cond("Stage", "is", json!(["New"])), p, "choice id or name");
    refused(cond("Stage", "is", json!(1)), p, "choice id or name");
    refused(cond("Stage", "any_of", json!("New")), p, "list of choice");
    refused(
        cond("Stage", "none_of", json!(["New", 2])),
        "filter.conditions[0].value[1]",
        "choice id or name",
    );
    refused(cond("Tags", "has_any", json!("red")), p, "list of choice");
    refused(
        cond("Tags", "has_all", json!([null])),
        "filter.conditions[0].value[0]",
        "choice id or name",
    );
    refused(
        cond("Related", "has_any", json!("rec_000000000001")),
        p,
        "list of record ids",
    );
    refused(
        cond("Related", "has_any", json!(["rec_000000000001", "rec_1"])),
        "filter.conditions[0].value[1]",
        "record id",
    );
    refused(
        cond("Related", "has_any", json!([{"id": "rec_000000000001"}])),
        "filter.conditions[0].value[0]",
        "record id",
    );
    refused(
        cond("Related", "is_exactly", json!(["tbl_000000000001"])),
        "filter.conditions[0].value[0]",
        "record id",
    );
    refused(
        cond("Related Price", "is", json!("3")),
        p,
        "written as a string",
    );
    refused(
        cond("Related Name", "contains", json!(3)),
        p,
        "Expected a string",
    );
    refused(
        cond("Total", "greater", json!("3")),
        p,
        "written as a string",
    );
    refused(
        cond("Latest", "after", json!("yesterday")),
        p,
        "full timestamp",
    );
    // Unresolved select values are not errors: they become the sentinel.
    accepted(cond("Stage", "is", json!("Gone")));
    accepted(cond("Tags", "has_any", json!(["nope"])));
    // Nested path.
    refused(
        json!({"conditions": [{"field": "Name", "op": "empty"}, {"join": "or", "conditions": [{"field": "Price", "op": "is", "value": "1"}]}]}),
        "filter.conditions[1].conditions[0].value",
        "written as a string",
    );
}

#[test]
fn relative_dates() {
    let p = "filter.conditions[0].value";
    let rel = |v: Value| cond("Due", "is", v);
    accepted(rel(json!({"relative": "today"})));
    accepted(rel(
        json!({"relative": "now", "offset": -366, "unit": "month"}),
    ));
    accepted(rel(
        json!({"relative": "today", "offset": 366, "unit": "week"}),
    ));
    accepted(rel(json!({"relative": "today", "offset": 2.0})));
    accepted(rel(
        json!({"relative": "today", "offset": null, "unit": null}),
    ));
    refused(rel(json!({})), p, "needs 'relative'");
    refused(rel(json!({"offset": 1})), p, "needs 'relative'");
    refused(rel(json!({"relative": "tomorrow"})), p, "'today' or 'now'");
    refused(
        rel(json!({"relative": "today", "offset": 367})),
        p,
        "at most 366",
    );
    refused(
        rel(json!({"relative": "today", "offset": -367})),
        p,
        "at most 366",
    );
    refused(
        rel(json!({"relative": "today", "offset": 1e300})),
        p,
        "at most 366",
    );
    refused(
        rel(json!({"relative": "today", "offset": 18446744073709551615u64})),
        p,
        "at most 366",
    );
    refused(
        rel(json!({"relative": "today", "offset": 1.5})),
        p,
        "whole number",
    );
    refused(
        rel(json!({"relative": "today", "offset": "1"})),
        p,
        "whole number",
    );
    refused(
        rel(json!({"relative": "today", "unit": "year"})),
        p,
        "'day', 'week' or 'month'",
    );
    refused(
        rel(json!({"relative": "today", "units": "day"})),
        p,
        "Unknown key 'units'",
    );
    refused(
        cond("Latest", "before", json!({"relative": "now", "x": 1})),
        p,
        "Unknown key 'x'",
    );
}

#[test]
fn errors_display_path_and_message() {
    let e = parse(&cond("Foo", "is", json!(1))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "filter.conditions[0].field: Unknown field 'Foo'."
    );
}

#[test]
fn list_values_are_capped_and_taken_once() {
    let ids = |n: usize| -> Vec<String> { (0..n).map(|i| format!("rec_{i:012}")).collect() };
    let at_cap = serde_json::json!({"conditions": [{"field": RELATED, "op": "has_any", "value": ids(filter::MAX_LIST_VALUES)}]});
    assert!(parse(&at_cap).is_ok());
    let over = serde_json::json!({"conditions": [{"field": RELATED, "op": "has_any", "value": ids(filter::MAX_LIST_VALUES + 1)}]});
    let e = parse(&over).unwrap_err();
    assert_eq!(e.path, "filter.conditions[0].value");
    assert!(e.message.contains("at most 1000 values"), "{e}");
    let tags = serde_json::json!({"conditions": [{"field": TAGS, "op": "has_any", "value": vec!["x"; 1001]}]});
    assert!(parse(&tags).is_err());
    // Duplicates are taken once, first occurrence first.
    let dup = serde_json::json!({"conditions": [{"field": RELATED, "op": "has_all", "value": ["rec_000000000002", "rec_000000000001", "rec_000000000002"]}]});
    let (_, values) = sql(&dup);
    assert!(
        values.contains(&SqlValue::TextArray(vec![
            "rec_000000000002".into(),
            "rec_000000000001".into()
        ])),
        "{values:?}"
    );
}
