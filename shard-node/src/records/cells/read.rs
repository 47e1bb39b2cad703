//! Read shapes of part A, as one `jsonb` expression per field over the
//! record row `r`: strings, numbers (durations in seconds), `YYYY-MM-DD`
//! days, UTC instants with milliseconds, choice ids (named in Rust),
//! link cells as `[{id, display}]` in link order, lookups as one entry per
//! live linked record, rollups as one aggregate. Computed at read time.

use std::collections::HashMap;

use filter_lang::Params;

use super::wire::{self, Wire};
use super::ReadSet;
use crate::records::reply::{Post, ReadField};
use crate::schema::{Costume, DatabaseSchema, Family, FieldRow, StorageKind, TableSchema};
use crate::tenant_schema;

/// `jsonb` of a stored column of `f` through the quoted row alias `row`.
fn column_json(f: &FieldRow, row: &str) -> String {
    let Ok(col) = tenant_schema::column(&f.id) else {
        return "NULL::jsonb".into();
    };
    let e = format!("{row}.{col}");
    match f.sql_type.as_deref() {
        Some("date") => format!("to_jsonb(to_char({e}, 'YYYY-MM-DD'))"),
        Some("timestamptz") => format!(
            "to_jsonb(to_char({e} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'))"
        ),
        Some("text[]") if f.costume == Costume::Attachment => {
            format!("coalesce(to_jsonb({e}), '[]'::jsonb)")
        }
        Some(_) => format!("to_jsonb({e})"),
        None => "NULL::jsonb".into(),
    }
}

/// Text of the display field of a linked record (alias `row`), or NULL.
fn display_text(schema: &DatabaseSchema, target: &TableSchema, row: &str) -> String {
    let Some(df) = target
        .display_field_id
        .as_deref()
        .and_then(|id| target.field(id))
    else {
        return "NULL::text".into();
    };
    let Ok(col) = tenant_schema::column(&df.id) else {
        return "NULL::text".into();
    };
    let e = format!("{row}.{col}");
    let _ = schema;
    match df.sql_type.as_deref() {
        Some("date") => format!("to_char({e}, 'YYYY-MM-DD')"),
        Some("timestamptz") => {
            format!("to_char({e} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')")
        }
        Some("text[]") => format!("array_to_string({e}, ', ')"),
        Some(_) => format!("({e})::text"),
        None => "NULL::text".into(),
    }
}

/// `FROM connector c JOIN target t ON ... WHERE c.own = r.id AND t live`,
/// with the link's aliases, and `AND (conditions)` over the linked row when
/// a lookup or rollup has them (their values pushed onto `params`); None
/// when the link is broken.
fn link_join(
    schema: &DatabaseSchema,
    link: &FieldRow,
    row: &str,
    conditions: Option<&filter_lang::Conditions>,
    params: &mut Params,
) -> Option<(String, String, String)> {
    let target = schema.link_target(link)?;
    let owner = link.connector_owner()?;
    let conn = tenant_schema::connector(&schema.database_id, owner).ok()?;
    let target_q = tenant_schema::table(&schema.database_id, &target.id).ok()?;
    let (own, other) = link.connector_columns();
    let (c, t) = if row == "\"r\"" {
        ("\"__rd_c\"", "\"__rd_t\"")
    } else {
        ("\"__rd_c2\"", "\"__rd_t2\"")
    };
    let only = conditions
        .and_then(|cond| conditions_sql(schema, cond, t.trim_matches('"'), params))
        .map(|sql| format!(" AND ({sql})"))
        .unwrap_or_default();
    Some((
        format!(
            "FROM {conn} AS {c} JOIN {target_q} AS {t} ON {t}.id = {c}.{other} \
             WHERE {c}.{own} = {row}.id AND {t}.deleted_at IS NULL{only}"
        ),
        c.to_owned(),
        t.to_owned(),
    ))
}

