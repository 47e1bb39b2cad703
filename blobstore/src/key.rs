//! Blob keys: `<database_id>/<attachment_id>/<variant>`, made by [`key`]
//! alone.
//!
//! A key names the database and the attachment, never a shard, so a
//! database move leaves every key (and every byte) where it is. Both ids
//! must be well formed (`db_` and `att_` plus 12 characters of
//! `[0-9A-Za-z]`), so a key can hold no `/`, `.` or `..` of a caller's
//! making and cannot escape a local store's root.

use std::fmt;

use cluster_protocol::ids::{self, Kind};

use crate::BlobError;

/// Which bytes of an attachment a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The uploaded file, untouched.
    Original,
    /// WebP, longest edge 256 px (`thumb_url`).
    Thumb256,
    /// WebP, longest edge 1024 px (`card_url`).
    Card1024,
}

impl Variant {
    /// Every variant, for deleting an attachment's bytes whole.
    pub const ALL: [Variant; 3] = [Variant::Original, Variant::Thumb256, Variant::Card1024];

    /// The last segment of the key.
    pub const fn as_str(self) -> &'static str {
        match self {
            Variant::Original => "original",
            Variant::Thumb256 => "thumb-256",
            Variant::Card1024 => "card-1024",
        }
    }
}

/// A validated key; build it with [`key`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BlobKey(String);

impl BlobKey {
    /// The key as the stores write it (`/`-separated).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key's segments: database id, attachment id, variant.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }
}

impl fmt::Display for BlobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The key of `variant` of attachment `attachment_id` in database
/// `database_id`; refuses ids that are not well formed.
pub fn key(database_id: &str, attachment_id: &str, variant: Variant) -> Result<BlobKey, BlobError> {
    if !ids::is_valid(Kind::Database, database_id) {
        return Err(BlobError::InvalidKey(format!(
            "{database_id:?} is not a database id"
        )));
    }
    if !ids::is_valid(Kind::Attachment, attachment_id) {
        return Err(BlobError::InvalidKey(format!(
            "{attachment_id:?} is not an attachment id"
        )));
    }
    Ok(BlobKey(format!(
        "{database_id}/{attachment_id}/{}",
        variant.as_str()
    )))
}

/// Whether `segment` is safe as one path component: non-empty, only
/// `[0-9A-Za-z_-]`. The local store checks every segment again with it
/// before touching the file system.
pub fn is_safe_segment(segment: &str) -> bool {
    !segment.is_empty()
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    const DB: &str = "db_Ab3dZ1234567";
    const ATT: &str = "att_Ab3dZ7654321";

    #[test]
    fn keys_are_database_attachment_variant() {
        let k = key(DB, ATT, Variant::Original).unwrap();
        assert_eq!(k.as_str(), "db_Ab3dZ1234567/att_Ab3dZ7654321/original");
        assert_eq!(
            key(DB, ATT, Variant::Thumb256).unwrap().as_str(),
            "db_Ab3dZ1234567/att_Ab3dZ7654321/thumb-256"
        );
        assert!(k.segments().all(is_safe_segment));
        assert!(Variant::ALL.iter().all(|v| is_safe_segment(v.as_str())));
    }

    #[test]
    fn ids_that_could_escape_or_collide_are_refused() {
        for bad in [
            "",
            "..",
            "db_../../etc",
            "db_Ab3dZ123456/",
            "db_Ab3dZ12345/7",
            "db_Ab3dZ12345.7",
            "db_Ab3dZ123456\0",
            "att_Ab3dZ1234567",
            "db_Ab3dZ12345678",
            "db_Ab3dZ12345é",
        ] {
            assert!(
                matches!(
                    key(bad, ATT, Variant::Original),
                    Err(BlobError::InvalidKey(_))
                ),
                "{bad:?}"
            );
        }
        for bad in ["", "att_..", "att_Ab3dZ/54321", DB] {
            assert!(
                matches!(
                    key(DB, bad, Variant::Original),
                    Err(BlobError::InvalidKey(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn safe_segments_are_plain_words() {
        assert!(is_safe_segment("db_x-1"));
        for bad in ["", ".", "..", ".tmp", "a/b", "a\\b", "a b", "é"] {
            assert!(!is_safe_segment(bad), "{bad:?}");
        }
    }
}
