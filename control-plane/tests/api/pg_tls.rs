//! `CONTROL_PLANE_PG_SSLMODE` against a real PostgreSQL running with
//! `ssl = on`: the test cluster's control-plane instance, to which
//! deploy/dev-cluster gives a self-signed certificate. The mover's
//! administrator session (`mover::admin::connect`) runs in the clear with
//! `disable` and over TLS with `require` and `prefer`; `verify-full`
//! connects only when the server's certificate chains to the configured
//! root (the CA deploy/dev-cluster made, `DATA/root.crt`).

use cluster_protocol::control::{Shard, ShardState};
use control_plane::config::MoveConfig;
use control_plane::mover::admin;
use control_plane::pg_tls::{PgTls, SslMode};

use crate::helpers::skip;

fn test_url() -> String {
    std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// Whether the mover's admin session to the test instance, made with
/// `tls`, is encrypted (the server's own view, `pg_stat_ssl`).
async fn encrypted(tls: PgTls) -> anyhow::Result<bool> {
    let shard = Shard {
        name: "tls-test".into(),
        url: "http://127.0.0.1:1".into(),
        postgres: test_url(),
        weight: 100,
        state: ShardState::Active,
        databases: None,
        bytes: None,
    };
    let knobs = MoveConfig {
        pg_tls: tls,
        ..MoveConfig::default()
    };
    let session = admin::connect(&shard, &knobs).await?;
    let row = session
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await?;
    Ok(row.try_get(0)?)
}

#[tokio::test]
async fn the_ssl_mode_decides_whether_sessions_are_encrypted() {
    if skip() {
        return;
    }
    let (pg, conn) = tokio_postgres::connect(&test_url(), tokio_postgres::NoTls)
        .await
        .expect("connect postgres");
    tokio::spawn(conn);
    let row = pg
        .query_one(
            "SELECT current_setting('ssl'), current_setting('data_directory')",
            &[],
        )
        .await
        .expect("read the server's TLS settings");
    let (ssl, data): (String, String) = (row.get(0), row.get(1));
    assert_eq!(
        ssl, "on",
        "the test cluster's control-plane instance runs with ssl = on (deploy/dev-cluster)"
    );
    let mode = |m| PgTls::new(Some(m), None).expect("a connector");
    assert!(!encrypted(mode(SslMode::Disable))
        .await
        .expect("disable connects"));
    assert!(encrypted(mode(SslMode::Require))
        .await
        .expect("require connects"));
    assert!(encrypted(mode(SslMode::Prefer))
        .await
        .expect("prefer connects"));

    // verify-full: the CA deploy/dev-cluster issued the server's certificate with.
    let root = std::path::Path::new(&data).join("root.crt");
    let root = root.to_str().expect("a UTF-8 path");
    let verified = PgTls::new(Some(SslMode::VerifyFull), Some(root)).expect("a connector");
    assert!(encrypted(verified).await.expect("verify-full connects"));
    let public_roots = "/etc/ssl/certs/ca-certificates.crt";
    if std::path::Path::new(public_roots).exists() {
        let wrong = PgTls::new(Some(SslMode::VerifyFull), Some(public_roots)).expect("a connector");
        let refused = encrypted(wrong).await;
        assert!(
            refused.is_err(),
            "a certificate no root vouches for: {refused:?}"
        );
    }
}
