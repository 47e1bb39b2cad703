//! `GET /api/share/{token}/records`: no key, routed by the token's tag,
//! forwarded with a share principal.

use super::*;

#[tokio::test]
async fn share_reads_need_no_key_and_carry_a_share_principal() {
    let e = env(100, 3).await;
    let old = Arc::new(Shard {
        misplaced_first: AtomicUsize::new(1),
        ..Shard::default()
    });
    let url = spawn_shard(old.clone()).await;
    let (db, tag) = e.database(&[&url]);
    let token = cluster_protocol::ids::new_share_token(&tag);
    let path = format!("/api/share/{token}/records?page_size=2");

    // No key: forwarded (after one 421 retried) with a share principal.
    let r = e.get(&path, None).await;
    assert_eq!(r.status(), 200);
    assert!(header(&r, "x-ratelimit-limit").is_none());
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["path"], path);
    assert_eq!(v["principal"]["share"], true);
    assert_eq!(v["principal"]["database_id"], db);
    assert_eq!(v["principal"]["user_id"], "");
    assert_eq!(v["principal"]["key_id"], "");
    assert!(v["principal"].get("role").is_none());
    assert_eq!(v["authorization"], Value::Null);
    assert_eq!(old.hits.load(Ordering::SeqCst), 2);

    // A caller's key is not forwarded, and not verified either.
    let mut req = e
        .http
        .get(format!("{}{path}", e.router))
        .header("x-forwarded-for", format!("203.0.113.9, {}", e.address))
        .header("authorization", "Bearer key_nothingatall.nope");
    req = req.header("cookie", "session=1");
    let r = req.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["authorization"], Value::Null);
    assert_eq!(v["principal"]["share"], true);

    // Malformed tokens and unknown tags never reach a shard; other methods
    // are not the share read.
    let hits = old.hits.load(Ordering::SeqCst);
    let other = Env {
        address: format!("10.9.{}.{}", rand::random::<u8>(), rand::random::<u8>()),
        ..env(100, 100).await
    };
    for bad in [
        "/api/share/short/records".to_string(),
        format!(
            "/api/share/{}/records",
            cluster_protocol::ids::new_share_token("zZzZz")
        ),
    ] {
        let r = other.get(&bad, None).await;
        assert_eq!(r.status(), 404, "{bad}");
    }
    let r = other
        .http
        .post(format!("{}{path}", other.router))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "not a share read: the keyed gate answers");
    assert_eq!(old.hits.load(Ordering::SeqCst), hits);

    // The anonymous shield (3 a minute here; two spent above without a
    // bearer... one with): the next ones are 429.
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(e.get(&path, None).await.status().as_u16());
    }
    assert!(statuses.contains(&429), "{statuses:?}");
}
