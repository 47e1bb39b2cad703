//! The built binary's log lines: `LOG_FORMAT=json` writes one JSON object
//! a line, the access log's line of each request (method, route template,
//! status, duration, database id) carries the trace id of the request's
//! `traceparent`, `ACCESS_LOG=off` leaves those lines out, and an OTLP
//! exporter that cannot be built is logged as an error.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// Runs the router binary with `env`, sends it one unauthenticated
/// `GET /api/databases/{id}/tables` with a `traceparent`, stops it and
/// returns its output lines and the database id it asked for.
async fn one_request(env: &[(&str, &str)]) -> (Vec<String>, String) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_router"))
        .env_clear()
        .env("ROUTER_LISTEN", format!("127.0.0.1:{port}"))
        .env("ROUTER_THREADS", "1")
        .env("REDIS_URL", redis_url())
        // Never asked: the request is refused before any look-up.
        .env("CONTROL_PLANE_URL", "http://127.0.0.1:9")
        .env("CONTROL_PLANE_ROUTER_TOKEN", ROUTER_TOKEN)
        .env("CLUSTER_SECRET", SECRET)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the router binary");
    let db = new_tagged(Kind::Database, &random_token(5));
    let url = format!("http://127.0.0.1:{port}/api/databases/{db}/tables");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let sent = http
            .get(&url)
            .header("traceparent", format!("00-{TRACE_ID}-00f067aa0ba902b7-01"))
            .send()
            .await;
        match sent {
            Ok(r) => break r.status(),
            Err(e) => {
                assert!(Instant::now() < deadline, "the router never answered: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(status, 401);
    // The line is written as the answer goes; give it a moment to land.
    tokio::time::sleep(Duration::from_millis(300)).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let lines = out.lines().chain(err.lines()).map(str::to_owned).collect();
    (lines, db)
}

/// Every line parsed as JSON (a line that is not JSON fails the test).
fn json_lines(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

fn access_lines(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|l| l["target"] == "access").collect()
}

#[tokio::test]
async fn json_lines_carry_the_access_log_with_the_trace_id() {
    let (lines, db) = one_request(&[
        ("LOG_FORMAT", "json"),
        // An unknown compression: the exporter cannot be built, which is
        // logged (and the endpoint never called).
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "bogus"),
    ])
    .await;
    let lines = json_lines(&lines);
    let access = access_lines(&lines);
    assert_eq!(access.len(), 1, "{lines:#?}");
    let line = access[0];
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["method"], "GET");
    assert_eq!(line["route"], "/api/databases/{id}/tables");
    assert_eq!(line["status"], 401);
    assert!(
        line["duration_ms"].as_f64().is_some_and(|d| d >= 0.0),
        "{line}"
    );
    assert_eq!(line["database_id"], db.as_str());
    assert_eq!(line["trace_id"], TRACE_ID, "{line}");
    assert!(
        line["span_id"]
            .as_str()
            .is_some_and(|s| s.len() == 16 && s != "00f067aa0ba902b7"),
        "{line}"
    );
    assert!(line["timestamp"].is_string(), "{line}");
    let exporter = lines
        .iter()
        .find(|l| l["level"] == "ERROR")
        .unwrap_or_else(|| panic!("no error about the exporter: {lines:#?}"));
    assert!(
        exporter["message"]
            .as_str()
            .is_some_and(|m| m.contains("OTLP span exporter")),
        "{exporter}"
    );
    assert!(exporter["error"].is_string(), "{exporter}");
}

#[tokio::test]
async fn access_log_off_leaves_the_request_lines_out() {
    let (lines, _) = one_request(&[("LOG_FORMAT", "json"), ("ACCESS_LOG", "off")]).await;
    let lines = json_lines(&lines);
    assert!(!lines.is_empty(), "the router logs its start");
    assert!(access_lines(&lines).is_empty(), "{lines:#?}");
}

#[tokio::test]
async fn text_lines_have_the_access_log_too() {
    let (lines, db) = one_request(&[]).await;
    let access: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("route=/api/databases/{id}/tables"))
        .collect();
    assert_eq!(access.len(), 1, "{lines:#?}");
    assert!(access[0].contains("status=401"), "{}", access[0]);
    assert!(
        access[0].contains(&format!("database_id=\"{db}\"")),
        "{}",
        access[0]
    );
    assert!(serde_json::from_str::<Value>(access[0]).is_err());
}
