//! A table with a field of every kind, shared by the tests.

use filter_lang::*;
use serde_json::{json, Value};

pub const NAME: &str = "fld_name00000001";
pub const NOTES: &str = "fld_notes0000001";
pub const PRICE: &str = "fld_price0000001";
pub const DUE: &str = "fld_due000000001";
pub const AT: &str = "fld_at0000000001";
pub const DONE: &str = "fld_done00000001";
pub const STAGE: &str = "fld_stage0000001";
pub const TAGS: &str = "fld_tags00000001";
pub const PEOPLE: &str = "fld_people000001";
pub const RELATED: &str = "fld_related00001";
pub const FILES: &str = "fld_files0000001";
pub const GO: &str = "fld_go0000000001";
pub const REL_PRICE: &str = "fld_relprice0001";
pub const REL_NAME: &str = "fld_relname00001";
pub const REL_STAGE: &str = "fld_relstage0001";
pub const TOTAL: &str = "fld_total0000001";
pub const LATEST: &str = "fld_latest000001";
pub const DUP1: &str = "fld_dup000000001";
pub const DUP2: &str = "fld_dup000000002";
/// Other table's columns.
pub const O_PRICE: &str = "fld_oprice000001";
pub const O_NAME: &str = "fld_oname0000001";
pub const O_AT: &str = "fld_oat000000001";

pub const STAGES: [(&str, &str); 3] = [
    ("stg00001", "New"),
    ("stg00002", "Doing"),
    ("stg00003", "Done"),
];
pub const TAG_CHOICES: [(&str, &str); 3] = [
    ("tag00001", "red"),
    ("tag00002", "green"),
    ("tag00003", "blue"),
];

pub fn choices(list: &[(&str, &str)]) -> Vec<Choice> {
    list.iter()
        .map(|(id, name)| Choice {
            id: id.to_string(),
            name: name.to_string(),
        })
        .collect()
}

pub fn link_spec(schema: &str) -> LinkSpec {
    LinkSpec {
        schema: schema.into(),
        connector: "conn".into(),
        own_column: "rec".into(),
        other_column: "other".into(),
        target_table: "others".into(),
    }
}

/// The fixture table; `db_schema` is the PostgreSQL schema holding
/// `records`, `others` and `conn`.
pub fn schema_in(db_schema: &str) -> Schema {
    let link = link_spec(db_schema);
    let f = FieldDef::new;
    Schema::new(vec![
        f(NAME, "Name", "single_line_text", Storage::Text),
        f(NOTES, "Notes", "long_text", Storage::LongText),
        f(PRICE, "Price", "currency", Storage::Number),
        f(
            DUE,
            "Due",
            "date",
            Storage::Date {
                include_time: false,
            },
        ),
        f(AT, "At", "date", Storage::Date { include_time: true }),
        f(DONE, "Done", "checkbox", Storage::Checkbox),
        f(
            STAGE,
            "Stage",
            "single_select",
            Storage::SingleSelect {
                choices: choices(&STAGES),
            },
        ),
        f(
            TAGS,
            "Tags",
            "multi_select",
            Storage::MultiSelect {
                choices: choices(&TAG_CHOICES),
            },
        ),
        f(
            PEOPLE,
            "People",
            "multi_member",
            Storage::MultiSelect { choices: vec![] },
        ),
        f(RELATED, "Related", "link", Storage::Link(link.clone())),
        f(FILES, "Files", "attachment", Storage::Attachment),
        f(GO, "Go", "button", Storage::Button),
        f(
            REL_PRICE,
            "Related Price",
            "lookup_number",
            Storage::Lookup {
                link: link.clone(),
                target: Box::new(Storage::Number),
                target_column: O_PRICE.into(),
                conditions: None,
            },
        ),
        f(
            REL_NAME,
            "Related Name",
            "lookup_text",
            Storage::Lookup {
                link: link.clone(),
                target: Box::new(Storage::Text),
                target_column: O_NAME.into(),
                conditions: None,
            },
        ),
        f(
            REL_STAGE,
            "Related Stage",
            "lookup_text",
            Storage::Lookup {
                link: link.clone(),
                target: Box::new(Storage::SingleSelect { choices: vec![] }),
                target_column: "fld_ostage000001".into(),
                conditions: None,
            },
        ),
        f(
            TOTAL,
            "Total",
            "rollup_number",
            Storage::Rollup {
                link: link.clone(),
                aggregation: Aggregation::Sum,
                target_column: Some(O_PRICE.into()),
                result: Box::new(Storage::Number),
                conditions: None,
            },
        ),
        f(
            LATEST,
            "Latest",
            "rollup_date",
            Storage::Rollup {
                link,
                aggregation: Aggregation::Max,
                target_column: Some(O_AT.into()),
                result: Box::new(Storage::Date { include_time: true }),
                conditions: None,
            },
        ),
        f(DUP1, "Dup", "single_line_text", Storage::Text),
        f(DUP2, "Dup", "single_line_text", Storage::Text),
    ])
}

