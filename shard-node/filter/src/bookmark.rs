//! The bookmark codec. A bookmark is opaque to clients and signed by the
//! server: base64url (no padding) of
//!
//! ```text
//! payload ‖ tag        payload = compact JSON [2, [value | null, ...], id]
//!                      tag     = HMAC-SHA256(key, LABEL ‖ len(order) ‖ order ‖ payload)[..16]
//! ```
//!
//! `2` is the format version, one text value (or null for an empty cell)
//! per sort term as [`crate::SortPlan::bookmark_columns`] renders it, and
//! the last row's record id. `order` is the caller's fingerprint of
//! everything the bookmark is only valid under (table, view, sort terms,
//! filter, search: see [`fingerprint`]); it is not carried, only signed, so
//! a bookmark stays short and resuming under anything else fails the tag
//! check exactly like a forged or tampered bookmark: 400, "stale or
//! mismatched bookmark". The key ([`BookmarkKey`]) is derived from the
//! cluster secret, so every shard node accepts every other's bookmarks and
//! a database move does not invalidate them. Without the tag a client
//! could send thousands of values and make the keyset SQL grow
//! quadratically; a signed bookmark only ever carries what a page wrote.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::error::Error;

/// Longest bookmark accepted, in characters.
pub const MAX_BOOKMARK_LEN: usize = 64 * 1024;
/// Bytes of the HMAC-SHA256 tag kept (128 bits).
pub const TAG_LEN: usize = 16;
const VERSION: u64 = 2;
/// Domain separation of the key derivation: the cluster secret also keys
/// signed principals, and a bookmark tag must never be one.
const KEY_LABEL: &[u8] = b"filter-lang/bookmark-key/v2";
/// Domain separation of the tag input.
const TAG_LABEL: &[u8] = b"filter-lang/bookmark/v2";

type HmacSha256 = Hmac<Sha256>;

/// The server key bookmarks are signed with.
#[derive(Clone)]
pub struct BookmarkKey([u8; 32]);

impl std::fmt::Debug for BookmarkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BookmarkKey(***)")
    }
}

impl BookmarkKey {
    /// `HMAC-SHA256(secret, KEY_LABEL)`: the same on every node that has
    /// the same cluster secret.
    pub fn derive(secret: &[u8]) -> BookmarkKey {
        let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length");
        mac.update(KEY_LABEL);
        BookmarkKey(mac.finalize().into_bytes().into())
    }

    fn mac(&self, order: &str, payload: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(TAG_LABEL);
        mac.update(&(order.len() as u64).to_be_bytes());
        mac.update(order.as_bytes());
        mac.update(payload);
        mac
    }
}

/// An unambiguous fingerprint of the parts a bookmark is valid under
/// (each part length-prefixed, so no two lists of parts collide).
pub fn fingerprint(parts: &[&str]) -> String {
    let mut out = String::new();
    for p in parts {
        out.push_str(&p.len().to_string());
        out.push(':');
        out.push_str(p);
        out.push(';');
    }
    out
}

/// A decoded bookmark: where a page ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bookmark {
    /// Fingerprint of what the bookmark is valid under (signed, not
    /// carried): [`Bookmark::decode`] sets it to the order it verified.
    pub order: String,
    /// The last row's sort key values, one per term, NULL as None.
    pub values: Vec<Option<String>>,
    /// The last row's record id.
    pub id: String,
}

fn invalid() -> Error {
    Error::new("bookmark", "The bookmark is not valid.")
}

/// The refusal of a bookmark whose tag does not verify: forged, tampered,
/// signed under another key, or made for another sort, filter or view.
pub fn mismatched() -> Error {
    Error::new(
        "bookmark",
        "The bookmark is stale or does not match this request's sort, filter, search or view; start again without it.",
    )
}

