//! Part B "Attachments": the upload route (multipart in any order, the
//! binding checks, nothing left behind on a failure), thumbnails, the
//! signed file route, and the bytes leaving the store after purge and
//! table deletion (the blob sweeper).

use std::io::Cursor;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use cluster_protocol::control::Role;
use cluster_protocol::error::forbidden;
use cluster_protocol::principal::Principal;
use serde_json::{json, Value};

use crate::helpers::*;

const BOUNDARY: &str = "----tabula-test-boundary";

/// One part of a multipart form.
enum Part<'a> {
    Text(&'a str, &'a str),
    /// `file` with a filename (as written in the header) and a content type.
    File(Option<&'a str>, Option<&'a str>, &'a [u8]),
}

fn form(parts: &[Part<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        out.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        match part {
            Part::Text(name, value) => {
                out.extend_from_slice(
                    format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                        .as_bytes(),
                );
            }
            Part::File(filename, content_type, bytes) => {
                let mut head = "Content-Disposition: form-data; name=\"file\"".to_owned();
                if let Some(f) = filename {
                    head.push_str(&format!("; filename=\"{f}\""));
                }
                head.push_str("\r\n");
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

async fn send_raw(app: &TestApp, table: &str, p: &Principal, body: Vec<u8>) -> Reply {
    let mut req = app
        .http
        .post(format!(
            "http://{}/api/tables/{table}/attachments",
            app.addr
        ))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .body(body)
        .build()
        .unwrap();
    p.sign_reqwest(SECRET.as_bytes(), chrono::Utc::now().timestamp(), &mut req);
    let resp = app.http.execute(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.unwrap();
    Reply {
        status,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

async fn upload(app: &TestApp, table: &str, p: &Principal, parts: &[Part<'_>]) -> Reply {
    send_raw(app, table, p, form(parts)).await
}

fn png(width: u32, height: u32) -> Vec<u8> {
    let image = image::DynamicImage::new_rgb8(width, height);
    let mut out = Cursor::new(Vec::new());
    image.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

fn blob_root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("shard-node-blobs")
}

/// The attachment directories of a database in the local store.
fn stored_attachments(database_id: &str) -> Vec<String> {
    std::fs::read_dir(blob_root().join(database_id))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("att_"))
                .collect()
        })
        .unwrap_or_default()
}

fn original_path(database_id: &str, attachment_id: &str) -> PathBuf {
    blob_root()
        .join(database_id)
        .join(attachment_id)
        .join("original")
}

/// Polls until `check` holds (the sweeper runs after commit, on its own).
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..300 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never happened: {what}");
}

/// A link handed out for the router, sent to this node instead.
fn on_node(app: &TestApp, link: &str) -> String {
    let url = url::Url::parse(link).unwrap();
    format!(
        "http://{}{}?{}",
        app.addr,
        url.path(),
        url.query().unwrap_or_default()
    )
}

struct Fixture {
    app: TestApp,
    db: String,
    owner: Principal,
    table: String,
    files: String,
    record: String,
}

async fn fixture() -> Fixture {
    let app = spawn_app().await;
    let (db, owner) = app.owned_database().await;
    let table = app.create_table_id(&db, &owner, "Docs").await;
    let r = app
        .post(
            &format!("/api/tables/{table}/fields"),
            &owner,
            json!({"name": "Files", "type": "attachment"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let files = r.body["field"]["id"].as_str().unwrap().to_owned();
    let record = new_record(&app, &table, &owner).await;
    Fixture {
        app,
        db,
        owner,
        table,
        files,
        record,
    }
}

async fn new_record(app: &TestApp, table: &str, p: &Principal) -> String {
    let r = app
        .post(
            &format!("/api/tables/{table}/records"),
            p,
            json!({"records": [{"fields": {}}]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    r.body["records"][0]["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_image_upload_answers_the_entry_and_gets_thumbnails() {
    let f = fixture().await;
    let bytes = png(2000, 1000);
    // The file first: it is streamed before the ids are known.
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::File(Some("photo.png"), None, &bytes),
            Part::Text("record_id", &f.record),
            Part::Text("field_id", &f.files),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let id = r.body["id"].as_str().unwrap();
    assert!(id.starts_with(&format!("att_{}", &f.db[3..8])), "{id}");
    assert_eq!(r.body["filename"], "photo.png");
    assert_eq!(r.body["size_bytes"], bytes.len() as u64);
    assert_eq!(r.body["content_type"], "image/png");
    let mut keys: Vec<&str> = r
        .body
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
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
    let url = r.body["url"].as_str().unwrap();
    let thumb = r.body["thumb_url"].as_str().unwrap();
    let card = r.body["card_url"].as_str().unwrap();
    assert!(url.contains(&format!("/api/files/{id}/original?")), "{url}");
    assert_ne!(thumb, url);
    assert_ne!(card, url);

    let original = f.app.http.get(on_node(&f.app, url)).send().await.unwrap();
    assert_eq!(original.status(), 200);
    assert_eq!(original.headers()["content-type"], "image/png");
    assert_eq!(original.headers()["x-content-type-options"], "nosniff");
    assert_eq!(original.headers()["accept-ranges"], "bytes");
    assert_eq!(original.bytes().await.unwrap().as_ref(), &bytes[..]);
    for (link, size) in [(thumb, (256, 128)), (card, (1024, 512))] {
        let resp = f.app.http.get(on_node(&f.app, link)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "image/webp");
        let webp = resp.bytes().await.unwrap();
        let image = image::load_from_memory_with_format(&webp, image::ImageFormat::WebP).unwrap();
        assert_eq!((image.width(), image.height()), size);
    }

    // The registry row: unplaced, bound to the table, field and record.
    let row = f
        .app
        .pg
        .query_one(
            "SELECT table_id, field_id, record_id, placed, thumbnails FROM attachments WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), f.table);
    assert_eq!(row.get::<_, String>(1), f.files);
    assert_eq!(row.get::<_, String>(2), f.record);
    assert!(!row.get::<_, bool>(3));
    assert!(row.get::<_, bool>(4));
    let held: i64 = f
        .app
        .pg
        .query_one(
            "SELECT attachment_bytes FROM databases WHERE id = $1",
            &[&f.db],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(held, bytes.len() as i64);
}

#[tokio::test]
async fn a_small_image_is_never_enlarged() {
    let f = fixture().await;
    let bytes = png(300, 200);
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(Some("small.png"), Some("image/png"), &bytes),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    for key in ["thumb_url", "card_url"] {
        let link = r.body[key].as_str().unwrap();
        let webp = f
            .app
            .http
            .get(on_node(&f.app, link))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let image = image::load_from_memory_with_format(&webp, image::ImageFormat::WebP).unwrap();
        let expected = if key == "thumb_url" {
            (256, 171)
        } else {
            (300, 200)
        };
        assert_eq!((image.width(), image.height()), expected, "{key}");
    }
}

#[tokio::test]
async fn text_svg_and_undecodable_files_keep_one_link() {
    let f = fixture().await;
    let svg = br#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>"#;
    let cases: [(&str, Option<&str>, &[u8], &str); 4] = [
        (
            "notes.txt",
            Some("text/plain"),
            b"hello world",
            "text/plain",
        ),
        ("logo.svg", Some("image/svg+xml"), svg, "image/svg+xml"),
        (
            "broken.png",
            Some("image/png"),
            b"\x89PNG\r\n\x1a\nbroken",
            "image/png",
        ),
        (
            "blob",
            Some("application/octet-stream"),
            b"\x00\x01\x02",
            "application/octet-stream",
        ),
    ];
    for (name, ct, bytes, expected) in cases {
        let r = upload(
            &f.app,
            &f.table,
            &f.owner,
            &[
                Part::Text("field_id", &f.files),
                Part::File(Some(name), ct, bytes),
                Part::Text("record_id", &f.record),
            ],
        )
        .await;
        assert_eq!(r.status, 200, "{name}: {:?}", r.body);
        assert_eq!(r.body["content_type"], expected, "{name}");
        assert_eq!(r.body["thumb_url"], r.body["url"], "{name}");
        assert_eq!(r.body["card_url"], r.body["url"], "{name}");
    }
    // The SVG is a download, never a page of the API's origin.
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(Some("logo.svg"), Some("image/svg+xml"), svg),
        ],
    )
    .await;
    let resp = f
        .app
        .http
        .get(on_node(&f.app, r.body["url"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    let disposition = resp.headers()["content-disposition"].to_str().unwrap();
    assert!(disposition.starts_with("attachment;"), "{disposition}");
    // No filename: stored as `file`.
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(None, Some("text/plain"), b"x"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["filename"], "file");
}

#[tokio::test]
async fn roles_decide_who_uploads() {
    let f = fixture().await;
    let parts = [
        Part::Text("field_id", &f.files),
        Part::Text("record_id", &f.record),
        Part::File(Some("a.txt"), Some("text/plain"), b"a"),
    ];
    let r = upload(&f.app, &f.table, &editor(&f.db), &parts).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = upload(&f.app, &f.table, &viewer(&f.db), &parts).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.error_message(), forbidden::VIEWER);
    let r = upload(
        &f.app,
        &f.table,
        &read_only(member(&user_id(), &f.db, Role::Editor)),
        &parts,
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.error_message(), forbidden::KEY_READ_ONLY);
    let stranger = Principal {
        role: None,
        ..editor(&f.db)
    };
    let r = upload(&f.app, &f.table, &stranger, &parts).await;
    assert_eq!(r.status, 404);
    assert_eq!(stored_attachments(&f.db).len(), 1);
}

#[tokio::test]
async fn the_field_and_record_must_be_this_tables() {
    let f = fixture().await;
    let other = f.app.create_table_id(&f.db, &f.owner, "Other").await;
    let r = f
        .app
        .post(
            &format!("/api/tables/{other}/fields"),
            &f.owner,
            json!({"name": "Elsewhere", "type": "attachment"}),
        )
        .await;
    let foreign_field = r.body["field"]["id"].as_str().unwrap().to_owned();
    let r = f
        .app
        .post(
            &format!("/api/tables/{}/fields", f.table),
            &f.owner,
            json!({"name": "Title", "type": "single_line_text"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let text_field = r.body["field"]["id"].as_str().unwrap().to_owned();
    let foreign_record = new_record(&f.app, &other, &f.owner).await;
    let trashed = new_record(&f.app, &f.table, &f.owner).await;
    let r = f
        .app
        .call(
            "DELETE",
            &format!("/api/tables/{}/records", f.table),
            Signing::With(&f.owner),
            Body::Json(json!({"records": [trashed]})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    let try_with = |field: String, record: String, file_first: bool| {
        let f = &f;
        async move {
            let file = Part::File(Some("a.txt"), Some("text/plain"), b"abc");
            let parts = if file_first {
                vec![
                    file,
                    Part::Text("field_id", &field),
                    Part::Text("record_id", &record),
                ]
            } else {
                vec![
                    Part::Text("field_id", &field),
                    Part::Text("record_id", &record),
                    file,
                ]
            };
            upload(&f.app, &f.table, &f.owner, &parts).await
        }
    };
    for file_first in [true, false] {
        let r = try_with(text_field.clone(), f.record.clone(), file_first).await;
        assert_eq!(r.status, 400, "{:?}", r.body);
        assert_eq!(
            r.error_message(),
            format!("field_id {text_field} is a single_line_text field; attachments go into an attachment field.")
        );
        let r = try_with(foreign_field.clone(), f.record.clone(), file_first).await;
        assert_eq!(r.status, 400, "{:?}", r.body);
        assert_eq!(
            r.error_message(),
            format!(
                "field_id {foreign_field} is a field of another table, not of {}.",
                f.table
            )
        );
        let r = try_with("fld_nothing".into(), f.record.clone(), file_first).await;
        assert_eq!(r.status, 400, "{:?}", r.body);
        let r = try_with(f.files.clone(), trashed.clone(), file_first).await;
        assert_eq!(r.status, 404, "{:?}", r.body);
        assert_eq!(r.error_code(), "not_found");
        let r = try_with(
            f.files.clone(),
            format!("rec_{}zzzzzzz", &f.db[3..8]),
            file_first,
        )
        .await;
        assert_eq!(r.status, 404, "{:?}", r.body);
        let r = try_with(f.files.clone(), foreign_record.clone(), file_first).await;
        assert_eq!(r.status, 400, "{:?}", r.body);
        assert_eq!(
            r.error_message(),
            format!(
                "record_id {foreign_record} is a record of another table, not of {}.",
                f.table
            )
        );
    }
    // An unknown table is 404 before the body is read.
    let r = upload(
        &f.app,
        &format!("tbl_{}zzzzzzz", &f.db[3..8]),
        &f.owner,
        &[Part::File(Some("a.txt"), None, b"abc")],
    )
    .await;
    assert_eq!(r.status, 404);
    // Nothing was kept by any refusal.
    assert!(
        stored_attachments(&f.db).is_empty(),
        "{:?}",
        stored_attachments(&f.db)
    );
    let rows: i64 = f
        .app
        .pg
        .query_one(
            "SELECT count(*) FROM attachments WHERE database_id = $1",
            &[&f.db],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn malformed_forms_are_refused_saying_what_is_wrong() {
    let f = fixture().await;
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[Part::File(Some("a.txt"), None, b"abc")],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.error_message(),
        "The multipart parts field_id, record_id are missing: an upload needs file, field_id and record_id."
    );
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
        ],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.error_message(),
        "The multipart part file is missing: an upload needs file, field_id and record_id."
    );
    // Truncated in the middle of the file.
    let mut body = form(&[
        Part::Text("field_id", &f.files),
        Part::Text("record_id", &f.record),
        Part::File(Some("big.bin"), None, &vec![7u8; 200_000]),
    ]);
    body.truncate(100_000);
    let r = send_raw(&f.app, &f.table, &f.owner, body).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(
        r.error_message(),
        "The multipart body could not be read: it is malformed or truncated."
    );
    // Not multipart at all.
    let r = f
        .app
        .post(
            &format!("/api/tables/{}/attachments", f.table),
            &f.owner,
            json!({}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r
        .error_message()
        .starts_with("Request body must be multipart/form-data"));
    // Two files.
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(Some("a.txt"), None, b"a"),
            Part::File(Some("b.txt"), None, b"b"),
        ],
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(
        stored_attachments(&f.db).is_empty(),
        "{:?}",
        stored_attachments(&f.db)
    );
}

#[tokio::test]
async fn the_database_byte_ceiling_refuses_and_keeps_nothing() {
    let f = fixture().await;
    let ceiling = shard_node::attachments::limits::MAX_DATABASE_BYTES;
    f.app
        .pg
        .execute(
            "UPDATE databases SET attachment_bytes = $2 WHERE id = $1",
            &[&f.db, &(ceiling - 10)],
        )
        .await
        .unwrap();
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::File(Some("a.txt"), Some("text/plain"), &[b'x'; 11]),
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
        ],
    )
    .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(
        r.error_message()
            .contains("100 GB limit of attachment storage"),
        "{}",
        r.error_message()
    );
    assert!(stored_attachments(&f.db).is_empty());
}

#[tokio::test]
async fn the_file_route_serves_ranges_and_checks_the_link() {
    let f = fixture().await;
    let content = b"0123456789abcdef";
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(Some("digits.txt"), Some("text/plain"), content),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let id = r.body["id"].as_str().unwrap().to_owned();
    let link = on_node(&f.app, r.body["url"].as_str().unwrap());
    let get = |range: Option<&'static str>| {
        let mut req = f.app.http.get(&link);
        if let Some(r) = range {
            req = req.header("range", r);
        }
        req.send()
    };
    let whole = get(None).await.unwrap();
    assert_eq!(whole.status(), 200);
    assert_eq!(whole.headers()["content-length"], "16");
    let cache = whole.headers()["cache-control"]
        .to_str()
        .unwrap()
        .to_owned();
    let max_age: u64 = cache
        .strip_prefix("private, max-age=")
        .unwrap()
        .parse()
        .unwrap();
    assert!((45 * 60..=3600).contains(&max_age), "{cache}");
    for (range, status, body, content_range) in [
        ("bytes=0-3", 206, &b"0123"[..], Some("bytes 0-3/16")),
        ("bytes=10-", 206, &b"abcdef"[..], Some("bytes 10-15/16")),
        ("bytes=-2", 206, &b"ef"[..], Some("bytes 14-15/16")),
        ("bytes=0-1,4-5", 200, &content[..], None),
    ] {
        let resp = get(Some(range)).await.unwrap();
        assert_eq!(resp.status(), status, "{range}");
        assert_eq!(
            resp.headers()
                .get("content-range")
                .map(|v| v.to_str().unwrap()),
            content_range,
            "{range}"
        );
        assert_eq!(resp.bytes().await.unwrap().as_ref(), body, "{range}");
    }
    let resp = get(Some("bytes=16-")).await.unwrap();
    assert_eq!(resp.status(), 416);
    assert_eq!(resp.headers()["content-range"], "bytes */16");
    let head = f.app.http.head(&link).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-length"], "16");

    // A tampered signature, a missing one, another variant.
    let tampered = link.replace("signature=", "signature=0");
    let resp = f.app.http.get(&tampered).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "forbidden");
    assert_eq!(
        body["error"]["message"],
        "This file link's signature is not valid."
    );
    let bare = link.split('?').next().unwrap();
    let resp = f.app.http.get(bare).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    let resp = f
        .app
        .http
        .get(link.replace("/original?", "/thumb-256?"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);

    // An expired link, signed two hours ago with the cluster's key.
    let store = blobstore::BlobStore::open(&blobstore::Settings::local(blob_root())).unwrap();
    let links = shard_node::attachments::links::Links::new(
        SECRET.as_bytes(),
        shard_node::config::DEFAULT_PUBLIC_URL,
        store,
    );
    let old = links.local_link(
        &id,
        blobstore::Variant::Original,
        SystemTime::now() - Duration::from_secs(7200),
    );
    let resp = f.app.http.get(on_node(&f.app, &old)).send().await.unwrap();
    assert_eq!(resp.status(), 403);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["error"]["message"],
        "This file link has expired: read the record again for a fresh link."
    );

    // Deleted: the link verifies, the attachment is gone.
    f.app
        .pg
        .execute("DELETE FROM attachments WHERE id = $1", &[&id])
        .await
        .unwrap();
    let resp = f.app.http.get(&link).send().await.unwrap();
    assert_eq!(resp.status(), 404);
}

#[tokio::test]
async fn a_hostile_filename_stays_one_safe_header() {
    let f = fixture().await;
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(Some(r#"quo\"te ü.png"#), Some("image/png"), &png(4, 4)),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["filename"], "quo\"te ü.png");
    let id = r.body["id"].as_str().unwrap();
    // A newline cannot travel in a part header; put one in as stored.
    let hostile = "a\"b\r\nSet-Cookie: x=1; é.png";
    f.app
        .pg
        .execute(
            "UPDATE attachments SET filename = $2 WHERE id = $1",
            &[&id, &hostile],
        )
        .await
        .unwrap();
    let resp = f
        .app
        .http
        .get(on_node(&f.app, r.body["url"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("set-cookie").is_none());
    let disposition = resp.headers()["content-disposition"].to_str().unwrap();
    assert!(
        disposition.starts_with("inline; filename=\""),
        "{disposition}"
    );
    assert!(!disposition.contains('\n') && !disposition.contains('\r'));
    let encoded = disposition.split("filename*=UTF-8''").nth(1).unwrap();
    let decoded = url::form_urlencoded::parse(format!("x={encoded}").as_bytes())
        .next()
        .unwrap()
        .1
        .into_owned();
    assert_eq!(decoded, hostile);
}

#[tokio::test]
async fn purge_and_table_delete_remove_rows_and_bytes() {
    let f = fixture().await;
    let up = |record: String| {
        let f = &f;
        async move {
            let r = upload(
                &f.app,
                &f.table,
                &f.owner,
                &[
                    Part::Text("field_id", &f.files),
                    Part::Text("record_id", &record),
                    Part::File(Some("p.png"), None, &png(40, 30)),
                ],
            )
            .await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            r.body["id"].as_str().unwrap().to_owned()
        }
    };
    let kept_record = new_record(&f.app, &f.table, &f.owner).await;
    let purged = up(f.record.clone()).await;
    let kept = up(kept_record.clone()).await;
    assert!(original_path(&f.db, &purged).exists());
    // Trashed: the bytes stay.
    let r = f
        .app
        .call(
            "DELETE",
            &format!("/api/tables/{}/records", f.table),
            Signing::With(&f.owner),
            Body::Json(json!({"records": [f.record]})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = f
        .app
        .post(
            &format!("/api/tables/{}/trash/purge", f.table),
            &f.owner,
            json!({"ids": [f.record]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let rows: i64 = f
        .app
        .pg
        .query_one("SELECT count(*) FROM attachments WHERE id = $1", &[&purged])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
    let dir = blob_root().join(&f.db).join(&purged);
    eventually("the purged record's bytes are deleted", || !dir.exists()).await;
    assert!(original_path(&f.db, &kept).exists());

    // Purge all.
    let second = new_record(&f.app, &f.table, &f.owner).await;
    let all = up(second.clone()).await;
    f.app
        .call(
            "DELETE",
            &format!("/api/tables/{}/records", f.table),
            Signing::With(&f.owner),
            Body::Json(json!({"records": [second]})),
        )
        .await;
    let r = f
        .app
        .post(
            &format!("/api/tables/{}/trash/purge", f.table),
            &f.owner,
            json!({"all": true}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let dir = blob_root().join(&f.db).join(&all);
    eventually("purge all deletes the bytes", || !dir.exists()).await;
    assert!(original_path(&f.db, &kept).exists());
    let held: i64 = f
        .app
        .pg
        .query_one(
            "SELECT attachment_bytes FROM databases WHERE id = $1",
            &[&f.db],
        )
        .await
        .unwrap()
        .get(0);
    let kept_size = std::fs::metadata(original_path(&f.db, &kept))
        .unwrap()
        .len();
    assert_eq!(held, kept_size as i64);

    // Deleting the table takes the rest.
    let r = f
        .app
        .delete(&format!("/api/tables/{}", f.table), &f.owner)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let dir = blob_root().join(&f.db).join(&kept);
    eventually("table delete deletes the bytes", || !dir.exists()).await;
}

#[tokio::test]
async fn the_retention_purger_takes_attachments_too() {
    let f = fixture().await;
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(Some("a.txt"), None, b"old"),
        ],
    )
    .await;
    let id = r.body["id"].as_str().unwrap().to_owned();
    let qualified = format!("\"{}\".\"{}\"", f.db, f.table);
    f.app
        .pg
        .execute(
            &format!(
                "UPDATE {qualified} SET deleted_at = now() - interval '30 days' WHERE id = $1"
            ),
            &[&f.record],
        )
        .await
        .unwrap();
    shard_node::trash::purger::purge_expired(&f.app.db, shard_node::config::TRASH_RETENTION)
        .await
        .unwrap();
    let rows: i64 = f
        .app
        .pg
        .query_one("SELECT count(*) FROM attachments WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
    let dir = blob_root().join(&f.db).join(&id);
    eventually("the purger's attachments lose their bytes", || {
        !dir.exists()
    })
    .await;
}

#[tokio::test]
async fn unplaced_uploads_expire_and_failed_deletes_are_retried() {
    let f = fixture().await;
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(Some("a.txt"), None, b"forgotten"),
        ],
    )
    .await;
    let id = r.body["id"].as_str().unwrap().to_owned();
    f.app
        .pg
        .execute(
            "UPDATE attachments SET created_at = now() - interval '2 days' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let n = shard_node::attachments::sweeper::expire_unplaced(&f.app.db)
        .await
        .unwrap();
    assert!(n >= 1);
    let dir = blob_root().join(&f.db).join(&id);
    eventually("the unplaced upload's bytes are deleted", || !dir.exists()).await;

    // A queued row whose delete fails (the key is not valid) is kept with
    // its attempt counted and pushed into the future.
    let bad = format!("att_{}", "!".repeat(12));
    f.app
        .pg
        .execute(
            "INSERT INTO blob_garbage (attachment_id, database_id, thumbnails) VALUES ($1, $2, true)",
            &[&bad, &f.db],
        )
        .await
        .unwrap();
    let store = blobstore::BlobStore::open(&blobstore::Settings::local(blob_root())).unwrap();
    // Another node's sweeper may take it first; either way it ends up failed.
    let _ = shard_node::attachments::sweeper::pass(&f.app.db, &store)
        .await
        .unwrap();
    let mut attempts = 0;
    for _ in 0..300 {
        let row = f
            .app
            .pg
            .query_one(
                "SELECT attempts, due_at > now(), last_error IS NOT NULL FROM blob_garbage WHERE attachment_id = $1",
                &[&bad],
            )
            .await
            .unwrap();
        attempts = row.get::<_, i32>(0);
        if attempts >= 1 {
            assert!(row.get::<_, bool>(1));
            assert!(row.get::<_, bool>(2));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(attempts >= 1);
    f.app
        .pg
        .execute("DELETE FROM blob_garbage WHERE attachment_id = $1", &[&bad])
        .await
        .unwrap();
}
