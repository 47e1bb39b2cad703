//! Part B, Export, through the real router: the zip's entries, the CSV
//! shapes (BOM, header order, trashed records absent, link, multi-select,
//! date-time and checkbox cells, formula-injection quoting), table-name
//! collisions, `comments.csv` only for editors and above, non-members and
//! cross-site requests refused, and the attachments (`attachments.csv`,
//! `attachments/`) on both blob stores.

use std::collections::BTreeMap;
use std::io::{Cursor, Read};

use cluster_protocol::control::Role;
use e2e_tests::stores::{self, Store, Variant};
use e2e_tests::{cluster, id, Api, Person};
use serde_json::{json, Value};

/// The export's status, headers and entries (name -> bytes).
pub(crate) struct Export {
    pub(crate) status: u16,
    headers: reqwest::header::HeaderMap,
    pub(crate) entries: BTreeMap<String, Vec<u8>>,
    /// Entry names in archive order.
    order: Vec<String>,
    pub(crate) body: Vec<u8>,
}

pub(crate) async fn export(person: &Person, db_id: &str, fetch_site: Option<&str>) -> Export {
    let mut req = person
        .api
        .http
        .get(format!(
            "{}/api/databases/{db_id}/export",
            cluster().router_url
        ))
        .header("x-forwarded-for", &person.api.address)
        .header(
            "authorization",
            format!("Bearer {}", person.api.token.as_deref().expect("a key")),
        );
    if let Some(site) = fetch_site {
        req = req.header("sec-fetch-site", site);
    }
    let resp = req.send().await.expect("router reachable");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.bytes().await.expect("body readable").to_vec();
    let mut entries = BTreeMap::new();
    let mut order = Vec::new();
    if status == 200 {
        let mut archive = zip::ZipArchive::new(Cursor::new(body.clone())).expect("a zip");
        for i in 0..archive.len() {
            let mut file = archive.by_index(i).expect("an entry");
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).expect("entry readable");
            let name = file.name().expect("an entry name").to_string();
            order.push(name.clone());
            entries.insert(name, bytes);
        }
    }
    Export {
        status,
        headers,
        entries,
        order,
        body,
    }
}

/// A CSV entry's rows, after checking its byte-order mark.
pub(crate) fn csv_rows(bytes: &[u8]) -> Vec<Vec<String>> {
    let text = bytes
        .strip_prefix(b"\xEF\xBB\xBF")
        .expect("CSV starts with a UTF-8 BOM");
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(text);
    reader
        .records()
        .map(|r| r.expect("a CSV row").iter().map(str::to_owned).collect())
        .collect()
}

