//! Ids: `prefix + 12 characters` from `[0-9A-Za-z]`.
//!
//! Ids of things inside a database carry the database's 5-character routing
//! tag first, then 7 random characters. `usr_` and `key_` ids are 12 random
//! characters. Tags come from a counter passed through a fixed bijection of
//! the 62^5 space, so they look random and never repeat.

use rand::Rng;

pub const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
pub const ID_BODY_LEN: usize = 12;
pub const TAG_LEN: usize = 5;
/// 62^5: the number of distinct routing tags.
pub const TAG_SPACE: u64 = 916_132_832;
// Affine bijection of Z/TAG_SPACE: MULTIPLIER is coprime with 2 and 31.
const TAG_MULTIPLIER: u64 = 387_420_489;
const TAG_OFFSET: u64 = 123_456_789;

/// Kinds of id and their prefixes (part A).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Database,
    Table,
    Field,
    View,
    Record,
    Attachment,
    Webhook,
    Delivery,
    /// A comment on a record.
    Comment,
    /// A share link of a view.
    ShareLink,
    Key,
    User,
    /// A database move (control plane only).
    Move,
    /// A point-in-time restore of one database (control plane only).
    Restore,
}

impl Kind {
    /// The kinds whose ids carry a database's routing tag.
    pub const TAGGED: [Kind; 10] = [
        Kind::Database,
        Kind::Table,
        Kind::Field,
        Kind::View,
        Kind::Record,
        Kind::Attachment,
        Kind::Webhook,
        Kind::Delivery,
        Kind::Comment,
        Kind::ShareLink,
    ];

    pub const fn prefix(self) -> &'static str {
        match self {
            Kind::Database => "db_",
            Kind::Table => "tbl_",
            Kind::Field => "fld_",
            Kind::View => "viw_",
            Kind::Record => "rec_",
            Kind::Attachment => "att_",
            Kind::Webhook => "whk_",
            Kind::Delivery => "dlv_",
            Kind::Comment => "cmt_",
            Kind::ShareLink => "shl_",
            Kind::Key => "key_",
            Kind::User => "usr_",
            Kind::Move => "mov_",
            Kind::Restore => "rst_",
        }
    }

    /// Whether ids of this kind live inside a database and carry its tag.
    pub const fn is_tagged(self) -> bool {
        !matches!(self, Kind::Key | Kind::User | Kind::Move | Kind::Restore)
    }
}

fn random_chars(n: usize) -> String {
    let mut rng = rand::thread_rng();
    (0..n)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect()
}

/// A fresh untagged id (`usr_`, `key_`).
pub fn new_untagged(kind: Kind) -> String {
    format!("{}{}", kind.prefix(), random_chars(ID_BODY_LEN))
}

/// A fresh id for something inside the database whose tag is `tag`.
pub fn new_tagged(kind: Kind, tag: &str) -> String {
    debug_assert_eq!(tag.len(), TAG_LEN);
    format!(
        "{}{}{}",
        kind.prefix(),
        tag,
        random_chars(ID_BODY_LEN - TAG_LEN)
    )
}

/// A random string of the id alphabet (select choice ids, secrets).
pub fn random_token(len: usize) -> String {
    random_chars(len)
}

/// Prefix of a share-link token.
pub const SHARE_TOKEN_PREFIX: &str = "shr";
/// Random characters after the tag in a share-link token: 24 of 62 is
/// 142 bits, above the 128 a guess has to beat.
pub const SHARE_TOKEN_RANDOM_LEN: usize = 24;

