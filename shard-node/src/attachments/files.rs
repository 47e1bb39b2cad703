//! `GET`/`HEAD /api/files/{att_id}/{variant}?expires=..&signature=..`: the
//! signed file route of the local store. No API key: the link's HMAC
//! (`links::Links::verify`) is the credential, so the principal guard lets
//! the prefix through. The bytes are streamed from the store with their
//! content type, a `Content-Disposition` carrying the stored filename
//! safely, and single byte ranges. With the S3 store the route answers a
//! redirect to a fresh presigned link instead.

use std::collections::HashMap;
use std::ops::Range;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use blobstore::disposition::content_disposition;
use blobstore::{BlobError, BlobStore, Variant};
use cluster_protocol::error::ErrorBody;

use super::links::{disposition_for, variant_named, LinkError, Links};
use crate::catalog::attachments::{self as registry, Attachment};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub const MALFORMED_MESSAGE: &str =
    "This file link is malformed: it needs a variant and its expires and signature parameters.";
pub const BAD_SIGNATURE_MESSAGE: &str = "This file link's signature is not valid.";
pub const EXPIRED_MESSAGE: &str =
    "This file link has expired: read the record again for a fresh link.";

/// What the `Range` header asks of a blob of known size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    /// No range, one the route ignores (malformed, another unit), or
    /// several ranges (served whole).
    Whole,
    Part(Range<u64>),
    /// Starts past the end (416).
    Unsatisfiable,
}

