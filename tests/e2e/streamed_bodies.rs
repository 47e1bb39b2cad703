//! Bodies the router streams to the shard unread (uploads and imports), the
//! per-account upload limit, and the public file links, through the real
//! router: a declared length over the upload cap is refused before the body
//! is sent; an import file over the 10 MiB buffered-body limit reaches the
//! import (preview, or its own 20 MB refusal); the 61st upload of an
//! account within a minute is a 400; a file link needs no API key.

use e2e_tests::{cluster, id, Api, Person, Reply};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BOUNDARY: &str = "e2e-streamed-boundary-41c9";
const MIB: usize = 1024 * 1024;

/// A multipart body: `(name, filename, bytes)` per part.
fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, filename, bytes) in parts {
        body.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        let disposition = match filename {
            Some(f) => format!("form-data; name=\"{name}\"; filename=\"{f}\""),
            None => format!("form-data; name=\"{name}\""),
        };
        body.extend_from_slice(format!("Content-Disposition: {disposition}\r\n\r\n").as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

/// POSTs a multipart `body` to `path` with the caller's key.
async fn post_form(api: &Api, path: &str, body: Vec<u8>) -> Reply {
    api.post_multipart(path, BOUNDARY, body).await
}

/// A CSV of about `bytes` bytes with fewer rows than the import ceiling:
/// a header and rows of three columns, the last one long.
fn csv_of(bytes: usize) -> (Vec<u8>, usize) {
    let pad = "x".repeat(400);
    let mut csv = String::from("n,label,note\n");
    let mut rows = 0;
    while csv.len() < bytes {
        csv.push_str(&format!("{rows},row {rows},{pad}\n"));
        rows += 1;
    }
    (csv.into_bytes(), rows)
}

/// The status, head and body of the router's answer to a request head
/// sent on a raw connection, with no body after it.
async fn head_only(head: &str) -> (u16, Value) {
    let addr = cluster()
        .router_url
        .trim_start_matches("http://")
        .to_string();
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("router reachable");
    s.write_all(head.as_bytes()).await.unwrap();
    let read = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let text = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                let length: usize = text
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if buf.len() >= end + 4 + length {
                    let status = text[9..12].parse().unwrap();
                    let body = serde_json::from_slice(&buf[end + 4..end + 4 + length])
                        .unwrap_or(Value::Null);
                    return (status, body);
                }
            }
            let n = s.read(&mut chunk).await.expect("readable");
            assert!(n > 0, "the router closed the connection without an answer");
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), read)
        .await
        .expect("an answer without the body being sent")
}

#[tokio::test]
async fn a_declared_200_mb_upload_is_refused_before_its_body_is_sent() {
    let person = Person::new().await;
    let api = &person.api;
    let db = api.new_database("stream").await;
    let table = id(&api.create_table(&db, "Files").await);
    let head = format!(
        "POST /api/tables/{table}/attachments HTTP/1.1\r\nhost: router\r\n\
         authorization: Bearer {}\r\nx-forwarded-for: {}\r\n\
         content-type: multipart/form-data; boundary={BOUNDARY}\r\n\
         content-length: {}\r\n\r\n",
        api.token.as_deref().unwrap(),
        api.address,
        200 * MIB
    );
    let (status, body) = head_only(&head).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_request", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("100 MB per file limit"), "{message}");
}

#[tokio::test]
async fn a_15_mb_import_file_passes_the_router_and_gets_its_preview() {
    let person = Person::new().await;
    let db = person.api.new_database("stream").await;
    let (csv, rows) = csv_of(15 * MIB);
    assert!(csv.len() > cluster_protocol::MAX_BODY_BYTES);
    let body = multipart(&[("file", Some("big.csv"), &csv)]);
    let reply = post_form(&person.api, &format!("/api/databases/{db}/import"), body).await;
    let preview = reply.expect_ok();
    assert_eq!(preview["rowCount"], rows);
    assert_eq!(preview["columns"][2]["sourceHeader"], "note");
}

