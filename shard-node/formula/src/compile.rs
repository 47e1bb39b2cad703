//! Type inference and SQL generation, in one pass over the syntax tree.
//!
//! Each node becomes a [`Val`]: its type and a SQL expression of that type
//! built only from fixed text, [`crate::sql::quote_literal`] and
//! [`crate::sql::quote_ident`]. Internal SQL types: number `numeric`, text
//! `text`, bool `boolean`, date `date`, date-time `timestamp` (UTC wall
//! clock; `timestamptz` columns are read `AT TIME ZONE 'UTC'`, which is
//! immutable, unlike arithmetic on `timestamptz`).

use crate::error::{Res, SpanError};
use crate::parser::{parse_source, BinaryOp, Expr, ExprKind, UnaryOp};
use crate::schema::{FieldKind, Schema, SchemaField};
use crate::sql::{
    date_clamp, lit, num_clamp, number_literal, quote_ident, quote_literal, ts_clamp,
};

/// Longest compiled SQL accepted, in bytes. Guards duplicate their operands,
/// so deeply nested guarded functions grow fast; past this the formula is
/// refused as too complex.
pub const MAX_SQL_LEN: usize = 1 << 20;
/// Deepest chain of formula fields inlined into one another.
pub const MAX_INLINE_DEPTH: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    Number,
    Text,
    Bool,
    Date,
    DateTime,
    /// BLANK(): fits any type.
    Blank,
}

impl Ty {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Ty::Number => "number",
            Ty::Text => "text",
            Ty::Bool => "checkbox (true/false)",
            Ty::Date => "date",
            Ty::DateTime => "date with time",
            Ty::Blank => "blank",
        }
    }

    fn sql_type(self) -> &'static str {
        match self {
            Ty::Number => "numeric",
            Ty::Text | Ty::Blank => "text",
            Ty::Bool => "boolean",
            Ty::Date => "date",
            Ty::DateTime => "timestamp",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Val {
    pub ty: Ty,
    pub sql: String,
}

impl Val {
    pub(crate) fn new(ty: Ty, sql: String) -> Val {
        Val { ty, sql }
    }
}

/// State shared by a formula and the formulas inlined into it.
pub(crate) struct Ctx<'a> {
    pub schema: &'a Schema,
    /// Field ids being compiled, outermost first (cycle detection).
    pub stack: Vec<String>,
    /// Direct references of the outermost formula, in order, deduplicated.
    pub referenced: Vec<String>,
    /// Every field whose column the SQL reads (through inlining too).
    pub columns_read: Vec<String>,
}

fn push_unique(v: &mut Vec<String>, id: &str) {
    if !v.iter().any(|x| x == id) {
        v.push(id.to_string());
    }
}

impl<'a> Ctx<'a> {
    pub(crate) fn expr(&mut self, e: &Expr) -> Res<Val> {
        let v = self.expr_inner(e)?;
        if v.sql.len() > MAX_SQL_LEN {
            return Err(SpanError::new(
                e.span.start,
                "Formula is too complex: its compiled form is too large",
            ));
        }
        Ok(v)
    }

    fn expr_inner(&mut self, e: &Expr) -> Res<Val> {
        match &e.kind {
            ExprKind::Number(n) => Ok(Val::new(Ty::Number, number_literal(n))),
            ExprKind::Text(s) => match quote_literal(s) {
                Some(q) => Ok(Val::new(Ty::Text, q)),
                None => Err(SpanError::new(
                    e.span.start,
                    "Text may not contain the NUL character",
                )),
            },
            ExprKind::Bool(b) => Ok(Val::new(Ty::Bool, if *b { "true" } else { "false" }.into())),
            ExprKind::Field { name, .. } => self.field(name, e.span.start),
            ExprKind::Unary { op, operand } => {
                let v = self.expr(operand)?;
                let n = self.number(v, operand.span.start, "'-'")?;
                Ok(match op {
                    UnaryOp::Neg => Val::new(Ty::Number, format!("(-{})", n)),
                    UnaryOp::Plus => Val::new(Ty::Number, n),
                })
            }
            ExprKind::Binary { op, left, right } => {
                let l = self.expr(left)?;
                let r = self.expr(right)?;
                self.binary(*op, l, r, left.span.start, right.span.start, e)
            }
            ExprKind::Call {
                name,
                name_span,
                args,
            } => crate::functions::call(self, name, name_span.start, args),
        }
    }

