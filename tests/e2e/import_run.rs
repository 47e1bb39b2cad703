//! Part B "Import", the run branch (`file` + `target` + `plan`), through the
//! router: new tables with every importable costume, mapping onto an
//! existing table (select choices added, ids and colours kept), skipped and
//! unlisted columns, every cell checked before anything is written, refused
//! costumes and select ceilings, roles, the late-failure report, XLSX, and
//! the webhook rule for batches.

use cluster_protocol::control::{Access, DatabaseScope, Role};
use cluster_protocol::error::forbidden;
use e2e_tests::{database_postgres, id, Api, Person, Reply};
use serde_json::{json, Value};

use crate::import::{multipart, post_import};

/// Runs an import of `file` with the `target` and `plan` JSON.
async fn run(
    api: &Api,
    db_id: &str,
    filename: &str,
    file: &[u8],
    target: Value,
    plan: Value,
) -> Reply {
    let (target, plan) = (target.to_string(), plan.to_string());
    let body = multipart(&[
        ("file", Some(filename), file),
        ("target", None, target.as_bytes()),
        ("plan", None, plan.as_bytes()),
    ]);
    post_import(api, db_id, body).await
}

fn new_table(name: &str) -> Value {
    json!({"mode": "new_table", "name": name})
}

fn existing(table_id: &str) -> Value {
    json!({"mode": "existing_table", "tableId": table_id})
}

fn create(i: usize, name: &str, costume: &str) -> Value {
    json!({"columnIndex": i, "action": {"kind": "create", "name": name, "costume": costume}})
}

fn map(i: usize, field_id: &str) -> Value {
    json!({"columnIndex": i, "action": {"kind": "map", "targetFieldId": field_id}})
}

async fn tables(api: &Api, db_id: &str) -> Vec<Value> {
    api.get(&format!("/api/databases/{db_id}/tables"))
        .await
        .expect_ok()["tables"]
        .as_array()
        .expect("tables")
        .clone()
}

async fn records(api: &Api, table_id: &str) -> Vec<Value> {
    api.get(&format!("/api/tables/{table_id}/records?page_size=1000"))
        .await
        .expect_ok()["records"]
        .as_array()
        .expect("records")
        .clone()
}

/// The record whose `key` cell is `value`.
fn by<'a>(records: &'a [Value], key: &str, value: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["fields"][key] == value)
        .unwrap_or_else(|| panic!("a record with {key} = {value}: {records:?}"))
}

async fn fields(api: &Api, table_id: &str) -> Vec<Value> {
    api.get(&format!("/api/tables/{table_id}/fields"))
        .await
        .expect_ok()["fields"]
        .as_array()
        .expect("fields")
        .clone()
}

