//! Re-tagging: the text of a database's copy names the copy's ids, not the
//! original's. Every id inside a database carries its 5-character routing
//! tag (ARCHITECTURE.md, "Ids and routing") and tenant identifiers are made
//! of ids (`"db_.."`, `"tbl_.."`, `"fld_.."`, `lnk_fld_..`, `uq_fld_..`,
//! `fld_.._sort_prefix`), so one pure function rewrites identifiers, DDL
//! expressions, catalog rows (with their JSON options) and tenant rows alike.
//!
//! What is rewritten: the original database id, whole, becomes the new
//! database id; then every `<prefix><old tag>` followed by 7 id characters,
//! for each tagged kind's prefix (`db_ tbl_ fld_ viw_ rec_ att_ whk_ dlv_
//! cmt_ shl_`), gets the new tag. Text that merely looks like such an id (a
//! user typed one into a cell) is rewritten too: it then names the copy's
//! record, table or field, which is what a copy's text should mean.

use std::borrow::Cow;

use anyhow::{bail, Context};
use cluster_protocol::ids::{self, Kind, ID_BODY_LEN, TAG_LEN};

/// Characters after the tag in an id.
const AFTER_TAG: usize = ID_BODY_LEN - TAG_LEN;

/// From one database's ids to another's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retag {
    old_database: String,
    new_database: String,
    old_tag: String,
    new_tag: String,
}

impl Retag {
    /// Between two well-formed database ids of different tags.
    pub fn new(old_database: &str, new_database: &str) -> anyhow::Result<Self> {
        let old_tag = ids::tag_of(Kind::Database, old_database)
            .with_context(|| format!("malformed database id {old_database:?}"))?;
        let new_tag = ids::tag_of(Kind::Database, new_database)
            .with_context(|| format!("malformed database id {new_database:?}"))?;
        if old_tag == new_tag {
            bail!("{old_database} and {new_database} carry the same tag {old_tag}");
        }
        Ok(Self {
            old_database: old_database.to_string(),
            new_database: new_database.to_string(),
            old_tag: old_tag.to_string(),
            new_tag: new_tag.to_string(),
        })
    }

    pub fn old_database(&self) -> &str {
        &self.old_database
    }

    pub fn new_database(&self) -> &str {
        &self.new_database
    }

