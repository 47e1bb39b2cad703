//! AST -> SQL. Only fixed SQL text, quoted identifiers from the schema, and
//! placeholders from [`Params`]. [`compile`]: every condition compiles to an
//! expression that is TRUE or FALSE, never NULL, so callers may also select
//! it or negate it. [`compile_where`]: the same filter for a WHERE clause
//! only, where NULL reads as FALSE, so comparisons drop their
//! `IS NOT NULL` guards.

use super::{ChoiceRef, Condition, Filter, Group, Join, Node, Operand};
use crate::dates::{start_of_day, Resolved};
use crate::schema::{Aggregation, Conditions, Env, LinkSpec, Op, Schema, Storage};
use crate::sql::{contains_pattern, qualified, quote_ident, Params, SqlValue};

/// Aliases of the connector and linked table inside link subqueries:
/// `"__fl_c"`, `"__fl_t"` at the top, `"__fl_c1"`, `"__fl_t1"`, ... inside
/// a lookup's or rollup's `conditions` (which may name lookups of the linked
/// table in turn). A caller's row alias must not start with `__fl_`.
fn link_alias(kind: char, depth: usize) -> String {
    if depth == 0 {
        format!("\"__fl_{kind}\"")
    } else {
        format!("\"__fl_{kind}{depth}\"")
    }
}

/// Compile a parsed filter into a boolean SQL expression over the record
/// table aliased `row_alias` in the caller's FROM (unquoted; it is quoted
/// here). A filter that constrains nothing compiles to `TRUE`.
pub fn compile(
    filter: &Filter,
    schema: &Schema,
    env: &Env,
    row_alias: &str,
    params: &mut Params,
) -> String {
    compile_with(filter, schema, env, row_alias, params, Nulls::Never)
}

/// [`compile`] for a WHERE clause (or an `AND` conjunct of one) and nothing
/// else: a condition on an empty cell may be NULL where [`compile`]'s is
/// FALSE, which a WHERE clause reads alike, so a comparison is `e > $1`
/// rather than `(e IS NOT NULL AND e > $1)`: one test less per row scanned,
/// and a rollup's subquery evaluated once rather than twice. The compiler
/// negates a condition only inside `NOT EXISTS (...)`, whose own WHERE reads
/// NULL as FALSE too; the caller must not select or negate the result.
pub fn compile_where(
    filter: &Filter,
    schema: &Schema,
    env: &Env,
    row_alias: &str,
    params: &mut Params,
) -> String {
    compile_with(filter, schema, env, row_alias, params, Nulls::AsFalse)
}

fn compile_with(
    filter: &Filter,
    schema: &Schema,
    env: &Env,
    row_alias: &str,
    params: &mut Params,
    nulls: Nulls,
) -> String {
    let c = Compiler {
        schema,
        env,
        row: quote_ident(row_alias),
        depth: 0,
        nulls,
    };
    c.group(&filter.root, params)
        .unwrap_or_else(|| "TRUE".to_owned())
}

/// What a condition may yield for an empty cell.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Nulls {
    /// FALSE (or TRUE for the negated operators), never NULL.
    Never,
    /// NULL where the answer is FALSE: only for a WHERE clause.
    AsFalse,
}

impl Nulls {
    /// `rest`, a test strict in `e` (NULL when `e` is), made FALSE for an
    /// empty `e` when conditions must never be NULL.
    fn present(self, e: &str, rest: &str) -> String {
        match self {
            Nulls::Never => format!("({e} IS NOT NULL AND {rest})"),
            Nulls::AsFalse => format!("({rest})"),
        }
    }
}

struct Compiler<'a> {
    schema: &'a Schema,
    env: &'a Env,
    /// The quoted alias of the row the conditions are about.
    row: String,
    /// Nesting of `conditions` (0: the caller's table); picks the aliases.
    depth: usize,
    nulls: Nulls,
}

const TRUE: &str = "TRUE";
const FALSE: &str = "FALSE";

