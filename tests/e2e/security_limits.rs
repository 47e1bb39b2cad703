//! Issue 13, section 2: sorting and `fields=` are capped, bookmarks are
//! signed and bound to the request they continue, and user lists (link
//! and member cells, filter values) are capped, not de-duplicated in
//! quadratic time.

use serde_json::{json, Value};

use crate::fixtures::{fixture, rec_ids, urlencode, Fx};

/// `n` distinct well-formed record ids (none of them stored).
fn record_ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("rec_{i:012}")).collect()
}

/// The list's bookmark after the first page of `query` (page size 2).
async fn first_bookmark(fx: &Fx, query: &str) -> String {
    let page = fx.list(&format!("{query}&page_size=2")).await;
    page["bookmark"]
        .as_str()
        .unwrap_or_else(|| panic!("a bookmark: {page}"))
        .to_owned()
}

#[tokio::test]
async fn sort_terms_and_fields_entries_are_capped() {
    let fx = fixture().await;
    let api = &fx.person.api;
    // At the cap: fine.
    fx.list(&format!("sort={}", vec!["Title"; 32].join(",")))
        .await;
    for n in [33, 1700] {
        let r = api
            .get(&format!(
                "{}?sort={}",
                fx.records(),
                vec!["-Title"; n].join(",")
            ))
            .await;
        let msg = r.expect_error(400, "bad_request");
        assert!(msg.contains("sort") && msg.contains("at most 32"), "{msg}");
    }
    let r = api
        .post(
            &format!("{}/list", fx.records()),
            json!({"sort": vec!["Points"; 40].join(",")}),
        )
        .await;
    r.expect_error(400, "bad_request");
    // A view's sorts are capped when it is saved.
    let views = format!("/api/tables/{}/views", fx.tasks);
    let sorts =
        |n: usize| -> Vec<Value> { (0..n).map(|_| json!({"fieldId": fx.f["Title"]})).collect() };
    let r = api
        .post(
            &views,
            json!({"name": "Many", "config": {"sorts": sorts(33)}}),
        )
        .await;
    let msg = r.expect_error(400, "bad_request");
    assert!(
        msg.contains("config.sorts") && msg.contains("at most 32"),
        "{msg}"
    );
    let v = api
        .post(
            &views,
            json!({"name": "Many", "config": {"sorts": sorts(32)}}),
        )
        .await;
    let vid = e2e_tests::id(&v.expect_ok()["view"]);
    fx.list(&format!("view={vid}")).await;
    let r = api
        .patch(
            &format!("/api/views/{vid}"),
            json!({"config": {"sorts": sorts(1700)}}),
        )
        .await;
    r.expect_error(400, "bad_request");

    // fields=: at most 500 entries, each field taken once.
    let page = fx
        .list(&format!("fields={}", vec!["Title"; 500].join(",")))
        .await;
    let cells = page["records"][0]["fields"].as_object().unwrap();
    assert_eq!(cells.keys().collect::<Vec<_>>(), ["Title"]);
    let r = api
        .get(&format!(
            "{}?fields={}",
            fx.records(),
            vec!["Title"; 501].join(",")
        ))
        .await;
    let msg = r.expect_error(400, "bad_request");
    assert!(msg.contains("fields") && msg.contains("500"), "{msg}");
    let r = api
        .post(
            &format!("{}/list", fx.records()),
            json!({"fields": vec!["Title"; 501]}),
        )
        .await;
    r.expect_error(400, "bad_request");
}

