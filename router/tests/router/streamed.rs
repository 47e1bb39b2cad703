//! Streamed bodies (uploads, imports), the per-account upload limit and the
//! public file links. Clients are raw TCP sockets where the test must
//! control the bytes: a declared length with no body, a chunked body.

use std::time::Duration;

use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

/// Bounds every wait, so a missing limit fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(30);
const MIB: usize = 1024 * 1024;

/// A shard that reads streamed bodies piece by piece (never whole), and
/// answers file links without looking for a principal.
#[derive(Default)]
struct Streaming {
    hits: AtomicUsize,
    misplaced: bool,
    /// Headers of the file requests it received.
    file_requests: Mutex<Vec<HeaderMap>>,
}

async fn streaming_any(
    State(s): State<Arc<Streaming>>,
    method: axum::http::Method,
    headers: HeaderMap,
    uri: Uri,
    body: axum::body::Body,
) -> axum::response::Response {
    s.hits.fetch_add(1, Ordering::SeqCst);
    if uri.path().starts_with("/api/files/") {
        s.file_requests.lock().unwrap().push(headers);
        return (
            StatusCode::PARTIAL_CONTENT,
            [
                ("content-type", "image/webp"),
                ("content-range", "bytes 0-4/10"),
                ("accept-ranges", "bytes"),
                ("etag", "\"e1\""),
                ("cache-control", "private, max-age=3600"),
                ("x-content-type-options", "nosniff"),
                ("content-disposition", "inline; filename=\"a.webp\""),
                ("x-cluster-internal", "not for clients"),
                ("set-cookie", "a=b"),
            ],
            "hello",
        )
            .into_response();
    }
    let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let presented = Presented {
        principal: h(HEADER_PRINCIPAL),
        timestamp: h(HEADER_TIMESTAMP),
        signature: h(HEADER_SIGNATURE),
        version: h(HEADER_SIGNATURE_VERSION),
        body_sha256: h(HEADER_BODY_SHA256),
    };
    let target = Target {
        method: method.as_str(),
        path_and_query: uri.path_and_query().map_or("/", |p| p.as_str()),
    };
    let now = chrono::Utc::now().timestamp();
    let verified = Principal::verify_request(SECRET.as_bytes(), presented, target, now);
    let streamed = h(HEADER_BODY_SHA256) == Some(STREAMED_BODY);
    let Some(principal) = verified.ok().filter(|_| streamed) else {
        let body = json!({"error":{"code":"unauthorized","message":"bad principal"}});
        return (StatusCode::UNAUTHORIZED, Json(body)).into_response();
    };
    if s.misplaced {
        let body = json!({"error":{"code":"not_found","message":"Not found."}});
        return (StatusCode::MISDIRECTED_REQUEST, Json(body)).into_response();
    }
    let mut body = body;
    let mut received = 0usize;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => received += f.into_data().map_or(0, |d| d.len()),
            Err(_) => {
                let body = json!({"error":{"code":"bad_request","message":"truncated"}});
                return (StatusCode::BAD_REQUEST, Json(body)).into_response();
            }
        }
    }
    Json(json!({ "received": received, "principal": principal })).into_response()
}

async fn spawn_streaming(s: Arc<Streaming>) -> String {
    let app = Router::new().fallback(streaming_any).with_state(s);
    format!("http://{}", spawn(app).await)
}

/// A router (with `tweak`), a streaming shard, a database on it, and an
/// editor's token: (env, shard, table id, database id, token).
async fn setup(
    misplaced: bool,
    tweak: impl FnOnce(&mut router::Config),
) -> (Env, Arc<Streaming>, String, String, String) {
    let e = env_with_config(1000, 1000, redis_url(), tweak).await;
    let shard = Arc::new(Streaming {
        misplaced,
        ..Streaming::default()
    });
    let url = spawn_streaming(shard.clone()).await;
    let (db, tag) = e.database(&[&url]);
    let (user, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    e.member(&user, &db, Role::Editor);
    (e, shard, new_tagged(Kind::Table, &tag), db, token)
}

impl Env {
    async fn connect(&self) -> TcpStream {
        let addr = self.router.trim_start_matches("http://");
        TcpStream::connect(addr).await.unwrap()
    }

    /// A request head for `target` with the token and `extra` headers.
    fn raw_head(&self, method: &str, target: &str, token: Option<&str>, extra: &str) -> String {
        let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
        format!(
            "{method} {target} HTTP/1.1\r\nhost: router\r\n{auth}x-forwarded-for: {}\r\n{extra}\r\n",
            self.address
        )
    }
}

/// One response: status, lowercased head, body (JSON or Null). `None` when
/// the connection closed first.
async fn read_response(s: &mut TcpStream) -> Option<(u16, String, Value)> {
    let read = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                if buf.len() >= end + 4 + length {
                    let status = head[9..12].parse().unwrap();
                    let body = serde_json::from_slice(&buf[end + 4..end + 4 + length])
                        .unwrap_or(Value::Null);
                    return Some((status, head, body));
                }
            }
            let n = s.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("the router answered or closed within the test's patience")
}

