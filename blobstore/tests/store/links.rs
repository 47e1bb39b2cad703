//! Time-limited GET links: presigned S3 URLs a browser fetches directly;
//! the local store has none (the cluster serves its bytes itself).

use std::time::{Duration, SystemTime};

use blobstore::disposition::{content_disposition, Disposition};
use blobstore::{BlobKey, LinkOptions};

use crate::support::{fresh_key, pattern, TestStore};

const HOUR: Duration = Duration::from_secs(3600);

fn options(signed_at: SystemTime) -> LinkOptions {
    LinkOptions {
        signed_at,
        expires_in: HOUR,
        content_type: Some("text/plain; charset=utf-8".into()),
        content_disposition: Some(content_disposition(
            Disposition::Attachment,
            "résumé \"1\".txt",
        )),
    }
}

async fn stored(t: &TestStore, data: &[u8]) -> BlobKey {
    let key = fresh_key();
    t.store.put_bytes(&key, data.to_vec().into()).await.unwrap();
    key
}

async fn fetch(url: &str, range: Option<&str>) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut request = reqwest::Client::new().get(url);
    if let Some(r) = range {
        request = request.header("range", r);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.bytes().await.unwrap().to_vec())
}

#[tokio::test]
async fn a_presigned_link_serves_the_blob_with_its_name_and_type() {
    let t = TestStore::s3();
    let data = pattern(1000, 50);
    let key = stored(&t, &data).await;
    let opts = options(SystemTime::now());
    let url = t
        .store
        .presigned_get(&key, &opts)
        .await
        .unwrap()
        .expect("an S3 link");
    assert!(url.contains("X-Amz-Signature="), "{url}");

    let (status, headers, body) = fetch(&url, None).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(body == data);
    assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(
        headers["content-disposition"].as_bytes(),
        opts.content_disposition.unwrap().as_bytes()
    );

    let (status, _, body) = fetch(&url, Some("bytes=2-5")).await;
    assert_eq!(status, 206);
    assert!(body == data[2..6]);
}

#[tokio::test]
async fn an_expired_link_is_refused() {
    let t = TestStore::s3();
    let key = stored(&t, b"old news").await;
    let two_hours_ago = SystemTime::now() - 2 * HOUR;
    let url = t
        .store
        .presigned_get(&key, &options(two_hours_ago))
        .await
        .unwrap()
        .unwrap();
    let (status, _, body) = fetch(&url, None).await;
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("Request has expired"), "{body}");
}

#[tokio::test]
async fn a_tampered_link_is_refused() {
    let t = TestStore::s3();
    let key = stored(&t, b"mine").await;
    let other = stored(&t, b"someone else's").await;
    let url = t
        .store
        .presigned_get(&key, &options(SystemTime::now()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(fetch(&url, None).await.0, 200);

    let signature_at = url.find("X-Amz-Signature=").unwrap() + "X-Amz-Signature=".len();
    let mut flipped = url.clone();
    let c = if &url[signature_at..signature_at + 1] == "0" {
        "1"
    } else {
        "0"
    };
    flipped.replace_range(signature_at..signature_at + 1, c);
    let tampered = [
        ("signature", flipped),
        ("key", url.replace(key.as_str(), other.as_str())),
        (
            "expiry",
            url.replace("X-Amz-Expires=3600", "X-Amz-Expires=604800"),
        ),
        ("type", url.replace("text%2Fplain", "text%2Fhtml")),
    ];
    for (what, bad) in tampered {
        assert_ne!(bad, url, "{what}: nothing was changed");
        let (status, _, body) = fetch(&bad, None).await;
        let body = String::from_utf8_lossy(&body);
        assert_eq!(status, 403, "{what}: {body}");
        assert!(body.contains("SignatureDoesNotMatch"), "{what}: {body}");
    }
}

#[tokio::test]
async fn the_local_store_makes_no_links() {
    let t = TestStore::local();
    let key = stored(&t, b"local").await;
    assert_eq!(
        t.store
            .presigned_get(&key, &options(SystemTime::now()))
            .await
            .unwrap(),
        None
    );
}