pub fn schema() -> Schema {
    schema_in("db_test")
}

pub fn env() -> Env {
    Env::new("Europe/Paris", "2024-03-15T12:30:00Z".parse().unwrap()).unwrap()
}

/// A one-condition filter.
pub fn cond(field: &str, op: &str, value: Value) -> Value {
    json!({"conditions": [{"field": field, "op": op, "value": value}]})
}

/// A one-condition filter without a value.
pub fn cond0(field: &str, op: &str) -> Value {
    json!({"conditions": [{"field": field, "op": op}]})
}

pub fn parse(v: &Value) -> Result<Filter, Error> {
    filter::parse_value(v, &schema(), &env())
}

/// Parse and compile with parameters from $1.
pub fn sql(v: &Value) -> (String, Vec<SqlValue>) {
    let s = schema();
    let f = filter::parse_value(v, &s, &env()).unwrap_or_else(|e| panic!("{v}: {e}"));
    let mut p = Params::new(1);
    let sql = filter::compile(&f, &s, &env(), "r", &mut p);
    (sql, p.into_values())
}

/// A tiny deterministic generator (xorshift64*), so runs are repeatable.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const FIELD_REFS: &[&str] = &[
    "Name",
    NAME,
    "Notes",
    "Price",
    PRICE,
    "Due",
    "At",
    "Done",
    "Stage",
    "Tags",
    "People",
    "Related",
    "Files",
    "Go",
    "Related Price",
    "Related Name",
    "Related Stage",
    "Total",
    "Latest",
    "Dup",
    DUP1,
    "Nope",
];
const OPS: &[&str] = &[
    "is",
    "is_not",
    "contains",
    "not_contains",
    "empty",
    "not_empty",
    "greater",
    "greater_or_equal",
    "less",
    "less_or_equal",
    "before",
    "after",
    "on_or_before",
    "on_or_after",
    "any_of",
    "none_of",
    "has_any",
    "has_all",
    "has_none",
    "is_exactly",
    "like",
];

fn random_value(r: &mut Rng) -> Value {
    match r.below(16) {
        0 => json!("a"),
        1 => json!("50%_\\"),
        2 => json!(""),
        3 => json!(r.below(20) as i64 - 5),
        4 => json!(1.5),
        5 => json!(true),
        6 => json!(false),
        7 => json!("2024-03-15"),
        8 => json!("2024-03-15T10:00:00Z"),
        9 => json!({"relative": *r.pick(&["today", "now"]), "offset": r.below(10) as i64 - 5,
                    "unit": *r.pick(&["day", "week", "month"])}),
        10 => json!(*r.pick(&["New", "stg00002", "Gone", "red", "tag00003"])),
        11 => {
            let n = r.below(4);
            Value::Array(
                (0..n)
                    .map(|_| {
                        json!(*r
                            .pick(&["New", "Done", "stg00002", "red", "blue", "tag00002", "nope"]))
                    })
                    .collect(),
            )
        }
        12 => {
            let n = r.below(4);
            Value::Array(
                (0..n)
                    .map(|_| json!(format!("rec_{:012}", r.below(30))))
                    .collect(),
            )
        }
        13 => Value::Null,
        14 => json!("10"),
        _ => json!({"relative": "today", "bogus": 1}),
    }
}