#[tokio::test]
async fn export_writes_every_entry_in_part_b_shapes() {
    let owner = Person::new().await;
    let db_id = owner.api.new_database("export").await;
    let api = &owner.api;
    let people = id(&api.create_table(&db_id, "People").await);
    api.create_field(&people, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    let ann = api
        .post(
            &format!("/api/tables/{people}/records"),
            json!({"records": [{"fields": {"Name": "Ann"}}]}),
        )
        .await
        .expect_ok()["records"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let tasks = id(&api.create_table(&db_id, "Tasks").await);
    for body in [
        json!({"name": "Title", "type": "single_line_text"}),
        json!({"name": "Owner", "type": "link", "options": {"target_table_id": people}}),
        json!({"name": "Tags", "type": "multi_select", "options": {"choices": [{"name": "red"}, {"name": "blue"}]}}),
        json!({"name": "At", "type": "date", "options": {"include_time": true}}),
        json!({"name": "Done", "type": "checkbox"}),
        json!({"name": "Score", "type": "number"}),
        json!({"name": "Spent", "type": "duration", "options": {"duration_format": "h:mm:ss"}}),
    ] {
        api.create_field(&tasks, body).await;
    }
    // A second table named like the first, in another case.
    let clash = id(&api.create_table(&db_id, "tasks").await);
    let records = format!("/api/tables/{tasks}/records");
    let made = api
        .post(
            &records,
            json!({"records": [
                {"fields": {"Title": "=HYPERLINK(\"x\")", "Owner": [ann], "Tags": ["red", "blue"],
                            "At": "2026-03-04T05:06:07Z", "Done": true, "Score": -12, "Spent": 5425}},
                {"fields": {"Title": "-not a number", "Done": false}},
                {"fields": {"Title": "gone"}},
            ]}),
        )
        .await;
    let ids: Vec<String> = made.expect_ok()["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(id)
        .collect();
    api.delete(&format!("{records}?records={}", ids[2]))
        .await
        .expect_ok();

    let out = export(&owner, &db_id, None).await;
    assert_eq!(out.status, 200, "{}", String::from_utf8_lossy(&out.body));
    assert_eq!(out.headers["content-type"], "application/zip");
    let disposition = out.headers["content-disposition"].to_str().unwrap();
    assert_eq!(
        disposition,
        format!("attachment; filename=\"export-{db_id}.zip\"")
    );
    let names: Vec<&str> = out.entries.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "People.csv",
            "README.txt",
            "Tasks.csv",
            "attachments.csv",
            "comments.csv",
            "manifest.json",
            "tasks (2).csv",
        ]
    );

    // Manifest: database, tables, fields, views.
    let manifest: Value = serde_json::from_slice(&out.entries["manifest.json"]).unwrap();
    assert!(manifest["exported_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(manifest["database"]["id"], db_id.as_str());
    let tables = manifest["tables"].as_array().unwrap();
    let t = tables.iter().find(|t| t["id"] == tasks.as_str()).unwrap();
    assert_eq!(t["name"], "Tasks");
    assert!(t.get("display_field_id").is_some());
    let owner_field = t["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "Owner")
        .unwrap();
    assert_eq!(owner_field["costume"], "link");
    assert_eq!(owner_field["storage_kind"], "link");
    assert_eq!(owner_field["options"]["target_table_id"], people.as_str());
    assert!(t["views"].is_array());
    assert!(tables.iter().any(|t| t["id"] == clash.as_str()));

    // Tasks: header in field order, trashed record absent, cell shapes.
    let rows = csv_rows(&out.entries["Tasks.csv"]);
    assert_eq!(
        rows[0],
        ["id", "Title", "Owner", "Tags", "At", "Done", "Score", "Spent"]
    );
    assert_eq!(rows.len(), 3, "the trashed record is absent: {rows:?}");
    let row = |rec: &str| rows.iter().find(|r| r[0] == rec).expect("a live record");
    assert_eq!(
        row(&ids[0])[1..],
        [
            "'=HYPERLINK(\"x\")",
            "Ann",
            "red, blue",
            "2026-03-04T05:06:07.000Z",
            "true",
            "-12",
            "1:30:25"
        ]
    );
    assert_eq!(
        row(&ids[1])[1..],
        ["'-not a number", "", "", "", "false", "", ""]
    );
    assert!(!rows.iter().any(|r| r[0] == ids[2]));
    assert_eq!(csv_rows(&out.entries["tasks (2).csv"]), [["id"]]);
    // People carries the link's reverse field: the task's display text,
    // quoted by the injection rule there too.
    let people_rows = csv_rows(&out.entries["People.csv"]);
    assert_eq!(people_rows[0][..2], ["id", "Name"]);
    assert_eq!(people_rows[1], [ann.as_str(), "Ann", "'=HYPERLINK(\"x\")"]);

    assert_eq!(
        csv_rows(&out.entries["comments.csv"]),
        [[
            "id",
            "table",
            "record_id",
            "author",
            "author_id",
            "created_at",
            "edited",
            "body"
        ]]
    );
    assert_eq!(
        csv_rows(&out.entries["attachments.csv"]),
        [["id", "record_id", "filename", "size_bytes", "path"]]
    );
    let readme = String::from_utf8(out.entries["README.txt"].clone()).unwrap();
    // Comments exist now: the README no longer lists them as a gap.
    assert!(!readme.contains("Not exported yet"));
    assert!(readme.contains("comments.csv"));
    assert!(!out.entries.keys().any(|n| n.starts_with("attachments/")));
}

#[tokio::test]
async fn viewers_get_no_comments_and_strangers_nothing() {
    let owner = Person::new().await;
    let db_id = owner.api.new_database("export-roles").await;
    owner.api.create_table(&db_id, "T").await;
    let viewer = Person::new().await;
    viewer.join(&db_id, Role::Viewer).await;
    let editor = Person::new().await;
    editor.join(&db_id, Role::Editor).await;

    let seen = export(&viewer, &db_id, None).await;
    assert_eq!(seen.status, 200);
    assert!(!seen.entries.contains_key("comments.csv"));
    assert!(seen.entries.contains_key("attachments.csv"));
    let by_editor = export(&editor, &db_id, Some("same-origin")).await;
    assert_eq!(by_editor.status, 200);
    assert!(by_editor.entries.contains_key("comments.csv"));

    let stranger = Person::new().await;
    let hidden = export(&stranger, &db_id, None).await;
    assert_eq!(hidden.status, 404);
    let body: Value = serde_json::from_slice(&hidden.body).unwrap();
    assert_eq!(body["error"]["code"], "not_found");
}

#[tokio::test]
async fn cross_site_requests_are_refused() {
    let owner = Person::new().await;
    let db_id = owner.api.new_database("export-site").await;
    for site in ["cross-site", "same-site"] {
        let out = export(&owner, &db_id, Some(site)).await;
        assert_eq!(out.status, 403, "{site}");
        let body: Value = serde_json::from_slice(&out.body).unwrap();
        assert_eq!(body["error"]["code"], "forbidden");
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another site"));
    }
    assert_eq!(export(&owner, &db_id, Some("none")).await.status, 200);
}

const BOUNDARY: &str = "e2e-export-boundary-4c1d";

/// `POST /api/tables/{table}/attachments` (part B, Attachments): multipart
/// `file`, `field_id`, `record_id`; returns the reply's attachment id.
async fn upload(
    api: &Api,
    table: &str,
    field: &str,
    record: &str,
    (filename, content_type, bytes): (&str, &str, &[u8]),
) -> String {
    let mut body = Vec::new();
    for (name, value) in [("field_id", field), ("record_id", record)] {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n\
             Content-Type: {content_type}\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    let resp = api
        .http
        .post(format!("{}/api/tables/{table}/attachments", api.base))
        .header("x-forwarded-for", &api.address)
        .header(
            "authorization",
            format!("Bearer {}", api.token.as_deref().expect("a key")),
        )
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(body)
        .send()
        .await
        .expect("router reachable");
    let status = resp.status().as_u16();
    let reply: Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap_or(Value::Null);
    assert_eq!(status, 200, "upload {filename}: {reply}");
    assert_eq!(reply["filename"], filename);
    assert_eq!(reply["size_bytes"], bytes.len());
    id(&reply)
}

/// `len` bytes that differ from one offset to the next.
fn pattern(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x2545_F491;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Uploaded files, placed in their cells, come out of the export: listed
/// oldest first in `attachments.csv` with their path, the bytes under
/// `attachments/<id>-<filename>` (a trashed record's file too: no trash
/// filter), an upload no cell holds left out. Once per blob store.
async fn export_carries_attachments_on(store: Store) {
    let owner = Person::new().await;
    let api = &owner.api;
    let db_id = api.new_database_on(store, "export-files").await;
    let docs = id(&api.create_table(&db_id, "Docs").await);
    api.create_field(&docs, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    let files = id(&api
        .create_field(&docs, json!({"name": "Files", "type": "attachment"}))
        .await);
    let records = format!("/api/tables/{docs}/records");
    let made = api
        .post(
            &records,
            json!({"records": [{"fields": {"Name": "kept"}}, {"fields": {"Name": "trashed"}}]}),
        )
        .await;
    let recs: Vec<String> = made.expect_ok()["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(id)
        .collect();

    let text = b"minutes of the meeting\n".repeat(200);
    let image = pattern(200_000);
    let report = upload(
        api,
        &docs,
        &files,
        &recs[0],
        ("report.txt", "text/plain", &text),
    )
    .await;
    let photo = upload(
        api,
        &docs,
        &files,
        &recs[1],
        ("photo 日本:1.png", "image/png", &image),
    )
    .await;
    let draft = upload(
        api,
        &docs,
        &files,
        &recs[0],
        ("draft.txt", "text/plain", b"wip"),
    )
    .await;
    for att in [&report, &photo, &draft] {
        assert!(
            stores::blob_exists(&db_id, att, Variant::Original).await,
            "{att} is in the {} store",
            store.as_str()
        );
    }
    api.patch(
        &records,
        json!({"records": [
            {"id": recs[0], "fields": {"Files": [report]}},
            {"id": recs[1], "fields": {"Files": [photo]}},
        ]}),
    )
    .await
    .expect_ok();
    api.delete(&format!("{records}?records={}", recs[1]))
        .await
        .expect_ok();

    let out = export(&owner, &db_id, None).await;
    assert_eq!(out.status, 200, "{}", String::from_utf8_lossy(&out.body));
    let report_path = format!("attachments/{report}-report.txt");
    let photo_path = format!("attachments/{photo}-photo 日本_1.png");
    let in_folder: Vec<&str> = out
        .order
        .iter()
        .filter(|n| n.starts_with("attachments/"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        in_folder,
        [report_path.as_str(), photo_path.as_str()],
        "oldest first"
    );
    assert_eq!(out.entries[&report_path], text);
    assert_eq!(out.entries[&photo_path], image, "the file byte for byte");
    assert_eq!(
        csv_rows(&out.entries["attachments.csv"]),
        [
            ["id", "record_id", "filename", "size_bytes", "path"].map(String::from),
            [
                report.clone(),
                recs[0].clone(),
                "report.txt".into(),
                text.len().to_string(),
                report_path.clone()
            ],
            [
                photo.clone(),
                recs[1].clone(),
                "photo 日本:1.png".into(),
                image.len().to_string(),
                photo_path.clone()
            ],
        ],
        "oldest first; the trashed record's file listed; the unplaced upload absent"
    );
    let rows = csv_rows(&out.entries["Docs.csv"]);
    assert_eq!(rows[0], ["id", "Name", "Files"]);
    assert_eq!(
        rows[1..],
        [[recs[0].clone(), "kept".into(), report.clone()]]
    );
}

#[tokio::test]
async fn export_carries_attachments_from_the_local_store() {
    export_carries_attachments_on(Store::Local).await;
}

#[tokio::test]
async fn export_carries_attachments_from_s3() {
    export_carries_attachments_on(Store::S3).await;
}
