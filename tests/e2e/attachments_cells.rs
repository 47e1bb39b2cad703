//! Attachment cells through the real router (part A's read and write
//! shapes, part B "Attachment URLs in cells", part C's payload cells):
//! files are fetched from a small HTTP server in this process on
//! 127.0.0.1 (the test cluster's EGRESS_ALLOW_CIDRS lets plain http reach
//! loopback); the registry is read from the owning shard's PostgreSQL and,
//! with the local store, the bytes from the cluster's BLOB_DIR.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use e2e_tests::stores::{database_store, Store};
use e2e_tests::{cluster, database_postgres, id, Person};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HELLO: &str = "hello world";
const REPORT: &str = "a,b\n1,2\n";

/// A file server on 127.0.0.1: its base URL and how many requests it got.
pub(crate) async fn file_server() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let head = String::from_utf8_lossy(&buf);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let reply = respond(&path);
                let _ = socket.write_all(&reply).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (base, hits)
}

fn ok(content_type: &str, extra: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn redirect(to: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
    .into_bytes()
}

fn respond(path: &str) -> Vec<u8> {
    match path {
        "/files/hello.txt" => ok("text/plain", "", HELLO),
        "/" => ok("text/plain", "", HELLO),
        "/named" => ok(
            "text/csv",
            "content-disposition: attachment; filename=\"report.csv\"\r\n",
            REPORT,
        ),
        "/redir-ok" => redirect("/files/hello.txt"),
        "/redir-meta" => redirect("http://169.254.169.254/latest/meta-data/"),
        "/redir-private" => redirect("http://10.0.0.1/secret.txt"),
        // Declares more than the 100 MB cap, sends nothing.
        "/huge" => b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: 104857601\r\nconnection: close\r\n\r\n".to_vec(),
        "/hook" => b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec(),
        _ => b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec(),
    }
}

struct Fx {
    person: Person,
    db: String,
    docs: String,
    other_table: String,
    base: String,
    hits: Arc<AtomicUsize>,
    pg: tokio_postgres::Client,
}

impl Fx {
    async fn new(store: Store) -> Fx {
        let person = Person::new().await;
        let api = &person.api;
        let db = api.new_database_on(store, "cells").await;
        let docs = id(&api.create_table(&db, "Docs").await);
        for body in [
            json!({"name": "Name", "type": "single_line_text"}),
            json!({"name": "Files", "type": "attachment"}),
            json!({"name": "Pics", "type": "attachment"}),
        ] {
            api.create_field(&docs, body).await;
        }
        let other_table = id(&api.create_table(&db, "Other").await);
        api.create_field(&other_table, json!({"name": "Files", "type": "attachment"}))
            .await;
        let pg = database_postgres(&db).await;
        let (base, hits) = file_server().await;
        Fx {
            person,
            db,
            docs,
            other_table,
            base,
            hits,
            pg,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn records(&self, table: &str) -> String {
        format!("/api/tables/{table}/records")
    }

    async fn create(&self, table: &str, fields: Value) -> Value {
        let r = self
            .person
            .api
            .post(
                &self.records(table),
                json!({"records": [{"fields": fields}]}),
            )
            .await;
        r.expect_ok()["records"][0].clone()
    }

    async fn patch(&self, rec: &str, fields: Value) -> e2e_tests::Reply {
        self.person
            .api
            .patch(
                &self.records(&self.docs),
                json!({"records": [{"id": rec, "fields": fields}]}),
            )
            .await
    }

    /// The registry rows of the database: (id, record, field, placed).
    async fn registry(&self) -> Vec<(String, String, String, bool)> {
        self.pg
            .query(
                "SELECT id, record_id, field_id, placed FROM attachments WHERE database_id = $1 ORDER BY id",
                &[&self.db],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect()
    }

    /// The directory holding the database's blobs: the local store's, or
    /// the S3 test server's (s3s-fs keeps `<root>/<bucket>/<key>`).
    async fn store_dir(&self) -> Option<PathBuf> {
        let c = cluster();
        Some(match database_store(&self.db).await {
            Store::Local => PathBuf::from(c.var("BLOB_DIR")?).join(&self.db),
            Store::S3 => PathBuf::from(std::env::var("TEST_S3_ROOT").ok()?)
                .join(std::env::var("TEST_S3_BUCKET").ok()?)
                .join(&self.db),
        })
    }

    /// Original files of the database in its store.
    async fn stored_originals(&self) -> Option<Vec<PathBuf>> {
        let root = self.store_dir().await?;
        let mut out = Vec::new();
        for att in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            let original = att.path().join("original");
            if original.is_file() {
                out.push(original);
            }
        }
        Some(out)
    }

    async fn original_bytes(&self, att: &str) -> Option<String> {
        let path = self.store_dir().await?.join(att).join("original");
        Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
    }
}

fn cell_ids(cell: &Value) -> Vec<String> {
    cell.as_array()
        .unwrap_or_else(|| panic!("an attachment list: {cell}"))
        .iter()
        .map(id)
        .collect()
}

#[tokio::test]
async fn urls_are_fetched_into_the_cell_and_read_back_as_attachment_objects() {
    for store in Store::BOTH {
        urls_are_fetched_into_the_cell_and_read_back_as_attachment_objects_on(store).await;
    }
}

async fn urls_are_fetched_into_the_cell_and_read_back_as_attachment_objects_on(store: Store) {
    let fx = Fx::new(store).await;
    let rec = fx
        .create(
            &fx.docs,
            json!({
                "Name": "one",
                "Files": [
                    fx.url("/files/hello.txt"),
                    {"url": fx.url("/named"), "filename": "given name.bin"},
                    fx.url("/named"),
                    {"url": fx.url("/redir-ok")},
                    fx.url("/"),
                ]
            }),
        )
        .await;
    let files = rec["fields"]["Files"].as_array().expect("a list").clone();
    let names: Vec<&str> = files
        .iter()
        .map(|f| f["filename"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "hello.txt",
            "given name.bin",
            "report.csv",
            "hello.txt",
            "file.txt"
        ]
    );
    for f in &files {
        let mut keys: Vec<&str> = f.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "card_url",
                "content_type",
                "filename",
                "id",
                "size_bytes",
                "thumb_url",
                "url"
            ]
        );
        let att = f["id"].as_str().unwrap();
        assert!(att.starts_with("att_"), "{f}");
        let url = f["url"].as_str().unwrap();
        // `signature=` on the cluster's own links, `X-Amz-Signature=` on S3's.
        let signed = url.to_ascii_lowercase().contains("signature=");
        assert!(url.contains(att) && signed, "{url}");
        // Not images: the derivatives are the original.
        assert_eq!(f["thumb_url"], f["url"]);
        assert_eq!(f["card_url"], f["url"]);
    }
    assert_eq!(files[0]["size_bytes"], HELLO.len());
    assert_eq!(files[0]["content_type"], "text/plain");
    assert_eq!(files[2]["size_bytes"], REPORT.len());
    assert_eq!(files[2]["content_type"], "text/csv");
    // An attachment field never written reads null.
    assert_eq!(rec["fields"]["Pics"], Value::Null);

    // The stored bytes are the server's.
    let ids = cell_ids(&rec["fields"]["Files"]);
    if let Some(bytes) = fx.original_bytes(&ids[0]).await {
        assert_eq!(bytes, HELLO);
        assert_eq!(fx.original_bytes(&ids[2]).await.unwrap(), REPORT);
    }

    // Registry: five rows, placed, bound to this record and field.
    let reg = fx.registry().await;
    assert_eq!(reg.len(), 5);
    let rid = id(&rec);
    assert!(
        reg.iter().all(|(_, r, _, placed)| *r == rid && *placed),
        "{reg:?}"
    );

    // Every read shows the same objects in the stored order.
    let api = &fx.person.api;
    let one = api.get(&format!("{}/{rid}", fx.records(&fx.docs))).await;
    assert_eq!(cell_ids(&one.expect_ok()["record"]["fields"]["Files"]), ids);
    assert_eq!(
        one.body["record"]["fields"]["Files"][1]["filename"],
        "given name.bin"
    );
    assert_eq!(one.body["record"]["fields"]["Pics"], Value::Null);
    let page = api.get(&fx.records(&fx.docs)).await;
    let listed = &page.expect_ok()["records"][0]["fields"];
    assert_eq!(cell_ids(&listed["Files"]), ids);
    assert_eq!(listed["Files"][4]["filename"], "file.txt");
    assert_eq!(listed["Pics"], Value::Null);
    let by_post = api
        .post(
            &format!("{}/list", fx.records(&fx.docs)),
            json!({"key_by": "id", "cell_format": "ids"}),
        )
        .await;
    let cells = by_post.expect_ok()["records"][0]["fields"]
        .as_object()
        .unwrap()
        .clone();
    let files_cell = cells
        .values()
        .find(|v| v.is_array())
        .expect("the Files cell keyed by id");
    assert_eq!(cell_ids(files_cell), ids);

    // Trash listing shows them too (trashed records keep their files).
    api.delete(&format!("{}?records={rid}", fx.records(&fx.docs)))
        .await
        .expect_ok();
    let trash = api.get(&format!("/api/tables/{}/trash", fx.docs)).await;
    assert_eq!(
        cell_ids(&trash.expect_ok()["records"][0]["fields"]["Files"]),
        ids
    );
    assert_eq!(fx.registry().await.len(), 5);
}

#[tokio::test]
async fn patch_replaces_the_list_and_ids_stay_bound_to_their_cell() {
    for store in Store::BOTH {
        patch_replaces_the_list_and_ids_stay_bound_to_their_cell_on(store).await;
    }
}

async fn patch_replaces_the_list_and_ids_stay_bound_to_their_cell_on(store: Store) {
    let fx = Fx::new(store).await;
    let rec = fx
        .create(
            &fx.docs,
            json!({"Name": "a", "Files": [fx.url("/files/hello.txt"), fx.url("/named"), fx.url("/")]}),
        )
        .await;
    let rid = id(&rec);
    let ids = cell_ids(&rec["fields"]["Files"]);
    let (a, b, c) = (&ids[0], &ids[1], &ids[2]);

    // Reorder and drop: c, a stay (as ids and objects), b goes.
    let r = fx.patch(&rid, json!({"Files": [c, {"id": a}, c]})).await;
    assert_eq!(
        cell_ids(&r.expect_ok()["records"][0]["fields"]["Files"]),
        [c.clone(), a.clone()]
    );
    let reg: Vec<String> = fx.registry().await.into_iter().map(|r| r.0).collect();
    let mut want = vec![a.clone(), c.clone()];
    want.sort();
    assert_eq!(reg, want, "the dropped id's registry row is gone");
    assert!(!reg.contains(b));

    // Ids mixed with a new URL; an object with id and url is its id.
    let r = fx
        .patch(
            &rid,
            json!({"Files": [{"id": a, "url": fx.url("/named")}, fx.url("/named"), c]}),
        )
        .await;
    let now = cell_ids(&r.expect_ok()["records"][0]["fields"]["Files"]);
    assert_eq!(now.len(), 3);
    assert_eq!((&now[0], &now[2]), (a, c));
    assert_eq!(
        r.body["records"][0]["fields"]["Files"][1]["filename"],
        "report.csv"
    );
    assert_eq!(fx.registry().await.len(), 3);

    // Ids of another record, another field, another table: 400 naming it.
    let other = fx
        .create(
            &fx.docs,
            json!({"Name": "b", "Files": [fx.url("/files/hello.txt")]}),
        )
        .await;
    let foreign = cell_ids(&other["fields"]["Files"]).remove(0);
    let elsewhere = fx
        .create(
            &fx.other_table,
            json!({"Files": [fx.url("/files/hello.txt")]}),
        )
        .await;
    let far = cell_ids(&elsewhere["fields"]["Files"]).remove(0);
    let missing = "att_AAAAAnothere";
    for (fields, named) in [
        (json!({"Files": [a, foreign]}), foreign.as_str()),
        (json!({"Pics": [a]}), a.as_str()),
        (json!({"Files": [far]}), far.as_str()),
        (json!({"Files": [missing]}), missing),
    ] {
        let m = fx
            .patch(&rid, fields)
            .await
            .expect_error(400, "bad_request");
        assert!(m.contains(named), "{m}");
    }
    let kept = fx
        .person
        .api
        .get(&format!("{}/{rid}", fx.records(&fx.docs)))
        .await;
    assert_eq!(
        cell_ids(&kept.expect_ok()["record"]["fields"]["Files"]),
        now
    );
    assert_eq!(fx.registry().await.len(), 5);

    // Ids on create: refused, nothing written.
    let r = fx
        .person
        .api
        .post(
            &fx.records(&fx.docs),
            json!({"records": [{"fields": {"Name": "new", "Files": [a]}}]}),
        )
        .await;
    let m = r.expect_error(400, "bad_request");
    assert!(m.contains(a.as_str()), "{m}");

    // PUT appends on a matched record; a new record may not take ids.
    let r = fx
        .person
        .api
        .put(
            &fx.records(&fx.docs),
            json!({"merge_on": ["Name"], "records": [{"fields": {"Name": "a", "Files": [fx.url("/"), a]}}]}),
        )
        .await;
    let appended = cell_ids(&r.expect_ok()["records"][0]["fields"]["Files"]);
    assert_eq!(appended.len(), 4, "{appended:?}");
    assert_eq!(appended[..3], now[..]);
    assert_eq!(r.body["records"][0]["created"], false);
    let r = fx
        .person
        .api
        .put(
            &fx.records(&fx.docs),
            json!({"merge_on": ["Name"], "records": [{"fields": {"Name": "zzz", "Files": [a]}}]}),
        )
        .await;
    r.expect_error(400, "bad_request");

    // Null clears the cell and drops every file it held.
    let r = fx.patch(&rid, json!({"Files": null})).await;
    assert_eq!(r.expect_ok()["records"][0]["fields"]["Files"], Value::Null);
    let left: Vec<String> = fx.registry().await.into_iter().map(|r| r.1).collect();
    assert!(!left.contains(&rid), "{left:?}");
}

#[tokio::test]
async fn url_limits_and_failures_fail_the_whole_batch_and_leave_nothing() {
    for store in Store::BOTH {
        url_limits_and_failures_fail_the_whole_batch_and_leave_nothing_on(store).await;
    }
}

async fn url_limits_and_failures_fail_the_whole_batch_and_leave_nothing_on(store: Store) {
    let fx = Fx::new(store).await;
    let api = &fx.person.api;
    let docs = fx.records(&fx.docs);

    // 21 URLs across records and fields: refused before any fetch.
    let urls: Vec<String> = (0..21)
        .map(|i| fx.url(&format!("/files/{i}.txt")))
        .collect();
    let r = api
        .post(
            &docs,
            json!({"records": [
                {"fields": {"Files": &urls[..10]}},
                {"fields": {"Pics": &urls[10..15], "Files": &urls[15..]}}
            ]}),
        )
        .await;
    let m = r.expect_error(400, "bad_request");
    assert!(m.contains("20"), "{m}");
    assert_eq!(
        fx.hits.load(Ordering::SeqCst),
        0,
        "no request reached the server"
    );

    // One bad URL among good ones: 400 naming it and why; nothing kept.
    // A redirect to an internal address is refused without naming it.
    let cases = [
        (
            "/redir-meta",
            "refused: not a public address. Nothing was written.",
        ),
        (
            "/redir-private",
            "refused: not a public address. Nothing was written.",
        ),
        ("/missing.txt", "404"),
        ("/huge", "larger than"),
    ];
    for (path, why) in cases {
        let before = fx.hits.load(Ordering::SeqCst);
        let bad = fx.url(path);
        let r = api
            .post(
                &docs,
                json!({"records": [
                    {"fields": {"Name": "x", "Files": [fx.url("/files/hello.txt"), fx.url("/named")]}},
                    {"fields": {"Pics": [{"url": bad, "filename": "bad.bin"}]}}
                ]}),
            )
            .await;
        let m = r.expect_error(400, "bad_request");
        assert!(m.contains(&bad) && m.contains(why), "{path}: {m}");
        let said = m.replacen(&bad, "", 1);
        for address in ["169.254.169.254", "10.0.0.1", "link-local", "private"] {
            assert!(!said.contains(address), "{path}: {m}");
        }
        assert!(
            fx.hits.load(Ordering::SeqCst) >= before + 3,
            "the good ones were fetched"
        );
        assert_eq!(fx.registry().await, vec![], "{path}: no registry rows");
        if let Some(files) = fx.stored_originals().await {
            assert_eq!(
                files,
                Vec::<PathBuf>::new(),
                "{path}: fetched files deleted"
            );
        }
    }
    // A metadata address written directly is refused too.
    let r = api
        .post(
            &docs,
            json!({"records": [{"fields": {"Files": ["http://169.254.169.254/latest/"]}}]}),
        )
        .await;
    let m = r.expect_error(400, "bad_request");
    assert!(m.contains("169.254.169.254"), "{m}");
    assert!(
        m.ends_with("/latest/: refused: not a public address. Nothing was written."),
        "{m}"
    );
    let page = api.get(&docs).await;
    assert_eq!(
        page.expect_ok()["records"],
        json!([]),
        "nothing was written"
    );
}

#[tokio::test]
async fn webhook_payloads_carry_attachment_objects() {
    for store in Store::BOTH {
        webhook_payloads_carry_attachment_objects_on(store).await;
    }
}

async fn webhook_payloads_carry_attachment_objects_on(store: Store) {
    let fx = Fx::new(store).await;
    let api = &fx.person.api;
    let hook = |trigger: &str| json!({"name": trigger, "trigger_type": trigger, "table_id": fx.docs, "url": fx.url("/hook")});
    let mut webhooks = Vec::new();
    for trigger in ["record_created", "record_updated"] {
        let r = api
            .post(&format!("/api/databases/{}/webhooks", fx.db), hook(trigger))
            .await;
        webhooks.push(id(&r.expect_ok()["webhook"]));
    }
    let rec = fx
        .create(
            &fx.docs,
            json!({"Name": "p", "Files": [fx.url("/files/hello.txt"), fx.url("/named")]}),
        )
        .await;
    let rid = id(&rec);
    let ids = cell_ids(&rec["fields"]["Files"]);
    fx.patch(&rid, json!({"Files": [ids[1]]})).await.expect_ok();

    let body = |webhook: &str| {
        let pg = &fx.pg;
        let webhook = webhook.to_owned();
        async move {
            let row = pg
                .query_one(
                    "SELECT body FROM deliveries WHERE webhook_id = $1",
                    &[&webhook],
                )
                .await
                .unwrap();
            serde_json::from_str::<Value>(row.get::<_, &str>(0)).unwrap()
        }
    };
    let created = body(&webhooks[0]).await;
    let files = created["after"]["fields"]["Files"]
        .as_array()
        .expect("objects")
        .clone();
    assert_eq!(files.len(), 2);
    let mut keys: Vec<&str> = files[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["content_type", "filename", "id", "size_bytes", "url"]
    );
    assert_eq!(files[0]["id"], ids[0].as_str());
    assert_eq!(files[0]["filename"], "hello.txt");
    assert_eq!(files[0]["size_bytes"], HELLO.len());
    assert_eq!(files[1]["content_type"], "text/csv");
    let url = files[1]["url"].as_str().unwrap().to_ascii_lowercase();
    assert!(url.contains("signature="), "{url}");
    assert_eq!(created["after"]["fields"]["Pics"], Value::Null);

    // The update's before still shows the file the update dropped.
    let updated = body(&webhooks[1]).await;
    assert_eq!(cell_ids(&updated["before"]["fields"]["Files"]), ids);
    assert_eq!(
        cell_ids(&updated["after"]["fields"]["Files"]),
        [ids[1].clone()]
    );
}
