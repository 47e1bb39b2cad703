//! The signed file route: ranges, link checks, hostile filenames.

use super::*;

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
