//! Part B, Records, through the real router: every read parameter and its
//! 400s, filters per storage kind, sorting with empties, the bookmark walk,
//! writes per costume, all-or-nothing batches, PATCH rules and the 409,
//! upsert, pressing a button.

use std::collections::HashSet;

use cluster_protocol::control::Role;
use e2e_tests::{database_postgres, id, Person};
use serde_json::{json, Value};

use crate::fixtures::{fixture, rec_ids, record_in, urlencode};

/// The cells of fixture record `i`, read on their own.
async fn cells_of(fx: &crate::fixtures::Fx, i: usize) -> Value {
    let one = fx
        .person
        .api
        .get(&format!("{}/{}", fx.records(), fx.r[i]))
        .await;
    one.expect_ok()["record"]["fields"].clone()
}

#[tokio::test]
async fn writes_read_back_in_every_costume_shape() {
    let fx = fixture().await;
    let one = fx
        .person
        .api
        .get(&format!("{}/{}", fx.records(), fx.r[0]))
        .await;
    let body = one.expect_ok();
    let rec = &body["record"];
    let cells = &rec["fields"];
    assert_eq!(cells["Title"], "Write spec");
    assert_eq!(cells["Points"], 5);
    assert_eq!(cells["Due"], "2026-01-10");
    assert_eq!(cells["Status"], "Doing");
    assert_eq!(cells["Done"], true);
    assert_eq!(cells["Owner"], json!([{"id": fx.ann, "display": "Ann"}]));
    assert_eq!(cells["Owner Name"], json!(["Ann"]));
    assert_eq!(cells["Double"], 10);
    assert_eq!(cells["Go"], Value::Null);
    assert_eq!(body["field_ids"]["Title"], json!(fx.f["Title"]));
    // Unset cells: null; an unset link is []; a checkbox written false
    // reads false, one never written null (records_checkbox.rs).
    let ship = fx
        .person
        .api
        .get(&format!("{}/{}", fx.records(), fx.r[2]))
        .await;
    let ship = &ship.expect_ok()["record"]["fields"];
    assert_eq!(
        (
            ship["Points"].clone(),
            ship["Owner"].clone(),
            ship["Done"].clone()
        ),
        (Value::Null, json!([]), json!(false))
    );
    assert_eq!(cells_of(&fx, 1).await["Done"], Value::Null);

    // Refusals, each a 400 naming the field, nothing written.
    let path = fx.records();
    for (cells, needle) in [
        (json!({"Due": "2026-02-30"}), "Due"),
        (json!({"Status": "Nope"}), "Nope"),
        (json!({"Points": "3"}), "Points"),
        (json!({"Double": 4}), "Double"),
        (json!({"Owner Name": "x"}), "Owner Name"),
        (json!({"Go": "x"}), "Go"),
        (json!({"Owner": ["rec_nosuchrecord"]}), "Owner"),
        (json!({"Nope": 1}), "Nope"),
    ] {
        let r = fx
            .person
            .api
            .post(&path, json!({"records": [{"fields": cells}]}))
            .await;
        let msg = r.expect_error(400, "bad_request");
        assert!(msg.contains(needle), "{msg}");
    }
    // The same field twice in one record (name and id).
    let r = fx
        .person
        .api
        .post(
            &path,
            json!({"records": [{"fields": {"Points": 1, fx.f["Points"].clone(): 2}}]}),
        )
        .await;
    r.expect_error(400, "bad_request");
    // A bad third row writes nothing.
    let before = rec_ids(&fx.list("page_size=1000").await).len();
    let r = fx
        .person
        .api
        .post(
            &path,
            json!({"records": [{"fields": {"Title": "ok 1"}}, {"fields": {"Title": "ok 2"}}, {"fields": {"Points": "x"}}]}),
        )
        .await;
    assert!(r.expect_error(400, "bad_request").contains("records[2]"));
    assert_eq!(rec_ids(&fx.list("page_size=1000").await).len(), before);
    // Over 100 records.
    let many: Vec<Value> = (0..101).map(|_| json!({"fields": {}})).collect();
    fx.person
        .api
        .post(&path, json!({"records": many}))
        .await
        .expect_error(400, "bad_request");
    // Unique: 400 naming the field by name.
    let r = fx
        .person
        .api
        .post(&path, json!({"records": [{"fields": {"Code": "A1"}}]}))
        .await;
    let msg = r.expect_error(400, "bad_request");
    assert!(msg.contains("'Code'"), "{msg}");
    assert_eq!(rec_ids(&fx.list("page_size=1000").await).len(), before);
    // Reply options on writes: key_by=id with the full companion map.
    let r = fx
        .person
        .api
        .post(
            &format!("{path}?key_by=id&cell_format=ids"),
            json!({"records": [{"fields": {"Status": "Done"}}]}),
        )
        .await;
    let body = r.expect_ok();
    let status_id = fx.f["Status"].clone();
    assert!(
        body["records"][0]["fields"][&status_id]
            .as_str()
            .unwrap()
            .len()
            == 8
    );
    assert_eq!(body["field_names"].as_object().unwrap().len(), fx.f.len());
}

