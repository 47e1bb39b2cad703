//! `shard-node --help` and `--version`: the built binary prints every
//! setting with its variable (secret values hidden) and its version, and
//! exits 0 without starting.

use std::process::{Command, Output};

const SETTINGS: &[&str] = &[
    "SHARD_NAME",
    "SHARD_LISTEN",
    "LOG_FORMAT",
    "ACCESS_LOG",
    "SHARD_DATABASE_URL",
    "CLUSTER_SECRET",
    "CONTROL_PLANE_URL",
    "CONTROL_PLANE_SHARD_TOKEN",
    "METRICS_TOKEN",
    "SHARD_POOL_SIZE",
    "SHARD_POOL_WAIT_MS",
    "SHARD_SESSIONS_PER_DATABASE",
    "SHARD_SESSIONS_PER_OWNER",
    "SHARD_MAX_EXPORTS",
    "SHARD_EXPORT_SEND_TIMEOUT_MS",
    "SHARD_STATEMENT_TIMEOUT_MS",
    "SHARD_SCHEMA_TIMEOUT_MS",
    "SHARD_MAINTENANCE_TIMEOUT_MS",
    "SHARD_TRASH_PURGE_INTERVAL_SECS",
    "SHARD_TRASH_RETENTION_SECS",
    "EGRESS_ALLOW_CIDRS",
    "WEBHOOK_RETRY_DELAYS",
    "WEBHOOK_TIMEOUT",
    "WEBHOOK_CONCURRENCY",
    "WEBHOOK_CONCURRENCY_PER_WEBHOOK",
    "WEBHOOK_CONCURRENCY_PER_DATABASE",
    "WEBHOOK_ATTEMPTS_PER_DATABASE_PER_MINUTE",
    "MATCH_CLOCK_INTERVAL",
    "MATCH_CLOCK_BATCH",
    "MATCH_CLOCK_ROWS_PER_PASS",
    "BLOB_STORE",
    "BLOB_DIR",
    "S3_ENDPOINT",
    "S3_REGION",
    "S3_BUCKET",
    "S3_ACCESS_KEY_ID",
    "S3_SECRET_ACCESS_KEY",
    "S3_FORCE_PATH_STYLE",
    "ATTACHMENT_QUOTA_BYTES",
    "THUMBNAIL_QUEUE_BYTES",
    "THUMBNAIL_DECODE_BYTES",
    "PUBLIC_URL",
];

/// Runs the binary with only secrets in its environment.
fn shard_node(arg: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shard-node"))
        .arg(arg)
        .env_clear()
        .env("CLUSTER_SECRET", "printed-secret-value")
        .env("SHARD_DATABASE_URL", "postgres://u:printed-password@h/db")
        .output()
        .expect("run the shard-node binary")
}

#[test]
fn help_lists_every_setting_and_hides_secrets() {
    let out = shard_node("--help");
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for name in SETTINGS {
        assert!(
            help.contains(&format!("env: {name}")),
            "{name} missing:\n{help}"
        );
    }
    assert!(help.contains("[default: 10s,60s,300s]"), "{help}");
    assert!(!help.contains("printed-secret-value"), "{help}");
    assert!(!help.contains("printed-password"), "{help}");
}

#[test]
fn version_names_the_version() {
    let out = shard_node("--version");
    assert!(out.status.success(), "{out:?}");
    let version = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        version.trim(),
        format!("shard-node {}", env!("CARGO_PKG_VERSION"))
    );
}
