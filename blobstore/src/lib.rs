//! The cluster-wide blob store: where attachment bytes live (ARCHITECTURE.md,
//! "Storage on a shard"). Every shard node opens the same store, so a
//! database move never copies a file.
//!
//! Two real implementations behind one enum, chosen by [`Settings`]:
//! * [`local::LocalStore`], a directory (the default);
//! * [`s3::S3Store`], an S3 bucket through `aws-sdk-s3`.
//!
//! Bodies are streams both ways: a write holds at most one chunk (local) or
//! one part (S3, [`settings::DEFAULT_PART_SIZE`]) in memory, and stops at a
//! byte cap leaving nothing behind. Keys come from [`key::key`] only.

pub mod disposition;
pub mod key;
pub mod local;
pub mod s3;
pub mod settings;

use std::io;
use std::ops::Range;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::Stream;

pub use key::{key, BlobKey, Variant};
pub use settings::Settings;

/// A body read from the store.
pub type BodyStream = BoxStream<'static, io::Result<Bytes>>;

#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// The body went past the cap; nothing was kept.
    #[error("the body is larger than {cap} bytes")]
    TooLarge { cap: u64 },
    #[error("no such blob")]
    NotFound,
    /// The range starts at or past the end of a blob of `size` bytes.
    #[error("the range starts past the end of the blob ({size} bytes)")]
    RangeNotSatisfiable { size: u64 },
    /// An empty or reversed range.
    #[error("invalid range {0:?}")]
    InvalidRange(Range<u64>),
    #[error("invalid blob key: {0}")]
    InvalidKey(String),
    /// The body being written failed (the client went away, a fetch broke);
    /// nothing was kept.
    #[error("reading the body failed: {0}")]
    Body(io::Error),
    /// The store itself failed (disk, network, S3 refused).
    #[error(transparent)]
    Store(#[from] anyhow::Error),
}

/// A blob (or a range of one) being read.
pub struct Blob {
    /// Size of the whole blob.
    pub size: u64,
    /// The bytes `body` yields, within `0..size`.
    pub range: Range<u64>,
    pub body: BodyStream,
}

impl std::fmt::Debug for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blob")
            .field("size", &self.size)
            .field("range", &self.range)
            .finish_non_exhaustive()
    }
}

/// What a time-limited GET link is signed for.
#[derive(Debug, Clone)]
pub struct LinkOptions {
    /// When the link was signed; it works until `signed_at + expires_in`.
    /// Passing a rounded time makes the same link again (a cache of links).
    pub signed_at: SystemTime,
    pub expires_in: Duration,
    /// `Content-Type` the response carries (overrides the stored one).
    pub content_type: Option<String>,
    /// `Content-Disposition` the response carries ([`disposition`]).
    pub content_disposition: Option<String>,
}

/// The store, local or S3. Cheap to clone (both hold an `Arc` inside).
#[derive(Clone, Debug)]
pub enum BlobStore {
    Local(local::LocalStore),
    S3(s3::S3Store),
}

impl BlobStore {
    /// Opens the store `settings` name: creates a local root when missing;
    /// for S3, builds the client (no request is made; see [`Self::check`]).
    pub fn open(settings: &Settings) -> anyhow::Result<Self> {
        Ok(match settings {
            Settings::Local(l) => BlobStore::Local(local::LocalStore::open(&l.dir)?),
            Settings::S3(s) => BlobStore::S3(s3::S3Store::open(s)?),
        })
    }

