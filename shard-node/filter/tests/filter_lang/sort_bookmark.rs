//! The sort parameter, ORDER BY, bookmarks and the keyset condition.

use crate::common::*;
use filter_lang::*;

fn terms(s: &str) -> Vec<(String, bool)> {
    let schema = schema();
    parse_sort(s, &schema)
        .unwrap_or_else(|e| panic!("{s}: {e}"))
        .terms
        .iter()
        .map(|t| (schema.fields[t.field].name.clone(), t.desc))
        .collect()
}

#[track_caller]
fn refused(s: &str, path: &str, part: &str) {
    let e = parse_sort(s, &schema()).unwrap_err();
    assert_eq!(e.path, path, "{s}: {e}");
    assert!(e.message.contains(part), "{s}: {:?}", e.message);
}

fn owned(v: &[(&str, bool)]) -> Vec<(String, bool)> {
    v.iter().map(|(n, d)| (n.to_string(), *d)).collect()
}

#[test]
fn forms() {
    assert_eq!(terms(""), owned(&[]));
    assert_eq!(terms("  "), owned(&[]));
    assert_eq!(terms("Name"), owned(&[("Name", false)]));
    assert_eq!(terms("-Name"), owned(&[("Name", true)]));
    assert_eq!(terms("Name:desc"), owned(&[("Name", true)]));
    assert_eq!(terms("Name:DeSc"), owned(&[("Name", true)]));
    assert_eq!(terms("Name:ASC"), owned(&[("Name", false)]));
    assert_eq!(
        terms(&format!("Price, -Due ,{STAGE}:desc,Done,At,Notes")),
        owned(&[
            ("Price", false),
            ("Due", true),
            ("Stage", true),
            ("Done", false),
            ("At", false),
            ("Notes", false)
        ])
    );
}

#[test]
fn refusals() {
    refused("-Name:desc", "sort[0]", "use one form");
    refused("Price,-Name:asc", "sort[1]", "use one form");
    refused("Foo", "sort[0]", "Unknown field 'Foo'.");
    refused("-Foo", "sort[0]", "Unknown field 'Foo'.");
    refused("Dup", "sort[0]", "refer to it by its id");
    refused("Name,,Price", "sort[1]", "Empty sort term");
    refused("Name,", "sort[1]", "Empty sort term");
    for f in [
        "Tags",
        "People",
        "Related",
        "Files",
        "Go",
        "Related Price",
        "Total",
        "Latest",
    ] {
        refused(f, "sort[0]", "cannot be sorted");
        refused(&format!("-{f}"), "sort[0]", "cannot be sorted");
    }
}

#[test]
fn names_that_look_like_forms() {
    let mut s = schema();
    s.fields.push(FieldDef::new(
        "fld_odd000000001",
        "-Odd",
        "single_line_text",
        Storage::Text,
    ));
    s.fields.push(FieldDef::new(
        "fld_odd000000002",
        "Odd:desc",
        "single_line_text",
        Storage::Text,
    ));
    let t = parse_sort("-Odd", &s).unwrap().terms;
    assert_eq!((t[0].field, t[0].desc), (s.fields.len() - 2, false));
    let t = parse_sort("Odd:desc", &s).unwrap().terms;
    assert_eq!((t[0].field, t[0].desc), (s.fields.len() - 1, false));
    let t = parse_sort("--Odd", &s).unwrap().terms;
    assert_eq!((t[0].field, t[0].desc), (s.fields.len() - 2, true));
}

#[test]
fn view_sorts() {
    let s = schema();
    let v = serde_json::json!([{"fieldId": PRICE, "dir": "desc"}, {"fieldId": NAME}]);
    let sort = Sort::from_view_config(&v, &s).unwrap();
    assert_eq!(sort.terms.len(), 2);
    assert!(sort.terms[0].desc && !sort.terms[1].desc);
    assert!(Sort::from_view_config(&serde_json::json!([{"fieldId": TAGS}]), &s).is_err());
    assert!(Sort::from_view_config(&serde_json::json!({}), &s).is_err());
}

