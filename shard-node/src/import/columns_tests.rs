use super::*;
use crate::import::check::check;
use crate::import::plan::{parse_plan, Entry};
use crate::import::sheet::open;

fn message(e: ApiError) -> String {
    match e {
        ApiError::BadRequest(m) => m,
        other => panic!("not a 400: {other:?}"),
    }
}

fn field(id: &str, name: &str, costume: Costume, options: Value) -> FieldRow {
    let include_time = options["include_time"] == json!(true);
    FieldRow {
        id: id.into(),
        table_id: "tbl_T".into(),
        name: name.into(),
        costume,
        options: options.as_object().cloned().unwrap_or_default(),
        position: 0,
        sql_type: costume.column_type(include_time).map(str::to_owned),
        created_at: Utc::now(),
    }
}

/// A table with a select (choices A, B with colours), a unique text
/// field, a number and a link.
fn table() -> TableSchema {
    TableSchema {
        id: "tbl_T".into(),
        database_id: "db_D".into(),
        name: "Things".into(),
        position: 0,
        display_field_id: None,
        created_at: Utc::now(),
        updated_at: Utc::now(),
        fields: vec![
            field(
                "fld_sel",
                "Status",
                Costume::SingleSelect,
                json!({"choices": [
                    {"id": "idA00000", "name": "A", "color": "red"},
                    {"id": "idB00000", "name": "B", "color": "blue"}
                ]}),
            ),
            field(
                "fld_code",
                "Code",
                Costume::SingleLineText,
                json!({"unique": true}),
            ),
            field("fld_num", "Qty", Costume::Number, json!({})),
            field("fld_link", "Owner", Costume::Link, json!({})),
        ],
    }
}

fn schema() -> DatabaseSchema {
    DatabaseSchema::new("db_D".into(), 1, "UTC".into(), vec![table()])
}

fn env() -> filter_lang::Env {
    filter_lang::Env::new("UTC", Utc::now()).unwrap()
}

fn plan(json: &str) -> Vec<Entry> {
    parse_plan(json).unwrap()
}

fn sheet(csv: &str) -> Sheet {
    open("t.csv", csv.as_bytes().to_vec()).unwrap()
}

/// Every row checked, then converted.
fn convert(
    schema: &DatabaseSchema,
    table: Option<&TableSchema>,
    cols: &[Column],
    sheet: &mut Sheet,
    env: &filter_lang::Env,
) -> ApiResult<Vec<Prepared>> {
    let converter = Converter::new(schema, table, cols, env);
    check(&converter, sheet)?;
    let mut out = Vec::new();
    sheet.for_each_row(|r, row| {
        out.push(converter.row(r, row)?);
        Ok(())
    })?;
    Ok(out)
}

