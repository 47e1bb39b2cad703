//! A webhook receiver on 127.0.0.1 for tests that follow deliveries across
//! a database move: it answers every request `200 ok` and keeps each
//! request's path and body, in arrival order.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request received.
#[derive(Debug, Clone)]
pub struct Hit {
    pub path: String,
    pub body: String,
}

#[derive(Clone)]
pub struct Receiver {
    pub base: String,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a local port");
        let base = format!("http://{}", listener.local_addr().expect("local address"));
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let kept = hits.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, kept.clone()));
            }
        });
        Receiver { base, hits }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.base)
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().expect("receiver lock").clone()
    }

    /// Waits (60 s bound) until a request body contains `needle`.
    pub async fn wait_for_body(&self, needle: &str) -> Hit {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(hit) = self.hits().into_iter().find(|h| h.body.contains(needle)) {
                return hit;
            }
            assert!(
                Instant::now() < deadline,
                "no delivery containing {needle:?} within 60 s ({} received)",
                self.hits().len()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// HTTP/1.1, one request after another on a connection.
async fn serve(mut socket: tokio::net::TcpStream, hits: Arc<Mutex<Vec<Hit>>>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let Some(end) = find(&buf, b"\r\n\r\n") else {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        let path = head
            .lines()
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .unwrap_or("")
            .to_owned();
        let len: usize = head
            .to_ascii_lowercase()
            .lines()
            .find_map(|l| l.strip_prefix("content-length:").map(str::to_owned))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < end + 4 + len {
            match socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
        buf.drain(..end + 4 + len);
        hits.lock().expect("receiver lock").push(Hit { path, body });
        if socket
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .await
            .is_err()
        {
            return;
        }
    }
}
