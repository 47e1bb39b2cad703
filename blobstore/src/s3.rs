//! The S3 store: one object per key in one bucket, through `aws-sdk-s3`.
//!
//! A body up to one part ([`S3Settings::part_size`]) is one `PutObject`;
//! a larger one is a multipart upload whose parts are sent as they fill,
//! so memory holds one part whatever the file's size. A multipart upload
//! that fails, passes its cap or is dropped is aborted: S3 then keeps no
//! part of it. Links are presigned GETs.

mod upload;

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use aws_sdk_s3::config::{
    timeout::TimeoutConfig, BehaviorVersion, Credentials, Region, RequestChecksumCalculation,
    ResponseChecksumValidation, StalledStreamProtectionConfig,
};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::presigning::PresigningConfig;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use bytes::Bytes;
use futures::{Stream, StreamExt};

use crate::key::BlobKey;
use crate::settings::S3Settings;
use crate::{clip, Blob, BlobError, LinkOptions};

/// Opening a connection to the S3 endpoint.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Waiting for the head of a response.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub struct S3Store {
    inner: Arc<Inner>,
}

struct Inner {
    client: aws_sdk_s3::Client,
    bucket: String,
    part_size: usize,
}

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store")
            .field("bucket", &self.inner.bucket)
            .field("part_size", &self.inner.part_size)
            .finish_non_exhaustive()
    }
}

impl S3Store {
    /// Builds the client; makes no request.
    pub fn open(settings: &S3Settings) -> anyhow::Result<Self> {
        settings.check()?;
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let credentials = Credentials::new(
            &settings.access_key_id,
            settings.secret_access_key.expose(),
            None,
            None,
            "blob-store-settings",
        );
        let mut config = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(http)
            .region(Region::new(settings.region.clone()))
            .credentials_provider(credentials)
            .force_path_style(settings.force_path_style)
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .read_timeout(READ_TIMEOUT)
                    .build(),
            )
            // Checksums only where S3 requires them: S3-compatible servers
            // differ in the trailing-checksum encodings they accept.
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            // A download is read as fast as its reader (an export's client)
            // takes it; a slow reader is not a stalled server.
            .stalled_stream_protection(
                StalledStreamProtectionConfig::enabled()
                    .download_enabled(false)
                    .build(),
            );
        if let Some(endpoint) = &settings.endpoint {
            config = config.endpoint_url(endpoint);
        }
        Ok(Self {
            inner: Arc::new(Inner {
                client: aws_sdk_s3::Client::from_conf(config.build()),
                bucket: settings.bucket.clone(),
                part_size: settings.part_size,
            }),
        })
    }

    pub fn bucket(&self) -> &str {
        &self.inner.bucket
    }

    /// The client, for tests that look behind the store (multipart uploads
    /// left over, objects written by hand).
    pub fn client(&self) -> &aws_sdk_s3::Client {
        &self.inner.client
    }

    /// The bucket exists and the credentials are accepted.
    pub async fn check(&self) -> anyhow::Result<()> {
        self.inner
            .client
            .head_bucket()
            .bucket(&self.inner.bucket)
            .send()
            .await
            .map_err(|e| failed("check the bucket", e))?;
        Ok(())
    }

    pub async fn put(
        &self,
        key: &BlobKey,
        body: impl Stream<Item = io::Result<Bytes>> + Unpin,
        cap: u64,
    ) -> Result<u64, BlobError> {
        upload::put(self, key, body, cap).await
    }

    pub async fn get(&self, key: &BlobKey, range: Option<Range<u64>>) -> Result<Blob, BlobError> {
        let mut request = self
            .inner
            .client
            .get_object()
            .bucket(&self.inner.bucket)
            .key(key.as_str());
        if let Some(r) = &range {
            request = request.range(format!("bytes={}-{}", r.start, r.end - 1));
        }
        let output = match request.send().await {
            Ok(o) => o,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => {
                return Err(BlobError::NotFound)
            }
            Err(e) if e.as_service_error().and_then(|s| s.code()) == Some("InvalidRange") => {
                return match self.size(key).await? {
                    Some(size) => Err(BlobError::RangeNotSatisfiable { size }),
                    None => Err(BlobError::NotFound),
                };
            }
            Err(e) => return Err(failed("get an object", e).into()),
        };
        let length = output
            .content_length()
            .and_then(|n| u64::try_from(n).ok())
            .context("S3 answered no Content-Length")?;
        let (size, served) = match output.content_range() {
            Some(text) => parse_content_range(text)
                .with_context(|| format!("S3 answered Content-Range {text:?}"))?,
            None => (length, 0..length),
        };
        // A server that ignored the range sent the whole object: clip here.
        let range = clip(range, size)?;
        if served != range && served != (0..size) {
            return Err(anyhow!("S3 served {served:?} for {range:?}").into());
        }
        let skip = range.start - served.start;
        let body = futures::stream::unfold(output.body, |mut body| async move {
            let next = body.next().await?;
            Some((next.map_err(io::Error::other), body))
        });
        let body = skip_and_take(body, skip, range.end - range.start);
        Ok(Blob {
            size,
            range,
            body: body.boxed(),
        })
    }

    pub async fn size(&self, key: &BlobKey) -> Result<Option<u64>, BlobError> {
        match self
            .inner
            .client
            .head_object()
            .bucket(&self.inner.bucket)
            .key(key.as_str())
            .send()
            .await
        {
            Ok(o) => Ok(Some(
                o.content_length()
                    .and_then(|n| u64::try_from(n).ok())
                    .context("S3 answered no Content-Length")?,
            )),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(None),
            Err(e) => Err(failed("head an object", e).into()),
        }
    }

    /// S3 answers a delete of a missing key as a success.
    pub async fn delete(&self, key: &BlobKey) -> Result<(), BlobError> {
        self.inner
            .client
            .delete_object()
            .bucket(&self.inner.bucket)
            .key(key.as_str())
            .send()
            .await
            .map_err(|e| failed("delete an object", e))?;
        Ok(())
    }

    pub async fn presigned_get(
        &self,
        key: &BlobKey,
        link: &LinkOptions,
    ) -> Result<String, BlobError> {
        let config = PresigningConfig::builder()
            .start_time(link.signed_at)
            .expires_in(link.expires_in)
            .build()
            .context("presigning settings")?;
        let presigned = self
            .inner
            .client
            .get_object()
            .bucket(&self.inner.bucket)
            .key(key.as_str())
            .set_response_content_type(link.content_type.clone())
            .set_response_content_disposition(link.content_disposition.clone())
            .presigned(config)
            .await
            .map_err(|e| failed("presign a GET", e))?;
        Ok(presigned.uri().to_owned())
    }
}

