//! Issue 27, section 4, through the real router on both blob stores: an
//! attachment URL fetched into a cell counts against the account's upload
//! limit (60 per 60 s, answered 400) exactly as an upload does, and an
//! image whose header claims a huge size gets no thumbnails without the
//! shard node going down.

use std::io::Cursor;
use std::sync::atomic::Ordering;

use e2e_tests::stores::Store;
use e2e_tests::{id, Api, Person, Reply};
use serde_json::json;

use crate::attachments_cells::file_server;

const BOUNDARY: &str = "----e2e-limits-boundary";
const LIMIT_MESSAGE: &str =
    "Upload limit reached: at most 60 uploads per account per 60 seconds; try again in ";

/// A database on `store` with a table `Docs` (attachment field `Files`)
/// and one record: (table, field, record).
async fn docs(api: &Api, store: Store) -> (String, String, String) {
    let db = api.new_database_on(store, "limits").await;
    let table = id(&api.create_table(&db, "Docs").await);
    let files = id(&api
        .create_field(&table, json!({"name": "Files", "type": "attachment"}))
        .await);
    let record = id(&api
        .post(
            &format!("/api/tables/{table}/records"),
            json!({"records": [{"fields": {}}]}),
        )
        .await
        .expect_ok()["records"][0]);
    (table, files, record)
}

async fn upload(
    api: &Api,
    (table, files, record): &(String, String, String),
    name: &str,
    bytes: &[u8],
) -> Reply {
    let mut body = Vec::new();
    for (field, value) in [("field_id", files), ("record_id", record)] {
        body.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{field}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\r\n")
            .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    api.post_multipart(&format!("/api/tables/{table}/attachments"), BOUNDARY, body)
        .await
}

/// A record write naming `urls` in its attachment cell.
async fn fetch(api: &Api, table: &str, urls: &[String]) -> Reply {
    api.post(
        &format!("/api/tables/{table}/records"),
        json!({"records": [{"fields": {"Files": urls}}]}),
    )
    .await
}

fn refused_by_the_limit(r: &Reply) -> String {
    let m = r.expect_error(400, "bad_request");
    assert!(m.starts_with(LIMIT_MESSAGE), "{m}");
    m
}

#[tokio::test]
async fn fetched_urls_count_against_the_upload_limit() {
    for store in Store::BOTH {
        fetched_urls_count_against_the_upload_limit_on(store).await;
    }
}

async fn fetched_urls_count_against_the_upload_limit_on(store: Store) {
    let (base, hits) = file_server().await;
    let url = format!("{base}/files/hello.txt");

    // Uploads first: after 59, a write naming two URLs is refused whole
    // (one remains) before anything is fetched; one URL is the 60th.
    let person = Person::new().await;
    let api = &person.api;
    let fx = docs(api, store).await;
    for i in 0..59 {
        let r = upload(api, &fx, "a.txt", b"hello").await;
        assert_eq!(r.status, 200, "{store:?}: upload {i}: {}", r.body);
    }
    let r = fetch(api, &fx.0, &[url.clone(), url.clone()]).await;
    let m = refused_by_the_limit(&r);
    assert!(m.ends_with("Nothing was fetched or written."), "{m}");
    assert_eq!(hits.load(Ordering::SeqCst), 0, "nothing was fetched");
    fetch(api, &fx.0, std::slice::from_ref(&url))
        .await
        .expect_ok();
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    // The 61st, an upload or a fetch: the same 400.
    refused_by_the_limit(&upload(api, &fx, "b.txt", b"hello").await);
    refused_by_the_limit(&fetch(api, &fx.0, std::slice::from_ref(&url)).await);
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // Fetches first: three writes of 20 URLs spend the window, and the
    // next upload is refused by the router.
    let other = Person::new().await;
    let api = &other.api;
    let fx = docs(api, store).await;
    let twenty = vec![url.clone(); 20];
    for i in 0..3 {
        let r = fetch(api, &fx.0, &twenty).await;
        assert_eq!(r.status, 200, "{store:?}: write {i}: {}", r.body);
    }
    assert_eq!(hits.load(Ordering::SeqCst), 61);
    refused_by_the_limit(&upload(api, &fx, "c.txt", b"hello").await);
    refused_by_the_limit(&fetch(api, &fx.0, std::slice::from_ref(&url)).await);
}

/// A 1x1 PNG whose header claims `width` x `height` (CRC fixed).
fn claimed_png(width: u32, height: u32) -> Vec<u8> {
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::new_rgb8(1, 1)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    let mut b = out.into_inner();
    b[16..20].copy_from_slice(&width.to_be_bytes());
    b[20..24].copy_from_slice(&height.to_be_bytes());
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in &b[12..29] {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    b[29..33].copy_from_slice(&(!crc).to_be_bytes());
    b
}

#[tokio::test]
async fn decompression_bombs_get_no_thumbnails_and_the_node_stays_up() {
    for store in Store::BOTH {
        let person = Person::new().await;
        let api = &person.api;
        let fx = docs(api, store).await;
        for (w, h) in [(50_000, 50_000), (9_000, 9_000)] {
            let r = upload(api, &fx, "bomb.png", &claimed_png(w, h)).await;
            let v = r.expect_ok();
            assert_eq!(v["thumb_url"], v["url"], "{store:?} {w}x{h}");
            assert_eq!(v["card_url"], v["url"], "{store:?} {w}x{h}");
        }
        // The shard node still answers.
        api.get(&format!("/api/tables/{}/records/{}", fx.0, fx.2))
            .await
            .expect_ok();
    }
}
