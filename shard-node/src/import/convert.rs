//! One text cell of a file as the JSON value a record write takes for a
//! field. The value then goes through the record write path's own
//! conversion (`records::cells::write::prepare`), so an imported cell means
//! exactly what the same value written over the API means, and a value that
//! does not fit is refused there with the write path's message.
//!
//! What this adds are the spellings spreadsheets use and the API does not
//! take (decisions where part B is silent; the preview's guesses assume
//! them):
//! * blank (or whitespace only): no value;
//! * numbers (number, currency, percent, rating): thousands separators
//!   (`1,234.5`, `1.234,5`, `1 234`, `1'234`), a currency symbol before or
//!   after (`$`, `€`, `£`, `¥`, `₹` and the field's own `symbol`), a trailing
//!   `%` (`12%` is 12, as a percent field shows it), accounting negatives
//!   `(12.50)`;
//! * checkbox: `true`/`false`, `yes`/`no`, `y`/`n`, `1`/`0`, `checked`/
//!   `unchecked`, `on`/`off`, `x` (any case);
//! * dates: ISO `YYYY-MM-DD` (with a time for a date-with-time field, read
//!   in the database timezone unless it carries an offset); `D/M/YYYY` for a
//!   field whose `date_format` is `eu`, `M/D/YYYY` otherwise (`-` or `.`
//!   as separators too); on a date-only field a timestamp keeps its date;
//! * multi select: names separated by commas (as the export writes them);
//! * duration: `h:mm`-style text or seconds, as the API takes it.

use serde_json::Value;

use crate::schema::{Costume, FieldRow};

/// Currency symbols recognised (and dropped) around a number.
const CURRENCY_SYMBOLS: [&str; 5] = ["$", "€", "£", "¥", "₹"];

/// The JSON for `raw` in field `f` (see the module notes).
pub fn cell_json(f: &FieldRow, raw: &str) -> Value {
    let t = raw.trim();
    if t.is_empty() {
        return Value::Null;
    }
    use Costume::*;
    match f.costume {
        Number | Currency | Percent | Rating => match number(t, f.option_str("symbol")) {
            Some(n) => serde_json::Number::from_f64(n)
                .map(Value::Number)
                .unwrap_or_else(|| Value::String(t.to_owned())),
            None => Value::String(t.to_owned()),
        },
        Checkbox => match checkbox(t) {
            Some(b) => Value::Bool(b),
            None => Value::String(t.to_owned()),
        },
        Date => Value::String(date_text(t, f.option_str("date_format"), f.has_time())),
        MultiSelect => Value::Array(
            select_values(MultiSelect, raw)
                .into_iter()
                .map(|s| Value::String(s.to_owned()))
                .collect(),
        ),
        SingleSelect | Duration => Value::String(t.to_owned()),
        // Text keeps the cell as written (inner and edge spaces included).
        _ => Value::String(raw.to_owned()),
    }
}

/// The choice names a select cell names: the trimmed cell for a single
/// select, its comma-separated names for a multi select; none when blank.
pub fn select_values(costume: Costume, raw: &str) -> Vec<&str> {
    let t = raw.trim();
    if t.is_empty() {
        return Vec::new();
    }
    if costume == Costume::MultiSelect {
        t.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    } else {
        vec![t]
    }
}

/// A checkbox spelling.
pub fn checkbox(t: &str) -> Option<bool> {
    const YES: [&str; 7] = ["true", "yes", "y", "1", "checked", "on", "x"];
    const NO: [&str; 6] = ["false", "no", "n", "0", "unchecked", "off"];
    if YES.iter().any(|w| t.eq_ignore_ascii_case(w)) {
        Some(true)
    } else if NO.iter().any(|w| t.eq_ignore_ascii_case(w)) {
        Some(false)
    } else {
        None
    }
}

