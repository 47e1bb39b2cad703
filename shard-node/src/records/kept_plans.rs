//! Whether a page with filter or search values may run under one plan kept
//! for its statement (prepared, `plan_cache_mode = auto`) or must be
//! planned for the values at hand (sent unprepared).
//!
//! A kept plan is made without the values. When an index gives the page's
//! order (the live-id index for a page in id order, a view's sort index
//! for its first sort field), the kept plan may walk that index and filter
//! as it goes: cheap for a common value, a walk of the whole table for a
//! rare one (116 ms against 2 ms planned for the value, on the records
//! benchmark). When no index gives the order, every plan of the page is a
//! scan and a top-N sort whatever the values, and a kept plan only saves
//! the planning (about a third of a filtered page's PostgreSQL time on
//! 10,000 rows; `docs/performance.md`, "Hot path"). So a page keeps a plan
//! only when it is sorted by a key no index of its table begins with.
//!
//! The first key columns of a table's indexes are read from the catalog
//! and kept for [`FRESH_FOR`]: a sort index a view adds is seen within
//! that long (until then a page sorted by that field keeps its plan, as
//! it did before the index).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::GenericClient;

/// How long the first key columns of a table's indexes are trusted.
pub const FRESH_FOR: Duration = Duration::from_secs(10);

/// When a table's index leads were read, and what they were.
type Read = (Instant, Arc<Vec<String>>);

/// The first key of each index of a record table, by quoted table name.
#[derive(Default, Clone)]
pub struct IndexLeads {
    tables: Arc<Mutex<HashMap<String, Read>>>,
}

impl IndexLeads {
    /// The first key (`pg_get_indexdef(index, 1, true)`: a column name,
    /// quoted when it needs it, or an expression) of every index of the
    /// table `qualified` (quoted, `tenant_schema::table`).
    pub async fn of(
        &self,
        c: &impl GenericClient,
        qualified: &str,
    ) -> Result<Arc<Vec<String>>, tokio_postgres::Error> {
        if let Some((at, leads)) = self.lock().get(qualified) {
            if at.elapsed() < FRESH_FOR {
                return Ok(leads.clone());
            }
        }
        let statement = c
            .prepare_cached(
                "SELECT pg_get_indexdef(i.indexrelid, 1, true) FROM pg_index i
                 WHERE i.indrelid = $1::text::regclass",
            )
            .await?;
        let rows = c.query(&statement, &[&qualified]).await?;
        let leads: Arc<Vec<String>> = Arc::new(
            rows.iter()
                .map(|r| r.try_get(0))
                .collect::<Result<_, _>>()?,
        );
        self.lock()
            .insert(qualified.to_owned(), (Instant::now(), leads.clone()));
        Ok(leads)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Read>> {
        // A panic while holding the lock leaves only a stale entry.
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether a page whose first sort key is the SQL `first_key` (None: the
/// page is in id order) may keep one plan, given the first keys of its
/// table's indexes (`leads`): it has a sort key, and none of the columns
/// that key names (quoted identifiers other than the row alias `r`)
/// begins an index.
pub fn may_keep_plan(first_key: Option<&str>, leads: &[String]) -> bool {
    let Some(first) = first_key else {
        return false;
    };
    let columns = quoted_identifiers(first);
    !columns
        .iter()
        .filter(|c| c.as_str() != "r")
        .any(|c| leads.iter().any(|lead| names_column(lead, c)))
}

/// The identifiers written in double quotes in `sql` (`""` inside one is
/// a quote).
fn quoted_identifiers(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut ident = String::new();
        while let Some(c) = chars.next() {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    chars.next();
                    ident.push('"');
                    continue;
                }
                break;
            }
            ident.push(c);
        }
        out.push(ident);
    }
    out
}

/// Whether an index's first key `lead` mentions `column` (a record
/// table's columns are `fld_` ids, `id`, and the record's own columns:
/// distinct names, none a part of another in a way that matters here,
/// and a false match only costs a plan per call).
fn names_column(lead: &str, column: &str) -> bool {
    lead.match_indices(column).any(|(at, _)| {
        let before = lead[..at].chars().next_back();
        let after = lead[at + column.len()..].chars().next();
        let boundary = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        boundary(before) && boundary(after)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan<'a>(exprs: &[&'a str]) -> Option<&'a str> {
        exprs.first().copied()
    }

    fn leads(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| (*s).to_owned()).collect()
    }

    /// The indexes every record table has (`tenant_schema`).
    const OWN: [&str; 3] = ["id", "id", "deleted_at"];

    #[test]
    fn a_page_in_id_order_is_planned_per_call() {
        assert!(!may_keep_plan(plan(&[]), &leads(&OWN)));
    }

    #[test]
    fn a_sort_no_index_begins_with_keeps_its_plan() {
        let p = plan(&["\"r\".\"fld_8M0kXPrnP2hD\""]);
        assert!(may_keep_plan(p, &leads(&OWN)));
        // Another field's sort index does not give this order.
        let other = leads(&["id", "deleted_at", "\"fld_Other0000001\""]);
        assert!(may_keep_plan(p, &other));
    }

    #[test]
    fn a_sort_an_index_begins_with_is_planned_per_call() {
        let p = plan(&["\"r\".\"fld_8M0kXPrnP2hD\"", "\"r\".\"fld_B\""]);
        for lead in [
            "\"fld_8M0kXPrnP2hD\"",
            "fld_8m0kxprnp2hd_is_not_it_but fld_8M0kXPrnP2hD",
            "\"left\"(\"fld_8M0kXPrnP2hD\", 500)",
            "left(\"fld_8M0kXPrnP2hD\", 500)",
        ] {
            assert!(!may_keep_plan(p, &leads(&["id", lead])), "{lead}");
        }
        // A prefix of a longer name is not the column.
        let longer = leads(&["\"fld_8M0kXPrnP2hDx\""]);
        assert!(may_keep_plan(p, &longer));
        // Only the first key matters.
        let second = leads(&["\"fld_B\""]);
        assert!(may_keep_plan(p, &second));
    }

    #[test]
    fn quoted_identifiers_are_read_with_doubled_quotes() {
        assert_eq!(
            quoted_identifiers("left(\"r\".\"a\"\"b\", 5) || \"c\""),
            vec!["r", "a\"b", "c"]
        );
    }
}