#[test]
fn order_by_sql() {
    let s = schema();
    let sort = parse_sort("Name,-Price,Stage:desc,Done,At", &s).unwrap();
    let mut p = Params::new(3);
    let plan = sort.plan(&s, "r", &mut p);
    let st = format!("\"r\".\"{STAGE}\"");
    let stage_key = format!(
        "(CASE WHEN {st} IS NULL THEN NULL ELSE COALESCE(array_position($3::text[], {st}), 2147483647) END)"
    );
    assert_eq!(
        plan.order_by(),
        format!(
            "left(\"r\".\"{NAME}\", 500) ASC NULLS LAST, \"r\".\"{NAME}\" ASC NULLS LAST, \"r\".\"{PRICE}\" DESC NULLS FIRST, {stage_key} DESC NULLS FIRST, \
             \"r\".\"{DONE}\" ASC NULLS LAST, \"r\".\"{AT}\" ASC NULLS LAST, \"r\".\"id\" ASC"
        )
    );
    assert_eq!(
        p.values(),
        &[SqlValue::TextArray(vec![
            "stg00001".into(),
            "stg00002".into(),
            "stg00003".into()
        ])]
    );
    let cols = plan.bookmark_columns();
    assert_eq!(cols[0], format!("\"r\".\"{NAME}\""));
    assert_eq!(cols[1], format!("(\"r\".\"{PRICE}\")::text"));
    assert_eq!(cols[2], format!("({stage_key})::text"));
    assert!(cols[4].starts_with("to_char(\"r\".\""));
    // No sort: id only.
    let mut p = Params::new(1);
    assert_eq!(
        Sort::default().plan(&s, "r", &mut p).order_by(),
        "\"r\".\"id\" ASC"
    );
}

#[test]
fn keyset_sql() {
    let s = schema();
    let sort = parse_sort("Name,-Price", &s).unwrap();
    let mut p = Params::new(1);
    let plan = sort.plan(&s, "r", &mut p);
    let (n, pr) = (format!("\"r\".\"{NAME}\""), format!("\"r\".\"{PRICE}\""));
    let bm = Bookmark {
        order: String::new(),
        values: vec![Some("b".into()), Some("2.50".into())],
        id: "rec_000000000009".into(),
    };
    // A text key orders by (its 500-character prefix, itself).
    let (ln, lv) = (format!("left({n}, 500)"), "left($1::text, 500)");
    let any = format!(
        "((({ln} > {lv} OR ({ln} = {lv} AND {n} > $1::text)) OR {n} IS NULL)) \
         OR ({n} = $1::text AND {pr} < $2::numeric) \
         OR ({n} = $1::text AND {pr} = $2::numeric AND \"r\".\"id\" > $3::text)"
    );
    // Ascending first key from a value: the range [v, last value] bounded so
    // an index (on the prefix) seeks to it, then the NULLs (which follow
    // every value).
    let resume = plan.resume(&bm, "", &mut p).unwrap();
    assert_eq!(
        resume,
        Resume {
            seek: format!("({ln} >= {lv} AND ({any}))"),
            then: Some(format!("({ln} IS NULL)")),
        }
    );
    let mut p = Params::new(1);
    let plan = sort.plan(&s, "r", &mut p);
    let sql = plan.resume_after(&bm, "", &mut p).unwrap();
    assert_eq!(
        sql,
        format!("(({ln} >= {lv} AND ({any})) OR ({ln} IS NULL))")
    );
    // NULLs: ascending NULL has nothing after it but later terms (only the
    // NULL part remains); descending NULL is followed by every non-NULL value.
    let bm = Bookmark {
        order: String::new(),
        values: vec![None, None],
        id: "rec_000000000009".into(),
    };
    let mut p = Params::new(1);
    let resume = plan.resume(&bm, "", &mut p).unwrap();
    assert_eq!(
        resume.seek,
        format!("({ln} IS NULL AND (({n} IS NULL AND {pr} IS NOT NULL) OR ({n} IS NULL AND {pr} IS NULL AND \"r\".\"id\" > $1::text)))")
    );
    assert_eq!(resume.then, None);
    let plan = parse_sort("-Name", &s).unwrap().plan(&s, "r", &mut p);
    let bm = Bookmark {
        values: vec![None],
        ..bm
    };
    let mut p = Params::new(1);
    let resume = plan.resume(&bm, "", &mut p).unwrap();
    assert_eq!(
        resume,
        Resume {
            seek: format!("({ln} IS NULL AND (({n} IS NOT NULL) OR ({n} IS NULL AND \"r\".\"id\" > $1::text)))"),
            then: Some(format!("({ln} IS NOT NULL)")),
        }
    );
    // A checkbox is NULL until written: its never-set cells come after
    // `false` and `true` ascending.
    let plan = parse_sort("Done", &s).unwrap().plan(&s, "r", &mut p);
    let bm = Bookmark {
        values: vec![Some("false".into())],
        ..bm
    };
    let done = format!("\"r\".\"{DONE}\"");
    assert_eq!(
        plan.resume(&bm, "", &mut p).unwrap().then,
        Some(format!("({done} IS NULL)"))
    );
}