#[test]
fn mapping_onto_a_select_adds_missing_choices_keeping_ids_and_colours() {
    let t = table();
    let mut s = sheet("st,n\nA,1\nC,2\nidB00000,3\nC,4\n");
    let cols = resolve(
        Some(&t),
        &plan(r#"[{"columnIndex":0,"sourceHeader":"st","action":{"kind":"map","targetFieldId":"fld_sel"}}]"#),
        &mut s,
    )
    .unwrap();
    assert_eq!(cols.len(), 1, "unlisted column 1 is not imported");
    let Source::Map {
        new_options: Some(opts),
    } = &cols[0].source
    else {
        panic!("choices must be added: {:?}", cols[0].source);
    };
    let choices = opts["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 3);
    assert_eq!(
        choices[0],
        json!({"id": "idA00000", "name": "A", "color": "red"})
    );
    assert_eq!(
        choices[1],
        json!({"id": "idB00000", "name": "B", "color": "blue"})
    );
    assert_eq!(choices[2]["name"], "C");
    let c_id = choices[2]["id"].as_str().unwrap().to_owned();
    assert_eq!(c_id.len(), 8);

    let rows = convert(&schema(), Some(&t), &cols, &mut s, &env()).unwrap();
    let values: Vec<&Value> = rows.iter().map(|p| &p.columns["fld_sel"]).collect();
    assert_eq!(
        values,
        [
            &json!("idA00000"),
            &json!(c_id),
            &json!("idB00000"),
            &json!(c_id)
        ]
    );
}

#[test]
fn a_select_with_more_than_100_distinct_values_is_refused() {
    let mut csv = String::from("v\n");
    for i in 0..101 {
        csv.push_str(&format!("v{i}\n"));
    }
    let p = plan(
        r#"[{"columnIndex":0,"action":{"kind":"create","name":"V","costume":"single_select"}}]"#,
    );
    let m = message(resolve(None, &p, &mut sheet(&csv)).unwrap_err());
    assert!(m.contains("101 distinct values or more"), "{m}");
    assert!(m.contains("at most 100"), "{m}");
    // Exactly 100 passes; multi select counts names across cells.
    let csv: String = csv.lines().take(101).collect::<Vec<_>>().join("\n");
    assert!(resolve(None, &p, &mut sheet(&csv)).is_ok());
    let multi = plan(
        r#"[{"columnIndex":0,"action":{"kind":"create","name":"V","costume":"multi_select"}}]"#,
    );
    let cols = resolve(None, &multi, &mut sheet("v\n\"a, b\"\n\"b,c\"\n")).unwrap();
    assert_eq!(cols[0].field.choices().len(), 3);
}

#[test]
fn plan_refusals_against_file_and_table() {
    let t = table();
    let mut s = sheet("a,b\n1,2\n");
    let mut m =
        |p: &str, t: Option<&TableSchema>| message(resolve(t, &plan(p), &mut s).unwrap_err());
    assert!(m(r#"[{"columnIndex":2,"action":{"kind":"skip"}}]"#, None)
        .contains("plan[0].columnIndex is 2, but the file has 2 columns"));
    assert!(m(
        r#"[{"columnIndex":0,"sourceHeader":"b","action":{"kind":"skip"}}]"#,
        None
    )
    .contains("column 0 of the file is headed 'a'"));
    assert!(
        m(r#"[{"columnIndex":0,"action":{"kind":"skip"}}]"#, None).contains("imports no column")
    );
    assert!(m(
        r#"[{"columnIndex":0,"action":{"kind":"map","targetFieldId":"fld_num"}}]"#,
        None
    )
    .contains("new_table target has no fields"));
    assert!(m(
        r#"[{"columnIndex":0,"action":{"kind":"map","targetFieldId":"fld_zz"}}]"#,
        Some(&t)
    )
    .contains("'fld_zz' is not a field of table 'Things'"));
    assert!(m(
        r#"[{"columnIndex":0,"action":{"kind":"map","targetFieldId":"fld_link"}}]"#,
        Some(&t)
    )
    .contains("cannot be imported as 'link'"));
    assert!(m(
        r#"[{"columnIndex":0,"action":{"kind":"map","targetFieldId":"fld_num"}},
            {"columnIndex":1,"action":{"kind":"map","targetFieldId":"fld_num"}}]"#,
        Some(&t)
    )
    .contains("which column 0 already fills"));
    assert!(m(
        r#"[{"columnIndex":0,"action":{"kind":"create","name":"X","costume":"number"}},
            {"columnIndex":1,"action":{"kind":"create","name":"X","costume":"number"}}]"#,
        None
    )
    .contains("as column 0 already does"));
    assert!(m(
        r#"[{"columnIndex":0,"action":{"kind":"create","name":"X","costume":"number","options":{"bogus":1}}}]"#,
        None
    )
    .contains("plan[0].action.options: Unknown option 'bogus'"));
    let taken = resolve(
        Some(&t),
        &plan(r#"[{"columnIndex":0,"action":{"kind":"create","name":"Qty","costume":"number"}}]"#),
        &mut s,
    )
    .unwrap_err();
    assert!(matches!(taken, ApiError::Conflict(_)), "{taken:?}");
}

#[test]
fn an_invalid_cell_names_row_column_and_value() {
    let mut s = sheet("name,qty,when\nAnn,1,2024-01-01\nBob,lots,2024-01-02\n");
    let p = plan(
        r#"[{"columnIndex":0,"action":{"kind":"create","name":"Name","costume":"single_line_text"}},
            {"columnIndex":1,"action":{"kind":"create","name":"Qty","costume":"number"}},
            {"columnIndex":2,"action":{"kind":"create","name":"When","costume":"date"}}]"#,
    );
    let cols = resolve(None, &p, &mut s).unwrap();
    let m = message(convert(&schema(), None, &cols, &mut s, &env()).unwrap_err());
    assert_eq!(
        m,
        "Data row 2, column 1 ('qty'): the value 'lots' cannot be imported. Field 'Qty' takes a number."
    );
    let mut s = sheet("name,qty,when\nAnn,1,2024-02-30\n");
    let m = message(convert(&schema(), None, &cols, &mut s, &env()).unwrap_err());
    assert!(
        m.starts_with("Data row 1, column 2 ('when'): the value '2024-02-30'"),
        "{m}"
    );
}

#[test]
fn every_importable_costume_converts_as_the_write_path_does() {
    let mut s = sheet(
        "t,l,e,p,u,n,c,pc,r,d,dt,cb,ss,ms\n\
         Ann,\"x\ny\",a@b.co,+1 555,https://x.example,\"1,234.5\",$12.50,12%,4.4,1:30,01/31/2024,yes,Open,\"a, b\"\n\
         Bo,,,,,,,,,,,,,\n",
    );
    let costumes = [
        "single_line_text",
        "long_text",
        "email",
        "phone",
        "url",
        "number",
        "currency",
        "percent",
        "rating",
        "duration",
        "date",
        "checkbox",
        "single_select",
        "multi_select",
    ];
    let entries: Vec<String> = costumes
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(r#"{{"columnIndex":{i},"action":{{"kind":"create","name":"F{i}","costume":"{c}"}}}}"#)
        })
        .collect();
    let p = plan(&format!("[{}]", entries.join(",")));
    let cols = resolve(None, &p, &mut s).unwrap();
    let rows = convert(&schema(), None, &cols, &mut s, &env()).unwrap();
    let at = |i: usize| rows[0].columns[&stand_in_id(i)].clone();
    assert_eq!(at(0), json!("Ann"));
    assert_eq!(at(1), json!("x\ny"));
    assert_eq!(at(2), json!("a@b.co"));
    assert_eq!(at(3), json!("+1 555"));
    assert_eq!(at(4), json!("https://x.example"));
    assert_eq!(at(5), json!(1234.5));
    assert_eq!(at(6), json!(12.5));
    assert_eq!(at(7), json!(12));
    assert_eq!(at(8), json!(4), "rating rounds to whole stars");
    assert_eq!(at(9), json!(5400), "duration in seconds");
    assert_eq!(at(10), json!("2024-01-31"));
    assert_eq!(at(11), json!(true));
    let open = cols[12].field.choices()[0].0.clone();
    assert_eq!(at(12), json!(open));
    assert_eq!(at(13).as_array().unwrap().len(), 2);
    assert_eq!(rows[1].columns.len(), 1, "blank cells are left out");
}

#[test]
fn a_value_repeated_in_a_unique_field_is_refused_before_writing() {
    let t = table();
    let mut s = sheet("code\nX\nY\nX\n");
    let cols = resolve(
        Some(&t),
        &plan(r#"[{"columnIndex":0,"action":{"kind":"map","targetFieldId":"fld_code"}}]"#),
        &mut s,
    )
    .unwrap();
    let m = message(convert(&schema(), Some(&t), &cols, &mut s, &env()).unwrap_err());
    assert!(m.contains("Data rows 1 and 3 both hold 'X'"), "{m}");
}

#[test]
fn rekey_replaces_stand_in_ids() {
    let mut p = Prepared::default();
    p.columns.insert(stand_in_id(0), json!(1));
    p.columns.insert("fld_keep".into(), json!(2));
    let made = HashMap::from([(stand_in_id(0), "fld_new".to_owned())]);
    let out = rekey(vec![p], &made);
    assert_eq!(out[0].columns["fld_new"], json!(1));
    assert_eq!(out[0].columns["fld_keep"], json!(2));
}