/// An SDK error as one line naming the action and S3's code and message.
fn failed<E, R>(action: &str, e: SdkError<E, R>) -> anyhow::Error
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    anyhow!("S3: {action}: {}", DisplayErrorContext(&e))
}

/// `bytes 0-99/1234` as (1234, 0..100).
fn parse_content_range(text: &str) -> Option<(u64, Range<u64>)> {
    let rest = text.trim().strip_prefix("bytes ")?;
    let (span, total) = rest.split_once('/')?;
    let (first, last) = span.split_once('-')?;
    let (first, last): (u64, u64) = (first.parse().ok()?, last.parse().ok()?);
    let total = total.parse().ok()?;
    (first <= last && last < total).then_some((total, first..last + 1))
}

/// Drops the first `skip` bytes of `body` and ends it after `take` more.
fn skip_and_take(
    body: impl Stream<Item = io::Result<Bytes>> + Send + 'static,
    skip: u64,
    take: u64,
) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    let body = Box::pin(body);
    futures::stream::unfold(
        (body, skip, take),
        |(mut body, mut skip, mut take)| async move {
            while take > 0 {
                let mut chunk = match body.next().await? {
                    Ok(c) => c,
                    Err(e) => return Some((Err(e), (body, 0, 0))),
                };
                let drop_now = skip.min(chunk.len() as u64) as usize;
                let _ = chunk.split_to(drop_now);
                skip -= drop_now as u64;
                if chunk.len() as u64 > take {
                    chunk.truncate(take as usize);
                }
                if chunk.is_empty() {
                    continue;
                }
                take -= chunk.len() as u64;
                return Some((Ok(chunk), (body, skip, take)));
            }
            None
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges_parse() {
        assert_eq!(parse_content_range("bytes 0-99/1234"), Some((1234, 0..100)));
        assert_eq!(parse_content_range("bytes 5-5/6"), Some((6, 5..6)));
        assert_eq!(parse_content_range("bytes 5-6/6"), None);
        assert_eq!(parse_content_range("bytes */6"), None);
    }

    #[tokio::test]
    async fn skip_and_take_cut_across_chunks() {
        let chunks = ["abc", "defg", "hi"].map(|s| Ok(Bytes::from_static(s.as_bytes())));
        let out: Vec<Bytes> = skip_and_take(futures::stream::iter(chunks), 2, 5)
            .map(|r| r.unwrap())
            .collect()
            .await;
        assert_eq!(out.concat(), b"cdefg");
    }
}