#[tokio::test]
async fn a_new_table_takes_every_importable_costume() {
    let owner = Person::new().await;
    let api = &owner.api;
    let db_id = &owner.api.new_database("import-run").await;
    let csv = "Text,Long,Email,Phone,Url,Num,Price,Pct,Stars,Time,Day,Done,Status,Tags,Skipped,Unlisted\n\
               Ann,\"two\nlines\",ann@example.com,+1 555 0100,https://a.example,\"1,234.5\",$12.50,12%,4.4,1:30,01/31/2024,yes,Open,\"a, b\",x,y\n\
               Bob,,,,,-3,€4,,9,90,2024-02-29,no,Done,b,x,y\n\
               Cy,,,,,,,,,,,,Open,,x,y\n";
    let costumes = [
        "single_line_text",
        "long_text",
        "email",
        "phone",
        "url",
        "number",
        "currency",
        "percent",
        "rating",
        "duration",
        "date",
        "checkbox",
        "single_select",
        "multi_select",
    ];
    let mut plan: Vec<Value> = costumes
        .iter()
        .enumerate()
        .map(|(i, c)| create(i, &format!("F {c}"), c))
        .collect();
    plan.push(json!({"columnIndex": 14, "sourceHeader": "Skipped", "action": {"kind": "skip"}}));
    let reply = run(
        api,
        db_id,
        "people.csv",
        csv.as_bytes(),
        new_table("People"),
        json!(plan),
    )
    .await;
    let r = reply.expect_ok();
    assert_eq!(r["created"], 3);
    let table_id = r["tableId"].as_str().expect("tableId").to_owned();

    let table = api.get(&format!("/api/tables/{table_id}")).await;
    let table = &table.expect_ok()["table"];
    assert_eq!(table["name"], "People");
    let made: Vec<(String, String)> = table["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().into(),
                f["type"].as_str().unwrap().into(),
            )
        })
        .collect();
    let wanted: Vec<(String, String)> = costumes
        .iter()
        .map(|c| (format!("F {c}"), c.to_string()))
        .collect();
    assert_eq!(
        made, wanted,
        "one field per planned column, skipped and unlisted ones left out"
    );

    let rows = records(api, &table_id).await;
    assert_eq!(rows.len(), 3);
    let ann = &by(&rows, "F single_line_text", "Ann")["fields"];
    assert_eq!(ann["F long_text"], "two\nlines");
    assert_eq!(ann["F email"], "ann@example.com");
    assert_eq!(ann["F phone"], "+1 555 0100");
    assert_eq!(ann["F url"], "https://a.example");
    assert_eq!(ann["F number"], 1234.5);
    assert_eq!(ann["F currency"], 12.5);
    assert_eq!(ann["F percent"], 12);
    assert_eq!(ann["F rating"], 4);
    assert_eq!(ann["F duration"], 5400);
    assert_eq!(ann["F date"], "2024-01-31");
    assert_eq!(ann["F checkbox"], true);
    assert_eq!(ann["F single_select"], "Open");
    assert_eq!(ann["F multi_select"], json!(["a", "b"]));
    let bob = &by(&rows, "F single_line_text", "Bob")["fields"];
    assert_eq!(bob["F number"], -3);
    assert_eq!(bob["F currency"], 4);
    assert_eq!(bob["F rating"], 5, "clamped to the default 5 stars");
    assert_eq!(bob["F duration"], 90);
    assert_eq!(bob["F date"], "2024-02-29");
    assert_eq!(bob["F checkbox"], false);
    assert_eq!(bob["F single_select"], "Done");
    let cy = &by(&rows, "F single_line_text", "Cy")["fields"];
    assert_eq!(cy["F number"], Value::Null);
    assert_eq!(cy["F single_select"], "Open");

    // The select's choices are the file's distinct values, once each.
    let status = fields(api, &table_id)
        .await
        .into_iter()
        .find(|f| f["name"] == "F single_select")
        .unwrap();
    let names: Vec<&str> = status["options"]["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Open", "Done"]);
}

#[tokio::test]
async fn mapping_onto_an_existing_table_adds_choices_keeping_ids_and_colours() {
    let owner = Person::new().await;
    let editor = Person::new().await;
    let db_id = &owner.api.new_database("import-run").await;
    editor.join(db_id, Role::Editor).await;
    let api = &owner.api;
    let table_id = id(&api.create_table(db_id, "Tasks").await);
    let name = id(&api
        .create_field(
            &table_id,
            json!({"name": "Name", "type": "single_line_text"}),
        )
        .await);
    let status = api
        .create_field(
            &table_id,
            json!({"name": "Status", "type": "single_select", "options": {"choices": [
                {"name": "Open", "color": "red"}, {"name": "Done", "color": "blue"}
            ]}}),
        )
        .await;
    let status_id = id(&status);
    let qty = id(&api
        .create_field(&table_id, json!({"name": "Qty", "type": "number"}))
        .await);
    api.post(
        &format!("/api/tables/{table_id}/records"),
        json!({"records": [{"fields": {"Name": "Old", "Status": "Done", "Qty": 1}}]}),
    )
    .await
    .expect_ok();

    let csv =
        "Task,State,Count,Note,Other\nA,Open,5,first,zz\nB,Blocked,6,second,zz\nC,Done,7,,zz\n";
    let plan = json!([
        map(0, &name),
        {"columnIndex": 1, "sourceHeader": "State", "action": {"kind": "map", "targetFieldId": status_id}},
        {"columnIndex": 2, "action": {"kind": "skip"}},
        create(3, "Note", "long_text"),
    ]);
    let reply = run(
        &editor.api,
        db_id,
        "tasks.csv",
        csv.as_bytes(),
        existing(&table_id),
        plan,
    )
    .await;
    assert_eq!(
        reply.expect_ok(),
        &json!({"tableId": table_id, "created": 3})
    );

    let now = fields(api, &table_id).await;
    let names: Vec<&str> = now.iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["Name", "Status", "Qty", "Note"],
        "only the planned field was added"
    );
    let choices = now[1]["options"]["choices"].as_array().unwrap();
    let before = status["options"]["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 3);
    for (kept, was) in choices.iter().zip(before) {
        assert_eq!(kept["id"], was["id"], "existing choice ids kept");
        assert_eq!(kept["color"], was["color"], "existing colours kept");
        assert_eq!(kept["name"], was["name"]);
    }
    assert_eq!(choices[2]["name"], "Blocked");

    let rows = records(api, &table_id).await;
    assert_eq!(rows.len(), 4);
    assert_eq!(by(&rows, "Name", "Old")["fields"]["Qty"], 1);
    let b = &by(&rows, "Name", "B")["fields"];
    assert_eq!(b["Status"], "Blocked");
    assert_eq!(b["Note"], "second");
    assert_eq!(b["Qty"], Value::Null, "a skipped column writes nothing");
    assert_eq!(by(&rows, "Name", "C")["fields"]["Status"], "Done");
    let _ = qty;
}

