//! The SQL of every operator, pinned.

use crate::common::*;
use chrono::{DateTime, NaiveDate, Utc};
use filter_lang::SqlValue::*;
use filter_lang::*;
use serde_json::json;

fn col(id: &str) -> String {
    format!("\"r\".\"{id}\"")
}

fn day(s: &str) -> NaiveDate {
    s.parse().unwrap()
}

fn ts(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

#[track_caller]
fn check(v: serde_json::Value, want_sql: &str, want_params: Vec<SqlValue>) {
    let (sql, params) = sql(&v);
    assert_eq!(sql, want_sql, "{v}");
    assert_eq!(params, want_params, "{v}");
}

#[test]
fn text() {
    let c = col(NAME);
    check(
        cond("Name", "is", json!("Ab")),
        &format!("({c} IS NOT NULL AND {c} = $1::text)"),
        vec![Text("Ab".into())],
    );
    check(
        cond("Name", "is_not", json!("Ab")),
        &format!("({c} IS NULL OR {c} <> $1::text)"),
        vec![Text("Ab".into())],
    );
    check(
        cond("Name", "contains", json!("50%_\\x")),
        &format!("({c} IS NOT NULL AND {c} ILIKE $1::text ESCAPE E'\\\\')"),
        vec![Text("%50\\%\\_\\\\x%".into())],
    );
    check(
        cond("Name", "not_contains", json!("a")),
        &format!("({c} IS NULL OR {c} NOT ILIKE $1::text ESCAPE E'\\\\')"),
        vec![Text("%a%".into())],
    );
    check(
        cond0("Name", "empty"),
        &format!("({c} IS NULL OR {c} = '')"),
        vec![],
    );
    check(
        cond0("Notes", "not_empty"),
        &format!("({0} IS NOT NULL AND {0} <> '')", col(NOTES)),
        vec![],
    );
}

#[test]
fn number() {
    let c = col(PRICE);
    let n = |s: &str| Numeric(s.into());
    check(
        cond("Price", "is", json!(1.5)),
        &format!("({c} IS NOT NULL AND {c} = $1::numeric)"),
        vec![n("1.5")],
    );
    check(
        cond("Price", "is_not", json!(-2)),
        &format!("({c} IS NULL OR {c} <> $1::numeric)"),
        vec![n("-2")],
    );
    for (op, sym) in [
        ("greater", ">"),
        ("greater_or_equal", ">="),
        ("less", "<"),
        ("less_or_equal", "<="),
    ] {
        check(
            cond("Price", op, json!(10)),
            &format!("({c} IS NOT NULL AND {c} {sym} $1::numeric)"),
            vec![n("10")],
        );
    }
    check(
        cond("Price", "is", json!(1e300)),
        &format!("({c} IS NOT NULL AND {c} = $1::numeric)"),
        vec![n("1e+300")],
    );
    check(cond0("Price", "empty"), &format!("({c} IS NULL)"), vec![]);
    check(
        cond0("Price", "not_empty"),
        &format!("({c} IS NOT NULL)"),
        vec![],
    );
}

#[test]
fn checkbox() {
    let c = col(DONE);
    check(
        cond("Done", "is", json!(true)),
        &format!("({c} IS TRUE)"),
        vec![],
    );
    check(
        cond("Done", "is", json!(false)),
        &format!("({c} IS NOT TRUE)"),
        vec![],
    );
}

#[test]
fn date_only() {
    let c = col(DUE);
    for (op, sym) in [
        ("is", "="),
        ("before", "<"),
        ("after", ">"),
        ("on_or_before", "<="),
        ("on_or_after", ">="),
    ] {
        check(
            cond("Due", op, json!("2024-03-01")),
            &format!("({c} IS NOT NULL AND {c} {sym} $1::date)"),
            vec![Date(day("2024-03-01"))],
        );
    }
    check(
        cond("Due", "is_not", json!("2024-03-01")),
        &format!("({c} IS NULL OR {c} <> $1::date)"),
        vec![Date(day("2024-03-01"))],
    );
    check(cond0("Due", "empty"), &format!("({c} IS NULL)"), vec![]);
    // now = 2024-03-15T12:30Z = 13:30 in Paris.
    let rel = |v| cond("Due", "is", v);
    let want = |d: &str| {
        (
            format!("({c} IS NOT NULL AND {c} = $1::date)"),
            vec![Date(day(d))],
        )
    };
    for (v, d) in [
        (json!({"relative": "today"}), "2024-03-15"),
        (json!({"relative": "now"}), "2024-03-15"),
        (json!({"relative": "today", "offset": -1}), "2024-03-14"),
        (
            json!({"relative": "today", "offset": 2, "unit": "week"}),
            "2024-03-29",
        ),
        (
            json!({"relative": "today", "offset": -1, "unit": "month"}),
            "2024-02-15",
        ),
        (json!({"relative": "now", "offset": 366}), "2025-03-16"),
    ] {
        let (s, p) = want(d);
        check(rel(v), &s, p);
    }
}

#[test]
fn date_with_time() {
    let c = col(AT);
    // 2024-03-01 in Paris (UTC+1): [2024-02-29T23:00Z, 2024-03-01T23:00Z).
    let start = Timestamp(ts("2024-02-29T23:00:00Z"));
    let end = Timestamp(ts("2024-03-01T23:00:00Z"));
    let d = json!("2024-03-01");
    check(
        cond("At", "is", d.clone()),
        &format!("({c} IS NOT NULL AND {c} >= $1::timestamptz AND {c} < $2::timestamptz)"),
        vec![start.clone(), end.clone()],
    );
    check(
        cond("At", "is_not", d.clone()),
        &format!("({c} IS NULL OR {c} < $1::timestamptz OR {c} >= $2::timestamptz)"),
        vec![start.clone(), end.clone()],
    );
    check(
        cond("At", "before", d.clone()),
        &format!("({c} IS NOT NULL AND {c} < $1::timestamptz)"),
        vec![start.clone()],
    );
    check(
        cond("At", "on_or_after", d.clone()),
        &format!("({c} IS NOT NULL AND {c} >= $1::timestamptz)"),
        vec![start.clone()],
    );
    check(
        cond("At", "after", d.clone()),
        &format!("({c} IS NOT NULL AND {c} >= $1::timestamptz)"),
        vec![end.clone()],
    );
    check(
        cond("At", "on_or_before", d),
        &format!("({c} IS NOT NULL AND {c} < $1::timestamptz)"),
        vec![end],
    );
    // Across the spring-forward day the day is 23 hours long.
    check(
        cond("At", "is", json!("2024-03-31")),
        &format!("({c} IS NOT NULL AND {c} >= $1::timestamptz AND {c} < $2::timestamptz)"),
        vec![
            Timestamp(ts("2024-03-30T23:00:00Z")),
            Timestamp(ts("2024-03-31T22:00:00Z")),
        ],
    );
    // Instant against instant.
    check(
        cond("At", "after", json!("2024-03-01T10:00:00+02:00")),
        &format!("({c} IS NOT NULL AND {c} > $1::timestamptz)"),
        vec![Timestamp(ts("2024-03-01T08:00:00Z"))],
    );
    check(
        cond("At", "is_not", json!("2024-03-01T10:00")),
        &format!("({c} IS NULL OR {c} <> $1::timestamptz)"),
        vec![Timestamp(ts("2024-03-01T09:00:00Z"))],
    );
    // Relative: `now` is the instant; `today` the whole day.
    check(
        cond("At", "on_or_before", json!({"relative": "now"})),
        &format!("({c} IS NOT NULL AND {c} <= $1::timestamptz)"),
        vec![Timestamp(ts("2024-03-15T12:30:00Z"))],
    );
    check(
        cond(
            "At",
            "before",
            json!({"relative": "now", "offset": 1, "unit": "day"}),
        ),
        &format!("({c} IS NOT NULL AND {c} < $1::timestamptz)"),
        vec![Timestamp(ts("2024-03-16T12:30:00Z"))],
    );
    check(
        cond("At", "is", json!({"relative": "today", "offset": 1})),
        &format!("({c} IS NOT NULL AND {c} >= $1::timestamptz AND {c} < $2::timestamptz)"),
        vec![
            Timestamp(ts("2024-03-15T23:00:00Z")),
            Timestamp(ts("2024-03-16T23:00:00Z")),
        ],
    );
}

#[test]
fn single_select() {
    let c = col(STAGE);
    check(
        cond("Stage", "is", json!("Doing")),
        &format!("({c} IS NOT NULL AND {c} = $1::text)"),
        vec![Text("stg00002".into())],
    );
    check(
        cond("Stage", "is", json!("stg00003")),
        &format!("({c} IS NOT NULL AND {c} = $1::text)"),
        vec![Text("stg00003".into())],
    );
    check(
        cond("Stage", "is_not", json!("New")),
        &format!("({c} IS NULL OR {c} <> $1::text)"),
        vec![Text("stg00001".into())],
    );
    check(
        cond(
            "Stage",
            "any_of",
            json!(["New", "Gone", "stg00001", "Done"]),
        ),
        &format!("({c} IS NOT NULL AND {c} = ANY($1::text[]))"),
        vec![TextArray(vec!["stg00001".into(), "stg00003".into()])],
    );
    check(
        cond("Stage", "none_of", json!(["Doing"])),
        &format!("({c} IS NULL OR NOT ({c} = ANY($1::text[])))"),
        vec![TextArray(vec!["stg00002".into()])],
    );
    check(
        cond0("Stage", "empty"),
        &format!("({c} IS NULL OR {c} = '')"),
        vec![],
    );
    check(
        cond0("Stage", "not_empty"),
        &format!("({c} IS NOT NULL AND {c} <> '')"),
        vec![],
    );
}

#[test]
fn select_sentinel() {
    check(cond("Stage", "is", json!("Gone")), "FALSE", vec![]);
    check(cond("Stage", "is_not", json!("Gone")), "TRUE", vec![]);
    check(cond("Stage", "any_of", json!(["Gone"])), "FALSE", vec![]);
    check(cond("Stage", "any_of", json!([])), "FALSE", vec![]);
    check(cond("Stage", "none_of", json!(["Gone"])), "TRUE", vec![]);
    check(cond("Tags", "has_any", json!(["nope"])), "FALSE", vec![]);
    check(
        cond("Tags", "has_all", json!(["red", "nope"])),
        "FALSE",
        vec![],
    );
    check(cond("Tags", "is_exactly", json!(["nope"])), "FALSE", vec![]);
    check(cond("Tags", "has_none", json!(["nope"])), "TRUE", vec![]);
    let c = col(TAGS);
    check(
        cond("Tags", "has_any", json!(["nope", "red"])),
        &format!("({c} IS NOT NULL AND {c} && $1::text[])"),
        vec![TextArray(vec!["tag00001".into()])],
    );
}

#[test]
fn multi_select() {
    let c = col(TAGS);
    let ids = |xs: &[&str]| TextArray(xs.iter().map(|s| s.to_string()).collect());
    check(
        cond("Tags", "has_any", json!(["red", "tag00003"])),
        &format!("({c} IS NOT NULL AND {c} && $1::text[])"),
        vec![ids(&["tag00001", "tag00003"])],
    );
    check(
        cond("Tags", "has_all", json!(["red", "red", "tag00001", "blue"])),
        &format!("({c} IS NOT NULL AND {c} @> $1::text[])"),
        vec![ids(&["tag00001", "tag00003"])],
    );
    check(
        cond("Tags", "has_none", json!(["green"])),
        &format!("({c} IS NULL OR NOT ({c} && $1::text[]))"),
        vec![ids(&["tag00002"])],
    );
    check(
        cond("Tags", "is_exactly", json!(["blue", "red", "blue"])),
        &format!("({c} IS NOT NULL AND {c} @> $1::text[] AND {c} <@ $1::text[])"),
        vec![ids(&["tag00003", "tag00001"])],
    );
    check(cond("Tags", "has_all", json!([])), "TRUE", vec![]);
    check(cond("Tags", "has_none", json!([])), "TRUE", vec![]);
    check(cond("Tags", "has_any", json!([])), "FALSE", vec![]);
    check(cond("Tags", "is_exactly", json!([])), "FALSE", vec![]);
    check(
        cond0("Tags", "empty"),
        &format!("({c} IS NULL OR cardinality({c}) = 0)"),
        vec![],
    );
    check(
        cond0("Tags", "not_empty"),
        &format!("({c} IS NOT NULL AND cardinality({c}) > 0)"),
        vec![],
    );
    let f = col(FILES);
    check(
        cond0("Files", "empty"),
        &format!("({f} IS NULL OR cardinality({f}) = 0)"),
        vec![],
    );
}

#[test]
fn multi_member_quirks() {
    check(cond("People", "has_any", json!(["a@b.c"])), "FALSE", vec![]);
    check(cond("People", "has_all", json!(["a@b.c"])), "FALSE", vec![]);
    check(cond("People", "has_all", json!([])), "FALSE", vec![]);
    check(cond("People", "has_none", json!(["a@b.c"])), "TRUE", vec![]);
    check(
        cond("People", "is_exactly", json!(["a@b.c"])),
        "FALSE",
        vec![],
    );
    let c = col(PEOPLE);
    check(
        cond0("People", "not_empty"),
        &format!("({c} IS NOT NULL AND cardinality({c}) > 0)"),
        vec![],
    );
}

const FROM: &str =
    "FROM \"db_test\".\"conn\" AS \"__fl_c\" JOIN \"db_test\".\"others\" AS \"__fl_t\" \
ON \"__fl_t\".\"id\" = \"__fl_c\".\"other\" AND \"__fl_t\".\"deleted_at\" IS NULL \
WHERE \"__fl_c\".\"rec\" = \"r\".\"id\"";
const OTHER: &str = "\"__fl_c\".\"other\"";

#[test]
fn link() {
    let recs = |xs: &[&str]| TextArray(xs.iter().map(|s| s.to_string()).collect());
    let a = "rec_aaaaaaaaaaaa";
    let b = "rec_bbbbbbbbbbbb";
    check(
        cond("Related", "has_any", json!([a, b, a])),
        &format!("EXISTS (SELECT 1 {FROM} AND {OTHER} = ANY($1::text[]))"),
        vec![recs(&[a, b])],
    );
    check(
        cond("Related", "has_none", json!([a])),
        &format!("NOT EXISTS (SELECT 1 {FROM} AND {OTHER} = ANY($1::text[]))"),
        vec![recs(&[a])],
    );
    check(
        cond("Related", "has_all", json!([a, b, b])),
        &format!("((SELECT count(DISTINCT {OTHER}) {FROM} AND {OTHER} = ANY($1::text[])) = cardinality($1::text[]))"),
        vec![recs(&[a, b])],
    );
    check(
        cond("Related", "is_exactly", json!([b, a, b])),
        &format!(
            "(SELECT count(DISTINCT {OTHER}) FILTER (WHERE {OTHER} = ANY($1::text[])) = cardinality($1::text[]) \
             AND count(*) FILTER (WHERE NOT ({OTHER} = ANY($1::text[]))) = 0 {FROM})"
        ),
        vec![recs(&[b, a])],
    );
    check(
        cond0("Related", "empty"),
        &format!("NOT EXISTS (SELECT 1 {FROM})"),
        vec![],
    );
    check(
        cond0("Related", "not_empty"),
        &format!("EXISTS (SELECT 1 {FROM})"),
        vec![],
    );
    check(cond("Related", "has_any", json!([])), "FALSE", vec![]);
    check(cond("Related", "has_all", json!([])), "TRUE", vec![]);
    check(cond("Related", "is_exactly", json!([])), "FALSE", vec![]);
}

#[test]
fn lookup_and_rollup() {
    let t = format!("\"__fl_t\".\"{O_PRICE}\"");
    check(
        cond("Related Price", "greater", json!(3)),
        &format!("EXISTS (SELECT 1 {FROM} AND ({t} IS NOT NULL AND {t} > $1::numeric))"),
        vec![Numeric("3".into())],
    );
    // Negated operators are exact negations of their positive twins.
    check(
        cond("Related Price", "is_not", json!(3)),
        &format!("NOT EXISTS (SELECT 1 {FROM} AND ({t} IS NOT NULL AND {t} = $1::numeric))"),
        vec![Numeric("3".into())],
    );
    check(
        cond0("Related Price", "empty"),
        &format!("NOT EXISTS (SELECT 1 {FROM} AND ({t} IS NOT NULL))"),
        vec![],
    );
    let n = format!("\"__fl_t\".\"{O_NAME}\"");
    check(
        cond("Related Name", "not_contains", json!("x")),
        &format!("NOT EXISTS (SELECT 1 {FROM} AND ({n} IS NOT NULL AND {n} ILIKE $1::text ESCAPE E'\\\\'))"),
        vec![Text("%x%".into())],
    );
    check(
        cond0("Related Name", "not_empty"),
        &format!("EXISTS (SELECT 1 {FROM} AND ({n} IS NOT NULL AND {n} <> ''))"),
        vec![],
    );
    let sum = format!("(SELECT sum(\"__fl_t\".\"{O_PRICE}\") {FROM})");
    check(
        cond("Total", "less_or_equal", json!(7)),
        &format!("({sum} IS NOT NULL AND {sum} <= $1::numeric)"),
        vec![Numeric("7".into())],
    );
    let max = format!("(SELECT max(\"__fl_t\".\"{O_AT}\") {FROM})");
    check(
        cond("Latest", "is", json!("2024-03-01")),
        &format!("({max} IS NOT NULL AND {max} >= $1::timestamptz AND {max} < $2::timestamptz)"),
        vec![
            Timestamp(ts("2024-02-29T23:00:00Z")),
            Timestamp(ts("2024-03-01T23:00:00Z")),
        ],
    );
}

#[test]
fn groups_and_numbering() {
    let v = json!({"join": "or", "conditions": [
        {"field": "Name", "op": "is", "value": "a"},
        {"conditions": []},
        {"join": "and", "conditions": [
            {"field": "Price", "op": "greater", "value": 1},
            {"field": "Done", "op": "is", "value": true}
        ]},
        {"join": "or", "conditions": [{"field": "Stage", "op": "empty"}]}
    ]});
    let s = schema();
    let f = filter::parse_value(&v, &s, &env()).unwrap();
    let mut p = Params::new(7);
    let sql = filter::compile(&f, &s, &env(), "r", &mut p);
    let (n, pr, d, st) = (col(NAME), col(PRICE), col(DONE), col(STAGE));
    assert_eq!(
        sql,
        format!(
            "(({n} IS NOT NULL AND {n} = $7::text) OR (({pr} IS NOT NULL AND {pr} > $8::numeric) AND ({d} IS TRUE)) OR ({st} IS NULL OR {st} = ''))"
        )
    );
    assert_eq!(p.next_index(), 9);
    // A view filter ANDed with the request's.
    let both = f.clone().and(Filter::empty());
    let mut p2 = Params::new(1);
    assert_eq!(
        filter::compile(&both, &s, &env(), "r", &mut p2)
            .matches("$")
            .count(),
        2
    );
}

/// `compile_where` drops the `IS NOT NULL` guards of strict tests and keeps
/// every test that matches empty cells (`is_not`, `empty`, `is false`);
/// `postgres.rs` checks that both forms select the same rows.
#[test]
fn where_only_form() {
    let v = json!({"join": "or", "conditions": [
        {"field": "Name", "op": "contains", "value": "a"},
        {"field": "Name", "op": "is_not", "value": "b"},
        {"join": "and", "conditions": [
            {"field": "Price", "op": "greater", "value": 1},
            {"field": "Done", "op": "is", "value": false},
            {"field": "Stage", "op": "empty"}
        ]}
    ]});
    let s = schema();
    let f = filter::parse_value(&v, &s, &env()).unwrap();
    let (mut p, mut pw) = (Params::new(1), Params::new(1));
    let sql = filter::compile(&f, &s, &env(), "r", &mut p);
    let where_sql = filter::compile_where(&f, &s, &env(), "r", &mut pw);
    let (n, pr, d, st) = (col(NAME), col(PRICE), col(DONE), col(STAGE));
    assert_eq!(
        sql,
        format!(
            "(({n} IS NOT NULL AND {n} ILIKE $1::text ESCAPE E'\\\\') OR ({n} IS NULL OR {n} <> $2::text) OR (({pr} IS NOT NULL AND {pr} > $3::numeric) AND ({d} IS NOT TRUE) AND ({st} IS NULL OR {st} = '')))"
        )
    );
    assert_eq!(
        where_sql,
        format!(
            "(({n} ILIKE $1::text ESCAPE E'\\\\') OR ({n} IS NULL OR {n} <> $2::text) OR (({pr} > $3::numeric) AND ({d} IS NOT TRUE) AND ({st} IS NULL OR {st} = '')))"
        )
    );
    assert_eq!(p.values(), pw.values());
}
