//! Lookups and rollups with `conditions` (a filter over the linked table):
//! a filter on them sees only the linked live records the conditions admit,
//! as their cells do. The pinned SQL (conditions compiled one level deeper
//! with their own aliases, nesting included) and, against PostgreSQL, the
//! selected sets computed by hand.

use std::collections::BTreeSet;

use filter_lang::SqlValue::*;
use filter_lang::*;
use serde_json::json;
use tokio_postgres::Client;

use crate::common::*;
use crate::postgres::{expect, ids_in, Other, Rec, DB_SCHEMA};

pub const ALPHA_PRICE: &str = "fld_alphaprice01";
pub const ALPHA_COUNT: &str = "fld_alphacount01";
pub const ALPHA_TOTAL: &str = "fld_alphatotal01";
pub const FRIENDLY_PRICE: &str = "fld_friendly0001";
/// On the other table: the names of the records linking to it.
pub const BACK_NAME: &str = "fld_backname0001";

/// The link from the other table back to the records (the same connector
/// read the other way).
fn back_link(db_schema: &str) -> LinkSpec {
    LinkSpec {
        schema: db_schema.into(),
        connector: "conn".into(),
        own_column: "other".into(),
        other_column: "rec".into(),
        target_table: "records".into(),
    }
}

/// The other table: Price, Name, At, and `Back Name`, a lookup of the
/// linking records' names restricted to checked ones (`Done is true`).
pub fn others_schema(db_schema: &str) -> Schema {
    let done_only = filter::parse_value(
        &cond("Done", "is", json!(true)),
        &schema_in(db_schema),
        &env(),
    )
    .unwrap();
    Schema::new(vec![
        FieldDef::new(O_PRICE, "Price", "number", Storage::Number),
        FieldDef::new(O_NAME, "Name", "single_line_text", Storage::Text),
        FieldDef::new(O_AT, "At", "date", Storage::Date { include_time: true }),
        FieldDef::new(
            BACK_NAME,
            "Back Name",
            "lookup_text",
            Storage::Lookup {
                link: back_link(db_schema),
                target: Box::new(Storage::Text),
                target_column: NAME.into(),
                conditions: Some(Box::new(Conditions {
                    schema: std::sync::Arc::new(schema_in(db_schema)),
                    filter: done_only,
                })),
            },
        ),
    ])
}

fn conditions(db_schema: &str, v: serde_json::Value) -> Option<Box<Conditions>> {
    let schema = others_schema(db_schema);
    let filter = filter::parse_value(&v, &schema, &env()).unwrap();
    Some(Box::new(Conditions {
        schema: std::sync::Arc::new(schema),
        filter,
    }))
}

/// The fixture table plus `Alpha Price` (lookup of Price over linked records
/// named Alpha), `Alpha Count` / `Alpha Total` (count / sum rollups, same
/// conditions) and `Friendly Price` (lookup of Price over linked records
/// whose `Back Name` contains "a": conditions naming a lookup that has
/// conditions of its own).
pub fn schema_with_conditions(db_schema: &str) -> Schema {
    let mut s = schema_in(db_schema);
    let link = link_spec(db_schema);
    let alpha = || conditions(db_schema, cond("Name", "is", json!("Alpha")));
    s.fields.extend([
        FieldDef::new(
            ALPHA_PRICE,
            "Alpha Price",
            "lookup_number",
            Storage::Lookup {
                link: link.clone(),
                target: Box::new(Storage::Number),
                target_column: O_PRICE.into(),
                conditions: alpha(),
            },
        ),
        FieldDef::new(
            ALPHA_COUNT,
            "Alpha Count",
            "rollup_number",
            Storage::Rollup {
                link: link.clone(),
                aggregation: Aggregation::Count,
                target_column: None,
                result: Box::new(Storage::Number),
                conditions: alpha(),
            },
        ),
        FieldDef::new(
            ALPHA_TOTAL,
            "Alpha Total",
            "rollup_number",
            Storage::Rollup {
                link: link.clone(),
                aggregation: Aggregation::Sum,
                target_column: Some(O_PRICE.into()),
                result: Box::new(Storage::Number),
                conditions: alpha(),
            },
        ),
        FieldDef::new(
            FRIENDLY_PRICE,
            "Friendly Price",
            "lookup_number",
            Storage::Lookup {
                link,
                target: Box::new(Storage::Number),
                target_column: O_PRICE.into(),
                conditions: conditions(db_schema, cond("Back Name", "contains", json!("a"))),
            },
        ),
    ]);
    s
}

