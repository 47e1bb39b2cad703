//! Signed attachment links (`url`, `thumb_url`, `card_url`): valid
//! [`LINK_LIFETIME`] from signing, and signed at the start of the current
//! [`LINK_REUSE`] window, so the same link is handed out for 15 minutes
//! (the spec's signature cache) and always has at least 45 minutes left.
//!
//! * Local store: `{PUBLIC_URL}/api/files/{att}/{variant}?expires=E&signature=S`,
//!   served by the cluster itself (`GET /api/files/...`, no API key: the
//!   HMAC in the link is the credential). The key is derived from the
//!   cluster secret, so every node signs and verifies the same links.
//! * S3: a presigned GET of the blob, carrying the content type and the
//!   stored filename as response overrides.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use blobstore::disposition::{content_disposition, Disposition};
use blobstore::{BlobStore, LinkOptions, Variant};
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::limits::{LINK_LIFETIME, LINK_REUSE};
use crate::catalog::attachments::Attachment;

/// Path prefix of the signed file route.
pub const FILES_PATH: &str = "/api/files/";

/// The three links of an attachment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signed {
    pub url: String,
    pub thumb_url: String,
    pub card_url: String,
}

/// Why a link was refused (each a clear 4xx at the route).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkError {
    /// No such variant, or `expires`/`signature` missing or malformed.
    Malformed,
    /// The signature does not match what this cluster signed.
    BadSignature,
    /// Signed for a time that has passed.
    Expired,
}

/// Signs links; cheap to clone.
#[derive(Clone)]
pub struct Links {
    key: [u8; 32],
    /// `PUBLIC_URL` without a trailing slash.
    public_url: String,
    store: BlobStore,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Links")
            .field("public_url", &self.public_url)
            .finish_non_exhaustive()
    }
}

/// How a browser should treat the file: raster images inline, everything
/// else (HTML, SVG, scripts...) as a download, so a stored file can never
/// run as a page of the API's origin.
pub fn disposition_for(content_type: &str) -> Disposition {
    let ct = content_type.to_ascii_lowercase();
    let inline = [
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        "image/bmp",
    ]
    .iter()
    .any(|t| ct == *t)
        || ct == "application/pdf"
        || ct.starts_with("video/")
        || ct.starts_with("audio/");
    if inline {
        Disposition::Inline
    } else {
        Disposition::Attachment
    }
}

/// The variant a path segment names.
pub fn variant_named(name: &str) -> Option<Variant> {
    Variant::ALL.into_iter().find(|v| v.as_str() == name)
}

/// `name` with `.webp` in place of its extension (a derivative's filename).
fn webp_name(filename: &str) -> String {
    let stem = match filename.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => filename,
    };
    format!("{stem}.webp")
}

/// The start of the reuse window `now` falls in.
fn window_start(now: SystemTime) -> SystemTime {
    let secs = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let reuse = LINK_REUSE.as_secs();
    UNIX_EPOCH + Duration::from_secs(secs - secs % reuse)
}

impl Links {
    /// `PUBLIC_URL` without a trailing slash: where clients reach the cluster.
    pub fn public_url(&self) -> &str {
        &self.public_url
    }

    pub fn new(cluster_secret: &[u8], public_url: &str, store: BlobStore) -> Self {
        let mut mac = Hmac::<Sha256>::new_from_slice(cluster_secret).expect("any key length");
        mac.update(b"tabula attachment links v1");
        Self {
            key: mac.finalize().into_bytes().into(),
            public_url: public_url.trim_end_matches('/').to_owned(),
            store,
        }
    }