impl Compiler<'_> {
    /// None when the group constrains nothing (no conditions, or only empty
    /// groups): it is left out of its parent rather than read as TRUE.
    fn group(&self, g: &Group, params: &mut Params) -> Option<String> {
        let parts: Vec<String> = g
            .nodes
            .iter()
            .filter_map(|n| match n {
                Node::Condition(c) => Some(self.condition(c, params)),
                Node::Group(g) => self.group(g, params),
            })
            .collect();
        match parts.len() {
            0 => None,
            1 => parts.into_iter().next(),
            _ => {
                let sep = match g.join {
                    Join::And => " AND ",
                    Join::Or => " OR ",
                };
                Some(format!("({})", parts.join(sep)))
            }
        }
    }

    fn condition(&self, c: &Condition, params: &mut Params) -> String {
        let field = &self.schema.fields[c.field];
        let col = field.column_sql(&self.row);
        match &field.storage {
            Storage::Text | Storage::LongText => text(&col, c.op, &c.operand, self.nulls, params),
            Storage::Number => number(&col, c.op, &c.operand, self.nulls, params),
            Storage::Date { include_time } => date(
                &col,
                *include_time,
                c.op,
                &c.operand,
                self.env,
                self.nulls,
                params,
            ),
            Storage::Checkbox => checkbox(&col, &c.operand),
            Storage::SingleSelect { .. } => {
                single_select(&col, c.op, &c.operand, self.nulls, params)
            }
            Storage::MultiSelect { .. } => multi_select(
                &col,
                field.is_multi_member(),
                c.op,
                &c.operand,
                self.nulls,
                params,
            ),
            Storage::Attachment => list_emptiness(&col, c.op, self.nulls),
            Storage::Link(link) => self.link(link, c.op, &c.operand, params),
            Storage::Lookup {
                link,
                target,
                target_column,
                conditions,
            } => {
                let from = self.link_from(link, conditions.as_deref(), params);
                self.lookup(&from, target, target_column, c.op, &c.operand, params)
            }
            Storage::Rollup {
                link,
                aggregation,
                target_column,
                result,
                conditions,
            } => {
                let value = format!(
                    "{}.{}",
                    self.target(),
                    quote_ident(target_column.as_deref().unwrap_or("id"))
                );
                let agg = match aggregation {
                    Aggregation::Count => "count(*)".to_owned(),
                    Aggregation::Sum => format!("sum({value})"),
                    Aggregation::Avg => format!("avg({value})"),
                    Aggregation::Min => format!("min({value})"),
                    Aggregation::Max => format!("max({value})"),
                };
                let from = self.link_from(link, conditions.as_deref(), params);
                let expr = format!("(SELECT {agg} {from})");
                self.scalar(&expr, result, c.op, &c.operand, params)
            }
            // Refused by the parser; match nothing if built by hand.
            Storage::Button => FALSE.to_owned(),
        }
    }

    /// Conditions on a scalar expression of the given storage.
    fn scalar(
        &self,
        e: &str,
        storage: &Storage,
        op: Op,
        v: &Operand,
        params: &mut Params,
    ) -> String {
        match storage {
            Storage::Text | Storage::LongText => text(e, op, v, self.nulls, params),
            Storage::Number => number(e, op, v, self.nulls, params),
            Storage::Date { include_time } => {
                date(e, *include_time, op, v, self.env, self.nulls, params)
            }
            Storage::Checkbox => checkbox(e, v),
            _ => FALSE.to_owned(),
        }
    }

    fn conn(&self) -> String {
        link_alias('c', self.depth)
    }

    fn target(&self) -> String {
        link_alias('t', self.depth)
    }

    /// `FROM connector JOIN live target WHERE connector.own = row.id`, and
    /// `AND (conditions)` over the linked row when a lookup or rollup has
    /// them (compiled one level deeper, with their own aliases).
    fn link_from(
        &self,
        link: &LinkSpec,
        conditions: Option<&Conditions>,
        params: &mut Params,
    ) -> String {
        let (conn, target) = (self.conn(), self.target());
        let only = conditions
            .and_then(|c| {
                Compiler {
                    schema: &c.schema,
                    env: self.env,
                    row: target.clone(),
                    depth: self.depth + 1,
                    nulls: self.nulls,
                }
                .group(&c.filter.root, params)
            })
            .map(|sql| format!(" AND ({sql})"))
            .unwrap_or_default();
        format!(
            "FROM {conn_table} AS {conn} JOIN {target_table} AS {target} \
             ON {target}.\"id\" = {conn}.{other} AND {target}.\"deleted_at\" IS NULL \
             WHERE {conn}.{own} = {row}.\"id\"{only}",
            conn_table = qualified(&link.schema, &link.connector),
            target_table = qualified(&link.schema, &link.target_table),
            other = quote_ident(&link.other_column),
            own = quote_ident(&link.own_column),
            row = self.row,
        )
    }

    fn link(&self, link: &LinkSpec, op: Op, v: &Operand, params: &mut Params) -> String {
        let from = self.link_from(link, None, params);
        let other = format!("{}.{}", self.conn(), quote_ident(&link.other_column));
        let ids = match v {
            Operand::Records(ids) => ids.clone(),
            _ => Vec::new(),
        };
        match op {
            Op::Empty => format!("NOT EXISTS (SELECT 1 {from})"),
            Op::NotEmpty => format!("EXISTS (SELECT 1 {from})"),
            Op::HasAny if ids.is_empty() => FALSE.to_owned(),
            Op::HasAll | Op::HasNone if ids.is_empty() => TRUE.to_owned(),
            Op::IsExactly if ids.is_empty() => FALSE.to_owned(),
            Op::HasAny => {
                let p = params.push(SqlValue::TextArray(ids));
                format!("EXISTS (SELECT 1 {from} AND {other} = ANY({p}))")
            }
            Op::HasNone => {
                let p = params.push(SqlValue::TextArray(ids));
                format!("NOT EXISTS (SELECT 1 {from} AND {other} = ANY({p}))")
            }
            Op::HasAll => {
                let p = params.push(SqlValue::TextArray(ids));
                format!(
                    "((SELECT count(DISTINCT {other}) {from} AND {other} = ANY({p})) = cardinality({p}))"
                )
            }
            Op::IsExactly => {
                let p = params.push(SqlValue::TextArray(ids));
                format!(
                    "(SELECT count(DISTINCT {other}) FILTER (WHERE {other} = ANY({p})) = cardinality({p}) \
                     AND count(*) FILTER (WHERE NOT ({other} = ANY({p}))) = 0 {from})"
                )
            }
            _ => FALSE.to_owned(),
        }
    }

    /// Positive operators: some linked live record (that the conditions
    /// admit) satisfies the condition. `is_not`, `not_contains`, `empty`: no
    /// such record satisfies `is`, `contains`, `not_empty` (exact
    /// negations). `from` is [`Self::link_from`].
    fn lookup(
        &self,
        from: &str,
        target: &Storage,
        target_column: &str,
        op: Op,
        v: &Operand,
        params: &mut Params,
    ) -> String {
        let e = format!("{}.{}", self.target(), quote_ident(target_column));
        let (negated, inner_op) = match op {
            Op::IsNot => (true, Op::Is),
            Op::NotContains => (true, Op::Contains),
            Op::Empty => (true, Op::NotEmpty),
            other => (false, other),
        };
        let inner_value = if inner_op == Op::NotEmpty {
            &Operand::None
        } else {
            v
        };
        let cond = self.scalar(&e, target, inner_op, inner_value, params);
        let exists = format!("EXISTS (SELECT 1 {from} AND {cond})");
        if negated {
            format!("NOT {exists}")
        } else {
            exists
        }
    }
}