#[test]
fn page_sql_reads_the_null_part_only_when_the_seek_comes_short() {
    let s = schema();
    let mut p = Params::new(1);
    let plan = parse_sort("Name", &s).unwrap().plan(&s, "r", &mut p);
    let n = format!("\"r\".\"{NAME}\"");
    let cols = format!("r.id, {n} AS \"__fl_k0\", \"r\".\"id\" AS \"__fl_id\"");
    let order = format!("left({n}, 500) ASC NULLS LAST, {n} ASC NULLS LAST, \"r\".\"id\" ASC");
    assert_eq!(
        plan.page_sql("r.id", "t AS r", "live", None, "11"),
        format!("SELECT {cols} FROM t AS r WHERE live ORDER BY {order} LIMIT 11")
    );
    let resume = Resume {
        seek: "SEEK".into(),
        then: None,
    };
    assert_eq!(
        plan.page_sql("r.id", "t AS r", "live", Some(&resume), "11"),
        format!("SELECT {cols} FROM t AS r WHERE live AND SEEK ORDER BY {order} LIMIT 11")
    );
    let resume = Resume {
        seek: "SEEK".into(),
        then: Some("THEN".into()),
    };
    assert_eq!(
        plan.page_sql("r.id", "t AS r", "live", Some(&resume), "11"),
        format!(
            "WITH \"__fl_a\" AS MATERIALIZED (SELECT {cols} FROM t AS r WHERE live AND SEEK ORDER BY {order} LIMIT 11) \
             SELECT * FROM (SELECT * FROM \"__fl_a\" UNION ALL (SELECT {cols} FROM t AS r \
             WHERE (SELECT count(*) FROM \"__fl_a\") < 11 AND live AND THEN ORDER BY {order} LIMIT 11)) AS \"__fl_p\" \
             ORDER BY left(\"__fl_p\".\"__fl_k0\", 500) ASC NULLS LAST, \"__fl_p\".\"__fl_k0\" ASC NULLS LAST, \"__fl_p\".\"__fl_id\" ASC LIMIT 11"
        )
    );
}

#[test]
fn keyset_sql_descending_first_key_has_a_seek_bound() {
    let s = schema();
    let sort = parse_sort("-Price", &s).unwrap();
    let mut p = Params::new(1);
    let plan = sort.plan(&s, "r", &mut p);
    let pr = format!("\"r\".\"{PRICE}\"");
    let bm = Bookmark {
        order: String::new(),
        values: vec![Some("2.50".into())],
        id: "rec_000000000009".into(),
    };
    let sql = plan.resume_after(&bm, "", &mut p).unwrap();
    assert_eq!(
        sql,
        format!(
            "({pr} <= $1::numeric AND (({pr} < $1::numeric) \
             OR ({pr} = $1::numeric AND \"r\".\"id\" > $2::text)))"
        )
    );
}

