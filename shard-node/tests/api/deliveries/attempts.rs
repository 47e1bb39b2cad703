//! One delivery's attempts: headers and signature, the retry schedule,
//! redirects, the timeout, the recorded reply, and the egress guard.

use super::*;

#[tokio::test]
async fn a_delivery_is_signed_over_the_exact_bytes_sent() {
    let h = harness(settings(&[100], 5_000)).await;
    let hook = h.webhook("ok/signed").await;
    let ids = h.enqueue(&hook, 1).await;
    let hits = h
        .receiver
        .wait_until("the delivery", |hits| !hits.is_empty())
        .await;
    let hit = &hits[0];
    assert_signed(hit, &hook.secret, &ids[0], 1);
    let row = h.finished(&ids[0]).await;
    assert_eq!(row.state, "succeeded");
    // The body is the stored payload byte for byte.
    assert_eq!(&hit.body[..], row.body.as_bytes());
    assert_eq!(json_of(hit)["after"]["fields"]["Name"], "Café ☕ #0");
    assert_eq!(row.attempts, 1);
    assert_eq!(row.last_status, Some(200));
    assert_eq!(row.last_response_body.as_deref(), Some("ok"));
    assert_eq!(row.last_error, None);
    assert_eq!(h.webhook_state(&hook).await, (0, Some(200), false));
}

#[tokio::test]
async fn a_500_is_retried_on_the_schedule_then_counts_as_exhausted() {
    let h = harness(settings(&[100, 200], 5_000)).await;
    let hook = h.webhook("fail/always").await;
    let ids = h.enqueue(&hook, 1).await;
    let row = h.finished(&ids[0]).await;
    assert_eq!(row.state, "failed");
    assert_eq!(row.attempts, 3);
    assert_eq!(row.last_status, Some(500));
    assert_eq!(row.last_response_body.as_deref(), Some("nope"));
    assert!(row.last_error.unwrap().contains("500"));
    let hits = h.receiver.hits();
    assert_eq!(hits.len(), 3, "{hits:#?}");
    for (i, hit) in hits.iter().enumerate() {
        // Every attempt: same body, its own number, a fresh signature.
        assert_signed(hit, &hook.secret, &ids[0], i as i32 + 1);
        assert_eq!(hit.body, hits[0].body);
    }
    assert_eq!(h.webhook_state(&hook).await, (1, Some(500), false));
}

#[tokio::test]
async fn a_delivery_recovered_by_a_retry_succeeds_and_resets_the_streak() {
    let h = harness(settings(&[100], 5_000)).await;
    let hook = h.webhook("flaky/once").await;
    h.app
        .pg
        .execute(
            "UPDATE webhooks SET consecutive_failures = 7 WHERE id = $1",
            &[&hook.id],
        )
        .await
        .unwrap();
    let ids = h.enqueue(&hook, 1).await;
    let row = h.finished(&ids[0]).await;
    assert_eq!(row.state, "succeeded");
    assert_eq!(row.attempts, 2);
    assert_eq!(h.webhook_state(&hook).await, (0, Some(200), false));
}

#[tokio::test]
async fn a_redirect_is_a_failure_and_is_not_followed() {
    let h = harness(settings(&[], 5_000)).await;
    let hook = h.webhook("redirect/away").await;
    let ids = h.enqueue(&hook, 1).await;
    let row = h.finished(&ids[0]).await;
    assert_eq!(row.state, "failed");
    assert_eq!(row.last_status, Some(302));
    let error = row.last_error.unwrap();
    assert!(error.contains("redirect"), "{error}");
    assert!(h.receiver.hits_on("/ok/").is_empty());
    assert_eq!(h.receiver.hits().len(), 1);
}

#[tokio::test]
async fn a_reply_slower_than_the_timeout_fails_the_attempt() {
    let h = harness(settings(&[], 300)).await;
    let hook = h.webhook("hang/forever").await;
    let ids = h.enqueue(&hook, 1).await;
    let row = h.finished(&ids[0]).await;
    assert_eq!(row.state, "failed");
    assert_eq!(row.last_status, Some(0));
    let error = row.last_error.unwrap();
    assert!(error.contains("WEBHOOK_TIMEOUT"), "{error}");
}

#[tokio::test]
async fn only_the_first_4000_characters_of_an_endless_reply_are_read() {
    let h = harness(settings(&[], 5_000)).await;
    let hook = h.webhook("endless/body").await;
    let ids = h.enqueue(&hook, 1).await;
    let row = h.finished(&ids[0]).await;
    assert_eq!(row.state, "succeeded");
    let body = row.last_response_body.unwrap();
    assert_eq!(body.chars().count(), 4000);
    assert!(body.chars().all(|c| c == 'é'));
}

#[tokio::test]
async fn a_host_resolving_to_loopback_is_refused_without_an_allow_list() {
    let h = harness(shard_node::config::WebhookSettings {
        retry_delays: vec![],
        ..shard_node::config::WebhookSettings::default()
    })
    .await;
    let port = h.receiver.addr.port();
    for url in [
        format!("http://localhost:{port}/ok/ssrf"),
        format!("https://localhost:{port}/ok/ssrf"),
        format!("http://127.0.0.1:{port}/ok/ssrf"),
    ] {
        let hook = h.webhook_to(&url, None).await;
        let ids = h.enqueue(&hook, 1).await;
        let row = h.finished(&ids[0]).await;
        assert_eq!(row.state, "failed", "{url}");
        assert_eq!(row.last_status, Some(0), "{url}");
        let error = row.last_error.unwrap();
        assert!(
            error.ends_with("refused: not a public address")
                && !error.contains("127.0.0.1")
                && !error.contains("::1")
                && !error.contains("loopback"),
            "{url}: {error}"
        );
        // The test route reports the same refusal as a 200, not a 500.
        let r = h
            .app
            .post(
                &format!("/api/webhooks/{}/test", hook.id),
                &h.owner,
                json!({}),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        assert_eq!(r.body["succeeded"], false);
        assert_eq!(r.body["status"], 0);
        let shown = r.body["error"].as_str().unwrap();
        assert!(shown.ends_with("refused: not a public address"), "{shown}");
        assert!(
            !shown.contains("127.0.0.1") && !shown.contains("loopback"),
            "{shown}"
        );
    }
    assert!(h.receiver.hits().is_empty());
    // The node keeps working.
    let r = h
        .app
        .get(
            &format!("/api/databases/{}/tables", h.database_id),
            &h.owner,
        )
        .await;
    assert_eq!(r.status, 200);
}
