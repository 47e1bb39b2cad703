//! How a list page's cells travel from PostgreSQL: in their own SQL types
//! (text, `numeric` as text, boolean, `date`, `timestamptz`, arrays of
//! those) instead of a `jsonb` built per cell in SQL, and written into the
//! reply's JSON straight from the row (`records::page`). Building, sending
//! and re-parsing one `jsonb` per cell was about a third of PostgreSQL's
//! and the node's CPU per page.
//!
//! The JSON written is the same, byte for byte, as the `jsonb` read
//! expressions of [`super::read`] parsed into `serde_json::Value` and
//! printed: strings through serde_json's escaping, numbers through
//! serde_json's own parsing of PostgreSQL's text (so `1.50` prints `1.5`,
//! as before), days and instants formatted as `to_char` formats them
//! (`YYYY-MM-DD`, `YYYY-MM-DD"T"HH24:MI:SS.MS"Z"` in UTC; NULL for
//! infinity). Anything else keeps the `jsonb` form ([`Wire::Json`]).

use std::collections::HashMap;
use std::io::Write;

use serde_json::Value;
use tokio_postgres::types::{FromSql, Type};
use tokio_postgres::Row;

use crate::schema::{Costume, FieldRow};
use crate::tenant_schema;

/// One value of a plain column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// `text`: a JSON string.
    Text,
    /// `numeric` sent as text: a JSON number.
    Number,
    /// `boolean`: `true`/`false`; NULL (a checkbox never written) reads null.
    Bool,
    /// `date`: `"YYYY-MM-DD"`.
    Day,
    /// `timestamptz`: `"YYYY-MM-DDTHH:MI:SS.mmmZ"` in UTC.
    Instant,
}

/// How one cell is sent and written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// One `jsonb` column, parsed.
    Json,
    /// One plain column.
    One(Scalar),
    /// One array column; NULL is `[]` when `null_as_empty`, else `null`.
    List { of: Scalar, null_as_empty: bool },
    /// A link cell as two `text[]` columns, ids and display texts:
    /// `[{"display": .., "id": ..}]`, NULL as `[]`.
    Link,
}

impl Wire {
    /// Result columns the cell takes in the select list.
    pub fn columns(self) -> usize {
        match self {
            Wire::Link => 2,
            _ => 1,
        }
    }
}

/// The plain form of a stored column of `f` over the quoted row alias
/// `row`: SQL and how it reads; None for a type without one.
pub fn column(f: &FieldRow, row: &str) -> Option<(String, Scalar)> {
    let col = tenant_schema::column(&f.id).ok()?;
    let e = format!("{row}.{col}");
    match f.sql_type.as_deref()? {
        "text" => Some((e, Scalar::Text)),
        "numeric" => Some((format!("({e})::text"), Scalar::Number)),
        "boolean" => Some((e, Scalar::Bool)),
        "date" => Some((e, Scalar::Day)),
        "timestamptz" => Some((e, Scalar::Instant)),
        _ => None,
    }
}

/// The plain form of a whole cell of a stored column (arrays included).
pub fn cell(f: &FieldRow, row: &str) -> Option<(String, Wire)> {
    if f.sql_type.as_deref() == Some("text[]") {
        let col = tenant_schema::column(&f.id).ok()?;
        return Some((
            format!("{row}.{col}"),
            Wire::List {
                of: Scalar::Text,
                null_as_empty: f.costume == Costume::Attachment,
            },
        ));
    }
    column(f, row).map(|(sql, s)| (sql, Wire::One(s)))
}

/// A `date` as sent: days since 2000-01-01.
struct Day(i32);

impl<'a> FromSql<'a> for Day {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Day(i32::from_be_bytes(raw.try_into()?)))
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::DATE
    }
}

/// A `timestamptz` as sent: microseconds since 2000-01-01 00:00 UTC.
struct Instant(i64);

impl<'a> FromSql<'a> for Instant {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Instant(i64::from_be_bytes(raw.try_into()?)))
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMPTZ
    }
}

/// Julian day of 2000-01-01 (PostgreSQL's epoch).
const EPOCH_JDATE: i64 = 2_451_545;
const USECS_PER_DAY: i64 = 86_400_000_000;

