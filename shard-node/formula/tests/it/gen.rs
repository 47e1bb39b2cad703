//! A test schema and a generator of random well-typed formulas over it.

use formula_lang::{Choice, FieldKind, Schema, SchemaField};
use rand::rngs::StdRng;
use rand::Rng;

pub fn field(id: &str, name: &str, kind: FieldKind) -> SchemaField {
    SchemaField {
        id: id.into(),
        name: name.into(),
        column: id.into(),
        kind,
    }
}

/// Number `{Price}`, `{Qty}`; text `{Name}`, `{Notes}`; date `{Due}`;
/// date-time `{Start At}`; checkbox `{Done}`; select `{Status}`; formula
/// `{Total}` (= Price * Qty) and `{Label}` (text formula over Total); link
/// `{Orders}`; a field with braces in its name `{Odd {x}}`.
pub fn schema() -> Schema {
    Schema::new(vec![
        field("fld_price", "Price", FieldKind::Number),
        field("fld_qty", "Qty", FieldKind::Number),
        field("fld_name", "Name", FieldKind::Text),
        field("fld_notes", "Notes", FieldKind::Text),
        field("fld_due", "Due", FieldKind::Date { with_time: false }),
        field("fld_start", "Start At", FieldKind::Date { with_time: true }),
        field("fld_done", "Done", FieldKind::Checkbox),
        field(
            "fld_status",
            "Status",
            FieldKind::SingleSelect {
                choices: vec![
                    Choice {
                        id: "ch1".into(),
                        name: "Open".into(),
                    },
                    Choice {
                        id: "ch2".into(),
                        name: "It's \\done\\".into(),
                    },
                ],
            },
        ),
        field(
            "fld_total",
            "Total",
            FieldKind::Formula {
                expression: "{Price} * Qty".into(),
            },
        ),
        field(
            "fld_label",
            "Label",
            FieldKind::Formula {
                expression: "{Name} & \": \" & {Total}".into(),
            },
        ),
        field(
            "fld_orders",
            "Orders",
            FieldKind::NotReferencable {
                costume: "link".into(),
            },
        ),
        field("fld_odd", "Odd {x}", FieldKind::Text),
    ])
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum T {
    Num,
    Text,
    Date,
    DateTime,
    Bool,
}

const NUM_LITS: &[&str] = &[
    "0",
    "1",
    "2",
    "-1",
    "0.5",
    "3.14159",
    "100",
    "1e299",
    "9.9e299",
    "-1e299",
    "1e-300",
    "2147483648",
    "1e20",
    "(0-0)",
    "0.000001",
];
const TEXT_LITS: &[&str] = &[
    "\"\"",
    "\" \"",
    "\"abc\"",
    "'12'",
    "\" -3.5e2 \"",
    "\"1,000\"",
    "\"NaN\"",
    "\"1e99999\"",
    "\"ünï😀\"",
    "\"it's\"",
    "\"a\\\"b\\\\c\\n\"",
    "\"{Price}\"",
    "\"x\"",
];
const DATE_UNITS: &[&str] = &[
    "'days'",
    "'weeks'",
    "'months'",
    "'years'",
    "'quarters'",
    "'hours'",
    "'minutes'",
    "'seconds'",
    "'milliseconds'",
];

fn pick<'a>(rng: &mut StdRng, xs: &[&'a str]) -> &'a str {
    xs[rng.gen_range(0..xs.len())]
}

