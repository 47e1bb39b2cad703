//! The function library: signature checks and the guarded SQL of each
//! function. FORMULA.md documents every function; keep the two in step.

use crate::compile::{convert, is_blank, to_text, truthy, unify, unify_all, Ctx, Ty, Val};
use crate::error::{Res, SpanError};
use crate::parser::{Expr, ExprKind};
use crate::sql::{date_clamp, int_clamp, lit, num_clamp, ts_clamp, EPOCH_HI, EPOCH_LO};

/// Every function name, for the "unknown function" message and the docs.
pub const FUNCTIONS: &[&str] = &[
    "IF",
    "SWITCH",
    "AND",
    "OR",
    "NOT",
    "BLANK",
    "ISBLANK",
    "TRUE",
    "FALSE",
    "ROUND",
    "ROUNDUP",
    "ROUNDDOWN",
    "INT",
    "ABS",
    "MIN",
    "MAX",
    "MOD",
    "POWER",
    "SQRT",
    "VALUE",
    "CONCATENATE",
    "LEN",
    "UPPER",
    "LOWER",
    "TRIM",
    "LEFT",
    "RIGHT",
    "MID",
    "FIND",
    "SUBSTITUTE",
    "REPT",
    "YEAR",
    "MONTH",
    "DAY",
    "HOUR",
    "MINUTE",
    "SECOND",
    "WEEKDAY",
    "DATEADD",
    "DATETIME_DIFF",
];

/// Functions that read the clock or the record's metadata: refused, since a
/// generated column must be immutable.
const CLOCK: &[&str] = &[
    "NOW",
    "TODAY",
    "CREATED_TIME",
    "LAST_MODIFIED_TIME",
    "RECORD_ID",
    "TONOW",
    "FROMNOW",
];

/// Longest text REPT may produce.
pub const MAX_REPT_LEN: u32 = 10_000;
/// Longest text SUBSTITUTE may produce (upper bound); longer gives blank.
pub const MAX_SUBSTITUTE_LEN: u32 = 1_000_000;

struct Args<'c, 'a> {
    cx: &'c mut Ctx<'a>,
    name: &'c str,
    at: usize,
    exprs: &'c [Expr],
}

impl Args<'_, '_> {
    fn arity(&self, min: usize, max: usize) -> Res<()> {
        let n = self.exprs.len();
        if n >= min && n <= max {
            return Ok(());
        }
        let want = if min == max {
            format!("{min} argument{}", if min == 1 { "" } else { "s" })
        } else if max == usize::MAX {
            format!("at least {min} argument{}", if min == 1 { "" } else { "s" })
        } else {
            format!("{min} to {max} arguments")
        };
        Err(SpanError::new(
            self.at,
            format!("{} expects {want}, got {n}", self.name),
        ))
    }

    fn val(&mut self, i: usize) -> Res<Val> {
        self.cx.expr(&self.exprs[i])
    }

    fn pos(&self, i: usize) -> usize {
        self.exprs[i].span.start
    }

    fn num(&mut self, i: usize) -> Res<String> {
        let v = self.val(i)?;
        let what = self.name.to_string();
        self.cx.number(v, self.pos(i), &what)
    }

    fn text(&mut self, i: usize) -> Res<String> {
        let v = self.val(i)?;
        let what = self.name.to_string();
        self.cx.text(v, self.pos(i), &what)
    }

    /// A date or date-time argument.
    fn date(&mut self, i: usize) -> Res<Val> {
        let v = self.val(i)?;
        match v.ty {
            Ty::Date | Ty::DateTime => Ok(v),
            Ty::Blank => Ok(Val::new(Ty::Date, "NULL::date".into())),
            other => Err(SpanError::new(
                self.pos(i),
                format!("{} expects a date, got {}", self.name, other.name()),
            )),
        }
    }

