//! Type inference and reference resolution: results, errors, canonical form.

use crate::gen::{field, schema};
use formula_lang::{canonical, compile, parse, rename_references, FieldKind, ResultType, Schema};

fn result(src: &str) -> ResultType {
    compile(src, &schema(), None)
        .unwrap_or_else(|e| panic!("{src}: {e}"))
        .result
}

fn err(src: &str) -> (usize, String) {
    let e = compile(src, &schema(), None).unwrap_err();
    (e.position, e.message)
}

#[test]
fn result_types() {
    use ResultType::*;
    assert_eq!(result("{Price} * 2"), Number);
    assert_eq!(
        result("{Price} > 2"),
        Number,
        "checkbox results are numbers 1/0"
    );
    assert_eq!(result("{Done}"), Number);
    assert_eq!(result("{Name} & 1"), Text);
    assert_eq!(result("{Status}"), Text);
    assert_eq!(result("BLANK()"), Text);
    assert_eq!(result("{Due}"), Date { with_time: false });
    assert_eq!(result("{Start At}"), Date { with_time: true });
    assert_eq!(
        result("DATEADD({Due}, 1, 'days')"),
        Date { with_time: false }
    );
    assert_eq!(
        result("DATEADD({Due}, 1, 'hours')"),
        Date { with_time: true }
    );
    assert_eq!(
        result("IF({Done}, {Due}, {Start At})"),
        Date { with_time: true }
    );
    assert_eq!(result("IF({Done}, {Due})"), Date { with_time: false });
    assert_eq!(result("IF({Done}, BLANK(), 3)"), Number);
    assert_eq!(result("{Done} + 1"), Number);
    assert_eq!(result("{Total}"), Number);
    assert_eq!(result("{Label}"), Text);
    assert_eq!(result("DATETIME_DIFF({Due}, {Start At}, 'days')"), Number);
    assert_eq!(
        result("SWITCH({Status}, 'Open', {Due}, BLANK())"),
        Date { with_time: false }
    );
    assert_eq!(result("MIN({Due}, {Start At})"), Date { with_time: true });
    assert_eq!(result("VALUE('12')"), Number);
    assert_eq!(result("price"), Number, "trimmed / exact bare names");
}

#[test]
fn type_errors_say_where_and_what() {
    assert_eq!(
        err("UPPER(1)"),
        (6, "UPPER expects text, got number".into())
    );
    assert_eq!(
        err("IF({Done}, 1, 'x')"),
        (
            0,
            "IF branches must have the same type (got number and text)".into()
        )
    );
    assert_eq!(
        err("1 + {Name}"),
        (
            4,
            "'+' expects numbers, got text (use & to join text)".into()
        )
    );
    assert_eq!(
        err("{Name} - 1"),
        (0, "'-' expects a number, got text".into())
    );
    assert_eq!(
        err("{Name} > 1"),
        (0, "Cannot compare text with number".into())
    );
    assert_eq!(
        err("YEAR({Name})"),
        (5, "YEAR expects a date, got text".into())
    );
    assert_eq!(
        err("IF(1)"),
        (0, "IF expects 2 to 3 arguments, got 1".into())
    );
    assert_eq!(
        err("ROUND()"),
        (0, "ROUND expects 1 to 2 arguments, got 0".into())
    );
    assert_eq!(
        err("NOT(1, 2)"),
        (0, "NOT expects 1 argument, got 2".into())
    );
    assert_eq!(err("FOO(1)"), (0, "Unknown function 'FOO'".into()));
    assert_eq!(err("  NOW()").0, 2);
    assert!(err("TODAY()").1.contains("cannot depend on the clock"));
    assert_eq!(err("DATEADD({Due}, 1, 'fortnights')").0, 18);
    assert!(err("DATEADD({Due}, 1, 'fortnights')")
        .1
        .starts_with("Unknown unit 'fortnights' for DATEADD"));
    assert_eq!(
        err("DATEADD({Due}, 1, {Name})").1,
        "DATEADD expects its unit as a text literal such as 'days'"
    );
    assert_eq!(
        err("MIN({Name})").1,
        "MIN expects numbers or dates, got text"
    );
    assert_eq!(
        err("MAX(1, {Due})").1,
        "MAX arguments must have the same type (got number and date)"
    );
    assert_eq!(
        err("SWITCH({Price}, 'a', 1)").1,
        "SWITCH patterns must have the type of the value switched on (got number and text)"
    );
}

