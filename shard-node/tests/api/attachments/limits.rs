//! Issue 27, sections 4 and 6, on a node of its own: URL fetches never
//! store past the database's storage quota (`ATTACHMENT_QUOTA_BYTES`, set
//! small here) and are refused when the router's upload allowance is
//! spent; thumbnails stay within the node's byte budgets; and a refused or
//! failed fetch tells the client nothing of the addresses behind it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use shard_node::attachments::settings::AttachmentSettings;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// A fixture on a node with `settings` whose fetches may reach loopback.
async fn node(settings: AttachmentSettings) -> Fixture {
    fixture_on(spawn_app_attachments(settings).await).await
}

/// A server on 127.0.0.1 answering every GET with `total` bytes of `x`,
/// declaring the length or not (then the body ends when it closes). Its
/// base URL, and how many body bytes it managed to send.
async fn file_server(total: usize, declare: bool) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let sent = Arc::new(AtomicUsize::new(0));
    let counted = sent.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let length = if declare {
                    format!("content-length: {total}\r\n")
                } else {
                    String::new()
                };
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n{length}connection: close\r\n\r\n"
                );
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let block = vec![b'x'; 64 * 1024];
                let mut left = total;
                while left > 0 {
                    let n = left.min(block.len());
                    if socket.write_all(&block[..n]).await.is_err() {
                        return;
                    }
                    counted.fetch_add(n, Ordering::SeqCst);
                    left -= n;
                }
                let _ = socket.shutdown().await;
            });
        }
    });
    (base, sent)
}

impl Fixture {
    async fn write_urls(&self, urls: &[String]) -> Reply {
        self.app
            .post(
                &format!("/api/tables/{}/records", self.table),
                &self.owner,
                json!({"records": [{"fields": {"Files": urls}}]}),
            )
            .await
    }

    async fn bytes_held(&self) -> i64 {
        self.app
            .pg
            .query_one(
                "SELECT attachment_bytes FROM databases WHERE id = $1",
                &[&self.db],
            )
            .await
            .unwrap()
            .get(0)
    }
}

#[tokio::test]
async fn a_fetch_that_would_pass_the_quota_stores_nothing() {
    let f = node(AttachmentSettings {
        database_quota_bytes: 1000,
        ..Default::default()
    })
    .await;
    // 600 bytes fit.
    let (small, _) = file_server(600, true).await;
    let r = f.write_urls(&[format!("{small}/a.bin")]).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(f.bytes_held().await, 600);
    assert_eq!(stored_attachments(&f.db).len(), 1);

    // 600 more, declared: refused from the header, nothing stored.
    let r = f.write_urls(&[format!("{small}/b.bin")]).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let m = r.error_message();
    assert!(
        m.starts_with("records[0]: could not fetch")
            && m.contains("past its 1000 bytes of attachment storage"),
        "{m}"
    );
    // 32 MiB undeclared: cut off at the room left while it streams, so
    // the server could not send it all (it would be stored whole, then
    // refused, without the check).
    let total = 32 * 1024 * 1024;
    let (endless, sent) = file_server(total, false).await;
    let r = f.write_urls(&[format!("{endless}/c.bin")]).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(
        r.error_message().contains("past its 1000 bytes"),
        "{}",
        r.error_message()
    );
    let sent = sent.load(Ordering::SeqCst);
    assert!(sent < total / 2, "the whole body was read: {sent} bytes");
    assert_eq!(stored_attachments(&f.db).len(), 1, "nothing more stored");
    assert_eq!(f.bytes_held().await, 600);

    // At the quota: refused before anything is fetched.
    f.app
        .pg
        .execute(
            "UPDATE databases SET attachment_bytes = 1000 WHERE id = $1",
            &[&f.db],
        )
        .await
        .unwrap();
    let (counted, sent) = file_server(10, true).await;
    let r = f.write_urls(&[format!("{counted}/d.bin")]).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(
        r.error_message().contains("reached its 1000 bytes limit"),
        "{}",
        r.error_message()
    );
    assert_eq!(sent.load(Ordering::SeqCst), 0, "nothing was fetched");
    assert_eq!(stored_attachments(&f.db).len(), 1);
}