fn cmp_sql(op: Op) -> &'static str {
    match op {
        Op::Is => "=",
        Op::IsNot => "<>",
        Op::Greater | Op::After => ">",
        Op::GreaterOrEqual | Op::OnOrAfter => ">=",
        Op::Less | Op::Before => "<",
        Op::LessOrEqual | Op::OnOrBefore => "<=",
        _ => "=",
    }
}

/// `e OP p`: `is_not` also matches empty cells, every other comparison
/// never does.
fn compare(e: &str, op: Op, p: &str, nulls: Nulls) -> String {
    if op == Op::IsNot {
        format!("({e} IS NULL OR {e} <> {p})")
    } else {
        nulls.present(e, &format!("{e} {} {p}", cmp_sql(op)))
    }
}

fn text(e: &str, op: Op, v: &Operand, nulls: Nulls, params: &mut Params) -> String {
    let value = match v {
        Operand::Text(s) => s.clone(),
        _ => String::new(),
    };
    match op {
        Op::Empty => format!("({e} IS NULL OR {e} = '')"),
        Op::NotEmpty => nulls.present(e, &format!("{e} <> ''")),
        Op::Contains | Op::NotContains => {
            let p = params.push(SqlValue::Text(contains_pattern(&value)));
            if op == Op::Contains {
                nulls.present(e, &format!("{e} ILIKE {p} ESCAPE E'\\\\'"))
            } else {
                format!("({e} IS NULL OR {e} NOT ILIKE {p} ESCAPE E'\\\\')")
            }
        }
        Op::Is | Op::IsNot => {
            let p = params.push(SqlValue::Text(value));
            compare(e, op, &p, nulls)
        }
        _ => FALSE.to_owned(),
    }
}

