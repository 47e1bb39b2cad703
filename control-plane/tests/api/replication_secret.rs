//! A move's subscription never carries the administrator's password in its
//! SQL text (issue 27, 6): PostgreSQL logs the text of a statement that
//! fails. Here `CREATE SUBSCRIPTION`, built as the mover builds it with a
//! password configured, fails on a real server (its publisher is a port
//! nothing listens on): neither the error the mover would show in the move
//! nor that server's log holds the password.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cluster_protocol::ids::{self, Kind};
use control_plane::config::{MoveConfig, Secret};
use control_plane::mover::{admin, replication, sql};

use crate::helpers::skip;

async fn superuser() -> tokio_postgres::Client {
    let url = std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect postgres");
    tokio::spawn(conn);
    client
}

/// The server's log: its logging collector's file, or else the one
/// deploy/dev-cluster sends its output to (`DEV_CLUSTER_DIR/logs/pg-<instance>.log`,
/// the instance's data directory being `DEV_CLUSTER_DIR/pg/<instance>`).
async fn server_log(pg: &tokio_postgres::Client) -> PathBuf {
    let row = pg
        .query_one(
            "SELECT pg_current_logfile(), current_setting('data_directory')",
            &[],
        )
        .await
        .expect("locate the server's log");
    let data = PathBuf::from(row.get::<_, String>(1));
    let path = match row.get::<_, Option<String>>(0) {
        Some(file) => data.join(file),
        None => {
            let instance = data.file_name().expect("a data directory name");
            let root = data
                .parent()
                .and_then(|pg| pg.parent())
                .expect("DEV_CLUSTER_DIR/pg/<instance>");
            root.join("logs")
                .join(format!("pg-{}.log", instance.to_string_lossy()))
        }
    };
    assert!(path.is_file(), "the server's log {path:?} is readable here");
    path
}

#[tokio::test]
async fn a_failed_subscription_leaves_no_password_in_the_log_or_the_error() {
    if skip() {
        return;
    }
    let pg = superuser().await;
    let log = server_log(&pg).await;
    let password = format!("pw-{}", ids::random_token(20));
    let knobs = MoveConfig {
        admin_password: Some(Secret::new(password.clone())),
        replication_passfile: Some("/nonexistent/replication.pgpass".into()),
        ..MoveConfig::default()
    };
    // A publisher nobody listens on: a port just freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let dsn = format!("postgres://tabula_shard:shard-{password}@127.0.0.1:{port}/cluster");
    let conninfo = admin::conninfo_literal(&dsn, &knobs).expect("conninfo");
    let name = sql::object_name(&ids::new_untagged(Kind::Move)).expect("a name");

    let err = replication::create_subscription(&pg, &name, &conninfo)
        .await
        .expect_err("no publisher answers");
    let shown = format!("{err:#}");
    assert!(shown.contains("could not connect"), "{shown}");
    assert!(!shown.contains(&password), "the error holds it: {shown}");

    // The server logged the failed statement (it names the subscription);
    // the password is nowhere in its log.
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&log).expect("read the server's log");
        if text.contains(&name) {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "{log:?} never logged the failed CREATE SUBSCRIPTION {name}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        !text.contains(&password),
        "the server's log holds the password"
    );
    let leftover: i64 = pg
        .query_one(
            "SELECT count(*) FROM pg_subscription WHERE subname = $1",
            &[&name],
        )
        .await
        .expect("read pg_subscription")
        .get(0);
    assert_eq!(leftover, 0);
}
