//! Part B, Records, filters over links through the real router: a lookup's
//! or rollup's `conditions` restrict the linked records a filter sees as
//! they restrict the cell; link, lookup and rollup filters ignore trashed
//! linked records.

use e2e_tests::id;
use serde_json::{json, Value};

use crate::fixtures::{fixture, Fx};

/// `{conditions: [{field, op, value?}]}`.
fn c(field: &str, op: &str, value: Option<Value>) -> Value {
    match value {
        Some(v) => json!({"conditions": [{"field": field, "op": op, "value": v}]}),
        None => json!({"conditions": [{"field": field, "op": op}]}),
    }
}

/// Indexes into `fx.r` whose cell `field` (as the list reads it) passes `keep`.
async fn by_cell(fx: &Fx, field: &str, keep: impl Fn(&Value) -> bool) -> Vec<usize> {
    let reply = fx.list("page_size=100").await;
    let mut out: Vec<usize> = reply["records"]
        .as_array()
        .expect("records")
        .iter()
        .filter(|rec| keep(&rec["fields"][field]))
        .map(|rec| {
            fx.r.iter()
                .position(|x| *x == id(rec))
                .expect("a fixture record")
        })
        .collect();
    out.sort();
    out
}

fn non_empty_list(v: &Value) -> bool {
    v.as_array().is_some_and(|a| !a.is_empty())
}

#[tokio::test]
async fn lookup_and_rollup_filters_honour_their_conditions() {
    // Tasks: r0 -> Ann (30), r1 -> Bob (40), r2 none, r3 -> Ann + Bob, r4 none.
    let fx = fixture().await;
    let api = &fx.person.api;
    let senior = json!({"conditions": [{"field": "Age", "op": "greater", "value": 35}]});
    let young = json!({"conditions": [{"field": "Age", "op": "less", "value": 35}]});
    for (name, kind, extra) in [
        (
            "Senior Name",
            "lookup",
            json!({"target_field_id": "Name", "conditions": senior}),
        ),
        (
            "Senior Count",
            "rollup",
            json!({"aggregation": "count", "conditions": senior}),
        ),
        (
            "Young Age",
            "rollup",
            json!({"aggregation": "sum", "target_field_id": "Age", "conditions": young}),
        ),
    ] {
        let mut options = extra;
        options["link_field_id"] = json!(fx.f["Owner"]);
        if let Some(t) = options.get("target_field_id").and_then(Value::as_str) {
            let people = api
                .get(&format!("/api/tables/{}", fx.people))
                .await
                .expect_ok()["table"]["fields"]
                .clone();
            let target = people
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["name"] == t)
                .expect("a People field");
            options["target_field_id"] = json!(id(target));
        }
        api.create_field(
            &fx.tasks,
            json!({"name": name, "type": kind, "options": options}),
        )
        .await;
    }
    // The cells honour the conditions (as they did before filtering did).
    let reply = fx.list("").await;
    let cell = |rec: &str, field: &str| {
        reply["records"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| id(x) == rec)
            .unwrap()["fields"][field]
            .clone()
    };
    assert_eq!(cell(&fx.r[3], "Senior Name"), json!(["Bob"]));
    assert_eq!(cell(&fx.r[0], "Senior Name"), json!([]));
    assert_eq!(cell(&fx.r[3], "Senior Count"), json!(1));
    assert_eq!(cell(&fx.r[3], "Young Age"), json!(30));

    // Lookup: only linked records the conditions admit count.
    assert_eq!(
        fx.matching(c("Senior Name", "contains", Some(json!("ann"))))
            .await,
        Vec::<usize>::new(),
        "Ann is linked but not admitted"
    );
    assert_eq!(
        fx.matching(c("Owner Name", "contains", Some(json!("ann"))))
            .await,
        vec![0, 3],
        "without conditions Ann counts"
    );
    assert_eq!(
        fx.matching(c("Senior Name", "is", Some(json!("Bob"))))
            .await,
        vec![1, 3]
    );
    assert_eq!(
        fx.matching(c("Senior Name", "is_not", Some(json!("Bob"))))
            .await,
        vec![0, 2, 4]
    );
    assert_eq!(
        fx.matching(c("Senior Name", "empty", None)).await,
        vec![0, 2, 4]
    );
    // Filter and cell agree on every record.
    assert_eq!(
        fx.matching(c("Senior Name", "not_empty", None)).await,
        by_cell(&fx, "Senior Name", non_empty_list).await
    );
    // Rollups aggregate the admitted records only.
    assert_eq!(
        fx.matching(c("Senior Count", "is", Some(json!(1)))).await,
        vec![1, 3]
    );
    assert_eq!(
        fx.matching(c("Senior Count", "is", Some(json!(0)))).await,
        vec![0, 2, 4]
    );
    assert_eq!(
        fx.matching(c("Young Age", "is", Some(json!(30)))).await,
        vec![0, 3]
    );
    assert_eq!(
        fx.matching(c("Young Age", "empty", None)).await,
        by_cell(&fx, "Young Age", Value::is_null).await
    );
    // A view's stored filter goes through the same path.
    let view = api
        .post(
            &format!("/api/tables/{}/views", fx.tasks),
            json!({"name": "Senior", "config": {"filters": {"conditions": [
                {"fieldId": fx.f["Owner"], "op": "not_empty"}]}}}),
        )
        .await
        .expect_ok()["view"]
        .clone();
    let q = crate::fixtures::urlencode(&c("Senior Name", "not_empty", None).to_string());
    let reply = fx.list(&format!("view={}&filter={q}", id(&view))).await;
    let mut got: Vec<usize> = crate::fixtures::rec_ids(&reply)
        .iter()
        .map(|i| fx.r.iter().position(|x| x == i).unwrap())
        .collect();
    got.sort();
    assert_eq!(got, vec![1, 3]);
}

