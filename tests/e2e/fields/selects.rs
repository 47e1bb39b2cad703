//! Select choices: ids minted (8 characters) or kept, names trimmed, the
//! 500-character and 1000-choice ceilings, the reserved name, duplicate new
//! names; PATCH without `choices` keeps them, `[]` clears them.

use serde_json::{json, Value};

use super::{id, Db};

fn choices(f: &Value) -> Vec<Value> {
    f["options"]["choices"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn choices_are_minted_kept_trimmed_and_checked() {
    let d = Db::new().await;
    let tid = d.table("T").await;
    let f = d
        .field(
            &tid,
            json!({"name": "Status", "type": "single_select", "options": {"choices": [
                {"name": "  Open  ", "color": "nile"},
                {"id": "keepMe01", "name": "Done"},
                {"id": "other002", "name": "Open"}
            ]}}),
        )
        .await;
    let c = choices(&f);
    assert_eq!(c.len(), 3);
    let minted = c[0]["id"].as_str().unwrap();
    assert_eq!(minted.len(), 8);
    assert!(
        minted.chars().all(|ch| ch.is_ascii_alphanumeric()),
        "{minted}"
    );
    assert_eq!(c[0]["name"], "Open");
    assert_eq!(c[0]["color"], "nile");
    assert_eq!(
        c[1],
        json!({"id": "keepMe01", "name": "Done", "color": null})
    );
    // An entry WITH an id may repeat a name; only new id-less ones may not.
    assert_eq!(c[2]["name"], "Open");

    let bad = |choices: Value| {
        d.create(
            &tid,
            json!({"name": "S2", "type": "multi_select", "options": {"choices": choices}}),
        )
    };
    for (choices, needle) in [
        (json!([{"name": "A"}, {"name": " A "}]), "Duplicate"),
        (json!([{"color": "rose"}]), "name"),
        (json!([{"name": "   "}]), "name"),
        (json!([{"name": "__service_no_such_choice__"}]), "reserved"),
        (json!([{"name": "x".repeat(501)}]), "500"),
        (json!("A,B"), "list"),
    ] {
        let msg = bad(choices).await.expect_error(400, "bad_request");
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"name": format!("c{i}")}))
        .collect();
    let msg = bad(Value::Array(many.clone()))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("1000"), "{msg}");
    // Exactly at the ceilings is fine; a 500-character name counts characters.
    let f = d
        .field(
            &tid,
            json!({"name": "Many", "type": "multi_select", "options": {"choices": &many[..1000]}}),
        )
        .await;
    assert_eq!(choices(&f).len(), 1000);
    let long = "é".repeat(500);
    let f = d.field(&tid, json!({"name": "Long", "type": "single_select", "options": {"choices": [{"name": long}]}})).await;
    assert_eq!(choices(&f)[0]["name"], long.as_str());
    // The same rules on update.
    d.patch(
        &id(&f),
        json!({"options": {"choices": [{"name": "__service_no_such_choice__"}]}}),
    )
    .await
    .expect_error(400, "bad_request");
    assert_eq!(
        choices(&d.listed(&tid, &id(&f)).await)[0]["name"],
        long.as_str(),
        "nothing changed"
    );
}

#[tokio::test]
async fn patch_keeps_or_clears_choices_and_cells_follow() {
    let d = Db::new().await;
    let tid = d.table("T").await;
    let f = d
        .field(&tid, json!({"name": "Status", "type": "single_select", "options": {"choices": [{"name": "Open"}, {"name": "Done"}]}}))
        .await;
    let tags = d
        .field(&tid, json!({"name": "Tags", "type": "multi_select", "options": {"choices": [{"name": "a"}, {"name": "b"}]}}))
        .await;
    let fid = id(&f);
    let (open, done) = (choices(&f)[0]["id"].clone(), choices(&f)[1]["id"].clone());
    // Cells store the choice id.
    let recs = d
        .records(
            &tid,
            vec![
                json!({"Status": "Done", "Tags": ["a", "b"]}),
                json!({"Status": "Open"}),
            ],
        )
        .await;
    let (r1, r2) = (id(&recs[0]), id(&recs[1]));
    assert_eq!(
        d.cell_text(&tid, &fid, &r1).await,
        done.as_str().map(str::to_owned)
    );
    // Options without choices keep them.
    let r = d.patch(&fid, json!({"options": {"color": "x"}})).await;
    assert_eq!(choices(&r.expect_ok()["field"]).len(), 2);
    // Renaming a choice (same id) touches no record.
    let r = d.patch(&fid, json!({"options": {"choices": [{"id": open, "name": "Open"}, {"id": done, "name": "Finished"}]}})).await;
    r.expect_ok();
    assert_eq!(d.read(&tid, &r1).await["fields"]["Status"], "Finished");
    // Removing a choice clears the cells that held it.
    d.patch(
        &fid,
        json!({"options": {"choices": [{"id": open, "name": "Open"}]}}),
    )
    .await
    .expect_ok();
    assert_eq!(d.cell_text(&tid, &fid, &r1).await, None);
    assert_eq!(
        d.cell_text(&tid, &fid, &r2).await,
        open.as_str().map(str::to_owned)
    );
    let a = choices(&tags)[0]["id"].clone();
    d.patch(
        &id(&tags),
        json!({"options": {"choices": [{"id": a, "name": "a"}]}}),
    )
    .await
    .expect_ok();
    assert_eq!(
        d.cell_text(&tid, &id(&tags), &r1).await.as_deref(),
        Some(format!("{{{}}}", a.as_str().unwrap()).as_str())
    );
    // An explicit [] clears them.
    let r = d.patch(&fid, json!({"options": {"choices": []}})).await;
    assert_eq!(r.expect_ok()["field"]["options"]["choices"], json!([]));
    assert_eq!(d.cell_text(&tid, &fid, &r2).await, None);
    // Single selects support unique; the options echo keeps it.
    let u = d
        .field(&tid, json!({"name": "U", "type": "single_select", "options": {"unique": true, "choices": [{"name": "x"}]}}))
        .await;
    assert_eq!(d.indexes_on(&tid, &id(&u)).await.len(), 1);
}