/// Resolves a `Range` header (`bytes=a-b`, `bytes=a-`, `bytes=-n`)
/// against a blob of `size` bytes.
pub fn wanted(range: Option<&str>, size: u64) -> Wanted {
    let Some(spec) = range
        .map(str::trim)
        .and_then(|r| r.strip_prefix("bytes="))
        .map(str::trim)
    else {
        return Wanted::Whole;
    };
    if spec.contains(',') {
        return Wanted::Whole;
    }
    let Some((first, last)) = spec.split_once('-') else {
        return Wanted::Whole;
    };
    let number = |s: &str| -> Option<u64> {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match (first.trim().is_empty(), number(first), number(last)) {
        (true, _, Some(n)) => {
            if n == 0 || size == 0 {
                Wanted::Unsatisfiable
            } else {
                Wanted::Part(size - n.min(size)..size)
            }
        }
        (false, Some(a), None) if last.trim().is_empty() => {
            if a >= size {
                Wanted::Unsatisfiable
            } else {
                Wanted::Part(a..size)
            }
        }
        (false, Some(a), Some(b)) if b >= a => {
            if a >= size {
                Wanted::Unsatisfiable
            } else {
                Wanted::Part(a..(b.saturating_add(1)).min(size))
            }
        }
        _ => Wanted::Whole,
    }
}

fn link_error(e: LinkError) -> ApiError {
    match e {
        LinkError::Malformed => ApiError::bad_request(MALFORMED_MESSAGE),
        LinkError::BadSignature => ApiError::Forbidden(BAD_SIGNATURE_MESSAGE),
        LinkError::Expired => ApiError::Forbidden(EXPIRED_MESSAGE),
    }
}

pub async fn handler(
    State(state): State<AppState>,
    method: Method,
    Path((attachment_id, variant)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let now = SystemTime::now();
    let variant = variant_named(&variant).ok_or_else(|| link_error(LinkError::Malformed))?;
    let expires = query.get("expires").map(String::as_str);
    state
        .links
        .verify(
            &attachment_id,
            variant,
            expires,
            query.get("signature").map(String::as_str),
            now,
        )
        .map_err(link_error)?;
    let attachment = lookup(&state, &attachment_id).await?;
    if variant != Variant::Original && !attachment.thumbnails {
        return Err(ApiError::NotFound);
    }
    if !matches!(state.blobs, BlobStore::Local(_)) {
        let to = state.links.link(&attachment, variant, now).await?;
        let location = HeaderValue::from_str(&to).map_err(anyhow::Error::new)?;
        return Ok((
            StatusCode::FOUND,
            [
                (header::LOCATION, location),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
        )
            .into_response());
    }
    let max_age = expires
        .and_then(|e| e.parse::<u64>().ok())
        .map(|e| e.saturating_sub(now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()))
        .unwrap_or(0);
    let range = headers.get(header::RANGE).and_then(|v| v.to_str().ok());
    serve(
        &state,
        &attachment,
        variant,
        range,
        max_age,
        method == Method::HEAD,
    )
    .await
}

/// The registry row (404 when it is gone).
async fn lookup(state: &AppState, attachment_id: &str) -> ApiResult<Attachment> {
    state
        .db
        .measured(DbOp::GetAttachment, async {
            let client = state.db.client().await?;
            Ok(registry::get(&*client, attachment_id).await?)
        })
        .await?
        .ok_or(ApiError::NotFound)
}

/// Streams the bytes (or the range asked for) of `variant` of `a`.
async fn serve(
    state: &AppState,
    a: &Attachment,
    variant: Variant,
    range: Option<&str>,
    max_age: u64,
    head_only: bool,
) -> ApiResult<Response> {
    let key = blobstore::key(&a.database_id, &a.id, variant).map_err(anyhow::Error::new)?;
    let size = match state.blobs.size(&key).await {
        Ok(Some(size)) => size,
        Ok(None) => return Err(ApiError::NotFound),
        Err(e) => return Err(anyhow::Error::new(e).context("stat an attachment").into()),
    };
    let (filename, content_type) = Links::served_as(a, variant);
    let mut response = Response::builder()
        .header(header::CONTENT_TYPE, &content_type)
        .header(
            header::CONTENT_DISPOSITION,
            content_disposition(disposition_for(&content_type), &filename),
        )
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; sandbox",
        )
        .header(header::CACHE_CONTROL, format!("private, max-age={max_age}"));
    let part = match wanted(range, size) {
        Wanted::Unsatisfiable => return Ok(unsatisfiable(size)),
        Wanted::Whole => None,
        Wanted::Part(r) => Some(r),
    };
    let length = part.as_ref().map_or(size, |r| r.end - r.start);
    response = response.header(header::CONTENT_LENGTH, length);
    if let Some(r) = &part {
        response = response.status(StatusCode::PARTIAL_CONTENT).header(
            header::CONTENT_RANGE,
            format!("bytes {}-{}/{size}", r.start, r.end - 1),
        );
    }
    let body = if head_only || length == 0 {
        Body::empty()
    } else {
        match state.blobs.get(&key, part).await {
            Ok(blob) => Body::from_stream(blob.body),
            Err(BlobError::NotFound) => return Err(ApiError::NotFound),
            Err(BlobError::RangeNotSatisfiable { size }) => return Ok(unsatisfiable(size)),
            Err(e) => return Err(anyhow::Error::new(e).context("read an attachment").into()),
        }
    };
    Ok(response.body(body).map_err(anyhow::Error::new)?)
}

/// 416 in the envelope, with the size in `Content-Range`.
fn unsatisfiable(size: u64) -> Response {
    let body = ErrorBody::bad_request(format!(
        "The requested range starts past the end of the file ({size} bytes)."
    ));
    (
        StatusCode::RANGE_NOT_SATISFIABLE,
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::CONTENT_RANGE, format!("bytes */{size}")),
        ],
        body.to_json(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_ranges_resolve_like_http() {
        let w = |r: &str, size| wanted(Some(r), size);
        assert_eq!(wanted(None, 10), Wanted::Whole);
        assert_eq!(w("bytes=0-3", 10), Wanted::Part(0..4));
        assert_eq!(w("bytes=2-", 10), Wanted::Part(2..10));
        assert_eq!(w("bytes=-3", 10), Wanted::Part(7..10));
        assert_eq!(w("bytes=-30", 10), Wanted::Part(0..10));
        assert_eq!(w("bytes=5-100", 10), Wanted::Part(5..10));
        assert_eq!(w("bytes=10-", 10), Wanted::Unsatisfiable);
        assert_eq!(w("bytes=10-12", 10), Wanted::Unsatisfiable);
        assert_eq!(w("bytes=-0", 10), Wanted::Unsatisfiable);
        assert_eq!(w("bytes=0-0", 0), Wanted::Unsatisfiable);
    }

    #[test]
    fn other_ranges_serve_the_whole_file() {
        let w = |r: &str| wanted(Some(r), 10);
        assert_eq!(w("bytes=0-1,4-5"), Wanted::Whole);
        assert_eq!(w("items=0-1"), Wanted::Whole);
        assert_eq!(w("bytes=5-2"), Wanted::Whole);
        assert_eq!(w("bytes=a-b"), Wanted::Whole);
        assert_eq!(w("bytes=-"), Wanted::Whole);
        assert_eq!(w("bytes=+1-2"), Wanted::Whole);
    }
}
