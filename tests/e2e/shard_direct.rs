//! Shard nodes trust only principals signed by a router.

use cluster_protocol::control::{Access, Role};
use cluster_protocol::principal::{
    Principal, HEADER_PRINCIPAL, HEADER_SIGNATURE, HEADER_TIMESTAMP,
};
use e2e_tests::{cluster, Person};

fn shard_urls() -> Vec<String> {
    cluster()
        .var("SHARD_URLS")
        .expect("SHARD_URLS in the env file")
        .split_whitespace()
        .map(String::from)
        .collect()
}

fn principal(user_id: &str, database_id: &str) -> Principal {
    Principal {
        user_id: user_id.into(),
        key_id: "key_000000000000".into(),
        access: Access::ReadWrite,
        narrowed: false,
        database_id: Some(database_id.into()),
        role: Some(Role::Owner),
        support: false,
        epoch: None,
        new_database: None,
    }
}

#[tokio::test]
async fn unsigned_or_forged_requests_are_refused_and_a_misplaced_one_is_421() {
    let person = Person::new().await;
    let db_id = &person.api.new_database("direct").await;
    let home = cluster().control_plane.database(db_id).await.unwrap().shard;
    let shards = cluster().control_plane.shards().await.unwrap().shards;
    let http = reqwest::Client::new();
    let path = format!("/api/databases/{db_id}/tables");
    let now = chrono::Utc::now().timestamp();

    for shard in &shards {
        let url = format!("{}{path}", shard.url);
        let unsigned = http.get(&url).send().await.unwrap();
        assert_eq!(unsigned.status().as_u16(), 401);

        let forged = principal(&person.user_id, db_id).sign(b"not the cluster secret", now);
        let r = http
            .get(&url)
            .header(HEADER_PRINCIPAL, forged.principal)
            .header(HEADER_TIMESTAMP, forged.timestamp)
            .header(HEADER_SIGNATURE, forged.signature)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 401);

        let signed =
            principal(&person.user_id, db_id).sign(cluster().cluster_secret.as_bytes(), now);
        let r = http
            .get(&url)
            .header(HEADER_PRINCIPAL, signed.principal)
            .header(HEADER_TIMESTAMP, signed.timestamp)
            .header(HEADER_SIGNATURE, signed.signature)
            .send()
            .await
            .unwrap();
        let expected = if shard.name == home { 200 } else { 421 };
        assert_eq!(
            r.status().as_u16(),
            expected,
            "shard {} (home {home})",
            shard.name
        );
    }
    assert!(!shard_urls().is_empty());
}
