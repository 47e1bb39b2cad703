//! The services of the test cluster must not log an ERROR while the suite
//! drives them: every error a client can cause is answered, not logged as
//! a fault. (PostgreSQL's own logs are not read: the suite provokes failed
//! casts and unique violations on purpose.)

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

fn cluster_dir() -> Option<PathBuf> {
    let env_file = std::env::var("CLUSTER_ENV_FILE").ok()?;
    let text = std::fs::read_to_string(env_file).ok()?;
    text.lines().find_map(|l| {
        let v = l.trim().strip_prefix("export DEV_CLUSTER_DIR=")?;
        Some(PathBuf::from(v.trim_matches(|c| c == '\'' || c == '"')))
    })
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn services_logged_no_error() {
    let Some(dir) = cluster_dir() else {
        eprintln!("CLUSTER_ENV_FILE not set: no cluster logs to read (run through deploy/test)");
        return;
    };
    let mut services = 0;
    let mut errors = Vec::new();
    for entry in std::fs::read_dir(dir.join("logs")).expect("cluster logs directory") {
        let path = entry.expect("directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let is_service = ["router", "control-plane", "shard-"]
            .iter()
            .any(|p| name.starts_with(p));
        if !is_service || !name.ends_with(".log") {
            continue;
        }
        services += 1;
        let text = std::fs::read_to_string(&path).expect("readable log");
        errors.extend(
            text.lines()
                .map(strip_ansi)
                .filter(|l| l.split_whitespace().nth(1) == Some("ERROR"))
                .map(|l| format!("{name}: {l}")),
        );
    }
    assert!(
        services >= 3,
        "expected router, control-plane and shard logs, found {services}"
    );
    assert!(
        errors.is_empty(),
        "services logged errors:\n{}",
        errors.join("\n")
    );
}

#[test]
fn ansi_is_stripped() {
    assert_eq!(
        strip_ansi("\u{1b}[2mT\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m x"),
        "T ERROR x"
    );
}