    fn field(&mut self, name: &str, at: usize) -> Res<Val> {
        let Some(f) = self.schema.resolve(name) else {
            return Err(SpanError::new(at, format!("Unknown field '{name}'")));
        };
        let f: &SchemaField = f;
        if self.stack.len() == 1 {
            push_unique(&mut self.referenced, &f.id);
        }
        if let Some(pos) = self.stack.iter().position(|id| *id == f.id) {
            let names: Vec<String> = self.stack[pos..]
                .iter()
                .chain(std::iter::once(&f.id))
                .map(|id| {
                    let n = self.schema.by_id(id).map(|f| f.name.as_str()).unwrap_or(id);
                    crate::brace(n)
                })
                .collect();
            let msg = if names.len() == 2 {
                "A formula cannot reference itself".to_string()
            } else {
                format!(
                    "Formula fields reference each other in a cycle: {}",
                    names.join(" → ")
                )
            };
            return Err(SpanError::new(at, msg));
        }
        let col = || {
            quote_ident(&f.column).ok_or_else(|| {
                SpanError::new(at, format!("Field '{}' has no usable column", f.name))
            })
        };
        let val = match &f.kind {
            FieldKind::Number => Val::new(Ty::Number, num_clamp(&col()?)),
            FieldKind::Text => Val::new(Ty::Text, col()?),
            // A checkbox never written reads null but is unchecked: false
            // here, as in the filter's `is false`.
            FieldKind::Checkbox => Val::new(Ty::Bool, format!("COALESCE({}, false)", col()?)),
            FieldKind::Date { with_time: false } => Val::new(Ty::Date, date_clamp(&col()?)),
            FieldKind::Date { with_time: true } => Val::new(
                Ty::DateTime,
                ts_clamp(&format!("({} AT TIME ZONE 'UTC')", col()?)),
            ),
            FieldKind::SingleSelect { choices } => {
                let c = col()?;
                if choices.is_empty() {
                    Val::new(Ty::Text, "NULL::text".into())
                } else {
                    let mut s = format!("(CASE {c}");
                    for ch in choices {
                        let (Some(id), Some(name)) =
                            (quote_literal(&ch.id), quote_literal(&ch.name))
                        else {
                            return Err(SpanError::new(
                                at,
                                format!("Field '{}' has a choice with a NUL character", f.name),
                            ));
                        };
                        s.push_str(&format!(" WHEN {id} THEN {name}"));
                    }
                    s.push_str(" END)");
                    Val::new(Ty::Text, s)
                }
            }
            FieldKind::Formula { expression } => {
                if self.stack.len() > MAX_INLINE_DEPTH {
                    return Err(SpanError::new(
                        at,
                        format!(
                            "Formula fields are chained too deeply (at most {MAX_INLINE_DEPTH})"
                        ),
                    ));
                }
                self.stack.push(f.id.clone());
                let inner = parse_source(expression).and_then(|e| self.expr(&e).map(|v| (v, e)));
                self.stack.pop();
                match inner {
                    Ok((v, _)) => result_value(v),
                    Err(err) => {
                        let public = err.into_public(expression);
                        return Err(SpanError::new(
                            at,
                            format!(
                                "In formula field {}: {} (at character {})",
                                crate::brace(&f.name),
                                public.message,
                                public.position + 1
                            ),
                        ));
                    }
                }
            }
            FieldKind::NotReferencable { costume } => {
                return Err(SpanError::new(
                    at,
                    format!("Field '{}' ({costume}) cannot be used in a formula", f.name),
                ))
            }
        };
        if !matches!(f.kind, FieldKind::Formula { .. }) {
            push_unique(&mut self.columns_read, &f.id);
        }
        Ok(val)
    }

