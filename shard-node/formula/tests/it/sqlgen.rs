//! SQL generation snapshots for a handful of formulas, and the quoting
//! functions.

use crate::gen::schema;
use formula_lang::{compile, quote_ident, quote_literal, Schema};

fn sql(src: &str) -> String {
    // Without the row column, the snapshots stay short.
    let s = Schema::new(schema().fields().to_vec()).with_row_column(None);
    compile(src, &s, None).unwrap().sql
}

const CLAMP_OPEN: &str = "NULLIF(NULLIF(LEAST(GREATEST(trim_scale(round(";
const CLAMP_CLOSE: &str = ", 100)), -1e300), 1e300), 1e300), -1e300)";

fn clamp(x: &str) -> String {
    format!("{CLAMP_OPEN}{x}{CLAMP_CLOSE}")
}

#[test]
fn snapshots() {
    assert_eq!(sql("1.5"), "CAST(('1.5'::numeric) AS numeric)");
    assert_eq!(
        sql("{Price} / 0"),
        format!(
            "CAST(({}) AS numeric)",
            clamp(&format!(
                "({} / NULLIF('0'::numeric, 0))",
                clamp("\"fld_price\"")
            ))
        )
    );
    assert_eq!(
        sql(r#"'it\'s' & "\\""#),
        r#"CAST(((COALESCE('it''s', '') || COALESCE(E'\\', ''))) AS text)"#
    );
    assert_eq!(
        sql("{Done}"),
        "CAST(((COALESCE(\"fld_done\", false))::integer)::numeric AS numeric)"
    );
    assert_eq!(
        sql("IF({Done}, \"yes\", \"no\")"),
        "CAST(((CASE WHEN COALESCE(COALESCE(\"fld_done\", false), false) THEN 'yes' ELSE 'no' END)) AS text)"
    );
    assert_eq!(
        sql("{Status}"),
        "CAST(((CASE \"fld_status\" WHEN 'ch1' THEN 'Open' WHEN 'ch2' THEN E'It''s \\\\done\\\\' END)) AS text)"
    );
    assert_eq!(
        sql("{Start At}"),
        "timezone('UTC', CAST((NULLIF(NULLIF(LEAST(GREATEST((\"fld_start\" AT TIME ZONE 'UTC'), TIMESTAMP '0001-12-31 23:59:59.999999 BC'), TIMESTAMP '10000-01-01 00:00:00'), TIMESTAMP '0001-12-31 23:59:59.999999 BC'), TIMESTAMP '10000-01-01 00:00:00')) AS timestamp))"
    );
    assert_eq!(
        sql("LEFT({Name}, -2)"),
        "CAST((left(\"fld_name\", (LEAST(GREATEST(trunc((-'2'::numeric)), 0), 1000000000))::integer)) AS text)"
    );
    assert_eq!(
        sql("SQRT(4)"),
        "CAST(((CASE WHEN '4'::numeric >= 0 THEN sqrt('4'::numeric) END)) AS numeric)"
    );
}

#[test]
fn row_column_pins_collation_sensitive_text() {
    let c = compile("LOWER(\"A\")", &schema(), None).unwrap();
    assert_eq!(
        c.sql,
        "CAST((lower((CASE WHEN \"id\" IS NOT NULL THEN 'A' END))) AS text)"
    );
}

#[test]
fn quoting() {
    assert_eq!(quote_literal("a'b").unwrap(), "'a''b'");
    assert_eq!(quote_literal("a\\'b").unwrap(), "E'a\\\\''b'");
    assert_eq!(quote_literal(""), Some("''".into()));
    assert_eq!(quote_literal("nul\0"), None);
    assert_eq!(quote_ident("fld_x").unwrap(), "\"fld_x\"");
    assert_eq!(quote_ident("a\"b").unwrap(), "\"a\"\"b\"");
    assert_eq!(quote_ident(""), None);
}