/// A lookup's or rollup's parsed `conditions` (a filter over the linked
/// table, [`DatabaseSchema::conditions_of`]) as SQL over the linked row
/// `alias`. Its values are bound parameters pushed onto `params`, numbered
/// after the statement's others: the SQL text depends only on the
/// conditions' shape, never on a value.
fn conditions_sql(
    schema: &DatabaseSchema,
    conditions: &filter_lang::Conditions,
    alias: &str,
    params: &mut Params,
) -> Option<String> {
    let env = filter_lang::Env::new(&schema.timezone, chrono::Utc::now())
        .or_else(|_| filter_lang::Env::new("UTC", chrono::Utc::now()))
        .ok()?;
    Some(filter_lang::filter::compile(
        &conditions.filter,
        &conditions.schema,
        &env,
        alias,
        params,
    ))
}

/// One element of a lookup list: the surfaced field's read expression
/// over the linked row (a surfaced link shows its display texts).
fn lookup_element(target: &FieldRow, inner_expr: String) -> String {
    match target.costume.family() {
        Family::Link => {
            format!("(SELECT jsonb_agg(x->'display') FROM jsonb_array_elements({inner_expr}) x)")
        }
        _ => inner_expr,
    }
}

/// A per-page aggregate a list page joins instead of running correlated
/// subqueries per row: `sql` selects `from_id` (the page row's id) and
/// one column per batched cell from the page's ids (`"__pg"`).
pub struct PageJoin {
    pub alias: String,
    pub sql: String,
}

/// The read set of a list page (`read_set`'s fields, in that order): the
/// stored columns in their plain form ([`wire`]), and the link cells and
/// condition-free lookups read from one grouped join per link over the
/// page's ids instead of one subquery per row and field; returns those
/// joins. Link cells travel as two arrays (ids, display texts), lookups of
/// a plain column as one array; the cells are the same values in the same
/// order (`position`), `[]` when nothing is linked. The values of
/// conditioned lookups and rollups are pushed onto `params`, which the
/// caller numbers after the statement's other parameters.
pub fn page_set(
    schema: &DatabaseSchema,
    table: &TableSchema,
    only: Option<&[String]>,
    params: &mut Params,
) -> (Vec<ReadField>, Vec<PageJoin>) {
    let mut fields = read_fields(schema, table, only, params);
    for rf in fields.iter_mut() {
        let Some(f) = table.field(&rf.id) else {
            continue;
        };
        if matches!(
            f.costume.family(),
            Family::Scalar | Family::Select | Family::Formula | Family::Attachment
        ) {
            if let Some((sql, w)) = wire::cell(f, "\"r\"") {
                rf.expr = sql;
                rf.wire = w;
            }
        }
    }
    let joins = batch_links(schema, table, &mut fields, params);
    (fields, joins)
}

/// What one batched cell aggregates: SQL columns and how the cell reads.
fn batched(
    schema: &DatabaseSchema,
    f: &FieldRow,
    params: &mut Params,
) -> Option<(Vec<String>, Wire)> {
    match f.costume.family() {
        Family::Link => {
            let target = schema.link_target(f)?;
            let display = display_text(schema, target, "\"__rd_t\"");
            Some((vec!["\"__rd_t\".id".to_owned(), display], Wire::Link))
        }
        Family::Lookup if f.options.get("conditions").is_none_or(|c| c.is_null()) => {
            let (_, Some(target)) = schema.rides(f)? else {
                return None;
            };
            let plain = matches!(
                target.costume.family(),
                Family::Scalar | Family::Select | Family::Formula
            )
            .then(|| wire::column(target, "\"__rd_t\""))
            .flatten();
            Some(match plain {
                Some((sql, of)) => (
                    vec![sql],
                    Wire::List {
                        of,
                        null_as_empty: true,
                    },
                ),
                None => {
                    let inner = read_field(schema, target, "\"__rd_t\"", params);
                    (vec![lookup_element(target, inner.expr)], Wire::Json)
                }
            })
        }
        _ => None,
    }
}

/// One link field's page join: its id, the join's alias, and per element
/// read through it (element, aggregate, column).
type LinkGroup<'a> = (String, String, Vec<(String, &'a str, String)>);

