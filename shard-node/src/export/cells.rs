//! A record cell as CSV text (part B, Export): link cells as their linked
//! display texts (the `rec_` id when a record has none) and attachment
//! cells as `att_` ids, both comma-joined; other multi-values joined with
//! comma and space; durations in the field's own `duration_format`;
//! instants as the UTC ISO text records read them as; and the
//! formula-injection rule applied to every cell and header name.

use serde_json::Value;

use crate::records::reply::Post;
use crate::schema::{Costume, FieldRow};

/// The CSV text of one read cell of `field` (`post` from its read field).
pub fn cell_text(field: &FieldRow, post: &Post, value: &Value) -> String {
    let text = match (field.costume, value) {
        (Costume::Link, Value::Array(items)) => items
            .iter()
            .map(|i| match i.get("display") {
                Some(Value::String(d)) if !d.is_empty() => d.clone(),
                _ => i.get("id").and_then(Value::as_str).unwrap_or("").to_owned(),
            })
            .collect::<Vec<_>>()
            .join(","),
        // Read cells are attachment objects; their ids are what is exported.
        (Costume::Attachment, Value::Array(items)) => items
            .iter()
            .map(|i| match i.get("id") {
                Some(Value::String(id)) => id.clone(),
                _ => plain(i, post),
            })
            .collect::<Vec<_>>()
            .join(","),
        (Costume::Duration, Value::Number(n)) => n
            .as_f64()
            .map(|s| duration(s, field.option_str("duration_format").unwrap_or("h:mm")))
            .unwrap_or_default(),
        (Costume::Checkbox, Value::Null) => "false".to_owned(),
        _ => plain(value, post),
    };
    guard_formula(&text)
}

/// A table's CSV header: `id`, then its field names in grid order, each
/// under the same formula-injection rule as the cells (a field named
/// `=cmd()` is as dangerous in row 1 as in any other).
pub fn header_cells(fields: &[FieldRow]) -> Vec<String> {
    std::iter::once("id".to_owned())
        .chain(fields.iter().map(|f| guard_formula(&f.name)))
        .collect()
}

/// A value as text: choice ids by name, lists joined with ", ".
fn plain(value: &Value, post: &Post) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => match post {
            Post::Choices(names) => names.get(s).cloned().unwrap_or_else(|| s.clone()),
            _ => s.clone(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => items
            .iter()
            .map(|i| plain(i, post))
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(", "),
        Value::Object(_) => value.to_string(),
    }
}

/// Seconds in a field's `duration_format` (`h:mm`, `h:mm:ss`, `mm:ss`);
/// `h:mm` rounds to the minute, the others to the second.
pub fn duration(seconds: f64, format: &str) -> String {
    let total = seconds.max(0.0).round() as u64;
    match format {
        "h:mm:ss" => format!("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60),
        "mm:ss" => format!("{:02}:{:02}", total / 60, total % 60),
        _ => {
            let minutes = (seconds.max(0.0) / 60.0).round() as u64;
            format!("{}:{:02}", minutes / 60, minutes % 60)
        }
    }
}

/// Part B's formula-injection rule: a value starting `=`, `@`, tab or
/// carriage return gets a leading single quote, as does one starting `+`
/// or `-` unless the whole value is a number.
pub fn guard_formula(text: &str) -> String {
    let risky = match text.chars().next() {
        Some('=' | '@' | '\t' | '\r') => true,
        Some('+' | '-') => !is_number(text),
        _ => false,
    };
    if risky {
        format!("'{text}")
    } else {
        text.to_owned()
    }
}

/// A plain decimal number (sign, digits, optional fraction and exponent).
fn is_number(text: &str) -> bool {
    let t = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match t.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e.strip_prefix(['+', '-']).unwrap_or(e))),
        None => (t, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some((a, b)) => {
            (digits(a) || a.is_empty())
                && (digits(b) || b.is_empty())
                && !(a.is_empty() && b.is_empty())
        }
        None => digits(mantissa),
    };
    mantissa_ok && exponent.is_none_or(digits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_starts_are_quoted() {
        assert_eq!(guard_formula("=SUM(A1)"), "'=SUM(A1)");
        assert_eq!(guard_formula("@cmd"), "'@cmd");
        assert_eq!(guard_formula("\tx"), "'\tx");
        assert_eq!(guard_formula("\rx"), "'\rx");
        assert_eq!(guard_formula("+1 555"), "'+1 555");
        assert_eq!(guard_formula("-x"), "'-x");
        assert_eq!(guard_formula("-"), "'-");
    }

    #[test]
    fn header_names_are_guarded_like_cells() {
        let field = |name: &str| FieldRow {
            id: "fld_A0000000000001".to_owned(),
            table_id: "tbl_A0000000000001".to_owned(),
            name: name.to_owned(),
            costume: Costume::SingleLineText,
            options: serde_json::Map::new(),
            position: 0,
            sql_type: Some("text".to_owned()),
            created_at: chrono::Utc::now(),
        };
        let fields = [
            field("=cmd()"),
            field("Name"),
            field("-1"),
            field("+x"),
            field("@a"),
        ];
        assert_eq!(
            header_cells(&fields),
            ["id", "'=cmd()", "Name", "-1", "'+x", "'@a"]
        );
    }

    #[test]
    fn numbers_and_plain_text_are_kept() {
        for kept in ["-12", "+3.5", "-0.5e3", "-.5", "hello", "", "a=b", "1-2"] {
            assert_eq!(guard_formula(kept), kept);
        }
    }

    #[test]
    fn attachment_cells_are_their_ids_comma_joined() {
        let field = FieldRow {
            id: "fld_AAAAAbcdefgh".into(),
            table_id: "tbl_AAAAAbcdefgh".into(),
            name: "Files".into(),
            costume: Costume::Attachment,
            options: Default::default(),
            position: 0,
            sql_type: Some("text[]".into()),
            created_at: chrono::Utc::now(),
        };
        let objects = serde_json::json!([
            {"id": "att_AAAAA0000001", "filename": "a.txt", "url": "https://x/1"},
            {"id": "att_AAAAA0000002", "filename": "=b.txt", "url": "https://x/2"},
        ]);
        assert_eq!(
            cell_text(&field, &Post::Plain, &objects),
            "att_AAAAA0000001,att_AAAAA0000002"
        );
        let ids = serde_json::json!(["att_AAAAA0000001", "att_AAAAA0000002"]);
        assert_eq!(
            cell_text(&field, &Post::Plain, &ids),
            "att_AAAAA0000001,att_AAAAA0000002"
        );
        assert_eq!(cell_text(&field, &Post::Plain, &Value::Null), "");
    }

    #[test]
    fn durations_follow_the_format() {
        assert_eq!(duration(5400.0, "h:mm"), "1:30");
        assert_eq!(duration(5425.0, "h:mm:ss"), "1:30:25");
        assert_eq!(duration(125.0, "mm:ss"), "02:05");
        assert_eq!(duration(0.0, "h:mm"), "0:00");
    }
}
