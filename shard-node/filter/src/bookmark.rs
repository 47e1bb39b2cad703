//! The bookmark codec. A bookmark is opaque to clients: base64url (no
//! padding) of a compact JSON array
//!
//! ```text
//! [1, order, [value | null, ...], id]
//! ```
//!
//! `1` is the format version, `order` the caller's fingerprint of where the
//! ordering came from, one text value (or null for an empty cell) per sort
//! term as [`crate::SortPlan::bookmark_columns`] renders it, and the last
//! row's record id. The number of terms is the length of the value list.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::Value;

use crate::error::Error;

/// Longest bookmark accepted, in characters.
pub const MAX_BOOKMARK_LEN: usize = 64 * 1024;
const VERSION: u64 = 1;

/// A decoded bookmark: where a page ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bookmark {
    /// Fingerprint of the ordering's source, compared verbatim on resume.
    /// Convention: `view:<viw_ id>` while a view's ordering is in effect,
    /// empty when the request's own `sort` (or none) orders the list. An
    /// explicit sort is not fingerprinted: a different sort with the same
    /// number of terms is not detected (Part B).
    pub order: String,
    /// The last row's sort key values, one per term, NULL as None.
    pub values: Vec<Option<String>>,
    /// The last row's record id.
    pub id: String,
}

fn invalid() -> Error {
    Error::new("bookmark", "The bookmark is not valid.")
}

impl Bookmark {
    pub fn encode(&self) -> String {
        let values: Vec<Value> = self
            .values
            .iter()
            .map(|v| v.clone().map_or(Value::Null, Value::String))
            .collect();
        let json = Value::Array(vec![
            Value::from(VERSION),
            Value::String(self.order.clone()),
            Value::Array(values),
            Value::String(self.id.clone()),
        ]);
        URL_SAFE_NO_PAD.encode(json.to_string())
    }

    /// Decode a client's bookmark; anything this codec did not produce is a
    /// 400 (`The bookmark is not valid.`).
    pub fn decode(text: &str) -> Result<Bookmark, Error> {
        if text.is_empty() || text.len() > MAX_BOOKMARK_LEN {
            return Err(invalid());
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
        let json: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        let Value::Array(parts) = json else {
            return Err(invalid());
        };
        let [version, Value::String(order), Value::Array(values), Value::String(id)] =
            parts.as_slice()
        else {
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
            order: order.clone(),
            values,
            id: id.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let b = Bookmark {
            order: "view:viw_abc".into(),
            values: vec![Some("x\"y".into()), None, Some("".into())],
            id: "rec_000000000001".into(),
        };
        let s = b.encode();
        assert!(s
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert_eq!(Bookmark::decode(&s).unwrap(), b);
    }

    #[test]
    fn refusals() {
        let enc = |s: &str| URL_SAFE_NO_PAD.encode(s);
        for bad in [
            String::new(),
            "!!!".into(),
            "a".into(),
            enc("{}"),
            enc("[1,\"\",[],\"\"]"),
            enc("[2,\"\",[],\"rec_1\"]"),
            enc("[1,\"\",[1],\"rec_1\"]"),
            enc("[1,\"\",[],\"rec_1\",5]"),
            enc("[1,null,[],\"rec_1\"]"),
            "A".repeat(MAX_BOOKMARK_LEN + 1),
        ] {
            let e = Bookmark::decode(&bad).unwrap_err();
            assert_eq!(e.path, "bookmark");
        }
    }
}