#[tokio::test]
async fn a_21_mb_import_file_reaches_the_imports_own_20_mb_refusal() {
    let person = Person::new().await;
    let db = person.api.new_database("stream").await;
    let (csv, _) = csv_of(21 * MIB);
    let body = multipart(&[("file", Some("big.csv"), &csv)]);
    assert!(body.len() < 22 * MIB, "under the router's cap for imports");
    let reply = post_form(&person.api, &format!("/api/databases/{db}/import"), body).await;
    let message = reply.expect_error(400, "bad_request");
    assert!(message.contains("20 MB"), "{message}");
    // Over 22 MB declared: refused by the router before the body is read.
    let head = format!(
        "POST /api/databases/{db}/import HTTP/1.1\r\nhost: router\r\n\
         authorization: Bearer {}\r\nx-forwarded-for: {}\r\n\
         content-type: multipart/form-data; boundary={BOUNDARY}\r\n\
         content-length: {}\r\n\r\n",
        person.api.token.as_deref().unwrap(),
        person.api.address,
        23 * MIB
    );
    let (status, body) = head_only(&head).await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("20 MB import limit"), "{message}");
}

const LIMIT_MESSAGE: &str =
    "Upload limit reached: at most 60 uploads per account per 60 seconds; try again in ";

fn limited(r: &Reply) -> bool {
    r.status == 400
        && r.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(LIMIT_MESSAGE))
}

#[tokio::test]
async fn the_61st_upload_of_an_account_within_a_minute_is_a_400() {
    let person = Person::new().await;
    let db = person.api.new_database("stream").await;
    let table = id(&person.api.create_table(&db, "Files").await);
    let path = format!("/api/tables/{table}/attachments");
    let form = || multipart(&[("file", Some("a.txt"), b"hello")]);
    // Two keys of one account share its count.
    let (_, second_key) = person
        .another_key(
            cluster_protocol::control::Access::ReadWrite,
            cluster_protocol::control::DatabaseScope::All,
        )
        .await;
    for i in 0..60 {
        let api = if i % 2 == 0 { &person.api } else { &second_key };
        let r = post_form(api, &path, form()).await;
        assert!(!limited(&r), "upload {i} was refused: {}", r.body);
    }
    let r = post_form(&person.api, &path, form()).await;
    let message = r.expect_error(400, "bad_request");
    assert!(message.starts_with(LIMIT_MESSAGE), "{message}");
    assert!(r.header("retry-after").is_none(), "a ceiling, not a 429");
    // Another account counts its own uploads.
    let other = Person::new().await;
    let db = other.api.new_database("stream").await;
    let table = id(&other.api.create_table(&db, "Files").await);
    let r = post_form(
        &other.api,
        &format!("/api/tables/{table}/attachments"),
        form(),
    )
    .await;
    assert!(!limited(&r), "{}", r.body);
}

#[tokio::test]
async fn a_file_link_needs_no_key_and_reaches_the_shard() {
    let person = Person::new().await;
    let db = person.api.new_database("stream").await;
    let tag = &db[3..8];
    let anonymous = Api::anonymous();
    // A malformed link, or one whose id names no database: 404 from the
    // router, no key asked for.
    for path in [
        "/api/files/att_short/original".to_string(),
        format!("/api/files/att_{tag}0000000/huge"),
        "/api/files/att_zzzzz0000000/original".to_string(),
    ] {
        anonymous.get(&path).await.expect_error(404, "not_found");
    }
    // A link of an existing database goes to its shard, without a key:
    // more requests than the keyless API shield (60 a minute) allows, none
    // refused by it. The answers (an unknown attachment, a bad signature)
    // are the shard's.
    let path = format!("/api/files/att_{tag}0000000/original?expires=1&signature=00");
    for _ in 0..65 {
        let r = anonymous.get(&path).await;
        assert_ne!(r.status, 429, "{}", r.body);
        assert!((400..500).contains(&r.status), "{} {}", r.status, r.body);
        assert!(r.body["error"]["code"].is_string(), "{}", r.body);
    }
}
