//! Read expressions: a page without conditioned lookups reads with the very
//! SQL it read with before conditions were bound (snapshot taken from the
//! code that inlined them); conditions' values are bound parameters whose
//! text never enters the SQL; the filter schemas a read needs are built a
//! bounded number of times however many conditioned lookups a table has.

use chrono::Utc;
use filter_lang::{Params, SqlValue};
use serde_json::{json, Map, Value};

use super::{page_set, read_set};
use crate::records::store;
use crate::schema::{Costume, DatabaseSchema, FieldRow, TableSchema};

pub(super) const DB: &str = "db_Ab3dZ1234567";
pub(super) const ITEMS: &str = "tbl_Items0000001";
const ORDERS: &str = "tbl_Order0000001";

pub(super) fn field(
    table: &str,
    id: &str,
    name: &str,
    costume: Costume,
    options: Value,
) -> FieldRow {
    let sql_type = match costume {
        Costume::Number | Costume::Currency | Costume::FormulaNumber => Some("numeric"),
        Costume::Date => Some(if options["include_time"] == true {
            "timestamptz"
        } else {
            "date"
        }),
        Costume::Checkbox => Some("boolean"),
        Costume::MultiSelect | Costume::Attachment => Some("text[]"),
        Costume::Link
        | Costume::Button
        | Costume::LookupText
        | Costume::LookupNumber
        | Costume::LookupDate
        | Costume::LookupCheckbox
        | Costume::RollupNumber
        | Costume::RollupDate => None,
        _ => Some("text"),
    };
    let options: Map<String, Value> = match options {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    FieldRow {
        id: id.to_owned(),
        table_id: table.to_owned(),
        name: name.to_owned(),
        costume,
        options,
        position: 0,
        sql_type: sql_type.map(str::to_owned),
        created_at: Utc::now(),
    }
}

pub(super) fn table(id: &str, name: &str, display: &str, fields: Vec<FieldRow>) -> TableSchema {
    TableSchema {
        id: id.to_owned(),
        database_id: DB.to_owned(),
        name: name.to_owned(),
        position: 0,
        display_field_id: Some(display.to_owned()),
        created_at: Utc::now(),
        updated_at: Utc::now(),
        fields,
    }
}

/// Items (code, amount) and Orders linking them, with one field of each
/// read family; `conditions` goes on the Orders lookup `fld_LkCond000001`
/// and rollup `fld_RuCond000001` (None: no conditions, the benchmark's case).
fn fixture(conditions: Option<Value>) -> DatabaseSchema {
    let items = table(
        ITEMS,
        "Items",
        "fld_Code00000001",
        vec![
            field(
                ITEMS,
                "fld_Code00000001",
                "Code",
                Costume::SingleLineText,
                json!({}),
            ),
            field(
                ITEMS,
                "fld_Amount000001",
                "Amount",
                Costume::Number,
                json!({}),
            ),
            field(
                ITEMS,
                "fld_Back00000001",
                "Orders",
                Costume::Link,
                json!({
                "target_table_id": ORDERS, "direction": "reverse",
                "pair_field_id": "fld_Lines0000001"}),
            ),
        ],
    );
    let cond = conditions.unwrap_or(Value::Null);
    let orders = table(
        ORDERS,
        "Orders",
        "fld_Title0000001",
        vec![
            field(
                ORDERS,
                "fld_Title0000001",
                "Title",
                Costume::SingleLineText,
                json!({}),
            ),
            field(
                ORDERS,
                "fld_Price0000001",
                "Price",
                Costume::Currency,
                json!({}),
            ),
            field(ORDERS, "fld_Due000000001", "Due", Costume::Date, json!({})),
            field(
                ORDERS,
                "fld_At0000000001",
                "At",
                Costume::Date,
                json!({"include_time": true}),
            ),
            field(
                ORDERS,
                "fld_Done00000001",
                "Done",
                Costume::Checkbox,
                json!({}),
            ),
            field(
                ORDERS,
                "fld_Stage0000001",
                "Stage",
                Costume::SingleSelect,
                json!({"choices": [{"id": "cho_a", "name": "A"}]}),
            ),
            field(
                ORDERS,
                "fld_Tags00000001",
                "Tags",
                Costume::MultiSelect,
                json!({"choices": [{"id": "cho_t", "name": "T"}]}),
            ),
            field(
                ORDERS,
                "fld_Files0000001",
                "Files",
                Costume::Attachment,
                json!({}),
            ),
            field(
                ORDERS,
                "fld_Lines0000001",
                "Lines",
                Costume::Link,
                json!({"target_table_id": ITEMS, "pair_field_id": "fld_Back00000001"}),
            ),
            field(
                ORDERS,
                "fld_LkCode000001",
                "Codes",
                Costume::LookupText,
                json!({"link_field_id": "fld_Lines0000001", "target_field_id": "fld_Code00000001"}),
            ),
            field(
                ORDERS,
                "fld_LkCond000001",
                "Some codes",
                Costume::LookupText,
                json!({"link_field_id": "fld_Lines0000001", "target_field_id": "fld_Code00000001",
                       "conditions": cond}),
            ),
            field(
                ORDERS,
                "fld_RuSum0000001",
                "Total",
                Costume::RollupNumber,
                json!({"link_field_id": "fld_Lines0000001", "target_field_id": "fld_Amount000001",
                       "aggregation": "sum"}),
            ),
            field(
                ORDERS,
                "fld_RuCond000001",
                "Some count",
                Costume::RollupNumber,
                json!({"link_field_id": "fld_Lines0000001", "aggregation": "count",
                       "conditions": cond}),
            ),
            field(
                ORDERS,
                "fld_Twice0000001",
                "Twice",
                Costume::FormulaNumber,
                json!({"expression": "{Price} * 2"}),
            ),
        ],
    );
    DatabaseSchema::new(
        DB.to_owned(),
        1,
        "Europe/Paris".to_owned(),
        vec![items, orders],
    )
}

/// Every statement text a read of Orders makes from its read expressions.
fn statements(schema: &DatabaseSchema, first: usize) -> (String, Vec<SqlValue>) {
    let orders = schema.table(ORDERS).unwrap();
    let fs = schema.filter_schema(orders);
    let mut params = Params::new(first);
    let plan = filter_lang::parse_sort("-Price,Title", &fs)
        .unwrap()
        .plan(&fs, "r", &mut params);
    let mut read = Params::new(params.next_index());
    let (fields, joins) = page_set(schema, orders, None, &mut read);
    let exprs: Vec<String> = fields.iter().map(|f| f.expr.clone()).collect();
    let qualified = orders.qualified().unwrap();
    let one = store::select_list(&exprs);
    let page =
        crate::records::page_sql::page_sql(&qualified, &exprs, &joins, "TRUE", None, &plan, "51");
    let cells = crate::records::page_sql::page_cells_sql(&qualified, &exprs, &joins);
    let set = read_set(schema, orders, None);
    let reply = store::select_list(&set.exprs());
    let mut values = read.into_values();
    values.extend(set.values);
    (format!("{one}\n{page}\n{cells}\n{reply}\n"), values)
}

#[test]
fn pages_without_conditions_read_as_before() {
    let (sql, values) = statements(&fixture(None), 1);
    assert!(values.is_empty(), "{values:?}");
    let before = include_str!("read_snapshot.sql");
    assert!(sql == before, "the SQL of a page changed:\n{sql}");
}

/// Values that would break out of a literal or a placeholder if they were
/// ever written into the SQL.
const NASTY: &[&str] = &[
    "x$1::y",
    " || (SELECT chr(120) FROM pg_sleep(3)) || ",
    "' OR TRUE OR '",
    "\\'; DROP TABLE x; --",
    "$$ $1 $2:: $a$",
    "/* -- ; */",
];

fn either(a: &str, b: &str) -> Value {
    json!({"join": "or", "conditions": [
        {"field": "Code", "op": "is", "value": a},
        {"field": "Code", "op": "contains", "value": b}]})
}

#[test]
fn condition_values_are_bound_never_written() {
    let base = statements(&fixture(Some(either("a", "b"))), 1);
    assert_eq!(
        base.1,
        vec![
            SqlValue::Text("a".into()),
            SqlValue::Text("%b%".into()),
            SqlValue::Text("a".into()),
            SqlValue::Text("%b%".into()),
            SqlValue::Text("a".into()),
            SqlValue::Text("%b%".into()),
            SqlValue::Text("a".into()),
            SqlValue::Text("%b%".into()),
        ],
        "page (lookup, rollup), then the reply's read set (lookup, rollup)"
    );
    for a in NASTY {
        for b in NASTY {
            let (sql, values) = statements(&fixture(Some(either(a, b))), 1);
            assert_eq!(sql, base.0, "the text never depends on the values");
            assert_eq!(values[0], SqlValue::Text((*a).to_owned()));
            assert!(!sql.contains(a) && !sql.contains("chr(120)"));
        }
    }
    // On a page, numbered after the statement's own parameters.
    let (sql, _) = statements(&fixture(Some(either("a", "b"))), 7);
    let page = sql.lines().next().unwrap();
    assert!(page.contains("= $7::text") && page.contains("ILIKE $10::text"));
    assert!(!page.contains("$1::") && !page.contains("$6::"), "{page}");
}

/// 30 lookups of a self-link whose conditions name the other lookups of
/// the table: the schema a read needs is built once per level, not once
/// per lookup and level (30^4).
#[test]
fn filter_schemas_are_built_once_per_level() {
    const N: usize = 30;
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
            json!({
            "target_table_id": ITEMS, "pair_field_id": "fld_Self00000002"}),
        ),
        field(
            ITEMS,
            "fld_Self00000002",
            "Children",
            Costume::Link,
            json!({
            "target_table_id": ITEMS, "direction": "reverse",
            "pair_field_id": "fld_Self00000001"}),
        ),
    ];
    for i in 0..N {
        let other = id((i + 1) % N);
        fields.push(field(
            ITEMS,
            &id(i),
            &format!("L{i}"),
            Costume::LookupText,
            json!({
            "link_field_id": "fld_Self00000001", "target_field_id": "fld_Code00000001",
            "conditions": {"join": "or", "conditions": [
                {"field": "Code", "op": "contains", "value": format!("v{i}")},
                {"field": other, "op": "is", "value": "x"}]}}),
        ));
    }
    let schema = DatabaseSchema::new(
        DB.to_owned(),
        1,
        "UTC".to_owned(),
        vec![table(ITEMS, "Items", "fld_Code00000001", fields)],
    );
    let items = schema.table(ITEMS).unwrap();
    let first = schema.filter_schema(items);
    let mut read = Params::new(1);
    let (fields, _) = page_set(&schema, items, None, &mut read);
    let set = read_set(&schema, items, None);
    assert_eq!(fields.len(), N + 3);
    assert_eq!(set.fields.len(), N + 3);
    // Depth 0 to 4 of the one table.
    assert_eq!(schema.filter_schema_builds(), 5);
    assert!(std::sync::Arc::ptr_eq(&first, &schema.filter_schema(items)));
    // The cells carry their conditions (and the nested ones) as values.
    assert!(read.values().contains(&SqlValue::Text("%v7%".into())));
    assert_eq!(schema.filter_schema_builds(), 5);
}
