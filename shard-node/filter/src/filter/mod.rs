//! The filter language: AST, parser (JSON -> AST, checked against the
//! schema) and compiler (AST -> SQL boolean expression + parameters).
//! The grammar is at the top of `lib.rs` and in FILTERS.md.

mod compile;
mod parse;

pub use compile::{compile, compile_where};
pub use parse::{parse, parse_value, FieldKey};

use crate::dates::DateOperand;
use crate::schema::Op;

/// Nesting limit: the top-level object is level one.
pub const MAX_LEVELS: usize = 2;
/// Node limit: every group (the top one too) and every condition.
pub const MAX_NODES: usize = 200;
/// Most values one condition's list may hold (choice ids or names of
/// `any_of`/`has_any`/..., record ids of a link operator). Part C sets no
/// number; a select field has at most 1,000 choices, so a longer list of
/// choices can only repeat itself, and 1,000 record ids is far past what a
/// person picks.
pub const MAX_LIST_VALUES: usize = 1000;

/// Reserved choice name/id that stands for a select value that no longer
/// resolves. It never appears in a cell, so it matches nothing.
pub const NO_SUCH_CHOICE: &str = "__service_no_such_choice__";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    And,
    Or,
}

/// A parsed filter: the top-level group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub root: Group,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub join: Join,
    pub nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Condition(Condition),
    Group(Group),
}

/// One `{field, op, value}`, with the field resolved and the value checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// Index into `Schema::fields`.
    pub field: usize,
    pub op: Op,
    pub operand: Operand,
}

/// A select value after resolution against the field's choices.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ChoiceRef {
    Id(String),
    /// A name or id that matches no choice: the sentinel.
    Unresolved,
}

/// A checked value, shaped by the field's storage and the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operand {
    /// `empty` / `not_empty`.
    None,
    Text(String),
    /// A finite number as decimal text.
    Number(String),
    Bool(bool),
    Date(DateOperand),
    Choice(ChoiceRef),
    /// Select lists (`any_of`, `none_of`, multi-select operators), in order.
    Choices(Vec<ChoiceRef>),
    /// Link operators: `rec_` ids, de-duplicated, in first-seen order.
    Records(Vec<String>),
}

impl Filter {
    /// A filter that constrains nothing.
    pub fn empty() -> Filter {
        Filter {
            root: Group {
                join: Join::And,
                nodes: Vec::new(),
            },
        }
    }

    /// AND two filters (a view's filter and the request's).
    pub fn and(self, other: Filter) -> Filter {
        Filter {
            root: Group {
                join: Join::And,
                nodes: vec![Node::Group(self.root), Node::Group(other.root)],
            },
        }
    }

    /// Ids of the fields the filter reads (schema indexes), for callers that
    /// need to know which columns or links it touches.
    pub fn fields(&self) -> Vec<usize> {
        fn walk(g: &Group, out: &mut Vec<usize>) {
            for n in &g.nodes {
                match n {
                    Node::Condition(c) => {
                        if !out.contains(&c.field) {
                            out.push(c.field)
                        }
                    }
                    Node::Group(g) => walk(g, out),
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }
}
