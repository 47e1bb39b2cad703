//! Storing an attachment's bytes, for an upload and for a URL fetch alike:
//! the original is streamed into the blob store under the file cap (never
//! whole in memory), then the derivatives are made when it is an image.
//! [`discard`] undoes it when the write it belongs to fails.

use std::io;

use blobstore::{BlobError, Variant};
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt, TryStreamExt};

use super::limits::{MAX_FILE_BYTES, MAX_THUMBNAIL_SOURCE_BYTES};
use super::thumbnails;
use crate::catalog;
use crate::state::AppState;

/// Bytes of the start of a file kept to tell its type.
const HEAD_BYTES: usize = 512;

/// The content type of files whose type nobody knows.
pub const OCTET_STREAM: &str = "application/octet-stream";

/// What [`store`] kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub size_bytes: i64,
    /// Whether the two WebP derivatives were made.
    pub thumbnails: bool,
    /// The content type to register: the one given, unless it was empty or
    /// `application/octet-stream`; then what the first bytes show (an image
    /// format), else `application/octet-stream`.
    pub content_type: String,
}

/// The content type to register for a file declared as `declared` whose
/// first bytes are `head`.
pub fn resolve_content_type(declared: &str, head: &[u8]) -> String {
    let declared = declared.trim();
    if declared.is_empty() || declared.eq_ignore_ascii_case(OCTET_STREAM) {
        return thumbnails::sniff(head).unwrap_or(OCTET_STREAM).to_owned();
    }
    declared.to_owned()
}

/// Streams `body` into the store as the original of `attachment_id` of
/// `database_id` (at most `cap` bytes, never over [`MAX_FILE_BYTES`]:
/// past it nothing is kept and the answer is [`BlobError::TooLarge`]), then makes the derivatives when
/// the content type (`content_type`, or sniffed when that is empty or
/// `application/octet-stream`) and the bytes say it is an image that
/// qualifies. On an error nothing of the attachment is kept.
pub async fn store<S>(
    state: &AppState,
    database_id: &str,
    attachment_id: &str,
    content_type: &str,
    body: S,
    cap: u64,
) -> Result<Stored, BlobError>
where
    S: Stream<Item = io::Result<Bytes>> + Send,
{
    let key = blobstore::key(database_id, attachment_id, Variant::Original)?;
    let mut head: Vec<u8> = Vec::with_capacity(HEAD_BYTES);
    let body = body.inspect(|chunk| {
        if let Ok(chunk) = chunk {
            let room = HEAD_BYTES - head.len();
            head.extend_from_slice(&chunk[..room.min(chunk.len())]);
        }
    });
    let size = state.blobs.put(&key, body, cap.min(MAX_FILE_BYTES)).await?;
    let content_type = resolve_content_type(content_type, &head);
    let thumbnails = if thumbnails::qualifies(&content_type, size, &head) {
        match derive(state, database_id, attachment_id).await {
            Ok(made) => made,
            Err(e) => {
                discard(state, database_id, attachment_id).await;
                return Err(e);
            }
        }
    } else {
        false
    };
    Ok(Stored {
        size_bytes: size as i64,
        thumbnails,
        content_type,
    })
}

/// Reads the original back (at most [`MAX_THUMBNAIL_SOURCE_BYTES`]), makes
/// the derivatives on the thumbnail pool and stores them; false when the
/// image does not qualify after all (too many pixels, undecodable).
async fn derive(
    state: &AppState,
    database_id: &str,
    attachment_id: &str,
) -> Result<bool, BlobError> {
    let key = |v| blobstore::key(database_id, attachment_id, v);
    let blob = state.blobs.get(&key(Variant::Original)?, None).await?;
    if blob.size > MAX_THUMBNAIL_SOURCE_BYTES {
        return Ok(false);
    }
    // The source is held in memory from here until its derivatives are
    // made: only within the node's queue budget (else no thumbnails).
    let Some(_held) = state.thumbnailer.hold(blob.size) else {
        tracing::info!(
            database_id,
            attachment_id,
            size = blob.size,
            "the node's thumbnail queue budget is full; no thumbnails for this image"
        );
        return Ok(false);
    };
    let mut source = BytesMut::with_capacity(blob.size as usize);
    let mut body = blob.body;
    while let Some(chunk) = body
        .try_next()
        .await
        .map_err(|e| anyhow::Error::new(e).context("read an original back"))?
    {
        if (source.len() + chunk.len()) as u64 > blob.size {
            // More than the store said: not what was held for.
            return Ok(false);
        }
        source.extend_from_slice(&chunk);
    }
    let Some(made) = state.thumbnailer.make(source.freeze()).await else {
        return Ok(false);
    };
    state
        .blobs
        .put_bytes(&key(Variant::Thumb256)?, made.thumb)
        .await?;
    state
        .blobs
        .put_bytes(&key(Variant::Card1024)?, made.card)
        .await?;
    Ok(true)
}

/// Deletes every variant of an attachment whose write did not happen; when
/// that fails, the bytes are queued for the blob sweeper (and, should even
/// that fail, logged: they are unreachable, never served).
pub async fn discard(state: &AppState, database_id: &str, attachment_id: &str) {
    let Err(e) = state
        .blobs
        .delete_attachment(database_id, attachment_id)
        .await
    else {
        return;
    };
    tracing::warn!(database_id, attachment_id, error = %e, "could not delete the bytes of an attachment that was not kept; queued for the sweeper");
    let queued = async {
        let client = state.db.client().await?;
        catalog::attachments::queue_garbage(&*client, database_id, attachment_id, &e.to_string())
            .await?;
        Ok::<_, crate::error::ApiError>(())
    };
    if let Err(q) = queued.await {
        tracing::error!(database_id, attachment_id, error = %q, "could not queue the bytes of an attachment that was not kept");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_type_wins_unless_it_says_nothing() {
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
        assert_eq!(resolve_content_type("text/plain", png), "text/plain");
        assert_eq!(resolve_content_type("", png), "image/png");
        assert_eq!(
            resolve_content_type("application/octet-stream", png),
            "image/png"
        );
        assert_eq!(resolve_content_type("", b"hello"), OCTET_STREAM);
        assert_eq!(
            resolve_content_type("Application/Octet-Stream", b"GIF89a....."),
            "image/gif"
        );
    }
}