#[test]
fn references() {
    assert_eq!(err("{Nope} + 1"), (0, "Unknown field 'Nope'".into()));
    assert_eq!(err("1 + Nope"), (4, "Unknown field 'Nope'".into()));
    assert_eq!(
        err("{Orders}"),
        (
            0,
            "Field 'Orders' (link) cannot be used in a formula".into()
        )
    );
    let c = compile("{Total} + Price + {Price} + {Done}", &schema(), None).unwrap();
    assert_eq!(
        c.referenced_field_ids,
        ["fld_total", "fld_price", "fld_done"]
    );
    assert_eq!(c.columns_read, ["fld_price", "fld_qty", "fld_done"]);
    assert_eq!(c.canonical, "{Total} + {Price} + {Price} + {Done}");
}

#[test]
fn self_reference_and_cycles() {
    let mut fields = schema().fields().to_vec();
    fields.push(field(
        "fld_a",
        "A",
        FieldKind::Formula {
            expression: "{B} + 1".into(),
        },
    ));
    fields.push(field(
        "fld_b",
        "B",
        FieldKind::Formula {
            expression: "{A} * 2".into(),
        },
    ));
    fields.push(field(
        "fld_c",
        "C",
        FieldKind::Formula {
            expression: "{Me} + 1".into(),
        },
    ));
    fields.push(field(
        "fld_me",
        "Me",
        FieldKind::Formula {
            expression: "1".into(),
        },
    ));
    fields.push(field(
        "fld_bad",
        "Bad",
        FieldKind::Formula {
            expression: "UPPER(1)".into(),
        },
    ));
    let s = Schema::new(fields);
    let e = compile("1 + {Me}", &s, Some("fld_me")).unwrap_err();
    assert_eq!(
        (e.position, e.message.as_str()),
        (4, "A formula cannot reference itself")
    );
    let e = compile("{C}", &s, Some("fld_me")).unwrap_err();
    assert_eq!(e.message, "In formula field {C}: Formula fields reference each other in a cycle: {Me} → {C} → {Me} (at character 1)");
    let e = compile("{A}", &s, None).unwrap_err();
    assert!(
        e.message.contains("cycle: {A} → {B} → {A}"),
        "{}",
        e.message
    );
    let e = compile("2 * {Bad}", &s, None).unwrap_err();
    assert_eq!(
        (e.position, e.message.as_str()),
        (
            4,
            "In formula field {Bad}: UPPER expects text, got number (at character 7)"
        )
    );
    assert!(
        compile("{C}", &s, None).is_ok(),
        "a stored formula is inlined when not the target"
    );
}

#[test]
fn canonical_form_and_renames() {
    let s = schema();
    let f = parse("price*  Qty & { Name } & {Odd \\{x\\}} & {Unknown}").unwrap();
    assert_eq!(
        canonical(&f, &s),
        "{Price}*  {Qty} & {Name} & {Odd \\{x\\}} & {Unknown}"
    );
    let f = parse("Price + {Price}").unwrap();
    assert_eq!(
        rename_references(&f, &s, "fld_price", "Cost {€}"),
        "{Cost \\{€\\}} + {Cost \\{€\\}}"
    );
    let renamed = rename_references(&f, &s, "fld_price", " Spaced ");
    assert_eq!(renamed, "{ Spaced } + { Spaced }");
    // A canonical text always parses back to the same references.
    let again = parse(&canonical(&parse(r"{Odd \{x\}}").unwrap(), &s)).unwrap();
    assert_eq!(canonical(&again, &s), r"{Odd \{x\}}");
}