    fn signature(&self, attachment_id: &str, variant: Variant, expires: u64) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length");
        mac.update(format!("{attachment_id}\n{}\n{expires}", variant.as_str()).as_bytes());
        hex::encode(&mac.finalize().into_bytes()[..16])
    }

    /// The local store's link to `variant` of `attachment_id`, signed at
    /// `signed_at`.
    pub fn local_link(
        &self,
        attachment_id: &str,
        variant: Variant,
        signed_at: SystemTime,
    ) -> String {
        let expires = (signed_at + LINK_LIFETIME)
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let signature = self.signature(attachment_id, variant, expires);
        format!(
            "{}{FILES_PATH}{attachment_id}/{}?expires={expires}&signature={signature}",
            self.public_url,
            variant.as_str()
        )
    }

    /// Checks a local link's `expires` and `signature` at `now`.
    pub fn verify(
        &self,
        attachment_id: &str,
        variant: Variant,
        expires: Option<&str>,
        signature: Option<&str>,
        now: SystemTime,
    ) -> Result<(), LinkError> {
        let expires: u64 = expires
            .and_then(|e| e.parse().ok())
            .ok_or(LinkError::Malformed)?;
        let given = signature.ok_or(LinkError::Malformed)?;
        let expected = self.signature(attachment_id, variant, expires);
        if given.len() != expected.len() || !bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
        {
            return Err(LinkError::BadSignature);
        }
        let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        if now >= expires {
            return Err(LinkError::Expired);
        }
        Ok(())
    }

    /// One link to `variant` of `a`, signed for the current window.
    pub async fn link(
        &self,
        a: &Attachment,
        variant: Variant,
        now: SystemTime,
    ) -> anyhow::Result<String> {
        let signed_at = window_start(now);
        match &self.store {
            BlobStore::Local(_) => Ok(self.local_link(&a.id, variant, signed_at)),
            store => {
                let key = blobstore::key(&a.database_id, &a.id, variant)?;
                let (content_type, filename) = match variant {
                    Variant::Original => (a.content_type.clone(), a.filename.clone()),
                    _ => ("image/webp".to_owned(), webp_name(&a.filename)),
                };
                let options = LinkOptions {
                    signed_at,
                    expires_in: LINK_LIFETIME,
                    content_disposition: Some(content_disposition(
                        disposition_for(&content_type),
                        &filename,
                    )),
                    content_type: Some(content_type),
                };
                let url = store.presigned_get(&key, &options).await?;
                url.ok_or_else(|| anyhow::anyhow!("the blob store signs no links"))
            }
        }
    }

    /// The three links of `a` as of `now`: the derivatives when it has
    /// them, else the original's link three times.
    pub async fn sign(&self, a: &Attachment, now: SystemTime) -> anyhow::Result<Signed> {
        let url = self.link(a, Variant::Original, now).await?;
        if !a.thumbnails {
            return Ok(Signed {
                thumb_url: url.clone(),
                card_url: url.clone(),
                url,
            });
        }
        Ok(Signed {
            thumb_url: self.link(a, Variant::Thumb256, now).await?,
            card_url: self.link(a, Variant::Card1024, now).await?,
            url,
        })
    }

    /// The filename and content type `variant` of `a` is served under.
    pub fn served_as(a: &Attachment, variant: Variant) -> (String, String) {
        match variant {
            Variant::Original => (a.filename.clone(), a.content_type.clone()),
            _ => (webp_name(&a.filename), "image/webp".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links() -> Links {
        let dir = std::env::temp_dir().join("tabula-links-test");
        let store = BlobStore::open(&blobstore::Settings::local(dir)).unwrap();
        Links::new(b"secret", "http://127.0.0.1:8080/", store)
    }

    fn query(link: &str, name: &str) -> Option<String> {
        let url = url::Url::parse(link).unwrap();
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }

    #[test]
    fn a_link_verifies_until_it_expires() {
        let l = links();
        let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let link = l.local_link("att_AAAAAbcdefgh", Variant::Original, t0);
        assert!(link.starts_with("http://127.0.0.1:8080/api/files/att_AAAAAbcdefgh/original?"));
        let e = query(&link, "expires");
        let s = query(&link, "signature");
        let at = |secs| t0 + Duration::from_secs(secs);
        let check = |v, now| l.verify("att_AAAAAbcdefgh", v, e.as_deref(), s.as_deref(), now);
        assert_eq!(check(Variant::Original, at(3599)), Ok(()));
        assert_eq!(check(Variant::Original, at(3600)), Err(LinkError::Expired));
        assert_eq!(
            check(Variant::Thumb256, at(1)),
            Err(LinkError::BadSignature)
        );
        let other = l.verify(
            "att_AAAAAbcdefgi",
            Variant::Original,
            e.as_deref(),
            s.as_deref(),
            at(1),
        );
        assert_eq!(other, Err(LinkError::BadSignature));
        let later = e
            .as_deref()
            .map(|e| (e.parse::<u64>().unwrap() + 1).to_string());
        let moved = l.verify(
            "att_AAAAAbcdefgh",
            Variant::Original,
            later.as_deref(),
            s.as_deref(),
            at(1),
        );
        assert_eq!(moved, Err(LinkError::BadSignature));
        let missing = l.verify(
            "att_AAAAAbcdefgh",
            Variant::Original,
            None,
            s.as_deref(),
            at(1),
        );
        assert_eq!(missing, Err(LinkError::Malformed));
    }

    #[test]
    fn links_are_reused_within_a_window_and_keep_45_minutes() {
        let start = UNIX_EPOCH + Duration::from_secs(900 * 2_000_000); // a window boundary
        assert_eq!(window_start(start + Duration::from_secs(899)), start);
        assert_eq!(
            window_start(start + Duration::from_secs(900)),
            start + Duration::from_secs(900)
        );
        let last_handed_out = start + Duration::from_secs(899);
        let left = (start + LINK_LIFETIME)
            .duration_since(last_handed_out)
            .unwrap();
        assert!(left >= Duration::from_secs(45 * 60));
    }

    #[test]
    fn only_raster_images_and_media_are_shown_inline() {
        assert_eq!(disposition_for("image/png"), Disposition::Inline);
        assert_eq!(disposition_for("image/svg+xml"), Disposition::Attachment);
        assert_eq!(disposition_for("text/html"), Disposition::Attachment);
        assert_eq!(webp_name("photo.large.jpg"), "photo.large.webp");
        assert_eq!(webp_name("README"), "README.webp");
    }
}
