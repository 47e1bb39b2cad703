//! The `sort` parameter: parsing, ORDER BY, and the keyset condition that
//! resumes after a bookmarked row under exactly the same ordering.
//!
//! Every term orders by a *key expression*: ascending puts NULL (empty)
//! last, descending puts it first, and the record id ascending is always the
//! final tiebreak, so the order is total and keyset paging is exact.

use serde_json::Value;

use crate::bookmark::Bookmark;
use crate::dates::parse_day;
use crate::error::Error;
use crate::schema::{Schema, Storage};
use crate::sql::{quote_ident, Params, SqlValue};

/// One term: a field (schema index) and a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortTerm {
    pub field: usize,
    pub desc: bool,
}

/// A parsed sort, in application order (without the id tiebreak).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sort {
    pub terms: Vec<SortTerm>,
}

const SORTABLE: &str = "text, long text, number, date, checkbox and single select";

fn check_sortable(schema: &Schema, field: usize, path: &str) -> Result<(), Error> {
    let f = &schema.fields[field];
    if f.sortable() {
        Ok(())
    } else {
        Err(Error::new(
            path,
            format!(
                "Field '{}' ({}) cannot be sorted; sortable fields are {SORTABLE}.",
                f.name, f.costume
            ),
        ))
    }
}

/// `s` without a case-insensitive `suffix`, if it has it.
fn strip_suffix_ci<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
    let cut = s.len().checked_sub(suffix.len())?;
    if s.is_char_boundary(cut) && s[cut..].eq_ignore_ascii_case(suffix) {
        Some(&s[..cut])
    } else {
        None
    }
}

/// Parse the `sort` parameter: a comma list of `Field`, `-Field`,
/// `Field:desc`, `Field:asc` (suffix case-insensitive; `-` and a suffix do
/// not combine). A blank parameter is no sort.
pub fn parse_sort(text: &str, schema: &Schema) -> Result<Sort, Error> {
    let mut terms = Vec::new();
    if text.trim().is_empty() {
        return Ok(Sort { terms });
    }
    for (i, raw) in text.split(',').enumerate() {
        let path = format!("sort[{i}]");
        let term = raw.trim();
        if term.is_empty() {
            return Err(Error::new(path, "Empty sort term."));
        }
        let (rest, minus) = match term.strip_prefix('-') {
            Some(r) => (r, true),
            None => (term, false),
        };
        let (reference, suffix_desc) = if let Some(r) = strip_suffix_ci(rest, ":desc") {
            (r, Some(true))
        } else if let Some(r) = strip_suffix_ci(rest, ":asc") {
            (r, Some(false))
        } else {
            (rest, None)
        };
        let reference = reference.trim();
        let desc = minus || suffix_desc == Some(true);
        let resolved = if minus && suffix_desc.is_some() {
            Err(Error::new(
                &path,
                format!(
                    "Sort term '{term}' mixes '-Field' and 'Field:{}'; use one form.",
                    if suffix_desc == Some(true) {
                        "desc"
                    } else {
                        "asc"
                    }
                ),
            ))
        } else {
            schema
                .resolve(reference, &path)
                .map(|f| SortTerm { field: f, desc })
        };
        // A field whose own name looks like a form ("-Total", "a:desc").
        let sort_term = match resolved {
            Ok(t) => t,
            Err(e) => match schema.resolve(term, &path) {
                Ok(f) if reference != term => SortTerm {
                    field: f,
                    desc: false,
                },
                _ => return Err(e),
            },
        };
        check_sortable(schema, sort_term.field, &path)?;
        terms.push(sort_term);
    }
    Ok(Sort { terms })
}