/// A number as spreadsheets write it (see the module notes); `symbol` is
/// the field's own currency symbol.
pub fn number(t: &str, symbol: Option<&str>) -> Option<f64> {
    let mut s = t.trim();
    let mut negative = false;
    if let Some(inner) = s.strip_prefix('(').and_then(|x| x.strip_suffix(')')) {
        negative = true;
        s = inner.trim();
    }
    if let Some(rest) = s.strip_prefix('-') {
        negative = !negative;
        s = rest.trim_start();
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest.trim_start();
    }
    s = s.strip_suffix('%').map(str::trim_end).unwrap_or(s);
    let symbols = symbol
        .filter(|x| !x.trim().is_empty())
        .map(str::trim)
        .into_iter()
        .chain(CURRENCY_SYMBOLS);
    for sym in symbols {
        if let Some(rest) = s.strip_prefix(sym) {
            s = rest.trim_start();
            // A sign after the symbol: `$-5`.
            if let Some(rest) = s.strip_prefix('-') {
                negative = !negative;
                s = rest;
            }
            break;
        }
        if let Some(rest) = s.strip_suffix(sym) {
            s = rest.trim_end();
            break;
        }
    }
    let digits: String = s
        .chars()
        .filter(|c| !matches!(c, ' ' | '\u{a0}' | '\u{202f}' | '\''))
        .collect();
    let plain = plain_number(&digits)?;
    if !digits
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | ',' | 'e' | 'E' | '+' | '-'))
        || !digits
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.')
    {
        return None;
    }
    let n: f64 = plain.parse().ok()?;
    n.is_finite().then_some(if negative { -n } else { n })
}

/// Digits with `.` as the only decimal mark: with both `,` and `.` the
/// last one is the decimal mark; a lone `,` is a thousands separator when
/// every group after it has three digits (`1,200`), else the decimal mark
/// (`3,5`); repeated `.` in groups of three are thousands separators.
fn plain_number(s: &str) -> Option<String> {
    let grouped = |sep: char| {
        let mut parts = s.split(sep);
        let first = parts.next().unwrap_or("");
        !first.is_empty()
            && first.len() <= 3
            && parts.all(|p| p.len() == 3 && p.bytes().all(|b| b.is_ascii_digit()))
    };
    let (commas, dots) = (s.matches(',').count(), s.matches('.').count());
    Some(match (commas, dots) {
        (0, 0) | (0, 1) => s.to_owned(),
        (0, _) if grouped('.') => s.replace('.', ""),
        (0, _) => return None,
        (_, 0) if grouped(',') => s.replace(',', ""),
        (1, 0) => s.replace(',', "."),
        (_, 0) => return None,
        _ => {
            let (last_comma, last_dot) = (s.rfind(',')?, s.rfind('.')?);
            if last_dot > last_comma && dots == 1 {
                s.replace(',', "")
            } else if last_comma > last_dot && commas == 1 {
                s.replace('.', "").replace(',', ".")
            } else {
                return None;
            }
        }
    })
}

/// A date cell as the ISO text the write path reads (unchanged when it is
/// not one of the spellings this reads; the write path then refuses it).
pub fn date_text(t: &str, date_format: Option<&str>, has_time: bool) -> String {
    let (day, rest) = match t.find(['T', ' ']) {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, ""),
    };
    let iso_day = slashed_day(day, date_format == Some("eu")).unwrap_or_else(|| day.to_owned());
    if has_time {
        format!("{iso_day}{rest}")
    } else if filter_lang::dates::parse_day(&iso_day).is_some()
        && (rest.is_empty() || rest.starts_with('T') || rest.starts_with(' '))
    {
        iso_day
    } else {
        t.to_owned()
    }
}

