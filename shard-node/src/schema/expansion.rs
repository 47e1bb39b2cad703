//! What a lookup's or rollup's `conditions` cost a read, and the caps on it.
//!
//! Conditions may name lookups and rollups of the linked table that have
//! conditions of their own, down to [`super::MAX_CONDITIONS_DEPTH`] levels,
//! and the compiler writes a named conditioned lookup's conditions out in
//! full every time it is named. So one read's SQL grows like (conditioned
//! lookups named per condition)^depth: 13 lookups each naming 12 others
//! made a list page of 105 MB of SQL (see `read_cost_tests.rs`).
//!
//! The rule: a lookup's or rollup's conditions, with the conditions of
//! every conditioned lookup or rollup they name written out in place (and
//! so on down), count their *expanded condition nodes* (groups and
//! conditions, as the filter language counts its 200 nodes). Each lookup
//! or rollup may expand to at most [`MAX_LOOKUP_CONDITION_NODES`], and the
//! lookups and rollups of one table to at most [`MAX_TABLE_CONDITION_NODES`]
//! together (a read of every field), as may a request's filter (with its
//! view's). A field change that would break either cap is refused (400
//! naming the field and the cap). A stored schema over a cap (made before
//! it, or behind the API's back) still reads within it: the conditions over
//! it are read as admitting no linked record (the lookup's cell is empty,
//! a filter on it sees no linked record), with a warning in the log.

use std::sync::Arc;

use filter_lang::filter::{Condition, Filter, Group, Join, Node, Operand};
use filter_lang::{Conditions, FieldDef, Op, Schema, Storage};

/// Most expanded condition nodes one lookup's or rollup's conditions may
/// have. 30 lookups of a self-link, each naming the next one, expand to 12
/// nodes each (2 KB of page SQL each); each naming the two next ones, to
/// 60. A node costs about 300 bytes of SQL, so this is about 600 KB.
pub const MAX_LOOKUP_CONDITION_NODES: usize = 2_000;

/// Most expanded condition nodes the lookups and rollups of one table may
/// have together, and a list request's filter. About 6 MB of SQL: what 500
/// fields with 200-node conditions that name no lookup already cost.
pub const MAX_TABLE_CONDITION_NODES: usize = 20_000;

/// A conditioned lookup or rollup over a cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overrun {
    pub table_id: String,
    pub field_id: String,
    /// Which cap: [`MAX_LOOKUP_CONDITION_NODES`] (this field alone) or
    /// [`MAX_TABLE_CONDITION_NODES`] (its table's, reached at this field).
    pub limit: usize,
}

/// Expanded condition nodes of `filter` (parsed against `schema`): every
/// group and condition, plus the expanded nodes of the conditions of each
/// lookup or rollup a condition names. Stops counting past `limit` (returns
/// `limit + 1` then), so the work is bounded too.
pub fn expanded_nodes(filter: &Filter, schema: &Schema, limit: usize) -> usize {
    let mut count = 0;
    walk(&filter.root, schema, limit, &mut count);
    count
}

/// Adds `g`'s expanded nodes to `count`; false once `count` passed `limit`.
fn walk(g: &Group, schema: &Schema, limit: usize, count: &mut usize) -> bool {
    *count += 1;
    if *count > limit {
        return false;
    }
    for n in &g.nodes {
        let more = match n {
            Node::Group(g) => walk(g, schema, limit, count),
            Node::Condition(c) => {
                *count += 1;
                match schema.fields.get(c.field).and_then(conditions_of) {
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

/// A request's filter (with its view's) over [`MAX_TABLE_CONDITION_NODES`]
/// expanded nodes is refused (400) rather than compiled: 200 conditions
/// naming one lookup that expands to 2,000 nodes would write 400,000.
pub fn check_filter(filter: &Filter, schema: &Schema) -> crate::error::ApiResult<()> {
    if expanded_nodes(filter, schema, MAX_TABLE_CONDITION_NODES) > MAX_TABLE_CONDITION_NODES {
        return Err(crate::error::ApiError::bad_request(format!(
            "filter: the filter expands to more than {MAX_TABLE_CONDITION_NODES} condition nodes, \
             counting the conditions of every conditioned lookup or rollup it names (down to \
             {} levels); a filter may expand to at most {MAX_TABLE_CONDITION_NODES}.",
            super::MAX_CONDITIONS_DEPTH
        )));
    }
    Ok(())
}
