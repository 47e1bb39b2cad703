use blobstore::{BlobError, Variant};

use crate::both_stores;
use crate::support::{
    attachment_id, chunked, database_id, fresh_key, pattern, read_all, StoreKind, TestStore,
};

both_stores!(
    round_trip,
    overwrite_replaces,
    empty_blob,
    keys_lay_out_database_then_attachment
);

async fn round_trip(t: TestStore) {
    let key = fresh_key();
    let data = pattern(300_000, 1);
    let size = t.store.put(&key, chunked(&data), 1 << 20).await.unwrap();
    assert_eq!(size, data.len() as u64);
    assert_eq!(t.store.size(&key).await.unwrap(), Some(data.len() as u64));
    assert!(t.store.exists(&key).await.unwrap());
    let blob = t.store.get(&key, None).await.unwrap();
    assert_eq!((blob.size, blob.range.clone()), (300_000, 0..300_000));
    assert!(read_all(blob).await == data);
    assert_eq!(t.unfinished_writes(&key), 0);

    let missing = fresh_key();
    assert!(matches!(
        t.store.get(&missing, None).await,
        Err(BlobError::NotFound)
    ));
    assert_eq!(t.store.size(&missing).await.unwrap(), None);
    assert!(!t.store.exists(&missing).await.unwrap());
}

async fn overwrite_replaces(t: TestStore) {
    let key = fresh_key();
    t.store
        .put(&key, chunked(&pattern(5000, 2)), 10_000)
        .await
        .unwrap();
    let second = pattern(1234, 3);
    t.store.put(&key, chunked(&second), 10_000).await.unwrap();
    assert!(read_all(t.store.get(&key, None).await.unwrap()).await == second);
}

async fn empty_blob(t: TestStore) {
    let key = fresh_key();
    assert_eq!(t.store.put(&key, chunked(&[]), 10).await.unwrap(), 0);
    assert_eq!(t.store.size(&key).await.unwrap(), Some(0));
    let blob = t.store.get(&key, None).await.unwrap();
    assert_eq!((blob.size, blob.range.clone()), (0, 0..0));
    assert!(read_all(blob).await.is_empty());
}

/// Bytes sit at `<database>/<attachment>/<variant>` (a local file, or an
/// object the S3 server keeps under that key): nothing names a shard.
async fn keys_lay_out_database_then_attachment(t: TestStore) {
    let db = database_id();
    let att = attachment_id(&db);
    for (variant, data) in [
        (Variant::Original, pattern(10, 4)),
        (Variant::Thumb256, pattern(20, 5)),
    ] {
        let key = blobstore::key(&db, &att, variant).unwrap();
        t.store.put_bytes(&key, data.clone().into()).await.unwrap();
        let file = match &t.kind {
            StoreKind::Local { root } => root.join(&db).join(&att).join(variant.as_str()),
            StoreKind::S3 { bucket, root } => root
                .join(bucket)
                .join(&db)
                .join(&att)
                .join(variant.as_str()),
        };
        assert_eq!(std::fs::read(&file).unwrap(), data, "{}", file.display());
    }
}

#[test]
fn keys_refuse_ids_that_could_escape() {
    let db = database_id();
    let att = attachment_id(&db);
    for (d, a) in [
        ("../../etc", att.as_str()),
        ("db_..", att.as_str()),
        (db.as_str(), "att_../passwd"),
        (db.as_str(), ""),
    ] {
        assert!(
            matches!(
                blobstore::key(d, a, Variant::Original),
                Err(BlobError::InvalidKey(_))
            ),
            "{d}/{a}"
        );
    }
}
