//! Issue 13: arbitrary strings as values (quotes, backslashes, `$1::`, `$$`,
//! `--`, `;`, comment markers, very long) never change the SQL text of a
//! filter, a lookup's or rollup's `conditions`, or a sort's keyset: the
//! text is the same for any two values, the values are only ever bound
//! parameters; and against real PostgreSQL they round-trip as data (a
//! record holding the value is exactly what an `is` condition finds).
//! NUL, which PostgreSQL text cannot hold, is refused at parse time (a 400
//! for the API), never sent.

use filter_lang::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{json, Value};
use tokio_postgres::Client;

use crate::common::*;

/// Strings made mostly of what breaks quoting, plus plain text; up to very
/// long ones.
fn nasty() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("'".to_owned()),
        Just("''".to_owned()),
        Just("\\".to_owned()),
        Just("\\'".to_owned()),
        Just("$1::".to_owned()),
        Just("$2::text".to_owned()),
        Just("$$".to_owned()),
        Just("$a$".to_owned()),
        Just("--".to_owned()),
        Just(";".to_owned()),
        Just("/*".to_owned()),
        Just("*/".to_owned()),
        Just("\"".to_owned()),
        Just("%".to_owned()),
        Just("_".to_owned()),
        Just(" || (SELECT chr(120) FROM pg_sleep(3)) || ".to_owned()),
        Just("' OR TRUE OR '".to_owned()),
        Just("E'".to_owned()),
        Just("\u{1}\n\t\r".to_owned()),
        Just("ünï😀".to_owned()),
        "[a-zA-Z0-9 ]{0,8}",
        "\\PC{0,6}",
    ];
    prop_oneof![
        8 => prop::collection::vec(piece, 0..12).prop_map(|p| p.concat()),
        1 => ("[$'\\\\-]{1,3}", 2000..20000usize).prop_map(|(s, n)| s.repeat(n / s.len().max(1))),
    ]
    .prop_map(|s| s.replace('\0', ""))
}

/// The fixture schema plus a lookup of the other table's Name and a count
/// rollup, both with `conditions` (Name is `a` or contains `b`), and a
/// lookup whose conditions name the first lookup's mirror (nested).
fn with_conditions(db_schema: &str, a: &str, b: &str) -> Schema {
    let others = crate::conditions::others_schema(db_schema);
    let cond = json!({"join": "or", "conditions": [
        {"field": "Name", "op": "is", "value": a},
        {"field": "Name", "op": "contains", "value": b},
        {"field": "Back Name", "op": "is", "value": a}]});
    let filter = filter::parse_value(&cond, &others, &env()).expect("conditions parse");
    let conditions = || {
        Some(Box::new(Conditions {
            schema: std::sync::Arc::new(others.clone()),
            filter: filter.clone(),
        }))
    };
    let link = link_spec(db_schema);
    let mut s = schema_in(db_schema);
    s.fields.push(FieldDef::new(
        "fld_condname0001",
        "Cond Name",
        "lookup_text",
        Storage::Lookup {
            link: link.clone(),
            target: Box::new(Storage::Text),
            target_column: O_NAME.into(),
            conditions: conditions(),
        },
    ));
    s.fields.push(FieldDef::new(
        "fld_condcount001",
        "Cond Count",
        "rollup_number",
        Storage::Rollup {
            link,
            aggregation: Aggregation::Count,
            target_column: None,
            result: Box::new(Storage::Number),
            conditions: conditions(),
        },
    ));
    s
}

/// A filter using `v` wherever a value goes: text operators on a text
/// field, a lookup, a conditioned lookup, a select by name.
fn filter_of(v: &str) -> Value {
    json!({"join": "or", "conditions": [
        {"field": "Name", "op": "is", "value": v},
        {"field": "Notes", "op": "not_contains", "value": v},
        {"field": "Related Name", "op": "contains", "value": v},
        {"field": "Cond Name", "op": "is_not", "value": v},
        {"field": "Cond Count", "op": "greater", "value": 0},
        {"field": "Stage", "op": "is", "value": v},
        {"join": "and", "conditions": [{"field": "Tags", "op": "has_any", "value": [v, "red"]}]}]})
}

/// The SQL text and values of `filter_of(v)` over a schema whose
/// conditions hold `a` and `b`.
fn compiled(a: &str, b: &str, v: &str) -> (String, Vec<SqlValue>) {
    let s = with_conditions("db_test", a, b);
    let f = filter::parse_value(&filter_of(v), &s, &env()).expect("filter parses");
    let mut p = Params::new(3);
    let sql = filter::compile(&f, &s, &env(), "r", &mut p);
    (sql, p.into_values())
}

