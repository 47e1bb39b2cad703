//! The size of a read whose lookups' conditions name other conditioned
//! lookups (which may name others in turn, down to four levels).

use filter_lang::Params;
use serde_json::{json, Value};

use super::tests::{field, table, DB, ITEMS};
use super::{page_set, read_set};
use crate::schema::expansion::{
    check_filter, expanded_cost, MAX_LOOKUP_CONDITION_COST, MAX_TABLE_CONDITION_COST, SUBQUERY_COST,
};
use crate::schema::{Costume, DatabaseSchema};

/// A self-linked table with `n` lookups; the conditions of each name the
/// `k` next lookups (and the code), so a lookup's conditions write out
/// about (k + 2) * (1 + k + k^2 + k^3) conditions.
pub(super) fn fan_out(n: usize, k: usize) -> DatabaseSchema {
    let id = |i: usize| format!("fld_Look{i:08}");
    let mut fields = vec![
        field(
            ITEMS,
            "fld_Code00000001",
            "Code",
            Costume::SingleLineText,
            json!({}),
        ),
        field(
            ITEMS,
            "fld_Self00000001",
            "Parent",
            Costume::Link,
            json!({"target_table_id": ITEMS, "pair_field_id": "fld_Self00000002"}),
        ),
        field(
            ITEMS,
            "fld_Self00000002",
            "Children",
            Costume::Link,
            json!({"target_table_id": ITEMS, "direction": "reverse",
                   "pair_field_id": "fld_Self00000001"}),
        ),
    ];
    for i in 0..n {
        let mut conditions =
            vec![json!({"field": "Code", "op": "contains", "value": format!("v{i}")})];
        for j in 1..=k {
            conditions.push(json!({"field": id((i + j) % n), "op": "is", "value": "x"}));
        }
        fields.push(field(
            ITEMS,
            &id(i),
            &format!("L{i}"),
            Costume::LookupText,
            json!({"link_field_id": "fld_Self00000001", "target_field_id": "fld_Code00000001",
                   "conditions": {"join": "or", "conditions": conditions}}),
        ));
    }
    DatabaseSchema::new(
        DB.to_owned(),
        1,
        "UTC".to_owned(),
        vec![table(ITEMS, "Items", "fld_Code00000001", fields)],
    )
}

/// The SQL of one list page of Items (every field) and of the one-record
/// read set, in bytes, and how many values they bind.
pub(super) fn page_sql_len(schema: &DatabaseSchema) -> (usize, usize) {
    let items = schema.table(ITEMS).unwrap();
    let mut read = Params::new(1);
    let (fields, joins) = page_set(schema, items, None, &mut read);
    let exprs: Vec<String> = fields.iter().map(|f| f.expr.clone()).collect();
    let qualified = items.qualified().unwrap();
    let fs = schema.filter_schema(items);
    let mut params = Params::new(read.next_index());
    let plan = filter_lang::parse_sort("Code", &fs)
        .unwrap()
        .plan(&fs, "r", &mut params);
    let page =
        crate::records::page_sql::page_sql(&qualified, &exprs, &joins, "TRUE", None, &plan, "51");
    let set = read_set(schema, items, None);
    (page.len(), read.values().len() + set.values.len())
}

/// Prints the growth (run with `--ignored --nocapture`).
#[test]
#[ignore]
fn measure_fan_out() {
    for (n, k) in [
        (30, 1),
        (30, 2),
        (4, 3),
        (5, 4),
        (7, 6),
        (9, 8),
        (13, 12),
        (39, 4),
        (40, 4),
        (100, 4),
    ] {
        let schema = fan_out(n, k);
        let (len, values) = page_sql_len(&schema);
        println!("n={n:3} k={k:3}: page SQL {len:>12} bytes, {values:>9} values");
    }
}

/// The cost of the conditions of lookup `i` of [`fan_out`] as a read of
/// the table sees them.
fn cost_of(schema: &DatabaseSchema, i: usize) -> usize {
    let f = schema.field(&format!("fld_Look{i:08}")).unwrap();
    let c = schema.conditions_of(f).unwrap();
    expanded_cost(&c.filter, &c.schema, usize::MAX - 1)
}

