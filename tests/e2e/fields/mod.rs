//! Part B, Fields, through the real router against the cluster's real
//! PostgreSQL: every costume with its storage, operators and column; select
//! choices; unique indexes; links with mirror and connector; lookups and
//! rollups; formulas as generated columns that PostgreSQL computes; buttons;
//! the display field; updates (type changes with real casts, renames
//! rewriting formulas); deletes and their cascades; roles and the cap.
//!
//! Each test makes its own person and database. Catalog facts (column
//! types, generated columns, indexes, connector tables) are read from the
//! shard's PostgreSQL directly.

mod buttons;
mod costumes;
mod delete;
mod formulas;
mod links;
mod lookups;
mod patch;
mod rules;
mod selects;

pub use e2e_tests::id;
use e2e_tests::{database_postgres, Person, Reply};
use serde_json::{json, Value};

pub const VIEWER_REFUSAL: &str = "Viewers can't make changes.";

/// One person owning one fresh database, and its shard's PostgreSQL.
pub struct Db {
    pub owner: Person,
    pub id: String,
    pub pg: tokio_postgres::Client,
}

impl Db {
    pub async fn new() -> Db {
        let owner = Person::new().await;
        let id = owner.api.new_database("fields").await;
        let pg = database_postgres(&id).await;
        Db { owner, id, pg }
    }

    pub async fn table(&self, name: &str) -> String {
        let t = self.owner.api.create_table(&self.id, name).await;
        assert_eq!(t["fields"], json!([]));
        id(&t)
    }

    /// `POST /api/tables/{table}/fields`.
    pub async fn create(&self, table: &str, body: Value) -> Reply {
        self.owner
            .api
            .post(&format!("/api/tables/{table}/fields"), body)
            .await
    }

    /// Creates a field that must succeed; returns it.
    pub async fn field(&self, table: &str, body: Value) -> Value {
        let r = self.create(table, body).await;
        r.expect_ok()["field"].clone()
    }

    /// `PATCH /api/fields/{field}`.
    pub async fn patch(&self, field: &str, body: Value) -> Reply {
        self.owner
            .api
            .patch(&format!("/api/fields/{field}"), body)
            .await
    }

    pub async fn delete(&self, field: &str) -> Reply {
        self.owner.api.delete(&format!("/api/fields/{field}")).await
    }

    /// `GET /api/tables/{table}/fields`.
    pub async fn fields(&self, table: &str) -> Vec<Value> {
        let r = self
            .owner
            .api
            .get(&format!("/api/tables/{table}/fields"))
            .await;
        r.expect_ok()["fields"].as_array().unwrap().clone()
    }

    /// One field as listed (with operators), by id.
    pub async fn listed(&self, table: &str, field: &str) -> Value {
        self.fields(table)
            .await
            .into_iter()
            .find(|f| f["id"] == field)
            .expect("field listed")
    }

    pub async fn get_table(&self, table: &str) -> Value {
        self.owner
            .api
            .get(&format!("/api/tables/{table}"))
            .await
            .expect_ok()["table"]
            .clone()
    }

    /// Creates records through the records route; returns them.
    pub async fn records(&self, table: &str, cells: Vec<Value>) -> Vec<Value> {
        let records: Vec<Value> = cells.into_iter().map(|c| json!({ "fields": c })).collect();
        let r = self
            .owner
            .api
            .post(
                &format!("/api/tables/{table}/records"),
                json!({ "records": records }),
            )
            .await;
        r.expect_ok()["records"].as_array().unwrap().clone()
    }

    pub async fn read(&self, table: &str, record: &str) -> Value {
        let r = self
            .owner
            .api
            .get(&format!("/api/tables/{table}/records/{record}"))
            .await;
        let body = r.expect_ok();
        body.get("record").cloned().unwrap_or_else(|| body.clone())
    }

    /// `information_schema.columns.data_type` of a field's column, `None`
    /// when the column does not exist.
    pub async fn column_type(&self, table: &str, field: &str) -> Option<String> {
        self.pg
            .query_opt(
                "SELECT data_type FROM information_schema.columns
                 WHERE table_schema = $1 AND table_name = $2 AND column_name = $3",
                &[&self.id, &table, &field],
            )
            .await
            .unwrap()
            .map(|r| r.get(0))
    }

    /// The generation expression of a generated stored column.
    pub async fn generated(&self, table: &str, field: &str) -> Option<String> {
        let row = self
            .pg
            .query_one(
                "SELECT is_generated, generation_expression FROM information_schema.columns
                 WHERE table_schema = $1 AND table_name = $2 AND column_name = $3",
                &[&self.id, &table, &field],
            )
            .await
            .unwrap();
        let is: String = row.get(0);
        (is == "ALWAYS").then(|| row.get(1))
    }