impl Sort {
    /// A view's stored `config.sorts`: `[{fieldId, dir}]` with `dir` `asc`
    /// (default) or `desc`.
    pub fn from_view_config(value: &Value, schema: &Schema) -> Result<Sort, Error> {
        let Value::Array(items) = value else {
            return Err(Error::new("view.sorts", "A view's sorts must be a list."));
        };
        let mut terms = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = format!("view.sorts[{i}]");
            let reference = item
                .get("fieldId")
                .and_then(Value::as_str)
                .ok_or_else(|| Error::new(&path, "A view sort needs 'fieldId'."))?;
            let desc = match item.get("dir").and_then(Value::as_str) {
                None => false,
                Some(d) if d.eq_ignore_ascii_case("asc") => false,
                Some(d) if d.eq_ignore_ascii_case("desc") => true,
                Some(d) => return Err(Error::new(&path, format!("Unknown sort direction '{d}'."))),
            };
            let field = schema.resolve(reference, &path)?;
            check_sortable(schema, field, &path)?;
            terms.push(SortTerm { field, desc });
        }
        Ok(Sort { terms })
    }

    /// Key expressions for the record table aliased `row_alias`. Parameters
    /// (choice orders) are pushed once here and shared by the ORDER BY and
    /// the keyset condition, so build one plan per statement.
    pub fn plan(&self, schema: &Schema, row_alias: &str, params: &mut Params) -> SortPlan {
        let row = quote_ident(row_alias);
        let keys = self
            .terms
            .iter()
            .map(|t| {
                let f = &schema.fields[t.field];
                let col = f.column_sql(&row);
                let ordered = |params: &mut Params, order: Vec<String>| {
                    let p = params.push(SqlValue::TextArray(order));
                    format!(
                        "(CASE WHEN {col} IS NULL THEN NULL ELSE COALESCE(array_position({p}, {col}), 2147483647) END)"
                    )
                };
                let (expr, ty) = match (&f.storage, &f.value_order) {
                    (Storage::SingleSelect { choices }, _) => (
                        ordered(params, choices.iter().map(|c| c.id.clone()).collect()),
                        KeyType::Int,
                    ),
                    (Storage::Text | Storage::LongText, Some(order)) => {
                        (ordered(params, order.clone()), KeyType::Int)
                    }
                    (Storage::Text | Storage::LongText, None) => (col, KeyType::Text),
                    (Storage::Number, _) => (col, KeyType::Numeric),
                    (Storage::Date { include_time: false }, _) => (col, KeyType::Date),
                    (Storage::Date { include_time: true }, _) => (col, KeyType::Timestamp),
                    // Never-set reads as unchecked: one value, not a blank.
                    (Storage::Checkbox, _) => (format!("COALESCE({col}, FALSE)"), KeyType::Bool),
                    // Unsortable kinds are refused when parsing.
                    _ => ("NULL::text".to_owned(), KeyType::Text),
                };
                SortKey {
                    expr,
                    desc: t.desc,
                    ty,
                }
            })
            .collect();
        SortPlan {
            keys,
            id: format!("{row}.\"id\""),
        }
    }
}

/// How a key's value is carried in a bookmark and bound on resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    Text,
    Numeric,
    Date,
    Timestamp,
    Bool,
    Int,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    /// SQL expression ordered on.
    pub expr: String,
    pub desc: bool,
    pub ty: KeyType,
}

/// The ordering of one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortPlan {
    pub keys: Vec<SortKey>,
    id: String,
}

impl SortPlan {
    /// The ORDER BY list (without the words ORDER BY), id last.
    pub fn order_by(&self) -> String {
        let mut parts: Vec<String> = self
            .keys
            .iter()
            .map(|k| {
                if k.desc {
                    format!("{} DESC NULLS FIRST", k.expr)
                } else {
                    format!("{} ASC NULLS LAST", k.expr)
                }
            })
            .collect();
        parts.push(format!("{} ASC", self.id));
        parts.join(", ")
    }

