//! `GET /api/tables/{id}/records` (query) and `POST .../records/list` (the
//! same parameters in a JSON body): filter, view, sort, search, fields,
//! keyset paging by bookmark, and the reply shape options.

use std::collections::{HashMap, HashSet};

use axum::extract::{Path, Query, State};
use filter_lang::{filter, parse_sort, Bookmark, BookmarkKey, FieldKey, Sort, SqlValue};
use serde_json::Value;
use tokio_postgres::types::ToSql;

use super::kept_plans;
use super::page_sql;
use super::store::bind;
use tokio_postgres::Row;

use super::bookmarks::{bookmark_key, bookmark_order};
use super::cells::read;
use super::filter_error;
pub use super::list_params::ListParams;
use super::page::{self, JsonBytes};
use super::store;
use super::table::RecordTable;
use crate::attachments::shown::Shown;
use crate::auth::{Access, Checked, HeldRead};
use crate::catalog::views::{self, View};
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::http::body::JsonObject;
use crate::schema::DatabaseSchema;
use crate::state::AppState;

pub async fn get_handler(
    read: HeldRead,
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<JsonBytes> {
    let params = ListParams::from_query(&query)?;
    list(&state, &read, &id, &params).await
}

pub async fn post_handler(
    read: HeldRead,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<JsonBytes> {
    let params = ListParams::from_body(&body)?;
    list(&state, &read, &id, &params).await
}

/// The read expressions of a page's cells and the values they bind.
struct Cells {
    exprs: Vec<String>,
    joins: Vec<read::PageJoin>,
    /// Bound after the statement's other parameters.
    values: Vec<SqlValue>,
}

impl Cells {
    /// The cells of `fields` and `joins` (`read::page_set`) and the values
    /// their expressions bind.
    fn new(
        fields: &[super::reply::ReadField],
        joins: Vec<read::PageJoin>,
        values: Vec<SqlValue>,
    ) -> Cells {
        Cells {
            exprs: fields.iter().map(|f| f.expr.clone()).collect(),
            joins,
            values,
        }
    }
}

/// One page's statement parts, read in one statement or in two.
struct PageQuery<'a> {
    table: &'a str,
    /// The cells as the one-statement page selects them (their values
    /// numbered after `values`).
    cells: &'a Cells,
    /// Result columns the cells take (`page::cell_columns`): the bookmark
    /// keys of a one-statement page follow them.
    cell_columns: usize,
    conditions: &'a str,
    resume: Option<&'a filter_lang::Resume>,
    plan: &'a filter_lang::SortPlan,
    /// `take + 1`: a row past the page says there is a next one.
    limit: &'a str,
    /// The values of the conditions, sort and keyset (`$1`, ...).
    values: &'a [SqlValue],
    take: usize,
    /// The fingerprint a bookmark is signed under ([`bookmark_order`]).
    order: String,
    key: BookmarkKey,
}

/// A page's rows (cells from column 5 on) and its bookmark.
type PageRows = (Vec<Row>, Option<String>);

impl PageQuery<'_> {
    /// The bookmark of a read whose rows go one past the page (`None` on
    /// the last page): the page's last row, its id in column 0 and its key
    /// texts from column `keys_at` on.
    fn bookmark(&self, rows: &[Row], keys_at: usize) -> ApiResult<Option<String>> {
        if rows.len() <= self.take {
            return Ok(None);
        }
        let last = &rows[self.take - 1];
        let values = (0..self.plan.keys.len())
            .map(|k| last.try_get::<_, Option<String>>(keys_at + k))
            .collect::<Result<_, _>>()?;
        let bookmark = Bookmark {
            order: self.order.clone(),
            values,
            id: last.try_get(0)?,
        };
        Ok(Some(bookmark.encode(&self.key)))
    }

    /// The page in one prepared statement (`page_sql::page_sql`).
    async fn read_in_one(&self, client: &deadpool_postgres::Object) -> ApiResult<PageRows> {
        let sql = page_sql::page_sql(
            self.table,
            &self.cells.exprs,
            &self.cells.joins,
            self.conditions,
            self.resume,
            self.plan,
            self.limit,
        );
        let mut bound = bind(self.values);
        bound.extend(bind(&self.cells.values));
        let refs: Vec<&(dyn ToSql + Sync)> = bound
            .iter()
            .map(|(b, _)| b.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let statement = client.prepare_cached(&sql).await?;
        let rows = client.query(&statement, &refs).await?;
        let bookmark = self.bookmark(&rows, 5 + self.cell_columns)?;
        Ok((rows, bookmark))
    }

    /// The page in one statement ([`page_sql::page_sql`], one round trip): for
    /// cells without grouped reads. With `keep_plan`
    /// ([`kept_plans::may_keep_plan`]) it is prepared once per session and
    /// shape, and PostgreSQL keeps a generic plan when that plan costs no
    /// more than those made for the values of its first calls
    /// (`plan_cache_mode = auto`); else it is sent unprepared and planned
    /// for these values.
    async fn read_planned(
        &self,
        client: &deadpool_postgres::Object,
        keep_plan: bool,
    ) -> ApiResult<PageRows> {
        let sql = page_sql::page_sql(
            self.table,
            &self.cells.exprs,
            &self.cells.joins,
            self.conditions,
            self.resume,
            self.plan,
            self.limit,
        );
        let mut bound = bind(self.values);
        bound.extend(bind(&self.cells.values));
        let rows = if keep_plan {
            store::query_prepared(client, &sql, &bound).await?
        } else {
            client.query_typed(&sql, &store::typed(&bound)).await?
        };
        let bookmark = self.bookmark(&rows, 5 + self.cell_columns)?;
        Ok((rows, bookmark))
    }

    /// The page in two statements: its rows planned for these values
    /// (`page_sql::page_ids_sql`, unprepared, one round trip), then their
    /// cells under one kept plan (`page_sql::page_cells_sql`; `cells` numbers
    /// its values from `$4`). `None` when a row changed between the two
    /// (the caller reads in one statement).
    async fn read_in_two(
        &self,
        client: &deadpool_postgres::Object,
        cells: &Cells,
    ) -> ApiResult<Option<PageRows>> {
        let sql = page_sql::page_ids_sql(
            self.table,
            self.conditions,
            self.resume,
            self.plan,
            self.limit,
        );
        let bound = bind(self.values);
        let found = client.query_typed(&sql, &store::typed(&bound)).await?;
        let bookmark = self.bookmark(&found, 3)?;
        let on_page = &found[..self.take.min(found.len())];
        if on_page.is_empty() {
            return Ok(Some((Vec::new(), bookmark)));
        }
        let column = |i: usize| -> Result<Vec<&str>, tokio_postgres::Error> {
            on_page.iter().map(|r| r.try_get::<_, &str>(i)).collect()
        };
        let (ids, tids, xmins) = (column(0)?, column(1)?, column(2)?);
        let sql = page_sql::page_cells_sql(self.table, &cells.exprs, &cells.joins);
        let statement = client.prepare_cached(&sql).await?;
        let bound = bind(&cells.values);
        let mut refs: Vec<&(dyn ToSql + Sync)> = vec![&ids, &tids, &xmins];
        refs.extend(bound.iter().map(|(b, _)| b.as_ref() as &(dyn ToSql + Sync)));
        let rows = client.query(&statement, &refs).await?;
        Ok(page_sql::same_versions(&rows, on_page.len())?.then_some((rows, bookmark)))
    }
}

/// The view a `view` parameter names: an id of this table, or a name
/// unique among the table's views.
fn pick_view(
    all: Vec<View>,
    by_id: Option<View>,
    table_id: &str,
    reference: &str,
) -> ApiResult<View> {
    if let Some(v) = by_id {
        return if v.table_id == table_id {
            Ok(v)
        } else {
            Err(ApiError::NotFound)
        };
    }
    let mut named: Vec<View> = all.into_iter().filter(|v| v.name == reference).collect();
    match named.len() {
        0 => Err(ApiError::NotFound),
        1 => Ok(named.remove(0)),
        _ => Err(ApiError::bad_request(format!(
            "More than one view is named '{reference}'; use its id."
        ))),
    }
}

/// A view's visible fields in column order (`field_order`, then the rest,
/// minus `hidden_fields`).
pub fn view_columns(view: &View, table: &crate::schema::TableSchema) -> Vec<String> {
    let ids = |key: &str| -> Vec<String> {
        view.config
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let hidden: HashSet<String> = ids("hidden_fields").into_iter().collect();
    let mut seen: HashSet<String> = HashSet::new();
    let mut out: Vec<String> = ids("field_order")
        .into_iter()
        .filter(|id| table.field(id).is_some() && seen.insert(id.clone()))
        .collect();
    for f in &table.fields {
        if seen.insert(f.id.clone()) {
            out.push(f.id.clone());
        }
    }
    out.retain(|id| !hidden.contains(id));
    out
}

/// One page of `table_id`, its held check sent with its first statement
/// ([`HeldRead::check`]).
pub async fn list(
    state: &AppState,
    read: &HeldRead,
    table_id: &str,
    p: &ListParams,
) -> ApiResult<JsonBytes> {
    let db: &Db = &state.db;
    db.measured(DbOp::ListRecords, async {
        let mut client = db.client_for(&read.database_id).await?;
        let cached = read.cached(state);
        let started = cached
            .as_ref()
            .map(|s| (s.version, page_of(state, &client, s, table_id, p)));
        match read.check(&client, started).await? {
            Checked::Read(out) => out,
            Checked::Stale(version) => {
                let schema = state
                    .schemas
                    .get_at(&mut client, &read.database_id, version)
                    .await?;
                page_of(state, &client, &schema, table_id, p).await
            }
        }
    })
    .await
}

/// One page of `table_id` for a caller whose held check is done
/// (`access`, e.g. a share link's reader).
pub async fn list_held(
    state: &AppState,
    access: &Access,
    table_id: &str,
    p: &ListParams,
) -> ApiResult<JsonBytes> {
    let db: &Db = &state.db;
    let database_id = access.database_id.as_str();
    db.measured(DbOp::ListRecords, async {
        let mut client = db.client_for(database_id).await?;
        let schema = state
            .schemas
            .get_at(&mut client, database_id, access.schema_version)
            .await?;
        page_of(state, &client, &schema, table_id, p).await
    })
    .await
}

/// [`list`] on `client` under `schema`.
async fn page_of(
    state: &AppState,
    client: &deadpool_postgres::Object,
    schema: &DatabaseSchema,
    table_id: &str,
    p: &ListParams,
) -> ApiResult<JsonBytes> {
    let database_id = schema.database_id.as_str();
    let rt = RecordTable::from_schema(schema, table_id)?;
    let table = schema.table(table_id).ok_or(ApiError::NotFound)?;
    let fschema = schema.filter_schema(table);
    let env = filter_lang::Env::new(&schema.timezone, chrono::Utc::now())
        .map_err(|e| anyhow::anyhow!("{e}"))?;

    let view = match &p.view {
        None => None,
        Some(r) => {
            // An id is looked up in the catalog; PostgreSQL text cannot
            // hold NUL, so such a reference can only be a name (none).
            let by_id = if r.starts_with("viw_") && !r.contains('\0') {
                views::get(client, database_id, r).await?
            } else {
                None
            };
            let all = if by_id.is_none() {
                views::list_for_table(client, table_id).await?
            } else {
                Vec::new()
            };
            Some(pick_view(all, by_id, table_id, r)?)
        }
    };

    let mut flt = match &p.filter {
        None => filter::Filter::empty(),
        Some(v) => filter::parse_value(v, &fschema, &env).map_err(filter_error)?,
    };
    if let Some(v) = &view {
        if let Some(vf) = v.config.get("filters").filter(|f| !f.is_null()) {
            let vf = filter::parse(vf, &fschema, &env, FieldKey::FieldId).map_err(filter_error)?;
            flt = vf.and(flt);
        }
    }
    let (sort, source) = match (&p.sort, &view) {
        (Some(s), _) => (parse_sort(s, &fschema).map_err(filter_error)?, "sort"),
        (None, Some(v)) => match v.config.get("sorts").filter(|s| !s.is_null()) {
            Some(s) => (
                Sort::from_view_config(s, &fschema).map_err(filter_error)?,
                "view",
            ),
            None => (Sort::default(), "view"),
        },
        (None, None) => (Sort::default(), "sort"),
    };
    let order = bookmark_order(table_id, view.as_ref(), source, &sort, &fschema, p);
    let carried: Option<Vec<String>> = match (&p.fields, &view) {
        (Some(refs), _) => {
            let mut seen = HashSet::new();
            let mut ids = Vec::with_capacity(refs.len());
            for r in refs {
                let id = &super::cells::write::resolve(table, r)?.id;
                if seen.insert(id.as_str()) {
                    ids.push(id.clone());
                }
            }
            Some(ids)
        }
        (None, Some(v)) => Some(view_columns(v, table)),
        (None, None) => None,
    };
    crate::schema::expansion::check_filter(&flt, &fschema)?;
    let mut params = filter_lang::Params::new(1);
    let where_sql = filter::compile_where(&flt, &fschema, &env, "r", &mut params);
    let search_sql = match p.search.as_deref().map(str::trim) {
        Some(term) if term.contains('\0') => {
            return Err(ApiError::bad_request(
                "search may not contain a NUL character.",
            ))
        }
        Some(term) if !term.is_empty() => {
            let cols: Vec<String> = table
                .fields
                .iter()
                .filter(|f| {
                    matches!(f.sql_type.as_deref(), Some("text"))
                        && !matches!(f.costume, crate::schema::Costume::SingleSelect)
                })
                .filter_map(|f| crate::tenant_schema::column(&f.id).ok())
                .collect();
            if cols.is_empty() {
                "FALSE".to_owned()
            } else {
                let ph = params.push(SqlValue::Text(filter_lang::contains_pattern(term)));
                let ors: Vec<String> = cols
                    .iter()
                    .map(|c| format!("r.{c} ILIKE {ph} ESCAPE '\\'"))
                    .collect();
                format!("({})", ors.join(" OR "))
            }
        }
        _ => "TRUE".to_owned(),
    };
    // Filter and search values make PostgreSQL plan the page per call
    // (unless no index gives its order: `kept_plans`).
    let planned_per_call = !params.values().is_empty();
    let plan = sort.plan(&fschema, "r", &mut params);
    let resume = match &p.bookmark {
        Some(text) => {
            let b = Bookmark::decode(text, &bookmark_key(state), &order).map_err(filter_error)?;
            Some(plan.resume(&b, &order, &mut params).map_err(filter_error)?)
        }
        None => None,
    };
    // The cells' own values (conditions of lookups and rollups) are
    // numbered after those of the conditions, sort and keyset: a page
    // without them reads exactly as before.
    let mut read_params = filter_lang::Params::new(params.next_index());
    let (read_fields, joins) = read::page_set(schema, table, carried.as_deref(), &mut read_params);
    let cells = Cells::new(&read_fields, joins, read_params.into_values());
    // A validated whole number, inlined so a cached plan knows it.
    let limit = (p.page_size + 1).to_string();
    // page_size is 1..=1000 (validated).
    let take = usize::try_from(p.page_size).unwrap_or(usize::MAX);
    let conditions = format!("{where_sql} AND {search_sql}");
    // Prepared once per connection and shape (values are parameters),
    // so a page of a known shape is not parsed or planned from scratch
    // (the per-session cache is bounded at checkout, `PgConn::new`).
    let page = PageQuery {
        table: &rt.qualified,
        cells: &cells,
        cell_columns: page::cell_columns(&read_fields),
        conditions: &conditions,
        resume: resume.as_ref(),
        plan: &plan,
        limit: &limit,
        values: params.values(),
        take,
        order,
        key: bookmark_key(state),
    };
    let split = match planned_per_call {
        true if cells.joins.is_empty() => {
            let leads = state.index_leads.of(client, &rt.qualified).await?;
            let first_key = plan.keys.first().map(|k| k.expr.as_str());
            let keep_plan = kept_plans::may_keep_plan(first_key, &leads);
            Some(page.read_planned(client, keep_plan).await?)
        }
        // The second statement's cells number their values from `$4`
        // (after its three arrays).
        true if cells.values.is_empty() => page.read_in_two(client, &cells).await?,
        true => {
            let mut from_four = filter_lang::Params::new(4);
            let (fields, joins) = read::page_set(schema, table, carried.as_deref(), &mut from_four);
            let own = Cells::new(&fields, joins, from_four.into_values());
            page.read_in_two(client, &own).await?
        }
        false => None,
    };
    let (rows, bookmark) = match split {
        Some(read) => read,
        None => page.read_in_one(client).await?,
    };
    let take = take.min(rows.len());
    let ids = page::attachment_ids(&rows, take, &read_fields)?;
    let shown = if ids.is_empty() {
        Shown::default()
    } else {
        Shown::lookup(client, &state.links, database_id, &ids).await?
    };
    Ok(JsonBytes(page::write(
        &rows,
        take,
        &read_fields,
        p.shape,
        bookmark.as_deref(),
        &shown,
    )?))
}