fn compiled(v: serde_json::Value) -> (String, Vec<SqlValue>) {
    let s = schema_with_conditions("db_test");
    let f = filter::parse_value(&v, &s, &env()).unwrap_or_else(|e| panic!("{v}: {e}"));
    let mut p = Params::new(1);
    let sql = filter::compile(&f, &s, &env(), "r", &mut p);
    (sql, p.into_values())
}

const FROM: &str =
    "FROM \"db_test\".\"conn\" AS \"__fl_c\" JOIN \"db_test\".\"others\" AS \"__fl_t\" \
ON \"__fl_t\".\"id\" = \"__fl_c\".\"other\" AND \"__fl_t\".\"deleted_at\" IS NULL \
WHERE \"__fl_c\".\"rec\" = \"r\".\"id\"";

#[test]
fn conditions_restrict_the_linked_records() {
    let price = format!("\"__fl_t\".\"{O_PRICE}\"");
    let alpha =
        format!("(\"__fl_t\".\"{O_NAME}\" IS NOT NULL AND \"__fl_t\".\"{O_NAME}\" = $1::text)");
    let (sql, params) = compiled(cond("Alpha Price", "greater", json!(4)));
    assert_eq!(
        sql,
        format!("EXISTS (SELECT 1 {FROM} AND ({alpha}) AND ({price} IS NOT NULL AND {price} > $2::numeric))")
    );
    assert_eq!(params, vec![Text("Alpha".into()), Numeric("4".into())]);
    // Negations stay exact negations over the admitted records.
    let (sql, _) = compiled(cond0("Alpha Price", "empty"));
    assert_eq!(
        sql,
        format!("NOT EXISTS (SELECT 1 {FROM} AND ({alpha}) AND ({price} IS NOT NULL))")
    );
    // Rollups aggregate the admitted records only; count counts them.
    let (sql, _) = compiled(cond("Alpha Count", "is", json!(0)));
    let count = format!("(SELECT count(*) {FROM} AND ({alpha}))");
    assert_eq!(
        sql,
        format!("({count} IS NOT NULL AND {count} = $2::numeric)")
    );
}

#[test]
fn nested_conditions_get_their_own_aliases() {
    let (sql, params) = compiled(cond0("Friendly Price", "not_empty"));
    let name = format!("\"__fl_t1\".\"{NAME}\"");
    let back = format!(
        "FROM \"db_test\".\"conn\" AS \"__fl_c1\" JOIN \"db_test\".\"records\" AS \"__fl_t1\" \
         ON \"__fl_t1\".\"id\" = \"__fl_c1\".\"rec\" AND \"__fl_t1\".\"deleted_at\" IS NULL \
         WHERE \"__fl_c1\".\"other\" = \"__fl_t\".\"id\" AND ((\"__fl_t1\".\"{DONE}\" IS TRUE))"
    );
    // The innermost conditions (Done is true) are about the records reached
    // through `__fl_t1`.
    assert_eq!(
        sql,
        format!(
            "EXISTS (SELECT 1 {FROM} AND (EXISTS (SELECT 1 {back} AND ({name} IS NOT NULL AND {name} ILIKE $1::text ESCAPE E'\\\\'))) \
             AND (\"__fl_t\".\"{O_PRICE}\" IS NOT NULL))"
        )
    );
    assert_eq!(params, vec![Text("%a%".into())]);
}

