//! The records API's small query languages, compiled to parameterised
//! PostgreSQL: the `filter` object, the `sort` parameter and the `bookmark`
//! of keyset paging (Part B, "Records"). The caller describes the table
//! ([`Schema`]) and the request clock ([`Env`]); this crate never talks to
//! the database. SQL text is only ever fixed fragments, identifiers passed
//! through [`quote_ident`], and `$n::type` placeholders whose values land in
//! [`Params`].
//!
//! # Filter grammar (JSON)
//!
//! ```text
//! filter     := group                                   -- level 1
//! group      := { "join"?: join, "conditions"?: [member, ...] | null }
//! join       := "and" | "or" | null                     -- absent/null = and
//! member     := condition | group                       -- a group inside the
//!                                                       -- top is level 2; no deeper
//! condition  := { "field": ref, "op": op, "value"?: value }
//! ref        := "fld_..." id | exact field name         -- id first; a shared
//!                                                       -- name is refused
//! op         := one of the operators of the field's storage kind (Part A)
//! ```
//!
//! A member with `conditions` or `join` is a group; with `field` or `op` a
//! condition; with both, refused. At most [`filter::MAX_NODES`] nodes: every
//! group (the top one too) and every condition. Other keys are ignored.
//!
//! Values by storage kind (operator `empty` / `not_empty`: no value or null):
//!
//! ```text
//! text, long_text   string (no NUL)
//! number            finite JSON number (numeric strings refused)
//! checkbox          true | false                         (op is)
//! date              "YYYY-MM-DD" | relative
//!   with time       "YYYY-MM-DD" | "YYYY-MM-DDTHH:MM[:SS[.f]][Z|±HH:MM]" | relative
//! relative          { "relative": "today"|"now", "offset"?: int, |int| <= 366,
//!                     "unit"?: "day"|"week"|"month" }    -- no other key
//! single_select     choice id or name (is, is_not); [id or name, ...] (any_of, none_of)
//! multi_select      [id or name, ...]
//! link              ["rec_xxxxxxxxxxxx", ...]
//! lookup, rollup    as the surfaced / resulting kind
//! attachment        empty / not_empty only; button: no operator
//! ```
//!
//! # Sort grammar
//!
//! ```text
//! sort  := term ("," term)*            -- blank: no sort
//! term  := ref | "-" ref | ref ":desc" | ref ":asc"   -- suffix case-insensitive;
//!                                                     -- "-" and a suffix never combine
//! ```
//!
//! Sortable kinds: text, long_text, number, date, checkbox, single_select.
//!
//! # Use
//!
//! ```
//! use filter_lang::*;
//! let schema = Schema::new(vec![FieldDef::new("fld_aaaaaaaaaaaa", "Name", "single_line_text", Storage::Text)]);
//! let env = Env::new("UTC", chrono::Utc::now()).unwrap();
//! let filter = filter::parse_value(
//!     &serde_json::json!({"conditions": [{"field": "Name", "op": "contains", "value": "50%"}]}),
//!     &schema, &env).unwrap();
//! let sort = parse_sort("-Name", &schema).unwrap();
//! let mut params = Params::new(1);
//! let where_sql = filter::compile(&filter, &schema, &env, "r", &mut params);
//! let plan = sort.plan(&schema, "r", &mut params);
//! let sql = format!("SELECT r.id, {} FROM t AS r WHERE r.deleted_at IS NULL AND {where_sql} ORDER BY {} LIMIT 101",
//!     plan.bookmark_columns().join(", "), plan.order_by());
//! assert!(sql.contains("ILIKE $1::text"));
//! ```
//!
//! See FILTERS.md beside this crate for the behaviour of every operator.

pub mod bookmark;
pub mod dates;
mod error;
pub mod filter;
pub mod numeric;
pub mod schema;
pub mod sort;
pub mod sql;

pub use bookmark::{Bookmark, BookmarkKey};
pub use error::Error;
pub use filter::{FieldKey, Filter};
pub use schema::{Aggregation, Choice, Conditions, Env, FieldDef, LinkSpec, Op, Schema, Storage};
pub use sort::{parse_sort, Resume, Sort, SortPlan, MAX_SORT_TERMS, SORT_PREFIX_CHARS};
pub use sql::{contains_pattern, qualified, quote_ident, Params, SqlValue};