/// `D/M/YYYY` (day first) or `M/D/YYYY` as `YYYY-MM-DD`; `-` and `.` may
/// separate too. `None` when `s` is not such a date.
fn slashed_day(s: &str, day_first: bool) -> Option<String> {
    let sep = ['/', '.', '-'].into_iter().find(|c| s.contains(*c))?;
    let parts: Vec<&str> = s.split(sep).collect();
    let [a, b, y] = parts.as_slice() else {
        return None;
    };
    let all_digits = |p: &str| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit());
    if y.len() != 4 || a.len() > 2 || b.len() > 2 || ![a, b, y].iter().all(|p| all_digits(p)) {
        return None;
    }
    let (d, m) = if day_first { (a, b) } else { (b, a) };
    let (d, m): (u32, u32) = (d.parse().ok()?, m.parse().ok()?);
    Some(format!("{y}-{m:02}-{d:02}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(costume: Costume, options: Value) -> FieldRow {
        FieldRow {
            id: "fld_x".into(),
            table_id: "tbl_x".into(),
            name: "F".into(),
            costume,
            options: options.as_object().cloned().unwrap_or_default(),
            position: 0,
            sql_type: None,
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn numbers_with_separators_symbols_and_signs() {
        let n = |t: &str| number(t, None);
        assert_eq!(n("12"), Some(12.0));
        assert_eq!(n("-3.5"), Some(-3.5));
        assert_eq!(n("1,234.5"), Some(1234.5));
        assert_eq!(n("1.234,5"), Some(1234.5));
        assert_eq!(n("1,200"), Some(1200.0));
        assert_eq!(n("1,234,567"), Some(1_234_567.0));
        assert_eq!(n("1.234.567"), Some(1_234_567.0));
        assert_eq!(n("3,5"), Some(3.5));
        assert_eq!(n("1 234"), Some(1234.0));
        assert_eq!(n("1'234.50"), Some(1234.5));
        assert_eq!(n("$12.00"), Some(12.0));
        assert_eq!(n("-£4"), Some(-4.0));
        assert_eq!(n("$-4"), Some(-4.0));
        assert_eq!(n("12 €"), Some(12.0));
        assert_eq!(n("(12.50)"), Some(-12.5));
        assert_eq!(n("12%"), Some(12.0));
        assert_eq!(n("3.5 %"), Some(3.5));
        assert_eq!(n("1e3"), Some(1000.0));
        assert_eq!(number("CHF 12", Some("CHF")), Some(12.0));
        for bad in [
            "abc", "1,2,3", "1.2.3", "inf", "NaN", "12abc", "--1", "1,23.4,5", "",
        ] {
            assert_eq!(n(bad), None, "{bad}");
        }
    }

    #[test]
    fn checkbox_spellings() {
        for yes in ["true", "TRUE", "Yes", "y", "1", "checked", "on", "X"] {
            assert_eq!(checkbox(yes), Some(true), "{yes}");
        }
        for no in ["false", "No", "n", "0", "unchecked", "OFF"] {
            assert_eq!(checkbox(no), Some(false), "{no}");
        }
        assert_eq!(checkbox("maybe"), None);
    }

    #[test]
    fn dates() {
        assert_eq!(date_text("2024-01-31", None, false), "2024-01-31");
        assert_eq!(date_text("01/31/2024", None, false), "2024-01-31");
        assert_eq!(date_text("31/01/2024", Some("eu"), false), "2024-01-31");
        assert_eq!(date_text("31.01.2024", Some("eu"), false), "2024-01-31");
        assert_eq!(date_text("2024-01-31T10:30:00", None, false), "2024-01-31");
        assert_eq!(
            date_text("2024-01-31 10:30", None, true),
            "2024-01-31 10:30"
        );
        assert_eq!(date_text("1/2/2024 10:30", None, true), "2024-01-02 10:30");
        // Not a date: passed through for the write path to refuse.
        assert_eq!(date_text("soon", None, false), "soon");
        assert_eq!(date_text("2024-02-30", None, false), "2024-02-30");
    }

    #[test]
    fn cells_per_costume() {
        let f = |c: Costume| field(c, json!({}));
        assert_eq!(cell_json(&f(Costume::Number), "  "), Value::Null);
        assert_eq!(cell_json(&f(Costume::Number), "1,200"), json!(1200.0));
        assert_eq!(cell_json(&f(Costume::Number), "n/a"), json!("n/a"));
        assert_eq!(
            cell_json(&field(Costume::Currency, json!({"symbol": "kr"})), "12 kr"),
            json!(12.0)
        );
        assert_eq!(cell_json(&f(Costume::Checkbox), "Yes"), json!(true));
        assert_eq!(cell_json(&f(Costume::Checkbox), "?"), json!("?"));
        assert_eq!(
            cell_json(&f(Costume::SingleLineText), " a b "),
            json!(" a b ")
        );
        assert_eq!(
            cell_json(&f(Costume::SingleSelect), " Open "),
            json!("Open")
        );
        assert_eq!(
            cell_json(&f(Costume::MultiSelect), "a, b,,c "),
            json!(["a", "b", "c"])
        );
        assert_eq!(cell_json(&f(Costume::Duration), "1:30"), json!("1:30"));
        assert_eq!(
            cell_json(
                &field(Costume::Date, json!({"date_format": "eu"})),
                "2/1/2024"
            ),
            json!("2024-01-02")
        );
    }
}
