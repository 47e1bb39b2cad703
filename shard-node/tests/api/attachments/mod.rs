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
    fixture_on(spawn_app().await).await
}

/// The fixture's database, table, field and record on `app`.
async fn fixture_on(app: TestApp) -> Fixture {
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

mod deletion;
mod files;
mod limits;
mod upload;