#[tokio::test]
async fn an_invalid_cell_is_refused_and_nothing_is_written() {
    let owner = Person::new().await;
    let api = &owner.api;
    let db_id = &owner.api.new_database("import-run").await;
    let csv = "Name,Qty,Day\nAnn,1,2024-01-01\nBob,2,2024-01-02\nCy,lots,2024-01-03\n";
    let plan = json!([
        create(0, "Name", "single_line_text"),
        create(1, "Qty", "number"),
        create(2, "Day", "date")
    ]);
    let msg = run(
        api,
        db_id,
        "a.csv",
        csv.as_bytes(),
        new_table("T"),
        plan.clone(),
    )
    .await
    .expect_error(400, "bad_request");
    assert!(msg.contains("Data row 3, column 1 ('Qty')"), "{msg}");
    assert!(msg.contains("'lots'"), "{msg}");
    assert!(
        tables(api, db_id).await.is_empty(),
        "no table is left behind"
    );

    // An existing table: no row and no planned field is added either.
    let table_id = id(&api.create_table(db_id, "Kept").await);
    let day = id(&api
        .create_field(&table_id, json!({"name": "Day", "type": "date"}))
        .await);
    let csv = "Name,Day\nAnn,2024-01-01\nBob,2024-02-30\n";
    let plan = json!([create(0, "Name", "single_line_text"), map(1, &day)]);
    let msg = run(
        api,
        db_id,
        "a.csv",
        csv.as_bytes(),
        existing(&table_id),
        plan,
    )
    .await
    .expect_error(400, "bad_request");
    assert!(msg.contains("Data row 2, column 1 ('Day')"), "{msg}");
    assert!(msg.contains("'2024-02-30'"), "{msg}");
    assert_eq!(fields(api, &table_id).await.len(), 1);
    assert!(records(api, &table_id).await.is_empty());
}