/// PostgreSQL's `j2date`: year (1 BC is 0), month, day of a Julian day.
fn j2date(jd: i64) -> (i64, u32, u32) {
    let mut julian = (jd + 32044) as u64;
    let mut quad = julian / 146_097;
    let extra = (julian - quad * 146_097) * 4 + 3;
    julian += 60 + quad * 3 + extra / 146_097;
    quad = julian / 1461;
    julian -= quad * 1461;
    let mut y = julian * 4 / 1461;
    julian = if y != 0 {
        (julian + 305) % 365
    } else {
        (julian + 306) % 366
    } + 123;
    y += quad * 4;
    let quad = julian * 2141 / 65_536;
    let day = julian - 7834 * quad / 256;
    let month = (quad + 10) % 12 + 1;
    (y as i64 - 4800, month as u32, day as u32)
}

/// `to_char(.., 'YYYY-MM-DD')` of a Julian day: at least four year digits,
/// a BC year by its number (no era mark).
fn write_ymd(out: &mut Vec<u8>, jd: i64) {
    let (y, m, d) = j2date(jd);
    let y = if y <= 0 { 1 - y } else { y };
    if y < 10_000 {
        digits(out, y as u32, 4);
    } else {
        let _ = write!(out, "{y}");
    }
    out.push(b'-');
    digits(out, m, 2);
    out.push(b'-');
    digits(out, d, 2);
}

/// `n` in exactly `width` decimal digits (zero-padded; `n` fits).
fn digits(out: &mut Vec<u8>, mut n: u32, width: usize) {
    let at = out.len();
    out.resize(at + width, b'0');
    for slot in out[at..].iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// A day as its JSON string, `null` for ±infinity (to_char's NULL).
fn write_day(out: &mut Vec<u8>, days: i32) {
    if days == i32::MAX || days == i32::MIN {
        out.extend_from_slice(b"null");
        return;
    }
    out.push(b'"');
    write_ymd(out, EPOCH_JDATE + i64::from(days));
    out.push(b'"');
}

/// An instant as its JSON string in UTC with milliseconds (truncated, as
/// to_char's `MS`), `null` for ±infinity.
fn write_instant(out: &mut Vec<u8>, us: i64) {
    if us == i64::MAX || us == i64::MIN {
        out.extend_from_slice(b"null");
        return;
    }
    let days = us.div_euclid(USECS_PER_DAY);
    let time = us.rem_euclid(USECS_PER_DAY);
    out.push(b'"');
    write_ymd(out, EPOCH_JDATE + days);
    let secs = (time / 1_000_000) as u32;
    out.push(b'T');
    digits(out, secs / 3600, 2);
    out.push(b':');
    digits(out, secs / 60 % 60, 2);
    out.push(b':');
    digits(out, secs % 60, 2);
    out.push(b'.');
    digits(out, (time % 1_000_000 / 1000) as u32, 3);
    out.extend_from_slice(b"Z\"");
}

/// Days from 2000-01-01 to 0001-01-01 and to 10000-01-01: the instants
/// between print the same through [`write_instant`] and chrono's RFC 3339
/// with milliseconds (`json::format_ts`).
const FOUR_DIGIT_YEARS: std::ops::Range<i64> = -730_119..2_921_940;

/// A record's `created_at`/`updated_at` as `json::format_ts` prints it.
pub fn write_stamp(out: &mut Vec<u8>, row: &Row, i: usize) -> Result<(), tokio_postgres::Error> {
    let Instant(us) = row.try_get(i)?;
    if FOUR_DIGIT_YEARS.contains(&us.div_euclid(USECS_PER_DAY)) {
        write_instant(out, us);
    } else {
        let t: chrono::DateTime<chrono::Utc> = row.try_get(i)?;
        write_str(out, &crate::json::format_ts(&t));
    }
    Ok(())
}

/// A JSON string.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// A number from PostgreSQL's text of a `numeric`, printed as serde_json
/// prints what it parses; text that is no JSON number (`NaN`) as a string.
fn write_number(out: &mut Vec<u8>, text: &str) {
    match serde_json::from_str::<serde_json::Number>(text) {
        Ok(n) => {
            let _ = serde_json::to_writer(&mut *out, &n);
        }
        Err(_) => write_str(out, text),
    }
}

/// Choice names by id, when a select's cells are shown by name.
pub type Names<'a> = Option<&'a HashMap<String, String>>;

fn rename<'a>(names: Names<'a>, s: &'a str) -> &'a str {
    names
        .and_then(|m| m.get(s))
        .map(String::as_str)
        .unwrap_or(s)
}

/// Writes one plain value at column `i`; `names` renames strings (choice
/// ids to names).
fn write_scalar(
    out: &mut Vec<u8>,
    row: &Row,
    i: usize,
    s: Scalar,
    names: Names<'_>,
) -> Result<(), tokio_postgres::Error> {
    match s {
        Scalar::Text => match row.try_get::<_, Option<&str>>(i)? {
            Some(t) => write_str(out, rename(names, t)),
            None => out.extend_from_slice(b"null"),
        },
        Scalar::Number => match row.try_get::<_, Option<&str>>(i)? {
            Some(t) => write_number(out, t),
            None => out.extend_from_slice(b"null"),
        },
        Scalar::Bool => match row.try_get::<_, Option<bool>>(i)? {
            Some(true) => out.extend_from_slice(b"true"),
            Some(false) => out.extend_from_slice(b"false"),
            None => out.extend_from_slice(b"null"),
        },
        Scalar::Day => match row.try_get::<_, Option<Day>>(i)? {
            Some(Day(d)) => write_day(out, d),
            None => out.extend_from_slice(b"null"),
        },
        Scalar::Instant => match row.try_get::<_, Option<Instant>>(i)? {
            Some(Instant(t)) => write_instant(out, t),
            None => out.extend_from_slice(b"null"),
        },
    }
    Ok(())
}

/// `[a,b,...]` from a list of optional items.
fn write_list<T>(out: &mut Vec<u8>, items: &[Option<T>], mut each: impl FnMut(&mut Vec<u8>, &T)) {
    out.push(b'[');
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        match item {
            Some(v) => each(out, v),
            None => out.extend_from_slice(b"null"),
        }
    }
    out.push(b']');
}

