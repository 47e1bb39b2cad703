//! Bytes leaving the store: purge, table delete, the retention purger,
//! unplaced uploads and retried deletes (the blob sweeper).

use super::*;

#[tokio::test]
async fn purge_and_table_delete_remove_rows_and_bytes() {
    let f = fixture().await;
    let up = |record: String| {
        let f = &f;
        async move {
            let r = upload(
                &f.app,
                &f.table,
                &f.owner,
                &[
                    Part::Text("field_id", &f.files),
                    Part::Text("record_id", &record),
                    Part::File(Some("p.png"), None, &png(40, 30)),
                ],
            )
            .await;
            assert_eq!(r.status, 200, "{:?}", r.body);
            r.body["id"].as_str().unwrap().to_owned()
        }
    };
    let kept_record = new_record(&f.app, &f.table, &f.owner).await;
    let purged = up(f.record.clone()).await;
    let kept = up(kept_record.clone()).await;
    assert!(original_path(&f.db, &purged).exists());
    // Trashed: the bytes stay.
    let r = f
        .app
        .call(
            "DELETE",
            &format!("/api/tables/{}/records", f.table),
            Signing::With(&f.owner),
            Body::Json(json!({"records": [f.record]})),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = f
        .app
        .post(
            &format!("/api/tables/{}/trash/purge", f.table),
            &f.owner,
            json!({"ids": [f.record]}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let rows: i64 = f
        .app
        .pg
        .query_one("SELECT count(*) FROM attachments WHERE id = $1", &[&purged])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
    let dir = blob_root().join(&f.db).join(&purged);
    eventually("the purged record's bytes are deleted", || !dir.exists()).await;
    assert!(original_path(&f.db, &kept).exists());

    // Purge all.
    let second = new_record(&f.app, &f.table, &f.owner).await;
    let all = up(second.clone()).await;
    f.app
        .call(
            "DELETE",
            &format!("/api/tables/{}/records", f.table),
            Signing::With(&f.owner),
            Body::Json(json!({"records": [second]})),
        )
        .await;
    let r = f
        .app
        .post(
            &format!("/api/tables/{}/trash/purge", f.table),
            &f.owner,
            json!({"all": true}),
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let dir = blob_root().join(&f.db).join(&all);
    eventually("purge all deletes the bytes", || !dir.exists()).await;
    assert!(original_path(&f.db, &kept).exists());
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
    let kept_size = std::fs::metadata(original_path(&f.db, &kept))
        .unwrap()
        .len();
    assert_eq!(held, kept_size as i64);

    // Deleting the table takes the rest.
    let r = f
        .app
        .delete(&format!("/api/tables/{}", f.table), &f.owner)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let dir = blob_root().join(&f.db).join(&kept);
    eventually("table delete deletes the bytes", || !dir.exists()).await;
}

#[tokio::test]
async fn the_retention_purger_takes_attachments_too() {
    let f = fixture().await;
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(Some("a.txt"), None, b"old"),
        ],
    )
    .await;
    let id = r.body["id"].as_str().unwrap().to_owned();
    let qualified = format!("\"{}\".\"{}\"", f.db, f.table);
    f.app
        .pg
        .execute(
            &format!(
                "UPDATE {qualified} SET deleted_at = now() - interval '30 days' WHERE id = $1"
            ),
            &[&f.record],
        )
        .await
        .unwrap();
    shard_node::trash::purger::purge_expired(&f.app.db, shard_node::config::TRASH_RETENTION)
        .await
        .unwrap();
    let rows: i64 = f
        .app
        .pg
        .query_one("SELECT count(*) FROM attachments WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
    let dir = blob_root().join(&f.db).join(&id);
    eventually("the purger's attachments lose their bytes", || {
        !dir.exists()
    })
    .await;
}

#[tokio::test]
async fn unplaced_uploads_expire_and_failed_deletes_are_retried() {
    let f = fixture().await;
    let r = upload(
        &f.app,
        &f.table,
        &f.owner,
        &[
            Part::Text("field_id", &f.files),
            Part::Text("record_id", &f.record),
            Part::File(Some("a.txt"), None, b"forgotten"),
        ],
    )
    .await;
    let id = r.body["id"].as_str().unwrap().to_owned();
    f.app
        .pg
        .execute(
            "UPDATE attachments SET created_at = now() - interval '2 days' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let n = shard_node::attachments::sweeper::expire_unplaced(&f.app.db)
        .await
        .unwrap();
    assert!(n >= 1);
    let dir = blob_root().join(&f.db).join(&id);
    eventually("the unplaced upload's bytes are deleted", || !dir.exists()).await;

    // A queued row whose delete fails (the key is not valid) is kept with
    // its attempt counted and pushed into the future.
    let bad = format!("att_{}", "!".repeat(12));
    f.app
        .pg
        .execute(
            "INSERT INTO blob_garbage (attachment_id, database_id, thumbnails) VALUES ($1, $2, true)",
            &[&bad, &f.db],
        )
        .await
        .unwrap();
    let store = blobstore::BlobStore::open(&blobstore::Settings::local(blob_root())).unwrap();
    // Another node's sweeper may take it first; either way it ends up failed.
    let _ = shard_node::attachments::sweeper::pass(&f.app.db, &store)
        .await
        .unwrap();
    let mut attempts = 0;
    for _ in 0..300 {
        let row = f
            .app
            .pg
            .query_one(
                "SELECT attempts, due_at > now(), last_error IS NOT NULL FROM blob_garbage WHERE attachment_id = $1",
                &[&bad],
            )
            .await
            .unwrap();
        attempts = row.get::<_, i32>(0);
        if attempts >= 1 {
            assert!(row.get::<_, bool>(1));
            assert!(row.get::<_, bool>(2));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(attempts >= 1);
    f.app
        .pg
        .execute("DELETE FROM blob_garbage WHERE attachment_id = $1", &[&bad])
        .await
        .unwrap();
}