#[tokio::test]
async fn refused_costumes_plans_and_select_ceilings_write_nothing() {
    let owner = Person::new().await;
    let api = &owner.api;
    let db_id = &owner.api.new_database("import-run").await;
    let table_id = id(&api.create_table(db_id, "T").await);
    let other_db = owner.api.new_database("import-other").await;
    let foreign_table = id(&api.create_table(&other_db, "Elsewhere").await);
    let n = id(&api
        .create_field(&table_id, json!({"name": "N", "type": "number"}))
        .await);
    let formula = id(&api
        .create_field(
            &table_id,
            json!({"name": "Twice", "type": "formula", "options": {"expression": "{N} * 2"}}),
        )
        .await);
    let attachment = id(&api
        .create_field(&table_id, json!({"name": "Files", "type": "attachment"}))
        .await);
    let csv = b"a\n1\n2\n";
    let bad = |r: Reply| r.expect_error(400, "bad_request");

    for costume in ["link", "attachment", "formula", "lookup", "rollup"] {
        let msg = bad(run(
            api,
            db_id,
            "a.csv",
            csv,
            new_table("X"),
            json!([create(0, "A", costume)]),
        )
        .await);
        assert!(
            msg.contains(&format!("cannot be imported as '{costume}'")),
            "{msg}"
        );
    }
    for field in [&formula, &attachment] {
        let msg = bad(run(
            api,
            db_id,
            "a.csv",
            csv,
            existing(&table_id),
            json!([map(0, field)]),
        )
        .await);
        assert!(msg.contains("cannot be imported as"), "{msg}");
    }
    let msg = bad(run(
        api,
        db_id,
        "a.csv",
        csv,
        existing(&table_id),
        json!([{"columnIndex": 0, "action": {"kind": "map", "targetFieldID": n}}]),
    )
    .await);
    assert!(msg.contains("unknown key 'targetFieldID'"), "{msg}");
    let msg = bad(run(api, db_id, "a.csv", csv, json!({"mode": "new"}), json!([])).await);
    assert!(msg.contains("target.mode"), "{msg}");
    run(
        api,
        db_id,
        "a.csv",
        csv,
        existing(&foreign_table),
        json!([map(0, &n)]),
    )
    .await
    .expect_error(404, "not_found");

    let mut many = String::from("v\n");
    for i in 0..101 {
        many.push_str(&format!("value {i}\n"));
    }
    let msg = bad(run(
        api,
        db_id,
        "a.csv",
        many.as_bytes(),
        new_table("S"),
        json!([create(0, "V", "single_select")]),
    )
    .await);
    assert!(msg.contains("101 distinct values"), "{msg}");

    let names: Vec<Value> = tables(api, db_id)
        .await
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    assert_eq!(names, [json!("T")], "no table made by a refused run");
    assert_eq!(fields(api, &table_id).await.len(), 3);
    assert!(records(api, &table_id).await.is_empty());
}

#[tokio::test]
async fn a_run_needs_an_editor_and_a_member() {
    let owner = Person::new().await;
    let db_id = &owner.api.new_database("import-run").await;
    let viewer = Person::member(db_id, Role::Viewer).await;
    let stranger = Person::new().await;
    let (_, read_only) = owner
        .another_key(Access::ReadOnly, DatabaseScope::All)
        .await;
    let csv = b"a\n1\n";
    let plan = json!([create(0, "A", "number")]);

    let msg = run(
        &viewer.api,
        db_id,
        "a.csv",
        csv,
        new_table("V"),
        plan.clone(),
    )
    .await
    .expect_error(403, "forbidden");
    assert_eq!(msg, forbidden::VIEWER);
    let msg = run(
        &read_only,
        db_id,
        "a.csv",
        csv,
        new_table("R"),
        plan.clone(),
    )
    .await
    .expect_error(403, "forbidden");
    assert_eq!(msg, forbidden::KEY_READ_ONLY);
    let hidden = run(
        &stranger.api,
        db_id,
        "a.csv",
        csv,
        new_table("S"),
        plan.clone(),
    )
    .await;
    hidden.expect_error(404, "not_found");
    let missing = run(
        &stranger.api,
        "db_000000000000",
        "a.csv",
        csv,
        new_table("S"),
        plan,
    )
    .await;
    assert_eq!(
        hidden.body, missing.body,
        "a non-member's run looks like a missing database"
    );
    assert!(tables(&owner.api, db_id).await.is_empty());
    // The preview stays open to the viewer and the stranger.
    crate::import::preview(&stranger.api, db_id, "a.csv", csv)
        .await
        .expect_ok();
}

