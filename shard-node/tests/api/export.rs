//! Part B, Export, the attachments: registry rows inserted with SQL and
//! bytes put with the blob store (the upload route is not needed), then
//! the export's `attachments.csv`, `attachments/` entries and README.txt
//! gaps checked, once on a node with the local store and once on a node
//! with the S3 test server.

use std::collections::BTreeMap;
use std::io::{Cursor, Read};

use blobstore::{BlobStore, Variant};
use bytes::Bytes;
use chrono::{Duration, Utc};
use cluster_protocol::ids::{self, Kind};
use cluster_protocol::principal::Principal;
use serde_json::json;

use crate::helpers::*;

/// An entry read back: bytes and how it was compressed.
pub struct Entry {
    pub bytes: Vec<u8>,
    method: zip::CompressionMethod,
}

/// The export's entries by name, and their names in archive order.
pub async fn export(
    app: &TestApp,
    db: &str,
    p: &Principal,
) -> (BTreeMap<String, Entry>, Vec<String>) {
    let mut req = app
        .http
        .get(format!("http://{}/api/databases/{db}/export", app.addr))
        .build()
        .unwrap();
    p.sign_reqwest(SECRET.as_bytes(), Utc::now().timestamp(), &mut req);
    let resp = app.http.execute(req).await.expect("request");
    assert_eq!(resp.status(), 200);
    let body = resp.bytes().await.expect("the whole zip").to_vec();
    let mut archive = zip::ZipArchive::new(Cursor::new(body)).expect("a zip");
    let mut entries = BTreeMap::new();
    let mut order = Vec::new();
    for i in 0..archive.len() {
        let mut file = archive.by_index(i).unwrap();
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).unwrap();
        let name = file.name().unwrap().to_string();
        order.push(name.clone());
        entries.insert(
            name,
            Entry {
                bytes,
                method: file.compression(),
            },
        );
    }
    (entries, order)
}

pub fn csv_rows(bytes: &[u8]) -> Vec<Vec<String>> {
    let text = bytes.strip_prefix(b"\xEF\xBB\xBF").expect("a BOM");
    csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(text)
        .records()
        .map(|r| r.unwrap().iter().map(str::to_owned).collect())
        .collect()
}

/// `len` bytes that differ from one offset to the next.
fn pattern(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x9E37_79B9;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

struct Row<'a> {
    filename: &'a str,
    record: &'a str,
    size: i64,
    placed: bool,
    /// Minutes before now (oldest first in the export).
    age: i64,
}

