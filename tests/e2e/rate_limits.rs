//! Part C limits: per-key sliding window (600/min, charged after the secret
//! verifies), per-address shield (3,000/min with a bearer, 60/min without,
//! address from the LAST x-forwarded-for entry), and the signalling headers.

use cluster_protocol::control::{Access, DatabaseScope};
use e2e_tests::{fresh_address, id, Api, Person, Reply};
use futures::future::join_all;

const KEY_BUDGET: usize = 600;

async fn burst(api: &Api, path: &str, n: usize) -> Vec<Reply> {
    let mut out = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(25) {
        out.extend(join_all(chunk.iter().map(|_| api.get(path))).await);
    }
    out
}

fn remaining(r: &Reply) -> i64 {
    r.header("x-ratelimit-remaining")
        .expect("remaining header")
        .parse()
        .expect("a number")
}

#[tokio::test]
async fn key_budget_headers_on_success_and_error() {
    let person = Person::new().await;
    let ok = person.api.get("/api/meta/whoami").await;
    ok.expect_ok();
    assert_eq!(ok.header("x-ratelimit-limit"), Some("600"));
    let first = remaining(&ok);
    assert!((0..=599).contains(&first));
    let missing = person.api.get("/api/tables/tbl_000000000000").await;
    missing.expect_error(404, "not_found");
    assert_eq!(missing.header("x-ratelimit-limit"), Some("600"));
    assert!(remaining(&missing) < first, "an error still spends budget");
    let unknown_path = person.api.get("/api/nothing-here").await;
    unknown_path.expect_error(404, "not_found");
    assert_eq!(unknown_path.header("x-ratelimit-limit"), Some("600"));
}

#[tokio::test]
async fn the_601st_request_in_a_minute_is_429_and_another_key_is_another_budget() {
    let person = Person::new().await;
    let replies = burst(&person.api, "/api/meta/whoami", KEY_BUDGET).await;
    assert!(
        replies.iter().all(|r| r.status == 200),
        "the first 600 pass"
    );
    let mut seen: Vec<i64> = replies.iter().map(remaining).collect();
    seen.sort();
    assert_eq!(seen[0], 0, "budget counts down to zero");

    let over = person.api.get("/api/meta/whoami").await;
    let msg = over.expect_error(429, "rate_limited");
    let retry: u64 = over
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("whole seconds");
    assert!((1..=60).contains(&retry), "retry-after {retry}");
    assert_eq!(msg, format!("Too many requests. Retry in about {retry}s."));
    assert_eq!(over.header("x-ratelimit-limit"), Some("600"));
    assert_eq!(remaining(&over), 0);

    let (_, second_key) = person
        .another_key(Access::ReadWrite, DatabaseScope::All)
        .await;
    let mut second = second_key.clone();
    second.address = person.api.address.clone();
    let r = second.get("/api/meta/whoami").await;
    r.expect_ok();
    assert_eq!(remaining(&r), 599, "two keys, two budgets");
}

#[tokio::test]
async fn wrong_secrets_do_not_spend_the_key_budget() {
    let person = Person::new().await;
    let first = person.api.get("/api/meta/whoami").await;
    assert_eq!(remaining(&first), 599);
    let token = person.api.token.clone().unwrap();
    let (key_id, _) = token.split_once('.').unwrap();
    let mut liar = Api::with_token(&format!("{key_id}.not-the-secret"));
    liar.address = person.api.address.clone();
    for r in burst(&liar, "/api/meta/whoami", 30).await {
        r.expect_error(401, "unauthorized");
    }
    let r = person.api.get("/api/meta/whoami").await;
    r.expect_ok();
    assert_eq!(remaining(&r), 598);
}

#[tokio::test]
async fn anonymous_callers_get_60_a_minute_per_address() {
    let api = Api::anonymous();
    let replies = burst(&api, "/api/health", 60).await;
    assert!(replies.iter().all(|r| r.status == 200), "60 pass");
    let over = api.get("/api/health").await;
    over.expect_error(429, "rate_limited");
    let retry: u64 = over.header("retry-after").unwrap().parse().unwrap();
    assert!(retry >= 1);
    assert!(
        over.header("x-ratelimit-limit").is_none(),
        "only the key budget is published"
    );

    // Another address has its own shield.
    let other = Api::anonymous();
    other.get("/api/health").await.expect_ok();
}

#[tokio::test]
async fn the_last_forwarded_for_entry_is_the_address() {
    let api = Api::anonymous();
    let mine = api.address.clone();
    // The same address behind different earlier hops shares one shield.
    let mut spent = 0;
    for i in 0..60 {
        let mut hop = api.clone();
        hop.address = format!("{}, {mine}", fresh_address());
        let _ = i;
        if hop.get("/api/health").await.status == 200 {
            spent += 1;
        }
    }
    assert_eq!(spent, 60);
    let mut hop = api.clone();
    hop.address = format!("203.0.113.9, {mine}");
    hop.get("/api/health")
        .await
        .expect_error(429, "rate_limited");
    // A different last entry is a different address.
    let mut other = api.clone();
    other.address = format!("{mine}, {}", fresh_address());
    other.get("/api/health").await.expect_ok();
}

#[tokio::test]
async fn bearer_carrying_callers_get_3000_a_minute_per_address() {
    let api = Api::with_token("key_000000000000.nothing");
    let replies = burst(&api, "/api/meta/whoami", 3000).await;
    assert!(
        replies.iter().all(|r| r.status == 401),
        "unknown key: 401 until the shield trips"
    );
    api.get("/api/meta/whoami")
        .await
        .expect_error(429, "rate_limited");
}

#[tokio::test]
async fn a_tagged_read_over_the_key_budget_is_429_with_the_budget_headers() {
    let person = Person::new().await;
    let db = person.api.new_database("budget").await;
    let table = id(&person.api.create_table(&db, "t").await);
    let path = format!("/api/tables/{table}");
    // Two requests spent; read in bursts until the budget says no.
    let mut passed = 2;
    let mut refused = None;
    while refused.is_none() && passed < 700 {
        for r in burst(&person.api, &path, 25).await {
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
    assert!(
        passed >= KEY_BUDGET,
        "{passed} requests passed before the 429"
    );
    assert_eq!(over.header("x-ratelimit-limit"), Some("600"));
    assert_eq!(remaining(&over), 0);
    assert!(over.header("retry-after").is_some());
}
