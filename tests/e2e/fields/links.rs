//! Links: the forward field and its mirror, the connector table, names and
//! clashes, self-links, the target's database, `allow_multiple`,
//! `conditions` compiled against the target, picker rules, locked keys.

use cluster_protocol::control::{Access, DatabaseScope, Role};
use cluster_protocol::HEADER_FOREIGN_TABLE;
use e2e_tests::{cluster, unique, Person, Reply};
use serde_json::{json, Value};

use super::{id, Db};

#[tokio::test]
async fn a_link_makes_a_mirror_and_a_connector() {
    let d = Db::new().await;
    let people = d.table("People").await;
    let tasks = d.table("Tasks").await;
    d.field(&tasks, json!({"name": "Title", "type": "single_line_text"}))
        .await;
    let link = d
        .field(
            &people,
            json!({"name": "Tasks", "type": "link", "options": {
            "target_table_id": tasks, "direction": "reverse", "pair_field_id": "fld_forged"}}),
        )
        .await;
    let o = &link["options"];
    assert_eq!(link["type"], "link");
    assert_eq!(o["target_table_id"], tasks.as_str());
    assert_eq!(o["direction"], "forward", "written by the server");
    assert_eq!(o["allow_multiple"], true);
    let mirror_id = o["pair_field_id"].as_str().unwrap().to_owned();
    assert_ne!(mirror_id, "fld_forged");
    assert!(mirror_id.starts_with("fld_") && mirror_id.len() == 16);
    // Only the forward field is in People; the mirror is on Tasks, named
    // after this table, pointing back.
    assert_eq!(d.fields(&people).await.len(), 1);
    let mirror = d.listed(&tasks, &mirror_id).await;
    assert_eq!(mirror["name"], "People");
    assert_eq!(mirror["type"], "link");
    assert_eq!(mirror["position"], 1);
    assert_eq!(mirror["options"]["direction"], "reverse");
    assert_eq!(mirror["options"]["pair_field_id"], link["id"]);
    assert_eq!(mirror["options"]["target_table_id"], people.as_str());

    // The connector: from_id/to_id, a primary key, no column on either table.
    let connector = format!("lnk_{}", id(&link));
    assert!(d.relation_exists(&connector).await);
    let cols: Vec<String> = d
        .pg
        .query(
            "SELECT column_name::text FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
            &[&d.id, &connector],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(
        cols.contains(&"from_id".to_owned()) && cols.contains(&"to_id".to_owned()),
        "{cols:?}"
    );
    let pk: i64 = d
        .pg
        .query_one(
            "SELECT count(*) FROM information_schema.table_constraints WHERE table_schema = $1 AND table_name = $2 AND constraint_type = 'PRIMARY KEY'",
            &[&d.id, &connector],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(pk, 1);
    assert_eq!(d.column_type(&people, &id(&link)).await, None);
    assert_eq!(d.column_type(&tasks, &mirror_id).await, None);

    // Writing through the records path fills the connector; both sides read it.
    let t = d
        .records(
            &tasks,
            vec![
                json!({"Title": "write tests"}),
                json!({"Title": "fix bugs"}),
            ],
        )
        .await;
    let p = d
        .records(&people, vec![json!({"Tasks": [id(&t[0]), id(&t[1])]})])
        .await;
    let rows: i64 =
        d.pg.query_one(
            &format!(
                "SELECT count(*) FROM \"{}\".\"{connector}\" WHERE from_id = $1",
                d.id
            ),
            &[&id(&p[0])],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 2);
    let back = d.read(&tasks, &id(&t[0])).await;
    assert_eq!(back["fields"]["People"][0]["id"], p[0]["id"]);
    let there = d.read(&people, &id(&p[0])).await;
    assert_eq!(there["fields"]["Tasks"][1]["display"], "fix bugs");

    // Mirror name clash: 409; reverse_field_name resolves it.
    let msg = d
        .create(
            &people,
            json!({"name": "More", "type": "link", "options": {"target_table_id": tasks}}),
        )
        .await
        .expect_error(409, "conflict");
    assert!(
        msg.contains("People") && msg.contains("reverse_field_name"),
        "{msg}"
    );
    let second = d
        .field(&people, json!({"name": "More", "type": "link", "options": {"target_table_id": tasks, "reverse_field_name": " Owners ", "allow_multiple": false}}))
        .await;
    assert_eq!(second["options"]["allow_multiple"], false);
    let m2 = d
        .listed(&tasks, second["options"]["pair_field_id"].as_str().unwrap())
        .await;
    assert_eq!(m2["name"], "Owners");
    // allow_multiple false: one linked record at most.
    let r = d
        .owner
        .api
        .post(
            &format!("/api/tables/{people}/records"),
            json!({"records": [{"fields": {"More": [id(&t[0]), id(&t[1])]}}]}),
        )
        .await;
    r.expect_error(400, "bad_request");
    // The forward name itself clashing: 409 too.
    d.create(&people, json!({"name": "Tasks", "type": "link", "options": {"target_table_id": tasks, "reverse_field_name": "X"}}))
        .await
        .expect_error(409, "conflict");
}

#[tokio::test]
async fn self_links_targets_and_missing_options() {
    let d = Db::new().await;
    let people = d.table("People").await;
    // A self-link needs two distinct names: the default mirror name (the
    // table's name) equal to the field's name is 409.
    let msg = d
        .create(
            &people,
            json!({"name": "People", "type": "link", "options": {"target_table_id": people}}),
        )
        .await
        .expect_error(409, "conflict");
    assert!(msg.contains("reverse_field_name"), "{msg}");
    d.create(&people, json!({"name": "Manager", "type": "link", "options": {"target_table_id": people, "reverse_field_name": "Manager"}}))
        .await
        .expect_error(409, "conflict");
    let l = d
        .field(&people, json!({"name": "Manager", "type": "link", "options": {"target_table_id": people, "reverse_field_name": "Reports"}}))
        .await;
    let fields = d.fields(&people).await;
    assert_eq!(fields.len(), 2);
    assert_eq!(
        (fields[0]["name"].as_str(), fields[1]["name"].as_str()),
        (Some("Manager"), Some("Reports"))
    );
    assert_eq!(fields[1]["id"], l["options"]["pair_field_id"]);
    assert_eq!(fields[1]["options"]["target_table_id"], people.as_str());

    // Target checks.
    let msg = d
        .create(&people, json!({"name": "X", "type": "link"}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("target_table_id"), "{msg}");
    d.create(
        &people,
        json!({"name": "X", "type": "link", "options": {"target_table_id": 12}}),
    )
    .await
    .expect_error(400, "bad_request");
    // Another database (of the same person): 400.
    let elsewhere = d.owner.api.create_database(&unique("other")).await;
    let foreign = id(&d.owner.api.create_table(&id(&elsewhere), "Foreign").await);
    let msg = d
        .create(
            &people,
            json!({"name": "X", "type": "link", "options": {"target_table_id": foreign}}),
        )
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("same database"), "{msg}");
    // A table id of this database that does not exist: 404.
    let ghost = format!("tbl_{}zzzzzzz", &d.id[3..8]);
    d.create(
        &people,
        json!({"name": "X", "type": "link", "options": {"target_table_id": ghost}}),
    )
    .await
    .expect_error(404, "not_found");
    assert_eq!(d.fields(&people).await.len(), 2);
    // Someone else's database: the target must not be reachable either.
    let stranger = Person::new().await;
    let sdb = stranger.api.create_database(&unique("s")).await;
    let stable = id(&stranger.api.create_table(&id(&sdb), "S").await);
    let r = d
        .create(
            &people,
            json!({"name": "X", "type": "link", "options": {"target_table_id": stable}}),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
}

/// Part B: an id matching nothing is 404, and so is one the caller may not
/// see; only an existing table of another database the caller can see is
/// the 400 "must be in the same database". The shard holding this
/// database knows neither; the router settles it.
#[tokio::test]
async fn a_link_target_the_caller_cannot_see_is_404() {
    let d = Db::new().await;
    let people = d.table("People").await;
    let link_to = |target: &str| json!({"name": "X", "type": "link", "options": {"target_table_id": target, "reverse_field_name": "Y"}});
    let refused = |r: Reply, status: u16| {
        assert_eq!(r.status, status, "{}", r.body);
        assert!(
            r.header(HEADER_FOREIGN_TABLE).is_none(),
            "the router keeps its header to itself"
        );
        r
    };

    // A tag that names no database at all.
    let r = d.create(&people, link_to("tbl_AAAAAAAAAAAA")).await;
    refused(r, 404).expect_error(404, "not_found");

    // Someone else's database: its table exists, but not for this caller.
    let stranger = Person::new().await;
    let theirs = id(&stranger.api.create_database(&unique("s")).await);
    let their_table = id(&stranger.api.create_table(&theirs, "S").await);
    refused(d.create(&people, link_to(&their_table)).await, 404);

    // Another database of the owner's: an id of it naming no table is 404,
    // an existing table the 400.
    let elsewhere = id(&d.owner.api.create_database(&unique("other")).await);
    let foreign = id(&d.owner.api.create_table(&elsewhere, "Foreign").await);
    let ghost = format!("tbl_{}zzzzzzz", &elsewhere[3..8]);
    refused(d.create(&people, link_to(&ghost)).await, 404);
    let msg =
        refused(d.create(&people, link_to(&foreign)).await, 400).expect_error(400, "bad_request");
    assert!(msg.contains("same database"), "{msg}");

    // A key narrowed to this database cannot see the other one: 404.
    let (_, narrowed) = d
        .owner
        .another_key(Access::ReadWrite, DatabaseScope::Only(vec![d.id.clone()]))
        .await;
    let r = narrowed
        .post(&format!("/api/tables/{people}/fields"), link_to(&foreign))
        .await;
    refused(r, 404);

    // Becoming a member (or holding a support grant) makes the stranger's
    // table visible: then it is the 400.
    d.owner.join(&theirs, Role::Viewer).await;
    refused(d.create(&people, link_to(&their_table)).await, 400);
    let guest = Person::new().await;
    guest.join(&d.id, Role::Editor).await;
    let guest_link = |target: &str| {
        let body = link_to(target);
        let path = format!("/api/tables/{people}/fields");
        let api = &guest.api;
        async move { api.post(&path, body).await }
    };
    refused(guest_link(&foreign).await, 404);
    cluster()
        .control_plane
        .grant_support(&elsewhere, &guest.user_id)
        .await
        .expect("grant support");
    refused(guest_link(&foreign).await, 400);
    refused(guest_link(&ghost).await, 404);

    // Nothing was written on any of these.
    assert!(d.fields(&people).await.is_empty());
    // Changing a field's type to link is refused whatever the target.
    let plain = d
        .field(
            &people,
            json!({"name": "Plain", "type": "single_line_text"}),
        )
        .await;
    let msg = d
        .patch(
            &id(&plain),
            json!({"type": "link", "options": {"target_table_id": "tbl_AAAAAAAAAAAA"}}),
        )
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("cannot be changed to link"), "{msg}");
}

#[tokio::test]
async fn conditions_and_picker_fields_are_checked_against_the_target() {
    let d = Db::new().await;
    let people = d.table("People").await;
    let local = d
        .field(&people, json!({"name": "Local", "type": "number"}))
        .await;
    let tasks = d.table("Tasks").await;
    let title = d
        .field(&tasks, json!({"name": "Title", "type": "single_line_text"}))
        .await; // display field
    let est = d
        .field(&tasks, json!({"name": "Estimate", "type": "number"}))
        .await;
    let a1 = d
        .field(&tasks, json!({"name": "Pic", "type": "attachment"}))
        .await;
    let a2 = d
        .field(&tasks, json!({"name": "Doc", "type": "attachment"}))
        .await;
    let btn = d
        .field(
            &tasks,
            json!({"name": "Go", "type": "button", "options": {"url_template": "https://x.test"}}),
        )
        .await;
    let due = d
        .field(&tasks, json!({"name": "Due", "type": "date"}))
        .await;
    let done = d
        .field(&tasks, json!({"name": "Done", "type": "checkbox"}))
        .await;
    let notes = d
        .field(&tasks, json!({"name": "Notes", "type": "long_text"}))
        .await;

    let link = |n: &str, options: Value| {
        let mut o = options;
        o["target_table_id"] = json!(tasks);
        o["reverse_field_name"] = json!(format!("back {n}"));
        d.create(&people, json!({"name": n, "type": "link", "options": o}))
    };
    let ok = link(
        "Big",
        json!({"conditions": {"conditions": [{"field": "Estimate", "op": "greater", "value": 3}]}}),
    )
    .await;
    assert_eq!(
        ok.expect_ok()["field"]["options"]["conditions"]["conditions"][0]["field"],
        "Estimate"
    );
    for (conditions, needle) in [
        (
            json!({"conditions": [{"field": "Local", "op": "is", "value": 1}]}),
            "Local",
        ),
        (
            json!({"conditions": [{"field": id(&local), "op": "is", "value": 1}]}),
            "",
        ),
        (
            json!({"conditions": [{"field": "Title", "op": "greater", "value": 1}]}),
            "",
        ),
        (
            json!({"conditions": [{"field": "Estimate", "op": "is", "value": "3"}]}),
            "",
        ),
        (json!({"join": "xor", "conditions": []}), ""),
    ] {
        let msg = link("C", json!({"conditions": conditions}))
            .await
            .expect_error(400, "bad_request");
        assert!(msg.contains("conditions") && msg.contains(needle), "{msg}");
    }
    // Pickers: up to four, or three plus one attachment; never a button or
    // the display field; only fields of the target.
    let four = json!([id(&est), id(&due), id(&done), id(&a1)]);
    let r = link("P", json!({"picker_field_ids": four})).await;
    assert_eq!(r.expect_ok()["field"]["options"]["picker_field_ids"], four);
    for (pickers, needle) in [
        (
            json!([id(&est), id(&due), id(&done), id(&notes), id(&a1)]),
            "4",
        ),
        (json!([id(&a1), id(&a2)]), "attachment"),
        (json!([id(&btn)]), "button"),
        (json!([id(&title)]), "display field"),
        (json!([id(&local)]), "not a field"),
        (json!([id(&est), id(&est)]), "twice"),
        (json!("x"), "list"),
    ] {
        let msg = link("Q", json!({"picker_field_ids": pickers}))
            .await
            .expect_error(400, "bad_request");
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    // Update: conditions and pickers are editable and checked the same way.
    let big = d
        .fields(&people)
        .await
        .into_iter()
        .find(|f| f["name"] == "Big")
        .unwrap();
    let r = d
        .patch(
            &id(&big),
            json!({"options": {"picker_field_ids": [id(&notes)], "reverse_field_name": "ignored", "stray": 1}}),
        )
        .await;
    let o = r.expect_ok()["field"]["options"].clone();
    assert_eq!(o["picker_field_ids"], json!([id(&notes)]));
    assert!(
        o.get("conditions").is_none(),
        "options replace wholesale: {o}"
    );
    assert_eq!(
        o["reverse_field_name"], "back Big",
        "reverse_field_name is ignored on update"
    );
    let mirror = d.listed(&tasks, o["pair_field_id"].as_str().unwrap()).await;
    assert_eq!(mirror["name"], "back Big");
    d.patch(
        &id(&big),
        json!({"options": {"picker_field_ids": [id(&btn)]}}),
    )
    .await
    .expect_error(400, "bad_request");
    d.patch(&id(&big), json!({"options": {"conditions": {"conditions": [{"field": "Local", "op": "is", "value": 1}]}}}))
        .await
        .expect_error(400, "bad_request");
}

#[tokio::test]
async fn locked_link_keys() {
    let d = Db::new().await;
    let a = d.table("A").await;
    let b = d.table("B").await;
    let link = d
        .field(
            &a,
            json!({"name": "B", "type": "link", "options": {"target_table_id": b}}),
        )
        .await;
    let lid = id(&link);
    let o = link["options"].clone();
    for (key, other) in [
        ("target_table_id", json!(a)),
        ("direction", json!("reverse")),
        ("pair_field_id", json!("fld_elsewhere1")),
        ("allow_multiple", json!(false)),
    ] {
        let msg = d
            .patch(&lid, json!({"options": {key: other}}))
            .await
            .expect_error(400, "bad_request");
        assert!(msg.contains(key), "{key}: {msg}");
    }
    // Repeating the stored values is fine; the whole echo round-trips.
    let r = d.patch(&lid, json!({"options": o})).await;
    assert_eq!(r.expect_ok()["field"]["options"], o);
    // The mirror's locked keys too.
    let mirror = o["pair_field_id"].as_str().unwrap();
    d.patch(mirror, json!({"options": {"allow_multiple": false}}))
        .await
        .expect_error(400, "bad_request");
    d.patch(mirror, json!({"name": "Renamed A"}))
        .await
        .expect_ok();
    // Type changes into or out of a link are refused.
    d.patch(&lid, json!({"type": "single_line_text"}))
        .await
        .expect_error(400, "bad_request");
    let t = d
        .field(&a, json!({"name": "T", "type": "single_line_text"}))
        .await;
    d.patch(&id(&t), json!({"type": "link"}))
        .await
        .expect_error(400, "bad_request");
}
