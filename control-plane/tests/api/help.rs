//! `control-plane serve --help` and `control-plane --version`: the built
//! binary prints every setting of the server with its variable (secret
//! values hidden) and its version, and exits 0 without starting.

use std::process::{Command, Output};

const SETTINGS: &[&str] = &[
    "CONTROL_PLANE_LISTEN",
    "LOG_FORMAT",
    "ACCESS_LOG",
    "CONTROL_PLANE_DATABASE_URL",
    "CONTROL_PLANE_TOKEN",
    "CONTROL_PLANE_ROUTER_TOKEN",
    "CONTROL_PLANE_SHARD_TOKEN",
    "METRICS_TOKEN",
    "REDIS_URL",
    "CONTROL_PLANE_PG_SSLMODE",
    "CONTROL_PLANE_PG_SSLROOTCERT",
    "MOVE_ADMIN_USER",
    "MOVE_ADMIN_PASSWORD",
    "MOVE_REPLICATION_PASSFILE",
    "MOVE_PAUSE_BUDGET_MS",
    "MOVE_CUTOVER_ATTEMPTS",
    "MOVES_PER_SHARD",
    "MOVES_MAX",
    "MOVE_ACK_TIMEOUT_MS",
    "MOVE_POLL_MS",
    "MOVE_STEP_DELAY_MS",
];

/// Runs the binary with only secrets in its environment.
fn control_plane(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_control-plane"))
        .args(args)
        .env_clear()
        .env("CONTROL_PLANE_TOKEN", "printed-admin-token")
        .env(
            "CONTROL_PLANE_DATABASE_URL",
            "postgres://u:printed-password@h/db",
        )
        .output()
        .expect("run the control-plane binary")
}

#[test]
fn serve_help_lists_every_setting_and_hides_secrets() {
    let out = control_plane(&["serve", "--help"]);
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for name in SETTINGS {
        assert!(
            help.contains(&format!("env: {name}")),
            "{name} missing:\n{help}"
        );
    }
    assert!(help.contains("[default: 127.0.0.1:8090]"), "{help}");
    assert!(!help.contains("printed-admin-token"), "{help}");
    assert!(!help.contains("printed-password"), "{help}");
}

#[test]
fn help_and_version_exit_zero() {
    let out = control_plane(&["--help"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("serve"));
    let out = control_plane(&["--version"]);
    assert!(out.status.success(), "{out:?}");
    let version = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        version.trim(),
        format!("control-plane {}", env!("CARGO_PKG_VERSION"))
    );
}
