//! SQL text building blocks: the one identifier quoting function and the
//! bound parameter list. Values never enter SQL text; every placeholder
//! carries an explicit cast so its PostgreSQL type is fixed by the text.

use chrono::{DateTime, NaiveDate, Utc};

/// Quote an identifier for PostgreSQL: wrap in double quotes, double any
/// double quote inside. NUL cannot appear in an identifier and is dropped.
pub fn quote_ident(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        match c {
            '"' => out.push_str("\"\""),
            '\0' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `"schema"."table"`
pub fn qualified(schema: &str, table: &str) -> String {
    format!("{}.{}", quote_ident(schema), quote_ident(table))
}

/// The ILIKE pattern matching `term` anywhere, with `%`, `_` and the
/// backslash escaped; use it as `col ILIKE $n ESCAPE E'\\'` (the filter's
/// `contains`, and the records `search` parameter).
pub fn contains_pattern(term: &str) -> String {
    let mut out = String::with_capacity(term.len() + 2);
    out.push('%');
    for c in term.chars() {
        if matches!(c, '\\' | '%' | '_') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// A bound parameter value. The SQL text casts each placeholder, so bind
/// each variant as the Rust type named here (tokio-postgres with chrono):
///
/// | variant | placeholder in SQL | bind as |
/// |---|---|---|
/// | `Text` | `$n::text` | `String` |
/// | `TextArray` | `$n::text[]` | `Vec<String>` |
/// | `Numeric` | `$n::numeric` | its [`crate::numeric::binary`] (a value beyond the binary format: `$n::text::numeric`, bound as its `String`) |
/// | `Bool` | `$n::boolean` | `bool` |
/// | `Int` | `$n::int8` | `i64` |
/// | `Date` | `$n::date` | `chrono::NaiveDate` |
/// | `Timestamp` | `$n::timestamptz` | `chrono::DateTime<Utc>` |
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Text(String),
    TextArray(Vec<String>),
    /// A decimal number as text, exactly as the client wrote it (a finite
    /// JSON number) or as PostgreSQL printed it (a bookmark).
    Numeric(String),
    Bool(bool),
    Int(i64),
    Date(NaiveDate),
    Timestamp(DateTime<Utc>),
}

impl SqlValue {
    fn cast(&self) -> &'static str {
        match self {
            SqlValue::Text(_) => "text",
            SqlValue::TextArray(_) => "text[]",
            SqlValue::Numeric(s) if crate::numeric::binary(s).is_some() => "numeric",
            SqlValue::Numeric(_) => "text::numeric",
            SqlValue::Bool(_) => "boolean",
            SqlValue::Int(_) => "int8",
            SqlValue::Date(_) => "date",
            SqlValue::Timestamp(_) => "timestamptz",
        }
    }
}

/// The parameters of one statement, numbered from a caller-given index so
/// the filter, the keyset condition and the ORDER BY can share a statement
/// with the caller's own parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    first: usize,
    values: Vec<SqlValue>,
}

impl Params {
    /// `first` is the number of the first placeholder this list hands out
    /// (`1` when the statement has no other parameters).
    pub fn new(first: usize) -> Self {
        Params {
            first: first.max(1),
            values: Vec::new(),
        }
    }

    /// Add a value; returns its cast placeholder, e.g. `$3::date`.
    pub fn push(&mut self, value: SqlValue) -> String {
        let n = self.first + self.values.len();
        let cast = value.cast();
        self.values.push(value);
        format!("${n}::{cast}")
    }

    /// The values in placeholder order.
    pub fn values(&self) -> &[SqlValue] {
        &self.values
    }

    pub fn into_values(self) -> Vec<SqlValue> {
        self.values
    }

    /// The number the next placeholder would get.
    pub fn next_index(&self) -> usize {
        self.first + self.values.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote_ident("fld_abc"), "\"fld_abc\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(qualified("db_x", "tbl_y"), "\"db_x\".\"tbl_y\"");
    }

    #[test]
    fn like_patterns() {
        assert_eq!(contains_pattern("a%b_c\\d"), "%a\\%b\\_c\\\\d%");
        assert_eq!(contains_pattern(""), "%%");
    }

    #[test]
    fn numbering() {
        let mut p = Params::new(4);
        assert_eq!(p.push(SqlValue::Text("a".into())), "$4::text");
        assert_eq!(p.push(SqlValue::Numeric("1.5".into())), "$5::numeric");
        assert_eq!(
            p.push(SqlValue::Numeric("1e99999".into())),
            "$6::text::numeric"
        );
        assert_eq!(p.next_index(), 7);
        assert_eq!(p.values().len(), 3);
    }
}