impl Bookmark {
    /// The signed text of this bookmark, valid only under `self.order`.
    pub fn encode(&self, key: &BookmarkKey) -> String {
        let values: Vec<Value> = self
            .values
            .iter()
            .map(|v| v.clone().map_or(Value::Null, Value::String))
            .collect();
        let json = Value::Array(vec![
            Value::from(VERSION),
            Value::Array(values),
            Value::String(self.id.clone()),
        ]);
        let mut bytes = json.to_string().into_bytes();
        let tag = key.mac(&self.order, &bytes).finalize().into_bytes();
        bytes.extend_from_slice(&tag[..TAG_LEN]);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// Decode a client's bookmark for a request whose fingerprint is
    /// `order`. Text this codec did not produce is 400 `The bookmark is
    /// not valid.`; a bookmark whose tag does not verify under `key` and
    /// `order` is 400 [`mismatched`]. The values are parsed only after the
    /// tag verifies.
    pub fn decode(text: &str, key: &BookmarkKey, order: &str) -> Result<Bookmark, Error> {
        if text.is_empty() || text.len() > MAX_BOOKMARK_LEN {
            return Err(invalid());
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
        if bytes.len() <= TAG_LEN {
            return Err(invalid());
        }
        let (payload, tag) = bytes.split_at(bytes.len() - TAG_LEN);
        key.mac(order, payload)
            .verify_truncated_left(tag)
            .map_err(|_| mismatched())?;
        let json: Value = serde_json::from_slice(payload).map_err(|_| invalid())?;
        let Value::Array(parts) = json else {
            return Err(invalid());
        };
        let [version, Value::Array(values), Value::String(id)] = parts.as_slice() else {
            return Err(invalid());
        };
        if version.as_u64() != Some(VERSION) || id.is_empty() || id.len() > 64 || id.contains('\0')
        {
            return Err(invalid());
        }
        let values = values
            .iter()
            .map(|v| match v {
                Value::Null => Ok(None),
                Value::String(s) => Ok(Some(s.clone())),
                _ => Err(invalid()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Bookmark {
            order: order.to_owned(),
            values,
            id: id.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> BookmarkKey {
        BookmarkKey::derive(b"cluster secret")
    }

    fn sample() -> Bookmark {
        Bookmark {
            order: "view:viw_abc".into(),
            values: vec![Some("x\"y".into()), None, Some("".into())],
            id: "rec_000000000001".into(),
        }
    }

    #[test]
    fn round_trip() {
        let b = sample();
        let s = b.encode(&key());
        assert!(s
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert_eq!(Bookmark::decode(&s, &key(), &b.order).unwrap(), b);
        // Another node with the same cluster secret derives the same key.
        let again = BookmarkKey::derive(b"cluster secret");
        assert_eq!(Bookmark::decode(&s, &again, &b.order).unwrap(), b);
    }

    #[test]
    fn another_order_or_key_is_mismatched() {
        let b = sample();
        let s = b.encode(&key());
        for (k, order) in [
            (key(), "view:viw_abd"),
            (key(), ""),
            (BookmarkKey::derive(b"another secret"), "view:viw_abc"),
        ] {
            assert_eq!(Bookmark::decode(&s, &k, order).unwrap_err(), mismatched());
        }
    }

    #[test]
    fn tampered_bytes_are_refused() {
        let b = sample();
        let raw = URL_SAFE_NO_PAD.decode(b.encode(&key())).unwrap();
        for i in 0..raw.len() {
            let mut t = raw.clone();
            t[i] ^= 0x01;
            let text = URL_SAFE_NO_PAD.encode(&t);
            assert!(
                Bookmark::decode(&text, &key(), &b.order).is_err(),
                "byte {i}"
            );
        }
    }

    #[test]
    fn forged_and_unsigned_bookmarks_are_refused() {
        let enc = |s: &str| URL_SAFE_NO_PAD.encode(s);
        let forged_values = format!(
            "[2,[{}],\"rec_000000000001\"]",
            vec!["\"a\""; 5000].join(",")
        );
        for bad in [
            // Version 1 (unsigned) bookmarks of the earlier codec.
            enc("[1,\"\",[],\"rec_000000000001\"]"),
            enc("[2,[],\"rec_000000000001\"]"),
            enc(&forged_values),
            enc(&format!("{forged_values}0123456789abcdef")),
        ] {
            let e = Bookmark::decode(&bad, &key(), "").unwrap_err();
            assert_eq!(e, mismatched());
        }
        for bad in [
            String::new(),
            "!!!".into(),
            "a".into(),
            enc("short"),
            "A".repeat(MAX_BOOKMARK_LEN + 1),
        ] {
            let e = Bookmark::decode(&bad, &key(), "").unwrap_err();
            assert_eq!(e.path, "bookmark");
        }
    }

    #[test]
    fn signed_but_malformed_payloads_are_invalid() {
        // Only this codec signs, so these cannot reach a client; they still
        // must not decode.
        let k = key();
        let sign = |payload: &str| {
            let mut bytes = payload.as_bytes().to_vec();
            let tag = k.mac("", &bytes).finalize().into_bytes();
            bytes.extend_from_slice(&tag[..TAG_LEN]);
            URL_SAFE_NO_PAD.encode(bytes)
        };
        for bad in [
            "{}",
            "[2,[],\"\"]",
            "[3,[],\"rec_1\"]",
            "[2,[1],\"rec_1\"]",
            "[2,[],\"rec_1\",5]",
            "not json",
        ] {
            assert_eq!(Bookmark::decode(&sign(bad), &k, "").unwrap_err(), invalid());
        }
        assert!(Bookmark::decode(&sign("[2,[null,\"x\"],\"rec_1\"]"), &k, "").is_ok());
    }

    #[test]
    fn fingerprints_do_not_collide_across_part_boundaries() {
        assert_ne!(fingerprint(&["a", "bc"]), fingerprint(&["ab", "c"]));
        assert_ne!(fingerprint(&["a;", ""]), fingerprint(&["a", ";"]));
        assert_eq!(fingerprint(&["x", "y"]), fingerprint(&["x", "y"]));
    }
}
