//! `router --help` and `--version`: the built binary prints every setting
//! with its variable (secret values hidden) and its version, and exits 0
//! without starting.

use std::process::{Command, Output};

const SETTINGS: &[&str] = &[
    "ROUTER_LISTEN",
    "CONTROL_PLANE_URL",
    "CONTROL_PLANE_ROUTER_TOKEN",
    "METRICS_TOKEN",
    "ROUTER_METRICS_LISTEN",
    "LOG_FORMAT",
    "ACCESS_LOG",
    "REDIS_URL",
    "CLUSTER_SECRET",
    "ROUTER_KEY_LIMIT_PER_MIN",
    "ROUTER_ADDRESS_LIMIT_PER_MIN",
    "ROUTER_ANON_LIMIT_PER_MIN",
    "ROUTER_FILES_LIMIT_PER_MIN",
    "ROUTER_MAX_IN_FLIGHT",
    "ROUTER_POOL_IDLE_PER_SHARD",
    "ROUTER_SHUTDOWN_GRACE_SECS",
    "ROUTER_HASH_CONCURRENCY",
    "ROUTER_HASH_WAIT_MS",
    "ROUTER_THREADS",
    "ROUTER_MAX_CONNECTIONS",
    "ROUTER_IDLE_TIMEOUT_SECS",
    "ROUTER_BODY_TIMEOUT_SECS",
    "ROUTER_STREAM_IDLE_TIMEOUT_SECS",
    "ROUTER_SHARD_TIMEOUT_MS",
    "ROUTER_BODY_BUDGET_BYTES",
    "ROUTER_PLACEMENT_CACHE_ENTRIES",
    "ROUTER_KEY_CACHE_ENTRIES",
    "ROUTER_ACCESS_CACHE_ENTRIES",
];

/// Runs the binary with only a secret in its environment.
fn router(arg: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_router"))
        .arg(arg)
        .env_clear()
        .env("CLUSTER_SECRET", "printed-secret-value")
        .output()
        .expect("run the router binary")
}

#[test]
fn help_lists_every_setting_and_hides_secrets() {
    let out = router("--help");
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for name in SETTINGS {
        assert!(
            help.contains(&format!("env: {name}")),
            "{name} missing:\n{help}"
        );
    }
    assert!(help.contains("[default: 127.0.0.1:8080]"), "{help}");
    assert!(!help.contains("printed-secret-value"), "{help}");
}

#[test]
fn version_names_the_version() {
    let out = router("--version");
    assert!(out.status.success(), "{out:?}");
    let version = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        version.trim(),
        format!("router {}", env!("CARGO_PKG_VERSION"))
    );
}
