//! Parser: precedence, literals and escapes, limits, errors with positions.

use formula_lang::{parse, BinaryOp, ExprKind, FormulaError, MAX_DEPTH, MAX_LEN};

/// The tree as a compact S-expression, to pin precedence.
fn sexp(src: &str) -> String {
    fn go(e: &formula_lang::Expr) -> String {
        match &e.kind {
            ExprKind::Number(n) => n.clone(),
            ExprKind::Text(s) => format!("{s:?}"),
            ExprKind::Bool(b) => b.to_string(),
            ExprKind::Field { name, braced } => {
                if *braced {
                    format!("{{{name}}}")
                } else {
                    format!("bare:{name}")
                }
            }
            ExprKind::Unary { op, operand } => format!("({op:?} {})", go(operand)),
            ExprKind::Binary { op, left, right } => {
                format!("({} {} {})", op.symbol(), go(left), go(right))
            }
            ExprKind::Call { name, args, .. } => {
                let a: Vec<String> = args.iter().map(go).collect();
                format!("{name}[{}]", a.join(" "))
            }
        }
    }
    go(&parse(src).unwrap().root)
}

fn err(src: &str) -> FormulaError {
    parse(src).unwrap_err()
}

#[test]
fn precedence_and_associativity() {
    assert_eq!(sexp("1 + 2 * 3"), "(+ 1 (* 2 3))");
    assert_eq!(sexp("1 - 2 - 3"), "(- (- 1 2) 3)");
    assert_eq!(sexp("8 / 4 / 2"), "(/ (/ 8 4) 2)");
    assert_eq!(sexp("(1 + 2) * 3"), "(* (+ 1 2) 3)");
    assert_eq!(sexp("-2 * 3"), "(* (Neg 2) 3)");
    assert_eq!(sexp("1 + 2 & 3 = 4"), "(= (& (+ 1 2) 3) 4)");
    assert_eq!(sexp("1 < 2 = TRUE"), "(= (< 1 2) true)");
    assert_eq!(sexp("a <> b"), "(!= bare:a bare:b)");
    assert_eq!(sexp("{A} >= 1 "), "(>= {A} 1)");
    assert_eq!(sexp("if(x, 1, -{B c})"), "IF[bare:x 1 (Neg {B c})]");
    assert_eq!(sexp("Blank()"), "BLANK[]");
    assert_eq!(sexp("true & False"), "(& true false)");
}

#[test]
fn literals_and_escapes() {
    assert_eq!(sexp(r#""a\"b""#), r#""a\"b""#);
    assert_eq!(sexp(r#"'it\'s'"#), r#""it's""#);
    assert_eq!(sexp(r#""tab\there\\""#), r#""tab\there\\""#);
    assert_eq!(sexp(r#""it's""#), r#""it's""#);
    assert_eq!(sexp("'say \"hi\"'"), r#""say \"hi\"""#);
    assert_eq!(sexp(r"{Odd \{x\} \\ y}"), r"{Odd {x} \ y}");
    assert_eq!(sexp("1.5e3 + .5 + 5."), "(+ (+ 1.5e3 .5) 5.)");
    assert_eq!(sexp("{Ünïcode 😀}"), "{Ünïcode 😀}");
}

#[test]
fn errors_carry_character_positions() {
    let e = err("1 + ");
    assert_eq!(
        (e.position, e.message.as_str()),
        (4, "Expected a value, found the end of the formula")
    );
    let e = err("IF(1, 2");
    assert_eq!(e.position, 7);
    assert!(
        e.message
            .starts_with("Expected ',' or ')' in the arguments of IF"),
        "{}",
        e.message
    );
    let e = err("\"abc");
    assert_eq!(
        (e.position, e.message.as_str()),
        (0, "Unterminated text literal")
    );
    let e = err("'é' & \"x\\q\"");
    assert_eq!(e.position, 8, "{e}");
    assert!(e.message.contains("Unknown escape '\\q'"));
    let e = err("éé # 1");
    assert_eq!(
        (e.position, e.message.as_str()),
        (3, "Unexpected character '#'")
    );
    let e = err("{Price");
    assert_eq!(
        (e.position, e.message.as_str()),
        (0, "Unterminated field reference: missing '}'")
    );
    assert_eq!(err("{}").message, "Empty field reference '{}'");
    assert_eq!(err("   ").message, "Formula is empty");
    assert_eq!(
        err("1 2").message,
        "Unexpected number 2 after a complete expression"
    );
    assert_eq!(err("(1").position, 2);
    assert_eq!(err("1e400").message, "Number is too large (at most 1e300)");
    assert_eq!(err("12abc").message, "Unexpected 'a' after a number");
    assert_eq!(
        err("1 +").to_string(),
        "Expected a value, found the end of the formula (at character 4)"
    );
}

#[test]
fn limits() {
    let deep = format!("{}1{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
    assert!(parse(&deep).is_ok());
    let deeper = format!(
        "{}1{}",
        "(".repeat(MAX_DEPTH + 1),
        ")".repeat(MAX_DEPTH + 1)
    );
    let e = err(&deeper);
    assert_eq!(e.position, MAX_DEPTH);
    assert!(e.message.contains("nested too deeply"));
    let calls = format!(
        "{}1{}",
        "ABS(".repeat(MAX_DEPTH + 1),
        ")".repeat(MAX_DEPTH + 1)
    );
    assert!(err(&calls).message.contains("nested too deeply"));
    let negs = format!("{}1", "-".repeat(1_000));
    assert!(err(&negs).message.contains("nested too deeply"));
    let long_chain = vec!["1"; 300].join("+");
    assert!(err(&long_chain).message.contains("chain of operators"));
    let long = format!("\"{}\"", "x".repeat(MAX_LEN));
    assert!(err(&long).message.contains("too long"));
}

#[test]
fn spans_cover_the_written_text() {
    let f = parse("  UPPER( {A} )").unwrap();
    assert_eq!((f.root.span.start, f.root.span.end), (2, 14));
    let ExprKind::Binary { op, .. } = parse("1&2").unwrap().root.kind else {
        panic!()
    };
    assert_eq!(op, BinaryOp::Concat);
}