fn number(e: &str, op: Op, v: &Operand, nulls: Nulls, params: &mut Params) -> String {
    match (op, v) {
        (Op::Empty, _) => format!("({e} IS NULL)"),
        (Op::NotEmpty, _) => format!("({e} IS NOT NULL)"),
        (_, Operand::Number(n)) => {
            let p = params.push(SqlValue::Numeric(n.clone()));
            compare(e, op, &p, nulls)
        }
        _ => FALSE.to_owned(),
    }
}

fn date(
    e: &str,
    include_time: bool,
    op: Op,
    v: &Operand,
    env: &Env,
    nulls: Nulls,
    params: &mut Params,
) -> String {
    let operand = match (op, v) {
        (Op::Empty, _) => return format!("({e} IS NULL)"),
        (Op::NotEmpty, _) => return format!("({e} IS NOT NULL)"),
        (_, Operand::Date(d)) => d.resolve(env, include_time),
        _ => return FALSE.to_owned(),
    };
    match operand {
        Resolved::Day(d) if !include_time => {
            let p = params.push(SqlValue::Date(d));
            compare(e, op, &p, nulls)
        }
        Resolved::Instant(t) => {
            let p = params.push(SqlValue::Timestamp(t));
            compare(e, op, &p, nulls)
        }
        // A bare date against a date-with-time: the whole day in the
        // database timezone, [start, end).
        Resolved::Day(d) => {
            let start = start_of_day(env.timezone, d);
            let end = d
                .succ_opt()
                .map(|next| start_of_day(env.timezone, next))
                .unwrap_or(start);
            let mut ts = |t| params.push(SqlValue::Timestamp(t));
            match op {
                Op::Is => {
                    let (s, en) = (ts(start), ts(end));
                    nulls.present(e, &format!("{e} >= {s} AND {e} < {en}"))
                }
                Op::IsNot => {
                    let (s, en) = (ts(start), ts(end));
                    format!("({e} IS NULL OR {e} < {s} OR {e} >= {en})")
                }
                Op::Before => nulls.present(e, &format!("{e} < {}", ts(start))),
                Op::OnOrAfter => nulls.present(e, &format!("{e} >= {}", ts(start))),
                Op::After => nulls.present(e, &format!("{e} >= {}", ts(end))),
                Op::OnOrBefore => nulls.present(e, &format!("{e} < {}", ts(end))),
                _ => FALSE.to_owned(),
            }
        }
    }
}

/// `is true` needs a checked box; `is false` matches unchecked and
/// never-set cells alike.
fn checkbox(e: &str, v: &Operand) -> String {
    match v {
        Operand::Bool(true) => format!("({e} IS TRUE)"),
        Operand::Bool(false) => format!("({e} IS NOT TRUE)"),
        _ => FALSE.to_owned(),
    }
}