#[tokio::test]
async fn link_lookup_and_rollup_filters_ignore_trashed_linked_records() {
    let fx = fixture().await;
    let api = &fx.person.api;
    api.create_field(
        &fx.tasks,
        json!({"name": "Owners", "type": "rollup", "options": {"link_field_id": fx.f["Owner"], "aggregation": "count"}}),
    )
    .await;
    let people = format!("/api/tables/{}/records", fx.people);
    let bob = json!([fx.bob]);
    // Before: Bob is live (the assertions below can fail).
    assert_eq!(
        fx.matching(c("Owner", "has_any", Some(bob.clone()))).await,
        vec![1, 3]
    );
    assert_eq!(
        fx.matching(c("Owner Name", "is", Some(json!("Bob")))).await,
        vec![1, 3]
    );

    api.delete_with(&people, json!({"records": [fx.bob]}))
        .await
        .expect_ok();
    // Link: the trashed Bob is not linked any more as far as filters go.
    assert_eq!(
        fx.matching(c("Owner", "has_any", Some(bob.clone()))).await,
        Vec::<usize>::new()
    );
    assert_eq!(
        fx.matching(c("Owner", "has_none", Some(bob.clone()))).await,
        vec![0, 1, 2, 3, 4]
    );
    assert_eq!(
        fx.matching(c("Owner", "has_all", Some(json!([fx.ann, fx.bob]))))
            .await,
        Vec::<usize>::new()
    );
    assert_eq!(
        fx.matching(c("Owner", "is_exactly", Some(json!([fx.ann]))))
            .await,
        vec![0, 3]
    );
    assert_eq!(fx.matching(c("Owner", "empty", None)).await, vec![1, 2, 4]);
    assert_eq!(fx.matching(c("Owner", "not_empty", None)).await, vec![0, 3]);
    // Lookup: Bob's name is not among the linked values.
    assert_eq!(
        fx.matching(c("Owner Name", "is", Some(json!("Bob")))).await,
        Vec::<usize>::new()
    );
    assert_eq!(
        fx.matching(c("Owner Name", "contains", Some(json!("o"))))
            .await,
        Vec::<usize>::new()
    );
    assert_eq!(
        fx.matching(c("Owner Name", "empty", None)).await,
        vec![1, 2, 4]
    );
    assert_eq!(
        fx.matching(c("Owner Name", "is_not", Some(json!("Bob"))))
            .await,
        vec![0, 1, 2, 3, 4]
    );
    // Rollup: count of live links.
    assert_eq!(
        fx.matching(c("Owners", "is", Some(json!(1)))).await,
        vec![0, 3]
    );
    assert_eq!(
        fx.matching(c("Owners", "is", Some(json!(0)))).await,
        vec![1, 2, 4]
    );
    // Filter and cell agree.
    assert_eq!(
        fx.matching(c("Owner Name", "not_empty", None)).await,
        by_cell(&fx, "Owner Name", non_empty_list).await
    );

    // Restored, Bob counts again.
    api.post(
        &format!("/api/tables/{}/trash/restore", fx.people),
        json!({"ids": [fx.bob]}),
    )
    .await
    .expect_ok();
    assert_eq!(
        fx.matching(c("Owner", "has_any", Some(bob))).await,
        vec![1, 3]
    );
    assert_eq!(
        fx.matching(c("Owners", "is", Some(json!(2)))).await,
        vec![3]
    );
}
