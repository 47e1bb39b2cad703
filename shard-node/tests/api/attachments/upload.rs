//! The upload route: reply shape, thumbnails, roles, bindings, malformed
//! forms and the byte ceiling.

use super::*;

#[tokio::test]
async fn an_image_upload_answers_the_entry_and_gets_thumbnails() {
    let f = fixture().await;
    let bytes = png(2000, 1000);
    // The file first: it is streamed before the ids are known.
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::File(Some("photo.png"), None, &bytes),
            Part::Text("record_id", &f.record),
            Part::Text("field_id", &f.files),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let id = r.body["id"].as_str().unwrap();
    assert!(id.starts_with(&format!("att_{}", &f.db[3..8])), "{id}");
    assert_eq!(r.body["filename"], "photo.png");
    assert_eq!(r.body["size_bytes"], bytes.len() as u64);
    assert_eq!(r.body["content_type"], "image/png");
    let mut keys: Vec<&str> = r
        .body
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    keys.sort();
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
    let url = r.body["url"].as_str().unwrap();
    let thumb = r.body["thumb_url"].as_str().unwrap();
    let card = r.body["card_url"].as_str().unwrap();
    assert!(url.contains(&format!("/api/files/{id}/original?")), "{url}");
    assert_ne!(thumb, url);
    assert_ne!(card, url);

    let original = f.app.http.get(on_node(&f.app, url)).send().await.unwrap();
    assert_eq!(original.status(), 200);
    assert_eq!(original.headers()["content-type"], "image/png");
    assert_eq!(original.headers()["x-content-type-options"], "nosniff");
    assert_eq!(original.headers()["accept-ranges"], "bytes");
    assert_eq!(original.bytes().await.unwrap().as_ref(), &bytes[..]);
    for (link, size) in [(thumb, (256, 128)), (card, (1024, 512))] {
        let resp = f.app.http.get(on_node(&f.app, link)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "image/webp");
        let webp = resp.bytes().await.unwrap();
        let image = image::load_from_memory_with_format(&webp, image::ImageFormat::WebP).unwrap();
        assert_eq!((image.width(), image.height()), size);
    }

    // The registry row: unplaced, bound to the table, field and record.
    let row = f
        .app
        .pg
        .query_one(
            "SELECT table_id, field_id, record_id, placed, thumbnails FROM attachments WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), f.table);
    assert_eq!(row.get::<_, String>(1), f.files);
    assert_eq!(row.get::<_, String>(2), f.record);
    assert!(!row.get::<_, bool>(3));
    assert!(row.get::<_, bool>(4));
    let held: i64 = f
        .app
        .pg
        .query_one(
            "SELECT attachment_bytes FROM databases WHERE id = $1",
            &[&f.db],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(held, bytes.len() as i64);
}

#[tokio::test]
async fn a_small_image_is_never_enlarged() {
    let f = fixture().await;
    let bytes = png(300, 200);
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(Some("small.png"), Some("image/png"), &bytes),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    for key in ["thumb_url", "card_url"] {
        let link = r.body[key].as_str().unwrap();
        let webp = f
            .app
            .http
            .get(on_node(&f.app, link))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let image = image::load_from_memory_with_format(&webp, image::ImageFormat::WebP).unwrap();
        let expected = if key == "thumb_url" {
            (256, 171)
        } else {
            (300, 200)
        };
        assert_eq!((image.width(), image.height()), expected, "{key}");
    }
}

#[tokio::test]
async fn text_svg_and_undecodable_files_keep_one_link() {
    let f = fixture().await;
    let svg = br#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>"#;
    let cases: [(&str, Option<&str>, &[u8], &str); 4] = [
        (
            "notes.txt",
            Some("text/plain"),
            b"hello world",
            "text/plain",
        ),
        ("logo.svg", Some("image/svg+xml"), svg, "image/svg+xml"),
        (
            "broken.png",
            Some("image/png"),
            b"\x89PNG\r\n\x1a\nbroken",
            "image/png",
        ),
        (
            "blob",
            Some("application/octet-stream"),
            b"\x00\x01\x02",
            "application/octet-stream",
        ),
    ];
    for (name, ct, bytes, expected) in cases {
        let r = upload(
            &f.app,
            &f.table,
            &f.owner,
            &[
                Part::Text("field_id", &f.files),
                Part::File(Some(name), ct, bytes),
                Part::Text("record_id", &f.record),
            ],
        )
        .await;
        assert_eq!(r.status, 200, "{name}: {:?}", r.body);
        assert_eq!(r.body["content_type"], expected, "{name}");
        assert_eq!(r.body["thumb_url"], r.body["url"], "{name}");
        assert_eq!(r.body["card_url"], r.body["url"], "{name}");
    }
    // The SVG is a download, never a page of the API's origin.
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(Some("logo.svg"), Some("image/svg+xml"), svg),
        ],
    )
    .await;
    let resp = f
        .app
        .http
        .get(on_node(&f.app, r.body["url"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    let disposition = resp.headers()["content-disposition"].to_str().unwrap();
    assert!(disposition.starts_with("attachment;"), "{disposition}");
    // No filename: stored as `file`.
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(None, Some("text/plain"), b"x"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["filename"], "file");
}

#[tokio::test]
async fn roles_decide_who_uploads() {
    let f = fixture().await;
    let parts = [
        Part::Text("field_id", &f.files),
        Part::Text("record_id", &f.record),
        Part::File(Some("a.txt"), Some("text/plain"), b"a"),
    ];
    let r = upload(&f.app, &f.table, &editor(&f.db), &parts).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = upload(&f.app, &f.table, &viewer(&f.db), &parts).await;
    assert_eq!(r.status, 403);
    assert_eq!(r.error_message(), forbidden::VIEWER);
    let r = upload(
        &f.app,
        &f.table,
        &read_only(member(&user_id(), &f.db, Role::Editor)),
        &parts,
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.error_message(), forbidden::KEY_READ_ONLY);
    let stranger = Principal {
        role: None,
        ..editor(&f.db)
    };
    let r = upload(&f.app, &f.table, &stranger, &parts).await;
    assert_eq!(r.status, 404);
    assert_eq!(stored_attachments(&f.db).len(), 1);
}

#[tokio::test]
async fn the_field_and_record_must_be_this_tables() {
    let f = fixture().await;
    let other = f.app.create_table_id(&f.db, &f.owner, "Other").await;
    let r = f
        .app
        .post(
            &format!("/api/tables/{other}/fields"),
            &f.owner,
            json!({"name": "Elsewhere", "type": "attachment"}),
        )
        .await;
    let foreign_field = r.body["field"]["id"].as_str().unwrap().to_owned();
    let r = f
        .app
        .post(
            &format!("/api/tables/{}/fields", f.table),
            &f.owner,
            json!({"name": "Title", "type": "single_line_text"}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let text_field = r.body["field"]["id"].as_str().unwrap().to_owned();
    let foreign_record = new_record(&f.app, &other, &f.owner).await;
    let trashed = new_record(&f.app, &f.table, &f.owner).await;
    let r = f
        .app
        .call(
            "DELETE",
            &format!("/api/tables/{}/records", f.table),
            Signing::With(&f.owner),
            Body::Json(json!({"records": [trashed]})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    let try_with = |field: String, record: String, file_first: bool| {
        let f = &f;
        async move {
            let file = Part::File(Some("a.txt"), Some("text/plain"), b"abc");
            let parts = if file_first {
                vec![
                    file,
                    Part::Text("field_id", &field),
                    Part::Text("record_id", &record),
                ]
            } else {
                vec![
                    Part::Text("field_id", &field),
                    Part::Text("record_id", &record),
                    file,
                ]
            };
            upload(&f.app, &f.table, &f.owner, &parts).await
        }
    };
    for file_first in [true, false] {
        let r = try_with(text_field.clone(), f.record.clone(), file_first).await;
        assert_eq!(r.status, 400, "{:?}", r.body);
        assert_eq!(
            r.error_message(),
            format!("field_id {text_field} is a single_line_text field; attachments go into an attachment field.")
        );
        let r = try_with(foreign_field.clone(), f.record.clone(), file_first).await;
        assert_eq!(r.status, 400, "{:?}", r.body);
        assert_eq!(
            r.error_message(),
            format!(
                "field_id {foreign_field} is a field of another table, not of {}.",
                f.table
            )
        );
        let r = try_with("fld_nothing".into(), f.record.clone(), file_first).await;
        assert_eq!(r.status, 400, "{:?}", r.body);
        let r = try_with(f.files.clone(), trashed.clone(), file_first).await;
        assert_eq!(r.status, 404, "{:?}", r.body);
        assert_eq!(r.error_code(), "not_found");
        let r = try_with(
            f.files.clone(),
            format!("rec_{}zzzzzzz", &f.db[3..8]),
            file_first,
        )
        .await;
        assert_eq!(r.status, 404, "{:?}", r.body);
        let r = try_with(f.files.clone(), foreign_record.clone(), file_first).await;
        assert_eq!(r.status, 400, "{:?}", r.body);
        assert_eq!(
            r.error_message(),
            format!(
                "record_id {foreign_record} is a record of another table, not of {}.",
                f.table
            )
        );
    }
    // An unknown table is 404 before the body is read.
    let r = upload(
        &f.app,
        &format!("tbl_{}zzzzzzz", &f.db[3..8]),
        &f.owner,
        &[Part::File(Some("a.txt"), None, b"abc")],
    )
    .await;
    assert_eq!(r.status, 404);
    // Nothing was kept by any refusal.
    assert!(
        stored_attachments(&f.db).is_empty(),
        "{:?}",
        stored_attachments(&f.db)
    );
    let rows: i64 = f
        .app
        .pg
        .query_one(
            "SELECT count(*) FROM attachments WHERE database_id = $1",
            &[&f.db],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn malformed_forms_are_refused_saying_what_is_wrong() {
    let f = fixture().await;
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[Part::File(Some("a.txt"), None, b"abc")],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.error_message(),
        "The multipart parts field_id, record_id are missing: an upload needs file, field_id and record_id."
    );
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
        ],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.error_message(),
        "The multipart part file is missing: an upload needs file, field_id and record_id."
    );
    // Truncated in the middle of the file.
    let mut body = form(&[
        Part::Text("field_id", &f.files),
        Part::Text("record_id", &f.record),
        Part::File(Some("big.bin"), None, &vec![7u8; 200_000]),
    ]);
    body.truncate(100_000);
    let r = send_raw(&f.app, &f.table, &f.owner, body).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(
        r.error_message(),
        "The multipart body could not be read: it is malformed or truncated."
    );
    // Not multipart at all.
    let r = f
        .app
        .post(
            &format!("/api/tables/{}/attachments", f.table),
            &f.owner,
            json!({}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(r
        .error_message()
        .starts_with("Request body must be multipart/form-data"));
    // Two files.
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(Some("a.txt"), None, b"a"),
            Part::File(Some("b.txt"), None, b"b"),
        ],
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(
        stored_attachments(&f.db).is_empty(),
        "{:?}",
        stored_attachments(&f.db)
    );
}

#[tokio::test]
async fn the_database_byte_ceiling_refuses_and_keeps_nothing() {
    let f = fixture().await;
    let ceiling = shard_node::attachments::limits::MAX_DATABASE_BYTES;
    f.app
        .pg
        .execute(
            "UPDATE databases SET attachment_bytes = $2 WHERE id = $1",
            &[&f.db, &(ceiling - 10)],
        )
        .await
        .unwrap();
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::File(Some("a.txt"), Some("text/plain"), &[b'x'; 11]),
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
        ],
    )
    .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(
        r.error_message()
            .contains("100 GB limit of attachment storage"),
        "{}",
        r.error_message()
    );
    assert!(stored_attachments(&f.db).is_empty());
}