fn kind_value(r: &mut Rng, storage: &Storage, op: &str) -> Value {
    let list = |r: &mut Rng, pool: &[&str]| {
        let n = r.below(4);
        Value::Array((0..n).map(|_| json!(*r.pick(pool))).collect())
    };
    match storage {
        Storage::Text | Storage::LongText => {
            json!(*r.pick(&["a", "A", "", "50%", "x_y", "hello", "b\\c", "é"]))
        }
        Storage::Number => json!(*r.pick(&[0.0, 1.5, -2.0, 10.0, 3.0, 1e20])),
        Storage::Checkbox => json!(r.chance(50)),
        Storage::Date { .. } => match r.below(4) {
            0 => json!(*r.pick(&["2024-03-15", "2024-03-14", "2024-01-31", "2024-03-31"])),
            1 => json!(*r.pick(&[
                "2024-03-15T10:00:00Z",
                "2024-03-14T23:30:00+01:00",
                "2024-03-15T00:00"
            ])),
            _ => json!({"relative": *r.pick(&["today", "now"]), "offset": r.below(10) as i64 - 5,
                        "unit": *r.pick(&["day", "week", "month"])}),
        },
        Storage::SingleSelect { .. } if op == "any_of" || op == "none_of" => {
            list(r, &["New", "Done", "stg00002", "Gone"])
        }
        Storage::SingleSelect { .. } => json!(*r.pick(&["New", "stg00002", "Done", "Gone"])),
        Storage::MultiSelect { .. } => {
            list(r, &["red", "blue", "tag00002", "tag00002", "nope", "x@y.z"])
        }
        Storage::Link(_) => {
            let n = r.below(4);
            Value::Array(
                (0..n)
                    .map(|_| json!(format!("rec_o{:011}", r.below(12))))
                    .collect(),
            )
        }
        Storage::Lookup { target, .. } => kind_value(r, target, op),
        Storage::Rollup { result, .. } => kind_value(r, result, op),
        Storage::Attachment | Storage::Button => Value::Null,
    }
}

/// A random filter object over [`schema`]: mostly well-formed, sometimes not.
pub fn random_filter(r: &mut Rng, level: usize) -> Value {
    let s = schema();
    let mut obj = serde_json::Map::new();
    if r.chance(70) {
        obj.insert(
            "join".into(),
            json!(*r.pick(&["and", "or", "and", "or", "xor"])),
        );
    }
    let n = r.below(5);
    let mut items = Vec::new();
    for _ in 0..n {
        if level < 3 && r.chance(if level == 1 { 25 } else { 5 }) {
            items.push(random_filter(r, level + 1));
            continue;
        }
        let mut c = serde_json::Map::new();
        let field = r.pick(&s.fields).clone();
        let reference = if r.chance(3) {
            json!(*r.pick(FIELD_REFS))
        } else if r.chance(50) {
            json!(field.id)
        } else {
            json!(field.name)
        };
        c.insert("field".into(), reference);
        let ops = field.operators();
        let op = if ops.is_empty() || r.chance(5) {
            *r.pick(OPS)
        } else {
            r.pick(ops).name()
        };
        c.insert("op".into(), json!(op));
        if op != "empty" && op != "not_empty" {
            let v = if r.chance(95) {
                kind_value(r, &field.storage, op)
            } else {
                random_value(r)
            };
            c.insert("value".into(), v);
        } else if r.chance(5) {
            c.insert("value".into(), random_value(r));
        }
        items.push(Value::Object(c));
    }
    obj.insert("conditions".into(), Value::Array(items));
    Value::Object(obj)
}
