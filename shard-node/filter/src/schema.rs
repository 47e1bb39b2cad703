//! What the caller tells the compiler about one table: its fields, how each
//! is stored, and the request's clock. Plain data; build it from the catalog.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::error::Error;
use crate::filter::Filter;
use crate::sql::quote_ident;

/// A select choice, in definition order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub id: String,
    pub name: String,
}

/// A link's storage: a connector table with one row per (record, linked
/// record) pair, and the linked table (to skip trashed linked records).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSpec {
    /// Schema of the connector and target tables (the database's schema).
    pub schema: String,
    /// Connector table name (unquoted; quoted here).
    pub connector: String,
    /// Connector column holding this table's record id.
    pub own_column: String,
    /// Connector column holding the linked record's id.
    pub other_column: String,
    /// The linked table's name (unquoted); its `id` and `deleted_at` are read.
    pub target_table: String,
}

/// Aggregation of a rollup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregation {
    Sum,
    Count,
    Min,
    Max,
    Avg,
}

/// A lookup's or rollup's `conditions`: a filter over the linked table.
/// Only the linked live records it admits count, in a cell as in a filter.
/// `schema` describes the linked table; the filter was parsed against it.
/// It is shared (`Arc`): every conditioned lookup of a table onto the same
/// linked table carries the same schema, built once (a schema holding
/// copies would grow with the product of the lookups at each level).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conditions {
    pub schema: Arc<Schema>,
    pub filter: Filter,
}

/// The storage kind of a field, with what the compiler needs to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Storage {
    /// `text` column.
    Text,
    /// `text` column.
    LongText,
    /// `numeric` column.
    Number,
    /// `date` column, or `timestamptz` when `include_time`.
    Date { include_time: bool },
    /// `boolean` column; NULL (never set) reads null, sorts as an empty,
    /// and counts as unchecked in a filter (`is false`).
    Checkbox,
    /// `text` column holding a choice id.
    SingleSelect { choices: Vec<Choice> },
    /// `text[]` column holding choice ids (e-mails for multi_member).
    MultiSelect { choices: Vec<Choice> },
    /// No column: a connector table.
    Link(LinkSpec),
    /// `text[]` column of `att_` ids.
    Attachment,
    /// No column, no value.
    Button,
    /// No column: values of `target_column` on the linked live records
    /// (only those `conditions` admit, when it is set). `target` is the
    /// surfaced field's storage (a select, link or attachment target makes
    /// the lookup unfilterable).
    Lookup {
        link: LinkSpec,
        target: Box<Storage>,
        target_column: String,
        conditions: Option<Box<Conditions>>,
    },
    /// No column: an aggregate over the linked live records (only those
    /// `conditions` admit, when it is set). `result` is `Number` or
    /// `Date{..}`; `target_column` is None for `Count`.
    Rollup {
        link: LinkSpec,
        aggregation: Aggregation,
        target_column: Option<String>,
        result: Box<Storage>,
        conditions: Option<Box<Conditions>>,
    },
}

/// One field of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDef {
    /// `fld_...`
    pub id: String,
    pub name: String,
    /// The costume (`type`), e.g. `email`, `multi_member`, `formula_text`.
    pub costume: String,
    pub storage: Storage,
    /// Column name in the record table (unquoted; the field id by convention).
    pub column: String,
    /// For a text column displayed as a select (a text formula with
    /// `display_as: single_select`): the values in sort order. Single selects
    /// do not need it (their choices give the order).
    pub value_order: Option<Vec<String>>,
}

impl FieldDef {
    /// A field whose column is named by its id, the usual case.
    pub fn new(id: &str, name: &str, costume: &str, storage: Storage) -> Self {
        FieldDef {
            id: id.to_owned(),
            name: name.to_owned(),
            costume: costume.to_owned(),
            storage,
            column: id.to_owned(),
            value_order: None,
        }
    }

    /// A `multi_member` field (list of e-mails): only `empty`/`not_empty`
    /// mean anything in a filter.
    pub fn is_multi_member(&self) -> bool {
        self.costume == "multi_member"
    }

    /// The filter operators this field accepts (the `operators` attribute of
    /// a field in API responses), in the order of Part A's table.
    pub fn operators(&self) -> &'static [Op] {
        operators_for(&self.storage)
    }

    /// Whether `sort` may name this field.
    pub fn sortable(&self) -> bool {
        matches!(
            self.storage,
            Storage::Text
                | Storage::LongText
                | Storage::Number
                | Storage::Date { .. }
                | Storage::Checkbox
                | Storage::SingleSelect { .. }
        )
    }

    /// The quoted column reference through a quoted row alias.
    pub(crate) fn column_sql(&self, row: &str) -> String {
        format!("{row}.{}", quote_ident(&self.column))
    }
}

/// Filter operators (wire names in [`Op::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Is,
    IsNot,
    Contains,
    NotContains,
    Empty,
    NotEmpty,
    Greater,
    GreaterOrEqual,
    Less,
    LessOrEqual,
    Before,
    After,
    OnOrBefore,
    OnOrAfter,
    AnyOf,
    NoneOf,
    HasAny,
    HasAll,
    HasNone,
    IsExactly,
}

