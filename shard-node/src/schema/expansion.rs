//! What a lookup's or rollup's `conditions` cost a read, and the caps on it.
//!
//! Conditions may name lookups and rollups of the linked table that have
//! conditions of their own, down to [`super::MAX_CONDITIONS_DEPTH`] levels,
//! and the compiler writes a named conditioned lookup's conditions out in
//! full every time it is named. So one read's SQL grew like (conditioned
//! lookups named per condition)^depth: 13 lookups each naming 12 others
//! made a list page of 105 MB of SQL (see `read_cost_tests.rs`).
//!
//! The rule. The *cost* of conditions counts what PostgreSQL must plan:
//! every group and condition counts 1, except a condition on a link,
//! lookup or rollup field, a subquery, which counts [`SUBQUERY_COST`]; a
//! condition on a lookup or rollup that has conditions adds their cost,
//! and so on down. One lookup's or rollup's conditions may cost at most
//! [`MAX_LOOKUP_CONDITION_COST`] (what a flat 200-node filter of subqueries
//! costs), the lookups and rollups of one table at most
//! [`MAX_TABLE_CONDITION_COST`] together (a read of every field), and so
//! may a list request's filter (with its view's). A field change that would
//! break a cap is refused (400 naming the field and the cap). A stored
//! schema over a cap (made before it, or behind the API's back) still reads
//! within it: conditions over it are read as admitting no linked record
//! (the lookup's cell is empty, a filter on it sees no linked record), with
//! a warning in the log.
//!
//! Measured (PostgreSQL 15, planning a one-record read, shared 2-core
//! machine): a plain condition plans in about 0.05 ms, a subquery in 1.5 to
//! 3 ms; per unit of cost 0.03 to 0.07 ms over flat, chained and ring-shaped
//! conditions, so a read at the table cap plans in about 1 s. 30 lookups of
//! a self-link each naming the next cost 6,240 together (0.3 s).

use std::sync::Arc;

use filter_lang::filter::{Condition, Filter, Group, Join, Node, Operand};
use filter_lang::{Conditions, FieldDef, Op, Schema, Storage};

/// What a condition on a link, lookup or rollup field costs (a subquery;
/// any other group or condition costs 1).
pub const SUBQUERY_COST: usize = 50;

/// Most one lookup's or rollup's conditions may cost: a top group and 199
/// conditions on lookups cost 9,951.
pub const MAX_LOOKUP_CONDITION_COST: usize = 10_000;

/// Most the conditions of the lookups and rollups of one table may cost
/// together, and a list request's filter with its view's (two flat
/// 200-node filters of subqueries cost 19,903).
pub const MAX_TABLE_CONDITION_COST: usize = 20_000;

/// A conditioned lookup or rollup over a cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overrun {
    pub table_id: String,
    pub field_id: String,
    /// Which cap: [`MAX_LOOKUP_CONDITION_COST`] (this field alone) or
    /// [`MAX_TABLE_CONDITION_COST`] (its table's, reached at this field).
    pub limit: usize,
}

/// The cost of `filter` (parsed against `schema`), conditions of the
/// lookups and rollups it names included (see the module). Stops counting
/// past `limit` (returns `limit + 1` then), so the work is bounded too.
pub fn expanded_cost(filter: &Filter, schema: &Schema, limit: usize) -> usize {
    let mut count = 0;
    walk(&filter.root, schema, limit, &mut count);
    count
}

/// Adds `g`'s cost to `count`; false once `count` passed `limit`.
fn walk(g: &Group, schema: &Schema, limit: usize, count: &mut usize) -> bool {
    *count += 1;
    if *count > limit {
        return false;
    }
    for n in &g.nodes {
        let more = match n {
            Node::Group(g) => walk(g, schema, limit, count),
            Node::Condition(c) => {
                let def = schema.fields.get(c.field);
                *count += match def.map(|d| &d.storage) {
                    Some(Storage::Link(_) | Storage::Lookup { .. } | Storage::Rollup { .. }) => {
                        SUBQUERY_COST
                    }
                    _ => 1,
                };
                match def.and_then(conditions_of) {
                    _ if *count > limit => false,
                    Some(nested) => walk(&nested.filter.root, &nested.schema, limit, count),
                    None => true,
                }
            }
        };
        if !more {
            *count = (*count).min(limit + 1);
            return false;
        }
    }
    true
}

fn conditions_of(def: &FieldDef) -> Option<&Conditions> {
    match &def.storage {
        Storage::Lookup { conditions, .. } | Storage::Rollup { conditions, .. } => {
            conditions.as_deref()
        }
        _ => None,
    }
}

/// Conditions that admit no linked record (they compile to `FALSE`): what
/// conditions over a cap are read as.
pub(super) fn admit_nothing() -> Box<Conditions> {
    let never = FieldDef::new("fld_over_budget", "", "button", Storage::Button);
    Box::new(Conditions {
        schema: Arc::new(Schema::new(vec![never])),
        filter: Filter {
            root: Group {
                join: Join::And,
                nodes: vec![Node::Condition(Condition {
                    field: 0,
                    op: Op::Empty,
                    operand: Operand::None,
                })],
            },
        },
    })
}

/// How a cost is counted, for messages.
pub fn counting() -> String {
    format!(
        "a group or condition counts 1, a condition on a link, lookup or rollup \
         {SUBQUERY_COST}, plus the cost of the conditions of each conditioned lookup or rollup \
         it names, down to {} levels",
        super::MAX_CONDITIONS_DEPTH
    )
}

/// A request's filter (with its view's) costing over
/// [`MAX_TABLE_CONDITION_COST`] is refused (400) rather than compiled: 200
/// conditions naming one lookup whose conditions cost 10,000 would plan
/// for minutes.
pub fn check_filter(filter: &Filter, schema: &Schema) -> crate::error::ApiResult<()> {
    if expanded_cost(filter, schema, MAX_TABLE_CONDITION_COST) > MAX_TABLE_CONDITION_COST {
        return Err(crate::error::ApiError::bad_request(format!(
            "filter: the filter costs more than {MAX_TABLE_CONDITION_COST} ({}); a filter may \
             cost at most {MAX_TABLE_CONDITION_COST}.",
            counting()
        )));
    }
    Ok(())
}
