//! A real webhook receiver in the test process: an HTTP server on
//! 127.0.0.1 that records every request (headers and raw body) and answers
//! by the first segment of its path:
//!
//! * `/ok/..`: 200 `ok`;
//! * `/fail/..`: 500 `nope`;
//! * `/flaky/..`: 500 on the first request to that exact path, then 200;
//! * `/redirect/..`: 302 to `/ok/redirected`;
//! * `/hang/..`: never answers;
//! * `/gate/..`: hangs while the gate is closed, 200 once it is open;
//! * `/endless/..`: 200 with a body that never ends (`é` over and over).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tokio::sync::Notify;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Hit {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Hit {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// `X-Service-Delivery` split into delivery id and attempt.
    pub fn delivery(&self) -> (String, i32) {
        let (id, attempt) = self
            .header("x-service-delivery")
            .rsplit_once('.')
            .unwrap_or(("", "0"));
        (id.to_owned(), attempt.parse().unwrap_or(0))
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

#[derive(Default)]
struct Shared {
    hits: Mutex<Vec<Hit>>,
    seen_paths: Mutex<HashMap<String, usize>>,
    gate_open: AtomicBool,
    changed: Notify,
}

#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let state = shared.clone();
        let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            let state = state.clone();
            async move { answer(state, uri, headers, body).await }
        });
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver { addr, shared }
    }

    /// `http://127.0.0.1:<port>/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    pub fn open_gate(&self) {
        self.shared.gate_open.store(true, Ordering::SeqCst);
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.shared.hits.lock().unwrap().clone()
    }

    /// Requests whose path starts with `prefix`.
    pub fn hits_on(&self, prefix: &str) -> Vec<Hit> {
        self.hits()
            .into_iter()
            .filter(|h| h.path.starts_with(prefix))
            .collect()
    }

    /// Waits until `done` holds over the hits so far (panics after 60 s:
    /// a generous bound, not a timing assertion).
    pub async fn wait_until(&self, what: &str, done: impl Fn(&[Hit]) -> bool) -> Vec<Hit> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let changed = self.shared.changed.notified();
            let hits = self.hits();
            if done(&hits) {
                return hits;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "receiver: gave up waiting for {what}; hits: {hits:#?}"
            );
            let _ = tokio::time::timeout(left.min(Duration::from_millis(200)), changed).await;
        }
    }
}

async fn answer(shared: Arc<Shared>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    {
        let mut hits = shared.hits.lock().unwrap();
        hits.push(Hit {
            path: path.clone(),
            headers,
            body,
        });
    };
    shared.changed.notify_waiters();
    let kind = path.trim_start_matches('/').split('/').next().unwrap_or("");
    let response = match kind {
        "ok" => (StatusCode::OK, "ok").into_response(),
        "fail" => (StatusCode::INTERNAL_SERVER_ERROR, "nope").into_response(),
        "flaky" => {
            let seen = {
                let mut seen = shared.seen_paths.lock().unwrap();
                let n = seen.entry(path.clone()).or_default();
                *n += 1;
                *n
            };
            if seen == 1 {
                (StatusCode::INTERNAL_SERVER_ERROR, "first time fails").into_response()
            } else {
                (StatusCode::OK, "second time works").into_response()
            }
        }
        "redirect" => Response::builder()
            .status(StatusCode::FOUND)
            .header("location", "/ok/redirected")
            .body(Body::from("moved"))
            .unwrap(),
        "hang" => std::future::pending().await,
        "gate" => {
            while !shared.gate_open.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (StatusCode::OK, "through the gate").into_response()
        }
        "endless" => {
            let chunk = Bytes::from("é".repeat(1000));
            let stream = futures::stream::repeat_with(move || Ok::<_, Infallible>(chunk.clone()));
            Response::new(Body::from_stream(stream))
        }
        _ => (StatusCode::NOT_FOUND, "unknown receiver path").into_response(),
    };
    response
}
