//! The bounds of exports: a client that stops reading is cut off after the
//! send timeout, and the export's session goes back to the pool; past
//! `SHARD_MAX_EXPORTS` an export is answered 503 until a slot is given
//! back. Each export streams a 24 MiB incompressible attachment, more than
//! the node's channel, its socket and the test's (small) socket buffer
//! hold together, so a client that reads nothing stalls its export. Each
//! test runs a node of its own (chosen limits) on a database of its own.

use std::time::Duration;

use blobstore::{BlobStore, Variant};
use bytes::Bytes;
use chrono::Utc;
use cluster_protocol::ids::{self, Kind};
use cluster_protocol::principal::{Principal, EMPTY_BODY_SHA256};
use serde_json::json;
use shard_node::config::DbLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::helpers::*;

/// Bounds every wait of these tests, so a regression fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(60);
/// The attachment's size.
const FILE_BYTES: usize = 24 << 20;

/// `len` bytes no compressor shrinks.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A database on `url` holding one [`FILE_BYTES`] attachment, made through
/// a node with default limits; its id and its owner.
async fn fixture(url: &str) -> (String, Principal) {
    let app = spawn_app_on(url.to_owned()).await;
    let (db, owner) = app.owned_database().await;
    let tid = app.create_table_id(&db, &owner, "Files").await;
    let fid = app
        .create_field_id(&tid, &owner, "File", "attachment")
        .await;
    let made = app
        .post(
            &format!("/api/tables/{tid}/records"),
            &owner,
            json!({"records": [{"fields": {}}]}),
        )
        .await;
    assert_eq!(made.status, 200, "{:?}", made.body);
    let record = made.body["records"][0]["id"].as_str().unwrap().to_owned();
    let tag = ids::tag_of(Kind::Database, &db).unwrap();
    let att = ids::new_tagged(Kind::Attachment, tag);
    app.pg
        .execute(
            "INSERT INTO attachments (id, database_id, table_id, field_id, record_id, \
             filename, size_bytes, content_type, placed, created_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, 'noise.jpg', $6, 'image/jpeg', true, 'usr_test', $7)",
            &[
                &att,
                &db,
                &tid,
                &fid,
                &record,
                &(FILE_BYTES as i64),
                &Utc::now(),
            ],
        )
        .await
        .unwrap();
    let store = BlobStore::open(&local_blobs()).unwrap();
    let key = blobstore::key(&db, &att, Variant::Original).unwrap();
    store
        .put_bytes(&key, Bytes::from(noise(FILE_BYTES)))
        .await
        .unwrap();
    (db, owner)
}

/// Asks `app` for the export of `db` on a socket with a small receive
/// buffer, reads the response head (200), then reads nothing more.
async fn stalled_export(app: &TestApp, db: &str, p: &Principal) -> TcpStream {
    let path = format!("/api/databases/{db}/export");
    let head = signed_head("GET", &path, p, EMPTY_BODY_SHA256, "");
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    let mut s = socket.connect(app.addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(PATIENCE, s.read(&mut byte))
            .await
            .expect("the export's head within the test's patience")
            .unwrap();
        assert_eq!(n, 1, "the connection closed before the head");
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s
}

/// A signed GET; the response, its body unread.
async fn signed_get(app: &TestApp, path: &str, p: &Principal) -> reqwest::Response {
    let mut req = app
        .http
        .get(format!("http://{}{path}", app.addr))
        .timeout(PATIENCE)
        .build()
        .unwrap();
    p.sign_reqwest(SECRET.as_bytes(), Utc::now().timestamp(), &mut req);
    app.http.execute(req).await.unwrap()
}

/// Polls `path` until it answers 200 (at most [`PATIENCE`]); that answer.
async fn until_ok(app: &TestApp, path: &str, p: &Principal) -> reqwest::Response {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let resp = signed_get(app, path, p).await;
        if resp.status() == 200 {
            return resp;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} still answers {} after the test's patience",
            resp.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_export_whose_client_stops_reading_gives_its_session_back() {
    let (url, _) = private_database().await;
    let (db, owner) = fixture(&url).await;
    // The node's only session is the export's while it streams.
    let limits = DbLimits {
        export_send_timeout: Duration::from_secs(1),
        pool_wait: Duration::from_millis(200),
        ..DbLimits::default()
    };
    let node = spawn_app_with(url.clone(), 1, limits).await;
    let mut stalled = stalled_export(&node, &db, &owner).await;

    // Once the client has taken nothing for the send timeout, the export
    // stops and the next request gets the session.
    let tables = format!("/api/databases/{db}/tables");
    let resp = until_ok(&node, &tables, &owner).await;
    let body: serde_json::Value = resp.json().await.unwrap();
    assert!(body["tables"].is_array(), "{body}");

    // The stalled client's body is cut, never ended as if whole (no last
    // chunk of a chunked body).
    let mut rest = Vec::new();
    let read = tokio::time::timeout(PATIENCE, stalled.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the stopped export's connection stays open");
    assert!(rest.len() < FILE_BYTES, "the whole export arrived");
    assert!(
        !rest.ends_with(b"0\r\n\r\n"),
        "a stopped export ended whole"
    );
}

#[tokio::test]
async fn past_the_export_cap_an_export_is_refused_with_503_until_a_slot_is_free() {
    let (url, _) = private_database().await;
    let (db, owner) = fixture(&url).await;
    let limits = DbLimits {
        max_exports: Some(1),
        export_send_timeout: Duration::from_secs(2),
        ..DbLimits::default()
    };
    let node = spawn_app_with(url.clone(), 4, limits).await;
    let _stalled = stalled_export(&node, &db, &owner).await;

    let export = format!("/api/databases/{db}/export");
    let resp = signed_get(&node, &export, &owner).await;
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    assert_eq!(
        body["error"]["message"],
        shard_node::error::EXPORTS_BUSY_MESSAGE,
        "{body}"
    );

    // The stalled export stops after its send timeout and gives its slot
    // back: the next export streams whole.
    let resp = until_ok(&node, &export, &owner).await;
    let zip = resp.bytes().await.expect("the whole zip");
    assert!(zip.len() > FILE_BYTES, "{} bytes", zip.len());
}