/// Rewrites the link cells and condition-free lookups of `fields` to read
/// from the page joins it returns (see [`page_set`]).
fn batch_links(
    schema: &DatabaseSchema,
    table: &TableSchema,
    fields: &mut [ReadField],
    params: &mut Params,
) -> Vec<PageJoin> {
    // link field id -> (alias, [(element, aggregate, column)])
    let mut groups: Vec<LinkGroup> = Vec::new();
    for rf in fields.iter_mut() {
        let Some(f) = table.field(&rf.id) else {
            continue;
        };
        let link = match f.costume.family() {
            Family::Link => f,
            _ => match schema.rides(f) {
                Some((link, _)) => link,
                None => continue,
            },
        };
        let Some((elements, w)) = batched(schema, f, params) else {
            continue;
        };
        // The joined form only where the correlated one would be built.
        if link_join(schema, link, "\"r\"", None, params).is_none() {
            continue;
        }
        let n = match groups.iter().position(|g| g.0 == link.id) {
            Some(n) => n,
            None => {
                groups.push((
                    link.id.clone(),
                    format!("\"__lk{}\"", groups.len()),
                    Vec::new(),
                ));
                groups.len() - 1
            }
        };
        let alias = groups[n].1.clone();
        let mut cols = Vec::new();
        for element in elements {
            let col = format!("\"c{}\"", groups[n].2.len());
            let agg = if w == Wire::Json {
                "jsonb_agg"
            } else {
                "array_agg"
            };
            groups[n].2.push((element, agg, col.clone()));
            cols.push(format!("{alias}.{col}"));
        }
        rf.expr = if w == Wire::Json {
            format!("coalesce({}, '[]'::jsonb)", cols.join(", "))
        } else {
            cols.join(", ")
        };
        rf.wire = w;
    }
    groups
        .into_iter()
        .filter_map(|(link_id, alias, cols)| {
            let link = table.field(&link_id)?;
            let target = schema.link_target(link)?;
            let conn =
                tenant_schema::connector(&schema.database_id, link.connector_owner()?).ok()?;
            let target_q = tenant_schema::table(&schema.database_id, &target.id).ok()?;
            let (own, other) = link.connector_columns();
            let elements: Vec<String> =
                cols.iter().map(|(e, _, c)| format!("{e} AS {c}")).collect();
            let aggregates: Vec<String> = cols
                .iter()
                .map(|(_, agg, c)| format!("{agg}(\"__s\".{c}) AS {c}"))
                .collect();
            // Link order comes from the sorted subquery, which the grouping
            // consumes as it is (its input is already in `from_id` order),
            // instead of `agg(... ORDER BY position)`: before PostgreSQL 16
            // every ordered aggregate sorts each group on its own, three
            // tiny sorts per record of the page (about 20 % of a page's
            // link reads).
            Some(PageJoin {
                sql: format!(
                    "SELECT \"__s\".from_id AS from_id, {} FROM (\
                     SELECT \"__rd_c\".{own} AS from_id, {} FROM \"__pg\" \
                     JOIN {conn} AS \"__rd_c\" ON \"__rd_c\".{own} = \"__pg\".id \
                     JOIN {target_q} AS \"__rd_t\" ON \"__rd_t\".id = \"__rd_c\".{other} \
                     AND \"__rd_t\".deleted_at IS NULL \
                     ORDER BY \"__rd_c\".{own}, \"__rd_c\".position) AS \"__s\" \
                     GROUP BY \"__s\".from_id",
                    aggregates.join(", "),
                    elements.join(", ")
                ),
                alias,
            })
        })
        .collect()
}

fn choice_names(f: &FieldRow) -> HashMap<String, String> {
    f.choices().into_iter().collect()
}