fn resolved_ids(list: &[ChoiceRef]) -> (Vec<String>, bool) {
    let mut ids = Vec::new();
    let mut unresolved = false;
    for c in list {
        match c {
            ChoiceRef::Id(id) => {
                if !ids.contains(id) {
                    ids.push(id.clone())
                }
            }
            ChoiceRef::Unresolved => unresolved = true,
        }
    }
    (ids, unresolved)
}

fn single_select(e: &str, op: Op, v: &Operand, nulls: Nulls, params: &mut Params) -> String {
    match (op, v) {
        (Op::Empty, _) => format!("({e} IS NULL OR {e} = '')"),
        (Op::NotEmpty, _) => nulls.present(e, &format!("{e} <> ''")),
        // The sentinel: positive operators match nothing, negated all.
        (Op::Is, Operand::Choice(ChoiceRef::Unresolved)) => FALSE.to_owned(),
        (Op::IsNot, Operand::Choice(ChoiceRef::Unresolved)) => TRUE.to_owned(),
        (Op::Is | Op::IsNot, Operand::Choice(ChoiceRef::Id(id))) => {
            let p = params.push(SqlValue::Text(id.clone()));
            compare(e, op, &p, nulls)
        }
        (Op::AnyOf | Op::NoneOf, Operand::Choices(list)) => {
            let (ids, _) = resolved_ids(list);
            match (op, ids.is_empty()) {
                (Op::AnyOf, true) => FALSE.to_owned(),
                (_, true) => TRUE.to_owned(),
                (Op::AnyOf, false) => {
                    let p = params.push(SqlValue::TextArray(ids));
                    nulls.present(e, &format!("{e} = ANY({p})"))
                }
                (_, false) => {
                    let p = params.push(SqlValue::TextArray(ids));
                    format!("({e} IS NULL OR NOT ({e} = ANY({p})))")
                }
            }
        }
        _ => FALSE.to_owned(),
    }
}

fn list_emptiness(e: &str, op: Op, nulls: Nulls) -> String {
    match op {
        Op::Empty => format!("({e} IS NULL OR cardinality({e}) = 0)"),
        Op::NotEmpty => nulls.present(e, &format!("cardinality({e}) > 0")),
        _ => FALSE.to_owned(),
    }
}

fn multi_select(
    e: &str,
    multi_member: bool,
    op: Op,
    v: &Operand,
    nulls: Nulls,
    params: &mut Params,
) -> String {
    if matches!(op, Op::Empty | Op::NotEmpty) {
        return list_emptiness(e, op, nulls);
    }
    if multi_member {
        // Member lists are not choices: set operators are not meaningful.
        return match op {
            Op::HasNone => TRUE,
            _ => FALSE,
        }
        .to_owned();
    }
    let (ids, unresolved) = match v {
        Operand::Choices(list) => resolved_ids(list),
        _ => (Vec::new(), false),
    };
    match op {
        Op::HasAny if ids.is_empty() => FALSE.to_owned(),
        Op::HasAny => {
            let p = params.push(SqlValue::TextArray(ids));
            nulls.present(e, &format!("{e} && {p}"))
        }
        Op::HasNone if ids.is_empty() => TRUE.to_owned(),
        Op::HasNone => {
            let p = params.push(SqlValue::TextArray(ids));
            format!("({e} IS NULL OR NOT ({e} && {p}))")
        }
        Op::HasAll | Op::IsExactly if unresolved => FALSE.to_owned(),
        Op::HasAll if ids.is_empty() => TRUE.to_owned(),
        Op::HasAll => {
            let p = params.push(SqlValue::TextArray(ids));
            nulls.present(e, &format!("{e} @> {p}"))
        }
        Op::IsExactly if ids.is_empty() => FALSE.to_owned(),
        Op::IsExactly => {
            let p = params.push(SqlValue::TextArray(ids));
            nulls.present(e, &format!("{e} @> {p} AND {e} <@ {p}"))
        }
        _ => FALSE.to_owned(),
    }
}