/// A record write naming `urls`, carrying the allowance header the router
/// sets (`<remaining> <retry ms>`).
async fn write_with_allowance(
    f: &Fixture,
    allowance: &str,
    urls: &[String],
) -> (u16, Value, Option<String>) {
    let mut req = f
        .app
        .http
        .post(format!(
            "http://{}/api/tables/{}/records",
            f.app.addr, f.table
        ))
        .header("content-type", "application/json")
        .header("x-cluster-upload-allowance", allowance)
        .body(json!({"records": [{"fields": {"Files": urls}}]}).to_string())
        .build()
        .unwrap();
    f.owner
        .sign_reqwest(SECRET.as_bytes(), chrono::Utc::now().timestamp(), &mut req);
    let resp = f.app.http.execute(req).await.unwrap();
    let status = resp.status().as_u16();
    let fetched = resp
        .headers()
        .get("x-cluster-attachment-fetches")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap_or(Value::Null);
    (status, body, fetched)
}

#[tokio::test]
async fn urls_past_the_upload_allowance_are_refused_before_any_fetch() {
    let f = node(AttachmentSettings::default()).await;
    let (base, sent) = file_server(5, true).await;
    let two = [format!("{base}/a"), format!("{base}/b")];
    let (status, body, fetched) = write_with_allowance(&f, "1 30000", &two).await;
    assert_eq!(status, 400, "{body}");
    let m = body["error"]["message"].as_str().unwrap();
    assert!(
        m.starts_with("Upload limit reached: at most 60 uploads per account per 60 seconds; try again in 30 s."),
        "{m}"
    );
    assert_eq!(fetched, None);
    assert_eq!(sent.load(Ordering::SeqCst), 0);
    // Within the allowance: fetched, and the count goes back to the router.
    let (status, body, fetched) = write_with_allowance(&f, "2 30000", &two).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(fetched.as_deref(), Some("2"));
}

#[tokio::test]
async fn a_refused_or_failed_fetch_names_no_address() {
    // No egress allow list: loopback is refused, whatever the name.
    let f = fixture().await;
    for url in [
        "https://localhost:9/x",
        "http://127.0.0.1:9/x",
        "https://[::1]:9/x",
    ] {
        let r = f.write_urls(&[url.to_owned()]).await;
        assert_eq!(r.status, 400, "{url}: {:?}", r.body);
        let m = r.error_message();
        assert!(
            m.ends_with("refused: not a public address. Nothing was written."),
            "{m}"
        );
        let said = m.replacen(url, "", 1);
        for leak in ["127.0.0.1", "::1", "loopback"] {
            assert!(!said.contains(leak), "{url}: {m}");
        }
    }
    // Allowed, but nothing listens: the kind of failure, not the chain.
    let f = node(AttachmentSettings::default()).await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{closed}/x");
    let r = f.write_urls(std::slice::from_ref(&url)).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let m = r.error_message();
    assert_eq!(
        m,
        format!("records[0]: could not fetch {url}: could not connect. Nothing was written.")
    );
}

/// Uploads `image` as `a.png` into the fixture's record, as its owner.
async fn upload_png(f: &Fixture, image: &[u8]) -> Reply {
    upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::File(Some("a.png"), Some("image/png"), image),
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
        ],
    )
    .await
}

#[tokio::test]
async fn images_past_the_thumbnail_budgets_keep_one_link() {
    let image = png(300, 200);
    for settings in [
        // The source alone is over the queue budget.
        AttachmentSettings {
            thumbnail_queue_bytes: 100,
            ..Default::default()
        },
        // Its decode is reckoned over the node's decode budget.
        AttachmentSettings {
            thumbnail_decode_bytes: 1024 * 1024,
            ..Default::default()
        },
    ] {
        let r = upload_png(&node(settings.clone()).await, &image).await;
        assert_eq!(r.status, 200, "{settings:?}: {:?}", r.body);
        assert_eq!(r.body["thumb_url"], r.body["url"], "{settings:?}");
        assert_eq!(r.body["card_url"], r.body["url"], "{settings:?}");
    }
    // The default budgets make them.
    let r = upload_png(&node(AttachmentSettings::default()).await, &image).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_ne!(r.body["thumb_url"], r.body["url"]);
}
