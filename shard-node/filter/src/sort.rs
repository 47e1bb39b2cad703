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

/// Most terms a sort (the `sort` parameter or a view's `sorts`) may have.
/// The keyset condition grows with the square of the number of terms, and
/// a term after the first few rarely changes an order; 32 is far above
/// what a person sorts by and keeps the resume condition at a few hundred
/// comparisons.
pub const MAX_SORT_TERMS: usize = 32;

/// Characters of a text key that the ordering compares first (and that a
/// view's sort index holds): `left(col, 500)` is at most 2,000 bytes, under
/// the 2,704 bytes a btree entry may take, so the index accepts any text.
/// Text keys order by `(left(col, N), col)`, which is the order of `col`
/// itself under a code-point collation (the cluster's `C.UTF-8`) and a
/// total order consistent with the keyset condition under any other.
pub const SORT_PREFIX_CHARS: usize = 500;

fn too_many_terms(path: &str, n: usize) -> Error {
    Error::new(
        path,
        format!("A sort may have at most {MAX_SORT_TERMS} terms; this one has {n}."),
    )
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
    let n = text.split(',').count();
    if n > MAX_SORT_TERMS {
        return Err(too_many_terms("sort", n));
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
        if items.len() > MAX_SORT_TERMS {
            return Err(too_many_terms("view.sorts", items.len()));
        }
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

    /// What this ordering is, by field ids and directions (`fld_a+,fld_b-`):
    /// part of a bookmark's fingerprint, stable across renames and moves.
    pub fn fingerprint(&self, schema: &Schema) -> String {
        let mut out = String::new();
        for t in &self.terms {
            out.push_str(&schema.fields[t.field].id);
            out.push(if t.desc { '-' } else { '+' });
            out.push(',');
        }
        out
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
                let mut prefixed = false;
                let (expr, ty) = match (&f.storage, &f.value_order) {
                    (Storage::SingleSelect { choices }, _) => (
                        ordered(params, choices.iter().map(|c| c.id.clone()).collect()),
                        KeyType::Int,
                    ),
                    (Storage::Text | Storage::LongText, Some(order)) => {
                        (ordered(params, order.clone()), KeyType::Int)
                    }
                    (Storage::Text | Storage::LongText, None) => {
                        prefixed = true;
                        (col, KeyType::Text)
                    }
                    (Storage::Number, _) => (col, KeyType::Numeric),
                    (Storage::Date { include_time: false }, _) => (col, KeyType::Date),
                    (Storage::Date { include_time: true }, _) => (col, KeyType::Timestamp),
                    // false before true; never set is a blank (null) like any other.
                    (Storage::Checkbox, _) => (col, KeyType::Bool),
                    // Unsortable kinds are refused when parsing.
                    _ => ("NULL::text".to_owned(), KeyType::Text),
                };
                SortKey {
                    expr,
                    desc: t.desc,
                    ty,
                    prefixed,
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
    /// A text key ordered by `(left(expr, SORT_PREFIX_CHARS), expr)`; see
    /// [`SORT_PREFIX_CHARS`].
    pub prefixed: bool,
}

impl SortKey {
    /// `left(expr, N)` of a prefixed key.
    fn prefix_of(&self, e: &str) -> String {
        format!("left({e}, {SORT_PREFIX_CHARS})")
    }

    /// What an index on this key is built on and a seek bound compares:
    /// the prefix of a prefixed key, else the expression itself.
    pub fn leading(&self) -> String {
        if self.prefixed {
            self.prefix_of(&self.expr)
        } else {
            self.expr.clone()
        }
    }
}

/// The ordering of one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortPlan {
    pub keys: Vec<SortKey>,
    id: String,
}

impl SortPlan {
    /// This plan over the output of [`Self::page_sql`] aliased `alias`:
    /// each key is its `"__fl_k<i>"` column and the id its `"__fl_id"`
    /// (to order or bookmark the page's rows outside the limited scan).
    pub fn over(&self, alias: &str) -> SortPlan {
        SortPlan {
            keys: self
                .keys
                .iter()
                .enumerate()
                .map(|(i, k)| SortKey {
                    expr: format!("\"{alias}\".\"__fl_k{i}\""),
                    ..k.clone()
                })
                .collect(),
            id: format!("\"{alias}\".\"__fl_id\""),
        }
    }

    /// The ORDER BY list (without the words ORDER BY), id last.
    pub fn order_by(&self) -> String {
        let mut parts: Vec<String> = self
            .keys
            .iter()
            .flat_map(|k| {
                let dir = if k.desc {
                    "DESC NULLS FIRST"
                } else {
                    "ASC NULLS LAST"
                };
                let mut parts = Vec::with_capacity(2);
                if k.prefixed {
                    parts.push(format!("{} {dir}", k.leading()));
                }
                parts.push(format!("{} {dir}", k.expr));
                parts
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
    /// this plan's order, as one boolean expression ([`Resume::condition`]).
    /// `order` is the caller's fingerprint of where the ordering came from
    /// (see [`Bookmark::order`]); a bookmark made under another ordering
    /// source or another number of terms is refused.
    pub fn resume_after(
        &self,
        bookmark: &Bookmark,
        order: &str,
        params: &mut Params,
    ) -> Result<String, Error> {
        Ok(self.resume(bookmark, order, params)?.condition())
    }

    /// The rows strictly after the bookmarked row, split where the first
    /// key's NULLs are, so that each part is a range an index on the first
    /// key can seek to (see [`Resume`]); [`Self::page_sql`] turns it into
    /// a page. Refusals as [`Self::resume_after`].
    pub fn resume(
        &self,
        bookmark: &Bookmark,
        order: &str,
        params: &mut Params,
    ) -> Result<Resume, Error> {
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
            // Strictly after `p` in (prefix, value) order: a larger prefix,
            // or the same prefix and a larger value.
            let beyond = |op: &str, p: &str| {
                if k.prefixed {
                    let (l, lp) = (k.prefix_of(e), k.prefix_of(p));
                    format!("({l} {op} {lp} OR ({l} = {lp} AND {e} {op} {p}))")
                } else {
                    format!("{e} {op} {p}")
                }
            };
            let after = match (k.desc, p) {
                (false, Some(p)) => Some(format!("({} OR {e} IS NULL)", beyond(">", p))),
                (false, None) => None,
                (true, Some(p)) => Some(beyond("<", p)),
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
        // The lexicographic disjunction alone is not an index range, so the
        // first key gets a redundant bound an index on it can seek to, and
        // the rows on the other side of its NULLs become a second part:
        // ascending (NULLs last) from a value: [v, last value], then the
        // NULLs; ascending from NULL: the NULLs only; descending (NULLs
        // first) from a value: [v, last value]; descending from NULL: the
        // NULLs, then every value.
        let any = disjuncts.join(" OR ");
        let (Some(k), Some(p)) = (self.keys.first(), placeholders.first()) else {
            return Ok(Resume {
                seek: format!("({any})"),
                then: None,
            });
        };
        // Bounds on what an index on the first key holds (its prefix for
        // text), so the index can seek to them.
        let e = &k.leading();
        let bound = |p: &str| {
            if k.prefixed {
                k.prefix_of(p)
            } else {
                p.to_owned()
            }
        };
        Ok(match (k.desc, p) {
            (false, Some(p)) => Resume {
                seek: format!("({e} >= {} AND ({any}))", bound(p)),
                then: Some(format!("({e} IS NULL)")),
            },
            (true, Some(p)) => Resume {
                seek: format!("({e} <= {} AND ({any}))", bound(p)),
                then: None,
            },
            (false, None) => Resume {
                seek: format!("({e} IS NULL AND ({any}))"),
                then: None,
            },
            (true, None) => Resume {
                seek: format!("({e} IS NULL AND ({any}))"),
                then: Some(format!("({e} IS NOT NULL)")),
            },
        })
    }

    /// One page in this plan's order:
    ///
    /// `SELECT {columns}, <key i> AS "__fl_k<i>", …, <id> AS "__fl_id"
    ///  FROM {from} WHERE {condition} [AND <resume>] ORDER BY … LIMIT {limit}`
    ///
    /// `columns`, `from` and `condition` are the caller's SQL over the row
    /// alias the plan was made for; `limit` is SQL (a number or a
    /// placeholder). The key and id columns come after the caller's (output
    /// names starting `__fl_` are reserved). When the resume point has a
    /// second part ([`Resume::then`]) the statement reads the first part
    /// (an index seek) with the limit, and the second only when the first
    /// came short (a one-time filter), then orders the at most `2 × limit`
    /// rows and limits again: the same rows as `WHERE condition AND
    /// resume.condition()`, without walking an index from its start.
    pub fn page_sql(
        &self,
        columns: &str,
        from: &str,
        condition: &str,
        resume: Option<&Resume>,
        limit: &str,
    ) -> String {
        let mut cols = columns.to_owned();
        for (i, k) in self.keys.iter().enumerate() {
            cols.push_str(&format!(", {} AS \"__fl_k{i}\"", k.expr));
        }
        cols.push_str(&format!(", {} AS \"__fl_id\"", self.id));
        let order = self.order_by();
        let select = |cond: &str| {
            format!("SELECT {cols} FROM {from} WHERE {cond} ORDER BY {order} LIMIT {limit}")
        };
        let Some(resume) = resume else {
            return select(condition);
        };
        let first = select(&format!("{condition} AND {}", resume.seek));
        let Some(then) = &resume.then else {
            return first;
        };
        let second = select(&format!(
            "(SELECT count(*) FROM \"__fl_a\") < {limit} AND {condition} AND {then}"
        ));
        let merged = SortPlan {
            keys: self
                .keys
                .iter()
                .enumerate()
                .map(|(i, k)| SortKey {
                    expr: format!("\"__fl_p\".\"__fl_k{i}\""),
                    ..k.clone()
                })
                .collect(),
            id: "\"__fl_p\".\"__fl_id\"".to_owned(),
        };
        format!(
            "WITH \"__fl_a\" AS MATERIALIZED ({first}) \
             SELECT * FROM (SELECT * FROM \"__fl_a\" UNION ALL ({second})) AS \"__fl_p\" \
             ORDER BY {} LIMIT {limit}",
            merged.order_by()
        )
    }
}

/// Where a page resumes: the rows strictly after a bookmarked row, as one
/// or two disjoint parts in order. `seek` bounds the first sort key from
/// the bookmarked value (`key >= v` ascending, `key <= v` descending,
/// `key IS NULL` from a NULL), so an index on it starts there; `then`, when
/// present, holds rows that all come after every `seek` row: the NULLs
/// after the values ascending, the values after the NULLs descending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    pub seek: String,
    pub then: Option<String>,
}

impl Resume {
    /// Both parts as one boolean expression.
    pub fn condition(&self) -> String {
        match &self.then {
            Some(then) => format!("({} OR {then})", self.seek),
            None => self.seek.clone(),
        }
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
