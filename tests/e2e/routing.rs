//! The router's own answers: unknown paths, odd ids, unknown routing tags.

use e2e_tests::Person;

#[tokio::test]
async fn unknown_paths_and_odd_ids_are_404_in_the_envelope() {
    let person = Person::new().await;
    let db_id = &person.api.new_database("route").await;
    let paths = [
        "/api/nothing".to_string(),
        "/nothing".to_string(),
        "/api/tables/tbl_x".to_string(),
        "/api/tables/not-an-id".to_string(),
        "/api/tables/tbl_%00%00".to_string(),
        format!("/api/tables/{}", db_id.replace("db_", "tbl_")),
        "/api/tables/tbl_zzzzz0000000".to_string(),
        "/api/databases/db_zzzzz0000000/tables".to_string(),
        format!("/api/databases/{db_id}/nothing"),
        format!("/api/databases/{db_id}x/tables"),
    ];
    for p in paths {
        let r = person.api.get(&p).await;
        assert_eq!(r.status, 404, "{p}: {}", r.body);
        assert_eq!(r.body["error"]["code"], "not_found", "{p}");
    }
    // Unsupported methods are 404 too.
    let r = person
        .api
        .send(
            reqwest::Method::PUT,
            &format!("/api/databases/{db_id}/tables"),
            None,
        )
        .await;
    r.expect_error(404, "not_found");
}