/// A fresh share-link token of the database whose tag is `tag`:
/// `shr` + tag + [`SHARE_TOKEN_RANDOM_LEN`] characters drawn from the
/// operating system's RNG (unbiased: `gen_range` rejects out-of-range draws).
pub fn new_share_token(tag: &str) -> String {
    use rand::rngs::OsRng;
    debug_assert_eq!(tag.len(), TAG_LEN);
    let random: String = (0..SHARE_TOKEN_RANDOM_LEN)
        .map(|_| ALPHABET[OsRng.gen_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{SHARE_TOKEN_PREFIX}{tag}{random}")
}

/// The routing tag inside a well-formed share-link token.
pub fn share_token_tag(token: &str) -> Option<&str> {
    let body = token.strip_prefix(SHARE_TOKEN_PREFIX)?;
    if body.len() != TAG_LEN + SHARE_TOKEN_RANDOM_LEN || !body.bytes().all(is_id_char) {
        return None;
    }
    Some(&body[..TAG_LEN])
}

/// `path` as logs and trace spans may show it: the token of a share read
/// (`/api/share/{token}/...`, a credential) cut to its prefix and tag.
pub fn loggable_path(path: &str) -> std::borrow::Cow<'_, str> {
    let Some(rest) = path.strip_prefix("/api/share/") else {
        return path.into();
    };
    let (token, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let kept: String = token
        .chars()
        .take(SHARE_TOKEN_PREFIX.len() + TAG_LEN)
        .collect();
    let slash = if rest.contains('/') { "/" } else { "" };
    format!("/api/share/{kept}...{slash}{tail}").into()
}

fn is_id_char(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// The routing tag inside a tagged id of the given kind, if the id is well formed.
pub fn tag_of(kind: Kind, id: &str) -> Option<&str> {
    let body = id.strip_prefix(kind.prefix())?;
    if body.len() != ID_BODY_LEN || !body.bytes().all(is_id_char) || !kind.is_tagged() {
        return None;
    }
    Some(&body[..TAG_LEN])
}

/// Whether `id` is a well-formed id of `kind`.
pub fn is_valid(kind: Kind, id: &str) -> bool {
    id.strip_prefix(kind.prefix())
        .is_some_and(|b| b.len() == ID_BODY_LEN && b.bytes().all(is_id_char))
}

/// The routing tag for the `counter`-th database (counter < TAG_SPACE).
pub fn tag_for_counter(counter: u64) -> String {
    let n = ((counter % TAG_SPACE) as u128 * TAG_MULTIPLIER as u128 + TAG_OFFSET as u128)
        % TAG_SPACE as u128;
    let mut n = n as u64;
    let mut out = [b'0'; TAG_LEN];
    for slot in out.iter_mut().rev() {
        *slot = ALPHABET[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8(out.to_vec()).expect("alphabet is ASCII")
}

/// The database id for a tag: `db_` + tag + 7 random characters.
pub fn new_database_id(tag: &str) -> String {
    new_tagged(Kind::Database, tag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn tagged_ids_carry_their_tag() {
        let id = new_tagged(Kind::Table, "Ab3dZ");
        assert!(id.starts_with("tbl_Ab3dZ"));
        assert_eq!(id.len(), 4 + 12);
        assert_eq!(tag_of(Kind::Table, &id), Some("Ab3dZ"));
        assert!(is_valid(Kind::Table, &id));
    }

    #[test]
    fn malformed_ids_have_no_tag() {
        assert_eq!(tag_of(Kind::Table, "tbl_short"), None);
        assert_eq!(tag_of(Kind::Table, "fld_Ab3dZ1234567"), None);
        assert_eq!(tag_of(Kind::Table, "tbl_Ab3dZ12345-7"), None);
        assert_eq!(tag_of(Kind::Table, "tbl_Ab3dZ12345678"), None);
        assert_eq!(tag_of(Kind::Key, "key_Ab3dZ1234567"), None);
        assert_eq!(tag_of(Kind::Table, "tbl_Ab3dZ12345é"), None);
    }

    #[test]
    fn share_tokens_carry_their_tag_and_142_random_bits() {
        let t = new_share_token("Ab3dZ");
        assert_eq!(t.len(), 3 + 5 + 24);
        assert_eq!(share_token_tag(&t), Some("Ab3dZ"));
        assert_ne!(new_share_token("Ab3dZ"), t);
        assert_eq!(share_token_tag("shrAb3dZ"), None);
        assert_eq!(share_token_tag(&format!("{t}x")), None);
        assert_eq!(share_token_tag(&t.replace("shr", "shl")), None);
        assert_eq!(share_token_tag("shrAb3dZ12345678901234567890123-"), None);
        let comment = new_tagged(Kind::Comment, "Ab3dZ");
        assert_eq!(tag_of(Kind::Comment, &comment), Some("Ab3dZ"));
        assert!(new_tagged(Kind::ShareLink, "Ab3dZ").starts_with("shl_Ab3dZ"));
    }

    #[test]
    fn logged_paths_hide_share_tokens() {
        let t = new_share_token("Ab3dZ");
        let path = format!("/api/share/{t}/records");
        let logged = loggable_path(&path);
        assert_eq!(logged, "/api/share/shrAb3dZ.../records");
        assert!(!logged.contains(&t[8..]));
        assert_eq!(loggable_path("/api/tables/x"), "/api/tables/x");
        assert_eq!(loggable_path("/api/share/abc"), "/api/share/abc...");
    }

    #[test]
    fn untagged_ids_are_well_formed() {
        let id = new_untagged(Kind::Key);
        assert!(is_valid(Kind::Key, &id));
        assert!(!is_valid(Kind::User, &id));
    }

    #[test]
    fn first_tags_are_distinct_and_scattered() {
        let tags: Vec<String> = (0..10_000).map(tag_for_counter).collect();
        let unique: HashSet<&String> = tags.iter().collect();
        assert_eq!(unique.len(), tags.len());
        assert_ne!(
            tags[0][..2],
            tags[1][..2],
            "consecutive tags should not share a prefix"
        );
    }

    proptest! {
        #[test]
        fn tag_permutation_is_injective(a in 0u64..TAG_SPACE, b in 0u64..TAG_SPACE) {
            prop_assume!(a != b);
            prop_assert_ne!(tag_for_counter(a), tag_for_counter(b));
        }

        #[test]
        fn tags_are_five_alphabet_chars(n in 0u64..TAG_SPACE) {
            let t = tag_for_counter(n);
            prop_assert_eq!(t.len(), TAG_LEN);
            prop_assert!(t.bytes().all(|c| c.is_ascii_alphanumeric()));
        }

        #[test]
        fn tag_of_never_panics(s in ".{0,40}") {
            let _ = tag_of(Kind::Record, &s);
            let _ = is_valid(Kind::Record, &s);
        }
    }
}