/// A random formula of type `t`, at most `depth` calls deep.
pub fn gen(rng: &mut StdRng, t: T, depth: u32) -> String {
    let leaf = depth == 0 || rng.gen_bool(0.25);
    let d = depth.saturating_sub(1);
    match t {
        T::Num => {
            if leaf {
                return match rng.gen_range(0..6) {
                    0 | 1 => pick(rng, NUM_LITS).to_string(),
                    2 => "{Price}".into(),
                    3 => "Qty".into(),
                    4 => "{Total}".into(),
                    _ => "{Done}".into(),
                };
            }
            match rng.gen_range(0..30) {
                0 => format!("({} + {})", gen(rng, T::Num, d), gen(rng, T::Num, d)),
                1 => format!("({} - {})", gen(rng, T::Num, d), gen(rng, T::Num, d)),
                2 => format!("({} * {})", gen(rng, T::Num, d), gen(rng, T::Num, d)),
                3 => format!("({} / {})", gen(rng, T::Num, d), gen(rng, T::Num, d)),
                4 => format!("ROUND({}, {})", gen(rng, T::Num, d), gen(rng, T::Num, d)),
                5 => format!("ROUNDUP({}, {})", gen(rng, T::Num, d), gen(rng, T::Num, d)),
                6 => format!(
                    "ROUNDDOWN({}, {})",
                    gen(rng, T::Num, d),
                    gen(rng, T::Num, d)
                ),
                7 => format!("ABS(-{})", gen(rng, T::Num, d)),
                8 => format!(
                    "MIN({}, {}, {})",
                    gen(rng, T::Num, d),
                    gen(rng, T::Num, d),
                    gen(rng, T::Num, d)
                ),
                9 => format!("MAX({}, {})", gen(rng, T::Num, d), gen(rng, T::Num, d)),
                10 => format!("MOD({}, {})", gen(rng, T::Num, d), gen(rng, T::Num, d)),
                11 => format!("POWER({}, {})", gen(rng, T::Num, d), gen(rng, T::Num, d)),
                12 => format!("SQRT({})", gen(rng, T::Num, d)),
                13 => format!("VALUE({})", gen(rng, T::Text, d)),
                14 => format!("LEN({})", gen(rng, T::Text, d)),
                15 => format!(
                    "FIND({}, {}, {})",
                    gen(rng, T::Text, d),
                    gen(rng, T::Text, d),
                    gen(rng, T::Num, d)
                ),
                16 => format!("YEAR({})", gen(rng, T::Date, d)),
                17 => format!("MONTH({})", gen(rng, T::DateTime, d)),
                18 => format!("DAY({})", gen(rng, T::Date, d)),
                19 => format!("WEEKDAY({})", gen(rng, T::DateTime, d)),
                20 => {
                    let second = if rng.gen_bool(0.5) {
                        T::Date
                    } else {
                        T::DateTime
                    };
                    format!(
                        "DATETIME_DIFF({}, {}, {})",
                        gen(rng, T::Date, d),
                        gen(rng, second, d),
                        pick(rng, DATE_UNITS)
                    )
                }
                21 => format!(
                    "IF({}, {}, {})",
                    gen(rng, T::Bool, d),
                    gen(rng, T::Num, d),
                    gen(rng, T::Num, d)
                ),
                22 => format!(
                    "SWITCH({}, {}, {}, {}, {}, {})",
                    gen(rng, T::Num, d),
                    gen(rng, T::Num, d),
                    gen(rng, T::Num, d),
                    gen(rng, T::Num, d),
                    gen(rng, T::Num, d),
                    gen(rng, T::Num, d)
                ),
                23 => format!("INT({})", gen(rng, T::Num, d)),
                24 => format!("HOUR({})", gen(rng, T::DateTime, d)),
                25 => format!("FIND({}, {})", gen(rng, T::Text, d), gen(rng, T::Text, d)),
                26 => format!("VALUE({})", gen(rng, T::Num, d)),
                27 => format!("(-{})", gen(rng, T::Num, d)),
                28 => format!(
                    "DATETIME_DIFF({}, {})",
                    gen(rng, T::DateTime, d),
                    gen(rng, T::DateTime, d)
                ),
                _ => format!("SECOND({})", gen(rng, T::DateTime, d)),
            }
        }
        T::Text => {
            if leaf {
                return match rng.gen_range(0..7) {
                    0 | 1 => pick(rng, TEXT_LITS).to_string(),
                    2 => "{Name}".into(),
                    3 => "{Notes}".into(),
                    4 => "{Status}".into(),
                    5 => "{Label}".into(),
                    _ => "{Odd \\{x\\}}".into(),
                };
            }
            match rng.gen_range(0..15) {
                0 => format!("({} & {})", gen_any(rng, d), gen_any(rng, d)),
                1 => format!(
                    "CONCATENATE({}, {}, {})",
                    gen_any(rng, d),
                    gen_any(rng, d),
                    gen_any(rng, d)
                ),
                2 => format!("UPPER({})", gen(rng, T::Text, d)),
                3 => format!("LOWER({})", gen(rng, T::Text, d)),
                4 => format!("TRIM({})", gen(rng, T::Text, d)),
                5 => format!("LEFT({}, {})", gen(rng, T::Text, d), gen(rng, T::Num, d)),
                6 => format!("RIGHT({}, {})", gen(rng, T::Text, d), gen(rng, T::Num, d)),
                7 => format!(
                    "MID({}, {}, {})",
                    gen(rng, T::Text, d),
                    gen(rng, T::Num, d),
                    gen(rng, T::Num, d)
                ),
                8 => format!(
                    "SUBSTITUTE({}, {}, {})",
                    gen(rng, T::Text, d),
                    gen(rng, T::Text, d),
                    gen(rng, T::Text, d)
                ),
                9 => format!("REPT({}, {})", gen(rng, T::Text, d), gen(rng, T::Num, d)),
                10 => format!(
                    "IF({}, {}, {})",
                    gen(rng, T::Bool, d),
                    gen(rng, T::Text, d),
                    gen(rng, T::Text, d)
                ),
                11 => format!(
                    "SWITCH({}, {}, {}, {})",
                    gen(rng, T::Text, d),
                    gen(rng, T::Text, d),
                    gen(rng, T::Text, d),
                    gen(rng, T::Text, d)
                ),
                12 => format!("IF({}, {})", gen(rng, T::Bool, d), gen(rng, T::Text, d)),
                13 => format!("({} & \"\")", gen(rng, T::Date, d)),
                _ => format!("({} & \"\")", gen(rng, T::DateTime, d)),
            }
        }
        T::Date => {
            if leaf {
                return "{Due}".into();
            }
            match rng.gen_range(0..5) {
                0 => format!(
                    "DATEADD({}, {}, {})",
                    gen(rng, T::Date, d),
                    gen(rng, T::Num, d),
                    pick(rng, &DATE_UNITS[..5])
                ),
                1 => format!(
                    "IF({}, {}, {})",
                    gen(rng, T::Bool, d),
                    gen(rng, T::Date, d),
                    gen(rng, T::Date, d)
                ),
                2 => format!("MIN({}, {})", gen(rng, T::Date, d), gen(rng, T::Date, d)),
                3 => format!("MAX({}, BLANK())", gen(rng, T::Date, d)),
                _ => "{Due}".into(),
            }
        }
        T::DateTime => {
            if leaf {
                return "{Start At}".into();
            }
            match rng.gen_range(0..4) {
                0 => format!(
                    "DATEADD({}, {}, {})",
                    gen(rng, T::DateTime, d),
                    gen(rng, T::Num, d),
                    pick(rng, DATE_UNITS)
                ),
                1 => format!(
                    "DATEADD({}, {}, 'hours')",
                    gen(rng, T::Date, d),
                    gen(rng, T::Num, d)
                ),
                2 => format!(
                    "IF({}, {}, {})",
                    gen(rng, T::Bool, d),
                    gen(rng, T::Date, d),
                    gen(rng, T::DateTime, d)
                ),
                _ => format!(
                    "MAX({}, {})",
                    gen(rng, T::DateTime, d),
                    gen(rng, T::Date, d)
                ),
            }
        }
        T::Bool => {
            if leaf {
                return match rng.gen_range(0..3) {
                    0 => "{Done}".into(),
                    1 => "TRUE".into(),
                    _ => "ISBLANK({Name})".into(),
                };
            }
            let cmp = ["=", "!=", "<", "<=", ">", ">="][rng.gen_range(0..6)];
            match rng.gen_range(0..8) {
                0 => format!("({} {cmp} {})", gen(rng, T::Num, d), gen(rng, T::Num, d)),
                1 => format!("({} {cmp} {})", gen(rng, T::Text, d), gen(rng, T::Text, d)),
                2 => format!(
                    "({} {cmp} {})",
                    gen(rng, T::Date, d),
                    gen(rng, T::DateTime, d)
                ),
                3 => format!("AND({}, {})", gen_any(rng, d), gen_any(rng, d)),
                4 => format!("OR({}, {})", gen_any(rng, d), gen_any(rng, d)),
                5 => format!("NOT({})", gen_any(rng, d)),
                6 => format!("({} = BLANK())", gen_any(rng, d)),
                _ => format!("ISBLANK({})", gen_any(rng, d)),
            }
        }
    }
}

pub fn gen_any(rng: &mut StdRng, depth: u32) -> String {
    let t = [T::Num, T::Text, T::Date, T::DateTime, T::Bool][rng.gen_range(0..5)];
    gen(rng, t, depth)
}