    fn unit(&self, i: usize, allowed: &[Unit]) -> Res<Unit> {
        let e = &self.exprs[i];
        let ExprKind::Text(s) = &e.kind else {
            return Err(SpanError::new(
                e.span.start,
                format!(
                    "{} expects its unit as a text literal such as 'days'",
                    self.name
                ),
            ));
        };
        let u = Unit::parse(s).filter(|u| allowed.contains(u));
        u.ok_or_else(|| {
            let names: Vec<&str> = allowed.iter().map(|u| u.name()).collect();
            SpanError::new(
                e.span.start,
                format!(
                    "Unknown unit '{s}' for {}; expected one of {}",
                    self.name,
                    names.join(", ")
                ),
            )
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

const ALL_UNITS: &[Unit] = &[
    Unit::Millisecond,
    Unit::Second,
    Unit::Minute,
    Unit::Hour,
    Unit::Day,
    Unit::Week,
    Unit::Month,
    Unit::Quarter,
    Unit::Year,
];

impl Unit {
    fn parse(s: &str) -> Option<Unit> {
        let l = s.trim().to_ascii_lowercase();
        let l = l.strip_suffix('s').unwrap_or(&l);
        Some(match l {
            "millisecond" => Unit::Millisecond,
            "second" => Unit::Second,
            "minute" => Unit::Minute,
            "hour" => Unit::Hour,
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "quarter" => Unit::Quarter,
            "year" => Unit::Year,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Millisecond => "milliseconds",
            Unit::Second => "seconds",
            Unit::Minute => "minutes",
            Unit::Hour => "hours",
            Unit::Day => "days",
            Unit::Week => "weeks",
            Unit::Month => "months",
            Unit::Quarter => "quarters",
            Unit::Year => "years",
        }
    }

    /// Seconds per unit for the fixed-length units (as SQL numeric text).
    fn seconds(self) -> Option<&'static str> {
        Some(match self {
            Unit::Millisecond => "0.001",
            Unit::Second => "1",
            Unit::Minute => "60",
            Unit::Hour => "3600",
            Unit::Day => "86400",
            Unit::Week => "604800",
            _ => return None,
        })
    }

    fn months(self) -> Option<&'static str> {
        Some(match self {
            Unit::Month => "1",
            Unit::Quarter => "3",
            Unit::Year => "12",
            _ => return None,
        })
    }
}

pub(crate) fn call(cx: &mut Ctx<'_>, name: &str, at: usize, exprs: &[Expr]) -> Res<Val> {
    if CLOCK.contains(&name) {
        return Err(SpanError::new(
            at,
            format!("{name} is not available: a formula is stored with each record and cannot depend on the clock or on record metadata"),
        ));
    }
    let mut a = Args {
        cx,
        name,
        at,
        exprs,
    };
    let n = exprs.len();
    let num = |s: String| Val::new(Ty::Number, s);
    let txt = |s: String| Val::new(Ty::Text, s);
    Ok(match name {
        "IF" => {
            a.arity(2, 3)?;
            let c = a.val(0)?;
            let t = a.val(1)?;
            let f = if n == 3 {
                a.val(2)?
            } else {
                Val::new(Ty::Blank, "NULL".into())
            };
            let (ty, t, f) = unify(t, f).map_err(|(x, y)| {
                SpanError::new(
                    at,
                    format!(
                        "IF branches must have the same type (got {} and {})",
                        x.name(),
                        y.name()
                    ),
                )
            })?;
            Val::new(
                ty,
                format!("(CASE WHEN {} THEN {t} ELSE {f} END)", truthy(a.cx, &c)),
            )
        }
        "SWITCH" => {
            a.arity(3, usize::MAX)?;
            let subject = a.val(0)?;
            let mut patterns = Vec::new();
            let mut results = Vec::new();
            let mut i = 1;
            while i + 1 < n {
                patterns.push(a.val(i)?);
                results.push(a.val(i + 1)?);
                i += 2;
            }
            let default = if i < n {
                a.val(i)?
            } else {
                Val::new(Ty::Blank, "NULL".into())
            };
            let mut all = vec![subject];
            all.extend(patterns);
            let (ty_key, keys) = unify_all(all).map_err(|(x, y)| {
                SpanError::new(at, format!("SWITCH patterns must have the type of the value switched on (got {} and {})", x.name(), y.name()))
            })?;
            results.push(default);
            let (ty, mut outs) = unify_all(results).map_err(|(x, y)| {
                SpanError::new(
                    at,
                    format!(
                        "SWITCH results must have the same type (got {} and {})",
                        x.name(),
                        y.name()
                    ),
                )
            })?;
            let default = outs.pop().unwrap_or_else(|| "NULL".into());
            let subject = if ty_key == Ty::Text {
                a.cx.pin(&keys[0])
            } else {
                keys[0].clone()
            };
            let mut s = format!("(CASE {subject}");
            for (k, r) in keys[1..].iter().zip(outs) {
                s.push_str(&format!(" WHEN {k} THEN {r}"));
            }
            s.push_str(&format!(" ELSE {default} END)"));
            Val::new(ty, s)
        }
        "AND" | "OR" => {
            a.arity(1, usize::MAX)?;
            let mut parts = Vec::new();
            for i in 0..n {
                let v = a.val(i)?;
                parts.push(truthy(a.cx, &v));
            }
            let j = if name == "AND" { " AND " } else { " OR " };
            Val::new(Ty::Bool, format!("({})", parts.join(j)))
        }
        "NOT" => {
            a.arity(1, 1)?;
            let v = a.val(0)?;
            Val::new(Ty::Bool, format!("(NOT {})", truthy(a.cx, &v)))
        }
        "BLANK" => {
            a.arity(0, 0)?;
            Val::new(Ty::Blank, "NULL".into())
        }
        "ISBLANK" => {
            a.arity(1, 1)?;
            let v = a.val(0)?;
            Val::new(Ty::Bool, is_blank(a.cx, &v))
        }
        "TRUE" | "FALSE" => {
            a.arity(0, 0)?;
            Val::new(
                Ty::Bool,
                if name == "TRUE" { "true" } else { "false" }.into(),
            )
        }
        "ROUND" | "ROUNDUP" | "ROUNDDOWN" => {
            a.arity(1, 2)?;
            let x = a.num(0)?;
            let d = if n == 2 {
                int_clamp(&a.num(1)?, -300, 300)
            } else {
                "0".into()
            };
            match name {
                "ROUND" => num(num_clamp(&format!("round({x}, {d})"))),
                "ROUNDDOWN" => num(num_clamp(&format!("trunc({x}, {d})"))),
                _ => {
                    // 10^d written out exactly: power() would round 10^-300 to 0.
                    let unit = format!("(('1e' || ({d})::text)::numeric)");
                    num(num_clamp(&format!(
                        "(sign({x}) * ceil(abs({x}) * {unit}) / {unit})"
                    )))
                }
            }
        }
        "INT" => {
            a.arity(1, 1)?;
            num(format!("floor({})", a.num(0)?))
        }
        "ABS" => {
            a.arity(1, 1)?;
            num(format!("abs({})", a.num(0)?))
        }
        "MIN" | "MAX" => {
            a.arity(1, usize::MAX)?;
            let mut vals = Vec::new();
            for i in 0..n {
                let v = a.val(i)?;
                if matches!(v.ty, Ty::Text) {
                    return Err(SpanError::new(
                        a.pos(i),
                        format!("{name} expects numbers or dates, got text"),
                    ));
                }
                vals.push(v);
            }
            let (ty, parts) = unify_all(vals).map_err(|(x, y)| {
                SpanError::new(
                    at,
                    format!(
                        "{name} arguments must have the same type (got {} and {})",
                        x.name(),
                        y.name()
                    ),
                )
            })?;
            let (ty, parts) = match ty {
                Ty::Bool | Ty::Blank => (
                    Ty::Number,
                    parts
                        .into_iter()
                        .map(|p| convert(Val::new(ty, p), Ty::Number))
                        .collect(),
                ),
                _ => (ty, parts),
            };
            let f = if name == "MIN" { "LEAST" } else { "GREATEST" };
            Val::new(ty, format!("{f}({})", parts.join(", ")))
        }
        "MOD" => {
            a.arity(2, 2)?;
            let x = a.num(0)?;
            let d = a.num(1)?;
            num(format!("mod({x}, NULLIF({d}, 0))"))
        }
        "POWER" => {
            a.arity(2, 2)?;
            let b = a.num(0)?;
            let e = a.num(1)?;
            num(num_clamp(&format!(
                "(CASE WHEN {b} = 0 THEN (CASE WHEN {e} > 0 THEN 0::numeric WHEN {e} = 0 THEN 1::numeric END) \
                 WHEN {b} < 0 AND {e} <> trunc({e}) THEN NULL::numeric \
                 WHEN {e} * ln(abs({b})) > 690 THEN NULL::numeric \
                 WHEN {e} * ln(abs({b})) < -690 THEN 0::numeric \
                 ELSE power({b}, {e}) END)"
            )))
        }
        "SQRT" => {
            a.arity(1, 1)?;
            let x = a.num(0)?;
            num(format!("(CASE WHEN {x} >= 0 THEN sqrt({x}) END)"))
        }
        "VALUE" => {
            a.arity(1, 1)?;
            let v = a.val(0)?;
            match v.ty {
                Ty::Number => v,
                Ty::Bool | Ty::Blank => num(convert(v, Ty::Number)),
                Ty::Text => {
                    let t = format!("replace({}, ',', '')", a.cx.pin(&v.sql));
                    let re = lit(
                        r"^\s*[+-]?(\d{1,200}(\.\d{0,200})?|\.\d{1,200})([eE][+-]?\d{1,3})?\s*$",
                    );
                    num(num_clamp(&format!(
                        "(CASE WHEN {t} ~ {re} THEN ({t})::numeric END)"
                    )))
                }
                other => {
                    return Err(SpanError::new(
                        a.pos(0),
                        format!("VALUE expects text or a number, got {}", other.name()),
                    ))
                }
            }
        }
        "CONCATENATE" => {
            a.arity(1, usize::MAX)?;
            let mut parts = Vec::new();
            for i in 0..n {
                let v = a.val(i)?;
                parts.push(to_text(a.cx, &v));
            }
            txt(format!("({})", parts.join(" || ")))
        }
        "LEN" => {
            a.arity(1, 1)?;
            num(format!("(length(COALESCE({}, '')))::numeric", a.text(0)?))
        }
        "UPPER" | "LOWER" => {
            a.arity(1, 1)?;
            let f = if name == "UPPER" { "upper" } else { "lower" };
            let t = a.text(0)?;
            txt(format!("{f}({})", a.cx.pin(&t)))
        }
        "TRIM" => {
            a.arity(1, 1)?;
            txt(format!("btrim({}, {})", a.text(0)?, lit(" \t\r\n")))
        }
        "LEFT" | "RIGHT" => {
            a.arity(1, 2)?;
            let t = a.text(0)?;
            let c = if n == 2 {
                int_clamp(&a.num(1)?, 0, 1_000_000_000)
            } else {
                "1".into()
            };
            let f = if name == "LEFT" { "left" } else { "right" };
            txt(format!("{f}({t}, {c})"))
        }
        "MID" => {
            a.arity(3, 3)?;
            let t = a.text(0)?;
            let s = int_clamp(&a.num(1)?, 1, 1_000_000_000);
            let c = int_clamp(&a.num(2)?, 0, 1_000_000_000);
            txt(format!("substr({t}, {s}, {c})"))
        }
        "FIND" => {
            a.arity(2, 3)?;
            let needle = format!("COALESCE({}, '')", a.text(0)?);
            let hay = format!("COALESCE({}, '')", a.text(1)?);
            let hay = a.cx.pin(&hay);
            if n == 2 {
                num(format!("(strpos({hay}, {needle}))::numeric"))
            } else {
                let s = int_clamp(&a.num(2)?, 1, 1_000_000_000);
                let p = format!("strpos(substr({hay}, {s}), {needle})");
                num(format!("(CASE WHEN {p} > 0 THEN ({p})::numeric + ({s})::numeric - 1 ELSE 0::numeric END)"))
            }
        }
        "SUBSTITUTE" => {
            a.arity(3, 3)?;
            let t = format!("COALESCE({}, '')", a.text(0)?);
            let old = format!("COALESCE({}, '')", a.text(1)?);
            let new = format!("COALESCE({}, '')", a.text(2)?);
            txt(format!(
                "(CASE WHEN length({new}) <= length({old}) \
                 OR (length({t}))::numeric + trunc((length({t}))::numeric / GREATEST(length({old}), 1)) * (length({new}))::numeric <= {MAX_SUBSTITUTE_LEN} \
                 THEN replace({}, {old}, {new}) END)",
                a.cx.pin(&t)
            ))
        }
        "REPT" => {
            a.arity(2, 2)?;
            let t = format!("COALESCE({}, '')", a.text(0)?);
            let c = int_clamp(&a.num(1)?, 0, MAX_REPT_LEN as i64 + 1);
            txt(format!(
                "(CASE WHEN (length({t}))::numeric * {c} <= {MAX_REPT_LEN} THEN repeat({t}, {c}) END)"
            ))
        }
        "YEAR" | "MONTH" | "DAY" | "HOUR" | "MINUTE" | "SECOND" => {
            a.arity(1, 1)?;
            let d = a.date(0)?;
            let field = name.to_ascii_lowercase();
            if d.ty == Ty::Date && matches!(name, "HOUR" | "MINUTE" | "SECOND") {
                num(format!(
                    "(CASE WHEN {} IS NOT NULL THEN 0::numeric END)",
                    d.sql
                ))
            } else if name == "SECOND" {
                num(format!("floor(extract(second from {}))", d.sql))
            } else {
                num(format!("extract({field} from {})", d.sql))
            }
        }
        "WEEKDAY" => {
            a.arity(1, 2)?;
            let d = a.date(0)?;
            let monday = if n == 2 {
                match &exprs[1].kind {
                    ExprKind::Text(s) if s.eq_ignore_ascii_case("monday") => true,
                    ExprKind::Text(s) if s.eq_ignore_ascii_case("sunday") => false,
                    _ => {
                        return Err(SpanError::new(
                            exprs[1].span.start,
                            "WEEKDAY's second argument must be 'Sunday' or 'Monday'",
                        ))
                    }
                }
            } else {
                false
            };
            if monday {
                num(format!("(extract(isodow from {}) - 1)", d.sql))
            } else {
                num(format!("extract(dow from {})", d.sql))
            }
        }
        "DATEADD" => {
            a.arity(3, 3)?;
            let d = a.date(0)?;
            let k = a.num(1)?;
            let unit = a.unit(2, ALL_UNITS)?;
            dateadd(d, &k, unit)
        }
        "DATETIME_DIFF" => {
            a.arity(2, 3)?;
            let x = a.date(0)?;
            let y = a.date(1)?;
            let unit = if n == 3 {
                a.unit(2, ALL_UNITS)?
            } else {
                Unit::Second
            };
            datetime_diff(x, y, unit)
        }
        _ => return Err(SpanError::new(at, format!("Unknown function '{name}'"))),
    })
}

/// DATEADD: the result is checked to stay within years 1..=9999 BEFORE the
/// addition runs (the addition itself could leave PostgreSQL's range).
fn dateadd(d: Val, k: &str, unit: Unit) -> Val {
    if let Some(m) = unit.months() {
        let kk = format!("(trunc({k}) * {m})");
        let kc = crate::sql::int_clamp(&kk, -200_000, 200_000);
        let x = &d.sql;
        let ok = format!("(extract(year from {x}) * 12 + extract(month from {x}) - 1 + {kk}) BETWEEN 12 AND 119999");
        return match d.ty {
            Ty::Date => Val::new(
                Ty::Date,
                format!("(CASE WHEN {ok} THEN (({x}) + {kc} * interval '1 month')::date END)"),
            ),
            _ => Val::new(
                Ty::DateTime,
                format!("(CASE WHEN {ok} THEN ({x}) + {kc} * interval '1 month' END)"),
            ),
        };
    }
    let secs = unit.seconds().unwrap_or("1");
    if d.ty == Ty::Date && matches!(unit, Unit::Day | Unit::Week) {
        let days = if unit == Unit::Week { "7" } else { "1" };
        let kk = format!("(trunc({k}) * {days})");
        let kc = int_clamp(&kk, -4_000_000, 4_000_000);
        let x = &d.sql;
        return Val::new(
            Ty::Date,
            date_clamp(&format!(
                "(CASE WHEN (({x}) - DATE '0001-01-01') + {kk} BETWEEN 0 AND (DATE '9999-12-31' - DATE '0001-01-01') THEN ({x}) + {kc} END)"
            )),
        );
    }
    let x = convert(d, Ty::DateTime);
    let kk = format!("({k} * {secs})");
    let kc = format!("(LEAST(GREATEST({kk}, -400000000000), 400000000000))::double precision");
    Val::new(
        Ty::DateTime,
        ts_clamp(&format!(
            "(CASE WHEN extract(epoch from {x}) + {kk} BETWEEN {EPOCH_LO} AND {EPOCH_HI} THEN {x} + {kc} * interval '1 second' END)"
        )),
    )
}

/// DATETIME_DIFF(a, b, unit): a - b in whole units, truncated toward zero.
fn datetime_diff(a: Val, b: Val, unit: Unit) -> Val {
    let both_dates = a.ty == Ty::Date && b.ty == Ty::Date;
    if let Some(m) = unit.months() {
        let (x, y) = (convert(a, Ty::DateTime), convert(b, Ty::DateTime));
        let age = format!("age({x}, {y})");
        return Val::new(
            Ty::Number,
            format!("trunc((extract(year from {age}) * 12 + extract(month from {age})) / {m})"),
        );
    }
    let secs = unit.seconds().unwrap_or("1");
    if both_dates {
        let diff = format!("(({}) - ({}))::numeric", a.sql, b.sql);
        return Val::new(Ty::Number, format!("trunc({diff} * 86400 / {secs})"));
    }
    let (x, y) = (convert(a, Ty::DateTime), convert(b, Ty::DateTime));
    Val::new(
        Ty::Number,
        format!("trunc(extract(epoch from ({x} - {y})) / {secs})"),
    )
}