#[tokio::test]
async fn read_parameters_and_their_400s() {
    let fx = fixture().await;
    for q in [
        "page_size=0",
        "page_size=1001",
        "page_size=abc",
        "cell_format=raw",
        "key_by=slug",
        "flat=yes",
        "filter=%7Bnot%20json",
        "filter=%5B1%5D",
        "filter=%7B%22conditions%22%3A%5B%7B%22field%22%3A%22Nope%22%2C%22op%22%3A%22is%22%2C%22value%22%3A1%7D%5D%7D",
        "sort=Owner",
        "sort=Owner%20Name",
        "sort=-Title:desc",
        "sort=Nope",
        "bookmark=garbage",
        "fields=Nope",
    ] {
        let r = fx.person.api.get(&format!("{}?{q}", fx.records())).await;
        r.expect_error(400, "bad_request");
    }
    // Defaults: every field keyed by name with field_ids; no bookmark on the last page.
    let all = fx.list("").await;
    assert_eq!(rec_ids(&all).len(), 5);
    assert!(all.get("bookmark").is_none());
    assert_eq!(all["field_ids"].as_object().unwrap().len(), fx.f.len());
    // key_by=id + cell_format=ids.
    let r = fx
        .list("key_by=id&cell_format=ids&fields=Status,Title")
        .await;
    let status = fx.f["Status"].clone();
    assert_eq!(r["field_names"].as_object().unwrap().len(), 2);
    let rec = record_in(&r, &fx.r[0]);
    assert_ne!(rec["fields"][&status], "Doing");
    assert_eq!(rec["fields"].as_object().unwrap().len(), 2);
    // flat: cells on the record, internal keys win.
    let r = fx.list("flat=true&fields=Title").await;
    let rec = record_in(&r, &fx.r[0]);
    assert_eq!(rec["Title"], "Write spec");
    assert!(rec.get("fields").is_none() && rec.get("created_at").is_some());
    // link_display_cap on GET; the POST route ignores it.
    let r = fx.list("fields=Owner&link_display_cap=1").await;
    let rec = record_in(&r, &fx.r[3]);
    assert_eq!(rec["fields"]["Owner"][0]["display"], "Ann");
    assert_eq!(
        rec["fields"]["Owner"][1],
        json!({"id": fx.bob, "display": null})
    );
    // search: case-insensitive over text columns, % escaped.
    let r = fx.list("search=SPEC").await;
    assert_eq!(rec_ids(&r), vec![fx.r[0].clone()]);
    let r = fx.list("search=50%25").await;
    assert_eq!(rec_ids(&r), vec![fx.r[0].clone()]);
    // POST list: the same parameters in a body (filter as object or JSON string).
    let path = format!("{}/list", fx.records());
    let body = json!({"filter": {"conditions": [{"field": "Points", "op": "greater", "value": 4}]}, "sort": "-Points", "key_by": "id", "page_size": 1});
    let r = fx.person.api.post(&path, body).await;
    let r = r.expect_ok();
    assert_eq!(rec_ids(r), vec![fx.r[3].clone()]);
    assert!(r["bookmark"].is_string());
    let r = fx
        .person
        .api
        .post(&path, json!({"filter": "{\"conditions\":[{\"field\":\"Title\",\"op\":\"is\",\"value\":\"Ship\"}]}"}))
        .await;
    assert_eq!(rec_ids(r.expect_ok()), vec![fx.r[2].clone()]);
    fx.person
        .api
        .post(&path, json!({"page_size": 0}))
        .await
        .expect_error(400, "bad_request");
    fx.person
        .api
        .post(&path, json!({"flat": "maybe"}))
        .await
        .expect_error(400, "bad_request");
}

