//! Part C on the router's hot path: a key that is verified and warm on the
//! router (secret digest, access and placement cached) still answers exactly
//! as the gate says on the very next tagged read after a revocation, a
//! suspension, a removed membership or a spent budget.

use cluster_protocol::control::Role;
use e2e_tests::{cluster, id, Person};
use futures::future::join_all;

/// A person with a database and a table, whose key has read the table twice
/// (verified on the router, access cached, budget well clear).
async fn warm_reader() -> (Person, String) {
    let person = Person::new().await;
    let db = person.api.new_database("spec").await;
    let table = id(&person.api.create_table(&db, "t").await);
    let path = format!("/api/tables/{table}");
    person.api.get(&path).await.expect_ok();
    person.api.get(&path).await.expect_ok();
    (person, path)
}

#[tokio::test]
async fn a_revoked_key_reading_a_table_is_refused_on_the_very_next_request() {
    let (person, path) = warm_reader().await;
    cluster()
        .control_plane
        .revoke_key(&person.key_id)
        .await
        .expect("revoke");
    person
        .api
        .get(&path)
        .await
        .expect_error(401, "unauthorized");
}

#[tokio::test]
async fn a_suspended_user_reading_a_table_is_refused_until_unsuspended() {
    let (person, path) = warm_reader().await;
    let cp = &cluster().control_plane;
    cp.suspend_user(&person.user_id, true)
        .await
        .expect("suspend");
    person
        .api
        .get(&path)
        .await
        .expect_error(401, "unauthorized");
    cp.suspend_user(&person.user_id, false)
        .await
        .expect("unsuspend");
    person.api.get(&path).await.expect_ok();
}

#[tokio::test]
async fn a_removed_member_reading_a_table_gets_404_on_the_very_next_request() {
    let (owner, path) = warm_reader().await;
    let table = owner.api.get(&path).await.expect_ok()["table"].clone();
    let db = table["database_id"]
        .as_str()
        .expect("database_id")
        .to_owned();
    let viewer = Person::member(&db, Role::Viewer).await;
    viewer.api.get(&path).await.expect_ok();
    viewer.api.get(&path).await.expect_ok();
    cluster()
        .control_plane
        .remove_member(&db, &viewer.user_id)
        .await
        .expect("remove member");
    viewer.api.get(&path).await.expect_error(404, "not_found");
    owner.api.get(&path).await.expect_ok();
}

#[tokio::test]
async fn a_tagged_read_over_the_key_budget_is_429_with_the_budget_headers() {
    let (person, path) = warm_reader().await;
    // Four requests spent; read in concurrent bursts until the budget says no.
    let mut passed = 4;
    let mut refused = None;
    while refused.is_none() && passed < 700 {
        let burst = join_all((0..25).map(|_| person.api.get(&path))).await;
        for r in burst {
            match r.status {
                200 => passed += 1,
                _ => {
                    r.expect_error(429, "rate_limited");
                    refused.get_or_insert(r);
                }
            }
        }
    }
    let over = refused.expect("a 429 within 700 requests");
    assert!(passed >= 600, "{passed} requests passed before the 429");
    assert_eq!(over.header("x-ratelimit-limit"), Some("600"));
    assert_eq!(over.header("x-ratelimit-remaining"), Some("0"));
    assert!(over.header("retry-after").is_some());
}
