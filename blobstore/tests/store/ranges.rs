use blobstore::BlobError;

use crate::both_stores;
use crate::support::{chunked, fresh_key, pattern, read_all, TestStore};

both_stores!(
    ranges_are_served_and_clipped,
    ranges_past_the_end_are_refused
);

async fn ranges_are_served_and_clipped(t: TestStore) {
    let key = fresh_key();
    let data = pattern(200_000, 10);
    t.store.put(&key, chunked(&data), 1 << 20).await.unwrap();
    for (asked, served) in [
        (0..1, 0..1),
        (10..20, 10..20),
        (65_530..131_080, 65_530..131_080),
        (199_999..200_000, 199_999..200_000),
        (150_000..900_000, 150_000..200_000),
    ] {
        let blob = t.store.get(&key, Some(asked.clone())).await.unwrap();
        assert_eq!(
            (blob.size, blob.range.clone()),
            (200_000, served.clone()),
            "{asked:?}"
        );
        let (start, end) = (served.start as usize, served.end as usize);
        assert!(read_all(blob).await == data[start..end], "{asked:?}");
    }
}

async fn ranges_past_the_end_are_refused(t: TestStore) {
    let key = fresh_key();
    t.store
        .put(&key, chunked(&pattern(100, 11)), 1000)
        .await
        .unwrap();
    assert!(matches!(
        t.store.get(&key, Some(100..101)).await,
        Err(BlobError::RangeNotSatisfiable { size: 100 })
    ));
    assert!(matches!(
        t.store.get(&key, Some(500..600)).await,
        Err(BlobError::RangeNotSatisfiable { size: 100 })
    ));
    assert!(matches!(
        t.store.get(&key, Some(5..5)).await,
        Err(BlobError::InvalidRange(_))
    ));
    assert!(matches!(
        t.store.get(&fresh_key(), Some(0..1)).await,
        Err(BlobError::NotFound)
    ));
}