impl Op {
    pub const ALL: [Op; 20] = [
        Op::Is,
        Op::IsNot,
        Op::Contains,
        Op::NotContains,
        Op::Empty,
        Op::NotEmpty,
        Op::Greater,
        Op::GreaterOrEqual,
        Op::Less,
        Op::LessOrEqual,
        Op::Before,
        Op::After,
        Op::OnOrBefore,
        Op::OnOrAfter,
        Op::AnyOf,
        Op::NoneOf,
        Op::HasAny,
        Op::HasAll,
        Op::HasNone,
        Op::IsExactly,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Is => "is",
            Op::IsNot => "is_not",
            Op::Contains => "contains",
            Op::NotContains => "not_contains",
            Op::Empty => "empty",
            Op::NotEmpty => "not_empty",
            Op::Greater => "greater",
            Op::GreaterOrEqual => "greater_or_equal",
            Op::Less => "less",
            Op::LessOrEqual => "less_or_equal",
            Op::Before => "before",
            Op::After => "after",
            Op::OnOrBefore => "on_or_before",
            Op::OnOrAfter => "on_or_after",
            Op::AnyOf => "any_of",
            Op::NoneOf => "none_of",
            Op::HasAny => "has_any",
            Op::HasAll => "has_all",
            Op::HasNone => "has_none",
            Op::IsExactly => "is_exactly",
        }
    }

    pub fn from_name(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.name() == s)
    }
}

const TEXT_OPS: &[Op] = &[
    Op::Is,
    Op::IsNot,
    Op::Contains,
    Op::NotContains,
    Op::Empty,
    Op::NotEmpty,
];
const NUMBER_OPS: &[Op] = &[
    Op::Is,
    Op::IsNot,
    Op::Greater,
    Op::GreaterOrEqual,
    Op::Less,
    Op::LessOrEqual,
    Op::Empty,
    Op::NotEmpty,
];
const DATE_OPS: &[Op] = &[
    Op::Is,
    Op::IsNot,
    Op::Before,
    Op::After,
    Op::OnOrBefore,
    Op::OnOrAfter,
    Op::Empty,
    Op::NotEmpty,
];
const CHECKBOX_OPS: &[Op] = &[Op::Is];
const SINGLE_SELECT_OPS: &[Op] = &[
    Op::Is,
    Op::IsNot,
    Op::AnyOf,
    Op::NoneOf,
    Op::Empty,
    Op::NotEmpty,
];
const SET_OPS: &[Op] = &[
    Op::HasAny,
    Op::HasAll,
    Op::HasNone,
    Op::IsExactly,
    Op::Empty,
    Op::NotEmpty,
];
const ATTACHMENT_OPS: &[Op] = &[Op::Empty, Op::NotEmpty];

/// Part A's operator table, by storage kind.
pub fn operators_for(storage: &Storage) -> &'static [Op] {
    match storage {
        Storage::Text | Storage::LongText => TEXT_OPS,
        Storage::Number => NUMBER_OPS,
        Storage::Date { .. } => DATE_OPS,
        Storage::Checkbox => CHECKBOX_OPS,
        Storage::SingleSelect { .. } => SINGLE_SELECT_OPS,
        Storage::MultiSelect { .. } | Storage::Link(_) => SET_OPS,
        Storage::Attachment => ATTACHMENT_OPS,
        Storage::Button => &[],
        Storage::Lookup { target, .. } => match **target {
            Storage::Text
            | Storage::LongText
            | Storage::Number
            | Storage::Date { .. }
            | Storage::Checkbox => operators_for(target),
            _ => &[],
        },
        Storage::Rollup { result, .. } => match **result {
            Storage::Number | Storage::Date { .. } => operators_for(result),
            _ => &[],
        },
    }
}

/// The table being filtered or sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schema {
    pub fields: Vec<FieldDef>,
}

impl Schema {
    pub fn new(fields: Vec<FieldDef>) -> Self {
        Schema { fields }
    }

    /// Resolve a reference: a field id first, then an exact name. A name
    /// shared by two fields is refused, asking for the id.
    pub fn resolve(&self, reference: &str, path: &str) -> Result<usize, Error> {
        if let Some(i) = self.fields.iter().position(|f| f.id == reference) {
            return Ok(i);
        }
        let mut named = self
            .fields
            .iter()
            .enumerate()
            .filter(|(_, f)| f.name == reference);
        match (named.next(), named.next()) {
            (Some((i, _)), None) => Ok(i),
            (Some(_), Some(_)) => Err(Error::new(
                path,
                format!(
                    "Field name '{reference}' matches more than one field; refer to it by its id."
                ),
            )),
            (None, _) => Err(Error::new(path, format!("Unknown field '{reference}'."))),
        }
    }
}

/// The request's clock and the database's timezone, resolved once per
/// request so every relative date in it agrees.
#[derive(Debug, Clone, Copy)]
pub struct Env {
    pub timezone: Tz,
    pub now: DateTime<Utc>,
}

impl Env {
    /// `timezone` is an IANA name (`UTC`, `Europe/Paris`); an unknown name is
    /// an error for the caller to decide about (the catalog should never
    /// hold one).
    pub fn new(timezone: &str, now: DateTime<Utc>) -> Result<Env, UnknownTimezone> {
        let timezone = timezone
            .parse::<Tz>()
            .map_err(|_| UnknownTimezone(timezone.to_owned()))?;
        Ok(Env { timezone, now })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown timezone {0:?}")]
pub struct UnknownTimezone(pub String);
