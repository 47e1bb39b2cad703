use blobstore::Variant;

use crate::both_stores;
use crate::support::{attachment_id, database_id, fresh_key, pattern, TestStore};

both_stores!(
    delete_is_idempotent,
    delete_attachment_removes_every_variant
);

async fn delete_is_idempotent(t: TestStore) {
    let key = fresh_key();
    t.store
        .put_bytes(&key, pattern(100, 20).into())
        .await
        .unwrap();
    t.store.delete(&key).await.unwrap();
    assert_eq!(t.store.size(&key).await.unwrap(), None);
    t.store.delete(&key).await.unwrap();
    t.store.delete(&fresh_key()).await.unwrap();
}

async fn delete_attachment_removes_every_variant(t: TestStore) {
    let db = database_id();
    let (att, other) = (attachment_id(&db), attachment_id(&db));
    for variant in Variant::ALL {
        for a in [&att, &other] {
            let key = blobstore::key(&db, a, variant).unwrap();
            t.store
                .put_bytes(&key, pattern(64, 21).into())
                .await
                .unwrap();
        }
    }
    t.store.delete_attachment(&db, &att).await.unwrap();
    for variant in Variant::ALL {
        let gone = blobstore::key(&db, &att, variant).unwrap();
        assert_eq!(t.store.size(&gone).await.unwrap(), None, "{gone}");
        let kept = blobstore::key(&db, &other, variant).unwrap();
        assert_eq!(t.store.size(&kept).await.unwrap(), Some(64), "{kept}");
    }
    t.store.delete_attachment(&db, &att).await.unwrap();
}
