//! Part B "Attachments" through the real router: `POST
//! /api/tables/{id}/attachments` (reply shape, roles, the field and record
//! binding, malformed forms), thumbnails of a PNG and none for text and
//! SVG, the signed links (content type, a hostile filename, ranges, a
//! tampered signature, a deleted attachment), and the bytes leaving the
//! blob store after purge and table deletion.
//!
//! Store-agnostic: with the local store the links are the cluster's own
//! `/api/files/...` route (fetched through the router), with S3 presigned
//! URLs; the bytes are looked for in `BLOB_DIR` or the S3 test server's
//! data directory (`TEST_S3_ROOT`).

use std::io::Cursor;
use std::path::PathBuf;
use std::time::Duration;

use cluster_protocol::control::Role;
use cluster_protocol::error::forbidden;
use e2e_tests::stores::{database_store, Store};
use e2e_tests::{cluster, database_postgres, fresh_address, id, Api, Person, Reply};
use serde_json::{json, Value};

const BOUNDARY: &str = "----e2e-attachments-boundary";

enum Part<'a> {
    Text(&'a str, &'a str),
    File(&'a str, Option<&'a str>, &'a [u8]),
}

fn form(parts: &[Part<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        out.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        match part {
            Part::Text(name, value) => out.extend_from_slice(
                format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                    .as_bytes(),
            ),
            Part::File(filename, content_type, bytes) => {
                let mut head = format!(
                    "Content-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
                );
                if let Some(ct) = content_type {
                    head.push_str(&format!("Content-Type: {ct}\r\n"));
                }
                head.push_str("\r\n");
                out.extend_from_slice(head.as_bytes());
                out.extend_from_slice(bytes);
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    out
}

async fn send_form(api: &Api, table: &str, body: Vec<u8>) -> Reply {
    api.post_multipart(&format!("/api/tables/{table}/attachments"), BOUNDARY, body)
        .await
}

async fn upload(api: &Api, table: &str, parts: &[Part<'_>]) -> Reply {
    send_form(api, table, form(parts)).await
}

fn png(width: u32, height: u32) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::new_rgb8(width, height)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// A link as a browser would follow it: the cluster's own file route
/// through the router (without an API key), or a presigned S3 URL.
async fn fetch(link: &str, range: Option<&str>) -> reqwest::Response {
    let target = e2e_tests::files::link_target(link);
    let mut req = reqwest::Client::new()
        .get(target)
        .header("x-forwarded-for", fresh_address());
    if let Some(r) = range {
        req = req.header("range", r);
    }
    req.send().await.expect("link reachable")
}

/// Where the original of an attachment lives, in the store of the
/// database's shard (s3s-fs keeps `<root>/<bucket>/<key>`).
async fn original_path(database_id: &str, attachment_id: &str) -> PathBuf {
    let key = format!("{database_id}/{attachment_id}/original");
    if database_store(database_id).await == Store::Local {
        PathBuf::from(cluster().var("BLOB_DIR").expect("BLOB_DIR in the env file")).join(key)
    } else {
        let root = std::env::var("TEST_S3_ROOT").expect("TEST_S3_ROOT with the s3 store");
        let bucket = std::env::var("TEST_S3_BUCKET").expect("TEST_S3_BUCKET with the s3 store");
        PathBuf::from(root).join(bucket).join(key)
    }
}

/// Polls (the sweeper deletes bytes after the deleting commit).
async fn eventually_gone(path: PathBuf) {
    for _ in 0..300 {
        if !path.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{} was never deleted", path.display());
}

struct Fx {
    owner: Person,
    db: String,
    table: String,
    files: String,
    record: String,
}

async fn fixture(store: Store) -> Fx {
    let owner = Person::new().await;
    let api = &owner.api;
    let db = api.new_database_on(store, "att").await;
    let table = id(&api.create_table(&db, "Docs").await);
    let files = id(&api
        .create_field(&table, json!({"name": "Files", "type": "attachment"}))
        .await);
    let record = new_record(api, &table).await;
    Fx {
        owner,
        db,
        table,
        files,
        record,
    }
}

async fn new_record(api: &Api, table: &str) -> String {
    let r = api
        .post(
            &format!("/api/tables/{table}/records"),
            json!({"records": [{"fields": {}}]}),
        )
        .await;
    id(&r.expect_ok()["records"][0])
}

impl Fx {
    async fn upload(&self, name: &str, ct: Option<&str>, bytes: &[u8]) -> Value {
        upload(
            &self.owner.api,
            &self.table,
            &[
                Part::File(name, ct, bytes),
                Part::Text("field_id", &self.files),
                Part::Text("record_id", &self.record),
            ],
        )
        .await
        .expect_ok()
        .clone()
    }
}

#[tokio::test]
async fn a_png_upload_answers_its_entry_and_two_webp_sizes() {
    for store in Store::BOTH {
        a_png_upload_answers_its_entry_and_two_webp_sizes_on(store).await;
    }
}

async fn a_png_upload_answers_its_entry_and_two_webp_sizes_on(store: Store) {
    let f = fixture(store).await;
    let bytes = png(1600, 1200);
    let a = f.upload("photo.png", None, &bytes).await;
    let att = id(&a);
    assert!(att.starts_with(&format!("att_{}", &f.db[3..8])), "{att}");
    assert_eq!(a["filename"], "photo.png");
    assert_eq!(a["size_bytes"], bytes.len() as u64);
    assert_eq!(a["content_type"], "image/png");
    let mut keys: Vec<&str> = a.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "card_url",
            "content_type",
            "filename",
            "id",
            "size_bytes",
            "thumb_url",
            "url"
        ]
    );
    let original = fetch(a["url"].as_str().unwrap(), None).await;
    assert_eq!(original.status(), 200);
    assert_eq!(original.headers()["content-type"], "image/png");
    assert_eq!(original.bytes().await.unwrap().as_ref(), &bytes[..]);
    for (key, size) in [("thumb_url", (256, 192)), ("card_url", (1024, 768))] {
        let resp = fetch(a[key].as_str().unwrap(), None).await;
        assert_eq!(resp.status(), 200, "{key}");
        assert_eq!(resp.headers()["content-type"], "image/webp", "{key}");
        let webp = resp.bytes().await.unwrap();
        let image = image::load_from_memory_with_format(&webp, image::ImageFormat::WebP)
            .expect("a WebP derivative");
        assert_eq!((image.width(), image.height()), size, "{key}");
    }
    // A small image is never enlarged.
    let small = f
        .upload("small.png", Some("image/png"), &png(100, 60))
        .await;
    let card = fetch(small["card_url"].as_str().unwrap(), None).await;
    let image = image::load_from_memory(&card.bytes().await.unwrap()).unwrap();
    assert_eq!((image.width(), image.height()), (100, 60));
    assert!(original_path(&f.db, &att).await.exists());
}

#[tokio::test]
async fn text_and_svg_keep_one_link() {
    for store in Store::BOTH {
        text_and_svg_keep_one_link_on(store).await;
    }
}

async fn text_and_svg_keep_one_link_on(store: Store) {
    let f = fixture(store).await;
    let text = f.upload("notes.txt", Some("text/plain"), b"hello").await;
    assert_eq!(text["content_type"], "text/plain");
    let svg = f
        .upload(
            "logo.svg",
            Some("image/svg+xml"),
            br#"<svg xmlns="http://www.w3.org/2000/svg"/>"#,
        )
        .await;
    for a in [&text, &svg] {
        assert_eq!(a["thumb_url"], a["url"]);
        assert_eq!(a["card_url"], a["url"]);
    }
    let resp = fetch(svg["url"].as_str().unwrap(), None).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "image/svg+xml");
    let disposition = resp.headers()["content-disposition"].to_str().unwrap();
    assert!(disposition.starts_with("attachment;"), "{disposition}");
}

#[tokio::test]
async fn editors_upload_viewers_and_strangers_do_not() {
    for store in Store::BOTH {
        editors_upload_viewers_and_strangers_do_not_on(store).await;
    }
}

async fn editors_upload_viewers_and_strangers_do_not_on(store: Store) {
    let f = fixture(store).await;
    let parts = [
        Part::Text("field_id", &f.files),
        Part::Text("record_id", &f.record),
        Part::File("a.txt", Some("text/plain"), b"a"),
    ];
    let editor = Person::member(&f.db, Role::Editor).await;
    upload(&editor.api, &f.table, &parts).await.expect_ok();
    let viewer = Person::member(&f.db, Role::Viewer).await;
    let m = upload(&viewer.api, &f.table, &parts)
        .await
        .expect_error(403, "forbidden");
    assert_eq!(m, forbidden::VIEWER);
    let stranger = Person::new().await;
    upload(&stranger.api, &f.table, &parts)
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn wrong_fields_records_and_forms_are_refused() {
    for store in Store::BOTH {
        wrong_fields_records_and_forms_are_refused_on(store).await;
    }
}

async fn wrong_fields_records_and_forms_are_refused_on(store: Store) {
    let f = fixture(store).await;
    let api = &f.owner.api;
    let other = id(&api.create_table(&f.db, "Other").await);
    let foreign_field = id(&api
        .create_field(&other, json!({"name": "Elsewhere", "type": "attachment"}))
        .await);
    let title = id(&api
        .create_field(
            &f.table,
            json!({"name": "Title", "type": "single_line_text"}),
        )
        .await);
    let trashed = new_record(api, &f.table).await;
    api.delete_with(
        &format!("/api/tables/{}/records", f.table),
        json!({"records": [trashed]}),
    )
    .await
    .expect_ok();
    let attempt = |field: &str, record: &str| {
        form(&[
            Part::File("a.txt", None, b"abc"),
            Part::Text("field_id", field),
            Part::Text("record_id", record),
        ])
    };
    let m = send_form(api, &f.table, attempt(&title, &f.record))
        .await
        .expect_error(400, "bad_request");
    assert!(m.contains("is a single_line_text field"), "{m}");
    let m = send_form(api, &f.table, attempt(&foreign_field, &f.record))
        .await
        .expect_error(400, "bad_request");
    assert!(m.contains("is a field of another table"), "{m}");
    send_form(api, &f.table, attempt(&f.files, &trashed))
        .await
        .expect_error(404, "not_found");
    let m = upload(api, &f.table, &[Part::File("a.txt", None, b"abc")])
        .await
        .expect_error(400, "bad_request");
    assert!(m.contains("field_id, record_id are missing"), "{m}");
    let mut truncated = form(&[
        Part::Text("field_id", &f.files),
        Part::Text("record_id", &f.record),
        Part::File("big.bin", None, &vec![1u8; 300_000]),
    ]);
    truncated.truncate(150_000);
    let m = send_form(api, &f.table, truncated)
        .await
        .expect_error(400, "bad_request");
    assert!(m.contains("malformed or truncated"), "{m}");
    let pg = database_postgres(&f.db).await;
    let rows: i64 = pg
        .query_one(
            "SELECT count(*) FROM attachments WHERE database_id = $1",
            &[&f.db],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0, "no registry row is left by a refusal");
}

#[tokio::test]
async fn signed_links_carry_the_file_safely() {
    for store in Store::BOTH {
        signed_links_carry_the_file_safely_on(store).await;
    }
}

async fn signed_links_carry_the_file_safely_on(store: Store) {
    let f = fixture(store).await;
    let a = f
        .upload(r#"we\"ird ü;name.txt"#, Some("text/plain"), b"0123456789")
        .await;
    assert_eq!(a["filename"], "we\"ird ü;name.txt");
    let url = a["url"].as_str().unwrap();
    let resp = fetch(url, None).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/plain");
    assert_eq!(resp.headers()["content-length"], "10");
    let disposition = resp.headers()["content-disposition"].to_str().unwrap();
    assert!(disposition.starts_with("attachment; "), "{disposition}");
    assert!(
        disposition.contains("filename*=UTF-8''we%22ird%20%C3%BC%3Bname.txt"),
        "{disposition}"
    );
    let part = fetch(url, Some("bytes=2-5")).await;
    assert_eq!(part.status(), 206);
    assert_eq!(part.headers()["content-range"], "bytes 2-5/10");
    assert_eq!(part.bytes().await.unwrap().as_ref(), b"2345");

    let tampered = url.replace("ignature=", "ignature=0");
    let refused = fetch(&tampered, None).await.status();
    if database_store(&f.db).await == Store::Local {
        assert_eq!(refused, 403);
        let body: Value = fetch(&tampered, None).await.json().await.unwrap();
        assert_eq!(body["error"]["code"], "forbidden");
    } else {
        // S3 refuses a presigned link whose signature does not verify.
        assert!(refused.is_client_error(), "{refused}");
    }

    // Deleted (the table goes): the link finds nothing.
    f.owner
        .api
        .delete(&format!("/api/tables/{}", f.table))
        .await
        .expect_ok();
    eventually_gone(original_path(&f.db, &id(&a)).await).await;
    assert_eq!(fetch(url, None).await.status(), 404);
}

#[tokio::test]
async fn purge_removes_the_registry_row_and_the_bytes() {
    for store in Store::BOTH {
        purge_removes_the_registry_row_and_the_bytes_on(store).await;
    }
}

async fn purge_removes_the_registry_row_and_the_bytes_on(store: Store) {
    let f = fixture(store).await;
    let api = &f.owner.api;
    let a = f.upload("p.png", None, &png(50, 40)).await;
    let att = id(&a);
    let path = original_path(&f.db, &att).await;
    assert!(path.exists(), "{}", path.display());
    api.delete_with(
        &format!("/api/tables/{}/records", f.table),
        json!({"records": [f.record]}),
    )
    .await
    .expect_ok();
    // Trashed records keep their files.
    tokio::task::yield_now().await;
    assert!(path.exists());
    api.post(
        &format!("/api/tables/{}/trash/purge", f.table),
        json!({"ids": [f.record]}),
    )
    .await
    .expect_ok();
    let pg = database_postgres(&f.db).await;
    let rows: i64 = pg
        .query_one("SELECT count(*) FROM attachments WHERE id = $1", &[&att])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
    eventually_gone(path).await;
    assert_eq!(fetch(a["url"].as_str().unwrap(), None).await.status(), 404);
}