    /// `x` made non-constant for the planner (see [`Schema::with_row_column`]);
    /// same value. Used on one text input of every collation-sensitive
    /// operation.
    pub(crate) fn pin(&self, x: &str) -> String {
        match self.schema.row_column().and_then(quote_ident) {
            Some(col) => format!("(CASE WHEN {col} IS NOT NULL THEN {x} END)"),
            None => x.to_string(),
        }
    }

    /// Number (or checkbox as 1/0, or blank) as numeric SQL.
    pub(crate) fn number(&self, v: Val, at: usize, what: &str) -> Res<String> {
        match v.ty {
            Ty::Number => Ok(v.sql),
            Ty::Bool => Ok(bool_to_number(&v.sql)),
            Ty::Blank => Ok("NULL::numeric".into()),
            other => Err(SpanError::new(
                at,
                format!("{what} expects a number, got {}", other.name()),
            )),
        }
    }

    pub(crate) fn text(&self, v: Val, at: usize, what: &str) -> Res<String> {
        match v.ty {
            Ty::Text => Ok(v.sql),
            Ty::Blank => Ok("NULL::text".into()),
            other => Err(SpanError::new(
                at,
                format!("{what} expects text, got {}", other.name()),
            )),
        }
    }

    fn binary(&mut self, op: BinaryOp, l: Val, r: Val, la: usize, ra: usize, e: &Expr) -> Res<Val> {
        let sym = format!("'{}'", op.symbol());
        match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
                if op == BinaryOp::Add && (l.ty == Ty::Text || r.ty == Ty::Text) {
                    let at = if l.ty == Ty::Text { la } else { ra };
                    return Err(SpanError::new(
                        at,
                        "'+' expects numbers, got text (use & to join text)",
                    ));
                }
                let a = self.number(l, la, &sym)?;
                let b = self.number(r, ra, &sym)?;
                let raw = match op {
                    BinaryOp::Add => format!("({a} + {b})"),
                    BinaryOp::Sub => format!("({a} - {b})"),
                    BinaryOp::Mul => format!("({a} * {b})"),
                    _ => format!("({a} / NULLIF({b}, 0))"),
                };
                Ok(Val::new(Ty::Number, num_clamp(&raw)))
            }
            BinaryOp::Concat => Ok(Val::new(
                Ty::Text,
                format!("({} || {})", to_text(self, &l), to_text(self, &r)),
            )),
            BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge => {
                let sql_op = match op {
                    BinaryOp::Ne => "<>",
                    o => o.symbol(),
                };
                let eqish = matches!(op, BinaryOp::Eq | BinaryOp::Ne);
                // `x = BLANK()` tests for emptiness.
                if eqish && (l.ty == Ty::Blank || r.ty == Ty::Blank) {
                    let other = if l.ty == Ty::Blank { &r } else { &l };
                    let test = is_blank(self, other);
                    return Ok(Val::new(
                        Ty::Bool,
                        if op == BinaryOp::Eq {
                            test
                        } else {
                            format!("(NOT {test})")
                        },
                    ));
                }
                let (ty, a, b) = unify(l, r).map_err(|(a, b)| {
                    SpanError::new(
                        e.span.start,
                        format!("Cannot compare {} with {}", a.name(), b.name()),
                    )
                })?;
                let (a, b) = if ty == Ty::Text {
                    (
                        self.pin(&format!("COALESCE({a}, '')")),
                        format!("COALESCE({b}, '')"),
                    )
                } else {
                    (a, b)
                };
                Ok(Val::new(Ty::Bool, format!("({a} {sql_op} {b})")))
            }
        }
    }
}

pub(crate) fn bool_to_number(sql: &str) -> String {
    format!("(({sql})::integer)::numeric")
}

/// SQL that is true when the value is empty (NULL, or '' for text). Never NULL.
pub(crate) fn is_blank(cx: &Ctx, v: &Val) -> String {
    match v.ty {
        Ty::Text => format!("({} = '')", cx.pin(&format!("COALESCE({}, '')", v.sql))),
        Ty::Blank => "true".into(),
        _ => format!("(({}) IS NULL)", v.sql),
    }
}