async fn exports_attachments_with(blobs: blobstore::Settings) {
    let store = BlobStore::open(&blobs).unwrap();
    let app = spawn_app_blobs(blobs).await;
    let (db, owner) = app.owned_database().await;
    let tid = app.create_table_id(&db, &owner, "Docs").await;
    let field = app
        .post(
            &format!("/api/tables/{tid}/fields"),
            &owner,
            json!({"name": "Files", "type": "attachment"}),
        )
        .await;
    assert_eq!(field.status, 200, "{:?}", field.body);
    let fid = field.body["field"]["id"]
        .as_str()
        .expect("a field id")
        .to_owned();
    let made = app
        .post(
            &format!("/api/tables/{tid}/records"),
            &owner,
            json!({"records": [{"fields": {}}, {"fields": {}}]}),
        )
        .await;
    assert_eq!(made.status, 200, "{:?}", made.body);
    let recs: Vec<String> = made.body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    let gone = app
        .call(
            "DELETE",
            &format!("/api/tables/{tid}/records"),
            Signing::With(&owner),
            Body::Json(json!({"records": [recs[1]]})),
        )
        .await;
    assert_eq!(gone.status, 200, "{:?}", gone.body);

    let text = b"plain text, deflated in the zip\n".repeat(100);
    let image = pattern(300_000);
    let rows = [
        // 0: on the live record, stored in the store.
        Row {
            filename: "notes.txt",
            record: &recs[0],
            size: text.len() as i64,
            placed: true,
            age: 50,
        },
        // 1: on the trashed record (no trash filter), an unsafe name.
        Row {
            filename: "../évil/..name.png",
            record: &recs[1],
            size: image.len() as i64,
            placed: true,
            age: 40,
        },
        // 2: an upload no cell holds: not exported.
        Row {
            filename: "draft.txt",
            record: &recs[0],
            size: 4,
            placed: false,
            age: 30,
        },
        // 3: in the registry, not in the store: a blank path and a gap.
        Row {
            filename: "=HYPERLINK(\"x\").txt",
            record: &recs[0],
            size: 7,
            placed: true,
            age: 20,
        },
    ];
    let tag = ids::tag_of(Kind::Database, &db).unwrap();
    let att: Vec<String> = rows
        .iter()
        .map(|_| ids::new_tagged(Kind::Attachment, tag))
        .collect();
    let now = Utc::now();
    for (row, id) in rows.iter().zip(&att) {
        let created_at = now - Duration::minutes(row.age);
        app.pg
            .execute(
                "INSERT INTO attachments (id, database_id, table_id, field_id, record_id, \
                 filename, size_bytes, content_type, placed, created_by, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'usr_test', $10)",
                &[
                    id,
                    &db,
                    &tid,
                    &fid,
                    &row.record,
                    &row.filename,
                    &row.size,
                    &if row.filename.ends_with(".png") {
                        "image/png"
                    } else {
                        "text/plain"
                    },
                    &row.placed,
                    &created_at,
                ],
            )
            .await
            .unwrap();
    }
    let put = |id: &str, bytes: Vec<u8>| {
        let key = blobstore::key(&db, id, Variant::Original).unwrap();
        let store = store.clone();
        async move { store.put_bytes(&key, Bytes::from(bytes)).await.unwrap() }
    };
    put(&att[0], text.clone()).await;
    put(&att[1], image.clone()).await;
    put(&att[2], b"wip!".to_vec()).await;

    let viewer = viewer(&db);
    let (entries, order) = export(&app, &db, &viewer).await;
    let first = format!("attachments/{}-notes.txt", att[0]);
    let second = format!("attachments/{}-._évil_.name.png", att[1]);
    let missing = format!("attachments/{}-=HYPERLINK(_x_).txt", att[3]);
    let files: Vec<&str> = order
        .iter()
        .filter(|n| n.starts_with("attachments/"))
        .map(String::as_str)
        .collect();
    assert_eq!(files, [first.as_str(), second.as_str()], "oldest first");
    assert_eq!(entries[&first].bytes, text);
    assert_eq!(entries[&first].method, zip::CompressionMethod::Deflated);
    assert_eq!(entries[&second].bytes, image, "the image byte for byte");
    assert_eq!(entries[&second].method, zip::CompressionMethod::Stored);

    let listed = csv_rows(&entries["attachments.csv"].bytes);
    let size = |i: usize| rows[i].size.to_string();
    assert_eq!(
        listed,
        [
            ["id", "record_id", "filename", "size_bytes", "path"]
                .map(String::from)
                .to_vec(),
            vec![
                att[0].clone(),
                recs[0].clone(),
                "notes.txt".into(),
                size(0),
                first.clone()
            ],
            vec![
                att[1].clone(),
                recs[1].clone(),
                "../évil/..name.png".into(),
                size(1),
                second.clone()
            ],
            vec![
                att[3].clone(),
                recs[0].clone(),
                "'=HYPERLINK(\"x\").txt".into(),
                size(3),
                String::new()
            ],
        ],
        "oldest first, the trashed record's file included, the unplaced upload absent"
    );

    let readme = String::from_utf8(entries["README.txt"].bytes.clone()).unwrap();
    let gap = readme
        .lines()
        .find(|l| l.contains(&missing))
        .unwrap_or_else(|| panic!("a gap line for the missing file:\n{readme}"));
    assert!(gap.contains("missing from the file store"), "{gap}");
    assert!(!readme.contains(&first), "{readme}");

    store.delete_attachment(&db, &att[0]).await.unwrap();
    store.delete_attachment(&db, &att[1]).await.unwrap();
    store.delete_attachment(&db, &att[2]).await.unwrap();
}

#[tokio::test]
async fn exports_attachments_from_the_local_store() {
    exports_attachments_with(local_blobs()).await;
}

#[tokio::test]
async fn exports_attachments_from_s3() {
    exports_attachments_with(s3_blobs()).await;
}

/// Many attachments: the registry is read in pages (more than one page of
/// 500), every row listed once, in order.
#[tokio::test]
async fn lists_every_attachment_across_registry_pages() {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let tid = app.create_table_id(&db, &owner, "Many").await;
    let field = app
        .post(
            &format!("/api/tables/{tid}/fields"),
            &owner,
            json!({"name": "Files", "type": "attachment"}),
        )
        .await;
    assert_eq!(field.status, 200, "{:?}", field.body);
    let fid = field.body["field"]["id"]
        .as_str()
        .expect("a field id")
        .to_owned();
    let tag = ids::tag_of(Kind::Database, &db).unwrap();
    let n = 1203;
    // Every row at the same instant: the id breaks the tie.
    app.pg
        .execute(
            "INSERT INTO attachments (id, database_id, table_id, field_id, record_id, filename, \
             size_bytes, content_type, placed, created_by, created_at) \
             SELECT x, $1, $2, $3, 'rec_none', 'f.txt', 1, 'text/plain', true, 'usr_test', now() \
             FROM unnest($4::text[]) AS x",
            &[
                &db,
                &tid,
                &fid,
                &(0..n)
                    .map(|_| ids::new_tagged(Kind::Attachment, tag))
                    .collect::<Vec<_>>(),
            ],
        )
        .await
        .unwrap();
    let (entries, _) = export(&app, &db, &owner).await;
    let listed = csv_rows(&entries["attachments.csv"].bytes);
    assert_eq!(listed.len(), n + 1);
    let ids: Vec<String> = listed[1..].iter().map(|r| r[0].clone()).collect();
    let expected: Vec<String> = app
        .pg
        .query(
            "SELECT id FROM attachments WHERE database_id = $1 ORDER BY created_at, id",
            &[&db],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, expected, "each once, in (created_at, id) order");
    assert!(listed[1..].iter().all(|r| r[4].is_empty()));
    let readme = String::from_utf8(entries["README.txt"].bytes.clone()).unwrap();
    assert!(
        readme.contains(&format!("and {} more", n - 1000)),
        "{readme}"
    );
}
