//! The match clock: the first pass records silently, later ones fire
//! on time, `today` in the database's timezone.

use serde_json::json;

use super::*;

/// A node whose match clock ticks every 200 ms.
async fn fast_clock_app() -> TestApp {
    let (url, _) = private_database().await;
    spawn_app_webhooks(
        url,
        WebhookSettings {
            match_clock_interval: Duration::from_millis(200),
            ..WebhookSettings::default()
        },
    )
    .await
}

/// Polls `check` every 100 ms for up to 30 s.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..300 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn the_match_clock_records_silently_then_fires_on_time() {
    let fx = fixture_on(fast_clock_app().await).await;
    let at = field(
        &fx.app,
        &fx.p,
        &fx.deals,
        json!({"name": "At", "type": "date", "options": {"include_time": true}}),
    )
    .await;
    // Matches while `At` is in the past.
    let past =
        json!({"conditions": [{"field": "At", "op": "before", "value": {"relative": "now"}}]});
    // A record already matching before the webhook exists.
    let old = fx
        .create(json!([{"fields": {"Name": "old", "At": "2020-01-01T00:00:00Z"}}]))
        .await;
    let hook = fx
        .hook(Hook {
            conditions: Some(past),
            recorded: false,
            payload_key: "id",
            ..Hook::on(&fx.deals, "record_matches")
        })
        .await;
    // First pass: records what matches, delivers nothing.
    eventually("the first pass", || async {
        fx.app
            .pg
            .query_one(
                "SELECT matches_recorded FROM webhooks WHERE id = $1",
                &[&hook],
            )
            .await
            .unwrap()
            .get::<_, bool>(0)
    })
    .await;
    assert_eq!(fx.memory(&hook).await, old);
    assert_eq!(fx.deliveries(&hook).await.len(), 0);
    // A record that will match in a moment: created not matching.
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(2))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let new = fx
        .create(json!([{"fields": {"Name": "new", "At": soon}}]))
        .await;
    assert_eq!(fx.deliveries(&hook).await.len(), 0);
    eventually("the clock-driven delivery", || async {
        !fx.deliveries(&hook).await.is_empty()
    })
    .await;
    let d = fx.deliveries(&hook).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["event"], "record.matches");
    assert_eq!(d[0]["record_id"], new[0].as_str());
    // Clock-driven: name-keyed with field_ids whatever payload_key says,
    // no changed fields, no before.
    assert_eq!(d[0]["field_ids"]["At"], at.as_str());
    assert!(d[0].get("field_names").is_none());
    assert_eq!(d[0]["after"]["fields"]["Name"], "new");
    assert_eq!(d[0]["changed_field_ids"], json!([]));
    assert_eq!(d[0]["before"], Value::Null);
    assert_eq!(
        fx.memory(&hook).await,
        sorted(vec![old[0].clone(), new[0].clone()])
    );
    // More passes: it keeps matching, nothing fires again. A record that
    // stops matching (moved to the future) leaves the memory.
    let later = (chrono::Utc::now() + chrono::Duration::days(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    fx.update(json!([{"id": old[0], "fields": {"At": later}}]))
        .await;
    assert_eq!(fx.memory(&hook).await, vec![new[0].clone()]);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(fx.deliveries(&hook).await.len(), 1);
}

#[tokio::test]
async fn today_resolves_in_the_database_timezone() {
    let fx = fixture_on(fast_clock_app().await).await;
    // A zone whose date differs from UTC's right now.
    let now = chrono::Utc::now();
    let (zone, offset) = if now.format("%H").to_string().parse::<u32>().unwrap() >= 12 {
        ("Pacific/Kiritimati", 14) // UTC+14, no DST: already tomorrow
    } else {
        ("Etc/GMT+12", -12) // UTC-12: still yesterday
    };
    let tz = chrono::FixedOffset::east_opt(offset * 3600).unwrap();
    let their_today = now.with_timezone(&tz).date_naive().to_string();
    assert_ne!(their_today, now.date_naive().to_string());
    let ids = fx
        .create(json!([{"fields": {"Name": "x", "Due": their_today}}]))
        .await;
    let hook = fx
        .hook(Hook {
            conditions: Some(
                json!({"conditions": [{"field": "Due", "op": "is", "value": {"relative": "today"}}]}),
            ),
            ..Hook::on(&fx.deals, "record_matches")
        })
        .await;
    // In UTC the record is not due today: passes go by, nothing fires.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(fx.deliveries(&hook).await.len(), 0);
    // The database moves to the zone where it is: the next pass fires.
    fx.app
        .pg
        .execute(
            "UPDATE databases SET timezone = $2, schema_version = schema_version + 1 WHERE id = $1",
            &[&fx.db, &zone],
        )
        .await
        .unwrap();
    eventually("the clock-driven delivery", || async {
        !fx.deliveries(&hook).await.is_empty()
    })
    .await;
    let d = fx.deliveries(&hook).await;
    assert_eq!(record_ids(&d), ids);
}
