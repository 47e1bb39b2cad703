//! docs/moves.md "Shard side: placements": the held check (421 for a
//! database without a placement here, fenced, or at another epoch), the
//! write fence and the 409 of structural changes while a database moves,
//! and the background workers skipping databases not served here. Tests
//! put a database in a state by writing its `placements` row with SQL, as
//! the control plane does.

mod fence;
mod requests;
mod workers;

use serde_json::json;

use crate::helpers::*;

/// Sets the database's placement row to `state` (`None`: no row).
pub async fn set_placement(app: &TestApp, database_id: &str, state: Option<&str>) {
    match state {
        None => {
            app.pg
                .execute(
                    "DELETE FROM placements WHERE database_id = $1",
                    &[&database_id],
                )
                .await
                .unwrap();
        }
        Some(state) => {
            let n = app
                .pg
                .execute(
                    "UPDATE placements SET state = $2, updated_at = now() WHERE database_id = $1",
                    &[&database_id, &state],
                )
                .await
                .unwrap();
            assert_eq!(n, 1, "{database_id} has no placement row");
        }
    }
}

/// A placement row again, `owned` at epoch 1 (as a new database's).
pub async fn restore_placement(app: &TestApp, database_id: &str) {
    app.pg
        .execute(
            "INSERT INTO placements (database_id, epoch, state) VALUES ($1, 1, 'owned')
             ON CONFLICT (database_id) DO UPDATE SET state = 'owned', epoch = 1",
            &[&database_id],
        )
        .await
        .unwrap();
}

/// A database with one table holding a text field `Who` and one record.
pub struct Fixture {
    pub db: String,
    pub owner: cluster_protocol::principal::Principal,
    pub table: String,
    pub record: String,
}

pub async fn fixture(app: &TestApp) -> Fixture {
    let (db, owner) = app.owned_database().await;
    let table = app.create_table_id(&db, &owner, "T").await;
    let r = app
        .post(
            &format!("/api/tables/{table}/fields"),
            &owner,
            json!({"name": "Who", "type": "single_line_text"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = app
        .post(
            &format!("/api/tables/{table}/records"),
            &owner,
            json!({"records": [{"fields": {"Who": "Ann"}}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let record = r.body["records"][0]["id"].as_str().unwrap().to_owned();
    Fixture {
        db,
        owner,
        table,
        record,
    }
}

/// The `Who` values of the table's live and trashed records, by id.
pub async fn names(app: &TestApp, f: &Fixture) -> Vec<String> {
    let field: String = app
        .pg
        .query_one(
            "SELECT id FROM fields WHERE table_id = $1 AND name = 'Who'",
            &[&f.table],
        )
        .await
        .unwrap()
        .get(0);
    let column = shard_node::tenant_schema::column(&field).unwrap();
    let table = shard_node::tenant_schema::table(&f.db, &f.table).unwrap();
    app.pg
        .query(
            &format!("SELECT coalesce({column}, '') FROM {table} ORDER BY id"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}
