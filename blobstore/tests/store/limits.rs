use std::io;
use std::task::Poll;

use blobstore::BlobError;
use bytes::Bytes;
use futures::StreamExt;

use crate::both_stores;
use crate::support::{chunked, fresh_key, pattern, read_all, TestStore, PART};

both_stores!(
    cap_passed_mid_stream_keeps_nothing,
    cap_passed_keeps_the_previous_blob,
    exactly_the_cap_is_accepted,
    failing_body_keeps_nothing,
    dropped_write_keeps_nothing,
);

/// An endless body: only the cap can end the write.
fn endless() -> impl futures::Stream<Item = io::Result<Bytes>> + Send {
    let chunk = Bytes::from(pattern(64 * 1024, 30));
    futures::stream::repeat_with(move || Ok(chunk.clone()))
}

async fn cap_passed_mid_stream_keeps_nothing(t: TestStore) {
    let key = fresh_key();
    // Two whole parts are sent to S3 before the cap is passed.
    let cap = 2 * PART as u64 + 100_000;
    let refused = t.store.put(&key, endless(), cap).await;
    assert!(
        matches!(refused, Err(BlobError::TooLarge { cap: c }) if c == cap),
        "{refused:?}"
    );
    assert_eq!(t.store.size(&key).await.unwrap(), None);
    assert_eq!(t.unfinished_writes(&key), 0);
}

async fn cap_passed_keeps_the_previous_blob(t: TestStore) {
    let key = fresh_key();
    let first = pattern(500, 31);
    t.store.put(&key, chunked(&first), 1000).await.unwrap();
    let refused = t.store.put(&key, endless(), PART as u64 + 1).await;
    assert!(
        matches!(refused, Err(BlobError::TooLarge { .. })),
        "{refused:?}"
    );
    assert!(read_all(t.store.get(&key, None).await.unwrap()).await == first);
    assert_eq!(t.unfinished_writes(&key), 0);
}

async fn exactly_the_cap_is_accepted(t: TestStore) {
    let key = fresh_key();
    let data = pattern(70_000, 32);
    assert_eq!(
        t.store.put(&key, chunked(&data), 70_000).await.unwrap(),
        70_000
    );
    let over = fresh_key();
    let refused = t.store.put(&over, chunked(&data), 69_999).await;
    assert!(
        matches!(refused, Err(BlobError::TooLarge { cap: 69_999 })),
        "{refused:?}"
    );
    assert_eq!(t.store.size(&over).await.unwrap(), None);
}

/// A body that breaks after a part's worth (a client that went away).
async fn failing_body_keeps_nothing(t: TestStore) {
    let key = fresh_key();
    let broken = chunked(&pattern(PART + 1000, 33)).chain(futures::stream::iter([Err(
        io::Error::other("client went away"),
    )]));
    let refused = t.store.put(&key, broken, u64::MAX).await;
    assert!(
        matches!(&refused, Err(BlobError::Body(e)) if e.to_string() == "client went away"),
        "{refused:?}"
    );
    assert_eq!(t.store.size(&key).await.unwrap(), None);
    assert_eq!(t.unfinished_writes(&key), 0);
}

/// A write abandoned midway (its request was dropped) leaves nothing once
/// it is dropped: the temporary file goes, the multipart upload is aborted.
async fn dropped_write_keeps_nothing(t: TestStore) {
    let key = fresh_key();
    let (reached, mut waiting) = tokio::sync::oneshot::channel();
    let mut reached = Some(reached);
    let stalls = futures::stream::poll_fn(move |_| {
        if let Some(tx) = reached.take() {
            let _ = tx.send(());
        }
        Poll::<Option<io::Result<Bytes>>>::Pending
    });
    let body = chunked(&pattern(PART + 10_000, 34)).chain(stalls);
    let mut put = Box::pin(t.store.put(&key, body, u64::MAX));
    tokio::select! {
        done = &mut put => panic!("a stalled body finished: {done:?}"),
        _ = &mut waiting => {}
    }
    // Positive control: the write is under way (a temporary file, or a
    // multipart upload with its first part sent).
    assert_eq!(t.unfinished_writes(&key), 1);
    drop(put);
    assert_eq!(t.settle(&key).await, 0);
    assert_eq!(t.store.size(&key).await.unwrap(), None);
}
