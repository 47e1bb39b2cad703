//! `shards add` takes the shard's DSN from the environment or standard
//! input, so a password never sits in argv (visible in the process list);
//! `--postgres DSN` still works (the operator contract) but warns on
//! stderr when the DSN holds a password.

use std::process::Stdio;

use tokio::io::AsyncWriteExt;

use crate::helpers::*;

/// `control-plane shards add --name NAME --url ... EXTRA --json` with
/// `env` added and `stdin` written to its standard input.
async fn add(
    app: &App,
    name: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    stdin: &str,
) -> (bool, String, String) {
    let url = format!("http://{name}");
    let mut args = vec!["shards", "add", "--name", name, "--url", &url];
    args.extend_from_slice(extra);
    args.push("--json");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_control-plane"))
        .args(&args)
        .env("CONTROL_PLANE_URL", &app.base)
        .env("CONTROL_PLANE_TOKEN", TOKEN)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run control-plane");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.as_bytes())
        .await
        .expect("write stdin");
    drop(input);
    let out = child.wait_with_output().await.expect("control-plane exits");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The DSN registered for shard `name`.
async fn registered(app: &App, name: &str) -> String {
    let list = app.client.shards().await.expect("shards list");
    list.shards
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{name} is registered"))
        .postgres
}

#[tokio::test]
async fn the_dsn_comes_from_the_environment_or_stdin() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let from_env = "postgres://tabula_shard:env-secret@127.0.0.1:5432/cluster";
    let (ok, out, err) = add(
        &app,
        "s-env",
        &["--postgres-env", "MY_SHARD_DSN"],
        &[("MY_SHARD_DSN", from_env)],
        "",
    )
    .await;
    assert!(ok, "{err}");
    assert_eq!(one_json(&out)["name"], "s-env");
    assert!(!err.contains("warning"), "no warning: {err}");
    assert_eq!(registered(&app, "s-env").await, from_env);

    let from_stdin = "postgres://tabula_shard:stdin-secret@127.0.0.1:5432/cluster";
    let (ok, _, err) = add(
        &app,
        "s-stdin",
        &["--postgres-stdin"],
        &[],
        &format!("{from_stdin}\n"),
    )
    .await;
    assert!(ok, "{err}");
    assert!(!err.contains("warning"), "no warning: {err}");
    assert_eq!(registered(&app, "s-stdin").await, from_stdin);

    // argv still works; with a password it says why that is unwise.
    let in_argv = "postgres://tabula_shard:argv-secret@127.0.0.1:5432/cluster";
    let (ok, _, err) = add(&app, "s-argv", &["--postgres", in_argv], &[], "").await;
    assert!(ok, "{err}");
    assert!(
        err.contains("warning:") && err.contains("--postgres-env"),
        "{err}"
    );
    assert!(
        !err.contains("argv-secret"),
        "the warning repeats no secret: {err}"
    );
    let (ok, _, err) = add(
        &app,
        "s-argv-nopw",
        &[
            "--postgres",
            "postgres://tabula_shard@127.0.0.1:5432/cluster",
        ],
        &[],
        "",
    )
    .await;
    assert!(ok && !err.contains("warning"), "{err}");

    // Refused: no source, an unset variable, empty stdin; nothing registered.
    for (name, extra) in [
        ("s-none", vec![]),
        ("s-unset", vec!["--postgres-env", "NOT_SET_ANYWHERE"]),
        ("s-empty", vec!["--postgres-stdin"]),
    ] {
        let (ok, out, err) = add(&app, name, &extra, &[], "").await;
        assert!(!ok && out.is_empty() && !err.is_empty(), "{name}: {err}");
        assert!(!err.contains("secret"), "{err}");
    }
    let names: Vec<String> = app
        .client
        .shards()
        .await
        .expect("shards list")
        .shards
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    app.finish().await;
}