fn texts(values: &[SqlValue]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| match v {
            SqlValue::Text(s) => vec![s.clone()],
            SqlValue::TextArray(a) => a.clone(),
            _ => vec![],
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Any two values give the same SQL text; each value is bound as is
    /// (or as its escaped `contains` pattern).
    #[test]
    fn values_never_change_the_sql(a in nasty(), b in nasty(), v in nasty(), w in nasty()) {
        // A select value that names a choice resolves to its id (a
        // parameter); any other matches nothing (no parameter).
        let named = |x: &str| STAGES.iter().chain(&TAG_CHOICES).any(|(id, n)| x == *id || x == *n);
        prop_assume!(![&a, &v].iter().any(|x| named(x)));
        let (base, _) = compiled("a", "b", "v");
        let (sql, values) = compiled(&a, &b, &v);
        prop_assert_eq!(&sql, &base);
        let (other, _) = compiled(&w, &v, &a);
        prop_assert_eq!(&other, &base);
        let bound = texts(&values);
        prop_assert!(bound.contains(&v));
        prop_assert!(bound.contains(&a));
        prop_assert!(bound.contains(&contains_pattern(&b)));
        prop_assert!(bound.contains(&contains_pattern(&v)));
    }

    /// A keyset seek from a bookmark: its values are bound too.
    #[test]
    fn bookmark_values_never_change_the_sql(a in nasty(), b in nasty()) {
        let s = schema();
        let sql = |name: &str, notes: &str| {
            let mut p = Params::new(1);
            let plan = parse_sort("Name,-Notes", &s).unwrap().plan(&s, "r", &mut p);
            let b = Bookmark {
                order: String::new(),
                values: vec![Some(name.to_owned()), Some(notes.to_owned())],
                id: "rec_000000000001".into(),
            };
            let resume = plan.resume(&b, "", &mut p).expect("resume");
            let text = plan.page_sql("r.id", "t AS r", "TRUE", Some(&resume), "51");
            (text, texts(p.values()))
        };
        let (base, _) = sql("x", "y");
        let (text, values) = sql(&a, &b);
        prop_assert_eq!(text, base);
        prop_assert!(values.contains(&a) && values.contains(&b));
    }

    /// NUL cannot be stored in PostgreSQL text: refused with the path of
    /// the value, for every text-valued place.
    #[test]
    fn nul_is_refused_at_parse(pre in nasty(), post in nasty()) {
        let v = format!("{pre}\0{post}");
        let s = with_conditions("db_test", "a", "b");
        for field in ["Name", "Notes", "Related Name", "Cond Name"] {
            let f = json!({"conditions": [{"field": field, "op": "is", "value": v}]});
            let e = filter::parse_value(&f, &s, &env()).expect_err("NUL refused");
            prop_assert_eq!(e.path, "filter.conditions[0].value");
        }
    }
}

#[tokio::test]
async fn values_round_trip_in_postgres() {
    crate::postgres::with_database(|c| async move { round_trips(&c).await }).await;
}

/// Against PostgreSQL: every value stored under `Name` (bound on insert) is
/// found by `Name is value`, and by a conditioned lookup whose conditions
/// hold it, in a table holding all the others too.
async fn round_trips(c: &Client) {
    c.batch_execute(
        "CREATE SCHEMA inj;
         CREATE TABLE inj.records (id text PRIMARY KEY, deleted_at timestamptz,
             \"fld_name00000001\" text, \"fld_done00000001\" boolean);
         CREATE TABLE inj.others (id text PRIMARY KEY, deleted_at timestamptz,
             \"fld_oprice000001\" numeric, \"fld_oname0000001\" text, \"fld_oat000000001\" timestamptz);
         CREATE TABLE inj.conn (rec text NOT NULL, other text NOT NULL, PRIMARY KEY (rec, other));",
    )
    .await
    .expect("create tables");
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut values: Vec<String> = Vec::new();
    for _ in 0..24 {
        let tree = nasty().new_tree(&mut runner).expect("value");
        values.push(tree.current());
    }
    values.extend(
        [
            "x$1::y",
            " || (SELECT chr(120) FROM pg_sleep(3)) || ",
            "' OR TRUE OR '",
            "\\",
            "$$",
        ]
        .map(str::to_owned),
    );
    values.sort();
    values.dedup();
    for (i, v) in values.iter().enumerate() {
        let (rec, other) = (format!("rec_inj{i:09}"), format!("rec_oin{i:09}"));
        c.execute(
            "INSERT INTO inj.records (id, \"fld_name00000001\") VALUES ($1, $2)",
            &[&rec, v],
        )
        .await
        .expect("insert record");
        c.execute(
            "INSERT INTO inj.others (id, \"fld_oname0000001\") VALUES ($1, $2)",
            &[&other, v],
        )
        .await
        .expect("insert other");
        c.execute("INSERT INTO inj.conn VALUES ($1, $2)", &[&rec, &other])
            .await
            .expect("insert link");
    }
    for (i, v) in values.iter().enumerate() {
        let s = with_conditions("inj", v, "\u{2}never\u{2}");
        let mut found = Vec::new();
        for filter in [
            json!({"conditions": [{"field": "Name", "op": "is", "value": v}]}),
            json!({"conditions": [{"field": "Cond Name", "op": "not_empty"}]}),
            json!({"conditions": [{"field": "Cond Count", "op": "is", "value": 1}]}),
        ] {
            let f = filter::parse_value(&filter, &s, &env()).expect("parse");
            let mut p = Params::new(1);
            let cond = filter::compile(&f, &s, &env(), "r", &mut p);
            let sql = format!("SELECT r.id FROM inj.records AS r WHERE {cond} ORDER BY r.id");
            let rows = crate::postgres::query(c, &sql, p.values()).await;
            found.push(
                rows.iter()
                    .map(|r| r.get::<_, String>(0))
                    .collect::<Vec<_>>(),
            );
        }
        let want = vec![format!("rec_inj{i:09}")];
        assert_eq!(found, vec![want.clone(), want.clone(), want], "value {v:?}");
    }
}
