//! The SQL of a list page: one statement as a deferred join
//! ([`page_sql`]), or two ([`page_ids_sql`], then [`page_cells_sql`] and
//! [`same_versions`]) when the page's rows are planned for their values
//! apart from their cells (`records::list`).

use tokio_postgres::Row;

use super::cells::read::PageJoin;
use super::store::select_list;

/// One list page as a deferred join. The inner query finds the page's ids
/// (and sort keys) with only the conditions, ordered and limited, so no
/// read expression is evaluated for a row that is not on the page; the
/// outer query computes the cells for those rows (at most `limit`) and
/// restores the order from the inner keys. `conditions` and the plan's key
/// expressions are over the alias `r`; `joins` are grouped per-page reads
/// (`cells::read::page_set`) over the page's ids, `"__pg"`, which the
/// read expressions reference by alias. The select list yields
/// [`select_list`] then one bookmark text per key.
///
/// The outer query finds each page row again by the `ctid` the inner one
/// read it at (a TID scan, same statement and snapshot, so the same row
/// version) rather than by id: no second primary-key descent per row,
/// 12-22 % less PostgreSQL CPU per page (docs/performance.md, "Records").
///
/// `resume` (a bookmark's continuation) is filter-lang's: the inner query
/// is [`filter_lang::SortPlan::page_sql`], which seeks in an index on the
/// first sort key from the bookmarked value in either direction and reads
/// the rows across that key's NULLs only when the page needs them.
pub fn page_sql(
    table: &str,
    read_exprs: &[String],
    joins: &[PageJoin],
    conditions: &str,
    resume: Option<&filter_lang::Resume>,
    plan: &filter_lang::SortPlan,
    limit: &str,
) -> String {
    if joins.is_empty() && plan.keys.is_empty() {
        // Ordered by id alone, the page is a walk of the live-id index
        // that stops at the limit: the cells are computed for the page's
        // rows only, so finding them again by TID (a relation size check
        // per row, then a sort of the page) only costs. The columns are
        // the same ([`select_list`], no key texts), then the id.
        return plan.page_sql(
            &select_list(read_exprs),
            &format!("{table} AS r"),
            &format!("r.deleted_at IS NULL AND {conditions}"),
            resume,
            limit,
        );
    }
    // Ordered by the page's own key and id columns: the join by TID keeps
    // the limited scan's order, so PostgreSQL sorts nothing again.
    let outer = plan.over("__page");
    let mut select = select_list(read_exprs);
    for b in outer.bookmark_columns() {
        select.push_str(", ");
        select.push_str(&b);
    }
    // Every row that passes the conditions is copied into the top-N sort
    // with these columns: the id is there once, as the plan's own id
    // column, except where the grouped reads join on `"__pg".id`.
    let columns = if joins.is_empty() {
        "r.ctid AS \"__tid\""
    } else {
        "r.id, r.ctid AS \"__tid\""
    };
    let inner = plan.page_sql(
        columns,
        &format!("{table} AS r"),
        &format!("r.deleted_at IS NULL AND {conditions}"),
        resume,
        limit,
    );
    if joins.is_empty() {
        return format!(
            "SELECT {select} FROM ({inner}) AS \"__page\" \
             JOIN {table} AS r ON r.ctid = \"__page\".\"__tid\" ORDER BY {}",
            outer.order_by(),
        );
    }
    let (with, left) = with_joins(&inner, joins);
    format!(
        "{with} SELECT {select} FROM \"__pg\" AS \"__page\" \
         JOIN {table} AS r ON r.ctid = \"__page\".\"__tid\"{left} ORDER BY {}",
        outer.order_by(),
    )
}

/// `WITH "__pg" AS MATERIALIZED (<page>), <joins>` over a page's rows, and
/// the `LEFT JOIN`s that attach each join's cells to `r`.
fn with_joins(page: &str, joins: &[PageJoin]) -> (String, String) {
    let mut with = format!("WITH \"__pg\" AS MATERIALIZED ({page})");
    let mut left = String::new();
    for j in joins {
        with.push_str(&format!(", {} AS ({})", j.alias, j.sql));
        left.push_str(&format!(
            " LEFT JOIN {a} ON {a}.from_id = r.id",
            a = j.alias
        ));
    }
    (with, left)
}

/// The first statement of a page read in two ([`page_cells_sql`] is the
/// second): the page's rows in order, only the conditions, the keyset and
/// the limit, each row as `[id, ctid, xmin, bookmark texts...]` (the
/// plan's key columns follow, unread). Used for pages whose conditions
/// carry filter or search values: PostgreSQL plans those per call (a plan
/// made for other values can walk the wrong index for a rare one), and
/// planning this one-table statement costs a fraction of the whole page's.
/// The texts are made outside the limited scan, so only for the page's
/// rows, not for every row the conditions match before the top-N sort.
pub fn page_ids_sql(
    table: &str,
    conditions: &str,
    resume: Option<&filter_lang::Resume>,
    plan: &filter_lang::SortPlan,
    limit: &str,
) -> String {
    let inner = plan.page_sql(
        "r.ctid AS \"__tid\", r.xmin AS \"__xmin\"",
        &format!("{table} AS r"),
        &format!("r.deleted_at IS NULL AND {conditions}"),
        resume,
        limit,
    );
    let outer = plan.over("__ids");
    let mut columns = String::from(
        "\"__ids\".\"__fl_id\", \"__ids\".\"__tid\"::text, \"__ids\".\"__xmin\"::text",
    );
    for b in outer.bookmark_columns() {
        columns.push_str(", ");
        columns.push_str(&b);
    }
    format!(
        "SELECT {columns} FROM ({inner}) AS \"__ids\" ORDER BY {}",
        outer.order_by()
    )
}

/// The second statement of a page read in two: the cells of the rows
/// [`page_ids_sql`] found, in their order, from three parallel text
/// arrays (`$1` ids, `$2` ctids, `$3` xmins). A row is found again by its
/// `ctid`, and the last column says whether it is still the very row
/// version the first statement read (same `xmin`): a row updated, trashed
/// or removed in between is missing from the reply or marked `false`
/// ([`same_versions`]), and the caller then reads the page in one
/// statement. Its only parameters are the arrays, so PostgreSQL keeps one
/// plan for it. The select list is [`select_list`], then that flag.
pub fn page_cells_sql(table: &str, read_exprs: &[String], joins: &[PageJoin]) -> String {
    let (with, left) = with_joins(
        "SELECT p.id COLLATE \"C\" AS id, p.tid::tid AS \"__tid\", \
         p.xmin::xid AS \"__xmin\", p.n AS \"__n\" \
         FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS p(id, tid, xmin, n)",
        joins,
    );
    // The version check is a result column, not a join condition: as a
    // condition its selectivity estimate (one row in the whole page) made
    // PostgreSQL re-scan the link joins per row.
    format!(
        "{with} SELECT {}, r.xmin = \"__page\".\"__xmin\" FROM \"__pg\" AS \"__page\" \
         JOIN {table} AS r ON r.ctid = \"__page\".\"__tid\"{left} \
         ORDER BY \"__page\".\"__n\"",
        select_list(read_exprs)
    )
}

/// Whether the rows of [`page_cells_sql`] are exactly the `expected` row
/// versions it was given.
pub fn same_versions(rows: &[Row], expected: usize) -> Result<bool, tokio_postgres::Error> {
    if rows.len() != expected {
        return Ok(false);
    }
    for r in rows {
        if !r.try_get::<_, bool>(r.len() - 1)? {
            return Ok(false);
        }
    }
    Ok(true)
}