    /// Expressions to add to the SELECT list, one per key, each yielding
    /// text (or NULL) in the form a bookmark carries; read them back as
    /// `Option<String>` from the last row of a page.
    pub fn bookmark_columns(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| match k.ty {
                KeyType::Text => k.expr.clone(),
                KeyType::Numeric | KeyType::Bool | KeyType::Int => format!("({})::text", k.expr),
                KeyType::Date => format!("to_char({}, 'YYYY-MM-DD')", k.expr),
                KeyType::Timestamp => format!(
                    "to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
                    k.expr
                ),
            })
            .collect()
    }

    /// The condition selecting rows strictly after the bookmarked row in
    /// this plan's order. `order` is the caller's fingerprint of where the
    /// ordering came from (see [`Bookmark::order`]); a bookmark made under
    /// another ordering source or another number of terms is refused.
    pub fn resume_after(
        &self,
        bookmark: &Bookmark,
        order: &str,
        params: &mut Params,
    ) -> Result<String, Error> {
        if bookmark.order != order {
            return Err(Error::new(
                "bookmark",
                "The bookmark belongs to a different view's ordering.",
            ));
        }
        if bookmark.values.len() != self.keys.len() {
            return Err(Error::new(
                "bookmark",
                format!(
                    "The bookmark was made for {} sort term(s); this request sorts by {}.",
                    bookmark.values.len(),
                    self.keys.len()
                ),
            ));
        }
        let typed: Vec<Option<SqlValue>> = self
            .keys
            .iter()
            .zip(&bookmark.values)
            .map(|(k, v)| v.as_deref().map(|s| typed_value(k.ty, s)).transpose())
            .collect::<Result<_, _>>()?;
        let placeholders: Vec<Option<String>> = typed
            .into_iter()
            .map(|v| v.map(|v| params.push(v)))
            .collect();
        let id = params.push(SqlValue::Text(bookmark.id.clone()));

        let mut disjuncts = Vec::new();
        let mut equal_prefix: Vec<String> = Vec::new();
        for (k, p) in self.keys.iter().zip(&placeholders) {
            let e = &k.expr;
            let after = match (k.desc, p) {
                (false, Some(p)) => Some(format!("({e} > {p} OR {e} IS NULL)")),
                (false, None) => None,
                (true, Some(p)) => Some(format!("{e} < {p}")),
                (true, None) => Some(format!("{e} IS NOT NULL")),
            };
            if let Some(after) = after {
                disjuncts.push(conj(&equal_prefix, after));
            }
            equal_prefix.push(match p {
                Some(p) => format!("{e} = {p}"),
                None => format!("{e} IS NULL"),
            });
        }
        disjuncts.push(conj(&equal_prefix, format!("{} > {id}", self.id)));
        // A redundant bound on the first key that an index on it can seek
        // to (the disjunction alone is not sargable): descending, every
        // later row has the key at most the bookmarked value.
        let any = disjuncts.join(" OR ");
        Ok(match (self.keys.first(), placeholders.first()) {
            (Some(k), Some(Some(p))) if k.desc => format!("({} <= {p} AND ({any}))", k.expr),
            _ => format!("({any})"),
        })
    }
}

fn conj(prefix: &[String], last: String) -> String {
    if prefix.is_empty() {
        format!("({last})")
    } else {
        format!("({} AND {last})", prefix.join(" AND "))
    }
}

fn bad_value() -> Error {
    Error::new("bookmark", "The bookmark is not valid for this sort.")
}

/// A bookmark's text value as the key's typed parameter; anything
/// PostgreSQL would not parse is refused here, as a 400.
fn typed_value(ty: KeyType, s: &str) -> Result<SqlValue, Error> {
    if s.contains('\0') {
        return Err(bad_value());
    }
    match ty {
        KeyType::Text => Ok(SqlValue::Text(s.to_owned())),
        KeyType::Numeric if is_numeric_text(s) => Ok(SqlValue::Numeric(s.to_owned())),
        KeyType::Date => parse_day(s)
            .or_else(|| chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok())
            .map(SqlValue::Date)
            .ok_or_else(bad_value),
        KeyType::Timestamp => chrono::DateTime::parse_from_rfc3339(s)
            .map(|t| SqlValue::Timestamp(t.with_timezone(&chrono::Utc)))
            .map_err(|_| bad_value()),
        KeyType::Bool if s == "true" => Ok(SqlValue::Bool(true)),
        KeyType::Bool if s == "false" => Ok(SqlValue::Bool(false)),
        KeyType::Int => s.parse::<i64>().map(SqlValue::Int).map_err(|_| bad_value()),
        _ => Err(bad_value()),
    }
}

/// What PostgreSQL's numeric input accepts that numeric output produces:
/// `[-]digits[.digits]`, exponents, NaN and the infinities.
fn is_numeric_text(s: &str) -> bool {
    if matches!(s, "NaN" | "Infinity" | "-Infinity") {
        return true;
    }
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'-' | b'+')) {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i - int_start;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        digits += i - f;
    }
    if digits == 0 || digits > 1000 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        let e = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == e || i - e > 3 {
            return false;
        }
    }
    i == b.len()
}
