//! The only ways a value reaches the mover's DDL text (DDL takes no
//! parameters): quoted identifiers, quoted literals and the names the mover
//! derives from checked ids.

use anyhow::bail;
use cluster_protocol::ids::{self, Kind};

/// Prefix of every publication, slot and subscription the mover makes.
pub const OBJECT_PREFIX: &str = "tmv_";

/// `"name"`, inner double quotes doubled.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'value'`, inner quotes doubled; with a backslash, the `E''` form with
/// backslashes doubled too, so the result means the same whatever
/// `standard_conforming_strings` says.
pub fn quote_literal(value: &str) -> String {
    let quoted = value.replace('\'', "''");
    if value.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    }
}

/// The quoted tenant schema of a database (its id, checked).
pub fn schema(database_id: &str) -> anyhow::Result<String> {
    if !ids::is_valid(Kind::Database, database_id) {
        bail!("refusing a schema name from malformed database id {database_id:?}");
    }
    Ok(quote_ident(database_id))
}

/// A checked database id as a literal (publication row filters).
pub fn database_literal(database_id: &str) -> anyhow::Result<String> {
    if !ids::is_valid(Kind::Database, database_id) {
        bail!("refusing a literal from malformed database id {database_id:?}");
    }
    Ok(quote_literal(database_id))
}

/// Publication, slot and subscription name of a move: `tmv_` and the hex of
/// the id's 12 characters, lowercase (slot names allow only `[a-z0-9_]`).
pub fn object_name(move_id: &str) -> anyhow::Result<String> {
    if !ids::is_valid(Kind::Move, move_id) {
        bail!("refusing an object name from malformed move id {move_id:?}");
    }
    let body = &move_id[move_id.len() - 12..];
    let hex: String = body.bytes().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{OBJECT_PREFIX}{hex}"))
}

/// The move an object name belongs to (`None`: not a mover name).
pub fn move_of_object(name: &str) -> Option<String> {
    let hex = name.strip_prefix(OBJECT_PREFIX)?;
    if hex.len() != 24
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..12)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
        .collect();
    let id = format!("mov_{}", String::from_utf8(bytes?).ok()?);
    ids::is_valid(Kind::Move, &id).then_some(id)
}

/// A tenant table's name is a table id or `lnk_` and a field id (a
/// connector table); anything else is not something the mover knows.
pub fn is_known_table_name(name: &str) -> bool {
    ids::is_valid(Kind::Table, name)
        || name
            .strip_prefix("lnk_")
            .is_some_and(|f| ids::is_valid(Kind::Field, f))
}

/// `"db_..."."name"`.
pub fn qualified(database_id: &str, table: &str) -> anyhow::Result<String> {
    Ok(format!("{}.{}", schema(database_id)?, quote_ident(table)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_double_their_quotes() {
        assert_eq!(quote_ident("tbl_a"), "\"tbl_a\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_ident(""), "\"\"");
    }

    #[test]
    fn literals_double_quotes_and_backslashes() {
        assert_eq!(quote_literal("db_x"), "'db_x'");
        assert_eq!(quote_literal("it's"), "'it''s'");
        assert_eq!(quote_literal("a\\b'c"), "E'a\\\\b''c'");
        assert_eq!(
            quote_literal("password='x' host=h"),
            "'password=''x'' host=h'"
        );
    }

    #[test]
    fn names_round_trip_and_fit_slot_rules() {
        let id = ids::new_untagged(Kind::Move);
        let name = object_name(&id).unwrap();
        assert!(name.len() <= 63);
        assert!(name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
        assert_eq!(move_of_object(&name), Some(id));
        assert_eq!(
            object_name("mov_AbCdEf012345").unwrap(),
            "tmv_416243644566303132333435"
        );
        assert!(object_name("mov_x'; DROP").is_err());
        assert_eq!(move_of_object("tmv_zz"), None);
        assert_eq!(move_of_object("other"), None);
        assert_eq!(move_of_object("tmv_2d2d2d2d2d2d2d2d2d2d2d2d"), None);
    }

    #[test]
    fn schema_names_come_only_from_database_ids() {
        let db = ids::new_database_id("Ab3dZ");
        assert_eq!(schema(&db).unwrap(), format!("\"{db}\""));
        assert!(schema("db_x\"; DROP").is_err());
        assert!(database_literal("tbl_Ab3dZabcdefg").is_err());
        assert_eq!(
            qualified(&db, "tbl_Ab3dZabcdefg").unwrap(),
            format!("\"{db}\".\"tbl_Ab3dZabcdefg\"")
        );
    }

    #[test]
    fn table_names_are_ids_or_connectors() {
        assert!(is_known_table_name("tbl_Ab3dZabcdefg"));
        assert!(is_known_table_name("lnk_fld_Ab3dZabcdefg"));
        assert!(!is_known_table_name("lnk_tbl_Ab3dZabcdefg"));
        assert!(!is_known_table_name("audit"));
    }
}
