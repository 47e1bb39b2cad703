//! The local directory store: `<root>/<database_id>/<attachment_id>/<variant>`.
//!
//! A write streams into a temporary file beside its target (`.tmp-…`, a
//! name no key can have), fsyncs it, renames it over the target and fsyncs
//! the directory: a reader sees the old blob or the new one, never half of
//! one, and a crash leaves at most a stray temporary file. The temporary
//! file is removed when the write fails, passes its cap, or is dropped.

use std::io::{self, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use tokio::io::{AsyncSeekExt, AsyncWriteExt};

use crate::key::{is_safe_segment, BlobKey};
use crate::{clip, count, Blob, BlobError};

/// Bytes per chunk when reading a blob back.
const READ_CHUNK: usize = 64 * 1024;

#[derive(Clone, Debug)]
pub struct LocalStore {
    root: Arc<PathBuf>,
}

impl LocalStore {
    /// Creates `dir` when missing; the root is kept as an absolute path.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("create the blob directory {}", dir.display()))?;
        let root = std::fs::canonicalize(dir)
            .with_context(|| format!("resolve the blob directory {}", dir.display()))?;
        Ok(Self {
            root: Arc::new(root),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The root is a directory a file can be written to.
    pub async fn check(&self) -> anyhow::Result<()> {
        let probe = self.root.join(format!(".tmp-check-{}", random_suffix()));
        tokio::fs::write(&probe, b"")
            .await
            .with_context(|| format!("write to the blob directory {}", self.root.display()))?;
        tokio::fs::remove_file(&probe).await.ok();
        Ok(())
    }

    /// The file of `key`, after checking every segment again: a key
    /// cannot name anything outside the root.
    fn path(&self, key: &BlobKey) -> Result<PathBuf, BlobError> {
        let mut path = PathBuf::from(self.root.as_path());
        for segment in key.segments() {
            if !is_safe_segment(segment) {
                return Err(BlobError::InvalidKey(format!(
                    "{key} has an unsafe segment"
                )));
            }
            path.push(segment);
        }
        Ok(path)
    }

    pub async fn put(
        &self,
        key: &BlobKey,
        mut body: impl Stream<Item = io::Result<Bytes>> + Unpin,
        cap: u64,
    ) -> Result<u64, BlobError> {
        let path = self.path(key)?;
        let dir = path.parent().context("a blob path has a parent")?;
        let temp = TempFile(Some(dir.join(format!(".tmp-{}", random_suffix()))));
        let temp_path = temp.path().to_owned();
        let mut file = create_in(dir, &temp_path).await?;
        let mut size = 0;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(BlobError::Body)?;
            count(&mut size, chunk.len(), cap)?;
            file.write_all(&chunk).await.context("write a blob")?;
        }
        file.flush().await.context("write a blob")?;
        file.sync_all().await.context("fsync a blob")?;
        drop(file);
        tokio::fs::rename(&temp_path, &path)
            .await
            .with_context(|| format!("rename a blob into {}", path.display()))?;
        temp.keep();
        sync_dir(dir).await?;
        Ok(size)
    }

    pub async fn get(&self, key: &BlobKey, range: Option<Range<u64>>) -> Result<Blob, BlobError> {
        let path = self.path(key)?;
        let mut file = match tokio::fs::File::open(&path).await {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(BlobError::NotFound),
            Err(e) => return Err(anyhow::Error::new(e).context("open a blob").into()),
        };
        let size = file.metadata().await.context("stat a blob")?.len();
        let range = clip(range, size)?;
        if range.start > 0 {
            file.seek(SeekFrom::Start(range.start))
                .await
                .context("seek in a blob")?;
        }
        let limited = tokio::io::AsyncReadExt::take(file, range.end - range.start);
        let body = tokio_util::io::ReaderStream::with_capacity(limited, READ_CHUNK);
        Ok(Blob {
            size,
            range,
            body: body.map_ok(Bytes::from).boxed(),
        })
    }

    pub async fn size(&self, key: &BlobKey) -> Result<Option<u64>, BlobError> {
        match tokio::fs::metadata(self.path(key)?).await {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow::Error::new(e).context("stat a blob").into()),
        }
    }

    /// Removes the file, then the attachment's directory once it is empty
    /// (the database's directory stays: another upload may be creating a
    /// directory in it).
    pub async fn delete(&self, key: &BlobKey) -> Result<(), BlobError> {
        let path = self.path(key)?;
        match tokio::fs::remove_file(&path).await {
            Ok(()) => {}
            // The directory may still be there, left empty by a write that
            // failed before its rename.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(anyhow::Error::new(e).context("delete a blob").into()),
        }
        if let Some(dir) = path.parent() {
            // Fails while another variant is there; that is the point.
            let _ = tokio::fs::remove_dir(dir).await;
        }
        Ok(())
    }
}

/// Creates `temp_path` in `dir`, making `dir` first. A delete of another
/// variant of the same attachment removes the directory once it looks
/// empty, so it may vanish between the two steps: then both are tried
/// again.
async fn create_in(dir: &Path, temp_path: &Path) -> Result<tokio::fs::File, BlobError> {
    const ATTEMPTS: usize = 5;
    let mut attempt = 0;
    loop {
        attempt += 1;
        tokio::fs::create_dir_all(dir)
            .await
            .with_context(|| format!("create {}", dir.display()))?;
        match tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(temp_path)
            .await
        {
            Ok(file) => return Ok(file),
            Err(e) if e.kind() == io::ErrorKind::NotFound && attempt < ATTEMPTS => continue,
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context(format!("create {}", temp_path.display()))
                    .into())
            }
        }
    }
}

/// A temporary file removed on drop unless [`TempFile::keep`] was called.
struct TempFile(Option<PathBuf>);

impl TempFile {
    fn path(&self) -> &Path {
        self.0.as_deref().expect("set until kept")
    }
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            if let Err(e) = std::fs::remove_file(&path) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::warn!(path = %path.display(), error = %e, "could not remove a temporary blob file");
                }
            }
        }
    }
}

fn random_suffix() -> String {
    cluster_protocol::ids::random_token(16)
}

/// Makes a rename in `dir` durable.
async fn sync_dir(dir: &Path) -> Result<(), BlobError> {
    let dir = dir.to_owned();
    tokio::task::spawn_blocking(move || std::fs::File::open(&dir)?.sync_all())
        .await
        .context("fsync a blob directory")?
        .context("fsync a blob directory")?;
    Ok(())
}