#[test]
fn expanded_cost_counts_every_nested_condition() {
    // A group, a condition and a subquery naming the next lookup, at
    // depths 0 to 3 (at depth 4 the named lookup's conditions are left
    // off): 4 * (1 + 1 + 50).
    let schema = fan_out(30, 1);
    assert_eq!(SUBQUERY_COST, 50);
    assert_eq!(cost_of(&schema, 0), 208);
    assert!(schema.condition_overruns().is_empty());
    // c(3) = 2 + 3 * 50, c(d) = 2 + 3 * (50 + c(d + 1)).
    let schema = fan_out(4, 3);
    assert_eq!(cost_of(&schema, 0), 6080);
    // The count stops past its limit.
    let f = schema.field("fld_Look00000000").unwrap();
    let c = schema.conditions_of(f).unwrap();
    assert_eq!(expanded_cost(&c.filter, &c.schema, 100), 101);
}

/// The read-time budget: a stored schema whose lookups cost more than
/// [`MAX_LOOKUP_CONDITION_COST`] (5 lookups naming 4 others each cost
/// 17,170; the page was 637 KB of SQL, 8 s to plan and run) reads them as
/// admitting no linked record.
#[test]
fn over_budget_conditions_read_as_admitting_nothing() {
    let schema = fan_out(5, 4);
    let overruns = schema.condition_overruns();
    assert_eq!(overruns.len(), 5, "{overruns:?}");
    assert!(overruns
        .iter()
        .all(|o| o.limit == MAX_LOOKUP_CONDITION_COST && o.table_id == ITEMS));
    let (len, values) = page_sql_len(&schema);
    assert!(len < 16 * 1024, "page SQL of {len} bytes, {values} values");
    let items = schema.table(ITEMS).unwrap();
    let set = read_set(&schema, items, Some(&["fld_Look00000003".to_owned()]));
    assert!(
        set.fields[0].expr.contains("AND (FALSE)"),
        "{}",
        set.fields[0].expr
    );
    assert!(set.values.is_empty());

    // 13 lookups naming 12 others (105 MB of SQL): cut one level down,
    // where each named lookup costs past the cap; the rest is kept.
    let schema = fan_out(13, 12);
    let (len, values) = page_sql_len(&schema);
    assert!(len < 128 * 1024, "page SQL of {len} bytes, {values} values");
    assert_eq!(cost_of(&schema, 0), 2 + 12 * (50 + 2));
}

/// The table's cap: 30 lookups naming the 2 next ones cost 1,530 each
/// (45,900 together, 371 KB of page SQL, 3 s to plan); past
/// [`MAX_TABLE_CONDITION_COST`] the rest read as admitting nothing.
#[test]
fn a_table_reads_within_its_cap() {
    let schema = fan_out(30, 2);
    assert_eq!(cost_of(&schema, 0), 1530);
    let overruns = schema.condition_overruns();
    let kept = MAX_TABLE_CONDITION_COST / 1530;
    assert_eq!(overruns.len(), 30 - kept, "{overruns:?}");
    assert!(overruns.iter().all(|o| o.limit == MAX_TABLE_CONDITION_COST));
    // Each cut lookup keeps a cost of two (a group holding `FALSE`).
    let total: usize = (0..30).map(|i| cost_of(&schema, i)).sum();
    assert_eq!(total, kept * 1530 + 2 * overruns.len());
    assert!(kept * 1530 <= MAX_TABLE_CONDITION_COST);
    let (len, _) = page_sql_len(&schema);
    assert!(len < 200 * 1024, "page SQL of {len} bytes");
}

/// A request's filter costing past the table's cap is refused; the
/// largest flat filter passes.
#[test]
fn filters_past_the_cap_are_refused() {
    let schema = fan_out(4, 3);
    let items = schema.table(ITEMS).unwrap();
    let fs = schema.filter_schema(items);
    let env = filter_lang::Env::new("UTC", chrono::Utc::now()).unwrap();
    let naming = |field: &str, op: &str, times: usize| {
        let value = if op == "is" { json!("x") } else { Value::Null };
        let conditions: Vec<_> = (0..times)
            .map(|_| json!({"field": field, "op": op, "value": value}))
            .collect();
        filter_lang::filter::parse_value(&json!({ "conditions": conditions }), &fs, &env).unwrap()
    };
    // 1 + 3 * (50 + 6,080) = 18,391; 1 + 4 * 6,130 = 24,521.
    assert!(check_filter(&naming("L0", "is", 3), &fs).is_ok());
    let e = check_filter(&naming("L0", "is", 4), &fs).unwrap_err();
    assert!(format!("{e:?}").contains("20000"), "{e:?}");
    // 199 conditions on a link: 1 + 199 * 50 = 9,951.
    assert!(check_filter(&naming("Children", "not_empty", 199), &fs).is_ok());
}