#[test]
fn bookmark_mismatches() {
    let s = schema();
    let mut p = Params::new(1);
    let plan = parse_sort("Name,-Price", &s).unwrap().plan(&s, "r", &mut p);
    let good = Bookmark {
        order: "view:viw_1".into(),
        values: vec![None, Some("1".into())],
        id: "rec_000000000009".into(),
    };
    let key = BookmarkKey::derive(b"test secret");
    let decoded = Bookmark::decode(&good.encode(&key), &key, "view:viw_1").unwrap();
    assert!(plan.resume_after(&decoded, "view:viw_1", &mut p).is_ok());
    let e = plan
        .resume_after(&decoded, "view:viw_2", &mut p)
        .unwrap_err();
    assert!(e.message.contains("different view"), "{e}");
    let e = plan.resume_after(&decoded, "", &mut p).unwrap_err();
    assert!(e.message.contains("different view"), "{e}");
    let three = Bookmark {
        values: vec![None, None, None],
        ..good.clone()
    };
    let e = plan.resume_after(&three, "view:viw_1", &mut p).unwrap_err();
    assert!(
        e.message
            .contains("3 sort term(s); this request sorts by 2"),
        "{e}"
    );
    assert_eq!(e.path, "bookmark");
    for bad in ["abc", "1e", "--1", "1.2.3", "", "1e99999", "0x10"] {
        let b = Bookmark {
            values: vec![None, Some(bad.into())],
            ..good.clone()
        };
        assert!(
            plan.resume_after(&b, "view:viw_1", &mut p).is_err(),
            "{bad}"
        );
    }
    for ok in [
        "1",
        "-1.50",
        ".5",
        "1e5",
        "NaN",
        "Infinity",
        "-Infinity",
        "123456789012345678901234567890",
    ] {
        let b = Bookmark {
            values: vec![None, Some(ok.into())],
            ..good.clone()
        };
        assert!(plan.resume_after(&b, "view:viw_1", &mut p).is_ok(), "{ok}");
    }
    // Typed checks for the other key kinds.
    let plan = parse_sort("Due,At,Done,Stage", &s)
        .unwrap()
        .plan(&s, "r", &mut p);
    let with = |v: [&str; 4]| Bookmark {
        order: String::new(),
        values: v.iter().map(|s| Some(s.to_string())).collect(),
        id: "rec_000000000009".into(),
    };
    let mut p = Params::new(1);
    assert!(plan
        .resume_after(
            &with(["2024-01-01", "2024-01-01T10:00:00.000001Z", "true", "3"]),
            "",
            &mut p
        )
        .is_ok());
    for bad in [
        ["2024-13-01", "2024-01-01T10:00:00Z", "true", "3"],
        ["2024-01-01", "2024-01-01 10:00", "true", "3"],
        ["2024-01-01", "2024-01-01T10:00:00Z", "yes", "3"],
        ["2024-01-01", "2024-01-01T10:00:00Z", "true", "3.5"],
    ] {
        assert!(
            plan.resume_after(&with(bad), "", &mut p).is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn text_shown_as_select_sorts_by_its_value_order() {
    let mut s = schema();
    let mut f = FieldDef::new("fld_formula00001", "Grade", "formula_text", Storage::Text);
    f.value_order = Some(vec!["Low".into(), "High".into()]);
    s.fields.push(f);
    let mut p = Params::new(1);
    let plan = parse_sort("-Grade", &s).unwrap().plan(&s, "r", &mut p);
    assert_eq!(plan.keys[0].ty, sort::KeyType::Int);
    assert!(plan
        .order_by()
        .starts_with("(CASE WHEN \"r\".\"fld_formula00001\" IS NULL"));
    assert_eq!(
        p.values(),
        &[SqlValue::TextArray(vec!["Low".into(), "High".into()])]
    );
}

#[test]
fn filter_reports_the_fields_it_reads() {
    let f = parse(&serde_json::json!({"conditions": [
        {"field": "Price", "op": "empty"},
        {"conditions": [{"field": PRICE, "op": "not_empty"}, {"field": "Name", "op": "empty"}]}
    ]}))
    .unwrap();
    let s = schema();
    let names: Vec<&str> = f
        .fields()
        .iter()
        .map(|&i| s.fields[i].name.as_str())
        .collect();
    assert_eq!(names, ["Price", "Name"]);
}

#[test]
fn sorts_are_capped() {
    let s = schema();
    let at_cap = vec!["Name"; sort::MAX_SORT_TERMS].join(",");
    assert!(parse_sort(&at_cap, &s).is_ok());
    let over = vec!["Name"; sort::MAX_SORT_TERMS + 1].join(",");
    let e = parse_sort(&over, &s).unwrap_err();
    assert_eq!(e.path, "sort");
    assert!(e.message.contains("at most 32 terms"), "{e}");
    // 1,700 terms (a 500 before the cap) are refused before any is resolved.
    let e = parse_sort(&vec!["Nope"; 1700].join(","), &s).unwrap_err();
    assert!(e.message.contains("this one has 1700"), "{e}");
    let view: Vec<serde_json::Value> = (0..=sort::MAX_SORT_TERMS)
        .map(|_| serde_json::json!({"fieldId": NAME}))
        .collect();
    let e = Sort::from_view_config(&serde_json::Value::Array(view), &s).unwrap_err();
    assert_eq!(e.path, "view.sorts");
}

#[test]
fn sort_fingerprints_name_ids_and_directions() {
    let s = schema();
    let a = parse_sort("Name,-Price", &s).unwrap().fingerprint(&s);
    assert_eq!(a, format!("{NAME}+,{PRICE}-,"));
    let b = parse_sort("Name,Price", &s).unwrap().fingerprint(&s);
    assert_ne!(a, b);
    assert_eq!(Sort::default().fingerprint(&s), "");
}

#[test]
fn a_bookmark_of_another_sort_is_refused() {
    let s = schema();
    let key = BookmarkKey::derive(b"test secret");
    let order = |sort: &str| {
        bookmark::fingerprint(&[
            "records",
            "tbl_1",
            "",
            "sort",
            &parse_sort(sort, &s).unwrap().fingerprint(&s),
        ])
    };
    let b = Bookmark {
        order: order("Name,-Price"),
        values: vec![Some("b".into()), Some("2".into())],
        id: "rec_000000000009".into(),
    };
    let text = b.encode(&key);
    assert_eq!(
        Bookmark::decode(&text, &key, &order("Name,-Price")).unwrap(),
        b
    );
    // Same number of terms, another sort: detected.
    for other in ["Name,Price", "-Name,-Price", "Price,Name", "Name"] {
        let e = Bookmark::decode(&text, &key, &order(other)).unwrap_err();
        assert_eq!(e, bookmark::mismatched(), "{other}");
    }
}