/// Writes `total` bytes as chunks of `piece` bytes (chunked encoding),
/// then the last chunk; write errors end it quietly (the router may cut
/// the request off).
async fn send_chunked(mut w: tokio::net::tcp::OwnedWriteHalf, total: usize, piece: usize) {
    let data = vec![b'x'; piece];
    let mut sent = 0;
    while sent < total {
        let n = piece.min(total - sent);
        let frame = format!("{n:x}\r\n");
        if w.write_all(frame.as_bytes()).await.is_err()
            || w.write_all(&data[..n]).await.is_err()
            || w.write_all(b"\r\n").await.is_err()
        {
            return;
        }
        sent += n;
    }
    let _ = w.write_all(b"0\r\n\r\n").await;
    // Keep the socket open until the test reads the answer.
    tokio::time::sleep(PATIENCE).await;
}

#[tokio::test]
async fn a_declared_length_over_the_upload_cap_is_refused_before_any_byte_is_sent() {
    let (e, shard, table, _, token) = setup(false, |_| {}).await;
    let mut s = e.connect().await;
    let head = e.raw_head(
        "POST",
        &format!("/api/tables/{table}/attachments"),
        Some(&token),
        "content-type: multipart/form-data; boundary=b\r\ncontent-length: 209715200\r\n",
    );
    s.write_all(head.as_bytes()).await.unwrap();
    // Not one byte of the 200 MB is sent: the answer comes all the same.
    let (status, _, body) = read_response(&mut s).await.expect("an answer");
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "bad_request");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("100 MB per file limit"), "{message}");
    assert_eq!(shard.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_body_over_the_buffered_limit_streams_through_with_the_streamed_signature() {
    let (e, shard, _, db, token) = setup(false, |c| {
        // The whole-body deadline does not apply to streamed routes.
        c.connections.body_timeout = Duration::from_secs(1);
    })
    .await;
    let total = 15 * MIB;
    let mut s = e.connect().await;
    let head = e.raw_head(
        "POST",
        &format!("/api/databases/{db}/import"),
        Some(&token),
        &format!("content-type: multipart/form-data; boundary=b\r\ncontent-length: {total}\r\n"),
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let piece = vec![b'x'; 256 * 1024];
    for _ in 0..total / piece.len() {
        s.write_all(&piece).await.unwrap();
        // Slower in all than the whole-body deadline allows; never idle.
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let (status, _, body) = read_response(&mut s).await.expect("an answer");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["received"], total);
    assert_eq!(body["principal"]["database_id"], db);
    assert_eq!(shard.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_chunked_body_past_the_import_cap_is_cut_off_with_400() {
    let (e, _shard, _, db, token) = setup(false, |_| {}).await;
    let s = e.connect().await;
    let head = e.raw_head(
        "POST",
        &format!("/api/databases/{db}/import"),
        Some(&token),
        "content-type: multipart/form-data; boundary=b\r\ntransfer-encoding: chunked\r\n",
    );
    let (mut r, mut w) = s.into_split();
    w.write_all(head.as_bytes()).await.unwrap();
    let writer = tokio::spawn(send_chunked(w, 23 * MIB, 64 * 1024));
    let mut buf = Vec::new();
    let answer = tokio::time::timeout(PATIENCE, async {
        let mut chunk = [0u8; 4096];
        loop {
            match r.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.ends_with(b"}}") {
                break;
            }
        }
    })
    .await;
    writer.abort();
    assert!(answer.is_ok(), "an answer in time");
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 400"), "{text}");
    assert!(text.contains("20 MB import limit"), "{text}");
}

#[tokio::test]
async fn a_pause_in_a_streamed_body_is_cut_off_with_408() {
    let (e, _shard, table, _, token) = setup(false, |c| {
        c.connections.stream_idle_timeout = Duration::from_secs(1);
    })
    .await;
    let mut s = e.connect().await;
    let head = e.raw_head(
        "POST",
        &format!("/api/tables/{table}/attachments"),
        Some(&token),
        "content-type: multipart/form-data; boundary=b\r\ncontent-length: 100000\r\n",
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&[b'x'; 1000]).await.unwrap();
    let (status, head, body) = read_response(&mut s).await.expect("an answer");
    assert_eq!(status, 408, "{body}");
    assert_eq!(body["error"]["code"], "request_timeout");
    assert!(head.contains("connection: close"), "{head}");
}

#[tokio::test]
async fn a_misplaced_streamed_request_is_503_and_not_replayed() {
    let (e, shard, table, _, token) = setup(true, |_| {}).await;
    let r = e
        .http
        .post(format!("{}/api/tables/{table}/attachments", e.router))
        .header("authorization", format!("Bearer {token}"))
        .header("x-forwarded-for", &e.address)
        .body("--b--")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(header(&r, "retry-after").as_deref(), Some("1"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "unavailable");
    assert_eq!(
        shard.hits.load(Ordering::SeqCst),
        1,
        "sent once, never again"
    );
}

async fn upload(e: &Env, table: &str, token: &str) -> reqwest::Response {
    e.http
        .post(format!("{}/api/tables/{table}/attachments", e.router))
        .header("authorization", format!("Bearer {token}"))
        .header("x-forwarded-for", &e.address)
        .body("--b--")
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_61st_upload_of_an_account_within_a_minute_is_a_400() {
    let (e, shard, table, db, token) = setup(false, |_| {}).await;
    for i in 0..60 {
        let r = upload(&e, &table, &token).await;
        assert_eq!(r.status(), 200, "upload {i}");
    }
    let r = upload(&e, &table, &token).await;
    assert_eq!(r.status(), 400);
    assert!(header(&r, "retry-after").is_none(), "a ceiling, not a 429");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "bad_request");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Upload limit reached: at most 60 uploads per account per 60 seconds; try again in "
        ),
        "{message}"
    );
    assert_eq!(
        shard.hits.load(Ordering::SeqCst),
        60,
        "the refused one is not forwarded"
    );
    // Another account has its own count; other routes are not limited.
    let (other, _, other_token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    e.member(&other, &db, Role::Editor);
    assert_eq!(upload(&e, &table, &other_token).await.status(), 200);
    let imports = format!("/api/databases/{db}/import");
    let r = e
        .http
        .post(format!("{}{imports}", e.router))
        .header("authorization", format!("Bearer {token}"))
        .header("x-forwarded-for", &e.address)
        .body("--b--")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn file_links_need_no_key_and_pass_only_file_headers() {
    let (e, shard, _, db, _) = setup(false, |_| {}).await;
    let att = new_tagged(Kind::Attachment, &db[3..8]);
    let path = format!("/api/files/{att}/thumb-256?expires=1&signature=abc");
    let r = e
        .http
        .get(format!("{}{path}", e.router))
        .header("x-forwarded-for", &e.address)
        .header("range", "bytes=0-4")
        .header("if-none-match", "\"e0\"")
        .header("cookie", "session=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    for (name, value) in [
        ("content-type", "image/webp"),
        ("content-range", "bytes 0-4/10"),
        ("accept-ranges", "bytes"),
        ("etag", "\"e1\""),
        ("cache-control", "private, max-age=3600"),
        ("x-content-type-options", "nosniff"),
        ("content-disposition", "inline; filename=\"a.webp\""),
        ("content-length", "5"),
    ] {
        assert_eq!(header(&r, name).as_deref(), Some(value), "{name}");
    }
    assert!(header(&r, "x-cluster-internal").is_none());
    assert!(header(&r, "set-cookie").is_none());
    assert_eq!(r.text().await.unwrap(), "hello");
    let seen = shard
        .file_requests
        .lock()
        .unwrap()
        .pop()
        .expect("reached the shard");
    assert_eq!(seen["range"], "bytes=0-4");
    assert_eq!(seen["if-none-match"], "\"e0\"");
    assert!(seen.get("cookie").is_none());
    assert!(seen.get(HEADER_PRINCIPAL).is_none(), "no principal");

    // HEAD too; a malformed id or variant, or an unknown tag: 404, no key asked.
    let r = e
        .http
        .head(format!("{}{path}", e.router))
        .header("x-forwarded-for", &e.address)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 206);
    let unknown = new_tagged(Kind::Attachment, &random_token(5));
    for bad in [
        "/api/files/att_short/original".to_string(),
        format!("/api/files/{att}/huge"),
        format!("/api/files/{unknown}/original"),
    ] {
        let r = e.get(&bad, None).await;
        assert_eq!(r.status(), 404, "{bad}");
    }
}

#[tokio::test]
async fn file_links_have_a_shield_of_their_own() {
    let (e, _shard, _, _, _) = setup(false, |c| c.files_limit_per_min = 3).await;
    let att = new_tagged(Kind::Attachment, &random_token(5));
    let path = format!("/api/files/{att}/original");
    for _ in 0..3 {
        assert_eq!(e.get(&path, None).await.status(), 404);
    }
    let r = e.get(&path, None).await;
    assert_eq!(r.status(), 429);
    assert!(header(&r, "retry-after").is_some());
    // The API shield of the same address is another budget.
    assert_eq!(e.get("/api/meta/whoami", None).await.status(), 401);
}