/// Writes an array column at `i` (`None` when NULL).
fn write_array(
    out: &mut Vec<u8>,
    row: &Row,
    i: usize,
    of: Scalar,
    names: Names<'_>,
) -> Result<bool, tokio_postgres::Error> {
    match of {
        Scalar::Text | Scalar::Number => {
            let Some(items) = row.try_get::<_, Option<Vec<Option<&str>>>>(i)? else {
                return Ok(false);
            };
            write_list(out, &items, |o, t| match of {
                Scalar::Number => write_number(o, t),
                _ => write_str(o, rename(names, t)),
            });
        }
        Scalar::Bool => {
            let Some(items) = row.try_get::<_, Option<Vec<Option<bool>>>>(i)? else {
                return Ok(false);
            };
            write_list(out, &items, |o, b| {
                o.extend_from_slice(if *b { b"true" } else { b"false" })
            });
        }
        Scalar::Day => {
            let Some(items) = row.try_get::<_, Option<Vec<Option<Day>>>>(i)? else {
                return Ok(false);
            };
            write_list(out, &items, |o, d| write_day(o, d.0));
        }
        Scalar::Instant => {
            let Some(items) = row.try_get::<_, Option<Vec<Option<Instant>>>>(i)? else {
                return Ok(false);
            };
            write_list(out, &items, |o, t| write_instant(o, t.0));
        }
    }
    Ok(true)
}

