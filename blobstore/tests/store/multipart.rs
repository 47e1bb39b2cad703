//! Bodies around and above the S3 part size: one `PutObject` below it, a
//! multipart upload from it on (S3's ETag `"<md5>-<parts>"` tells which).

use blobstore::BlobStore;

use crate::both_stores;
use crate::support::{chunked, fresh_key, pattern, read_all, TestStore, PART};

both_stores!(large_bodies_round_trip, part_boundaries_round_trip);

async fn etag(t: &TestStore, key: &blobstore::BlobKey) -> Option<String> {
    let BlobStore::S3(s3) = &t.store else {
        return None;
    };
    let head = s3
        .client()
        .head_object()
        .bucket(s3.bucket())
        .key(key.as_str())
        .send()
        .await
        .unwrap();
    head.e_tag().map(|e| e.trim_matches('"').to_owned())
}

fn parts_of(etag: &str) -> Option<&str> {
    etag.split_once('-').map(|(_, n)| n)
}

async fn large_bodies_round_trip(t: TestStore) {
    let key = fresh_key();
    let data = pattern(2 * PART + 3 * 1024 * 1024, 40);
    assert_eq!(
        t.store.put(&key, chunked(&data), 1 << 30).await.unwrap(),
        data.len() as u64
    );
    assert!(read_all(t.store.get(&key, None).await.unwrap()).await == data);
    // Across the first part boundary.
    let across = (PART - 10) as u64..(PART + 10) as u64;
    let blob = t.store.get(&key, Some(across)).await.unwrap();
    assert!(read_all(blob).await == data[PART - 10..PART + 10]);
    if t.is_s3() {
        assert_eq!(parts_of(&etag(&t, &key).await.unwrap()), Some("3"));
    }
}

async fn part_boundaries_round_trip(t: TestStore) {
    for (len, parts) in [(PART - 1, None), (PART, Some("1")), (PART + 1, Some("2"))] {
        let key = fresh_key();
        let data = pattern(len, len as u64);
        assert_eq!(
            t.store.put(&key, chunked(&data), len as u64).await.unwrap(),
            len as u64
        );
        assert!(
            read_all(t.store.get(&key, None).await.unwrap()).await == data,
            "{len}"
        );
        if t.is_s3() {
            assert_eq!(parts_of(&etag(&t, &key).await.unwrap()), parts, "{len}");
        }
        assert_eq!(t.unfinished_writes(&key), 0);
    }
}
