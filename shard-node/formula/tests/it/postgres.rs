//! Runs compiled formulas in real PostgreSQL: every formula becomes a
//! `GENERATED ALWAYS AS (...) STORED` column (PostgreSQL refuses anything
//! not immutable), over rows of adversarial values; no insert may raise.
//!
//! Needs PostgreSQL at TEST_POSTGRES_URL (default
//! postgres://postgres@127.0.0.1:5432/postgres). Creates and drops a
//! throwaway database.

use crate::gen::{gen, schema, T};
use formula_lang::{compile, quote_literal};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_postgres::{Client, NoTls};

pub fn url() -> String {
    std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

pub async fn connect(url: &str) -> Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connect to TEST_POSTGRES_URL");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

fn with_db(url: &str, db: &str) -> String {
    match url.rfind('/') {
        Some(i) if !url[..i].ends_with('/') => format!("{}/{db}", &url[..i]),
        _ => format!("{url}/{db}"),
    }
}

const NUMS: &[&str] = &[
    "NULL",
    "0",
    "1",
    "-1",
    "0.5",
    "'1e300'",
    "'-1e300'",
    "'9.99e299'",
    "'NaN'",
    "'Infinity'",
    "'-Infinity'",
    "'1e-300'",
    "123456789012345678901234567890.123456789",
    "2147483648",
    "1e20",
];
const DATES: &[&str] = &[
    "NULL",
    "'0001-01-01'",
    "'4000-01-01'",
    "'9999-12-31'",
    "'infinity'",
    "'-infinity'",
    "'2024-02-29'",
    "'4713-01-01 BC'",
    "'5874897-12-31'",
    "'2024-01-31'",
];
const TIMESTAMPS: &[&str] = &[
    "NULL",
    "'0001-01-01 00:00:00Z'",
    "'9999-12-31 23:59:59.999999Z'",
    "'294276-12-31 23:59:59Z'",
    "'4713-01-01 00:00:00Z BC'",
    "'infinity'",
    "'-infinity'",
    "'2024-02-29 12:34:56.789Z'",
    "'4000-01-01 00:00:00Z'",
];
const BOOLS: &[&str] = &["NULL", "true", "false"];
const SELECTS: &[&str] = &["NULL", "'ch1'", "'ch2'", "'nope'"];

fn texts() -> Vec<String> {
    let mut v: Vec<String> = [
        "",
        " ",
        "abc",
        "12",
        " -3.5e2 ",
        "1,000",
        "NaN",
        "1e99999",
        "1e999",
        "ünï😀",
        "it's",
        "a\"b\\c",
        "{Price}",
        "Infinity",
        "-0",
        ".5",
        "5.",
        "0001-01-01",
    ]
    .iter()
    .map(|s| quote_literal(s).unwrap())
    .collect();
    v.push("NULL".into());
    v.push("repeat('x', 100000)".to_string());
    v.push("repeat('9', 5000)".to_string());
    v
}

/// Rows: all-NULL, each extreme in turn, then random mixes.
fn rows(rng: &mut StdRng) -> Vec<String> {
    let texts = texts();
    let mut out = Vec::new();
    for i in 0..40 {
        let p = |xs: &[&str], rng: &mut StdRng| {
            xs[if i == 0 {
                0
            } else {
                rng.gen_range(0..xs.len())
            }]
            .to_string()
        };
        let n1 = p(NUMS, rng);
        let n2 = p(NUMS, rng);
        let t1 = texts[if i == 0 {
            texts.len() - 3
        } else {
            rng.gen_range(0..texts.len())
        }]
        .clone();
        let t2 = texts[rng.gen_range(0..texts.len())].clone();
        let odd = texts[rng.gen_range(0..texts.len())].clone();
        out.push(format!(
            "({n1}, {n2}, {t1}, {t2}, {}, {}, {}, {}, {odd})",
            p(DATES, rng),
            p(TIMESTAMPS, rng),
            p(BOOLS, rng),
            p(SELECTS, rng)
        ));
    }
    for i in 0..NUMS.len().max(DATES.len()).max(TIMESTAMPS.len()) {
        let n = NUMS[i % NUMS.len()];
        let d = DATES[i % DATES.len()];
        let ts = TIMESTAMPS[i % TIMESTAMPS.len()];
        let t = &texts[i % texts.len()];
        out.push(format!("({n}, {n}, {t}, {t}, {d}, {ts}, true, 'ch2', {t})"));
    }
    out
}

const COLUMNS: &str =
    "fld_price, fld_qty, fld_name, fld_notes, fld_due, fld_start, fld_done, fld_status, fld_odd";

/// Formulas worth pinning beside the random ones.
const FIXED: &[&str] = &[
    "1/0",
    "{Price} / 0",
    "POWER(0, -1)",
    "POWER(-8, 1/3)",
    "POWER(10, 1e299)",
    "POWER(1e299, 1e299)",
    "POWER(0.5, 1e299)",
    "POWER({Price}, {Qty})",
    "SQRT(-1)",
    "SQRT({Price})",
    "VALUE({Name})",
    "VALUE(\"1e999\")",
    "VALUE(\"abc\")",
    "REPT({Name}, 1e299)",
    "REPT(\"ab\", -5)",
    "REPT({Name}, {Price})",
    "LEFT({Name}, -3)",
    "RIGHT({Name}, 1e299)",
    "MID({Name}, -5, -5)",
    "MID({Name}, {Price}, {Qty})",
    "SUBSTITUTE({Name}, \"x\", REPT(\"y\", 10000))",
    "SUBSTITUTE({Name}, {Notes}, {Name})",
    "DATEADD({Due}, 1e299, 'days')",
    "DATEADD({Due}, -1e299, 'months')",
    "DATEADD({Due}, {Price}, 'years')",
    "DATEADD({Start At}, {Price}, 'seconds')",
    "DATEADD({Start At}, {Qty}, 'months')",
    "DATEADD({Due}, {Qty}, 'milliseconds')",
    "DATEADD({Due}, 1, 'days')",
    "DATETIME_DIFF({Due}, {Start At}, 'years')",
    "DATETIME_DIFF({Start At}, {Due}, 'milliseconds')",
    "DATETIME_DIFF({Due}, {Due}, 'weeks')",
    "{Due} & \" / \" & {Start At}",
    "{Price} * {Price} * {Price} * {Price}",
    "ROUND({Price}, 1e299) + ROUNDUP({Price}, -1e299) + ROUNDDOWN({Qty}, {Price})",
    "ROUNDUP({Price}, {Qty})",
    "MOD({Price}, {Qty})",
    "MOD(1e299, 1e-299)",
    "IF({Done}, {Due}, {Start At})",
    "SWITCH({Status}, \"Open\", 1, \"It's \\\\done\\\\\", 2, 0)",
    "{Total} & {Label}",
    "LEN({Label}) + {Total}",
    "CONCATENATE({Done}, {Price}, {Due}, {Start At}, {Name}, BLANK())",
    "FIND({Notes}, {Name}, {Price})",
    "WEEKDAY({Due}, 'Monday') + YEAR({Start At}) + SECOND({Start At})",
    "{Odd \\{x\\}} & {Status}",
    "BLANK()",
    "{Price} = BLANK()",
    "IF({Price} > 1, \"big\", IF({Price} < 0, \"neg\"))",
    "AND({Name}, {Price}, {Due}, {Done})",
    "-{Price} + +{Qty}",
    "UPPER({Name}) & LOWER({Notes}) & TRIM({Name})",
];

#[tokio::test]
async fn generated_columns_are_immutable_and_never_raise() {
    let base = url();
    let admin = connect(&base).await;
    let db = format!("formula_test_{}", rand::random::<u32>());
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .await
        .expect("create throwaway database");
    let db_url = with_db(&base, &db);
    // On its own task, so a failure still drops the database below.
    let outcome = tokio::spawn(async move { run(&db_url).await }).await;
    let _ = admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        .await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

async fn run(url: &str) {
    let c = connect(url).await;
    // An odd session zone and date style: results must not depend on them.
    c.batch_execute("SET TimeZone = 'Asia/Kathmandu'; SET DateStyle = 'German, DMY'")
        .await
        .unwrap();
    let mut rng = StdRng::seed_from_u64(
        std::env::var("FORMULA_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(7),
    );
    let schema = schema();
    let mut formulas: Vec<String> = FIXED.iter().map(|s| s.to_string()).collect();
    let n_random: usize = std::env::var("FORMULA_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    for _ in 0..n_random {
        let t = [T::Num, T::Text, T::Date, T::DateTime, T::Bool][rng.gen_range(0..5)];
        let depth = rng.gen_range(1..5);
        formulas.push(gen(&mut rng, t, depth));
    }
    let rows = rows(&mut rng);
    let mut failures = Vec::new();
    let mut compiled_count = 0;
    for (batch_no, batch) in formulas.chunks(40).enumerate() {
        let table = format!("t{batch_no}");
        c.batch_execute(&format!(
            "CREATE TABLE {table} (id serial primary key, fld_price numeric, fld_qty numeric, fld_name text, \
             fld_notes text, fld_due date, fld_start timestamptz, fld_done boolean, fld_status text, fld_odd text)"
        ))
        .await
        .unwrap();
        // Rows present before the columns exist: ADD COLUMN computes them.
        for r in &rows[..rows.len() / 2] {
            c.batch_execute(&format!("INSERT INTO {table} ({COLUMNS}) VALUES {r}"))
                .await
                .unwrap();
        }
        for (i, src) in batch.iter().enumerate() {
            let compiled = match compile(src, &schema, None) {
                Ok(c) => c,
                Err(e) => {
                    failures.push(format!("compile {src:?}: {e}"));
                    continue;
                }
            };
            compiled_count += 1;
            let ddl = format!(
                "ALTER TABLE {table} ADD COLUMN f{i} {} GENERATED ALWAYS AS ({}) STORED",
                compiled.result.sql_type(),
                compiled.sql
            );
            if let Err(e) = c.batch_execute(&ddl).await {
                failures.push(format!(
                    "add column for {src:?}: {}\nSQL: {}",
                    db_err(&e),
                    compiled.sql
                ));
            }
        }
        for r in &rows {
            let sql = format!("INSERT INTO {table} ({COLUMNS}) VALUES {r}");
            if let Err(e) = c.batch_execute(&sql).await {
                failures.push(format!(
                    "insert into {table} {}: {}",
                    &r[..r.len().min(200)],
                    db_err(&e)
                ));
            }
        }
        // Reading every value back as text must work too.
        c.query(&format!("SELECT * FROM {table}"), &[])
            .await
            .map(|_| ())
            .unwrap_or_else(|e| {
                failures.push(format!("select {table}: {}", db_err(&e)));
            });
    }
    assert!(
        compiled_count > 100,
        "too few formulas compiled: {compiled_count}"
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

fn db_err(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_else(|| e.to_string())
}

/// Values, not just absence of errors: formula → expected text of the value
/// over one known row.
const EXPECTED: &[(&str, &str)] = &[
    ("{Price} * {Qty}", "7.5"),
    ("ROUNDUP(2.341, 2)", "2.35"),
    ("ROUNDUP(-2.341, 1)", "-2.4"),
    ("ROUNDDOWN(2.349, 2)", "2.34"),
    ("ROUND(1234.5, -2)", "1200"),
    ("{Price} / 0", "NULL"),
    ("VALUE(\" 1,000.5 \")", "1000.5"),
    ("VALUE({Name})", "NULL"),
    ("{Name} & \"-\" & {Price} & \"-\" & {Done}", "Widget-2.5-1"),
    ("{Due} & \"\"", "2024-01-31"),
    ("{Start At} & \"\"", "2024-02-29T12:34:56Z"),
    ("DATEADD({Due}, 1, 'months')", "2024-02-29"),
    ("DATEADD({Due}, -2, 'weeks')", "2024-01-17"),
    (
        "DATEADD({Start At}, 90, 'minutes') & \"\"",
        "2024-02-29T14:04:56Z",
    ),
    ("DATETIME_DIFF({Start At}, {Due}, 'days')", "29"),
    ("DATETIME_DIFF({Due}, {Start At}, 'months')", "0"),
    ("YEAR({Due}) + MONTH({Due}) + DAY({Due})", "2056"),
    ("WEEKDAY({Due})", "3"),
    ("{Status}", "It's \\done\\"),
    ("SWITCH({Status}, \"Open\", 1, 2)", "2"),
    ("MID(\"abcdef\", 2, 3)", "bcd"),
    ("FIND(\"c\", \"abcabc\", 4)", "6"),
    ("SUBSTITUTE(\"a-b-c\", \"-\", \"+\")", "a+b+c"),
    ("REPT(\"ab\", 3)", "ababab"),
    ("LEN(TRIM(\"  x  \"))", "1"),
    ("UPPER(\"straße\")", "STRAßE"),
    ("IF({Price} > 2, \"big\", \"small\")", "big"),
    ("AND({Done}, {Price})", "1"),
    ("{Notes} = BLANK()", "1"),
    ("POWER(2, 10)", "1024"),
    ("SQRT(-4)", "NULL"),
    ("MOD(-7, 3)", "-1"),
    ("{Total}", "7.5"),
    ("{Label}", "Widget: 7.5"),
];

#[tokio::test]
async fn compiled_values_are_right() {
    let base = url();
    let admin = connect(&base).await;
    let db = format!("formula_test_{}", rand::random::<u32>());
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .await
        .unwrap();
    let db_url = with_db(&base, &db);
    let outcome = tokio::spawn(async move {
        let c = connect(&db_url).await;
        c.batch_execute(
            "SET TimeZone = 'America/New_York'; \
             CREATE TABLE v (id serial primary key, fld_price numeric, fld_qty numeric, fld_name text, \
             fld_notes text, fld_due date, fld_start timestamptz, fld_done boolean, fld_status text, fld_odd text); \
             INSERT INTO v (fld_price, fld_qty, fld_name, fld_notes, fld_due, fld_start, fld_done, fld_status) \
             VALUES (2.5, 3, 'Widget', NULL, '2024-01-31', '2024-02-29 12:34:56.789Z', true, 'ch2')",
        )
        .await
        .unwrap();
        let mut wrong = Vec::new();
        for (i, (src, want)) in EXPECTED.iter().enumerate() {
            let compiled = compile(src, &schema(), None).unwrap_or_else(|e| panic!("{src}: {e}"));
            c.batch_execute(&format!(
                "ALTER TABLE v ADD COLUMN f{i} {} GENERATED ALWAYS AS ({}) STORED",
                compiled.result.sql_type(),
                compiled.sql
            ))
            .await
            .unwrap_or_else(|e| panic!("{src}: {}", db_err(&e)));
            let row = c
                .query_one(&format!("SELECT COALESCE(f{i}::text, 'NULL') FROM v"), &[])
                .await
                .unwrap();
            let got: String = row.get(0);
            if got != *want {
                wrong.push(format!("{src}: got {got:?}, want {want:?}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    })
    .await;
    let _ = admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        .await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}
