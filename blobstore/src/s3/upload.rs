//! Streamed writes to S3: one `PutObject` for a body that fits in a part,
//! else a multipart upload sent part by part as the body arrives.

use std::io;

use anyhow::{anyhow, Context};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};

use super::{failed, S3Store};
use crate::key::BlobKey;
use crate::{count, BlobError};

/// S3's limit on the parts of one upload.
const MAX_PARTS: i32 = 10_000;

pub(super) async fn put(
    store: &S3Store,
    key: &BlobKey,
    mut body: impl Stream<Item = io::Result<Bytes>> + Unpin,
    cap: u64,
) -> Result<u64, BlobError> {
    let part_size = store.inner.part_size;
    let mut part = BytesMut::new();
    let mut size = 0;
    let mut upload: Option<Multipart> = None;
    let filled = async {
        while let Some(chunk) = body.next().await {
            let mut chunk = chunk.map_err(BlobError::Body)?;
            count(&mut size, chunk.len(), cap)?;
            while !chunk.is_empty() {
                if part.capacity() == 0 {
                    // The first part of a small body stays small.
                    part.reserve(
                        part_size.min(usize::try_from(cap).unwrap_or(usize::MAX).saturating_add(1)),
                    );
                }
                let take = (part_size - part.len()).min(chunk.len());
                part.extend_from_slice(&chunk.split_to(take));
                if part.len() == part_size {
                    let full = std::mem::take(&mut part).freeze();
                    let multipart = match &mut upload {
                        Some(m) => m,
                        None => upload.insert(Multipart::start(store, key).await?),
                    };
                    multipart.send_part(full).await?;
                }
            }
        }
        Ok::<_, BlobError>(())
    }
    .await;
    if let Err(e) = filled {
        if let Some(m) = upload {
            m.abort().await;
        }
        return Err(e);
    }
    match upload {
        None => {
            store
                .inner
                .client
                .put_object()
                .bucket(&store.inner.bucket)
                .key(key.as_str())
                .body(ByteStream::from(part.freeze()))
                .send()
                .await
                .map_err(|e| failed("put an object", e))?;
        }
        Some(mut m) => {
            let sent = match part.is_empty() {
                true => Ok(()),
                false => m.send_part(part.freeze()).await,
            };
            match sent {
                Ok(()) => m.complete().await?,
                Err(e) => {
                    m.abort().await;
                    return Err(e);
                }
            }
        }
    }
    Ok(size)
}

/// A multipart upload in progress; aborted in the background if dropped
/// before [`Multipart::complete`] or [`Multipart::abort`].
struct Multipart {
    client: aws_sdk_s3::Client,
    bucket: String,
    key: String,
    upload_id: Option<String>,
    parts: Vec<CompletedPart>,
}

impl Multipart {
    async fn start(store: &S3Store, key: &BlobKey) -> Result<Self, BlobError> {
        let created = store
            .inner
            .client
            .create_multipart_upload()
            .bucket(&store.inner.bucket)
            .key(key.as_str())
            .send()
            .await
            .map_err(|e| failed("start a multipart upload", e))?;
        let upload_id = created
            .upload_id()
            .context("S3 answered no upload id")?
            .to_owned();
        Ok(Self {
            client: store.inner.client.clone(),
            bucket: store.inner.bucket.clone(),
            key: key.as_str().to_owned(),
            upload_id: Some(upload_id),
            parts: Vec::new(),
        })
    }

    fn id(&self) -> &str {
        self.upload_id
            .as_deref()
            .expect("set until completed or aborted")
    }

    async fn send_part(&mut self, bytes: Bytes) -> Result<(), BlobError> {
        let number = self.parts.len() as i32 + 1;
        if number > MAX_PARTS {
            return Err(anyhow!("S3 takes at most {MAX_PARTS} parts per upload").into());
        }
        let sent = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(self.id())
            .part_number(number)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|e| failed("upload a part", e))?;
        self.parts.push(
            CompletedPart::builder()
                .part_number(number)
                .set_e_tag(sent.e_tag().map(str::to_owned))
                .build(),
        );
        Ok(())
    }

    async fn complete(mut self) -> Result<(), BlobError> {
        let upload_id = self
            .upload_id
            .take()
            .expect("set until completed or aborted");
        let done = self
            .client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(&self.key)
            .upload_id(&upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(std::mem::take(&mut self.parts)))
                    .build(),
            )
            .send()
            .await;
        if let Err(e) = done {
            self.upload_id = Some(upload_id);
            let error = failed("complete a multipart upload", e);
            self.abort().await;
            return Err(error.into());
        }
        Ok(())
    }

    /// Best effort: a failed abort is logged (a bucket lifecycle rule for
    /// incomplete uploads catches what is left).
    async fn abort(mut self) {
        if let Some(upload_id) = self.upload_id.take() {
            abort(&self.client, &self.bucket, &self.key, &upload_id).await;
        }
    }
}

impl Drop for Multipart {
    fn drop(&mut self) {
        let Some(upload_id) = self.upload_id.take() else {
            return;
        };
        let (client, bucket, key) = (self.client.clone(), self.bucket.clone(), self.key.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move { abort(&client, &bucket, &key, &upload_id).await });
            }
            Err(_) => tracing::warn!(
                key,
                "a multipart upload was dropped outside a runtime; not aborted"
            ),
        }
    }
}

async fn abort(client: &aws_sdk_s3::Client, bucket: &str, key: &str, upload_id: &str) {
    let aborted = client
        .abort_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .send()
        .await;
    if let Err(e) = aborted {
        tracing::warn!(key, error = %failed("abort a multipart upload", e), "multipart upload left behind");
    }
}