#[tokio::test]
async fn filters_per_storage_kind() {
    let fx = fixture().await;
    let c = |field: &str, op: &str, value: Value| json!({"conditions": [{"field": field, "op": op, "value": value}]});
    // Text: contains escapes % and _; is_not and empty cover empty cells.
    assert_eq!(
        fx.matching(c("Note", "contains", json!("50%"))).await,
        vec![0]
    );
    assert_eq!(
        fx.matching(c("Title", "contains", json!("_"))).await,
        vec![4]
    );
    assert_eq!(
        fx.matching(c("Title", "contains", json!("SHIP"))).await,
        vec![2]
    );
    assert_eq!(
        fx.matching(c("Title", "is_not", json!("Review"))).await,
        vec![0, 2, 3, 4]
    );
    assert_eq!(
        fx.matching(json!({"conditions": [{"field": "Title", "op": "empty"}]}))
            .await,
        vec![3]
    );
    assert_eq!(
        fx.matching(c("Note", "not_contains", json!("done"))).await,
        vec![1, 2, 3, 4]
    );
    // Number.
    assert_eq!(
        fx.matching(c("Points", "greater", json!(3))).await,
        vec![0, 3]
    );
    assert_eq!(
        fx.matching(c("Points", "less_or_equal", json!(3))).await,
        vec![1, 4]
    );
    assert_eq!(
        fx.matching(json!({"conditions": [{"field": "Points", "op": "empty"}]}))
            .await,
        vec![2]
    );
    // Date.
    assert_eq!(
        fx.matching(c("Due", "before", json!("2026-01-15"))).await,
        vec![0, 4]
    );
    assert_eq!(
        fx.matching(c("Due", "on_or_after", json!("2026-02-01")))
            .await,
        vec![1, 3]
    );
    // Checkbox: false matches never-set cells.
    assert_eq!(
        fx.matching(c("Done", "is", json!(false))).await,
        vec![1, 2, 3, 4]
    );
    assert_eq!(fx.matching(c("Done", "is", json!(true))).await, vec![0]);
    // Single select by name; an unknown name is the sentinel.
    assert_eq!(
        fx.matching(c("Status", "is", json!("To do"))).await,
        vec![1, 4]
    );
    assert_eq!(
        fx.matching(c("Status", "any_of", json!(["Doing", "Done"])))
            .await,
        vec![0, 3]
    );
    assert_eq!(
        fx.matching(c("Status", "is", json!("Gone"))).await,
        Vec::<usize>::new()
    );
    assert_eq!(
        fx.matching(c("Status", "is_not", json!("Gone"))).await,
        vec![0, 1, 2, 3, 4]
    );
    // Link and lookup.
    assert_eq!(
        fx.matching(c("Owner", "has_any", json!([fx.bob]))).await,
        vec![1, 3]
    );
    assert_eq!(
        fx.matching(c("Owner", "is_exactly", json!([fx.bob, fx.ann])))
            .await,
        vec![3]
    );
    assert_eq!(
        fx.matching(json!({"conditions": [{"field": "Owner", "op": "empty"}]}))
            .await,
        vec![2, 4]
    );
    assert_eq!(
        fx.matching(c("Owner Name", "contains", json!("ann"))).await,
        vec![0, 3]
    );
    // Formula (number) and field ids.
    assert_eq!(
        fx.matching(c(&fx.f["Double"], "greater", json!(9))).await,
        vec![0, 3]
    );
    // Groups: or with a nested and.
    let g = json!({"join": "or", "conditions": [
        {"field": "Points", "op": "less", "value": 2},
        {"join": "and", "conditions": [{"field": "Title", "op": "is", "value": "Review"}, {"field": "Done", "op": "is", "value": false}]}
    ]});
    assert_eq!(fx.matching(g).await, vec![1, 4]);
    // Refusals.
    for bad in [
        c("Points", "is", json!("3")),
        c("Points", "contains", json!(3)),
        c("Owner", "has_any", json!(["Ann"])),
        json!({"join": "xor", "conditions": []}),
        json!({"conditions": {"field": "Points"}}),
        json!({"conditions": [{"conditions": [{"conditions": []}]}]}),
        c("Due", "is", json!({"relative": "today", "offset": 400})),
    ] {
        let q = urlencode(&bad.to_string());
        let r = fx
            .person
            .api
            .get(&format!("{}?filter={q}", fx.records()))
            .await;
        r.expect_error(400, "bad_request");
    }
    // 201 nodes is refused.
    let many: Vec<Value> = (0..200)
        .map(|i| json!({"field": "Points", "op": "is", "value": i}))
        .collect();
    let path = format!("{}/list", fx.records());
    let r = fx
        .person
        .api
        .post(
            &path,
            json!({"filter": {"join": "or", "conditions": many[..199]}}),
        )
        .await;
    assert_eq!(rec_ids(r.expect_ok()).len(), 4, "200 nodes are allowed");
    let r = fx
        .person
        .api
        .post(&path, json!({"filter": {"join": "or", "conditions": many}}))
        .await;
    r.expect_error(400, "bad_request");
}

