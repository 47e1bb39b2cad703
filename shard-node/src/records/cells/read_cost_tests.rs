//! The size of a read whose lookups' conditions name other conditioned
//! lookups (which may name others in turn, down to four levels).

use filter_lang::Params;
use serde_json::json;

use super::tests::{field, table, DB, ITEMS};
use super::{page_set, read_set};
use crate::records::store;
use crate::schema::{Costume, DatabaseSchema};

/// A self-linked table with `n` lookups; the conditions of each name the
/// `k` next lookups (and the code), so a lookup's conditions expand to
/// about (k + 2) * (1 + k + k^2 + k^3) condition nodes.
pub(super) fn fan_out(n: usize, k: usize) -> DatabaseSchema {
    let id = |i: usize| format!("fld_Look{i:08}");
    let mut fields = vec![
        field(ITEMS, "fld_Code00000001", "Code", Costume::SingleLineText, json!({})),
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
        let mut conditions = vec![json!({"field": "Code", "op": "contains", "value": format!("v{i}")})];
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
    let plan = filter_lang::parse_sort("Code", &fs).unwrap().plan(&fs, "r", &mut params);
    let page = store::page_sql(&qualified, &exprs, &joins, "TRUE", None, &plan, "51");
    let set = read_set(schema, items, None);
    (page.len(), read.values().len() + set.values.len())
}

/// Prints the growth (run with `--ignored --nocapture`).
#[test]
#[ignore]
fn measure_fan_out() {
    for (n, k) in [(30, 1), (30, 2), (4, 3), (5, 4), (7, 6), (9, 8), (13, 12)] {
        let schema = fan_out(n, k);
        let (len, values) = page_sql_len(&schema);
        println!("n={n:3} k={k:3}: page SQL {len:>12} bytes, {values:>9} values");
    }
}