/// The read expression and post-processing of one field; the values its
/// SQL binds (a lookup's or rollup's conditions) are pushed onto `params`.
pub fn read_field(
    schema: &DatabaseSchema,
    f: &FieldRow,
    row: &str,
    params: &mut Params,
) -> ReadField {
    let (expr, post) = match f.costume.family() {
        Family::Button => ("NULL::jsonb".to_owned(), Post::Plain),
        Family::Select => (column_json(f, row), Post::Choices(choice_names(f))),
        Family::Attachment => (column_json(f, row), Post::Attachments),
        Family::Link => {
            let expr = match (
                link_join(schema, f, row, None, params),
                schema.link_target(f),
            ) {
                (Some((from, c, t)), Some(target)) => format!(
                    "coalesce((SELECT jsonb_agg(jsonb_build_object('id', {t}.id, 'display', {d}) \
                     ORDER BY {c}.position) {from}), '[]'::jsonb)",
                    d = display_text(schema, target, &t),
                ),
                _ => "'[]'::jsonb".to_owned(),
            };
            (expr, Post::Link)
        }
        Family::Lookup => match schema.rides(f) {
            Some((link, Some(target))) => {
                let conditions = schema.conditions_of(f);
                match link_join(schema, link, row, conditions.as_deref(), params) {
                    Some((from, c, t)) => {
                        let inner = read_field(schema, target, &t, params);
                        let post = match inner.post {
                            Post::Choices(m) => Post::Choices(m),
                            _ => Post::Plain,
                        };
                        (
                            format!(
                                "coalesce((SELECT jsonb_agg({e} ORDER BY {c}.position) {from}), '[]'::jsonb)",
                                e = lookup_element(target, inner.expr)
                            ),
                            post,
                        )
                    }
                    None => ("'[]'::jsonb".to_owned(), Post::Plain),
                }
            }
            _ => ("'[]'::jsonb".to_owned(), Post::Plain),
        },
        Family::Rollup => match schema.rides(f) {
            Some((link, target)) => match link_join(
                schema,
                link,
                row,
                schema.conditions_of(f).as_deref(),
                params,
            ) {
                Some((from, _c, t)) => {
                    let agg = f.option_str("aggregation").unwrap_or("count");
                    let value = match (agg, target.and_then(|t| t.column().map(|_| t))) {
                        ("count", _) => "count(*)".to_owned(),
                        (a @ ("sum" | "avg" | "min" | "max"), Some(tf)) => {
                            format!(
                                "{a}({t}.{})",
                                tenant_schema::column(&tf.id).unwrap_or_default()
                            )
                        }
                        _ => "NULL".to_owned(),
                    };
                    let has_time = target.is_some_and(|t| t.has_time());
                    let shaped = if f.costume == Costume::RollupDate {
                        if has_time {
                            format!("to_jsonb(to_char(({value}) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'))")
                        } else {
                            format!("to_jsonb(to_char(({value}), 'YYYY-MM-DD'))")
                        }
                    } else {
                        format!("to_jsonb({value})")
                    };
                    (format!("(SELECT {shaped} {from})"), Post::Plain)
                }
                None => ("NULL::jsonb".to_owned(), Post::Plain),
            },
            None => ("NULL::jsonb".to_owned(), Post::Plain),
        },
        _ => (column_json(f, row), Post::Plain),
    };
    let _ = StorageKind::None;
    ReadField {
        id: f.id.clone(),
        name: f.name.clone(),
        expr,
        post,
        wire: Wire::Json,
    }
}

/// The read set of `table`: every field, or the `only` ones in that order,
/// with the values its expressions bind as `$1`, `$2`, ... (the caller's
/// statement numbers its own parameters after them).
pub fn read_set(schema: &DatabaseSchema, table: &TableSchema, only: Option<&[String]>) -> ReadSet {
    let mut params = Params::new(1);
    let fields = read_fields(schema, table, only, &mut params);
    ReadSet {
        fields,
        values: params.into_values(),
    }
}

/// The fields of [`read_set`], their values pushed onto `params`.
fn read_fields(
    schema: &DatabaseSchema,
    table: &TableSchema,
    only: Option<&[String]>,
    params: &mut Params,
) -> Vec<ReadField> {
    let row = "\"r\"";
    match only {
        None => table
            .fields
            .iter()
            .map(|f| read_field(schema, f, row, params))
            .collect(),
        Some(ids) => ids
            .iter()
            .filter_map(|id| table.field(id))
            .map(|f| read_field(schema, f, row, params))
            .collect(),
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "read_cost_tests.rs"]
mod cost_tests;