#[tokio::test]
async fn sorting_with_empties_and_the_bookmark_walk() {
    let fx = fixture().await;
    let order = |reply: &Value| -> Vec<usize> {
        rec_ids(reply)
            .iter()
            .map(|i| fx.r.iter().position(|x| x == i).unwrap())
            .collect()
    };
    assert_eq!(
        order(&fx.list("sort=Points").await),
        vec![4, 1, 0, 3, 2],
        "empty last ascending"
    );
    assert_eq!(
        order(&fx.list("sort=-Points").await),
        vec![2, 3, 0, 1, 4],
        "empty first descending"
    );
    assert_eq!(
        order(&fx.list("sort=Points:DESC").await),
        vec![2, 3, 0, 1, 4]
    );
    assert_eq!(order(&fx.list("sort=Due").await), vec![4, 0, 1, 3, 2]);
    // The empty string is a value (first ascending), not a blank.
    assert_eq!(order(&fx.list("sort=Title").await)[0], 3);
    // Single select in choice order (To do, Doing, Done), empty last.
    let s = order(&fx.list("sort=Status,Title").await);
    assert_eq!(s, vec![4, 1, 0, 3, 2]);

    // Walk 45 records of another table in pages of 4 under a sort with ties and empties.
    let api = &fx.person.api;
    let t = id(&api.create_table(&fx.db, "Many").await);
    api.create_field(&t, json!({"name": "N", "type": "number"}))
        .await;
    api.create_field(&t, json!({"name": "Label", "type": "single_line_text"}))
        .await;
    let recs: Vec<Value> = (0..45)
        .map(|i| json!({"fields": {"N": if i % 5 == 0 { Value::Null } else { json!(i % 7) }, "Label": format!("L{}", i % 3)}}))
        .collect();
    let made = api
        .post(
            &format!("/api/tables/{t}/records"),
            json!({"records": recs}),
        )
        .await;
    let all: HashSet<String> = rec_ids(made.expect_ok()).into_iter().collect();
    // Every page of `q` in pages of 4, following the bookmarks.
    let table = &t;
    let walk = |q: String| async move {
        let mut seen: Vec<String> = Vec::new();
        let mut bookmark: Option<String> = None;
        loop {
            let mut q = format!("page_size=4&{q}");
            if let Some(b) = &bookmark {
                q.push_str(&format!("&bookmark={}", urlencode(b)));
            }
            let page = api.get(&format!("/api/tables/{table}/records?{q}")).await;
            let page = page.expect_ok();
            seen.extend(rec_ids(page));
            match page.get("bookmark") {
                Some(Value::String(b)) => bookmark = Some(b.clone()),
                None => break,
                Some(other) => panic!("bookmark must be absent or a string: {other}"),
            }
            assert!(seen.len() <= 45);
        }
        seen
    };
    for sort in ["-N", "Label,N", ""] {
        let seen = walk(format!("sort={sort}")).await;
        assert_eq!(seen.len(), 45, "sort {sort}");
        assert_eq!(
            seen.iter().cloned().collect::<HashSet<_>>(),
            all,
            "sort {sort}: every record exactly once"
        );
        // Filtered and searched pages (read in two statements) give the
        // matching records of the whole order, in that order.
        let whole = api
            .get(&format!(
                "/api/tables/{t}/records?page_size=100&sort={sort}"
            ))
            .await;
        let whole = whole.expect_ok()["records"].as_array().unwrap().clone();
        let ids_where = |keep: &dyn Fn(&Value) -> bool| -> Vec<String> {
            whole
                .iter()
                .filter(|r| keep(&r["fields"]))
                .map(|r| r["id"].as_str().unwrap().to_string())
                .collect()
        };
        let filter = urlencode(r#"{"conditions":[{"field":"N","op":"greater","value":2}]}"#);
        let matching = ids_where(&|f| f["N"].as_f64().is_some_and(|n| n > 2.0));
        assert!(matching.len() > 8, "more than two pages match");
        let filtered = walk(format!("sort={sort}&filter={filter}")).await;
        assert_eq!(filtered, matching, "sort {sort} with a filter");
        let found = ids_where(&|f| f["Label"] == "L1");
        assert_eq!(found.len(), 15);
        let searched = walk(format!("sort={sort}&search=l1")).await;
        assert_eq!(searched, found, "sort {sort} with a search");
    }
    // A bookmark continued under a different number of sort terms is 400.
    let page = api
        .get(&format!("/api/tables/{t}/records?page_size=4&sort=-N"))
        .await;
    let b = urlencode(page.expect_ok()["bookmark"].as_str().unwrap());
    let r = api
        .get(&format!(
            "/api/tables/{t}/records?page_size=4&sort=Label,N&bookmark={b}"
        ))
        .await;
    r.expect_error(400, "bad_request");
    // A full last page has no bookmark (fetch one more than the page).
    let page = api
        .get(&format!("/api/tables/{t}/records?page_size=45"))
        .await;
    assert!(page.expect_ok().get("bookmark").is_none());
}

#[tokio::test]
async fn patch_rules_and_the_409_with_records() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let path = fx.records();
    let cur = api.get(&format!("{path}/{}", fx.r[1])).await;
    let stamp = cur.expect_ok()["record"]["updated_at"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = api
        .patch(&path, json!({"records": [{"id": fx.r[1], "fields": {"Points": 4, "Status": "Done"}, "if_updated_at": stamp}]}))
        .await;
    let body = r.expect_ok();
    assert_eq!(body["records"][0]["fields"]["Points"], 4);
    assert_eq!(
        body["records"][0]["fields"]["Title"], "Review",
        "untouched cells stay"
    );
    // Stale if_updated_at: 409 with the stale record as it is now; nothing changes.
    let r = api
        .patch(
            &path,
            json!({"records": [
                {"id": fx.r[0], "fields": {"Points": 99}},
                {"id": fx.r[1], "fields": {"Points": 98}, "if_updated_at": stamp}
            ]}),
        )
        .await;
    r.expect_error(409, "conflict");
    let stale = r.body["error"]["records"]
        .as_array()
        .expect("records in the 409");
    assert_eq!(stale.len(), 1);
    assert_eq!(id(&stale[0]), fx.r[1]);
    assert_eq!(stale[0]["fields"]["Points"], 4);
    let now = api.get(&format!("{path}/{}", fx.r[0])).await;
    assert_eq!(now.expect_ok()["record"]["fields"]["Points"], 5);
    // Same id twice: 400. Unknown record: 404. Trashed record: 400.
    let r = api
        .patch(
            &path,
            json!({"records": [{"id": fx.r[0]}, {"id": fx.r[0]}]}),
        )
        .await;
    r.expect_error(400, "bad_request");
    let r = api.patch(&path, json!({"records": [{"id": fx.r[0], "fields": {"Points": 1}}, {"id": "rec_000000000000"}]})).await;
    r.expect_error(404, "not_found");
    api.delete_with(&path, json!({"records": [fx.r[2]]}))
        .await
        .expect_ok();
    let r = api.patch(&path, json!({"records": [{"id": fx.r[0], "fields": {"Points": 1}}, {"id": fx.r[2], "fields": {"Points": 1}}]})).await;
    r.expect_error(400, "bad_request");
    let now = api.get(&format!("{path}/{}", fx.r[0])).await;
    assert_eq!(
        now.expect_ok()["record"]["fields"]["Points"],
        5,
        "nothing in the batch changed"
    );
    // Link writes replace the list and show at the other end.
    let r = api
        .patch(
            &path,
            json!({"records": [{"id": fx.r[0], "fields": {"Owner": [fx.bob]}}]}),
        )
        .await;
    assert_eq!(
        r.expect_ok()["records"][0]["fields"]["Owner Name"],
        json!(["Bob"])
    );
}

#[tokio::test]
async fn upsert_matches_creates_and_refuses() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let t = id(&api.create_table(&fx.db, "Contacts").await);
    let email = id(&api
        .create_field(&t, json!({"name": "Email", "type": "email"}))
        .await);
    api.create_field(&t, json!({"name": "Name", "type": "single_line_text"}))
        .await;
    api.create_field(
        &t,
        json!({"name": "Tags", "type": "multi_select", "options": {"choices": [{"name": "vip"}]}}),
    )
    .await;
    api.create_field(
        &t,
        json!({"name": "Sum", "type": "formula", "options": {"expression": "1 + 1"}}),
    )
    .await;
    let path = format!("/api/tables/{t}/records");
    let count = |reply: &Value| rec_ids(reply).len();

    let r = api
        .put(&path, json!({"merge_on": ["Email"], "records": [{"fields": {"Email": "a@x.test", "Name": "A"}}, {"fields": {"Email": "b@x.test", "Name": "B"}}]}))
        .await;
    let body = r.expect_ok().clone();
    assert_eq!(body["records"][0]["created"], true);
    assert_eq!(body["records"][1]["created"], true);
    assert_eq!(body["created_records"].as_array().unwrap().len(), 2);
    assert_eq!(body["updated_records"], json!([]));
    let a = id(&body["records"][0]);

    // A match is updated (merge field named by id), a new key created; order as sent.
    let r = api
        .put(
            &format!("{path}?flat=true"),
            json!({"merge_on": [email], "records": [{"fields": {"Email": "c@x.test"}}, {"fields": {"Email": "a@x.test", "Name": "A2"}}]}),
        )
        .await;
    let body = r.expect_ok().clone();
    assert_eq!(body["records"][0]["created"], true);
    assert_eq!(body["records"][1]["created"], false);
    assert_eq!(id(&body["records"][1]), a);
    assert_eq!(
        body["records"][1]["Name"], "A2",
        "flat: cells on the record"
    );
    assert_eq!(body["updated_records"], json!([a]));
    assert_eq!(body["created_records"], json!([id(&body["records"][0])]));
    let listed = api.get(&path).await;
    assert_eq!(count(listed.expect_ok()), 3);

    // Refusals; nothing written.
    for (payload, needle) in [
        (
            json!({"merge_on": [], "records": [{"fields": {"Email": "z"}}]}),
            "merge_on",
        ),
        (json!({"records": [{"fields": {"Email": "z"}}]}), "merge_on"),
        (
            json!({"merge_on": ["Tags"], "records": [{"fields": {"Tags": ["vip"]}}]}),
            "Tags",
        ),
        (
            json!({"merge_on": ["Sum"], "records": [{"fields": {"Email": "z"}}]}),
            "Sum",
        ),
        (
            json!({"merge_on": ["Nope"], "records": [{"fields": {"Email": "z"}}]}),
            "Nope",
        ),
        (
            json!({"merge_on": ["Email"], "records": [{"fields": {"Email": "z@x.test"}}, {"fields": {"Name": "no key"}}]}),
            "records[1]",
        ),
        (
            json!({"merge_on": ["Email", "Name"], "records": [{"fields": {"Email": "q@x.test", "Name": "Q"}}, {"fields": {"Name": "Q", "Email": "q@x.test"}}]}),
            "records[0] and records[1]",
        ),
    ] {
        let r = api.put(&path, payload).await;
        let msg = r.expect_error(400, "bad_request");
        assert!(msg.contains(needle), "{msg}");
    }
    // Two stored records sharing a key.
    api.post(
        &path,
        json!({"records": [{"fields": {"Email": "d@x.test"}}, {"fields": {"Email": "d@x.test"}}]}),
    )
    .await
    .expect_ok();
    let r = api
        .put(&path, json!({"merge_on": ["Email"], "records": [{"fields": {"Email": "new@x.test"}}, {"fields": {"Email": "d@x.test", "Name": "D"}}]}))
        .await;
    r.expect_error(400, "bad_request");
    let listed = api.get(&path).await;
    assert_eq!(count(listed.expect_ok()), 5, "nothing written");
    // A trashed record is not matched: a new one is created.
    api.delete_with(&path, json!({"records": [a]}))
        .await
        .expect_ok();
    let r = api
        .put(
            &path,
            json!({"merge_on": ["Email"], "records": [{"fields": {"Email": "a@x.test"}}]}),
        )
        .await;
    assert_eq!(r.expect_ok()["records"][0]["created"], true);
    // Viewers may not upsert.
    let viewer = Person::member(&fx.db, Role::Viewer).await;
    viewer
        .api
        .put(
            &path,
            json!({"merge_on": ["Email"], "records": [{"fields": {"Email": "v"}}]}),
        )
        .await
        .expect_error(403, "forbidden");
}

