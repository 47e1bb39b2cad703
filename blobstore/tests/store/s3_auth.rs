//! The S3 test server checks signatures: a client with a wrong secret or
//! an unknown key, or no signature at all, is refused and writes nothing.
//! (A server that ignored signatures would fail every test here.)

use blobstore::settings::SecretString;
use blobstore::{BlobError, BlobStore, Settings};

use crate::support::{chunked, fresh_key, pattern, s3_settings, TestStore};

fn store_with(change: impl FnOnce(&mut blobstore::settings::S3Settings)) -> BlobStore {
    let mut settings = s3_settings();
    change(&mut settings);
    BlobStore::open(&Settings::S3(settings)).unwrap()
}

async fn refused_and_nothing_written(bad: BlobStore, code: &str) {
    let good = TestStore::s3();
    let checked = bad.check().await.unwrap_err();
    // HEAD answers carry no body, so only the status tells why.
    assert!(format!("{checked:#}").contains("403"), "{checked:#}");

    let key = fresh_key();
    let put = bad.put(&key, chunked(&pattern(100, 60)), 1000).await;
    let Err(BlobError::Store(e)) = put else {
        panic!("not refused: {put:?}")
    };
    assert!(format!("{e:#}").contains(code), "{e:#}");
    assert_eq!(good.store.size(&key).await.unwrap(), None);

    good.store
        .put_bytes(&key, pattern(10, 61).into())
        .await
        .unwrap();
    let got = bad.get(&key, None).await;
    let Err(BlobError::Store(e)) = got else {
        panic!("not refused: {got:?}")
    };
    assert!(format!("{e:#}").contains(code), "{e:#}");
    assert!(bad.delete(&key).await.is_err());
    assert_eq!(good.store.size(&key).await.unwrap(), Some(10));
}

#[tokio::test]
async fn a_wrong_secret_is_refused() {
    let bad = store_with(|s| {
        s.secret_access_key = SecretString::new(format!("{}x", s.secret_access_key.expose()))
    });
    refused_and_nothing_written(bad, "SignatureDoesNotMatch").await;
}

#[tokio::test]
async fn an_unknown_access_key_is_refused() {
    let bad = store_with(|s| s.access_key_id = "nobody".into());
    refused_and_nothing_written(bad, "NotSignedUp").await;
}

#[tokio::test]
async fn unsigned_requests_are_refused() {
    let good = TestStore::s3();
    let s = s3_settings();
    let key = fresh_key();
    good.store
        .put_bytes(&key, pattern(10, 62).into())
        .await
        .unwrap();
    let url = format!("{}/{}/{}", s.endpoint.unwrap(), s.bucket, key);
    let http = reqwest::Client::new();
    let read = http.get(&url).send().await.unwrap();
    assert_eq!(read.status(), 403);
    let other = fresh_key();
    let url = url.replace(key.as_str(), other.as_str());
    let write = http.put(&url).body("sneaky").send().await.unwrap();
    assert_eq!(write.status(), 403);
    assert_eq!(good.store.size(&other).await.unwrap(), None);
}