/// Writes the cell at columns `i..` of `row` as JSON. `names` renames
/// strings (choice ids shown by name), `display_cap` blanks the display
/// texts of a link cell past that many items. A [`Wire::Json`] cell is
/// handed to `json` (post-processing of the parsed value).
pub fn write_cell(
    out: &mut Vec<u8>,
    row: &Row,
    i: usize,
    wire: Wire,
    names: Names<'_>,
    display_cap: Option<usize>,
    json: &dyn Fn(Value) -> Value,
) -> Result<(), tokio_postgres::Error> {
    match wire {
        Wire::Json => {
            let v = row.try_get::<_, Option<Value>>(i)?.unwrap_or(Value::Null);
            let _ = serde_json::to_writer(&mut *out, &json(v));
        }
        Wire::One(s) => write_scalar(out, row, i, s, names)?,
        Wire::List { of, null_as_empty } => {
            if !write_array(out, row, i, of, names)? {
                out.extend_from_slice(if null_as_empty { b"[]" } else { b"null" });
            }
        }
        Wire::Link => {
            let ids = row.try_get::<_, Option<Vec<Option<&str>>>>(i)?;
            let displays = row.try_get::<_, Option<Vec<Option<&str>>>>(i + 1)?;
            let (ids, displays) = (ids.unwrap_or_default(), displays.unwrap_or_default());
            out.push(b'[');
            for (n, id) in ids.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(b"{\"display\":");
                match displays.get(n).copied().flatten() {
                    Some(d) if display_cap.is_none_or(|cap| n < cap) => write_str(out, d),
                    _ => out.extend_from_slice(b"null"),
                }
                out.extend_from_slice(b",\"id\":");
                match id {
                    Some(id) => write_str(out, id),
                    None => out.extend_from_slice(b"null"),
                }
                out.push(b'}');
            }
            out.push(b']');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(days: i32) -> String {
        let mut v = Vec::new();
        write_day(&mut v, days);
        String::from_utf8(v).unwrap()
    }

    fn instant(us: i64) -> String {
        let mut v = Vec::new();
        write_instant(&mut v, us);
        String::from_utf8(v).unwrap()
    }

    fn number(t: &str) -> String {
        let mut v = Vec::new();
        write_number(&mut v, t);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn days_as_to_char_formats_them() {
        assert_eq!(day(0), "\"2000-01-01\"");
        assert_eq!(day(-1), "\"1999-12-31\"");
        assert_eq!(day(60), "\"2000-03-01\"");
        assert_eq!(day(9_600), "\"2026-04-14\"");
        // 0001-01-01, 1 BC (year 0), 44 BC, 10000-01-01.
        assert_eq!(day(-730_119), "\"0001-01-01\"");
        assert_eq!(day(-730_120), "\"0001-12-31\"");
        assert_eq!(day(-746_190), "\"0044-01-01\"");
        assert_eq!(day(2_921_940), "\"10000-01-01\"");
        assert_eq!(day(i32::MAX), "null");
        assert_eq!(day(i32::MIN), "null");
    }

    #[test]
    fn instants_in_utc_with_truncated_milliseconds() {
        assert_eq!(instant(0), "\"2000-01-01T00:00:00.000Z\"");
        assert_eq!(instant(-1), "\"1999-12-31T23:59:59.999Z\"");
        assert_eq!(
            instant(USECS_PER_DAY * 9_600 + 3_723_456_789),
            "\"2026-04-14T01:02:03.456Z\""
        );
        assert_eq!(instant(i64::MAX), "null");
    }

    #[test]
    fn instants_print_as_format_ts_within_four_digit_years() {
        use chrono::{TimeZone, Utc};
        let epoch = Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).unwrap();
        for us in [
            0i64,
            -1,
            1_234_567_890_123_456,
            -63_082_281_600_000_000,
            252_455_615_999_999_999,
            841_124_733_123_999,
        ] {
            let t = epoch + chrono::Duration::microseconds(us);
            assert!(FOUR_DIGIT_YEARS.contains(&us.div_euclid(USECS_PER_DAY)));
            assert_eq!(instant(us), format!("\"{}\"", crate::json::format_ts(&t)));
        }
        assert_eq!(FOUR_DIGIT_YEARS.start, -730_119);
        assert!(!FOUR_DIGIT_YEARS.contains(&2_921_940));
    }

    #[test]
    fn numbers_as_serde_json_prints_them() {
        assert_eq!(number("392"), "392");
        assert_eq!(number("-7"), "-7");
        assert_eq!(number("1.50"), "1.5");
        assert_eq!(number("0.1"), "0.1");
        assert_eq!(
            number("123456789012345678901234567890"),
            "1.2345678901234568e+29"
        );
        assert_eq!(number("NaN"), "\"NaN\"");
        for t in ["392", "1.50", "-0", "18446744073709551616", "0.000001"] {
            let via_value: Value = serde_json::from_str(t).unwrap();
            assert_eq!(number(t), serde_json::to_string(&via_value).unwrap());
        }
    }
}