#[tokio::test]
async fn pressing_a_button() {
    let fx = fixture().await;
    let api = &fx.person.api;
    let press = |rid: &str| format!("{}/{rid}/press", fx.records());
    let r = api
        .post(&press(&fx.r[0]), json!({"field_id": fx.f["Go"]}))
        .await;
    assert_eq!(
        r.expect_ok(),
        &json!({"action": "link", "url": "https://example.test/t?title=Write%20spec&p=5&s=Doing&o=Ann&x={Nope}"})
    );
    // By name too; the record is not changed.
    let before = api
        .get(&format!("{}/{}", fx.records(), fx.r[3]))
        .await
        .expect_ok()["record"]["updated_at"]
        .clone();
    let r = api.post(&press(&fx.r[3]), json!({"field_id": "Go"})).await;
    assert_eq!(
        r.expect_ok()["url"],
        "https://example.test/t?title=&p=8&s=Done&o=Ann%2C%20Bob&x={Nope}"
    );
    let after = api
        .get(&format!("{}/{}", fx.records(), fx.r[3]))
        .await
        .expect_ok()["record"]["updated_at"]
        .clone();
    assert_eq!(before, after);
    // Not a button: 400; no field_id: 400; unknown or trashed record: 404.
    api.post(&press(&fx.r[0]), json!({"field_id": fx.f["Title"]}))
        .await
        .expect_error(400, "bad_request");
    api.post(&press(&fx.r[0]), json!({}))
        .await
        .expect_error(400, "bad_request");
    api.post(&press("rec_000000000000"), json!({"field_id": "Go"}))
        .await
        .expect_error(404, "not_found");
    api.delete_with(&fx.records(), json!({"records": [fx.r[4]]}))
        .await
        .expect_ok();
    api.post(&press(&fx.r[4]), json!({"field_id": "Go"}))
        .await
        .expect_error(404, "not_found");
    // A webhook button is refused until webhook delivery exists: no reply
    // may claim a delivery that did not happen.
    let hook = format!("whk_{}press01", &fx.db[3..8]);
    database_postgres(&fx.db)
        .await
        .execute(
            "INSERT INTO webhooks (id, database_id, table_id) VALUES ($1, $2, $3)",
            &[&hook, &fx.db, &fx.tasks],
        )
        .await
        .unwrap();
    api.post(
        &format!("/api/tables/{}/fields", fx.tasks),
        json!({"name": "Ping", "type": "button", "options": {"webhook_id": hook}}),
    )
    .await
    .expect_ok();
    let msg = api
        .post(&press(&fx.r[0]), json!({"field_id": "Ping"}))
        .await
        .expect_error(400, "bad_request");
    assert_eq!(
        msg,
        "Webhook buttons can't be pressed yet: webhook delivery is not available."
    );
    // Editor role: viewers are refused.
    let viewer = Person::member(&fx.db, Role::Viewer).await;
    viewer
        .api
        .post(&press(&fx.r[0]), json!({"field_id": "Go"}))
        .await
        .expect_error(403, "forbidden");
    let _ = &fx.people;
}