/// Against the fixture of `postgres.rs`.
pub async fn semantics(c: &Client, recs: &[Rec], others: &[Other]) {
    let s = schema_with_conditions(DB_SCHEMA);
    let num = |p: &Option<String>| p.as_deref().map(|x| x.parse::<f64>().unwrap());
    let live_links = |r: &Rec| -> Vec<&Other> {
        r.links
            .iter()
            .map(|&i| &others[i])
            .filter(|o| !o.deleted)
            .collect()
    };
    let alphas = |r: &Rec| -> Vec<&Other> {
        live_links(r)
            .into_iter()
            .filter(|o| o.name.as_deref() == Some("Alpha"))
            .collect()
    };
    // An other record is friendly when a live, checked record linking to it
    // has "a" in its name (case-insensitive).
    let friendly = |o: &Other| {
        recs.iter().any(|q| {
            !q.deleted
                && q.done == Some(true)
                && q.links.iter().any(|&i| others[i].id == o.id)
                && q.name.as_deref().unwrap_or("").to_lowercase().contains('a')
        })
    };
    // Thresholds from the data, so that every case selects something: the
    // smallest price of an admitted linked record, the smallest admitted sum.
    let admitted: Vec<f64> = recs
        .iter()
        .filter(|r| !r.deleted)
        .flat_map(|r| alphas(r).into_iter().filter_map(|o| num(&o.price)))
        .collect();
    let low = admitted.iter().cloned().fold(f64::INFINITY, f64::min);
    assert!(low.is_finite(), "the fixture links no priced Alpha record");
    let sums: Vec<f64> = recs
        .iter()
        .filter(|r| !r.deleted)
        .filter_map(|r| {
            let v: Vec<f64> = alphas(r).iter().filter_map(|o| num(&o.price)).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>())
        })
        .collect();
    let low_sum = sums.iter().cloned().fold(f64::INFINITY, f64::min);
    let cases: Vec<(&str, serde_json::Value, BTreeSet<String>)> = vec![
        (
            "lookup with conditions: positive",
            cond("Alpha Price", "greater", json!(low - 0.5)),
            expect(recs, |r| {
                alphas(r)
                    .iter()
                    .any(|o| num(&o.price).is_some_and(|p| p > low - 0.5))
            }),
        ),
        (
            "lookup with conditions: is",
            cond("Alpha Price", "is", json!(low)),
            expect(recs, |r| {
                alphas(r).iter().any(|o| num(&o.price) == Some(low))
            }),
        ),
        (
            "lookup with conditions: is_not",
            cond("Alpha Price", "is_not", json!(5)),
            expect(recs, |r| {
                !alphas(r).iter().any(|o| num(&o.price) == Some(5.0))
            }),
        ),
        (
            "lookup with conditions: empty",
            cond0("Alpha Price", "empty"),
            expect(recs, |r| alphas(r).iter().all(|o| o.price.is_none())),
        ),
        (
            "rollup count with conditions: none admitted",
            cond("Alpha Count", "is", json!(0)),
            expect(recs, |r| alphas(r).is_empty()),
        ),
        (
            "rollup count with conditions",
            cond("Alpha Count", "greater_or_equal", json!(1)),
            expect(recs, |r| !alphas(r).is_empty()),
        ),
        (
            "rollup sum with conditions",
            cond("Alpha Total", "greater", json!(low_sum - 0.5)),
            expect(recs, |r| {
                let v: Vec<f64> = alphas(r).iter().filter_map(|o| num(&o.price)).collect();
                !v.is_empty() && v.iter().sum::<f64>() > low_sum - 0.5
            }),
        ),
        (
            "conditions naming a lookup with conditions",
            cond0("Friendly Price", "not_empty"),
            expect(recs, |r| {
                live_links(r)
                    .iter()
                    .any(|o| friendly(o) && o.price.is_some())
            }),
        ),
    ];
    for (what, v, want) in cases {
        let got = ids_in(c, &s, v.clone()).await;
        assert_eq!(got, want, "{what}: {v}");
        assert!(!want.is_empty(), "{what}: fixture has no match");
    }
    // The conditions matter on this fixture: without them the sets differ.
    let unconditioned = ids_in(c, &s, cond0("Related Price", "not_empty")).await;
    let conditioned = ids_in(c, &s, cond0("Alpha Price", "not_empty")).await;
    assert_ne!(unconditioned, conditioned);
}
