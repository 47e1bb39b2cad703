//! Issue 13: a formula's compiled SQL is DDL (a generated column), which
//! takes no parameters, so user text reaches it only as a literal written
//! by the one encoder, `quote_literal`. Arbitrary strings (quotes,
//! backslashes, `$1::`, `$$`, `--`, `;`, very long) in a text literal or a
//! select's choice names compile to exactly `quote_literal`'s output, and
//! PostgreSQL reads them back as the same data, with
//! `standard_conforming_strings` on and off; NUL is refused (a 400).

use formula_lang::{compile, quote_literal, Choice, FieldKind, Schema, SchemaField};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use tokio_postgres::Client;

use crate::gen::schema;

fn nasty() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("'".to_owned()),
        Just("''".to_owned()),
        Just("\\".to_owned()),
        Just("\\'".to_owned()),
        Just("$1::".to_owned()),
        Just("$$".to_owned()),
        Just("$a$".to_owned()),
        Just("--".to_owned()),
        Just(";".to_owned()),
        Just("/*".to_owned()),
        Just("\"".to_owned()),
        Just("E'".to_owned()),
        Just(" || (SELECT chr(120) FROM pg_sleep(3)) || ".to_owned()),
        Just("{Price}".to_owned()),
        Just("\u{1}\n\t\r".to_owned()),
        Just("ünï😀".to_owned()),
        "[a-zA-Z0-9 ]{0,8}",
        "\\PC{0,6}",
    ];
    prop_oneof![
        8 => prop::collection::vec(piece, 0..12).prop_map(|p| p.concat()),
        // Long, yet within a formula's 10,000 characters once escaped.
        1 => ("[$'\\\\-]{1,3}", 500..4900usize).prop_map(|(s, n)| s.repeat(n / s.len().max(1))),
    ]
    .prop_map(|s| s.replace('\0', ""))
}

/// `s` as a formula text literal (`"..."` with `\` and `"` escaped).
fn formula_text(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A schema with one single select whose only choice is named `name`.
fn select_schema(name: &str) -> Schema {
    Schema::new(vec![SchemaField {
        id: "fld_pick".into(),
        name: "Pick".into(),
        column: "fld_pick".into(),
        kind: FieldKind::SingleSelect {
            choices: vec![Choice {
                id: "cho_1".into(),
                name: name.to_owned(),
            }],
        },
    }])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The compiled SQL is the fixed text around `quote_literal`'s output:
    /// nothing of the value is written any other way.
    #[test]
    fn literals_come_from_the_one_encoder(s in nasty(), t in nasty()) {
        let c = compile(&formula_text(&s), &schema(), None).unwrap();
        prop_assert_eq!(c.sql, format!("CAST(({}) AS text)", quote_literal(&s).unwrap()));
        let shape = |x: &str| {
            let sql = compile(&format!("{} & {{Name}}", formula_text(x)), &schema(), None)
                .unwrap()
                .sql;
            sql.replacen(&quote_literal(x).unwrap(), "<lit>", 1)
        };
        prop_assert_eq!(shape(&s), shape(&t));
        let sql = compile("{Pick}", &select_schema(&s), None).unwrap().sql;
        prop_assert!(sql.contains(&quote_literal(&s).unwrap()), "{}", sql);
        prop_assert_eq!(
            sql.replacen(&quote_literal(&s).unwrap(), "<lit>", 1),
            compile("{Pick}", &select_schema(&t), None).unwrap().sql
                .replacen(&quote_literal(&t).unwrap(), "<lit>", 1)
        );
    }

    #[test]
    fn nul_is_refused(pre in nasty(), post in nasty()) {
        let s = format!("{pre}\0{post}");
        prop_assert!(compile(&formula_text(&s), &schema(), None).is_err());
        let pick = compile("{Pick}", &select_schema(&s), None);
        prop_assert!(pick.is_err());
    }
}

async fn read_back(c: &Client, sql: &str) -> String {
    c.query_one(&format!("SELECT {sql}"), &[])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// Values from the strategy, and the fixed hard cases.
fn values() -> Vec<String> {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut out: Vec<String> = (0..40)
        .map(|_| nasty().new_tree(&mut runner).unwrap().current())
        .collect();
    out.extend(
        [
            "",
            "'",
            "\\",
            "\\'",
            "$1::",
            "$$",
            "' OR TRUE OR '",
            "x$1::y",
        ]
        .map(str::to_owned),
    );
    out
}

#[tokio::test]
async fn literals_round_trip_in_postgres() {
    let c = crate::postgres::connect(&crate::postgres::url()).await;
    c.batch_execute("CREATE TEMP TABLE lit (id int, fld_pick text)")
        .await
        .unwrap();
    c.execute("INSERT INTO lit VALUES (1, 'cho_1')", &[])
        .await
        .unwrap();
    for (i, s) in values().iter().enumerate() {
        let sql = compile(&formula_text(s), &schema(), None).unwrap().sql;
        for conforming in ["on", "off"] {
            c.batch_execute(&format!(
                "SET standard_conforming_strings = {conforming}; SET escape_string_warning = off"
            ))
            .await
            .unwrap();
            assert_eq!(&read_back(&c, &sql).await, s, "{conforming}: {sql}");
        }
        // As DDL: a generated column holding the choice's name.
        let pick = compile("{Pick}", &select_schema(s), None).unwrap().sql;
        c.batch_execute(&format!(
            "ALTER TABLE lit ADD COLUMN g{i} text GENERATED ALWAYS AS ({pick}) STORED"
        ))
        .await
        .unwrap_or_else(|e| panic!("{pick}: {e}"));
        let got: String = c
            .query_one(&format!("SELECT g{i} FROM lit"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(&got, s);
        c.batch_execute(&format!("ALTER TABLE lit DROP COLUMN g{i}"))
            .await
            .unwrap();
    }
}
