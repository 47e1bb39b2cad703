//! Sealed bookmarks of shared views.
//!
//! A records bookmark carries the last row's sort values in clear (signed,
//! not encrypted: `filter_lang::bookmark`). A view may sort by a field it
//! hides, so handing that bookmark to an anonymous reader would show the
//! hidden values. The share read therefore seals it: `base64url(nonce ‖
//! bookmark XOR keystream)`, the keystream being HMAC-SHA256 blocks of
//! `nonce ‖ counter` under a key derived from the cluster secret (a PRF in
//! counter mode). Integrity comes from the inner bookmark's own tag: a
//! tampered sealed bookmark opens to text whose tag fails, a 400.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use crate::error::{ApiError, ApiResult};

type HmacSha256 = Hmac<Sha256>;

const KEY_LABEL: &[u8] = b"tabula/share-bookmark-key/v1";
const NONCE_LEN: usize = 16;
/// Longest sealed bookmark accepted, in characters.
const MAX_SEALED_LEN: usize = 96 * 1024;

/// The sealing key: the same on every node that has the same cluster secret.
#[derive(Clone)]
pub struct SealKey([u8; 32]);

impl SealKey {
    pub fn derive(cluster_secret: &[u8]) -> SealKey {
        let mut mac =
            HmacSha256::new_from_slice(cluster_secret).expect("HMAC takes keys of any length");
        mac.update(KEY_LABEL);
        SealKey(mac.finalize().into_bytes().into())
    }

    fn apply(&self, nonce: &[u8], data: &mut [u8]) {
        for (counter, chunk) in data.chunks_mut(32).enumerate() {
            let mut mac =
                HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
            mac.update(nonce);
            mac.update(&(counter as u64).to_be_bytes());
            let block = mac.finalize().into_bytes();
            for (b, k) in chunk.iter_mut().zip(block.iter()) {
                *b ^= k;
            }
        }
    }

    pub fn seal(&self, bookmark: &str) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let mut data = bookmark.as_bytes().to_vec();
        self.apply(&nonce, &mut data);
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// The bookmark inside; 400 for text this did not seal (a tampered one
    /// opens to a bookmark the records listing refuses).
    pub fn open(&self, sealed: &str) -> ApiResult<String> {
        let invalid = || ApiError::bad_request("bookmark: The bookmark is not valid.");
        if sealed.len() > MAX_SEALED_LEN {
            return Err(invalid());
        }
        let bytes = URL_SAFE_NO_PAD.decode(sealed).map_err(|_| invalid())?;
        if bytes.len() <= NONCE_LEN {
            return Err(invalid());
        }
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let mut data = data.to_vec();
        self.apply(nonce, &mut data);
        String::from_utf8(data).map_err(|_| invalid())
    }
}

/// Replaces the bookmark at the head of a records page
/// (`{"bookmark":"...",...}`, `records::page::write`) by `f` of it.
pub fn replace_head_bookmark(page: Vec<u8>, f: impl FnOnce(&str) -> String) -> Vec<u8> {
    const HEAD: &[u8] = b"{\"bookmark\":\"";
    if !page.starts_with(HEAD) {
        return page;
    }
    let rest = &page[HEAD.len()..];
    // A bookmark is base64url: no escapes, so the next quote ends it.
    let Some(end) = rest.iter().position(|&b| b == b'"') else {
        return page;
    };
    let Ok(inner) = std::str::from_utf8(&rest[..end]) else {
        return page;
    };
    let mut out = HEAD.to_vec();
    out.extend_from_slice(f(inner).as_bytes());
    out.extend_from_slice(&rest[end..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_and_opens_and_hides_the_values() {
        let key = SealKey::derive(b"secret");
        let inner = "WzIsWyJodXNoLWMiXSwicmVjX0FBQUFBMTIzNDU2NyJd";
        let sealed = key.seal(inner);
        assert_ne!(key.seal(inner), sealed, "a fresh nonce each time");
        assert!(!sealed.contains(inner));
        assert_eq!(key.open(&sealed).unwrap(), inner);
        assert!(SealKey::derive(b"other")
            .open(&sealed)
            .map_or(true, |s| s != inner));
        assert!(key.open("!!").is_err());
        assert!(key.open("AAAA").is_err());
    }

    #[test]
    fn replaces_only_a_leading_bookmark() {
        let page = br#"{"bookmark":"abc","field_ids":{},"records":[]}"#.to_vec();
        let out = replace_head_bookmark(page, |b| format!("<{b}>"));
        assert_eq!(out, br#"{"bookmark":"<abc>","field_ids":{},"records":[]}"#);
        let page = br#"{"field_ids":{},"records":[]}"#.to_vec();
        assert_eq!(replace_head_bookmark(page.clone(), |_| "x".into()), page);
    }
}
