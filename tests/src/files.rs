//! An attachment to carry across a database move: a small text file
//! uploaded into a record of its own table, and its links fetched as a
//! browser would (the cluster's `/api/files/...` route through the router,
//! or a presigned S3 URL).

use serde_json::json;

use crate::{cluster, fresh_address, id, Api};

const BOUNDARY: &str = "----e2e-moves-boundary";

/// The bytes every upload here carries.
pub const FILE: &[u8] = b"moved with its database";

/// An attachment uploaded before a move: its table, record and first link.
pub struct Upload {
    pub table: String,
    pub record: String,
    pub link: String,
}

fn one_file_form(field: &str, record: &str, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\n"
        )
        .as_bytes(),
    );
    out.extend_from_slice(bytes);
    for (name, value) in [("field_id", field), ("record_id", record)] {
        out.extend_from_slice(
            format!(
                "\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}"
            )
            .as_bytes(),
        );
    }
    out.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    out
}

/// Where a browser would fetch `link`: the cluster's own file route
/// through this cluster's router, or a presigned S3 URL as it is.
pub fn link_target(link: &str) -> String {
    let url = reqwest::Url::parse(link).expect("a link is a URL");
    if url.path().starts_with("/api/files/") {
        format!(
            "{}{}?{}",
            cluster().router_url,
            url.path(),
            url.query().unwrap_or_default()
        )
    } else {
        link.to_owned()
    }
}

/// Status and body of a link, followed without an API key.
pub async fn fetch(link: &str) -> (u16, Vec<u8>) {
    let target = link_target(link);
    let resp = reqwest::Client::new()
        .get(target)
        .header("x-forwarded-for", fresh_address())
        .send()
        .await
        .expect("link reachable");
    let status = resp.status().as_u16();
    (status, resp.bytes().await.expect("body").to_vec())
}

/// Makes table "Docs" with an attachment field in `db`, a record, and
/// uploads [`FILE`] into its cell; asserts its link serves the bytes.
pub async fn upload(api: &Api, db: &str) -> Upload {
    let table = id(&api.create_table(db, "Docs").await);
    let field = id(&api
        .create_field(&table, json!({"name": "Files", "type": "attachment"}))
        .await);
    let made = api
        .post(
            &format!("/api/tables/{table}/records"),
            json!({"records": [{"fields": {}}]}),
        )
        .await;
    let record = id(&made.expect_ok()["records"][0]);
    let r = api
        .post_multipart(
            &format!("/api/tables/{table}/attachments"),
            BOUNDARY,
            one_file_form(&field, &record, FILE),
        )
        .await;
    let uploaded = r.expect_ok();
    let link = uploaded["url"].as_str().expect("a url").to_owned();
    assert_eq!(fetch(&link).await, (200, FILE.to_vec()));
    // An upload is not in the cell until a write puts its id there (part B).
    api.patch(
        &format!("/api/tables/{table}/records"),
        json!({"records": [{"id": record, "fields": {"Files": [id(uploaded)]}}]}),
    )
    .await
    .expect_ok();
    Upload {
        table,
        record,
        link,
    }
}

/// The link in the record's cell, read now.
pub async fn cell_link(api: &Api, up: &Upload) -> String {
    let r = api
        .get(&format!("/api/tables/{}/records/{}", up.table, up.record))
        .await;
    r.expect_ok()["record"]["fields"]["Files"][0]["url"]
        .as_str()
        .expect("the attachment in the cell")
        .to_owned()
}

/// After a move: the link handed out before it and a fresh one from the
/// record both serve the same bytes.
pub async fn assert_links_work(api: &Api, up: &Upload) {
    assert_eq!(
        fetch(&up.link).await,
        (200, FILE.to_vec()),
        "the link from before the move"
    );
    let fresh = cell_link(api, up).await;
    assert_eq!(
        fetch(&fresh).await,
        (200, FILE.to_vec()),
        "a link read after the move"
    );
}
