//! Export CSV headers under the formula-injection rule (issue 27, section
//! 6): a field named like a formula comes out quoted in row 1, as cells do.

use e2e_tests::{id, Person};
use serde_json::json;

use crate::export::{csv_rows, export};

#[tokio::test]
async fn field_names_in_the_csv_header_are_guarded_like_cells() {
    let owner = Person::new().await;
    let api = &owner.api;
    let db_id = api.new_database("export-headers").await;
    let table = id(&api.create_table(&db_id, "Sheet").await);
    for name in ["=cmd()", "@SUM(A1)", "+1 555", "-2", "Plain"] {
        api.create_field(&table, json!({"name": name, "type": "single_line_text"}))
            .await;
    }
    let out = export(&owner, &db_id, None).await;
    assert_eq!(out.status, 200, "{}", String::from_utf8_lossy(&out.body));
    let rows = csv_rows(&out.entries["Sheet.csv"]);
    assert_eq!(
        rows[0],
        ["id", "'=cmd()", "'@SUM(A1)", "'+1 555", "-2", "Plain"]
    );
}
