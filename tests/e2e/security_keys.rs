//! Guessing a key's secret: the lockout is per (key, address), so the owner
//! keeps working from elsewhere, and a key verified on the router is checked
//! from memory and never locked out. (The argon2 bounds themselves, the 503
//! when no slot frees up and the count of hashes of a burst are pinned by the
//! router's own tests, which can shrink its limits.)

use e2e_tests::{fresh_address, Api, Person};

fn with(api: &Api, token: String, address: &str) -> Api {
    Api {
        token: Some(token),
        address: address.to_string(),
        ..api.clone()
    }
}

#[tokio::test]
async fn guesses_from_one_address_do_not_lock_out_the_owner_elsewhere() {
    // A fresh key: not yet verified on the router.
    let owner = Person::new().await;
    let token = owner.api.token.clone().expect("token");
    let attacker = fresh_address();
    let guesses = (0..30).map(|i| {
        let wrong = with(&owner.api, format!("{}.guess{i}", owner.key_id), &attacker);
        async move { wrong.get("/api/meta/whoami").await }
    });
    for reply in futures::future::join_all(guesses).await {
        reply.expect_error(401, "unauthorized");
    }
    // The guessing address is locked out, even with the right secret ...
    with(&owner.api, token.clone(), &attacker)
        .get("/api/meta/whoami")
        .await
        .expect_error(401, "unauthorized");
    // ... the owner, from another address, is not.
    let me = owner.api.get("/api/meta/whoami").await;
    assert_eq!(me.expect_ok()["key"]["id"], owner.key_id.as_str());

    // Verified now: wrong guesses from anywhere change nothing for it.
    for i in 0..10 {
        with(
            &owner.api,
            format!("{}.again{i}", owner.key_id),
            &owner.api.address,
        )
        .get("/api/meta/whoami")
        .await
        .expect_error(401, "unauthorized");
    }
    owner.api.get("/api/meta/whoami").await.expect_ok();
    with(&owner.api, token, &attacker)
        .get("/api/meta/whoami")
        .await
        .expect_ok();
}