    /// Definitions of the indexes of a table that mention a field's column.
    pub async fn indexes_on(&self, table: &str, field: &str) -> Vec<String> {
        self.pg
            .query(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = $2
                 AND indexdef LIKE '%' || $3 || '%'",
                &[&self.id, &table, &field],
            )
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.get(0))
            .collect()
    }

    pub async fn relation_exists(&self, name: &str) -> bool {
        self.pg
            .query_one(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2",
                &[&self.id, &name],
            )
            .await
            .map(|r| r.get::<_, i64>(0) == 1)
            .unwrap()
    }

    /// One SQL value of a field's column for a record, as text.
    pub async fn cell_text(&self, table: &str, field: &str, record: &str) -> Option<String> {
        self.pg
            .query_one(
                &format!(
                    "SELECT \"{field}\"::text FROM \"{}\".\"{table}\" WHERE id = $1",
                    self.id
                ),
                &[&record],
            )
            .await
            .unwrap()
            .get(0)
    }

    /// Bumps the database's `schema_version`, so that the shard reloads
    /// catalog rows a test wrote behind its back.
    pub async fn bump_schema_version(&self) {
        self.pg
            .execute(
                "UPDATE databases SET schema_version = schema_version + 1 WHERE id = $1",
                &[&self.id],
            )
            .await
            .unwrap();
    }

    /// Inserts a bare webhook row on `table` straight into the catalog (a
    /// chosen id, no receiver: all these tests need) with
    /// id `whk_` + the database's tag + `suffix` (7 characters) and the
    /// watch list `watched` (NULL when `None`); returns its id.
    pub async fn webhook(&self, table: &str, suffix: &str, watched: Option<&[String]>) -> String {
        let hook = format!("whk_{}{suffix}", &self.id[3..8]);
        self.pg
            .execute(
                "INSERT INTO webhooks (id, database_id, table_id, watched_field_ids) VALUES ($1, $2, $3, $4)",
                &[&hook, &self.id, &table, &watched],
            )
            .await
            .unwrap();
        hook
    }

    /// The `watched_field_ids` of a webhook row.
    pub async fn watched_field_ids(&self, hook: &str) -> Vec<String> {
        self.pg
            .query_one(
                "SELECT watched_field_ids FROM webhooks WHERE id = $1",
                &[&hook],
            )
            .await
            .unwrap()
            .get(0)
    }

    /// Runs SQL against the tenant table (`{t}` stands for the quoted
    /// table), returning the error text when PostgreSQL refuses.
    pub async fn sql(&self, table: &str, sql: &str) -> Result<u64, String> {
        let sql = sql.replace("{t}", &format!("\"{}\".\"{table}\"", self.id));
        self.pg
            .execute(&sql, &[])
            .await
            .map_err(|e| format!("{e:?}"))
    }
}

#[tokio::test]
async fn formula_columns_compute_in_postgres() {
    let d = Db::new().await;
    let tid = d.table("Orders").await;
    let price = d
        .field(&tid, json!({"name": " Price ", "type": "number"}))
        .await;
    assert_eq!(price["name"], "Price");
    assert_eq!(price["operators"][2], "greater");
    let qty = d
        .field(&tid, json!({"name": "Qty", "type": "number"}))
        .await;
    let total = d
        .field(
            &tid,
            json!({"name": "Total", "type": "formula", "options": {"expression": "{Price} * Qty"}}),
        )
        .await;
    assert_eq!(total["type"], "formula_number");
    assert_eq!(total["options"]["expression"], "{Price} * {Qty}");
    assert_eq!(
        total["options"]["referenced_field_ids"],
        json!([id(&price), id(&qty)])
    );

    d.sql(
        &tid,
        &format!(
            "INSERT INTO {{t}} (id, \"{}\", \"{}\") VALUES ('rec_e2e', 2.5, 4)",
            id(&price),
            id(&qty)
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        d.cell_text(&tid, &id(&total), "rec_e2e").await.as_deref(),
        Some("10")
    );

    let bad = d
        .create(
            &tid,
            json!({"name": "Bad", "type": "formula", "options": {"expression": "UPPER(1)"}}),
        )
        .await;
    let msg = bad.expect_error(400, "bad_request");
    assert!(
        msg.contains("character 7") && msg.contains("UPPER expects text"),
        "{msg}"
    );

    // Table responses carry operators and the display field.
    let t = d.get_table(&tid).await;
    assert_eq!(t["display_field_id"], price["id"]);
    assert_eq!(t["fields"].as_array().unwrap().len(), 3);
    assert!(t["fields"][2]["operators"].is_array());

    // Update: no operators in the reply; the rename rewrites the formula.
    let r = d.patch(&id(&price), json!({"name": "Unit price"})).await;
    assert!(r.expect_ok()["field"].get("operators").is_none());
    let fields = d.fields(&tid).await;
    assert_eq!(fields[2]["options"]["expression"], "{Unit price} * {Qty}");
    // Deleting a field a formula reads is refused, naming the formula.
    let r = d.delete(&id(&qty)).await;
    assert!(r.expect_error(400, "bad_request").contains("'Total'"));
    d.delete(&id(&total)).await.expect_ok();
    d.delete(&id(&qty)).await.expect_ok();
}