/// Truthiness for conditions; never NULL. Numbers: non-zero; text:
/// non-empty; dates: present; blank: false.
pub(crate) fn truthy(cx: &Ctx, v: &Val) -> String {
    match v.ty {
        Ty::Bool => format!("COALESCE({}, false)", v.sql),
        Ty::Number => format!("COALESCE({} <> 0, false)", v.sql),
        Ty::Text => format!("COALESCE({} <> '', false)", cx.pin(&v.sql)),
        Ty::Date | Ty::DateTime => format!("(({}) IS NOT NULL)", v.sql),
        Ty::Blank => "false".into(),
    }
}

/// Any value as text, blank as ''. Never NULL.
pub(crate) fn to_text(cx: &Ctx, v: &Val) -> String {
    let x = &v.sql;
    match v.ty {
        Ty::Text => format!("COALESCE({x}, '')"),
        Ty::Number => format!("COALESCE((trim_scale({x}))::text, '')"),
        Ty::Bool => format!("(CASE {x} WHEN true THEN '1' WHEN false THEN '0' ELSE '' END)"),
        Ty::Date => format!(
            "COALESCE(regexp_replace({}, {}, {}), '')",
            cx.pin(&format!("lpad((extract(year from {x}) * 10000 + extract(month from {x}) * 100 + extract(day from {x}))::text, 8, '0')")),
            lit(r"^(\d{4})(\d{2})(\d{2})$"),
            lit(r"\1-\2-\3")
        ),
        Ty::DateTime => format!(
            "COALESCE(regexp_replace({}, {}, {}), '')",
            cx.pin(&format!("lpad((extract(year from {x}) * 10000000000 + extract(month from {x}) * 100000000 + extract(day from {x}) * 1000000 + extract(hour from {x}) * 10000 + extract(minute from {x}) * 100 + floor(extract(second from {x})))::text, 14, '0')")),
            lit(r"^(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})$"),
            lit(r"\1-\2-\3T\4:\5:\6Z")
        ),
        Ty::Blank => "''".into(),
    }
}

/// Bring two values to one type: blank fits anything, a date widens to a
/// date-time, a checkbox widens to a number. Err gives both types.
pub(crate) fn unify(a: Val, b: Val) -> Result<(Ty, String, String), (Ty, Ty)> {
    let (ta, tb) = (a.ty, b.ty);
    let ty = match (ta, tb) {
        (x, y) if x == y => x,
        (Ty::Blank, y) => y,
        (x, Ty::Blank) => x,
        (Ty::Date, Ty::DateTime) | (Ty::DateTime, Ty::Date) => Ty::DateTime,
        (Ty::Bool, Ty::Number) | (Ty::Number, Ty::Bool) => Ty::Number,
        _ => return Err((ta, tb)),
    };
    Ok((ty, convert(a, ty), convert(b, ty)))
}

/// Unify many values (IF / SWITCH branches, MIN / MAX arguments).
pub(crate) fn unify_all(vals: Vec<Val>) -> Result<(Ty, Vec<String>), (Ty, Ty)> {
    let mut ty = Ty::Blank;
    for v in &vals {
        ty = match unify(Val::new(ty, String::new()), Val::new(v.ty, String::new())) {
            Ok((t, _, _)) => t,
            Err(e) => return Err(e),
        };
    }
    Ok((ty, vals.into_iter().map(|v| convert(v, ty)).collect()))
}

/// Convert to `ty`; only the widenings of [`unify`] are ever asked for.
pub(crate) fn convert(v: Val, ty: Ty) -> String {
    match (v.ty, ty) {
        (a, b) if a == b => v.sql,
        (Ty::Blank, t) => format!("NULL::{}", t.sql_type()),
        (Ty::Date, Ty::DateTime) => format!("(({})::timestamp)", v.sql),
        (Ty::Bool, Ty::Number) => bool_to_number(&v.sql),
        _ => v.sql,
    }
}

/// What a formula field's value looks like from outside: checkbox results
/// become numbers 1/0, a blank result is text.
pub(crate) fn result_value(v: Val) -> Val {
    match v.ty {
        Ty::Bool => Val::new(Ty::Number, bool_to_number(&v.sql)),
        Ty::Blank => Val::new(Ty::Text, "NULL::text".into()),
        _ => Val::new(v.ty, format!("({})", v.sql)),
    }
}