#[tokio::test]
async fn forged_tampered_and_foreign_bookmarks_are_refused() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let stale = |r: &e2e_tests::Reply| {
        let msg = r.expect_error(400, "bad_request");
        assert!(msg.contains("bookmark"), "{msg}");
        msg
    };

    // The walk itself still works, and a bookmark continues its own list.
    let b = first_bookmark(&fx, "sort=Title").await;
    let next = fx
        .list(&format!(
            "sort=Title&page_size=2&bookmark={}",
            urlencode(&b)
        ))
        .await;
    assert_eq!(rec_ids(&next).len(), 2);

    // An unsigned bookmark in the earlier format, for this very sort: it
    // was accepted; a client could write any values (thousands of them).
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let forged = b64.encode(json!([1, "", ["Ship"], fx.r[0]]).to_string());
    let r = api
        .get(&format!(
            "{}?sort=Title&bookmark={}",
            fx.records(),
            urlencode(&forged)
        ))
        .await;
    let msg = stale(&r);
    assert!(msg.contains("stale or does not match"), "{msg}");
    let values: Vec<Value> = (0..30).map(|_| json!("x")).collect();
    let forged = b64.encode(json!([2, values, fx.r[0]]).to_string() + "0123456789abcdef");
    stale(
        &api.get(&format!(
            "{}?sort={}&bookmark={}",
            fx.records(),
            vec!["Title"; 30].join(","),
            urlencode(&forged)
        ))
        .await,
    );

    // A real bookmark with one byte changed.
    let mut raw = b64.decode(&b).unwrap();
    raw[3] ^= 0x01;
    let tampered = b64.encode(&raw);
    stale(
        &api.get(&format!(
            "{}?sort=Title&bookmark={}",
            fx.records(),
            urlencode(&tampered)
        ))
        .await,
    );

    // The same bookmark under another sort with the same number of terms,
    // another filter, another search, or another table's listing.
    let filter = |v: &str| {
        urlencode(&json!({"conditions": [{"field": "Points", "op": "greater", "value": v.parse::<i64>().unwrap()}]}).to_string())
    };
    let b = first_bookmark(&fx, &format!("sort=Title&filter={}", filter("0"))).await;
    let bm = urlencode(&b);
    for other in [
        format!("sort=-Title&filter={}", filter("0")),
        format!("sort=Points&filter={}", filter("0")),
        format!("sort=Title&filter={}", filter("1")),
        "sort=Title".to_owned(),
        format!("sort=Title&filter={}&search=e", filter("0")),
    ] {
        stale(
            &api.get(&format!("{}?{other}&bookmark={bm}", fx.records()))
                .await,
        );
    }
    // The POST form carries the same parameters and continues it.
    let r = api
        .post(
            &format!("{}/list", fx.records()),
            json!({"sort": "Title", "page_size": 2, "bookmark": b,
                   "filter": {"conditions": [{"field": "Points", "op": "greater", "value": 0}]}}),
        )
        .await;
    r.expect_ok();
    stale(
        &api.get(&format!(
            "/api/tables/{}/records?sort=Name&bookmark={bm}",
            fx.people
        ))
        .await,
    );
    // A records bookmark does not continue the trash listing.
    stale(
        &api.get(&format!("/api/tables/{}/trash?bookmark={bm}", fx.tasks))
            .await,
    );
}

#[tokio::test]
async fn long_lists_in_cells_and_filters_are_capped() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let before = rec_ids(&fx.list("").await);

    // A link cell naming 20,000 distinct records: refused by the cap, not
    // compared pairwise.
    let r = api
        .post(
            &fx.records(),
            json!({"records": [{"fields": {"Owner": record_ids(20_000)}}]}),
        )
        .await;
    let msg = r.expect_error(400, "bad_request");
    assert!(
        msg.contains("Owner") && msg.contains("at most 10000"),
        "{msg}"
    );
    // Repeats of one id are taken once (and it must exist).
    let r = api
        .patch(
            &fx.records(),
            json!({"records": [{"id": fx.r[2], "fields": {"Owner": vec![fx.ann.clone(); 30_000]}}]}),
        )
        .await;
    assert_eq!(
        r.expect_ok()["records"][0]["fields"]["Owner"],
        json!([{"id": fx.ann, "display": "Ann"}])
    );

    // A multi-member cell: at most 1,000 members.
    api.create_field(&fx.tasks, json!({"name": "Team", "type": "multi_member"}))
        .await;
    let many: Vec<String> = (0..1001).map(|i| format!("m{i}@example.test")).collect();
    let r = api
        .post(
            &fx.records(),
            json!({"records": [{"fields": {"Team": many}}]}),
        )
        .await;
    let msg = r.expect_error(400, "bad_request");
    assert!(msg.contains("Team") && msg.contains("1000"), "{msg}");
    let mut ok: Vec<String> = vec!["a@example.test".into(); 5000];
    ok.push("b@example.test".into());
    let r = api
        .post(
            &fx.records(),
            json!({"records": [{"fields": {"Team": ok}}]}),
        )
        .await;
    assert_eq!(
        r.expect_ok()["records"][0]["fields"]["Team"],
        json!(["a@example.test", "b@example.test"])
    );

    // Filter lists: at most 1,000 values.
    let filter = |n: usize| json!({"conditions": [{"field": "Owner", "op": "has_any", "value": record_ids(n)}]});
    let r = api
        .post(
            &format!("{}/list", fx.records()),
            json!({"filter": filter(1000)}),
        )
        .await;
    assert!(rec_ids(r.expect_ok()).is_empty());
    let r = api
        .post(
            &format!("{}/list", fx.records()),
            json!({"filter": filter(1001)}),
        )
        .await;
    let msg = r.expect_error(400, "bad_request");
    assert!(msg.contains("at most 1000 values"), "{msg}");
    let r = api
        .post(
            &format!("{}/list", fx.records()),
            json!({"filter": {"conditions": [{"field": "Status", "op": "any_of", "value": vec!["Doing"; 5000]}]}}),
        )
        .await;
    r.expect_error(400, "bad_request");

    // Only the one accepted record was added.
    let after = rec_ids(&fx.list("").await);
    assert_eq!(after.len(), before.len() + 1);
    assert!(before.iter().all(|r| after.contains(r)));
}
