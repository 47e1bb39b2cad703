//! The two stores under test, bodies to write, and looks behind a store
//! (temporary files, unfinished multipart uploads) to prove a refused
//! write left nothing.
//!
//! The S3 store is the real S3 server `deploy/test` starts (s3s-fs, which
//! checks signatures), described by `TEST_S3_ENDPOINT`, `TEST_S3_REGION`,
//! `TEST_S3_BUCKET`, `TEST_S3_ACCESS_KEY_ID`, `TEST_S3_SECRET_ACCESS_KEY`
//! and `TEST_S3_ROOT` (its data directory).

// Shared with the memory test, which uses a few of these.
#![allow(dead_code)]

use std::io;
use std::path::PathBuf;

use base64::Engine;
use blobstore::settings::{S3Settings, SecretString};
use blobstore::{BlobKey, BlobStore, Settings, Variant};
use bytes::Bytes;
use cluster_protocol::ids::{self, Kind};
use futures::{Stream, StreamExt};

/// Small parts (S3's minimum), so the multipart path runs on small bodies.
pub const PART: usize = 5 * 1024 * 1024;

pub struct TestStore {
    pub store: BlobStore,
    pub kind: StoreKind,
}

pub enum StoreKind {
    Local { root: PathBuf },
    S3 { bucket: String, root: PathBuf },
}

fn env(name: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            panic!(
                "{name} is not set: run the suite through deploy/test, which starts the S3 test \
             server (s3s-fs) and exports TEST_S3_*"
            )
        })
}

pub fn s3_settings() -> S3Settings {
    S3Settings {
        endpoint: Some(env("TEST_S3_ENDPOINT")),
        region: env("TEST_S3_REGION"),
        bucket: env("TEST_S3_BUCKET"),
        access_key_id: env("TEST_S3_ACCESS_KEY_ID"),
        secret_access_key: SecretString::new(env("TEST_S3_SECRET_ACCESS_KEY")),
        force_path_style: true,
        part_size: PART,
    }
}

impl TestStore {
    /// A local store in a directory of its own.
    pub fn local() -> Self {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("blobstore-{}", ids::random_token(10)));
        let store = BlobStore::open(&Settings::local(&root)).expect("open a local store");
        let BlobStore::Local(local) = &store else {
            unreachable!()
        };
        let root = local.root().to_owned();
        Self {
            store,
            kind: StoreKind::Local { root },
        }
    }

    pub fn s3() -> Self {
        let settings = s3_settings();
        let store = BlobStore::open(&Settings::S3(settings.clone())).expect("open the S3 store");
        Self {
            store,
            kind: StoreKind::S3 {
                bucket: settings.bucket,
                root: PathBuf::from(env("TEST_S3_ROOT")),
            },
        }
    }

    pub fn is_s3(&self) -> bool {
        matches!(self.kind, StoreKind::S3 { .. })
    }

    /// Unfinished writes of `key` the store still holds: temporary files
    /// beside it (local), or multipart uploads of it (s3s-fs keeps one
    /// `.bucket-<b64>.object-<b64>.upload-<id>.metadata.json` per upload
    /// until it is completed or aborted).
    pub fn unfinished_writes(&self, key: &BlobKey) -> usize {
        let (dir, prefix, suffix) = match &self.kind {
            StoreKind::Local { root } => {
                let mut dir = root.clone();
                dir.extend(key.segments().take(2));
                (dir, ".tmp-".to_owned(), String::new())
            }
            StoreKind::S3 { bucket, root } => {
                let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
                (
                    root.clone(),
                    format!(
                        ".bucket-{}.object-{}.upload-",
                        b64(bucket),
                        b64(key.as_str())
                    ),
                    ".metadata.json".to_owned(),
                )
            }
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return 0;
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.starts_with(&prefix) && name.ends_with(&suffix)
            })
            .count()
    }

    /// Waits (at most ten seconds) until `key` has no unfinished write: an
    /// upload dropped midway is aborted in the background.
    pub async fn settle(&self, key: &BlobKey) -> usize {
        for _ in 0..200 {
            if self.unfinished_writes(key) == 0 {
                return 0;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        self.unfinished_writes(key)
    }
}

impl Drop for TestStore {
    /// A local store's directory goes with it (the S3 server's data lives in
    /// the test cluster's directory, which `deploy/test` wipes each run).
    fn drop(&mut self) {
        if let StoreKind::Local { root } = &self.kind {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

pub fn database_id() -> String {
    ids::new_database_id(&ids::random_token(ids::TAG_LEN))
}

pub fn attachment_id(database_id: &str) -> String {
    let tag = ids::tag_of(Kind::Database, database_id).expect("a database id");
    ids::new_tagged(Kind::Attachment, tag)
}

/// The key of a fresh attachment's original.
pub fn fresh_key() -> BlobKey {
    let db = database_id();
    blobstore::key(&db, &attachment_id(&db), Variant::Original).unwrap()
}

/// `len` bytes that differ from one offset to the next (and per `seed`).
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// `data` as a stream of uneven chunks (1 byte, 7, 4 KiB, 64 KiB, 1 MiB, ...).
pub fn chunked(data: &[u8]) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    const SIZES: [usize; 6] = [1, 7, 4096, 65_536, 1 << 20, 333];
    let data = Bytes::copy_from_slice(data);
    let mut chunks = Vec::new();
    let (mut at, mut i) = (0, 0);
    while at < data.len() {
        let end = (at + SIZES[i % SIZES.len()]).min(data.len());
        chunks.push(Ok(data.slice(at..end)));
        at = end;
        i += 1;
    }
    futures::stream::iter(chunks)
}

/// The bytes of a blob read back.
pub async fn read_all(blob: blobstore::Blob) -> Vec<u8> {
    let mut out = Vec::new();
    let mut body = blob.body;
    while let Some(chunk) = body.next().await {
        out.extend_from_slice(&chunk.expect("read a blob"));
    }
    out
}

/// Declares each named `async fn(TestStore)` of the calling module as a
/// test against both stores: `<module>::local::<name>`, `<module>::s3::<name>`.
#[macro_export]
macro_rules! both_stores {
    ($($name:ident),* $(,)?) => {
        mod local {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::support::TestStore::local()).await
                }
            )*
        }
        mod s3 {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name($crate::support::TestStore::s3()).await
                }
            )*
        }
    };
}
