//! A shard node killed (SIGKILL) with deliveries in flight loses none:
//! their rows are claimed again when the lease runs out, after a restart.

use std::process::Stdio;

use super::*;

/// The real `shard-node` binary on `url`, listening on a free port.
async fn start_node(url: &str, timeout: &str) -> (tokio::process::Child, TestApp) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_shard-node"))
        .env("SHARD_NAME", SHARD)
        .env("SHARD_LISTEN", addr.to_string())
        .env("SHARD_DATABASE_URL", url)
        .env("CLUSTER_SECRET", SECRET)
        .env("WEBHOOK_TIMEOUT", timeout)
        .env("WEBHOOK_RETRY_DELAYS", "100ms,100ms,100ms,100ms,100ms")
        .env("EGRESS_ALLOW_CIDRS", "127.0.0.0/8")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the shard-node binary");
    let app = connect_to(addr, url).await;
    (child, app)
}

#[tokio::test]
async fn deliveries_in_flight_when_the_node_is_killed_arrive_after_a_restart() {
    let (url, _) = private_database().await;
    let (mut child, app) = start_node(&url, "3s").await;
    let (database_id, owner) = app.owned_database().await;
    let h = Harness {
        app,
        receiver: Receiver::start().await,
        database_id,
        owner,
    };
    let hook = h.webhook("gate/crash").await;
    let ids = h.enqueue(&hook, 10).await;
    let cap = shard_node::config::WebhookSettings::default().concurrency_per_webhook;
    let in_flight = h
        .receiver
        .wait_until("attempts in flight", |hits| hits.len() == cap)
        .await;
    child.kill().await.unwrap(); // SIGKILL
    let leased: Vec<String> = in_flight.iter().map(|hit| hit.delivery().0).collect();
    for id in &leased {
        let row = h.row(id).await;
        assert_eq!((row.state.as_str(), row.attempts), ("pending", 1), "{id}");
    }

    h.receiver.open_gate();
    let (_child, _app) = start_node(&url, "3s").await;
    for id in &ids {
        assert_eq!(h.finished(id).await.state, "succeeded", "{id}");
    }
    let hits = h.receiver.hits();
    for id in &ids {
        assert!(
            hits.iter().any(|hit| hit.delivery().0 == *id),
            "{id} never arrived"
        );
    }
    // The ones the killed node had out came again, as their second attempt.
    for id in &leased {
        assert_eq!(h.row(id).await.attempts, 2, "{id}");
        let again = hits
            .iter()
            .find(|hit| hit.delivery() == (id.clone(), 2))
            .unwrap_or_else(|| panic!("{id} was not sent again"));
        assert_signed(again, &hook.secret, id, 2);
    }
}