#[tokio::test]
async fn a_unique_clash_mid_write_reports_rows_added_and_remaining() {
    let owner = Person::new().await;
    let api = &owner.api;
    let db_id = &owner.api.new_database("import-run").await;
    let table_id = id(&api.create_table(db_id, "Codes").await);
    let code = id(&api
        .create_field(
            &table_id,
            json!({"name": "Code", "type": "single_line_text", "options": {"unique": true}}),
        )
        .await);
    api.post(
        &format!("/api/tables/{table_id}/records"),
        json!({"records": [{"fields": {"Code": "TAKEN"}}]}),
    )
    .await
    .expect_ok();
    // 250 rows; row 180 repeats the code already in the table: rows 1-100
    // land, the batch of rows 101-200 fails.
    let mut csv = String::from("code,n\n");
    for i in 1..=250 {
        let c = if i == 180 {
            "TAKEN".to_owned()
        } else {
            format!("C{i}")
        };
        csv.push_str(&format!("{c},{i}\n"));
    }
    let plan = json!([map(0, &code), create(1, "N", "number")]);
    let msg = run(
        api,
        db_id,
        "codes.csv",
        csv.as_bytes(),
        existing(&table_id),
        plan,
    )
    .await
    .expect_error(400, "bad_request");
    assert!(msg.contains("'Code' must be unique"), "{msg}");
    assert!(msg.contains("100 of 250 rows were already added"), "{msg}");
    assert!(msg.contains("150 rows were not imported"), "{msg}");
    let rows = records(api, &table_id).await;
    assert_eq!(rows.len(), 101);
    let names: Vec<Value> = fields(api, &table_id)
        .await
        .iter()
        .map(|f| f["name"].clone())
        .collect();
    assert_eq!(
        names,
        [json!("Code"), json!("N")],
        "the field made by the run remains"
    );
    assert_eq!(by(&rows, "Code", "C100")["fields"]["N"], 100);

    // A repeat inside the file itself is found before anything is written.
    let csv = "code\nD1\nD2\nD1\n";
    let msg = run(
        api,
        db_id,
        "codes.csv",
        csv.as_bytes(),
        existing(&table_id),
        json!([map(0, &code)]),
    )
    .await
    .expect_error(400, "bad_request");
    assert!(msg.contains("Data rows 1 and 3 both hold 'D1'"), "{msg}");
    assert_eq!(records(api, &table_id).await.len(), 101);
}

#[tokio::test]
async fn an_xlsx_run_imports_the_first_sheet_only() {
    use rust_xlsxwriter::Workbook;
    let mut book = Workbook::new();
    let first = book.add_worksheet();
    first.write(0, 0, "Item").unwrap();
    first.write(0, 1, "Qty").unwrap();
    for (row, (item, qty)) in [("Pen", 3.0), ("Ink", 12.5)].iter().enumerate() {
        first.write(row as u32 + 1, 0, *item).unwrap();
        first.write(row as u32 + 1, 1, *qty).unwrap();
    }
    let second = book.add_worksheet();
    second.write(0, 0, "Item").unwrap();
    second.write(1, 0, "Not imported").unwrap();
    let bytes = book.save_to_buffer().unwrap();

    let owner = Person::new().await;
    let api = &owner.api;
    let db_id = &owner.api.new_database("import-run").await;
    let plan = json!([
        create(0, "Item", "single_line_text"),
        create(1, "Qty", "number")
    ]);
    let reply = run(api, db_id, "stock.xlsx", &bytes, new_table("Stock"), plan).await;
    let table_id = reply.expect_ok()["tableId"].as_str().unwrap().to_owned();
    assert_eq!(reply.body["created"], 2);
    let rows = records(api, &table_id).await;
    assert_eq!(rows.len(), 2);
    assert_eq!(by(&rows, "Item", "Ink")["fields"]["Qty"], 12.5);
}

#[tokio::test]
async fn imported_batches_of_50_or_more_fire_no_webhooks() {
    let owner = Person::new().await;
    let api = &owner.api;
    let db_id = &owner.api.new_database("import-run").await;
    let table_id = id(&api.create_table(db_id, "Hooked").await);
    let n = id(&api
        .create_field(&table_id, json!({"name": "N", "type": "number"}))
        .await);
    let url = sink().await;
    api.post(
        &format!("/api/databases/{db_id}/webhooks"),
        json!({"url": url, "trigger_type": "record_created"}),
    )
    .await
    .expect_ok();
    // 130 rows: a batch of 100 (quiet) and a batch of 30 (fires, as any
    // write of fewer than 50 records does).
    let mut csv = String::from("n\n");
    for i in 0..130 {
        csv.push_str(&format!("{i}\n"));
    }
    let reply = run(
        api,
        db_id,
        "n.csv",
        csv.as_bytes(),
        existing(&table_id),
        json!([map(0, &n)]),
    )
    .await;
    assert_eq!(reply.expect_ok()["created"], 130);
    let pg = database_postgres(db_id).await;
    let enqueued: i64 = pg
        .query_one(
            "SELECT count(*) FROM deliveries WHERE database_id = $1",
            &[db_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(enqueued, 30);
}

/// A local HTTP endpoint answering 200 to anything (webhook deliveries).
async fn sink() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let _ = socket.read(&mut buf).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    format!("http://{addr}/hook")
}
