//! One `POST /api/tables/{id}/records` through a cold router is one trace
//! across the three tiers (issue 29): the router's server span, its client
//! spans of the control-plane look-ups (key, access, placement), the
//! control plane's server spans of them, and the shard node's server span,
//! all collected over OTLP/HTTP.
//!
//! How: an OTLP/HTTP receiver in this test ([`Receiver`], axum, decoding
//! each `ExportTraceServiceRequest` with opentelemetry-proto's prost
//! types); the router, the control plane and every shard node are killed
//! and started again (`deploy/dev-cluster up`) with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at it, so the router starts with
//! empty caches; one request; then the spans are read back. The services
//! are restarted without export at the end.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use chaos_tests::small_database;
use e2e_tests::cluster_ops::{dev_cluster_up_with, kill9};
use e2e_tests::moves::shard_names;
use e2e_tests::Person;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::json;

/// One received span and the service that sent it.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    name: String,
    kind: i32,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent_span_id: Vec<u8>,
    attributes: Vec<KeyValue>,
}

impl Received {
    fn attribute(&self, key: &str) -> Option<String> {
        let value = self
            .attributes
            .iter()
            .find(|a| a.key == key)?
            .value
            .as_ref()?;
        match value.value.as_ref()? {
            Any::StringValue(s) => Some(s.clone()),
            Any::IntValue(i) => Some(i.to_string()),
            Any::BoolValue(b) => Some(b.to_string()),
            Any::DoubleValue(d) => Some(d.to_string()),
            other => Some(format!("{other:?}")),
        }
    }
}

/// An OTLP/HTTP trace receiver on a port of its own.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<Received>>>);

impl Receiver {
    /// Listens on 127.0.0.1; returns the receiver and its base URL.
    async fn start() -> (Self, String) {
        let receiver = Self::default();
        let app = axum::Router::new()
            .route("/v1/traces", post(accept))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, url)
    }

    fn spans(&self) -> Vec<Received> {
        self.0.lock().unwrap().clone()
    }
}

/// `POST /v1/traces`: one protobuf `ExportTraceServiceRequest`.
async fn accept(State(receiver): State<Receiver>, body: Bytes) -> axum::http::StatusCode {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return axum::http::StatusCode::BAD_REQUEST;
    };
    let mut spans = receiver.0.lock().unwrap();
    for resource in request.resource_spans {
        let service = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|a| a.key == "service.name")
            .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
                Any::StringValue(s) => Some(s.clone()),
                _ => None,
            })
            .unwrap_or_default();
        for scope in resource.scope_spans {
            for span in scope.spans {
                spans.push(Received {
                    service: service.clone(),
                    name: span.name,
                    kind: span.kind,
                    trace_id: span.trace_id,
                    span_id: span.span_id,
                    parent_span_id: span.parent_span_id,
                    attributes: span.attributes,
                });
            }
        }
    }
    axum::http::StatusCode::OK
}

/// Kills the router, the control plane and every shard node, and starts
/// them again with `extra` in their environment.
async fn restart_services(extra: &[(&str, &str)]) {
    let mut victims = vec!["router".to_owned(), "control-plane".to_owned()];
    victims.extend(shard_names().await);
    for v in &victims {
        kill9(v);
    }
    dev_cluster_up_with(None, extra).await;
}

const ROUTE: &str = "/api/tables/{id}/records";

#[tokio::test]
async fn one_request_through_a_cold_router_is_one_trace_across_the_tiers() {
    let owner = Person::new().await;
    let (_, records, _) = small_database(&owner, 1).await;
    let (receiver, url) = Receiver::start().await;
    restart_services(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
    ])
    .await;

    owner
        .api
        .post(
            &records,
            json!({"records": [{"fields": {"Name": "traced"}}]}),
        )
        .await
        .expect_ok();

    // The router's span of the request, then its trace's other spans: the
    // shard's, and the control plane's answer to each look-up the router
    // made (spans are exported in batches, every 200 ms here).
    let server = SpanKind::Server as i32;
    let client = SpanKind::Client as i32;
    let is_post = |s: &Received| {
        s.service == "router"
            && s.kind == server
            && s.attribute("http.route").as_deref() == Some(ROUTE)
            && s.attribute("http.request.method").as_deref() == Some("POST")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let (root, trace) = loop {
        let spans = receiver.spans();
        let root = spans.iter().find(|s| is_post(s)).cloned();
        if let Some(root) = root {
            let trace: Vec<Received> = spans
                .into_iter()
                .filter(|s| s.trace_id == root.trace_id)
                .collect();
            let shard = trace.iter().any(|s| s.service == "shard-node");
            let calls = trace
                .iter()
                .filter(|s| s.service == "router" && s.kind == client)
                .count();
            let answered = trace
                .iter()
                .filter(|s| s.service == "control-plane" && s.kind == server)
                .count();
            if shard && calls > 0 && answered >= calls {
                break (root, trace);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no complete trace within 60 s; received:\n{:#?}",
            receiver.spans()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    // The router's span starts the trace (the client sent no traceparent).
    assert!(root.parent_span_id.is_empty(), "{root:#?}");
    assert_eq!(root.name, format!("POST {ROUTE}"));
    assert_eq!(
        root.attribute("http.response.status_code").as_deref(),
        Some("200")
    );
    assert!(root
        .attribute("url.path")
        .is_some_and(|p| p.starts_with("/api/tables/")));

    // The shard node's span is the router span's child.
    let shard = trace.iter().find(|s| s.service == "shard-node").unwrap();
    assert_eq!(shard.kind, server, "{shard:#?}");
    assert_eq!(shard.name, format!("POST {ROUTE}"));
    assert_eq!(shard.parent_span_id, root.span_id, "{shard:#?}");
    assert_eq!(
        shard.attribute("http.response.status_code").as_deref(),
        Some("200")
    );

    // A cold router asked the control plane: each look-up a client span of
    // the request, each answered by a control-plane server span, its child.
    let calls: Vec<&Received> = trace
        .iter()
        .filter(|s| s.service == "router" && s.kind == client)
        .collect();
    let looked_up: Vec<String> = calls
        .iter()
        .filter_map(|c| c.attribute("url.full"))
        .collect();
    assert!(
        looked_up.iter().any(|u| u.contains("/internal/keys/")),
        "the key was looked up: {looked_up:?}"
    );
    for call in &calls {
        assert_eq!(call.parent_span_id, root.span_id, "{call:#?}");
        assert!(call.attribute("http.request.method").is_some(), "{call:#?}");
        assert_eq!(
            call.attribute("server.address").as_deref(),
            Some("127.0.0.1")
        );
        assert!(
            call.attribute("http.response.status_code").is_some(),
            "{call:#?}"
        );
        let answer = trace
            .iter()
            .find(|s| s.service == "control-plane" && s.parent_span_id == call.span_id)
            .unwrap_or_else(|| panic!("no control-plane span under {call:#?}\nin {trace:#?}"));
        assert_eq!(answer.kind, server, "{answer:#?}");
        assert!(
            answer
                .attribute("http.route")
                .is_some_and(|r| r.starts_with("/internal/")),
            "{answer:#?}"
        );
        assert_eq!(
            answer.name,
            format!(
                "{} {}",
                answer.attribute("http.request.method").unwrap(),
                answer.attribute("http.route").unwrap()
            )
        );
    }

    // Back to a cluster that exports nothing.
    restart_services(&[]).await;
}
