//! Property tests: random input never panics the parser or the compiler,
//! well-typed random formulas always compile, quoting round-trips.

use crate::gen::{gen, schema, T};
use formula_lang::{canonical, compile, parse, quote_ident, quote_literal, MAX_SQL_LEN};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

const VOCAB: &[&str] = &[
    "1",
    "0",
    "-",
    "+",
    "*",
    "/",
    "&",
    "=",
    "!=",
    "<>",
    "<",
    "<=",
    ">",
    ">=",
    "(",
    ")",
    ",",
    "\"x\"",
    "'y'",
    "\"\"",
    "{Price}",
    "{Name}",
    "{Due}",
    "{Start At}",
    "{Done}",
    "{Status}",
    "{Total}",
    "{Label}",
    "{Orders}",
    "{Nope}",
    "Qty",
    "TRUE",
    "IF(",
    "SWITCH(",
    "AND(",
    "OR(",
    "NOT(",
    "BLANK()",
    "ROUND(",
    "ROUNDUP(",
    "ROUNDDOWN(",
    "ABS(",
    "MIN(",
    "MAX(",
    "MOD(",
    "POWER(",
    "SQRT(",
    "VALUE(",
    "CONCATENATE(",
    "LEN(",
    "UPPER(",
    "LOWER(",
    "TRIM(",
    "LEFT(",
    "RIGHT(",
    "MID(",
    "FIND(",
    "SUBSTITUTE(",
    "REPT(",
    "YEAR(",
    "MONTH(",
    "DAY(",
    "WEEKDAY(",
    "DATEADD(",
    "DATETIME_DIFF(",
    "'days'",
    "'months'",
    "'hours'",
    "NOW()",
    "1e299",
    "{",
    "}",
    "\\",
    "\"",
    "ISBLANK(",
    "😀",
    " ",
];

fn check(src: &str) {
    let s = schema();
    match parse(src) {
        Ok(f) => {
            let _ = canonical(&f, &s);
        }
        Err(e) => assert!(e.position <= src.chars().count(), "{e:?} for {src:?}"),
    }
    match compile(src, &s, None) {
        Ok(c) => assert!(c.sql.len() <= MAX_SQL_LEN + 200),
        Err(e) => {
            assert!(e.position <= src.chars().count(), "{e:?} for {src:?}");
            assert!(!e.message.is_empty());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_text_never_panics(src in "\\PC{0,80}") {
        check(&src);
    }

    #[test]
    fn token_soup_never_panics(toks in proptest::collection::vec(0..VOCAB.len(), 0..40)) {
        let src: String = toks.iter().map(|&i| VOCAB[i]).collect::<Vec<_>>().join(" ");
        check(&src);
    }

    #[test]
    fn well_typed_formulas_compile(seed in any::<u64>(), depth in 1u32..6, t in 0usize..5) {
        let mut rng = StdRng::seed_from_u64(seed);
        let ty = [T::Num, T::Text, T::Date, T::DateTime, T::Bool][t];
        let src = gen(&mut rng, ty, depth);
        match compile(&src, &schema(), None) {
            Ok(c) => {
                // Canonical text compiles to the same SQL.
                let again = compile(&c.canonical, &schema(), None).unwrap();
                prop_assert_eq!(again.sql, c.sql);
            }
            Err(e) => prop_assert!(e.message.contains("too complex"), "{} : {}", src, e),
        }
    }

    #[test]
    fn deep_nesting_never_panics(n in 1usize..200, f in 0usize..6) {
        let open = ["ABS(", "(", "-", "SQRT(", "UPPER(", "IF(TRUE, "][f];
        let close = [")", ")", "", ")", ")", ")"][f];
        let src = format!("{}1{}", open.repeat(n), close.repeat(n));
        check(&src);
    }

    #[test]
    fn quote_literal_round_trips(s in "\\PC*") {
        let s = s.replace('\0', "");
        let q = quote_literal(&s).unwrap();
        prop_assert_eq!(unquote_literal(&q), Some(s));
    }

    #[test]
    fn quote_ident_round_trips(s in "\\PC+") {
        let s = s.replace('\0', "");
        prop_assume!(!s.is_empty());
        let q = quote_ident(&s).unwrap();
        prop_assert!(q.starts_with('"') && q.ends_with('"'));
        let inner = &q[1..q.len() - 1];
        prop_assert!(!inner.replace("\"\"", "").contains('"'));
        prop_assert_eq!(inner.replace("\"\"", "\""), s);
    }
}

/// How PostgreSQL reads a literal produced by `quote_literal` (both with
/// standard_conforming_strings on and off, as only E'' holds backslashes):
/// None if it is not exactly one well-formed literal.
fn unquote_literal(q: &str) -> Option<String> {
    let (e, body) = match q.strip_prefix("E'") {
        Some(rest) => (true, rest),
        None => (false, q.strip_prefix('\'')?),
    };
    let mut out = String::new();
    let mut it = body.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\'' => {
                if it.peek() == Some(&'\'') {
                    it.next();
                    out.push('\'');
                } else {
                    return if it.next().is_none() { Some(out) } else { None };
                }
            }
            '\\' if e => match it.next()? {
                '\\' => out.push('\\'),
                '\'' => out.push('\''),
                _ => return None,
            },
            '\\' => return None, // would depend on standard_conforming_strings
            c => out.push(c),
        }
    }
    None
}