    /// `text` with the original's ids replaced by the copy's (borrowed when
    /// nothing matched, the common case of a cell without ids).
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out: Option<String> = None;
        let mut copied_to = 0;
        for (at, _) in text.match_indices(self.old_tag.as_str()) {
            if at < copied_to {
                continue;
            }
            let before = &text[..at];
            let Some(prefix) = Kind::TAGGED
                .iter()
                .map(|k| k.prefix())
                .find(|p| before.ends_with(p))
            else {
                continue;
            };
            let rest_start = at + TAG_LEN;
            let Some(rest) = text.get(rest_start..rest_start + AFTER_TAG) else {
                continue;
            };
            if !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
                continue;
            }
            let start = at - prefix.len();
            let id = &text[start..rest_start + AFTER_TAG];
            let buf = out.get_or_insert_with(|| String::with_capacity(text.len()));
            buf.push_str(&text[copied_to..start]);
            if id == self.old_database {
                buf.push_str(&self.new_database);
            } else {
                buf.push_str(prefix);
                buf.push_str(&self.new_tag);
                buf.push_str(rest);
            }
            copied_to = rest_start + AFTER_TAG;
        }
        match out {
            None => Cow::Borrowed(text),
            Some(mut buf) => {
                buf.push_str(&text[copied_to..]);
                Cow::Owned(buf)
            }
        }
    }

    /// An owned string re-tagged.
    pub fn string(&self, text: &str) -> String {
        self.text(text).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "db_AbCdE1234567";
    const NEW: &str = "db_XyZ09abcdefg";

    fn r() -> Retag {
        Retag::new(OLD, NEW).unwrap()
    }

    #[test]
    fn the_database_id_becomes_the_new_one_whole() {
        assert_eq!(r().text(OLD), NEW);
        assert_eq!(
            r().text(&format!("\"{OLD}\".\"tbl_AbCdEqqqqqqq\"")),
            format!("\"{NEW}\".\"tbl_XyZ09qqqqqqq\"")
        );
    }

    #[test]
    fn every_tagged_kind_gets_the_new_tag() {
        for kind in Kind::TAGGED {
            let id = format!("{}AbCdEzzzzzzz", kind.prefix());
            // Another database id of the same tag cannot exist; were one
            // written in text, it gets the new tag like any other id.
            let want = format!("{}XyZ09zzzzzzz", kind.prefix());
            assert_eq!(r().text(&id), want, "{kind:?}");
        }
    }

    #[test]
    fn identifiers_made_of_ids_are_retagged() {
        let cases = [
            ("lnk_fld_AbCdE0000001", "lnk_fld_XyZ090000001"),
            ("\"uq_fld_AbCdE0000001\"", "\"uq_fld_XyZ090000001\""),
            (
                "\"fld_AbCdE0000001_sort_prefix\"",
                "\"fld_XyZ090000001_sort_prefix\"",
            ),
            ("tbl_AbCdE0000001_live", "tbl_XyZ090000001_live"),
            (
                "(\"fld_AbCdE0000001\" * 2::numeric)",
                "(\"fld_XyZ090000001\" * 2::numeric)",
            ),
        ];
        for (from, to) in cases {
            assert_eq!(r().text(from), to);
        }
    }

    #[test]
    fn json_and_copy_text_rows_are_retagged_in_place() {
        let json =
            r#"{"linked_table_id":"tbl_AbCdE0000001","inverse_field_id":"fld_AbCdE0000002"}"#;
        assert_eq!(
            r().text(json),
            r#"{"linked_table_id":"tbl_XyZ090000001","inverse_field_id":"fld_XyZ090000002"}"#
        );
        let row = "rec_AbCdE0000003\t2026-01-01 00:00:00+00\tsee rec_AbCdE0000004\\n\\N\n";
        assert_eq!(
            r().text(row),
            "rec_XyZ090000003\t2026-01-01 00:00:00+00\tsee rec_XyZ090000004\\n\\N\n"
        );
    }

    #[test]
    fn text_that_is_not_an_id_stays() {
        for s in [
            "AbCdE",
            "AbCdE1234567",
            "rec_AbCdE12",
            "rec_AbCdE12345-7",
            "usr_AbCdE1234567",
            "key_AbCdE1234567",
            "mov_AbCdE1234567",
            "tbl_OtherTag1234",
            "héllo AbCdE wörld",
            "",
        ] {
            assert!(matches!(r().text(s), Cow::Borrowed(_)), "{s}");
        }
    }

    #[test]
    fn neighbours_and_unicode_survive() {
        assert_eq!(
            r().text("é rec_AbCdE0000001,rec_AbCdE0000002 ü"),
            "é rec_XyZ090000001,rec_XyZ090000002 ü"
        );
        // A longer alphanumeric run keeps its tail: only prefix+tag+7 is an id.
        assert_eq!(r().text("rec_AbCdE00000019"), "rec_XyZ0900000019");
    }

    #[test]
    fn a_tag_inside_the_random_part_is_not_an_id() {
        let r = Retag::new("db_AAAAA1234567", "db_BBBBB1234567").unwrap();
        assert_eq!(r.text("rec_AAAAAAAAAAAA"), "rec_BBBBBAAAAAAA");
        assert_eq!(r.text("db_AAAAA1234567"), "db_BBBBB1234567");
    }

    #[test]
    fn equal_tags_and_malformed_ids_are_refused() {
        assert!(Retag::new(OLD, "db_AbCdE7654321").is_err());
        assert!(Retag::new("db_short", NEW).is_err());
        assert!(Retag::new("tbl_AbCdE1234567", NEW).is_err());
    }
}
