//! Keyset paging against real PostgreSQL: under fixed and random sorts
//! (ascending and descending, first keys with NULLs and `''`), random
//! filters and page sizes, walking by bookmark returns every live row
//! exactly once, in the order of the full query. Each walk runs twice: with
//! the one-expression `resume_after` in a WHERE, and with `page_sql` (the
//! seek part, then the NULL part only when the seek part came short), with
//! sequential scans sometimes disabled so the sort indexes are walked.

use filter_lang::*;
use serde_json::json;
use tokio_postgres::Client;

use crate::common::*;
use crate::postgres::{query, DB_SCHEMA};

fn random_sort(r: &mut Rng) -> String {
    let fields = ["Name", NOTES, "Price", "Due", "At", "Done", "Stage", DUP1];
    let n = 1 + r.below(3);
    (0..n)
        .map(|_| {
            let f = *r.pick(&fields);
            match r.below(5) {
                0 => format!("-{f}"),
                1 => format!("{f}:desc"),
                2 => format!("{f}:ASC"),
                _ => f.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Sorts every run walks: each sortable kind first, ascending and
/// descending, with NULL (and `''` for text) first keys.
const FIXED_SORTS: [&str; 12] = [
    "Name",
    "-Name",
    NOTES,
    "Price",
    "-Price",
    "Due",
    "At",
    "-At",
    "Done",
    "Stage",
    "-Stage",
    "Name,-Price",
];

/// How a page resumes.
#[derive(Debug, Clone, Copy)]
enum Form {
    /// `WHERE ... AND resume_after(..)`.
    Where,
    /// `SortPlan::page_sql` with `SortPlan::resume`.
    Split,
}

pub async fn paging_is_exact(c: &Client, r: &mut Rng) {
    c.batch_execute(&format!(
        "CREATE INDEX ON s.records (left({n}, {SORT_PREFIX_CHARS})) WHERE deleted_at IS NULL;
         CREATE INDEX ON s.records ({p}) WHERE deleted_at IS NULL;
         CREATE INDEX ON s.records ({a}) WHERE deleted_at IS NULL;
         ANALYZE s.records;",
        n = quote_ident(NAME),
        p = quote_ident(PRICE),
        a = quote_ident(AT),
    ))
    .await
    .expect("sort indexes");
    let s = schema_in(DB_SCHEMA);
    let e = env();
    let rounds = FIXED_SORTS.len() + 80;
    for round in 0..rounds {
        let sort_text = match round {
            0 => String::new(),
            n if n <= FIXED_SORTS.len() => FIXED_SORTS[n - 1].to_owned(),
            _ => random_sort(r),
        };
        let sort = parse_sort(&sort_text, &s).unwrap();
        let filter_json = if round > FIXED_SORTS.len() && r.chance(40) {
            random_filter(r, 1)
        } else {
            json!({})
        };
        let filter = filter::parse_value(&filter_json, &s, &e).unwrap_or_else(|_| Filter::empty());
        let page = if round <= FIXED_SORTS.len() {
            7
        } else {
            1 + r.below(60)
        };
        let index_only = round % 2 == 1;
        c.batch_execute(if index_only {
            "SET enable_seqscan = off"
        } else {
            "RESET enable_seqscan"
        })
        .await
        .unwrap();

        let mut p = Params::new(1);
        let w = filter::compile(&filter, &s, &e, "r", &mut p);
        let plan = sort.plan(&s, "r", &mut p);
        let full: Vec<String> = query(
            c,
            &format!(
                "SELECT r.id FROM s.records AS r WHERE r.deleted_at IS NULL AND {w} ORDER BY {}",
                plan.order_by()
            ),
            p.values(),
        )
        .await
        .iter()
        .map(|row| row.get(0))
        .collect();
        for form in [Form::Where, Form::Split] {
            let walked = walk(c, &s, &sort, &filter, page, form).await;
            assert_eq!(
                walked, full,
                "{form:?}: sort {sort_text:?}, page {page}, filter {filter_json}, seqscan off {index_only}"
            );
        }
    }
    c.batch_execute("RESET enable_seqscan").await.unwrap();
    long_text_keys_page_exactly(c).await;
}

/// Text keys longer than the sort prefix, sharing it and differing after
/// it (and a value a btree index on the whole column could not hold):
/// the index on the prefix takes them, and the walk is still exact. The
/// data change is rolled back.
async fn long_text_keys_page_exactly(c: &Client) {
    let n = quote_ident(NAME);
    c.batch_execute(&format!(
        "BEGIN;
         UPDATE s.records SET {n} = repeat('é', {SORT_PREFIX_CHARS}) || (ARRAY['', 'a', 'b', 'A', 'é'])[1 + (ascii(right(id, 1)) % 5)]
          WHERE ascii(right(id, 1)) % 3 = 0;
         UPDATE s.records SET {n} = (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 120) AS g)
          WHERE ascii(right(id, 1)) % 7 = 1;
         ANALYZE s.records;"
    ))
    .await
    .expect("long names");
    let s = schema_in(DB_SCHEMA);
    for (sort_text, seqscan_off) in [
        ("Name", false),
        ("-Name", true),
        ("Name,-Price", true),
        ("-Name,Due", false),
    ] {
        c.batch_execute(if seqscan_off {
            "SET enable_seqscan = off"
        } else {
            "SET enable_seqscan = on"
        })
        .await
        .unwrap();
        let sort = parse_sort(sort_text, &s).unwrap();
        let mut p = Params::new(1);
        let plan = sort.plan(&s, "r", &mut p);
        let full: Vec<String> = query(
            c,
            &format!(
                "SELECT r.id FROM s.records AS r WHERE r.deleted_at IS NULL ORDER BY {}",
                plan.order_by()
            ),
            p.values(),
        )
        .await
        .iter()
        .map(|row| row.get(0))
        .collect();
        for form in [Form::Where, Form::Split] {
            let walked = walk(c, &s, &sort, &Filter::empty(), 5, form).await;
            assert_eq!(walked, full, "{form:?}: long names, sort {sort_text:?}");
        }
    }
    c.batch_execute("ROLLBACK; RESET enable_seqscan")
        .await
        .unwrap();
}

fn key() -> BookmarkKey {
    BookmarkKey::derive(b"paging test secret")
}

/// Every id, page by page, following the bookmarks.
async fn walk(
    c: &Client,
    s: &Schema,
    sort: &Sort,
    filter: &Filter,
    page: usize,
    form: Form,
) -> Vec<String> {
    let e = env();
    let mut walked: Vec<String> = Vec::new();
    let mut bookmark: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut p = Params::new(1);
        let w = filter::compile(filter, s, &e, "r", &mut p);
        let plan = sort.plan(s, "r", &mut p);
        let mut cols = vec!["r.id".to_owned()];
        cols.extend(plan.bookmark_columns());
        let bm = bookmark
            .as_deref()
            .map(|text| Bookmark::decode(text, &key(), "").expect("own bookmark decodes"));
        let sql = match form {
            Form::Where => {
                let resume = match &bm {
                    Some(b) => plan
                        .resume_after(b, "", &mut p)
                        .expect("own bookmark resumes"),
                    None => "TRUE".to_owned(),
                };
                format!(
                    "SELECT {} FROM s.records AS r WHERE r.deleted_at IS NULL AND {w} AND {resume} ORDER BY {} LIMIT {}",
                    cols.join(", "),
                    plan.order_by(),
                    page + 1
                )
            }
            Form::Split => {
                let resume = bm
                    .as_ref()
                    .map(|b| plan.resume(b, "", &mut p).expect("own bookmark resumes"));
                plan.page_sql(
                    &cols.join(", "),
                    "s.records AS r",
                    &format!("r.deleted_at IS NULL AND {w}"),
                    resume.as_ref(),
                    &(page + 1).to_string(),
                )
            }
        };
        let rows = query(c, &sql, p.values()).await;
        let more = rows.len() > page;
        let rows = &rows[..rows.len().min(page)];
        walked.extend(rows.iter().map(|row| row.get::<_, String>(0)));
        pages += 1;
        assert!(pages <= 500, "paging does not end: {sql}");
        if !more {
            return walked;
        }
        let last = rows.last().unwrap();
        let values = (0..plan.keys.len())
            .map(|i| last.get::<_, Option<String>>(i + 1))
            .collect();
        bookmark = Some(
            Bookmark {
                order: String::new(),
                values,
                id: last.get(0),
            }
            .encode(&key()),
        );
    }
}
