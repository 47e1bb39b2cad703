//! Property tests: the parsers and the bookmark codec never panic, compiled
//! SQL uses exactly the parameters it pushed, bookmarks round-trip.

use crate::common::*;
use filter_lang::*;
use proptest::prelude::*;
use serde_json::Value;

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop_oneof![
            Just("and"),
            Just("or"),
            Just("Name"),
            Just("Price"),
            Just("Due"),
            Just("At"),
            Just("Stage"),
            Just("Tags"),
            Just("Related"),
            Just("Related Price"),
            Just("Total"),
            Just("is"),
            Just("contains"),
            Just("has_all"),
            Just("empty"),
            Just("before"),
            Just("today"),
            Just("now"),
            Just("2024-01-01"),
            Just("rec_000000000001"),
            Just("New"),
        ]
        .prop_map(|s| Value::String(s.to_owned())),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("join".to_owned()),
                        Just("conditions".to_owned()),
                        Just("field".to_owned()),
                        Just("op".to_owned()),
                        Just("value".to_owned()),
                        Just("relative".to_owned()),
                        Just("offset".to_owned()),
                        Just("unit".to_owned()),
                        ".{0,6}".prop_map(|s| s),
                    ],
                    inner
                ),
                0..5
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Every `$n` in the SQL is within the pushed range, and every pushed
/// parameter is used.
fn check_placeholders(sql: &str, first: usize, params: &Params) {
    let mut used = std::collections::BTreeSet::new();
    let b = sql.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'$' {
            let s = i + 1;
            let mut e = s;
            while e < b.len() && b[e].is_ascii_digit() {
                e += 1;
            }
            let n: usize = sql[s..e].parse().expect("placeholder number");
            assert!(n >= first && n < params.next_index(), "{sql}");
            used.insert(n);
            i = e;
        } else {
            i += 1;
        }
    }
    assert_eq!(used.len(), params.values().len(), "{sql}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_never_panics(v in arb_json()) {
        let s = schema();
        if let Ok(f) = filter::parse_value(&v, &s, &env()) {
            let mut p = Params::new(5);
            let sql = filter::compile(&f, &s, &env(), "r", &mut p);
            check_placeholders(&sql, 5, &p);
        }
        let wrapped = serde_json::json!({"conditions": [v]});
        if let Ok(f) = filter::parse_value(&wrapped, &s, &env()) {
            let mut p = Params::new(1);
            let sql = filter::compile(&f, &s, &env(), "r", &mut p);
            check_placeholders(&sql, 1, &p);
        }
    }

    #[test]
    fn structured_filters_never_panic(seed in any::<u64>()) {
        let mut r = Rng(seed | 1);
        let v = random_filter(&mut r, 1);
        let s = schema();
        match filter::parse_value(&v, &s, &env()) {
            Ok(f) => {
                let mut p = Params::new(2);
                let sql = filter::compile(&f, &s, &env(), "r", &mut p);
                check_placeholders(&sql, 2, &p);
            }
            Err(e) => prop_assert!(e.path.starts_with("filter") && !e.message.is_empty()),
        }
    }

    #[test]
    fn arbitrary_strings_as_filter_text(text in ".{0,40}") {
        let _ = filter::parse_value(&Value::String(text), &schema(), &env());
    }

    #[test]
    fn sort_parser_never_panics(text in "[-,:a-zA-Z0-9_ ]{0,30}|.{0,20}") {
        let s = schema();
        if let Ok(sort) = parse_sort(&text, &s) {
            let mut p = Params::new(1);
            let plan = sort.plan(&s, "r", &mut p);
            prop_assert!(plan.order_by().ends_with("\"r\".\"id\" ASC"));
        }
    }

    #[test]
    fn bookmark_round_trips(
        order in ".{0,20}",
        values in prop::collection::vec(prop::option::of(".{0,20}"), 0..6),
        id in "[a-zA-Z0-9_]{1,64}",
    ) {
        let b = Bookmark { order, values, id };
        let key = BookmarkKey::derive(b"props");
        let text = b.encode(&key);
        prop_assert_eq!(Bookmark::decode(&text, &key, &b.order).unwrap(), b.clone());
        // Any other fingerprint or key refuses it.
        let other = format!("{}x", b.order);
        prop_assert!(Bookmark::decode(&text, &key, &other).is_err());
        prop_assert!(Bookmark::decode(&text, &BookmarkKey::derive(b"other"), &b.order).is_err());
    }

    #[test]
    fn bookmark_decode_never_panics(text in ".{0,80}|[A-Za-z0-9_-]{0,120}") {
        let _ = Bookmark::decode(&text, &BookmarkKey::derive(b"props"), "");
    }

    #[test]
    fn bookmark_of_random_json_never_panics(v in arb_json()) {
        use base64::Engine;
        // Unsigned: refused, whatever it holds.
        let key = BookmarkKey::derive(b"props");
        let text = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        prop_assert!(Bookmark::decode(&text, &key, "").is_err());
        // Signed random values (as only a page would write them): resuming
        // never panics.
        let values = match &v {
            serde_json::Value::Array(a) => a.iter().map(|x| x.as_str().map(str::to_owned)).collect(),
            other => vec![Some(other.to_string())],
        };
        let signed = Bookmark { order: String::new(), values, id: "rec_000000000001".into() }.encode(&key);
        if let Ok(b) = Bookmark::decode(&signed, &key, "") {
            let s = schema();
            let mut p = Params::new(1);
            let plan = parse_sort("Name,-Price,Due,At,Done,Stage", &s).unwrap().plan(&s, "r", &mut p);
            let _ = plan.resume_after(&b, &b.order, &mut p);
        }
    }
}