    /// `local` or `s3`.
    pub fn kind(&self) -> &'static str {
        match self {
            BlobStore::Local(_) => "local",
            BlobStore::S3(_) => "s3",
        }
    }

    /// Whether the store answers: the local root is a writable directory,
    /// the bucket exists and the credentials are accepted.
    pub async fn check(&self) -> anyhow::Result<()> {
        match self {
            BlobStore::Local(s) => s.check().await,
            BlobStore::S3(s) => s.check().await,
        }
    }

    /// Writes `body` under `key`, replacing what was there, and returns its
    /// size. Past `cap` bytes it stops, keeps nothing (the previous blob, if
    /// any, stays) and answers [`BlobError::TooLarge`]; a failing body
    /// answers [`BlobError::Body`], also keeping nothing. Dropping the
    /// future midway keeps nothing too. For an `AsyncRead`, pass
    /// `tokio_util::io::ReaderStream::new(reader)`.
    pub async fn put<S>(&self, key: &BlobKey, body: S, cap: u64) -> Result<u64, BlobError>
    where
        S: Stream<Item = io::Result<Bytes>> + Send,
    {
        let body = Box::pin(body);
        match self {
            BlobStore::Local(s) => s.put(key, body, cap).await,
            BlobStore::S3(s) => s.put(key, body, cap).await,
        }
    }

    /// Writes bytes already in memory (a thumbnail).
    pub async fn put_bytes(&self, key: &BlobKey, bytes: Bytes) -> Result<u64, BlobError> {
        let cap = bytes.len() as u64;
        self.put(key, futures::stream::iter([Ok(bytes)]), cap).await
    }

    /// Reads the blob, or the part of it `range` names (clipped to its end,
    /// as an HTTP range is).
    pub async fn get(&self, key: &BlobKey, range: Option<Range<u64>>) -> Result<Blob, BlobError> {
        if let Some(r) = &range {
            if r.start >= r.end {
                return Err(BlobError::InvalidRange(r.clone()));
            }
        }
        match self {
            BlobStore::Local(s) => s.get(key, range).await,
            BlobStore::S3(s) => s.get(key, range).await,
        }
    }

    /// The blob's size, `None` when there is none.
    pub async fn size(&self, key: &BlobKey) -> Result<Option<u64>, BlobError> {
        match self {
            BlobStore::Local(s) => s.size(key).await,
            BlobStore::S3(s) => s.size(key).await,
        }
    }

    pub async fn exists(&self, key: &BlobKey) -> Result<bool, BlobError> {
        Ok(self.size(key).await?.is_some())
    }

    /// Removes the blob; removing one that is not there succeeds.
    pub async fn delete(&self, key: &BlobKey) -> Result<(), BlobError> {
        match self {
            BlobStore::Local(s) => s.delete(key).await,
            BlobStore::S3(s) => s.delete(key).await,
        }
    }

    /// Removes every variant of an attachment.
    pub async fn delete_attachment(
        &self,
        database_id: &str,
        attachment_id: &str,
    ) -> Result<(), BlobError> {
        for variant in Variant::ALL {
            self.delete(&key(database_id, attachment_id, variant)?)
                .await?;
        }
        Ok(())
    }

    /// A link a browser can GET the blob from until it expires: a
    /// presigned S3 URL. The local store has none (`None`): the cluster
    /// serves local bytes through its own signed route.
    pub async fn presigned_get(
        &self,
        key: &BlobKey,
        link: &LinkOptions,
    ) -> Result<Option<String>, BlobError> {
        match self {
            BlobStore::Local(_) => Ok(None),
            BlobStore::S3(s) => s.presigned_get(key, link).await.map(Some),
        }
    }
}

/// `range` clipped to a blob of `size` bytes, or why it cannot be served.
pub(crate) fn clip(range: Option<Range<u64>>, size: u64) -> Result<Range<u64>, BlobError> {
    match range {
        None => Ok(0..size),
        Some(r) if r.start >= size => Err(BlobError::RangeNotSatisfiable { size }),
        Some(r) => Ok(r.start..r.end.min(size)),
    }
}

/// Adds a chunk's length to `total`, refusing to pass `cap`.
pub(crate) fn count(total: &mut u64, chunk: usize, cap: u64) -> Result<(), BlobError> {
    *total += chunk as u64;
    if *total > cap {
        return Err(BlobError::TooLarge { cap });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_clip_to_the_end_like_http() {
        assert_eq!(clip(None, 10).unwrap(), 0..10);
        assert_eq!(clip(Some(2..5), 10).unwrap(), 2..5);
        assert_eq!(clip(Some(2..50), 10).unwrap(), 2..10);
        assert!(matches!(
            clip(Some(10..11), 10),
            Err(BlobError::RangeNotSatisfiable { size: 10 })
        ));
        assert!(matches!(
            clip(Some(0..1), 0),
            Err(BlobError::RangeNotSatisfiable { size: 0 })
        ));
    }

    #[test]
    fn counting_stops_past_the_cap() {
        let mut total = 0;
        assert!(count(&mut total, 5, 10).is_ok());
        assert!(count(&mut total, 5, 10).is_ok());
        assert!(matches!(
            count(&mut total, 1, 10),
            Err(BlobError::TooLarge { cap: 10 })
        ));
    }
}
