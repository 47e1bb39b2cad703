//! The formula language of formula fields (see `FORMULA.md` beside this
//! crate for the language itself).
//!
//! A formula is parsed ([`parse`]), checked against the table's fields
//! ([`Schema`]) and compiled ([`compile`]) to one PostgreSQL expression for
//! a `GENERATED ALWAYS AS (<sql>) STORED` column. The expression is
//! IMMUTABLE (only immutable functions and operators, no clock, no
//! time-zone or locale dependence) and never raises for any cell values:
//! every operation that could fail (division by zero, bad casts, overflow,
//! out-of-range dates, huge texts) yields NULL instead, so a record write
//! never fails because of a formula.
//!
//! User text reaches the SQL only through [`quote_literal`] and column
//! names only through [`quote_ident`].

mod compile;
mod error;
mod functions;
mod lexer;
mod parser;
mod schema;
mod sql;

pub use compile::{MAX_INLINE_DEPTH, MAX_SQL_LEN};
pub use error::FormulaError;
pub use functions::{FUNCTIONS, MAX_REPT_LEN, MAX_SUBSTITUTE_LEN};
pub use parser::{
    BinaryOp, Expr, ExprKind, Formula, Span, UnaryOp, MAX_DEPTH, MAX_LEN, MAX_TREE_DEPTH,
};
pub use schema::{Choice, FieldKind, Schema, SchemaField};
pub use sql::{quote_ident, quote_literal};

use compile::{result_value, Ctx, Ty};

/// Type of a formula's value, which decides its concrete costume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ResultType {
    /// `formula_number`; also true/false results, stored as 1/0.
    Number,
    /// `formula_text`; also a formula that is always blank.
    Text,
    /// `formula_date`; `with_time` means a `timestamptz` column.
    Date { with_time: bool },
}

impl ResultType {
    /// The concrete costume (`type`) of a formula field with this result.
    pub fn costume(self) -> &'static str {
        match self {
            ResultType::Number => "formula_number",
            ResultType::Text => "formula_text",
            ResultType::Date { .. } => "formula_date",
        }
    }

    /// The column type the generated column must be declared with.
    pub fn sql_type(self) -> &'static str {
        match self {
            ResultType::Number => "numeric",
            ResultType::Text => "text",
            ResultType::Date { with_time: false } => "date",
            ResultType::Date { with_time: true } => "timestamptz",
        }
    }
}

/// A compiled formula.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Compiled {
    /// Expression for `ALTER TABLE t ADD COLUMN c <result.sql_type()>
    /// GENERATED ALWAYS AS (<sql>) STORED`; already of that type.
    pub sql: String,
    pub result: ResultType,
    /// Fields this formula names directly, in order of first mention,
    /// without repeats (the server's `options.referenced_field_ids`).
    pub referenced_field_ids: Vec<String>,
    /// Fields whose COLUMNS the SQL reads, including through inlined formula
    /// fields: the generated column must be rebuilt when one of them changes
    /// type or (single select) choices, and blocks their deletion.
    pub columns_read: Vec<String>,
    /// The formula as it must be stored: the user's text with every field
    /// reference rewritten as `{Exact Name}`.
    pub canonical: String,
}

/// Parse a formula. Errors carry the character position.
pub fn parse(src: &str) -> Result<Formula, FormulaError> {
    match parser::parse_source(src) {
        Ok(root) => Ok(Formula {
            source: src.to_string(),
            root,
        }),
        Err(e) => Err(e.into_public(src)),
    }
}

/// `{name}` with `\`, `{` and `}` escaped by a backslash.
pub fn brace(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 2);
    s.push('{');
    for c in name.chars() {
        if matches!(c, '\\' | '{' | '}') {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('}');
    s
}

fn collect_refs<'e>(e: &'e Expr, out: &mut Vec<(&'e str, Span)>) {
    match &e.kind {
        ExprKind::Field { name, .. } => out.push((name, e.span)),
        ExprKind::Unary { operand, .. } => collect_refs(operand, out),
        ExprKind::Binary { left, right, .. } => {
            collect_refs(left, out);
            collect_refs(right, out);
        }
        ExprKind::Call { args, .. } => args.iter().for_each(|a| collect_refs(a, out)),
        ExprKind::Number(_) | ExprKind::Text(_) | ExprKind::Bool(_) => {}
    }
}

/// Rewrite each reference's span with `name_of(reference)`, keeping the rest
/// of the user's text (spacing, case of function names) as written.
fn rewrite_refs(f: &Formula, mut name_of: impl FnMut(&str) -> String) -> String {
    let mut refs = Vec::new();
    collect_refs(&f.root, &mut refs);
    refs.sort_by_key(|(_, s)| s.start);
    let mut out = String::with_capacity(f.source.len() + 16);
    let mut last = 0;
    for (name, span) in refs {
        out.push_str(&f.source[last..span.start]);
        out.push_str(&name_of(name));
        last = span.end;
    }
    out.push_str(&f.source[last..]);
    out
}

/// The canonical text of a parsed formula: every reference that names a
/// field is written `{Exact Name}` (bare names braced, `{ Price }` becomes
/// `{Price}`); unknown names are braced as written.
pub fn canonical(formula: &Formula, schema: &Schema) -> String {
    rewrite_refs(formula, |name| match schema.resolve(name) {
        Some(f) => brace(&f.name),
        None => brace(name),
    })
}

/// The canonical text after field `field_id` is renamed to `new_name`
/// (`schema` holds the names before the rename). For rewriting dependent
/// formulas; works for any new name, braces and outer spaces included.
pub fn rename_references(
    formula: &Formula,
    schema: &Schema,
    field_id: &str,
    new_name: &str,
) -> String {
    rewrite_refs(formula, |name| match schema.resolve(name) {
        Some(f) if f.id == field_id => brace(new_name),
        Some(f) => brace(&f.name),
        None => brace(name),
    })
}

/// Compile `src` against `schema`. `this_field` is the id of the formula
/// field being created or edited, if it already has one: referring to it,
/// directly or through other formulas, is a cycle error (its stored
/// expression in `schema`, if any, is ignored).
pub fn compile(
    src: &str,
    schema: &Schema,
    this_field: Option<&str>,
) -> Result<Compiled, FormulaError> {
    let formula = parse(src)?;
    let mut cx = Ctx {
        schema,
        stack: vec![this_field.unwrap_or("").to_string()],
        referenced: Vec::new(),
        columns_read: Vec::new(),
    };
    let v = cx.expr(&formula.root).map_err(|e| e.into_public(src))?;
    let v = result_value(v);
    let (result, sql) = match v.ty {
        Ty::Number => (ResultType::Number, format!("CAST({} AS numeric)", v.sql)),
        Ty::Date => (
            ResultType::Date { with_time: false },
            format!("CAST({} AS date)", v.sql),
        ),
        Ty::DateTime => (
            ResultType::Date { with_time: true },
            format!("timezone('UTC', CAST({} AS timestamp))", v.sql),
        ),
        Ty::Text | Ty::Bool | Ty::Blank => (ResultType::Text, format!("CAST({} AS text)", v.sql)),
    };
    Ok(Compiled {
        sql,
        result,
        referenced_field_ids: cx.referenced,
        columns_read: cx.columns_read,
        canonical: canonical(&formula, schema),
    })
}
